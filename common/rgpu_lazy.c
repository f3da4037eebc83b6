/* What may go without waiting for the server (rgpu_client.h, "the waiting
 * policy"; docs/synchronisation.md says why each rule holds).
 *
 * A call that goes without waiting has returned before the server ran it,
 * so whatever it would have answered must be known here: its argument
 * checks, its outputs, and whether anything the program can observe
 * depends on it having finished.  Four things decide that:
 * - RGPU_SYNC, the mode;
 * - whether a kernel that may printf was launched where a synchronise or
 *   copy would print its output (rgpu_printing.c): then it waits;
 * - the handles this process was handed and has not destroyed (a mirror
 *   of the server's table): a call naming anything else waits, so that
 *   the library's own error comes back at once;
 * - the device ranges this process allocated (client_ranges.c), for
 *   copies;
 * - host functions not yet run (rgpu_callbacks.c): while there are any,
 *   every call waits;
 * - on a server with several GPUs, the device of each stream and event
 *   (below): work that cannot go to a stream of another device waits
 *   unless it is known to go to its own. */
#include "rgpu_client.h"
#include "rgpu_handle_table.h"
#include "rgpu_launch_attrs.h"
#include "rgpu_log.h"
#include "client_ranges.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the mode ---------------------------------------------------------------- */

static int sync_mode = -1;

static int mode_from_env(void)
{
    const char *e = getenv("RGPU_SYNC");
    if (!e || !*e || strcmp(e, "lazy") == 0)
        return RGPU_SYNC_LAZY;
    if (strcmp(e, "strict") == 0)
        return RGPU_SYNC_STRICT;
    if (strcmp(e, "blocking") == 0)
        return RGPU_SYNC_BLOCKING;
    rgpu_log_init("rgpu", getenv("RGPU_LOG"));
    rgpu_warn("RGPU_SYNC=%s: expected lazy, strict or blocking; using lazy", e);
    return RGPU_SYNC_LAZY;
}

int rgpu_sync_mode(void)
{
    int m = __atomic_load_n(&sync_mode, __ATOMIC_RELAXED);
    if (m < 0) {
        m = mode_from_env();
        __atomic_store_n(&sync_mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

/* ---- handles this process holds ------------------------------------------------ */

static uint32_t C_STREAM, C_EVENT, C_MODULE, C_LIBRARY, C_CONTEXT, C_GRAPH;

__attribute__((constructor)) static void classes_init(void)
{
    C_STREAM = rgpu_handle_class("CUstream_st");
    C_EVENT = rgpu_handle_class("CUevent_st");
    C_MODULE = rgpu_handle_class("CUmod_st");
    C_LIBRARY = rgpu_handle_class("CUlib_st");
    C_CONTEXT = rgpu_handle_class("CUctx_st");
    C_GRAPH = rgpu_handle_class("CUgraph_st");
}

static struct rgpu_handle_table held = RGPU_HANDLE_TABLE_INIT(rgpu_handle_shared);

/* A stream's or an event's facts hold the device it was made on, plus
 * one (0: unknown): the thread's device when the call that made it
 * returned, where the client knew it (a driver context made current
 * leaves it unknown). */
#define DEVICE_SHIFT 16
#define DEVICE_MASK (0xffu << DEVICE_SHIFT)

static uint32_t device_tag(void)
{
    int dev;
    return rgpu_thread_device(&dev) && dev >= 0 && dev < 255
               ? (uint32_t)(dev + 1) << DEVICE_SHIFT
               : 0;
}

/* The device a handle's facts name, or -1. */
static int tag_device(uint32_t info)
{
    return (int)((info & DEVICE_MASK) >> DEVICE_SHIFT) - 1;
}

void rgpu_handle_note(uint32_t cls, uint64_t h, uint32_t info)
{
    (void)rgpu_htab_add(&held, cls, h, info);     /* unrecorded: its calls just wait */
}

static void graph_release(uint64_t graph);

void rgpu_handle_forget(uint32_t cls, uint64_t h)
{
    rgpu_htab_remove(&held, cls, h);
    if (cls == C_GRAPH)
        graph_release(h);
}

/* ---- conditional nodes' body graphs ------------------------------------------------ */

/* CUDA hands a conditional node's body graphs back in an array that stays
 * valid as long as the node; rgpu's arrays are kept here by the graph that
 * holds the node, and freed when that graph is destroyed.  Its bodies go
 * with it on the server, so they are forgotten here too, with their own
 * conditional nodes' bodies. */
struct kept_bodies {
    uint64_t graph;
    uint64_t *bodies;
    unsigned n;
    struct kept_bodies *next;
};
static struct kept_bodies *kept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

void rgpu_graph_keep_bodies(uint64_t graph, uint64_t *bodies, unsigned n)
{
    struct kept_bodies *k = malloc(sizeof *k);
    if (!k)
        return;         /* the array then lives as long as the process */
    *k = (struct kept_bodies){ graph, bodies, n, NULL };
    pthread_mutex_lock(&kept_lock);
    k->next = kept;
    kept = k;
    pthread_mutex_unlock(&kept_lock);
}

/* The first array kept for this graph, unlinked; NULL when none is left. */
static struct kept_bodies *unlink_kept(uint64_t graph)
{
    pthread_mutex_lock(&kept_lock);
    struct kept_bodies **at = &kept;
    while (*at && (*at)->graph != graph)
        at = &(*at)->next;
    struct kept_bodies *k = *at;
    if (k)
        *at = k->next;
    pthread_mutex_unlock(&kept_lock);
    return k;
}

static void graph_release(uint64_t graph)
{
    struct kept_bodies *k;
    while ((k = unlink_kept(graph))) {
        for (unsigned i = 0; i < k->n; i++)
            rgpu_handle_forget(C_GRAPH, k->bodies[i]);      /* and their bodies */
        free(k->bodies);
        free(k);
    }
}

/* The same classes of exceptions as rgpud's (daemon/owned_handles.c), but
 * for NULL: known only as a stream (elsewhere the call waits). */
int rgpu_handle_known(uint32_t cls, uint64_t h)
{
    uint32_t alias = rgpu_handle_alias(cls);
    return rgpu_handle_default_stream(cls, h) || rgpu_htab_get(&held, cls, h, NULL) ||
           (alias && rgpu_htab_get(&held, alias, h, NULL));
}

int rgpu_handle_info(uint32_t cls, uint64_t h, uint32_t *info)
{
    return rgpu_htab_get(&held, cls, h, info);
}

int rgpu_stream_known(uint64_t stream)
{
    return rgpu_handle_known(C_STREAM, stream);
}

static uint64_t value_of(const struct rgpu_param *prm, const void *arg)
{
    uint64_t v = 0;
    memcpy(&v, arg, prm->size < 8 ? prm->size : 8);
    return v;
}

int rgpu_handles_known_in(const struct rgpu_proc *proc, const void *const *argv)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (!prm->handle_class)
            continue;
        if (prm->kind != RGPU_HANDLE && prm->kind != RGPU_OUT && prm->kind != RGPU_OUT_BUF)
            return 0;       /* handles inside an input buffer: let the server look */
        uint64_t h = prm->kind == RGPU_HANDLE ? value_of(prm, argv[i]) : 0;
        if (prm->kind == RGPU_HANDLE && !(h == 0 && (prm->handle_flags & RGPU_HANDLE_NULLABLE)) &&
            !rgpu_handle_known(prm->handle_class, h))
            return 0;
    }
    return 1;
}

/* ---- loaded code ----------------------------------------------------------------- */

static unsigned code_generation;

unsigned rgpu_code_generation(void)
{
    return __atomic_load_n(&code_generation, __ATOMIC_ACQUIRE);
}

static void code_unloaded(void)
{
    __atomic_add_fetch(&code_generation, 1, __ATOMIC_ACQ_REL);
}

/* Destroying one of these unloads code: its functions' handle values may
 * name other functions afterwards. */
static int holds_code(uint32_t cls)
{
    return cls == C_MODULE || cls == C_LIBRARY || cls == C_CONTEXT;
}

static int resets_device(const char *name)
{
    return strcmp(name, "cudaDeviceReset") == 0 ||
           strncmp(name, "cuDevicePrimaryCtxReset", strlen("cuDevicePrimaryCtxReset")) == 0;
}

/* ---- launch configurations the driver took ------------------------------------- */

/* What the driver refuses at a launch depends on the function as well as on
 * the configuration: its registers and __launch_bounds__ cap the block, its
 * static shared memory and the maximum the program set cap the dynamic
 * shared memory, the cluster it was compiled for must divide the grid.  The
 * client cannot check those, and a refusal reported after the launch
 * returned misleads: XLA's autotuner times a candidate whose launch failed
 * as the fastest and keeps it.  So the first launch of a function with a
 * configuration waits for the driver's answer, and once the driver took a
 * configuration, later launches like it go without waiting (a training
 * loop repeats its launches).  Keys are hashes, kept in a table of
 * LAUNCH_WAYS-slot buckets: a key lives in one of its bucket's slots, and a
 * full bucket gives up one slot in turn (a forgotten configuration waits
 * once more).  One slot per key would not do: functions' handles are the
 * server's addresses, so which keys share a slot changes from run to run,
 * and two configurations of one step that share it evict each other at
 * every step, a wait each time (two to four waits per step of a GPT
 * training loop on the H200; tests/step-roundtrips.sh's 300 configurations
 * waited 26 times per step).  The code generation and an epoch that every
 * function or context setting moves are part of the key, so what those
 * change is asked again. */
#define LAUNCH_BUCKETS 4096
#define LAUNCH_WAYS 4
static uint64_t launch_keys[LAUNCH_BUCKETS][LAUNCH_WAYS];
static unsigned launch_evict[LAUNCH_BUCKETS];
static unsigned launch_epoch;

uint64_t rgpu_launch_key(uint64_t func, const unsigned grid[3], const unsigned block[3],
                         unsigned shmem, uint64_t attrs_hash)
{
    unsigned gen[2] = { rgpu_code_generation(), __atomic_load_n(&launch_epoch, __ATOMIC_ACQUIRE) };
    uint64_t h = rgpu_hash_bytes(0xcbf29ce484222325ull, &func, sizeof func);
    h = rgpu_hash_bytes(h, grid, 3 * sizeof *grid);
    h = rgpu_hash_bytes(h, block, 3 * sizeof *block);
    h = rgpu_hash_bytes(h, &shmem, sizeof shmem);
    h = rgpu_hash_bytes(h, &attrs_hash, sizeof attrs_hash);
    h = rgpu_hash_bytes(h, gen, sizeof gen);
    return h ? h : 1;       /* 0 marks a free slot */
}

/* The key's bits mixed before the bucket is taken: FNV's low bits keep the
 * structure of inputs that differ in a byte or two (the grids of one
 * kernel), which piled such keys into few buckets. */
static unsigned launch_bucket_index(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (unsigned)(key % LAUNCH_BUCKETS);
}

int rgpu_launch_known(uint64_t key)
{
    const uint64_t *b = launch_keys[launch_bucket_index(key)];
    for (unsigned w = 0; w < LAUNCH_WAYS; w++)
        if (__atomic_load_n(&b[w], __ATOMIC_RELAXED) == key)
            return 1;
    return 0;
}

void rgpu_launch_limits_changed(void)
{
    __atomic_add_fetch(&launch_epoch, 1, __ATOMIC_ACQ_REL);
}

/* Into a free slot of its bucket, else over the slot whose turn it is.  Two
 * threads racing may both write one key or lose one: it then waits once
 * more, never goes unchecked, since a slot only ever holds a whole key. */
void rgpu_launch_took(uint64_t key)
{
    unsigned i = launch_bucket_index(key);
    uint64_t *b = launch_keys[i];
    for (unsigned w = 0; w < LAUNCH_WAYS; w++) {
        uint64_t seen = __atomic_load_n(&b[w], __ATOMIC_RELAXED);
        /* A failed exchange leaves in seen what the slot holds now. */
        if (seen == 0 && __atomic_compare_exchange_n(&b[w], &seen, key, 0, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
            return;
        if (seen == key)
            return;
    }
    unsigned turn = __atomic_fetch_add(&launch_evict[i], 1, __ATOMIC_RELAXED);
    __atomic_store_n(&b[turn % LAUNCH_WAYS], key, __ATOMIC_RELAXED);
}

/* Settings after which a function's launches may be judged otherwise. */
static int changes_launch_limits(const char *name)
{
    static const char *const prefixes[] = { "cuFuncSet", "cuKernelSet", "cudaFuncSet",
                                            "cuCtxSetLimit", "cudaDeviceSetLimit" };
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* What a generated call tells about kernels' printf output pending
 * (rgpu_printing.c): a device synchronise that waited delivered the
 * device's; a stream made to wait for an event may now wait for work that
 * printed. */
static int synchronises_device(const char *name)
{
    return strcmp(name, "cudaDeviceSynchronize") == 0 || strcmp(name, "cuCtxSynchronize") == 0;
}

static uint64_t stream_argument(const struct rgpu_proc *proc, const void *const *argv)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (prm->kind == RGPU_HANDLE && prm->handle_class == C_STREAM) {
            uint64_t s = value_of(prm, argv[i]);
            size_t n = strlen(proc->name);
            /* NULL is the per-thread stream to the _ptsz entry points. */
            return s == 0 && n > 5 && strcmp(proc->name + n - 5, "_ptsz") == 0
                       ? RGPU_PER_THREAD_STREAM
                       : s;
        }
    }
    return 0;
}

static void printing_after_call(const struct rgpu_proc *proc, const void *const *argv,
                                int status, int waited)
{
    if (waited && status == 0 && synchronises_device(proc->name))
        rgpu_printing_device_synced();
    if (strstr(proc->name, "StreamWaitEvent"))
        rgpu_printing_stream_waits(stream_argument(proc, argv));
}

void rgpu_handles_after_call(const struct rgpu_proc *proc, const void *const *argv,
                             int status, int waited)
{
    printing_after_call(proc, argv, status, waited);
    if (status == 0 && resets_device(proc->name)) {
        code_unloaded();
        rgpu_printing_forget_all();
    }
    if (changes_launch_limits(proc->name))
        rgpu_launch_limits_changed();
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (!prm->handle_class)
            continue;
        /* A destroy sent without waiting is as good as done: no later
         * call of ours may count on the handle. */
        if (prm->kind == RGPU_HANDLE && (prm->handle_flags & RGPU_HANDLE_DESTROYS) &&
            (status == 0 || !waited)) {
            rgpu_handle_forget(prm->handle_class, value_of(prm, argv[i]));
            rgpu_answers_forget();  /* the value may name something else next */
            if (holds_code(prm->handle_class))
                code_unloaded();
            if (prm->handle_class == C_CONTEXT)
                rgpu_printing_forget_all();
            else if (holds_code(prm->handle_class))
                rgpu_printing_unloaded(value_of(prm, argv[i]));
        }
        if ((prm->kind == RGPU_OUT || prm->kind == RGPU_OUT_BUF) && waited && status == 0) {
            const unsigned char *out = *(const void *const *)argv[i];
            size_t n = out ? rgpu_param_bytes_client(proc, i, argv) / 8 : 0;
            uint32_t info = prm->handle_class == C_STREAM || prm->handle_class == C_EVENT
                                ? device_tag()
                                : 0;
            for (size_t k = 0; k < n; k++) {
                uint64_t h;
                memcpy(&h, out + 8 * k, 8);
                rgpu_handle_note(prm->handle_class, h, info);
            }
        }
    }
}

/* ---- events: whether the program may time them --------------------------------- */

#define EVENT_FLAGS_KNOWN (1u << 31)
#define EVENT_DISABLE_TIMING 0x2u   /* cudaEventDisableTiming, CU_EVENT_DISABLE_TIMING */
#define EVENT_INTERPROCESS 0x4u     /* cudaEventInterprocess, CU_EVENT_INTERPROCESS */

void rgpu_event_note_flags(uint64_t event, unsigned flags)
{
    uint32_t info = 0;
    rgpu_htab_get(&held, C_EVENT, event, &info);
    rgpu_handle_note(C_EVENT, event, EVENT_FLAGS_KNOWN | flags | (info & DEVICE_MASK));
}

/* ---- the device of streams and events ------------------------------------------- */

/* The device work on stream goes to: a created stream's, a default
 * stream's the thread's current device; -1 when the client cannot say. */
static int stream_device(uint64_t stream)
{
    uint32_t info = 0;
    int dev;
    if (rgpu_handle_default_stream(C_STREAM, stream))
        return rgpu_thread_device(&dev) ? dev : -1;
    return rgpu_htab_get(&held, C_STREAM, stream, &info) ? tag_device(info) : -1;
}

/* With one GPU (or none) no stream is of another device. */
static int one_device(void)
{
    int n = rgpu_server_devices();
    return n >= 0 && n <= 1;
}

int rgpu_stream_device(uint64_t stream)
{
    return stream_device(stream);
}

int rgpu_stream_fits_current(uint64_t stream)
{
    int dev;
    if (one_device() || rgpu_handle_default_stream(C_STREAM, stream))
        return 1;
    return rgpu_thread_device(&dev) && stream_device(stream) == dev;
}

int rgpu_devices_agree_in(const struct rgpu_proc *proc, const void *const *argv)
{
    uint64_t event = 0, stream = 0;
    if (one_device() || !strstr(proc->name, "EventRecord"))
        return 1;
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (prm->kind == RGPU_HANDLE && prm->handle_class == C_EVENT)
            event = value_of(prm, argv[i]);
        else if (prm->kind == RGPU_HANDLE && prm->handle_class == C_STREAM)
            stream = value_of(prm, argv[i]);
    }
    return rgpu_event_fits_stream(event, stream);
}

int rgpu_event_fits_stream(uint64_t event, uint64_t stream)
{
    uint32_t info = 0;
    if (one_device())
        return 1;
    int dev = stream_device(stream);
    return dev >= 0 && rgpu_htab_get(&held, C_EVENT, event, &info) && tag_device(info) == dev;
}

/* ---- stream capture ------------------------------------------------------------- */

/* A capture starts only through the begin-capture stubs (the runtime's,
 * stubs/cudart_cache.c and cudart_graphs.c; the driver's, through which a
 * statically linked runtime captures, stubs/cuda_graphs.c), so while none
 * is under way nothing is being captured. */
static int captures_active;

void rgpu_capture_begin(void)
{
    __atomic_add_fetch(&captures_active, 1, __ATOMIC_SEQ_CST);
}

void rgpu_capture_end(void)
{
    int n = __atomic_load_n(&captures_active, __ATOMIC_SEQ_CST);
    while (n > 0 && !__atomic_compare_exchange_n(&captures_active, &n, n - 1, 0,
                                                 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
}

int rgpu_capture_active(void)
{
    return __atomic_load_n(&captures_active, __ATOMIC_SEQ_CST) > 0;
}

/* ---- the decisions ---------------------------------------------------------------- */

/* Lazy mode, and no capture under way: a synchronise or a pageable copy
 * inside a capture is an error the caller must see at once. */
static int lazy_now(void)
{
    return rgpu_sync_mode() == RGPU_SYNC_LAZY && !rgpu_capture_active() &&
           !rgpu_callbacks_outstanding();
}

/* Nor may a kernel's printf output be due there: the driver prints it at
 * synchronises and blocking copies, and it must reach the program before
 * such a call returns (rgpu_printing.c). */
int rgpu_lazy_stream_sync(uint64_t stream)
{
    return lazy_now() && rgpu_handle_known(C_STREAM, stream) && !rgpu_printing_pending(stream);
}

int rgpu_lazy_event_sync(uint64_t event)
{
    uint32_t info = 0;
    return lazy_now() && rgpu_htab_get(&held, C_EVENT, event, &info) &&
           (info & EVENT_FLAGS_KNOWN) && (info & EVENT_DISABLE_TIMING) &&
           !rgpu_printing_pending_any();
}

int rgpu_event_untimed(uint64_t event)
{
    uint32_t info = 0;
    return rgpu_htab_get(&held, C_EVENT, event, &info) && (info & EVENT_FLAGS_KNOWN) &&
           (info & EVENT_DISABLE_TIMING) && !(info & EVENT_INTERPROCESS);
}

/* [p, p + count) lies inside one device range this process allocated. */
static int device_range_holds(uint64_t p, size_t count)
{
    uint64_t base;
    size_t size;
    return rgpu_ranges_find(p, &base, &size) == RGPU_RANGE_DEVICE && count <= size &&
           p - base <= size - count;
}

int rgpu_lazy_copy_to_device(uint64_t dst, size_t count, uint64_t stream)
{
    return lazy_now() && rgpu_handle_known(C_STREAM, stream) &&
           !rgpu_printing_pending(stream) && device_range_holds(dst, count);
}

int rgpu_lazy_copy_on_device(uint64_t dst, uint64_t src, size_t count, uint64_t stream)
{
    return rgpu_lazy_copy_to_device(dst, count, stream) && device_range_holds(src, count);
}

/* Not while a host function is outstanding (rgpu_callbacks.c): rgpud's
 * stream waits for it, and a request sent without waiting could hold the
 * server's reader behind a synchronise that waits for its acknowledgement;
 * and a synchronise must see the function's effects when it returns. */
int rgpu_may_skip_reply(void)
{
    return rgpu_sync_mode() != RGPU_SYNC_BLOCKING && !rgpu_callbacks_outstanding();
}
