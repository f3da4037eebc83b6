// Fake libcuda.so.1: the lock, handles, initialisation, the device and its
// contexts.
#include "fakegpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTX_STACK_MAX 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void fg_lock(void) { pthread_mutex_lock(&lock); }
void fg_unlock(void) { pthread_mutex_unlock(&lock); }
void fg_wait(pthread_cond_t *cv) { pthread_cond_wait(cv, &lock); }

// ---- Handles ----------------------------------------------------------------------------
//
// handle = 0xFA << 56 | kind << 48 | generation << 32 | slot index

#define HANDLE_TAG 0xFAull
#define NO_SLOT    UINT32_MAX

struct slot {
    void *obj;                  // NULL when free
    struct fg_ctx *owner;
    uint16_t gen;
    uint8_t kind;
    uint32_t next_free;
};

static struct slot *slots;
static uint32_t nslots, capslots, free_head = NO_SLOT;

// FAKEGPU_REUSE_HANDLES=1: a freed handle's value comes back, unchanged,
// for the next object of its kind (the most recently freed first), as
// NVIDIA's driver hands out the addresses of freed objects again.  By
// default every new handle differs from all earlier ones, so that a stale
// handle is always caught.
#define KINDS 16
static uint32_t reuse_top[KINDS];       // slot index + 1 of the last freed; 0: none

static int reuse_handles(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("FAKEGPU_REUSE_HANDLES");
        mode = e && *e == '1';
    }
    return mode;
}

uint64_t fg_handle_new(enum fg_kind kind, void *obj, struct fg_ctx *owner)
{
    uint32_t i;

    if (reuse_handles() && (unsigned)kind < KINDS && reuse_top[kind]) {
        i = reuse_top[kind] - 1;
        reuse_top[kind] = slots[i].next_free;
    } else if (free_head != NO_SLOT) {
        i = free_head;
        free_head = slots[i].next_free;
    } else {
        if (nslots == capslots) {
            uint32_t cap = capslots ? capslots * 2 : 256;
            struct slot *n = realloc(slots, cap * sizeof *n);
            if (!n)
                return 0;
            slots = n;
            capslots = cap;
        }
        i = nslots++;
        slots[i].gen = 1;
    }
    slots[i].obj = obj;
    slots[i].owner = owner;
    slots[i].kind = (uint8_t)kind;
    return HANDLE_TAG << 56 | (uint64_t)kind << 48 |
           (uint64_t)slots[i].gen << 32 | i;
}

static struct slot *slot_of(uint64_t h)
{
    uint32_t i = (uint32_t)h;

    if (h >> 56 != HANDLE_TAG || i >= nslots || !slots[i].obj ||
        slots[i].kind != ((h >> 48) & 0xff) ||
        slots[i].gen != (uint16_t)(h >> 32))
        return NULL;
    return &slots[i];
}

void *fg_handle_get(uint64_t h, enum fg_kind kind)
{
    struct slot *s = slot_of(h);

    return s && s->kind == kind ? s->obj : NULL;
}

void fg_handle_drop(uint64_t h)
{
    struct slot *s = slot_of(h);

    if (!s)
        return;
    s->obj = NULL;
    if (reuse_handles() && s->kind < KINDS) {
        s->next_free = reuse_top[s->kind];
        reuse_top[s->kind] = (uint32_t)(s - slots) + 1;
        return;
    }
    s->gen++;
    s->next_free = free_head;
    free_head = (uint32_t)(s - slots);
}

struct fg_ctx *fg_handle_owner(uint64_t h)
{
    struct slot *s = slot_of(h);

    return s && s->obj ? s->owner : NULL;
}

void fg_handle_each_owned(struct fg_ctx *owner,
                          void (*fn)(enum fg_kind, void *, uint64_t))
{
    for (uint32_t i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (s->obj && s->owner == owner)
            fn((enum fg_kind)s->kind, s->obj,
               HANDLE_TAG << 56 | (uint64_t)s->kind << 48 |
               (uint64_t)s->gen << 32 | i);
    }
}

// ---- Contexts ---------------------------------------------------------------------------

static _Atomic int inited;          // read without the lock by a few calls
// Each device's primary context, from cuInit on; its retains, and whether
// it is active (retained since the last reset).
static struct fg_ctx *primaries[FG_MAX_DEVICES];
static unsigned primary_refs[FG_MAX_DEVICES];
static int primary_live[FG_MAX_DEVICES];

// ---- Devices: physical and visible -------------------------------------------------------
//
// The host has RGPU_FAKEGPU_DEVICES physical devices (or the number in the
// file RGPU_FAKEGPU_DEVICES_FILE names, read once per process: a test
// makes a device vanish between rgpud's start and a session's).  CUDA sees
// those CUDA_VISIBLE_DEVICES picks, in its order, as NVIDIA's driver
// does: entries are indices or GPU- UUID prefixes (unambiguous), parsed
// like strtoul (leading blanks, digits, the rest ignored); the first
// invalid entry ends the list, a device named twice empties it, and an
// empty variable leaves no device (cuInit: CUDA_ERROR_NO_DEVICE).  NVML
// sees every physical device (nvml.c), as NVIDIA's ignores the variable.
// A device's identity (UUID, PCI bus) is its physical index's.

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static int nphysical, nvisible;
static int visible[FG_MAX_DEVICES];     // visible ordinal -> physical index

static int physical_from_env(void)
{
    const char *file = getenv("RGPU_FAKEGPU_DEVICES_FILE");
    const char *e = getenv("RGPU_FAKEGPU_DEVICES");
    char buf[16] = "";
    int n;
    if (file) {
        FILE *f = fopen(file, "r");
        if (f) {
            if (!fgets(buf, sizeof buf, f))
                buf[0] = '\0';
            fclose(f);
        }
        e = buf;
    }
    n = e ? atoi(e) : 1;
    return n < 1 ? 1 : n > FG_MAX_DEVICES ? FG_MAX_DEVICES : n;
}

// A physical device's 16 UUID bytes: "N-rgpu-fakegpu-0", N its index, so
// that UUIDs differ from their first digits on (GPU-302d..., GPU-312d...)
// and a short prefix names one, as with NVIDIA's random ones.
static void physical_uuid(int p, unsigned char b[16])
{
    memcpy(b, "0-rgpu-fakegpu-0", 16);
    b[0] = (unsigned char)('0' + p);
}

void fg_physical_uuid_text(int p, char out[FG_UUID_TEXT])
{
    unsigned char b[16];
    physical_uuid(p, b);
    snprintf(out, FG_UUID_TEXT,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

// The physical device an entry names, or -1.
static int visible_entry(const char *e, size_t len)
{
    while (len && (*e == ' ' || *e == '\t')) {
        e++;
        len--;
    }
    while (len && (e[len - 1] == ' ' || e[len - 1] == '\t'))
        len--;
    if (len > 4 && strncmp(e, "GPU-", 4) == 0) {
        int found = -1;
        for (int p = 0; p < nphysical; p++) {
            char u[FG_UUID_TEXT];
            fg_physical_uuid_text(p, u);
            if (strlen(u) >= len && strncmp(u, e, len) == 0) {
                if (found >= 0)
                    return -1;          // ambiguous
                found = p;
            }
        }
        return found;
    }
    if (!len || e[0] < '0' || e[0] > '9')
        return -1;                      // MIG- entries too: no MIG here
    long v = strtol(e, NULL, 10);
    return v < nphysical ? (int)v : -1;
}

static void devices_init(void)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    nphysical = physical_from_env();
    if (!cvd) {
        for (nvisible = 0; nvisible < nphysical; nvisible++)
            visible[nvisible] = nvisible;
        return;
    }
    for (const char *e = cvd; *e && nvisible < FG_MAX_DEVICES;) {
        size_t len = strcspn(e, ",");
        int p = visible_entry(e, len);
        if (p < 0)
            break;
        for (int k = 0; k < nvisible; k++)
            if (visible[k] == p) {
                nvisible = 0;           // a device named twice: none
                return;
            }
        visible[nvisible++] = p;
        if (!e[len])
            break;
        e += len + 1;
    }
}

int fg_device_count(void)
{
    pthread_once(&devices_once, devices_init);
    return nvisible;
}

int fg_device_valid(CUdevice dev)
{
    return dev >= 0 && dev < fg_device_count();
}

int fg_device_physical(CUdevice dev)
{
    return fg_device_valid(dev) ? visible[dev] : -1;
}

int fg_physical_count(void)
{
    pthread_once(&devices_once, devices_init);
    return nphysical;
}

// For the fake NVML (nvml.c): the physical devices, what it needs of
// each, and the visible ordinal of one (-1: not visible to CUDA here).
int fakegpu_device_count(void);
int fakegpu_device_count(void)
{
    return fg_physical_count();
}

void fakegpu_uuid_text(int physical, char out[FG_UUID_TEXT]);
void fakegpu_uuid_text(int physical, char out[FG_UUID_TEXT])
{
    fg_physical_uuid_text(physical, out);
}

int fakegpu_visible_ordinal(int physical);
int fakegpu_visible_ordinal(int physical)
{
    for (int d = 0; d < fg_device_count(); d++)
        if (visible[d] == physical)
            return d;
    return -1;
}

// A primary context that was released or reset is inactive.
static int inactive(const struct fg_ctx *c)
{
    return c->primary && !primary_live[c->device];
}

// The calling thread's context stack, as handles (they may go stale).
static _Thread_local CUcontext ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;

static struct fg_ctx *ctx_get(CUcontext h)
{
    return fg_handle_get((uint64_t)(uintptr_t)h, FG_CTX);
}

// Frees everything a context owns; the context itself stays.
static void free_owned(enum fg_kind kind, void *obj, uint64_t h)
{
    switch (kind) {
    case FG_MOD:
        fg_module_free(obj);        // drops its functions' handles too
        break;
    case FG_STREAM:
    case FG_EVENT:
        fg_handle_drop(h);
        free(obj);
        break;
    default:
        break;
    }
}

static void ctx_teardown(struct fg_ctx *c)
{
    fg_output_flush(c);         // the driver prints what is left as a context goes
    fg_output_release(c);
    fg_handle_each_owned(c, free_owned);
    fg_mem_release_owned(c);
    fg_host_release_owned(c);
    c->pending = c->sticky = CUDA_SUCCESS;
}

struct fg_ctx *fg_ctx_current(void)
{
    struct fg_ctx *c = ctx_depth ? ctx_get(ctx_stack[ctx_depth - 1]) : NULL;

    return c && !inactive(c) ? c : NULL;
}

CUresult fg_enter(int flags, struct fg_ctx **out, int *skip)
{
    struct fg_ctx *c;

    if (skip)
        *skip = 0;
    *out = NULL;
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return (flags & FG_CTX_OPTIONAL) ? CUDA_SUCCESS
                                         : CUDA_ERROR_INVALID_CONTEXT;
    c = ctx_get(ctx_stack[ctx_depth - 1]);
    // Destroyed, or a primary context whose last retain was released.
    if (!c || inactive(c))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (c->sticky)
        return c->sticky;
    if (c->pending) {
        if (flags & FG_ENQUEUE) {
            *skip = 1;
        } else {
            c->sticky = c->pending;
            return c->sticky;
        }
    }
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    return fg_device_valid(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static struct fg_ctx *ctx_new(int is_primary, unsigned flags, CUdevice dev)
{
    struct fg_ctx *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    c->primary = is_primary;
    c->device = dev;
    c->flags = flags;
    c->handle = (CUcontext)(uintptr_t)fg_handle_new(FG_CTX, c, NULL);
    if (!c->handle) {
        free(c);
        return NULL;
    }
    return c;
}

CUresult CUDAAPI cuInit(unsigned int flags)
{
    CUresult r = CUDA_SUCCESS;

    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fg_device_count() == 0)
        return CUDA_ERROR_NO_DEVICE;    // CUDA_VISIBLE_DEVICES left none
    fg_lock();
    if (!inited) {
        r = fg_mem_init();
        for (int d = 0; r == CUDA_SUCCESS && d < fg_device_count(); d++) {
            primaries[d] = ctx_new(1, 0, d);
            if (!primaries[d])
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        inited = r == CUDA_SUCCESS;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = FG_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

// ---- Context API --------------------------------------------------------------------------

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    struct fg_ctx *c;
    CUresult r;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS && ctx_depth == CTX_STACK_MAX)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        c = ctx_new(0, flags, dev);
        if (!c) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ctx_stack[ctx_depth++] = c->handle;     // made current
            *pctx = c->handle;
        }
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
                                unsigned int flags, CUdevice dev)
{
    if (params && (params->numExecAffinityParams > 0 || params->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags,
                                CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags,
                                CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params,
                                int nparams, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params,
                                int nparams, unsigned int flags, CUdevice dev)
{
    if (params && nparams > 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    struct fg_ctx *c;
    CUresult r = CUDA_SUCCESS;

    fg_lock();
    c = ctx_get(ctx);
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (!c || c->primary)      // the primary is released, not destroyed
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        ctx_teardown(c);
        fg_handle_drop((uint64_t)(uintptr_t)ctx);
        free(c);
        // Popped if current here; other threads keep a stale handle.
        if (ctx_depth > 0 && ctx_stack[ctx_depth - 1] == ctx)
            ctx_depth--;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = CUDA_SUCCESS;

    fg_lock();
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (!ctx) {
        if (ctx_depth > 0)
            ctx_depth--;
    } else if (!ctx_get(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (ctx_depth == 0)
        ctx_stack[ctx_depth++] = ctx;
    else
        ctx_stack[ctx_depth - 1] = ctx;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    *pctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = CUDA_SUCCESS;

    fg_lock();
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (!ctx_get(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (ctx_depth == CTX_STACK_MAX)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        ctx_stack[ctx_depth++] = ctx;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (pctx)
        *pctx = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev)
{
    CUresult r = CUDA_SUCCESS;

    // Which device is current can be asked after a fault too: no fg_enter.
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (ctx_depth == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (!ctx_get(ctx_stack[ctx_depth - 1]))
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    else
        *dev = ctx_get(ctx_stack[ctx_depth - 1])->device;
    fg_unlock();
    return r;
}

// The current context's flags; mapped host memory is always on, as the
// driver reports it.
CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    CUresult r = CUDA_SUCCESS;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (ctx_depth == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (!ctx_get(ctx_stack[ctx_depth - 1]))
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    else
        *flags = ctx_get(ctx_stack[ctx_depth - 1])->flags | CU_CTX_MAP_HOST;
    fg_unlock();
    return r;
}

// FAKEGPU_SYNC_SLEEP_MS=N: every synchronise takes N ms, like a long kernel
// (the hang test tells a slow GPU from a dead server with it).
static void sync_sleep(void)
{
    const char *e = getenv("FAKEGPU_SYNC_SLEEP_MS");
    long ms = e ? atol(e) : 0;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    if (ms > 0)
        nanosleep(&ts, NULL);
}

// FAKEGPU_COPY_GBS=R: a copy engine of R GB/s that costs no CPU, as a
// GPU's DMA does.  The bytes still move at once (a memcpy); what the model
// adds is time: each copy between host and device keeps the engine busy for
// its size / R after the engine's previous copy, an asynchronous copy
// returns at once, and synchronous copies and synchronizes wait for the
// engine.  Benchmarks on a machine without a GPU then see whether copies
// over the network overlap with the device's (bench/rgpu-bench).
static double engine_ns_per_byte = -1;
static uint64_t engine_idle_ns;

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t fg_engine_copy(size_t n)
{
    if (engine_ns_per_byte < 0) {
        const char *e = getenv("FAKEGPU_COPY_GBS");
        double gbs = e ? atof(e) : 0;
        engine_ns_per_byte = gbs > 0 ? 1.0 / gbs : 0;
    }
    if (engine_ns_per_byte == 0)
        return 0;
    uint64_t now = mono_ns();
    engine_idle_ns = (engine_idle_ns > now ? engine_idle_ns : now) +
                     (uint64_t)((double)n * engine_ns_per_byte);
    return engine_idle_ns;
}

uint64_t fg_engine_idle_at(void)
{
    return engine_idle_ns;
}

void fg_engine_wait(uint64_t t)
{
    uint64_t now = mono_ns();
    if (t > now) {
        struct timespec ts = { (time_t)((t - now) / 1000000000u), (long)((t - now) % 1000000000u) };
        nanosleep(&ts, NULL);
    }
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    struct fg_ctx *c;
    CUresult r;

    sync_sleep();
    // Work ran when it was enqueued; all that is left is printing what
    // kernels printed, reporting faults (and waiting for the modelled copy
    // engine).
    fg_lock();
    fg_host_functions_wait_all();
    fg_output_flush_current();
    r = fg_enter(0, &c, NULL);
    uint64_t idle = fg_engine_idle_at();
    fg_unlock();
    fg_engine_wait(idle);
    return r;
}

// ---- Primary context -------------------------------------------------------------------

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS) {
        primary_refs[dev]++;
        primary_live[dev] = 1;
        *pctx = primaries[dev]->handle;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r;

    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS && primary_refs[dev] == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && --primary_refs[dev] == 0) {
        ctx_teardown(primaries[dev]);   // inactive: its resources go
        primary_live[dev] = 0;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult r;

    // Frees all the primary context's resources and clears a sticky error;
    // it is inactive until retained again (as the driver reports it), while
    // the retains already taken still count for releases.
    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS) {
        ctx_teardown(primaries[dev]);
        primary_live[dev] = 0;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags,
                                            int *active)
{
    CUresult r;

    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS) {
        *flags = primaries[dev]->flags;
        *active = primary_live[dev];
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r;

    fg_lock();
    r = check_device(dev);
    if (r == CUDA_SUCCESS)
        primaries[dev]->flags = flags;
    fg_unlock();
    return r;
}

// ---- Device queries -------------------------------------------------------------------

// Loosely an H100-class part with 4 SMs; every value a program may size
// things by is consistent with cudaGetDeviceProperties.
static const int attrs[CU_DEVICE_ATTRIBUTE_MAX] = {
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = FG_MAX_THREADS,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = FG_MAX_BLOCK_X,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = FG_MAX_BLOCK_Y,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = FG_MAX_BLOCK_Z,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = (int)FG_MAX_GRID_X,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = FG_MAX_GRID_YZ,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = FG_MAX_GRID_YZ,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = FG_SHMEM_PER_BLOCK,
    [CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536,
    [CU_DEVICE_ATTRIBUTE_WARP_SIZE] = 32,
    [CU_DEVICE_ATTRIBUTE_MAX_PITCH] = 2147483647,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = 65536,
    [CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1755000,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_GPU_OVERLAP] = 1,
    [CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = 4,
    [CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1,
    [CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE] = 2619000,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH] = 5120,
    [CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE] = 50331648,
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = 2048,
    [CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT] = 2,
    [CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE] = 32768,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT] = 32,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT] = 65000,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH] = 2097120,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] = FG_CC_MAJOR,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] = FG_CC_MINOR,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = 233472,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = 65536,
    [CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY] = 1,
    [CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO] = 2,
    [CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS] = 1,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM] = 1,
    [CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = 232448,
    [CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = 32,
    [CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134213632,
    [CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK] = 1024,
    [CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR] = 1,
    [CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] = 1,
    [CU_DEVICE_ATTRIBUTE_NUMA_ID] = -1,
    [CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID] = -1,
};

int fg_physical_attribute(int physical, CUdevice_attribute attrib)
{
    if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return 0;
    // Devices sit on buses 0, 1, ... of one domain, by physical index; one
    // board each.
    return attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID ? physical : attrs[attrib];
}

// For the fake NVML: a physical device's attribute.
int fakegpu_physical_attribute(int physical, CUdevice_attribute attrib);
int fakegpu_physical_attribute(int physical, CUdevice_attribute attrib)
{
    return fg_physical_attribute(physical, attrib);
}

CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!fg_device_valid(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = fg_device_count();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = check_device(dev);

    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, FG_DEVICE_NAME, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                      CUdevice dev)
{
    CUresult r = check_device(dev);

    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = fg_physical_attribute(fg_device_physical(dev), attrib);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = check_device(dev);

    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = FG_TOTAL_MEM;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult r = check_device(dev);

    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    physical_uuid(fg_device_physical(dev), (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

// "domain:bus:device.function", as CUDA writes it: 0000:01:00.0.
static void bus_id_text(int physical, char *out, size_t len)
{
    snprintf(out, len, "%04x:%02x:%02x.0",
             (unsigned)fg_physical_attribute(physical, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
             (unsigned)fg_physical_attribute(physical, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
             (unsigned)fg_physical_attribute(physical, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult r = check_device(dev);

    if (r != CUDA_SUCCESS)
        return r;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    bus_id_text(fg_device_physical(dev), pciBusId, (size_t)len);
    return CUDA_SUCCESS;
}

// The driver takes "domain:bus:device.function" or "bus:device.function",
// hexadecimal, any case; a device CUDA does not see is not found.
CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    unsigned domain = 0, bus = 0, device = 0, function = 0;

    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
        domain = 0;
        if (sscanf(pciBusId, "%x:%x.%x", &bus, &device, &function) != 3)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (int d = 0; d < fg_device_count(); d++) {
        int p = fg_device_physical(d);
        if ((int)domain == fg_physical_attribute(p, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) &&
            (int)bus == fg_physical_attribute(p, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) &&
            (int)device == fg_physical_attribute(p, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) &&
            function == 0) {
            *dev = d;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

/* ---- the one export-table slot rgpud asks for ---------------------------------
 * NVIDIA's driver hands the CUDA runtime undocumented tables; rgpud calls
 * one slot of one of them (daemon/hand_cuda_export.c): the runtime
 * interface's slot 2, a device's primary context without retaining it.
 * The fake has that table with that slot; every other table is unknown. */

static CUresult fg_primary_ctx_unretained(CUcontext *pctx, CUdevice dev)
{
    CUresult r;

    fg_lock();
    r = inited ? check_device(dev) : CUDA_ERROR_NOT_INITIALIZED;
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *pctx = primaries[dev]->handle;
    fg_unlock();
    return r;
}

static const void *const fg_runtime_interface[3] = {
    (const void *)(3 * sizeof(void *)), NULL, (const void *)fg_primary_ctx_unretained,
};

CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id)
{
    static const unsigned char runtime_interface[16] = {
        0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
        0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9,
    };

    if (!table || !id)
        return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(id->bytes, runtime_interface, sizeof runtime_interface) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *table = fg_runtime_interface;
    return CUDA_SUCCESS;
}

// Modules load all their kernels at once (CUDA_MODULE_LOADING=EAGER).
CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

// The device of ctx, or of the current context when ctx is NULL.
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
    CUresult r = CUDA_SUCCESS;

    if (!ctx)
        return cuCtxGetDevice(dev);
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    if (!inited)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (!ctx_get(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else
        *dev = 0;
    fg_unlock();
    return r;
}

// Synchronises ctx (NULL: the current context).  One device, work done at
// once: the same as cuCtxSynchronize once ctx is known to be alive.
CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    if (ctx) {
        fg_lock();
        int alive = ctx_get(ctx) != NULL;
        fg_unlock();
        if (!alive)
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    return cuCtxSynchronize();
}

// Every context speaks the CUDA 3.2+ API.
CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    int ok = inited && (ctx ? ctx_get(ctx) != NULL : ctx_depth > 0);
    fg_unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;
    return CUDA_SUCCESS;
}
