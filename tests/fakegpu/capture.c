// Stream capture (cuStreamBeginCapture_v2 and its kin): while a stream
// captures, its kernel launches, asynchronous copies and host functions
// become nodes of the capture's graph (graph.c) after the capture's current
// dependencies, which the new node then replaces, instead of running.  Any
// other work on a capturing stream, a synchronise or a query of it, is
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, whose
// end then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as a GPU's
// does.  Streams capture one at a time per stream; the legacy stream never
// does.  Cross-stream capture (events), capture modes and stream callbacks
// in a capture are not modelled.
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

int fg_capture_refused(CUstream s)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s);
    if (c)
        c->invalid = 1;
    pthread_mutex_unlock(&capture_lock);
    return c != NULL;
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

static CUresult begin(CUstream s, CUgraph graph, const CUgraphNode *deps, size_t n)
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
        *c = (struct capture){ s, graph, made, 0, ++next_id, NULL, NULL, 0 };
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
    (void)mode;
    return begin(s, NULL, NULL, 0);
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
    (void)mode;
    if (!graph || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &plain, sizeof plain) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    return begin(s, graph, deps, n);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph graph,
                                                  const CUgraphNode *deps,
                                                  const CUgraphEdgeData *edges, size_t n,
                                                  CUstreamCaptureMode mode)
{
    return cuStreamBeginCaptureToGraph(per_thread(s), graph, deps, edges, n, mode);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find(s), done = { 0 };
    if (c) {
        done = *c;
        c->stream = NULL;
        c->deps = NULL;
        c->edges = NULL;
        __atomic_sub_fetch(&active, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&capture_lock);
    free(done.deps);
    free(done.edges);
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
