#include "client_ranges.h"
#include "rgpu_client.h"
#include "rgpu_log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct range {
    uint64_t base;
    size_t size;
    int kind;
    int device;                 /* -1: not known yet */
    /* Device memory: the whole pages of it reserved in this process (none
     * when lo == hi), so that no host allocation of the program lands on a
     * device address (below). */
    uint64_t reserved_lo, reserved_hi;
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct range *ranges;    /* sorted by base, non-overlapping */
static size_t count, cap;
static int pinned;              /* ranges of kind RGPU_RANGE_PINNED, read without the lock */

/* ---- device addresses are not host addresses ----------------------------------- */

/* Unified addressing promises that no host pointer of the process equals a
 * device pointer: the driver reserves device memory's virtual addresses in
 * the process, so malloc and mmap never hand them out, and CUDA (XLA's
 * allocator, pointer attributes, rgpu's own look-ups here) tells host from
 * device memory by the address alone.  Device memory here lives in rgpud's
 * process, whose addresses this process knows nothing of, so its ranges
 * are reserved here the same way: the whole pages inside each (the partial
 * pages at its ends may hold another allocation of the GPU's, mapped or
 * managed memory that rgpu_mapped.c maps at its own address).  Where this
 * process already has something, the two cannot be told apart: said once. */
static void reserve(struct range *r)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
    uint64_t lo = (r->base + page - 1) / page * page, hi = (r->base + r->size) / page * page;
    r->reserved_lo = r->reserved_hi = 0;
    if (lo >= hi || r->base + r->size < r->base)
        return;
    void *want = (void *)(uintptr_t)lo;
    /* MAP_FIXED_NOREPLACE fails where anything is mapped already; a kernel
     * older than 4.17 takes it as a hint, so the address is checked too. */
    void *p = mmap(want, hi - lo, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == want) {
        r->reserved_lo = lo;
        r->reserved_hi = hi;
        return;
    }
    if (p != MAP_FAILED)
        munmap(p, hi - lo);
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        rgpu_log_init("rgpu", getenv("RGPU_LOG"));
        rgpu_warn("device memory at %#llx (%zu bytes) overlaps this process's own memory: "
                  "pointers there are taken for device memory (further overlaps in the "
                  "debug log)", (unsigned long long)r->base, r->size);
    } else {
        rgpu_debug("device memory at %#llx (%zu bytes) overlaps this process's own memory",
                   (unsigned long long)r->base, r->size);
    }
}

static void unreserve(const struct range *r)
{
    if (r->reserved_lo < r->reserved_hi)
        munmap((void *)(uintptr_t)r->reserved_lo, r->reserved_hi - r->reserved_lo);
}

/* ---- the table --------------------------------------------------------------------- */

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
    ranges[i].reserved_lo = ranges[i].reserved_hi = 0;
    if (kind == RGPU_RANGE_DEVICE)
        reserve(&ranges[i]);
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
        unreserve(&ranges[i - 1]);
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
