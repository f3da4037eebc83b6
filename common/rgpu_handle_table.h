/* A set of library handles keyed by (class, value), each with one word of
 * facts (rgpu_handle_table.c).  rgpud keeps the handles a session may name
 * in one (daemon/owned_handles.c); the client core keeps the handles this
 * process was handed in another, so that a call that goes without waiting
 * can still fail at once on a handle it never had
 * (common/rgpu_client_handles.c).
 *
 * Open addressing with linear probing and backward-shift deletion, so
 * removals leave no tombstones and a lookup is one short probe run; grown
 * at half load; one mutex. */
#ifndef RGPU_HANDLE_TABLE_H
#define RGPU_HANDLE_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct rgpu_handle_slot {
    uint64_t h;         /* 0: empty (NULL is never stored) */
    uint64_t value;     /* what a client-named handle stands for (rgpu_htab_insert) */
    uint32_t cls;
    uint32_t refs;      /* times handed out, for shared classes */
    uint32_t info;      /* what the owner records about it (event flags...) */
};

struct rgpu_handle_table {
    pthread_mutex_t lock;
    struct rgpu_handle_slot *tab;
    size_t cap, used;   /* cap: a power of two, or 0 */
    /* Classes whose library hands the same handle to every creator and
     * counts them (one destroy per create); NULL: none. */
    int (*shared)(uint32_t cls);
};

#define RGPU_HANDLE_TABLE_INIT(shared_fn) { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, shared_fn }

/* Record h (not NULL) of class cls with info (a shared class counts one
 * more reference; info is replaced).  -1 when out of memory. */
int rgpu_htab_add(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t info);
/* Drop one reference to h; the last one forgets it. */
void rgpu_htab_remove(struct rgpu_handle_table *t, uint32_t cls, uint64_t h);
/* 1 with *info set (info may be NULL) when h is held, else 0. */
int rgpu_htab_get(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t *info);
size_t rgpu_htab_count(struct rgpu_handle_table *t);

/* Handles that stand for something else (the real handle behind a name the
 * client chose: daemon/owned_handles.c, "named handles"), with their info
 * word.  Insert: 0 added, 1 h was there already (left as it was), -1 out
 * of memory.  Find: 1 with *value and *info set (either may be NULL).
 * Set_info: 1 when h was there.  Take: as find, and forgets h whatever its
 * references. */
int rgpu_htab_insert(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t value,
                     uint32_t info);
int rgpu_htab_find(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t *value,
                   uint32_t *info);
int rgpu_htab_set_info(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t info);
int rgpu_htab_take(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t *value,
                   uint32_t *info);

/* What both ends know about handle classes (rgpu_handles.h ids). */
/* cuBLASLt: one handle per device for every creator, counted (the shared
 * classes of RGPU_HANDLE_TABLE_INIT). */
int rgpu_handle_shared(uint32_t cls);
/* h is one of the streams CUDA defines without creating them: NULL, the
 * legacy and the per-thread default streams. */
int rgpu_handle_default_stream(uint32_t cls, uint64_t h);
/* The class whose handles may also stand for a cls handle, or 0: a cuBLAS
 * handle for a cuBLASLt one (NVIDIA documents the cast; PyTorch does it). */
uint32_t rgpu_handle_alias(uint32_t cls);

#endif
