/* The table of device memory the session owns.
 *
 * Every device pointer a client sends (a copy's source or destination, a
 * memset, a library's matrix, a scalar in device pointer mode) must lie in
 * memory this session was handed by the driver: without that check a
 * "device pointer" that is really an address inside the session process
 * turns cudaMemcpy into a read and write of the session's own memory.
 *
 * Ranges are half-open [base, base+size), kept sorted by base and never
 * overlapping (the driver hands out disjoint ranges; a VMM mapping lands
 * inside its reservation, which is the range recorded).  A lookup is one
 * binary search under a read lock: the session has a thread per client
 * thread, and allocations are rare next to the calls that name them. */
#include "owned.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct range {
    uint64_t base, size;
    uint64_t owner;
    uint8_t kind;
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct range *ranges;
static size_t nranges, cap;

/* Index of the last range with base <= p, or -1.  Caller holds the lock. */
static long floor_index(uint64_t p)
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

static int grow(void)
{
    size_t ncap = cap ? cap * 2 : 64;
    struct range *n = realloc(ranges, ncap * sizeof *n);
    if (!n)
        return -1;
    ranges = n;
    cap = ncap;
    return 0;
}

int owned_add(uint64_t base, uint64_t size, enum owned_kind kind, uint64_t owner)
{
    int rc = -1;
    if (!base || !size || base + size < base)
        return -1;
    pthread_rwlock_wrlock(&lock);
    long i = floor_index(base);
    /* A global asked for twice, or an address the driver reuses after a
     * free we did not see (a context reset): the newest record wins. */
    if (i >= 0 && ranges[i].base == base) {
        ranges[i] = (struct range){ base, size, owner, (uint8_t)kind };
        rc = 0;
        goto out;
    }
    if (nranges == cap && grow() < 0)
        goto out;
    size_t at = (size_t)(i + 1);
    memmove(&ranges[at + 1], &ranges[at], (nranges - at) * sizeof *ranges);
    ranges[at] = (struct range){ base, size, owner, (uint8_t)kind };
    nranges++;
    rc = 0;
out:
    pthread_rwlock_unlock(&lock);
    return rc;
}

static void remove_at(size_t i)
{
    memmove(&ranges[i], &ranges[i + 1], (nranges - i - 1) * sizeof *ranges);
    nranges--;
}

int owned_remove(uint64_t base)
{
    int rc = -1;
    pthread_rwlock_wrlock(&lock);
    long i = floor_index(base);
    if (i >= 0 && ranges[i].base == base) {
        remove_at((size_t)i);
        rc = 0;
    }
    pthread_rwlock_unlock(&lock);
    return rc;
}

int owned_take(uint64_t base, struct owned_entry *e)
{
    int rc = -1;
    pthread_rwlock_wrlock(&lock);
    long i = floor_index(base);
    if (i >= 0 && ranges[i].base == base) {
        *e = (struct owned_entry){ ranges[i].base, ranges[i].size, ranges[i].owner,
                                   (enum owned_kind)ranges[i].kind };
        remove_at((size_t)i);
        rc = 0;
    }
    pthread_rwlock_unlock(&lock);
    return rc;
}

int owned_restore(const struct owned_entry *e)
{
    return owned_add(e->base, e->size, e->kind, e->owner);
}

void owned_remove_owner(uint64_t owner)
{
    if (!owner)
        return;
    pthread_rwlock_wrlock(&lock);
    size_t k = 0;
    for (size_t i = 0; i < nranges; i++)
        if (ranges[i].owner != owner)
            ranges[k++] = ranges[i];
    nranges = k;
    pthread_rwlock_unlock(&lock);
}

void owned_clear(void)
{
    pthread_rwlock_wrlock(&lock);
    nranges = 0;
    pthread_rwlock_unlock(&lock);
}

int owned_range(uint64_t ptr, uint64_t len)
{
    if (!ptr)
        return 1;
    if (ptr + len < ptr)
        return 0;
    pthread_rwlock_rdlock(&lock);
    long i = floor_index(ptr);
    int ok = i >= 0 && ptr - ranges[i].base < ranges[i].size &&
             len <= ranges[i].size - (ptr - ranges[i].base);
    pthread_rwlock_unlock(&lock);
    return ok;
}

void owned_nearest(uint64_t ptr, uint64_t *base, uint64_t *size)
{
    pthread_rwlock_rdlock(&lock);
    long i = floor_index(ptr);
    *base = i >= 0 ? ranges[i].base : 0;
    *size = i >= 0 ? ranges[i].size : 0;
    pthread_rwlock_unlock(&lock);
}

int owned_extent_2d(uint64_t pitch, uint64_t width, uint64_t height, uint64_t *extent)
{
    *extent = 0;
    if (!width || !height)
        return 0;
    if (height > 1 && width > pitch)
        return -1;
    if (height - 1 > 0 && pitch > (UINT64_MAX - width) / (height - 1))
        return -1;
    *extent = pitch * (height - 1) + width;
    return 0;
}
