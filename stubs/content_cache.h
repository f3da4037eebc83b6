/* A bounded map from byte strings to what the client learnt about them,
 * least recently used first out.  cuBLASLt's stub keeps two: server-side
 * descriptors by content, and heuristic answers by their inputs
 * (stubs/cublasLt_desc.c, stubs/cublasLt_hand.c).
 *
 * Not locked: its owner holds its own lock around every call. */
#ifndef RGPU_CONTENT_CACHE_H
#define RGPU_CONTENT_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct cc_entry {
    struct cc_entry *next;      /* in its bucket */
    uint64_t hash;
    uint64_t last_use;
    unsigned pins;              /* in use: never chosen for eviction */
    uint64_t handle;            /* the owner's value ... */
    void *blob;                 /* ... and bytes (freed with the entry) */
    size_t blob_len;
    size_t key_len;
    unsigned char key[];
};

struct content_cache {
    struct cc_entry **buckets;
    size_t nbuckets, count, capacity;
    uint64_t clock;
};

/* 0, or -1 when out of memory. */
int cc_init(struct content_cache *c, size_t capacity);

/* The entry whose key is these bytes (marked as used now), or NULL. */
struct cc_entry *cc_find(struct content_cache *c, const void *key, size_t len);

/* A new entry for key (not looked for first), or NULL when out of memory.
 * The cache may then hold more than its capacity: see cc_evict. */
struct cc_entry *cc_insert(struct content_cache *c, const void *key, size_t len);

/* While the cache cannot take `room` more entries within its capacity,
 * unlink its least recently used unpinned entry and return it (the caller
 * frees it with cc_entry_free); NULL when there is room or every entry is
 * pinned. */
struct cc_entry *cc_evict(struct content_cache *c, size_t room);

/* Unlink every entry for which drop(entry, arg) is true and free it. */
void cc_drop_if(struct content_cache *c, int (*drop)(const struct cc_entry *, void *),
                void *arg);

void cc_entry_free(struct cc_entry *e);

#endif
