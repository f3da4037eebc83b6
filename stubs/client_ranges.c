#include "client_ranges.h"
#include "rgpu_client.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct range {
    uint64_t base;
    size_t size;
    int kind;
    int device;                 /* -1: not known yet */
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct range *ranges;    /* sorted by base, non-overlapping */
static size_t count, cap;
static int pinned;              /* ranges of kind RGPU_RANGE_PINNED, read without the lock */

static size_t lower_bound(uint64_t p)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;      /* first range with base > p */
}

RGPU_EXPORT void rgpu_ranges_add(uint64_t base, size_t size, int kind)
{
    rgpu_ranges_add_on(base, size, kind, -1);
}

RGPU_EXPORT void rgpu_ranges_add_on(uint64_t base, size_t size, int kind, int device)
{
    pthread_rwlock_wrlock(&lock);
    if (count == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        struct range *n = realloc(ranges, ncap * sizeof *n);
        if (!n) {
            pthread_rwlock_unlock(&lock);
            return;     /* only cudaMemcpyDefault loses its guess */
        }
        ranges = n;
        cap = ncap;
    }
    size_t i = lower_bound(base);
    memmove(&ranges[i + 1], &ranges[i], (count - i) * sizeof *ranges);
    ranges[i].base = base;
    ranges[i].size = size ? size : 1;
    ranges[i].kind = kind;
    ranges[i].device = device;
    count++;
    if (kind == RGPU_RANGE_PINNED)
        __atomic_add_fetch(&pinned, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&lock);
}

RGPU_EXPORT void rgpu_ranges_remove(uint64_t base)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = lower_bound(base);
    if (i > 0 && ranges[i - 1].base == base) {
        if (ranges[i - 1].kind == RGPU_RANGE_PINNED)
            __atomic_sub_fetch(&pinned, 1, __ATOMIC_RELAXED);
        memmove(&ranges[i - 1], &ranges[i], (count - i) * sizeof *ranges);
        count--;
    }
    pthread_rwlock_unlock(&lock);
}

RGPU_EXPORT int rgpu_ranges_find(uint64_t p, uint64_t *base, size_t *size)
{
    int found = 0;
    pthread_rwlock_rdlock(&lock);
    size_t i = lower_bound(p);
    if (i > 0 && p - ranges[i - 1].base < ranges[i - 1].size) {
        found = ranges[i - 1].kind;
        if (base)
            *base = ranges[i - 1].base;
        if (size)
            *size = ranges[i - 1].size;
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

RGPU_EXPORT int rgpu_ranges_device(uint64_t p)
{
    int device = -1;
    pthread_rwlock_rdlock(&lock);
    size_t i = lower_bound(p);
    if (i > 0 && p - ranges[i - 1].base < ranges[i - 1].size)
        device = ranges[i - 1].device;
    pthread_rwlock_unlock(&lock);
    return device;
}

RGPU_EXPORT void rgpu_ranges_set_device(uint64_t base, int device)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = lower_bound(base);
    if (i > 0 && ranges[i - 1].base == base)
        ranges[i - 1].device = device;
    pthread_rwlock_unlock(&lock);
}

RGPU_EXPORT int rgpu_ranges_any_pinned(void)
{
    return __atomic_load_n(&pinned, __ATOMIC_RELAXED) != 0;
}
