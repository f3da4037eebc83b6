/* Mapped (zero-copy) host memory and managed memory, kept coherent at the
 * points where CUDA makes them coherent on a device without concurrent
 * managed access (docs/architecture.md, "Mapped and managed memory").
 *
 * Each range has three copies: the GPU's (device memory on the server,
 * which kernels use), the program's (client memory, at the same address
 * where it could be had) and a shadow of the program's as the GPU last
 * saw it.  Before any request leaves the client, the bytes where the
 * program's copy differs from the shadow go to the GPU (host-to-device
 * copies without replies, ahead of the request, so the server runs them
 * first); after a call that synchronises with the GPU, and before a host
 * function runs, the bytes where the GPU's copy differs from the shadow
 * come back into the program's and the shadow.  Bytes, not pages: the
 * buffers a host allocator cuts from one pinned allocation share pages,
 * and what the GPU wrote into one must survive what the program wrote
 * into its neighbour.  These copies are rgpu's own rgpu_shared_htod and
 * rgpu_shared_dtoh (codegen/rgpu_own.h), on a stream of the session's own
 * (daemon/hand_cuda.c), never behind the program's work.  Comparing against a
 * shadow, rather than write-protecting pages and catching faults, keeps
 * writes the kernel makes for the program (read(2) into the buffer, a
 * library's memcpy) visible without a signal handler and without
 * EFAULT from system calls; it costs a second copy of each range in
 * client memory and a comparison per request while ranges exist.
 *
 * A process without such ranges pays one relaxed atomic load per request. */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "rgpu_log.h"
#include "rgpu_procs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct mapped {
    uint64_t host, dev;         /* the program's address, the GPU's */
    size_t size;
    unsigned char *shadow;      /* the program's bytes as the GPU last saw them */
    int flags;                  /* RGPU_MAPPED_* */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapped *ranges;
static size_t nranges, cap;
static int active;              /* nranges != 0, read without the lock */
static int gpu_may_have_written; /* a request went since the last pull */
static _Thread_local int inside; /* this thread is moving mapped bytes */

static size_t page_size(void)
{
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

int rgpu_mapped_active(void)
{
    return __atomic_load_n(&active, __ATOMIC_RELAXED);
}

static struct mapped *find_locked(uint64_t p, int by_dev)
{
    for (size_t i = 0; i < nranges; i++) {
        uint64_t base = by_dev ? ranges[i].dev : ranges[i].host;
        if (p >= base && p - base < ranges[i].size)
            return &ranges[i];
    }
    return NULL;
}

int rgpu_mapped_find(uint64_t p, int by_dev, uint64_t *host, uint64_t *dev, size_t *size,
                     int *flags)
{
    if (!rgpu_mapped_active())
        return 0;
    pthread_mutex_lock(&lock);
    struct mapped *m = find_locked(p, by_dev);
    if (m) {
        if (host)
            *host = m->host;
        if (dev)
            *dev = m->dev;
        if (size)
            *size = m->size;
        if (flags)
            *flags = m->flags;
    }
    pthread_mutex_unlock(&lock);
    return m != NULL;
}

uint64_t rgpu_mapped_gpu_copy(uint64_t p, size_t count)
{
    uint64_t host, dev;
    size_t size;
    if (!count || !rgpu_mapped_find(p, 0, &host, &dev, &size, NULL) || count > size - (p - host))
        return 0;
    return dev + (p - host);
}

/* Bytes that differ between two copies are found a block at a time. */
#define COMPARE_BLOCK 64
/* Changed bytes closer than this go in one copy to the GPU: a program
 * rewriting an array sends one run, not one per byte that kept its value.
 * What the GPU writes into shared memory between two synchronisations
 * (a memset, a copy, a kernel's output) is a buffer of its own, further
 * than this from the program's, so the gap never carries stale bytes
 * over the GPU's. */
#define PUSH_GAP 16

/* The first offset from off on where a and b differ, or size. */
static size_t next_change(const unsigned char *a, const unsigned char *b, size_t off,
                          size_t size)
{
    while (off < size) {
        size_t n = size - off < COMPARE_BLOCK ? size - off : COMPARE_BLOCK;
        if (memcmp(a + off, b + off, n) != 0) {
            while (a[off] == b[off])
                off++;
            return off;
        }
        off += n;
    }
    return size;
}

/* Where the changed run starting at off (a[off] != b[off]) ends: at the
 * first gap of `gap` bytes that agree, or at size. */
static size_t run_end(const unsigned char *a, const unsigned char *b, size_t off, size_t size,
                      size_t gap)
{
    size_t end = off + 1;
    for (size_t i = end; i < size && i - end < gap; i++)
        if (a[i] != b[i])
            end = i + 1;
    return end;
}

/* Send [off, off+len) of m from the program's copy to the GPU's, without
 * waiting (a failure is reported by the next call that waits).  The shadow
 * takes the bytes first and they go from there, so the GPU gets exactly
 * what the shadow records, even when another thread writes the program's
 * copy meanwhile (that write differs from the shadow, and goes next time). */
static void push_run(struct mapped *m, size_t off, size_t len)
{
    memcpy(m->shadow + off, (const char *)(uintptr_t)m->host + off, len);
    int rc = rgpu_copy_to_device(&rgpu_rgpu_lib, RGPU_RGPU_rgpu_shared_htod, m->dev + off,
                                 m->shadow + off, len, 0, 0);
    if (rc != 0)
        rgpu_debug("mapped memory at %#llx: push of %zu bytes failed (%d)",
                   (unsigned long long)m->host + off, len, rc);
}

/* The bytes of m that the program changed since the GPU last saw them, as
 * runs: only those reach the GPU's copy, so that what the GPU wrote beside
 * them in the same page (another buffer cut from the same allocation)
 * stays. */
static void push_range(struct mapped *m)
{
    const unsigned char *cur = (const unsigned char *)(uintptr_t)m->host;
    size_t off = 0;
    while ((off = next_change(cur, m->shadow, off, m->size)) < m->size) {
        size_t end = run_end(cur, m->shadow, off, m->size, PUSH_GAP);
        push_run(m, off, end - off);
        off = end;
    }
}

void rgpu_mapped_before_request(uint32_t proc_id)
{
    if (inside || proc_id == RGPU_RGPU_rgpu_fence->id)
        return;
    inside = 1;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nranges; i++)
        push_range(&ranges[i]);
    gpu_may_have_written = 1;
    pthread_mutex_unlock(&lock);
    inside = 0;
}

/* The GPU's copy of m comes back; the bytes where it differs from the
 * shadow (what the GPU last got from the program) are the GPU's writes,
 * and only those replace the program's: bytes the GPU left alone keep
 * whatever the program wrote since, even from another thread during the
 * synchronisation, in the same page too (they go to the GPU with the next
 * request). */
static void pull_range(struct mapped *m)
{
    unsigned char *gpu = malloc(m->size);
    if (!gpu) {
        rgpu_warn("mapped memory at %#llx: no memory to bring the GPU's copy back",
                  (unsigned long long)m->host);
        return;
    }
    int rc = rgpu_copy_to_host(&rgpu_rgpu_lib, RGPU_RGPU_rgpu_shared_dtoh, gpu, m->dev, m->size,
                               0);
    if (rc != 0) {
        rgpu_debug("mapped memory at %#llx: pull failed (%d)", (unsigned long long)m->host, rc);
        free(gpu);
        return;
    }
    unsigned char *cur = (unsigned char *)(uintptr_t)m->host;
    size_t off = 0;
    while ((off = next_change(gpu, m->shadow, off, m->size)) < m->size) {
        size_t end = run_end(gpu, m->shadow, off, m->size, 1);
        memcpy(cur + off, gpu + off, end - off);
        memcpy(m->shadow + off, gpu + off, end - off);
        off = end;
    }
    free(gpu);
}

void rgpu_mapped_after_sync(void)
{
    if (inside || !rgpu_mapped_active())
        return;
    inside = 1;
    pthread_mutex_lock(&lock);
    if (gpu_may_have_written) {
        for (size_t i = 0; i < nranges; i++)
            pull_range(&ranges[i]);
        gpu_may_have_written = 0;
    }
    pthread_mutex_unlock(&lock);
    inside = 0;
}

/* Whether a generated call that waited is a synchronisation after which
 * the program may read what the GPU wrote (by its name: they are few). */
static int synchronises(const char *name)
{
    static const char *const names[] = {
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
        "cudaStreamQuery", "cudaEventQuery", "cuCtxSynchronize", "cuStreamSynchronize",
        "cuEventSynchronize", "cuStreamQuery", "cuEventQuery",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(name, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

/* A device reset freed every GPU copy (and, natively, the managed and
 * pinned memory itself): the ranges are forgotten, so that nothing is
 * pushed into memory the session no longer owns.  The program's copies
 * stay mapped: a program that still touches them reads stale bytes
 * rather than crashing in rgpu. */
static void forget_all(void)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nranges; i++) {
        rgpu_ranges_remove(ranges[i].host);
        if (ranges[i].dev != ranges[i].host)
            rgpu_ranges_remove(ranges[i].dev);
        free(ranges[i].shadow);
    }
    nranges = 0;
    __atomic_store_n(&active, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

static int resets(const char *name)
{
    return strcmp(name, "cudaDeviceReset") == 0 ||
           strncmp(name, "cuDevicePrimaryCtxReset", strlen("cuDevicePrimaryCtxReset")) == 0;
}

void rgpu_mapped_after_call(const char *name, int status)
{
    if (status != 0 || !rgpu_mapped_active())
        return;
    if (synchronises(name))
        rgpu_mapped_after_sync();
    else if (resets(name))
        forget_all();
}

int rgpu_mapped_add(uint64_t host, uint64_t dev, size_t size, int flags)
{
    struct mapped m = { .host = host, .dev = dev, .size = size, .flags = flags };
    if (!size)
        return -1;
    /* Fresh memory the client mapped is zeros on both sides (the stub
     * zeroes the GPU's copy); the program's own memory is pushed whole
     * by the first push: a shadow unlike it in every byte. */
    m.shadow = flags & RGPU_MAPPED_OWN_HOST ? calloc(1, size) : malloc(size);
    if (!m.shadow)
        return -1;
    if (!(flags & RGPU_MAPPED_OWN_HOST)) {
        memcpy(m.shadow, (const void *)(uintptr_t)host, size);
        for (size_t i = 0; i < size; i++)
            m.shadow[i] = (unsigned char)~m.shadow[i];
    }
    pthread_mutex_lock(&lock);
    if (nranges == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        struct mapped *n = realloc(ranges, ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&lock);
            free(m.shadow);
            return -1;
        }
        ranges = n;
        cap = ncap;
    }
    ranges[nranges++] = m;
    __atomic_store_n(&active, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return 0;
}

int rgpu_mapped_remove(uint64_t p, int by_dev, uint64_t *host, uint64_t *dev, size_t *size,
                       int *flags)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nranges; i++) {
        if ((by_dev ? ranges[i].dev : ranges[i].host) != p)
            continue;
        if (host)
            *host = ranges[i].host;
        if (dev)
            *dev = ranges[i].dev;
        if (size)
            *size = ranges[i].size;
        if (flags)
            *flags = ranges[i].flags;
        free(ranges[i].shadow);
        ranges[i] = ranges[--nranges];
        found = 1;
        break;
    }
    __atomic_store_n(&active, nranges != 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return found;
}

void rgpu_mapped_wrote(uint64_t dev, const void *src, size_t count)
{
    if (!rgpu_mapped_active())
        return;
    pthread_mutex_lock(&lock);
    struct mapped *m = find_locked(dev, 1);
    if (m) {
        size_t off = dev - m->dev;
        size_t n = count < m->size - off ? count : m->size - off;
        memmove((char *)(uintptr_t)m->host + off, src, n);
        memcpy(m->shadow + off, (const char *)(uintptr_t)m->host + off, n);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- the program's copy --------------------------------------------------------- */

static size_t whole_pages(size_t size)
{
    size_t ps = page_size();
    return (size + ps - 1) / ps * ps;
}

/* Allocations on the GPU are only 256-byte aligned: two small ones may
 * share a client page.  The program's copies of ranges the client mapped
 * (RGPU_MAPPED_OWN_HOST) are the pages their bytes touch; a page another
 * such range touches is mapped already and stays mapped while one does.
 * Only a range's first and last page can be shared (ranges never
 * overlap).  Caller holds the lock. */
static int page_in_use_locked(uint64_t page, uint64_t except)
{
    size_t ps = page_size();
    for (size_t i = 0; i < nranges; i++) {
        const struct mapped *m = &ranges[i];
        if (!(m->flags & RGPU_MAPPED_OWN_HOST) || m->host == except)
            continue;
        uint64_t lo = m->host / ps * ps, hi = (m->host + m->size + ps - 1) / ps * ps;
        if (page >= lo && page < hi)
            return 1;
    }
    return 0;
}

/* The pages [*lo, *hi) that [addr, addr+size) alone touches. */
static void own_pages_locked(uint64_t addr, size_t size, uint64_t *lo, uint64_t *hi)
{
    size_t ps = page_size();
    *lo = addr / ps * ps;
    *hi = (addr + size + ps - 1) / ps * ps;
    if (page_in_use_locked(*lo, addr))
        *lo += ps;
    if (*hi > *lo && page_in_use_locked(*hi - ps, addr))
        *hi -= ps;
}

int rgpu_mapped_map_at(uint64_t addr, size_t size)
{
    uint64_t lo, hi;
    int rc = 0;
    if (!size || addr + size < addr)
        return -1;
    pthread_mutex_lock(&lock);
    own_pages_locked(addr, size, &lo, &hi);
    if (lo < hi) {
        /* MAP_FIXED_NOREPLACE fails where anything is mapped already; a
         * kernel older than 4.17 ignores the flag and takes it as a hint,
         * so the address is checked too. */
        void *want = (void *)(uintptr_t)lo;
        void *p = mmap(want, hi - lo, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != MAP_FAILED && p != want)
            munmap(p, hi - lo);
        rc = p == want ? 0 : -1;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void *rgpu_mapped_map_anywhere(size_t size)
{
    void *p = mmap(NULL, whole_pages(size ? size : 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void rgpu_mapped_unmap(uint64_t addr, size_t size)
{
    uint64_t lo, hi;
    pthread_mutex_lock(&lock);
    own_pages_locked(addr, size ? size : 1, &lo, &hi);
    if (lo < hi)
        munmap((void *)(uintptr_t)lo, hi - lo);
    pthread_mutex_unlock(&lock);
}

int rgpu_mapped_release(uint64_t p, int by_dev, uint64_t *dev_out)
{
    uint64_t host, dev;
    size_t size;
    int flags;
    if (!p || !rgpu_mapped_active() || !rgpu_mapped_remove(p, by_dev, &host, &dev, &size, &flags))
        return 0;
    rgpu_ranges_remove(host);
    if (dev != host)
        rgpu_ranges_remove(dev);
    if (flags & RGPU_MAPPED_OWN_HOST)
        rgpu_mapped_unmap(host, size);
    if (dev_out)
        *dev_out = dev;
    return 1;
}

/* ---- what the program is told about the device -------------------------------- */

int rgpu_mapped_device_attr(int attribute, int value)
{
    switch (attribute) {
    case 88:    /* PAGEABLE_MEMORY_ACCESS: no GPU reaches the client's pageable memory */
    case 89:    /* CONCURRENT_MANAGED_ACCESS: managed memory is coherent at synchronisations */
    case 91:    /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: registered memory's GPU copy
                   lies elsewhere (cuMemHostGetDevicePointer) */
    case 100:   /* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
    case 101:   /* DIRECT_MANAGED_MEM_ACCESS_FROM_HOST */
        return 0;
    default:
        return value;
    }
}

/* ---- pinned memory that device calls name --------------------------------------- */

static struct {
    const struct rgpu_lib *lib;
    rgpu_pinned_mapper fn;
} mappers[4];

void rgpu_mapped_register_pinned_mapper(const struct rgpu_lib *lib, rgpu_pinned_mapper fn)
{
    for (size_t i = 0; i < sizeof mappers / sizeof mappers[0]; i++) {
        if (!mappers[i].fn || mappers[i].lib == lib) {
            mappers[i].lib = lib;
            mappers[i].fn = fn;
            return;
        }
    }
}

/* Give the pinned range holding p a GPU copy through lib's stub, or any
 * stub's (a cuBLAS call naming pinned memory): 1 when it has one now. */
static int map_pinned(const struct rgpu_lib *lib, uint64_t p)
{
    rgpu_pinned_mapper fn = NULL;
    for (size_t i = 0; i < sizeof mappers / sizeof mappers[0] && mappers[i].fn; i++)
        if (!fn || mappers[i].lib == lib)
            fn = mappers[i].fn;
    return fn && fn(p);
}

uint64_t rgpu_mapped_pinned_to_device(const struct rgpu_lib *lib, uint64_t p)
{
    uint64_t host, dev;
    if (!p || rgpu_ranges_find(p, NULL, NULL) != RGPU_RANGE_PINNED)
        return 0;
    if (!rgpu_mapped_find(p, 0, &host, &dev, NULL, NULL) &&
        !(map_pinned(lib, p) && rgpu_mapped_find(p, 0, &host, &dev, NULL, NULL)))
        return 0;
    return dev + (p - host);
}

int rgpu_mapped_translate_devptrs(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                  const void *const *argv, const void **out, uint64_t *values)
{
    int changed = 0;
    for (unsigned i = 0; i < proc->nparams; i++) {
        out[i] = argv[i];
        if (proc->params[i].kind != RGPU_DEVPTR || !argv[i])
            continue;
        uint64_t dev = rgpu_mapped_pinned_to_device(lib, *(const uint64_t *)argv[i]);
        if (!dev)
            continue;
        values[i] = dev;
        out[i] = &values[i];
        changed = 1;
    }
    return changed;
}

/* ---- what the runtime and driver stubs share ------------------------------------------ */

uint64_t rgpu_mapped_place(uint64_t dev, size_t size, const char *what)
{
    if (rgpu_mapped_map_at(dev, size) == 0)
        return dev;
    uint64_t host = (uint64_t)(uintptr_t)rgpu_mapped_map_anywhere(size);
    rgpu_debug("%s: %#llx is taken on the client: the host copy is at %#llx", what,
               (unsigned long long)dev, (unsigned long long)host);
    return host;
}

int rgpu_mapped_share(uint64_t host, uint64_t dev, size_t size, int flags, int host_kind)
{
    if (rgpu_mapped_add(host, dev, size, flags) < 0)
        return -1;
    if (host != dev)
        rgpu_ranges_add(dev, size, RGPU_RANGE_MAPPED);
    rgpu_ranges_add(host, size, host != dev ? host_kind : RGPU_RANGE_MAPPED);
    return 0;
}
