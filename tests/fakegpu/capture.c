// Stream capture (cuStreamBeginCapture_v2 and its kin): while a stream
// captures, its kernel launches, asynchronous copies, host functions and
// stream-ordered allocations and frees become nodes of the capture's graph
// (graph.c) after the capture's current dependencies, which the new node
// then replaces, instead of running.  Any
// other work on a capturing stream, a synchronise or a query of it, is
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, whose
// end then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as a GPU's
// does.  Streams capture one at a time per stream; the legacy stream never
// does.  Cross-stream capture: an event recorded on a capturing stream
// keeps the capture's dependencies, and a stream that waits for it joins
// the capture with them (or, capturing already, adds them to its own), as
// CUDA forks and joins a capture; ending the capture ends it on every
// stream that joined, and invalidating it on one stream invalidates it on
// all.  A capture not begun in the relaxed mode ends only on the thread
// that began it (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD).  What the modes
// forbid meanwhile, the unjoined-work check and stream callbacks in a
// capture are not modelled.
//
// Locking: the captures have their own lock, never held while a cuGraph*
// call runs (those take the graphs' lock and fg_lock), and taken under
// fg_lock by fg_capture_refused.
#include "fakegpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CAPTURES 64

struct capture {
    CUstream stream;            // NULL: a free slot
    CUgraph graph;
    int made_graph;             // cuStreamBeginCapture's, destroyed if invalidated
    int invalid;
    cuuint64_t id;
    CUgraphNode *deps;
    CUgraphEdgeData *edges;     // all default, as deps
    size_t n;
    int joined;                 // a stream that joined through an event, not the origin
    // Who began it and how: a capture begun in the global or thread-local
    // mode must end on the thread that began it.
    pthread_t owner;
    CUstreamCaptureMode mode;
};

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture captures[MAX_CAPTURES];
static cuuint64_t next_id;
static int active;              // captures under way, read without the lock

// Lock held.
static struct capture *find(CUstream s)
{
    for (int i = 0; s && i < MAX_CAPTURES; i++)
        if (captures[i].stream == s)
            return &captures[i];
    return NULL;
}

static CUstream per_thread(CUstream s)
{
    return s ? s : CU_STREAM_PER_THREAD;
}

// Lock held: the capture's dependencies become deps[0..n).
static CUresult set_deps(struct capture *c, const CUgraphNode *deps, size_t n)
{
    CUgraphNode *d = n ? malloc(n * sizeof *d) : NULL;
    CUgraphEdgeData *e = n ? calloc(n, sizeof *e) : NULL;
    if (n && (!d || !e)) {
        free(d);
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (n)
        memcpy(d, deps, n * sizeof *d);
    free(c->deps);
    free(c->edges);
    c->deps = d;
    c->edges = e;
    c->n = n;
    return CUDA_SUCCESS;
}

int fg_capturing(CUstream s)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) || s == NULL || s == CU_STREAM_LEGACY)
        return 0;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    int capturing = c && !c->invalid;
    pthread_mutex_unlock(&capture_lock);
    return capturing;
}

// Lock held: the capture c belongs to is invalid on every stream.
static void invalidate(const struct capture *c)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i].stream && captures[i].id == c->id)
            captures[i].invalid = 1;
}

int fg_capture_refused(CUstream s)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    if (c)
        invalidate(c);
    pthread_mutex_unlock(&capture_lock);
    return c != NULL;
}

// ---- forks and joins through events ------------------------------------------------

#define MAX_CAPTURE_EVENTS 256

struct capture_event {
    CUevent event;              // NULL: a free slot
    cuuint64_t id;              // the capture it was recorded in
    CUgraphNode *deps;
    size_t n;
};

static struct capture_event capture_events[MAX_CAPTURE_EVENTS];

// Lock held.
static struct capture_event *event_record_of(CUevent ev)
{
    for (int i = 0; ev && i < MAX_CAPTURE_EVENTS; i++)
        if (capture_events[i].event == ev)
            return &capture_events[i];
    return NULL;
}

static void event_forget_locked(struct capture_event *e)
{
    if (e) {
        free(e->deps);
        *e = (struct capture_event){ 0 };
    }
}

int fg_capture_event_record(CUevent ev, CUstream s, CUresult *r)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    struct capture_event *e = event_record_of(ev);
    event_forget_locked(e);     // a record replaces what the event held
    if (c) {
        *r = CUDA_SUCCESS;
        for (int i = 0; !e && i < MAX_CAPTURE_EVENTS; i++)
            if (!capture_events[i].event)
                e = &capture_events[i];
        CUgraphNode *deps = c->n ? malloc(c->n * sizeof *deps) : NULL;
        if (c->invalid)
            *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        else if (!e || (c->n && !deps))
            *r = CUDA_ERROR_OUT_OF_MEMORY;
        if (*r == CUDA_SUCCESS) {
            if (c->n)
                memcpy(deps, c->deps, c->n * sizeof *deps);
            *e = (struct capture_event){ ev, c->id, deps, c->n };
        } else {
            free(deps);
        }
    }
    pthread_mutex_unlock(&capture_lock);
    return c != NULL;
}

// Lock held: the live capture of that id, on any of its streams.
static struct capture *capture_of_id(cuuint64_t id)
{
    for (int i = 0; id && i < MAX_CAPTURES; i++)
        if (captures[i].stream && captures[i].id == id)
            return &captures[i];
    return NULL;
}

// Lock held: s joins the capture of origin with deps.
static CUresult join(CUstream s, const struct capture *origin, const CUgraphNode *deps, size_t n)
{
    struct capture *c = NULL;
    for (int i = 0; !c && i < MAX_CAPTURES; i++)
        if (!captures[i].stream)
            c = &captures[i];
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct capture){ s, origin->graph, 0, origin->invalid, origin->id, NULL, NULL, 0, 1,
                           origin->owner, origin->mode };
    CUresult r = set_deps(c, deps, n);
    if (r != CUDA_SUCCESS)
        c->stream = NULL;
    else
        __atomic_add_fetch(&active, 1, __ATOMIC_RELEASE);
    return r;
}

// Lock held: c's dependencies and deps[0..n), each once.
static CUresult add_deps(struct capture *c, const CUgraphNode *deps, size_t n)
{
    CUgraphNode *all = malloc((c->n + n + 1) * sizeof *all);
    size_t total = c->n;
    if (!all)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(all, c->deps, c->n * sizeof *all);
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < total && all[k] != deps[i])
            k++;
        if (k == total)
            all[total++] = deps[i];
    }
    CUresult r = set_deps(c, all, total);
    free(all);
    return r;
}

int fg_capture_event_wait(CUstream s, CUevent ev, CUresult *r)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&capture_lock);
    struct capture_event *e = event_record_of(ev);
    struct capture *origin = e ? capture_of_id(e->id) : NULL, *c = find(s);
    int handled = origin != NULL || c != NULL;
    if (origin && c && c->id != origin->id)
        *r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;     // two captures cannot merge
    else if (origin && c)
        *r = add_deps(c, e->deps, e->n);
    else if (origin)
        *r = s == NULL || s == CU_STREAM_LEGACY ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                                                : join(s, origin, e->deps, e->n);
    else if (c)
        *r = CUDA_SUCCESS;      // an event of no capture: nothing to wait for in the graph
    pthread_mutex_unlock(&capture_lock);
    return handled;
}

// ---- nodes of a capture ------------------------------------------------------------

typedef CUresult (*add_fn)(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                           const void *arg);

// A node made by add after the capture's dependencies, which it replaces.
static CUresult capture_node(CUstream s, add_fn add, const void *arg)
{
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    CUgraph g = c ? c->graph : NULL;
    cuuint64_t id = c ? c->id : 0;
    size_t n = c ? c->n : 0;
    CUgraphNode *deps = n ? malloc(n * sizeof *deps) : NULL;
    if (deps)
        memcpy(deps, c->deps, n * sizeof *deps);
    pthread_mutex_unlock(&capture_lock);
    if (!g)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (n && !deps)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphNode node = NULL;
    CUresult r = add(&node, g, deps, n, arg);
    free(deps);
    pthread_mutex_lock(&capture_lock);
    c = find(s);
    if (c && c->id == id) {
        if (r == CUDA_SUCCESS)
            r = set_deps(c, &node, 1);
        else
            c->invalid = 1;
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

static CUresult add_kernel(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                           const void *arg)
{
    return cuGraphAddKernelNode_v2(node, g, deps, n, arg);
}

static CUresult add_copy(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                         const void *arg)
{
    return cuGraphAddMemcpyNode(node, g, deps, n, arg, NULL);
}

static CUresult add_host(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                         const void *arg)
{
    return cuGraphAddHostNode(node, g, deps, n, arg);
}

static CUresult add_alloc(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                          const void *arg)
{
    return cuGraphAddMemAllocNode(node, g, deps, n, (CUDA_MEM_ALLOC_NODE_PARAMS *)arg);
}

static CUresult add_free(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                         const void *arg)
{
    return cuGraphAddMemFreeNode(node, g, deps, n, *(const CUdeviceptr *)arg);
}

// cuMemAllocAsync and cuMemFreeAsync on a capturing stream: memory nodes,
// the address fixed when the node is made, as CUDA does.
CUresult fg_capture_alloc(CUstream s, CUdevice dev, size_t size, CUdeviceptr *dptr)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = dev;
    p.bytesize = size;
    CUresult r = capture_node(s, add_alloc, &p);
    if (r == CUDA_SUCCESS)
        *dptr = p.dptr;
    return r;
}

CUresult fg_capture_free(CUstream s, CUdeviceptr p)
{
    return capture_node(s, add_free, &p);
}

CUresult fg_capture_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                           void **extra)
{
    CUDA_KERNEL_NODE_PARAMS p = { f, gx, gy, gz, bx, by, bz, shmem, params, extra, NULL, NULL };
    return capture_node(s, add_kernel, &p);
}

CUresult fg_capture_copy(uintptr_t dst, uintptr_t src, size_t n, CUstream s)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = src;
    c.dstDevice = dst;
    c.WidthInBytes = n;
    c.Height = c.Depth = 1;
    return capture_node(s, add_copy, &c);
}

CUresult fg_capture_host(CUstream s, CUhostFn fn, void *data)
{
    CUDA_HOST_NODE_PARAMS p = { fn, data };
    return capture_node(s, add_host, &p);
}

// ---- the capture calls -------------------------------------------------------------------

static CUresult begin(CUstream s, CUgraph graph, const CUgraphNode *deps, size_t n,
                      CUstreamCaptureMode mode)
{
    struct fg_ctx *ctx;
    fg_lock();
    CUresult r = fg_enter(0, &ctx, NULL);
    if (r == CUDA_SUCCESS && (s == NULL || s == CU_STREAM_LEGACY))
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream never captures
    else if (r == CUDA_SUCCESS)
        r = fg_check_stream(s);
    fg_unlock();
    int made = 0;
    if (r == CUDA_SUCCESS && !graph) {
        r = cuGraphCreate(&graph, 0);
        made = r == CUDA_SUCCESS;
    }
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = NULL;
    int busy = find(s) != NULL;
    for (int i = 0; !busy && !c && i < MAX_CAPTURES; i++)
        if (!captures[i].stream)
            c = &captures[i];
    if (busy)
        r = CUDA_ERROR_ILLEGAL_STATE;               // it captures already
    else if (!c)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        *c = (struct capture){ s, graph, made, 0, ++next_id, NULL, NULL, 0, 0, pthread_self(),
                               mode };
        r = set_deps(c, deps, n);
        if (r != CUDA_SUCCESS)
            c->stream = NULL;
        else
            __atomic_add_fetch(&active, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&capture_lock);
    if (r != CUDA_SUCCESS && made)
        cuGraphDestroy(graph);
    return r;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return begin(s, NULL, NULL, 0, mode);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture_v2(per_thread(s), mode);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph graph,
                                             const CUgraphNode *deps,
                                             const CUgraphEdgeData *edges, size_t n,
                                             CUstreamCaptureMode mode)
{
    static const CUgraphEdgeData plain;
    if (!graph || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &plain, sizeof plain) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    return begin(s, graph, deps, n, mode);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph graph,
                                                  const CUgraphNode *deps,
                                                  const CUgraphEdgeData *edges, size_t n,
                                                  CUstreamCaptureMode mode)
{
    return cuStreamBeginCaptureToGraph(per_thread(s), graph, deps, edges, n, mode);
}

// Lock held: the capture slot is free again.
static void release(struct capture *c)
{
    free(c->deps);
    free(c->edges);
    *c = (struct capture){ 0 };
    __atomic_sub_fetch(&active, 1, __ATOMIC_RELEASE);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s), done = { 0 };
    if (c && c->joined) {
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;  // not begun on this stream
    }
    if (c && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(c->owner, pthread_self())) {
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c) {
        done = *c;
        done.deps = NULL;
        done.edges = NULL;
        // The streams that joined stop capturing with it; the events
        // recorded in it name a capture that is over.
        for (int i = 0; i < MAX_CAPTURES; i++)
            if (captures[i].stream && captures[i].id == done.id)
                release(&captures[i]);
        for (int i = 0; i < MAX_CAPTURE_EVENTS; i++)
            if (capture_events[i].event && capture_events[i].id == done.id)
                event_forget_locked(&capture_events[i]);
    }
    pthread_mutex_unlock(&capture_lock);
    if (!c)
        return CUDA_ERROR_ILLEGAL_STATE;            // not capturing
    if (done.invalid) {
        if (done.made_graph)
            cuGraphDestroy(done.graph);
        *out = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = done.graph;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph *out)
{
    return cuStreamEndCapture(per_thread(s), out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph,
                                           const CUgraphNode **deps,
                                           const CUgraphEdgeData **edges, size_t *n)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
                 : c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id)
        *id = c ? c->id : 0;
    if (graph)
        *graph = c ? c->graph : NULL;
    if (deps)
        *deps = c ? c->deps : NULL;     // valid until the capture's next change
    if (edges)
        *edges = c ? c->edges : NULL;
    if (n)
        *n = c ? c->n : 0;
    pthread_mutex_unlock(&capture_lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                                cuuint64_t *id, CUgraph *graph,
                                                const CUgraphNode **deps,
                                                const CUgraphEdgeData **edges, size_t *n)
{
    return cuStreamGetCaptureInfo_v3(per_thread(s), status, id, graph, deps, edges, n);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return cuStreamGetCaptureInfo_v3(s, status, NULL, NULL, NULL, NULL, NULL);
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    return cuStreamIsCapturing(per_thread(s), status);
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
                                                      const CUgraphEdgeData *edges, size_t n,
                                                      unsigned int flags)
{
    (void)edges;
    if ((n && !deps) || (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
                         flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    CUresult r = !c || c->invalid ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
    CUgraphNode *all = NULL;
    size_t total = n;
    if (r == CUDA_SUCCESS && flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES) {
        total = c->n + n;
        all = total ? malloc(total * sizeof *all) : NULL;
        if (total && !all)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (total) {
            memcpy(all, c->deps, c->n * sizeof *all);
            memcpy(all + c->n, deps, n * sizeof *all);
        }
    }
    if (r == CUDA_SUCCESS)
        r = set_deps(c, all ? all : deps, total);
    pthread_mutex_unlock(&capture_lock);
    free(all);
    return r;
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode *deps,
                                                           const CUgraphEdgeData *edges,
                                                           size_t n, unsigned int flags)
{
    return cuStreamUpdateCaptureDependencies_v2(per_thread(s), deps, edges, n, flags);
}
