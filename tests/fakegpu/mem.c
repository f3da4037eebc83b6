// Fake device memory.
//
// Device addresses come from a large range of the daemon's address space that
// is reserved PROT_NONE and never made accessible, as CUDA's unified
// addressing reserves device ranges in every process.  So a device pointer
// can never be mistaken for a host buffer, and host code that dereferences
// one crashes as it would with a real GPU.  Each allocation is backed by its
// own anonymous host mapping (lazily committed, zero filled); lookups
// translate device addresses to it.
//
// Bounds are exact: touching one byte past an allocation faults, which is
// stricter than a GPU (it only faults outside mapped pages), like running
// under compute-sanitizer.
#include "fakegpu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARENA_MAX    (1ull << 40)   // device address space: 1 TiB...
#define ARENA_MIN    (2 * FG_TOTAL_MEM) // ...or less where that is refused
#define ALLOC_ALIGN  512ull         // cuMemAlloc alignment (CUDA promises 256)

// R_IMPORT: another process's allocation opened by cuIpcOpenMemHandle (ipc.c).
enum region_kind { R_ALLOC, R_GLOBAL, R_RESERVE, R_IMPORT };

struct phys {                       // a cuMemCreate handle
    CUmemGenericAllocationHandle handle;
    size_t size;
    unsigned char *host;
    unsigned refs;                  // the handle itself + each mapping
};

struct vmap {                       // a cuMemMap of a phys into a reservation
    CUdeviceptr va;
    size_t size;
    struct phys *ph;
    size_t offset;
    int access;                     // set by cuMemSetAccess
};

struct region {
    CUdeviceptr va;
    size_t size;
    enum region_kind kind;
    unsigned char *host;            // R_ALLOC, R_GLOBAL, R_IMPORT
    struct fg_ctx *owner;           // R_ALLOC, R_IMPORT
    char ipc_name[FG_IPC_NAME];     // R_ALLOC once exported: its shared object
    struct vmap *maps;              // R_RESERVE
    size_t nmaps;
};

static uintptr_t arena;
static size_t arena_size;
static struct region *regs;         // sorted by va, not overlapping
static size_t nregs, capregs;
static size_t used;                 // bytes of "device memory" in use
// The same per device: an allocation counts to its context's device (module
// globals and VMM memory to device 0).  Only NVML asks (fakegpu_memory_used).
static size_t used_on[FG_MAX_DEVICES];

static CUdevice device_of_owner(const struct fg_ctx *owner)
{
    return owner ? owner->device : 0;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Valgrind, for one, cannot map a terabyte: halve until it fits.
CUresult fg_mem_init(void)
{
    if (arena)
        return CUDA_SUCCESS;
    for (size_t size = ARENA_MAX; size >= ARENA_MIN; size /= 2) {
        void *p = mmap(NULL, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            arena = (uintptr_t)p;
            arena_size = size;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

int fg_mem_in_arena(uintptr_t p)
{
    return arena && p >= arena && p - arena < arena_size;
}

static unsigned char *host_map(size_t size)
{
    void *p = mmap(NULL, round_up(size, 4096), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void host_unmap(unsigned char *p, size_t size)
{
    if (p)
        munmap(p, round_up(size, 4096));
}

// ---- Region table ----------------------------------------------------------------

// Index of the last region with va <= p, or -1.
static long region_floor(CUdeviceptr p)
{
    size_t lo = 0, hi = nregs;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (regs[mid].va <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

static struct region *region_at(CUdeviceptr p)
{
    long i = region_floor(p);

    if (i < 0 || p - regs[i].va >= regs[i].size)
        return NULL;
    return &regs[i];
}

static int region_insert(const struct region *r)
{
    long i;

    if (nregs == capregs) {
        size_t cap = capregs ? capregs * 2 : 64;
        struct region *n = realloc(regs, cap * sizeof *n);
        if (!n)
            return -1;
        regs = n;
        capregs = cap;
    }
    i = region_floor(r->va) + 1;
    memmove(&regs[i + 1], &regs[i], (nregs - (size_t)i) * sizeof *regs);
    regs[i] = *r;
    nregs++;
    return 0;
}

static void region_remove(struct region *r)
{
    size_t i = (size_t)(r - regs);

    memmove(&regs[i], &regs[i + 1], (nregs - i - 1) * sizeof *regs);
    nregs--;
}

static int range_free(CUdeviceptr va, size_t size)
{
    long i = region_floor(va + size - 1);

    return i < 0 || regs[i].va + regs[i].size <= va;
}

// First fit in the arena; honours hint when it is free.
static CUdeviceptr va_find(size_t size, size_t align, CUdeviceptr hint)
{
    CUdeviceptr cur, end = arena + arena_size;

    if (size == 0 || size > arena_size)
        return 0;
    if (hint && hint % align == 0 && fg_mem_in_arena(hint) &&
        end - hint >= size && range_free(hint, size))
        return hint;
    cur = round_up(arena, align);
    for (size_t i = 0; i < nregs; i++) {
        if (regs[i].va >= cur && regs[i].va - cur >= size)
            return cur;
        if (regs[i].va + regs[i].size > cur)
            cur = round_up(regs[i].va + regs[i].size, align);
    }
    return end - cur >= size ? cur : 0;
}

// ---- Plain allocations -------------------------------------------------------------

static CUresult alloc_region(enum region_kind kind, struct fg_ctx *owner,
                             size_t size, CUdeviceptr *out)
{
    // Large allocations are 2 MiB aligned on a GPU; small ones 512 bytes.
    size_t align = size >= FG_GRANULARITY ? FG_GRANULARITY : ALLOC_ALIGN;
    size_t charged = round_up(size, ALLOC_ALIGN);
    struct region r = { .kind = kind, .owner = owner, .size = size };

    if (size == 0 || size > FG_TOTAL_MEM || used + charged > FG_TOTAL_MEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.va = va_find(round_up(size, ALLOC_ALIGN), align, 0);
    if (!r.va)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.host = host_map(size);
    if (!r.host)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (region_insert(&r) < 0) {
        host_unmap(r.host, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    used += charged;
    used_on[device_of_owner(owner)] += charged;
    *out = r.va;
    return CUDA_SUCCESS;
}

static void free_region(struct region *r)
{
    host_unmap(r->host, r->size);
    if (r->ipc_name[0])             // the exporter's free ends the object's name
        shm_unlink(r->ipc_name);
    if (r->kind != R_IMPORT) {      // an import is charged to its exporter
        used -= round_up(r->size, ALLOC_ALIGN);
        used_on[device_of_owner(r->owner)] -= round_up(r->size, ALLOC_ALIGN);
    }
    region_remove(r);
}

CUresult fg_mem_alloc(struct fg_ctx *owner, size_t size, CUdeviceptr *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_region(R_ALLOC, owner, size, out);
}

CUresult fg_mem_free(CUdeviceptr p)
{
    struct region *r = region_at(p);

    // Only the exact start of a cuMemAlloc'd block may be freed.
    if (!r || r->va != p || r->kind != R_ALLOC)
        return CUDA_ERROR_INVALID_VALUE;
    free_region(r);
    return CUDA_SUCCESS;
}

CUresult fg_mem_alloc_global(size_t size, const void *init, size_t init_size,
                             CUdeviceptr *out)
{
    CUresult r = alloc_region(R_GLOBAL, NULL, size ? size : 1, out);
    struct region *g;

    if (r != CUDA_SUCCESS)
        return r;
    g = region_at(*out);
    if (init)
        memcpy(g->host, init, init_size < size ? init_size : size);
    return CUDA_SUCCESS;
}

void fg_mem_free_global(CUdeviceptr p)
{
    struct region *r = region_at(p);

    if (r && r->va == p && r->kind == R_GLOBAL)
        free_region(r);
}

void fg_mem_release_owned(struct fg_ctx *owner)
{
    for (size_t i = nregs; i-- > 0;)
        if ((regs[i].kind == R_ALLOC || regs[i].kind == R_IMPORT) && regs[i].owner == owner)
            free_region(&regs[i]);
}

size_t fg_mem_used_on(CUdevice dev)
{
    return fg_device_valid(dev) ? used_on[dev] : 0;
}

struct fg_ctx *fg_mem_owner(CUdeviceptr p)
{
    struct region *r = region_at(p);
    return r && (r->kind == R_ALLOC || r->kind == R_IMPORT) ? r->owner : NULL;
}

void fg_mem_info(size_t *free_bytes, size_t *total)
{
    if (free_bytes)
        *free_bytes = FG_TOTAL_MEM - used;
    if (total)
        *total = FG_TOTAL_MEM;
}

// ---- Translation ----------------------------------------------------------------------

// ---- IPC: allocations backed by POSIX shared memory (ipc.c) ------------------------

// The host memory of an allocation moves into a shared-memory object the
// first time it is exported, so that another process can map the same
// bytes, as two processes on one GPU see one allocation.
CUresult fg_mem_export(CUdeviceptr p, char name[FG_IPC_NAME], uint64_t *size)
{
    static unsigned serial;
    struct region *r = region_at(p);
    void *shared;
    int fd;

    if (!r || r->va != p || r->kind != R_ALLOC)
        return CUDA_ERROR_INVALID_VALUE;
    if (!r->ipc_name[0]) {
        char nm[FG_IPC_NAME];
        snprintf(nm, sizeof nm, "/cuda.shm.fakegpu-%ld-%u", (long)getpid(), ++serial);
        fd = shm_open(nm, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0)
            return CUDA_ERROR_OPERATING_SYSTEM;
        shared = ftruncate(fd, (off_t)round_up(r->size, 4096)) == 0
                     ? mmap(NULL, round_up(r->size, 4096), PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0)
                     : MAP_FAILED;
        close(fd);
        if (shared == MAP_FAILED) {
            shm_unlink(nm);
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        memcpy(shared, r->host, r->size);
        host_unmap(r->host, r->size);
        r->host = shared;
        memcpy(r->ipc_name, nm, sizeof nm);
    }
    memcpy(name, r->ipc_name, FG_IPC_NAME);
    *size = r->size;
    return CUDA_SUCCESS;
}

CUresult fg_mem_import(struct fg_ctx *owner, const char *name, uint64_t size,
                       CUdeviceptr *out)
{
    struct region r = { .kind = R_IMPORT, .owner = owner, .size = size };
    struct stat st;
    int fd;

    if (size == 0 || size > FG_TOTAL_MEM)
        return CUDA_ERROR_INVALID_VALUE;
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)                     // gone (freed by its exporter) or never made
        return CUDA_ERROR_INVALID_VALUE;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < size) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    r.host = mmap(NULL, round_up(size, 4096), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r.host == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.va = va_find(round_up(size, ALLOC_ALIGN),
                   size >= FG_GRANULARITY ? FG_GRANULARITY : ALLOC_ALIGN, 0);
    if (!r.va || region_insert(&r) < 0) {
        host_unmap(r.host, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = r.va;
    return CUDA_SUCCESS;
}

CUresult fg_mem_close_import(CUdeviceptr p)
{
    struct region *r = region_at(p);

    if (!r || r->va != p || r->kind != R_IMPORT)
        return CUDA_ERROR_INVALID_VALUE;
    free_region(r);
    return CUDA_SUCCESS;
}

int fg_mem_range(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    struct region *r = region_at(p);

    if (!r || r->kind == R_RESERVE)
        return -1;
    *base = r->va;
    *size = r->size;
    return 0;
}

size_t fg_mem_span(CUdeviceptr p, unsigned char **host)
{
    struct region *r = region_at(p);

    if (!r)
        return 0;
    if (r->kind != R_RESERVE) {
        *host = r->host + (p - r->va);
        return r->size - (p - r->va);
    }
    for (size_t i = 0; i < r->nmaps; i++) {
        struct vmap *m = &r->maps[i];
        if (p >= m->va && p - m->va < m->size) {
            if (!m->access)
                return 0;
            *host = m->ph->host + m->offset + (p - m->va);
            return m->size - (p - m->va);
        }
    }
    return 0;
}

int fg_mem_valid(CUdeviceptr p, size_t n)
{
    unsigned char *h;

    if (p + n < p)
        return 0;
    while (n > 0) {
        size_t len = fg_mem_span(p, &h);
        if (len == 0)
            return 0;
        if (len >= n)
            return 1;
        p += len;
        n -= len;
    }
    return 1;
}

// Host address for p, and how many bytes from it may be used in one go.
static size_t side_span(uintptr_t p, int dev, size_t n, unsigned char **h)
{
    if (!dev) {
        *h = (unsigned char *)p;
        return n;
    }
    return fg_mem_span(p, h);
}

CUresult fg_copy(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev,
                 size_t n, int run)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if ((dst_dev && !fg_mem_valid(dst, n)) ||
        (src_dev && !fg_mem_valid(src, n)) || (!dst_dev && !dst) ||
        (!src_dev && !src))
        return CUDA_ERROR_INVALID_VALUE;
    while (run && n > 0) {
        unsigned char *d, *s;
        size_t len = side_span(dst, dst_dev, n, &d);
        size_t slen = side_span(src, src_dev, n, &s);

        if (slen < len)
            len = slen;
        if (len > n)
            len = n;
        memmove(d, s, len);     // overlapping device copies are undefined
        dst += len;             // in CUDA; memmove keeps them harmless
        src += len;
        n -= len;
    }
    return CUDA_SUCCESS;
}

CUresult fg_fill(CUdeviceptr p, uint32_t value, size_t elem_size, size_t count,
                 int run)
{
    size_t n = elem_size * count;
    unsigned char pattern[4];

    if (count == 0)
        return CUDA_SUCCESS;
    if (p % elem_size || count > SIZE_MAX / elem_size || !fg_mem_valid(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(pattern, &value, sizeof pattern);    // little endian: low bytes
    while (run && n > 0) {
        unsigned char *h;
        size_t len = fg_mem_span(p, &h);

        if (len > n)
            len = n;
        // Spans start on element boundaries: maps are 2 MiB aligned.
        if (elem_size == 1)
            memset(h, (int)(value & 0xff), len);
        else
            for (size_t i = 0; i < len; i += elem_size)
                memcpy(h + i, pattern, elem_size);
        p += len;
        n -= len;
    }
    return CUDA_SUCCESS;
}

// ---- Virtual memory management ----------------------------------------------------

static void phys_unref(struct phys *ph)
{
    if (--ph->refs == 0) {
        used -= ph->size;
        used_on[0] -= ph->size;
        host_unmap(ph->host, ph->size);
        free(ph);
    }
}

CUresult fg_vmm_create(size_t size, CUmemGenericAllocationHandle *out)
{
    struct phys *ph;

    if (size == 0 || size % FG_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > FG_TOTAL_MEM - used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ph = calloc(1, sizeof *ph);
    if (!ph)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ph->host = host_map(size);
    if (!ph->host) {
        free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->size = size;
    ph->refs = 1;
    ph->handle = fg_handle_new(FG_PHYS, ph, NULL);
    if (!ph->handle) {
        host_unmap(ph->host, size);
        free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    used += size;
    used_on[0] += size;
    *out = ph->handle;
    return CUDA_SUCCESS;
}

CUresult fg_vmm_release(CUmemGenericAllocationHandle h)
{
    struct phys *ph = fg_handle_get(h, FG_PHYS);

    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    // The memory lives on while mapped, as with CUDA.
    fg_handle_drop(h);
    phys_unref(ph);
    return CUDA_SUCCESS;
}

CUresult fg_vmm_reserve(size_t size, size_t align, CUdeviceptr hint,
                        CUdeviceptr *out)
{
    struct region r = { .kind = R_RESERVE, .size = size };

    if (align == 0)
        align = FG_GRANULARITY;
    if (size == 0 || size % FG_GRANULARITY || (align & (align - 1)) ||
        align % FG_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    r.va = va_find(size, align, hint);
    if (!r.va || region_insert(&r) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = r.va;
    return CUDA_SUCCESS;
}

CUresult fg_vmm_addr_free(CUdeviceptr p, size_t size)
{
    struct region *r = region_at(p);

    if (!r || r->kind != R_RESERVE || r->va != p || r->size != size)
        return CUDA_ERROR_INVALID_VALUE;
    // CUDA wants the range unmapped first; drop leftovers rather than leak.
    for (size_t i = 0; i < r->nmaps; i++)
        phys_unref(r->maps[i].ph);
    free(r->maps);
    region_remove(r);
    return CUDA_SUCCESS;
}

// The reservation that holds all of [p, p+size), or NULL.
static struct region *reservation(CUdeviceptr p, size_t size)
{
    struct region *r = region_at(p);

    if (!r || r->kind != R_RESERVE || size == 0 ||
        size > r->size - (p - r->va))
        return NULL;
    return r;
}

CUresult fg_vmm_map(CUdeviceptr p, size_t size, size_t offset,
                    CUmemGenericAllocationHandle h)
{
    struct region *r = reservation(p, size);
    struct phys *ph = fg_handle_get(h, FG_PHYS);
    struct vmap *maps;

    if (!ph)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!r || p % FG_GRANULARITY || size % FG_GRANULARITY ||
        offset % FG_GRANULARITY || offset > ph->size ||
        size > ph->size - offset)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < r->nmaps; i++)
        if (r->maps[i].va < p + size && p < r->maps[i].va + r->maps[i].size)
            return CUDA_ERROR_INVALID_VALUE;        // already mapped
    maps = realloc(r->maps, (r->nmaps + 1) * sizeof *maps);
    if (!maps)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r->maps = maps;
    r->maps[r->nmaps++] = (struct vmap){ p, size, ph, offset, 0 };
    ph->refs++;
    return CUDA_SUCCESS;
}

CUresult fg_vmm_unmap(CUdeviceptr p, size_t size)
{
    struct region *r = reservation(p, size);
    size_t hit = 0;

    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    // Every mapping touched must lie wholly inside the range.
    for (size_t i = 0; i < r->nmaps; i++) {
        struct vmap *m = &r->maps[i];
        if (m->va < p + size && p < m->va + m->size) {
            if (m->va < p || m->va + m->size > p + size)
                return CUDA_ERROR_INVALID_VALUE;
            hit++;
        }
    }
    if (!hit)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = r->nmaps; i-- > 0;) {
        struct vmap *m = &r->maps[i];
        if (m->va >= p && m->va < p + size) {
            phys_unref(m->ph);
            *m = r->maps[--r->nmaps];
        }
    }
    return CUDA_SUCCESS;
}

CUresult fg_vmm_set_access(CUdeviceptr p, size_t size, int access)
{
    struct region *r = reservation(p, size);
    size_t covered = 0;

    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < r->nmaps; i++) {
        struct vmap *m = &r->maps[i];
        if (m->va >= p && m->va + m->size <= p + size)
            covered += m->size;
    }
    // The whole range must be mapped.
    if (covered != size)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < r->nmaps; i++) {
        struct vmap *m = &r->maps[i];
        if (m->va >= p && m->va + m->size <= p + size)
            m->access = access;
    }
    return CUDA_SUCCESS;
}
