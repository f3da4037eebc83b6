/* A bounded LRU map from byte strings (see content_cache.h). */
#include "content_cache.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a: keys are a few hundred bytes at most. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int cc_init(struct content_cache *c, size_t capacity)
{
    memset(c, 0, sizeof *c);
    c->nbuckets = 2 * capacity + 1;
    c->capacity = capacity;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    return c->buckets ? 0 : -1;
}

struct cc_entry *cc_find(struct content_cache *c, const void *key, size_t len)
{
    uint64_t h = hash_bytes(key, len);
    for (struct cc_entry *e = c->buckets[h % c->nbuckets]; e; e = e->next) {
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
            e->last_use = ++c->clock;
            return e;
        }
    }
    return NULL;
}

struct cc_entry *cc_insert(struct content_cache *c, const void *key, size_t len)
{
    struct cc_entry *e = calloc(1, sizeof *e + len);
    if (!e)
        return NULL;
    e->hash = hash_bytes(key, len);
    e->key_len = len;
    memcpy(e->key, key, len);
    e->last_use = ++c->clock;
    struct cc_entry **b = &c->buckets[e->hash % c->nbuckets];
    e->next = *b;
    *b = e;
    c->count++;
    return e;
}

static void unlink_entry(struct content_cache *c, struct cc_entry *victim)
{
    for (struct cc_entry **p = &c->buckets[victim->hash % c->nbuckets]; *p; p = &(*p)->next) {
        if (*p == victim) {
            *p = victim->next;
            c->count--;
            return;
        }
    }
}

/* Linear in the size of the cache, but only ever run when something new
 * was just learnt from the server, which costs far more. */
struct cc_entry *cc_evict(struct content_cache *c, size_t room)
{
    struct cc_entry *oldest = NULL;
    if (c->count + room <= c->capacity)
        return NULL;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (struct cc_entry *e = c->buckets[i]; e; e = e->next)
            if (!e->pins && (!oldest || e->last_use < oldest->last_use))
                oldest = e;
    if (oldest)
        unlink_entry(c, oldest);
    return oldest;
}

void cc_drop_if(struct content_cache *c, int (*drop)(const struct cc_entry *, void *), void *arg)
{
    for (size_t i = 0; i < c->nbuckets; i++) {
        struct cc_entry **p = &c->buckets[i];
        while (*p) {
            struct cc_entry *e = *p;
            if (drop(e, arg)) {
                *p = e->next;
                c->count--;
                cc_entry_free(e);
            } else {
                p = &e->next;
            }
        }
    }
}

void cc_entry_free(struct cc_entry *e)
{
    if (e)
        free(e->blob);
    free(e);
}
