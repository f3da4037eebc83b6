/* Graph host nodes and graph copies to or from host memory, server side
 * (client side common/rgpu_graph_host.c and the stubs' *_graph_host.c),
 * for the runtime and the driver: the serve_ functions of rgpu's own
 * rgpu_graph_host_node, rgpu_graph_host_params, rgpu_graph_host_copy,
 * rgpu_capture_host_copy, rgpu_graph_launch and their driver twins
 * (codegen/cudart_own.h, codegen/cuda_own.h), one implementation for both.
 *
 * The program's function and memory stay on the client.  What a graph of
 * the session holds in their place is a host node of ours whose data is a
 * record of the client's token; when the graph runs and reaches it, the
 * driver calls rec_run on one of its threads, which sends the callback
 * frame and waits for the client's answer (host_functions_run_node): work
 * that depends on the node waits for the program's function, the rest of
 * the graph and other streams do not, as natively.
 *
 * A copy node between host memory and the device is a child graph node of
 * two nodes of ours: to the device, a host node whose answer brings the
 * program's bytes into a staging buffer of the record, then a copy from
 * that buffer to the device; to the host, a copy from the device into the
 * buffer, then a host node that sends the buffer's bytes, which the client
 * writes into the program's memory before it answers.  So the host bytes
 * are read or written when the node runs, each time the graph runs, in
 * graph order.  The node is a memcpy node to the program
 * (cudaGraphNodeGetType answers so): it is known by its shape, so clones,
 * child graphs and executable graphs of it are too.
 *
 * Records live as long as the session: graphs and executable graphs copy
 * nodes where the session cannot follow (clones, instantiations, updates),
 * so a node naming a record may run at any time; a record is never freed
 * from under one, and a run for a destroyed executable graph cannot be.
 * A client names the same token for the same function or region, so a
 * loop of setters adds nothing; a session holds at most MAX_RECORDS
 * records and MAX_STAGED bytes of staging.  Nothing from the wire is an
 * address here: a token is a number the client gets back, a device side
 * is checked against the session's memory over its whole extent, the
 * host side is the record's own buffer. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cudart_procs.h"
#include "cudart_serve.h"
#include "cuda_procs.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RT(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define MAX_RECORDS 65536
#define MAX_STAGED (1ull << 30)     /* staging bytes per session */
#define MAX_DEPTH 16                /* child graphs looked into */

static uint32_t H_GRAPH_NODE;

__attribute__((constructor)) static void host_classes_init(void)
{
    H_GRAPH_NODE = rgpu_handle_class("CUgraphNode_st");
}

/* The statuses the runtime and the driver share (the same numbers). */
enum {
    E_INVALID_VALUE = 1,            /* cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE */
    E_OUT_OF_MEMORY = 2,            /* cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY */
    E_INVALID_HANDLE = 400,         /* cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE */
    E_NOT_SUPPORTED = 801,          /* cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED */
};
_Static_assert(cudaErrorInvalidResourceHandle == (int)CUDA_ERROR_INVALID_HANDLE, "statuses");
_Static_assert(cudaErrorNotSupported == (int)CUDA_ERROR_NOT_SUPPORTED, "statuses");
_Static_assert(cudaGraphNodeTypeHost == (int)CU_GRAPH_NODE_TYPE_HOST, "node types");
_Static_assert(cudaGraphNodeTypeGraph == (int)CU_GRAPH_NODE_TYPE_GRAPH, "node types");
_Static_assert(cudaGraphNodeTypeMemcpy == (int)CU_GRAPH_NODE_TYPE_MEMCPY, "node types");
_Static_assert(cudaGraphNodeTypeConditional == (int)CU_GRAPH_NODE_TYPE_CONDITIONAL, "node types");
_Static_assert(sizeof(struct cudaHostNodeParams) == sizeof(CUDA_HOST_NODE_PARAMS), "host params");

/* ---- records ----------------------------------------------------------------------- */

enum rec_kind { REC_FUNCTION = 0, REC_TO_DEVICE = RGPU_COPY_TO_DEVICE,
                REC_TO_HOST = RGPU_COPY_TO_HOST };

struct host_rec {
    uint64_t token;             /* the client's name for it */
    int kind;
    size_t bytes;               /* a copy's */
    unsigned char *staging;     /* a copy's bytes on their way */
};

static struct {
    pthread_mutex_t lock;
    struct host_rec **v;
    size_t n, cap;
    uint64_t staged;
} R = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

static int records_exist(void)
{
    return __atomic_load_n(&R.n, __ATOMIC_RELAXED) != 0;
}

/* Page-locked where the driver lets us, as the copy staging is
 * (daemon/copy.c): the driver's DMA then reads and writes it directly.  A
 * copy captured into a graph makes its record while the thread captures,
 * when the global capture mode forbids such calls: the registration is
 * made in the relaxed mode, as a library makes its own allocations. */
static void pin(void *p, size_t bytes)
{
    __typeof__(&cuMemHostRegister_v2) reg = DRV(cuMemHostRegister_v2);
    __typeof__(&cuThreadExchangeStreamCaptureMode) swap = DRV(cuThreadExchangeStreamCaptureMode);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    int swapped = swap && swap(&mode) == CUDA_SUCCESS;
    CUresult rc = reg ? reg(p, bytes, CU_MEMHOSTREGISTER_PORTABLE) : CUDA_ERROR_NOT_SUPPORTED;
    if (swapped)
        swap(&mode);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        rgpu_debug("graph copy staging (%zu bytes) stays pageable: cuMemHostRegister returned %d",
                   bytes, (int)rc);
}

/* Lock held: a new record, or NULL past the session's limits. */
static struct host_rec *rec_new(uint64_t token, int kind, size_t bytes)
{
    void *staging = NULL;
    size_t rounded = (bytes + 4095) & ~(size_t)4095;
    if (R.n >= MAX_RECORDS || R.staged + rounded > MAX_STAGED)
        return NULL;
    if (R.n == R.cap) {
        size_t cap = R.cap ? R.cap * 2 : 64;
        struct host_rec **v = realloc(R.v, cap * sizeof *v);
        if (!v)
            return NULL;
        R.v = v;
        R.cap = cap;
    }
    struct host_rec *r = calloc(1, sizeof *r);
    if (!r || (kind != REC_FUNCTION && posix_memalign(&staging, 4096, rounded) != 0)) {
        free(r);
        return NULL;
    }
    *r = (struct host_rec){ token, kind, bytes, staging };
    if (staging) {
        memset(staging, 0, rounded);
        pin(staging, rounded);
        R.staged += rounded;
    }
    R.v[R.n++] = r;
    return r;
}

/* The record of token, made on first use; NULL with *status set when the
 * token stands for something else already, or no more can be made. */
static struct host_rec *rec_for(uint64_t token, int kind, size_t bytes, int *status)
{
    struct host_rec *r = NULL;
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.n && !r; i++)
        if (R.v[i]->token == token)
            r = R.v[i];
    if (r && (r->kind != kind || r->bytes != bytes)) {
        rgpu_warn("graph host node: refused token %llu for another function or region than "
                  "it was made for", (unsigned long long)token);
        r = NULL;
        *status = E_INVALID_VALUE;
    } else if (!r && token && !(r = rec_new(token, kind, bytes))) {
        rgpu_warn("graph host node: no room for token %llu (at most %d functions and regions, "
                  "%llu MiB of copy staging per session)", (unsigned long long)token,
                  MAX_RECORDS, (unsigned long long)(MAX_STAGED >> 20));
        *status = E_OUT_OF_MEMORY;
    } else if (!token) {
        *status = E_INVALID_VALUE;
    }
    pthread_mutex_unlock(&R.lock);
    return r;
}

/* Whether p is one of the records (a node of ours names it). */
static int rec_known(const void *p)
{
    int found = 0;
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.n && !found; i++)
        found = R.v[i] == p;
    pthread_mutex_unlock(&R.lock);
    return found;
}

/* ---- on the driver's thread, when a node runs ---------------------------------------- */

static void run_record(const struct host_rec *r, int status)
{
    host_functions_run_node(r->token, status, r->kind == REC_TO_HOST ? r->staging : NULL,
                            r->kind == REC_TO_HOST ? r->bytes : 0,
                            r->kind == REC_TO_DEVICE ? r->staging : NULL,
                            r->kind == REC_TO_DEVICE ? r->bytes : 0);
}

static void CUDA_CB rec_run(void *data)
{
    run_record(data, 0);
}

/* A stream callback captured into a graph: the status the driver passes. */
static void CUDA_CB rec_callback(CUstream stream, CUresult status, void *data)
{
    (void)stream;
    run_record(data, (int)status);
}

/* ---- the two libraries' graph calls -------------------------------------------------- */

/* A copy as the driver describes it; the runtime's record is made from it. */
typedef CUDA_MEMCPY3D copy3d;

struct ops {
    int runtime;
    int (*add_host)(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n, void *rec);
    int (*set_host)(uint64_t node, void *rec);
    int (*exec_set_host)(uint64_t exec, uint64_t node, void *rec);
    int (*get_host)(uint64_t node, void **fn, void **data);
    int (*add_copy)(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                    const copy3d *p, uint64_t ctx);
    int (*set_copy)(uint64_t node, const copy3d *p);
    int (*add_child)(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                     uint64_t child);
    int (*child_graph)(uint64_t node, uint64_t *graph);
    int (*exec_set_child)(uint64_t exec, uint64_t node, uint64_t child);
    int (*graph_create)(uint64_t *graph);
    int (*graph_destroy)(uint64_t graph);
    int (*node_destroy)(uint64_t node);
    int (*nodes)(uint64_t graph, CUgraphNode *nodes, size_t *count);
    int (*type)(uint64_t node, int *type);
    int (*add_deps)(uint64_t graph, const CUgraphNode *from, const CUgraphNode *to,
                    const CUgraphEdgeData *edges, size_t n);
    /* the capture of stream: 1 with its graph and dependencies, 0 when it
     * does not capture, or minus a status */
    int (*capture)(uint64_t stream, uint64_t *graph, const CUgraphNode **deps,
                   const CUgraphEdgeData **edges, size_t *n);
    int (*capture_set)(uint64_t stream, CUgraphNode node);
    int (*launch)(uint64_t exec, uint64_t stream, int ptsz);
};

#define CALL_OR_NOSYM(fn, ...) ((fn) ? (int)(fn)(__VA_ARGS__) : -RGPU_ENOSYM)

/* The runtime's 3D copy record of a driver one (linear memory only). */
static struct cudaMemcpy3DParms rt_copy(const copy3d *p)
{
    struct cudaMemcpy3DParms r;
    memset(&r, 0, sizeof r);
    int from_host = p->srcMemoryType == CU_MEMORYTYPE_HOST;
    int to_host = p->dstMemoryType == CU_MEMORYTYPE_HOST;
    void *src = from_host ? (void *)p->srcHost : (void *)(uintptr_t)p->srcDevice;
    void *dst = to_host ? p->dstHost : (void *)(uintptr_t)p->dstDevice;
    r.srcPtr = (struct cudaPitchedPtr){ src, p->srcPitch, p->srcPitch, p->srcHeight };
    r.dstPtr = (struct cudaPitchedPtr){ dst, p->dstPitch, p->dstPitch, p->dstHeight };
    r.srcPos = (struct cudaPos){ p->srcXInBytes, p->srcY, p->srcZ };
    r.dstPos = (struct cudaPos){ p->dstXInBytes, p->dstY, p->dstZ };
    r.extent = (struct cudaExtent){ p->WidthInBytes, p->Height, p->Depth };
    r.kind = from_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    return r;
}

static int rt_add_host(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                       void *rec)
{
    struct cudaHostNodeParams p = { rec_run, rec };
    cudaGraphNode_t node = NULL;
    int rc = CALL_OR_NOSYM(RT(cudaGraphAddHostNode), &node, (cudaGraph_t)graph,
                           (const cudaGraphNode_t *)deps, n, &p);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int rt_set_host(uint64_t node, void *rec)
{
    struct cudaHostNodeParams p = { rec_run, rec };
    return CALL_OR_NOSYM(RT(cudaGraphHostNodeSetParams), (cudaGraphNode_t)node, &p);
}

static int rt_exec_set_host(uint64_t exec, uint64_t node, void *rec)
{
    struct cudaHostNodeParams p = { rec_run, rec };
    return CALL_OR_NOSYM(RT(cudaGraphExecHostNodeSetParams), (cudaGraphExec_t)exec,
                         (cudaGraphNode_t)node, &p);
}

static int rt_get_host(uint64_t node, void **fn, void **data)
{
    struct cudaHostNodeParams p = { NULL, NULL };
    int rc = CALL_OR_NOSYM(RT(cudaGraphHostNodeGetParams), (cudaGraphNode_t)node, &p);
    *fn = (void *)p.fn;
    *data = p.userData;
    return rc;
}

static int rt_add_copy(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                       const copy3d *c, uint64_t ctx)
{
    (void)ctx;
    struct cudaMemcpy3DParms p = rt_copy(c);
    cudaGraphNode_t node = NULL;
    int rc = CALL_OR_NOSYM(RT(cudaGraphAddMemcpyNode), &node, (cudaGraph_t)graph,
                           (const cudaGraphNode_t *)deps, n, &p);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int rt_set_copy(uint64_t node, const copy3d *c)
{
    struct cudaMemcpy3DParms p = rt_copy(c);
    return CALL_OR_NOSYM(RT(cudaGraphMemcpyNodeSetParams), (cudaGraphNode_t)node, &p);
}

static int rt_add_child(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                        uint64_t child)
{
    cudaGraphNode_t node = NULL;
    int rc = CALL_OR_NOSYM(RT(cudaGraphAddChildGraphNode), &node, (cudaGraph_t)graph,
                           (const cudaGraphNode_t *)deps, n, (cudaGraph_t)child);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int rt_child_graph(uint64_t node, uint64_t *graph)
{
    cudaGraph_t g = NULL;
    int rc = CALL_OR_NOSYM(RT(cudaGraphChildGraphNodeGetGraph), (cudaGraphNode_t)node, &g);
    *graph = (uint64_t)(uintptr_t)g;
    return rc;
}

static int rt_exec_set_child(uint64_t exec, uint64_t node, uint64_t child)
{
    return CALL_OR_NOSYM(RT(cudaGraphExecChildGraphNodeSetParams), (cudaGraphExec_t)exec,
                         (cudaGraphNode_t)node, (cudaGraph_t)child);
}

static int rt_graph_create(uint64_t *graph)
{
    cudaGraph_t g = NULL;
    int rc = CALL_OR_NOSYM(RT(cudaGraphCreate), &g, 0);
    *graph = (uint64_t)(uintptr_t)g;
    return rc;
}

static int rt_graph_destroy(uint64_t graph)
{
    return CALL_OR_NOSYM(RT(cudaGraphDestroy), (cudaGraph_t)graph);
}

static int rt_node_destroy(uint64_t node)
{
    return CALL_OR_NOSYM(RT(cudaGraphDestroyNode), (cudaGraphNode_t)node);
}

static int rt_nodes(uint64_t graph, CUgraphNode *nodes, size_t *count)
{
    return CALL_OR_NOSYM(RT(cudaGraphGetNodes), (cudaGraph_t)graph, (cudaGraphNode_t *)nodes,
                         count);
}

static int rt_type(uint64_t node, int *type)
{
    enum cudaGraphNodeType t = cudaGraphNodeTypeEmpty;
    int rc = CALL_OR_NOSYM(RT(cudaGraphNodeGetType), (cudaGraphNode_t)node, &t);
    *type = (int)t;
    return rc;
}

static int rt_add_deps(uint64_t graph, const CUgraphNode *from, const CUgraphNode *to,
                       const CUgraphEdgeData *edges, size_t n)
{
    return CALL_OR_NOSYM(RT(cudaGraphAddDependencies), (cudaGraph_t)graph,
                         (const cudaGraphNode_t *)from, (const cudaGraphNode_t *)to,
                         (const cudaGraphEdgeData *)edges, n);
}

static int rt_capture(uint64_t stream, uint64_t *graph, const CUgraphNode **deps,
                      const CUgraphEdgeData **edges, size_t *n)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaGraph_t g = NULL;
    if (!RT(cudaStreamGetCaptureInfo))
        return 0;       /* a library without capture captures nothing */
    int rc = RT(cudaStreamGetCaptureInfo)((cudaStream_t)stream, &st, NULL, &g,
                                          (const cudaGraphNode_t **)deps,
                                          (const cudaGraphEdgeData **)edges, n);
    *graph = (uint64_t)(uintptr_t)g;
    return rc != 0 ? -rc : st == cudaStreamCaptureStatusActive;
}

static int rt_capture_set(uint64_t stream, CUgraphNode node)
{
    cudaGraphNode_t n = (cudaGraphNode_t)node;
    return CALL_OR_NOSYM(RT(cudaStreamUpdateCaptureDependencies), (cudaStream_t)stream, &n, NULL,
                         1, cudaStreamSetCaptureDependencies);
}

/* The _ptsz form has the same type (cuda_runtime_api.h declares it only
 * under per-thread default streams). */
static int rt_launch(uint64_t exec, uint64_t stream, int ptsz)
{
    __typeof__(&cudaGraphLaunch) launch =
        (__typeof__(&cudaGraphLaunch))backend_sym("cudart", ptsz ? "cudaGraphLaunch_ptsz"
                                                                 : "cudaGraphLaunch");
    return CALL_OR_NOSYM(launch, (cudaGraphExec_t)exec, (cudaStream_t)stream);
}

static const struct ops runtime_ops = {
    1, rt_add_host, rt_set_host, rt_exec_set_host, rt_get_host, rt_add_copy, rt_set_copy,
    rt_add_child, rt_child_graph, rt_exec_set_child, rt_graph_create, rt_graph_destroy,
    rt_node_destroy, rt_nodes, rt_type, rt_add_deps, rt_capture, rt_capture_set, rt_launch,
};

static int cu_add_host(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                       void *rec)
{
    CUDA_HOST_NODE_PARAMS p = { rec_run, rec };
    CUgraphNode node = NULL;
    int rc = CALL_OR_NOSYM(DRV(cuGraphAddHostNode), &node, (CUgraph)graph, deps, n, &p);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int cu_set_host(uint64_t node, void *rec)
{
    CUDA_HOST_NODE_PARAMS p = { rec_run, rec };
    return CALL_OR_NOSYM(DRV(cuGraphHostNodeSetParams), (CUgraphNode)node, &p);
}

static int cu_exec_set_host(uint64_t exec, uint64_t node, void *rec)
{
    CUDA_HOST_NODE_PARAMS p = { rec_run, rec };
    return CALL_OR_NOSYM(DRV(cuGraphExecHostNodeSetParams), (CUgraphExec)exec,
                         (CUgraphNode)node, &p);
}

static int cu_get_host(uint64_t node, void **fn, void **data)
{
    CUDA_HOST_NODE_PARAMS p = { NULL, NULL };
    int rc = CALL_OR_NOSYM(DRV(cuGraphHostNodeGetParams), (CUgraphNode)node, &p);
    *fn = (void *)p.fn;
    *data = p.userData;
    return rc;
}

/* A copy runs in the context the client named, else (a capture names
 * none) in the thread's current one, as the stream's work would. */
static int cu_add_copy(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                       const copy3d *p, uint64_t ctx)
{
    CUgraphNode node = NULL;
    CUcontext c = (CUcontext)ctx;
    if (!c && DRV(cuCtxGetCurrent))
        DRV(cuCtxGetCurrent)(&c);
    int rc = CALL_OR_NOSYM(DRV(cuGraphAddMemcpyNode), &node, (CUgraph)graph, deps, n, p, c);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int cu_set_copy(uint64_t node, const copy3d *p)
{
    return CALL_OR_NOSYM(DRV(cuGraphMemcpyNodeSetParams), (CUgraphNode)node, p);
}

static int cu_add_child(uint64_t *made, uint64_t graph, const CUgraphNode *deps, size_t n,
                        uint64_t child)
{
    CUgraphNode node = NULL;
    int rc = CALL_OR_NOSYM(DRV(cuGraphAddChildGraphNode), &node, (CUgraph)graph, deps, n,
                           (CUgraph)child);
    *made = (uint64_t)(uintptr_t)node;
    return rc;
}

static int cu_child_graph(uint64_t node, uint64_t *graph)
{
    CUgraph g = NULL;
    int rc = CALL_OR_NOSYM(DRV(cuGraphChildGraphNodeGetGraph), (CUgraphNode)node, &g);
    *graph = (uint64_t)(uintptr_t)g;
    return rc;
}

static int cu_exec_set_child(uint64_t exec, uint64_t node, uint64_t child)
{
    return CALL_OR_NOSYM(DRV(cuGraphExecChildGraphNodeSetParams), (CUgraphExec)exec,
                         (CUgraphNode)node, (CUgraph)child);
}

static int cu_graph_create(uint64_t *graph)
{
    CUgraph g = NULL;
    int rc = CALL_OR_NOSYM(DRV(cuGraphCreate), &g, 0);
    *graph = (uint64_t)(uintptr_t)g;
    return rc;
}

static int cu_graph_destroy(uint64_t graph)
{
    return CALL_OR_NOSYM(DRV(cuGraphDestroy), (CUgraph)graph);
}

static int cu_node_destroy(uint64_t node)
{
    return CALL_OR_NOSYM(DRV(cuGraphDestroyNode), (CUgraphNode)node);
}

static int cu_nodes(uint64_t graph, CUgraphNode *nodes, size_t *count)
{
    return CALL_OR_NOSYM(DRV(cuGraphGetNodes), (CUgraph)graph, nodes, count);
}

static int cu_type(uint64_t node, int *type)
{
    CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
    int rc = CALL_OR_NOSYM(DRV(cuGraphNodeGetType), (CUgraphNode)node, &t);
    *type = (int)t;
    return rc;
}

static int cu_add_deps(uint64_t graph, const CUgraphNode *from, const CUgraphNode *to,
                       const CUgraphEdgeData *edges, size_t n)
{
    return CALL_OR_NOSYM(DRV(cuGraphAddDependencies_v2), (CUgraph)graph, from, to, edges, n);
}

static int cu_capture(uint64_t stream, uint64_t *graph, const CUgraphNode **deps,
                      const CUgraphEdgeData **edges, size_t *n)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph g = NULL;
    if (!DRV(cuStreamGetCaptureInfo_v3))
        return 0;
    int rc = DRV(cuStreamGetCaptureInfo_v3)((CUstream)stream, &st, NULL, &g, deps, edges, n);
    *graph = (uint64_t)(uintptr_t)g;
    return rc != 0 ? -rc : st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static int cu_capture_set(uint64_t stream, CUgraphNode node)
{
    return CALL_OR_NOSYM(DRV(cuStreamUpdateCaptureDependencies_v2), (CUstream)stream, &node,
                         NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

static int cu_launch(uint64_t exec, uint64_t stream, int ptsz)
{
    __typeof__(&cuGraphLaunch) launch =
        (__typeof__(&cuGraphLaunch))backend_sym("cuda", ptsz ? "cuGraphLaunch_ptsz"
                                                             : "cuGraphLaunch");
    return CALL_OR_NOSYM(launch, (CUgraphExec)exec, (CUstream)stream);
}

static const struct ops driver_ops = {
    0, cu_add_host, cu_set_host, cu_exec_set_host, cu_get_host, cu_add_copy, cu_set_copy,
    cu_add_child, cu_child_graph, cu_exec_set_child, cu_graph_create, cu_graph_destroy,
    cu_node_destroy, cu_nodes, cu_type, cu_add_deps, cu_capture, cu_capture_set, cu_launch,
};

static const struct ops *ops_of(int runtime)
{
    return runtime ? &runtime_ops : &driver_ops;
}

/* ---- copy nodes: a child graph of a host node and a copy ------------------------------- */

struct copy_node {
    struct host_rec *rec;
    copy3d p;           /* between the record's staging and the device */
    uint64_t ctx;       /* the driver's copy context */
};

/* Into graph (empty): to the device, host node then copy; to the host,
 * copy then host node.  Always in this order, so that two of the same
 * direction have the same shape (cudaGraphExecChildGraphNodeSetParams
 * compares the order of insertion too). */
static int build_copy(const struct ops *o, uint64_t graph, const struct copy_node *c)
{
    uint64_t first = 0, second = 0;
    int rc;
    if (c->rec->kind == REC_TO_DEVICE) {
        rc = o->add_host(&first, graph, NULL, 0, c->rec);
        if (rc == 0)
            rc = o->add_copy(&second, graph, (CUgraphNode *)&first, 1, &c->p, c->ctx);
    } else {
        rc = o->add_copy(&first, graph, NULL, 0, &c->p, c->ctx);
        if (rc == 0)
            rc = o->add_host(&second, graph, (CUgraphNode *)&first, 1, c->rec);
    }
    return rc;
}

/* A new graph holding the copy's two nodes, for a child graph node. */
static int copy_graph(const struct ops *o, const struct copy_node *c, uint64_t *graph)
{
    int rc = o->graph_create(graph);
    if (rc == 0 && (rc = build_copy(o, *graph, c)) != 0) {
        o->graph_destroy(*graph);
        *graph = 0;
    }
    return rc;
}

/* The parts of a copy node of ours: its embedded graph, the host node and
 * the copy node in it, and the record.  0 when node is no such node. */
struct copy_parts {
    uint64_t graph, host, copy;
    struct host_rec *rec;
};

static int is_rec_fn(void *fn)
{
    return fn == (void *)rec_run;
}

static int copy_parts(const struct ops *o, uint64_t node, struct copy_parts *parts)
{
    CUgraphNode inner[3];
    size_t count = 3;
    int type = 0;
    void *fn = NULL, *data = NULL;
    memset(parts, 0, sizeof *parts);
    if (o->type(node, &type) != 0 || type != CU_GRAPH_NODE_TYPE_GRAPH ||
        o->child_graph(node, &parts->graph) != 0 || o->nodes(parts->graph, inner, &count) != 0 ||
        count != 2)
        return 0;
    for (size_t i = 0; i < 2; i++) {
        uint64_t h = (uint64_t)(uintptr_t)inner[i];
        if (o->type(h, &type) != 0)
            return 0;
        if (type == CU_GRAPH_NODE_TYPE_HOST)
            parts->host = h;
        else if (type == CU_GRAPH_NODE_TYPE_MEMCPY)
            parts->copy = h;
    }
    if (!parts->host || !parts->copy || o->get_host(parts->host, &fn, &data) != 0 ||
        !is_rec_fn(fn) || !rec_known(data))
        return 0;
    parts->rec = data;
    return parts->rec->kind != REC_FUNCTION;
}

int graph_host_is_copy_node(uint64_t node, int runtime)
{
    struct copy_parts parts;
    return records_exist() && copy_parts(ops_of(runtime), node, &parts);
}

/* New parameters for a copy node of ours in its graph: the same direction
 * sets its two nodes, another rebuilds its embedded graph (the node keeps
 * its handle and edges, as natively). */
static int set_copy_node(const struct ops *o, const struct copy_parts *parts,
                         const struct copy_node *c)
{
    if (parts->rec->kind == c->rec->kind) {
        int rc = o->set_host(parts->host, c->rec);
        return rc == 0 ? o->set_copy(parts->copy, &c->p) : rc;
    }
    int rc = o->node_destroy(parts->host);
    if (rc == 0)
        rc = o->node_destroy(parts->copy);
    return rc == 0 ? build_copy(o, parts->graph, c) : rc;
}

/* In an executable graph: a graph of the same shape replaces the
 * embedded one's parameters; another direction changes what the copy's
 * memory is, which an executable graph does not take natively either. */
static int exec_set_copy_node(const struct ops *o, uint64_t exec, uint64_t node,
                              const struct copy_parts *parts, const struct copy_node *c)
{
    uint64_t graph = 0;
    if (parts->rec->kind != c->rec->kind) {
        rgpu_warn("graph copy node: an executable graph's copy may not change direction");
        return E_INVALID_VALUE;
    }
    int rc = copy_graph(o, c, &graph);
    if (rc == 0) {
        rc = o->exec_set_child(exec, node, graph);
        o->graph_destroy(graph);
    }
    return rc;
}

/* ---- the requests --------------------------------------------------------------------- */

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* A node operation as both libraries' procedures name it. */
struct node_req {
    int op;
    uint64_t graph, exec, node;
    const CUgraphNode *deps;
    size_t ndeps;
};

/* The operation, each handle it names the session's (the codec let NULL
 * through).  0, -1 for a request no client sends, or the library's
 * status. */
static int check_node_req(const struct node_req *r)
{
    int known;
    if (r->op < RGPU_GRAPH_NODE_ADD || r->op > RGPU_GRAPH_EXEC_SET ||
        graph_deps_malformed(r->deps, r->ndeps) || (r->op != RGPU_GRAPH_NODE_ADD && r->ndeps))
        return -1;
    switch (r->op) {
    case RGPU_GRAPH_NODE_ADD:
        known = handles_contains(H_GRAPH, r->graph) && graph_deps_known(r->deps, r->ndeps);
        break;
    case RGPU_GRAPH_NODE_SET:
        known = handles_contains(H_GRAPH_NODE, r->node);
        break;
    default:
        known = handles_contains(H_GRAPH_EXEC, r->exec) && handles_contains(H_GRAPH_NODE, r->node);
        break;
    }
    if (!known) {
        rgpu_warn("graph host node: refused a graph, executable graph or node the session never "
                  "handed out");
        return E_INVALID_HANDLE;
    }
    return 0;
}

/* The status to answer: a request no client sends (-1, -RGPU_EPROTO) ends
 * the session, a missing symbol says so; *made the node added (op ADD), which the codec
 * adds to the session's table. */
static int node_answer(int rc, const struct node_req *r, uint64_t node, CUgraphNode *made)
{
    if (made)
        *made = rc == 0 && r->op == RGPU_GRAPH_NODE_ADD ? (CUgraphNode)(uintptr_t)node : NULL;
    return rc < 0 ? serve_transport(-rc) : rc;
}

/* A host node naming token's function and data. */
static int graph_host_node(const struct ops *o, const struct node_req *r, uint64_t token,
                           CUgraphNode *made)
{
    uint64_t node = 0;
    int rc = check_node_req(r);
    struct host_rec *rec = rc == 0 ? rec_for(token, REC_FUNCTION, 0, &rc) : NULL;
    if (rec && r->op == RGPU_GRAPH_NODE_ADD)
        rc = o->add_host(&node, r->graph, r->deps, r->ndeps, rec);
    else if (rec && r->op == RGPU_GRAPH_NODE_SET)
        rc = o->set_host(r->node, rec);
    else if (rec)
        rc = o->exec_set_host(r->exec, r->node, rec);
    return node_answer(rc, r, node, made);
}

cudaError_t serve_rgpu_graph_host_node(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                       cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                       size_t ndeps, uint64_t token, cudaGraphNode_t *made)
{
    const struct node_req r = { op, u64(graph), u64(exec), u64(node), (const CUgraphNode *)deps,
                                ndeps };
    return (cudaError_t)graph_host_node(&runtime_ops, &r, token, (CUgraphNode *)made);
}

CUresult serve_rgpu_cu_graph_host_node(int op, CUgraph graph, CUgraphExec exec, CUgraphNode node,
                                       const CUgraphNode *deps, size_t ndeps, uint64_t token,
                                       CUgraphNode *made)
{
    const struct node_req r = { op, u64(graph), u64(exec), u64(node), deps, ndeps };
    return (CUresult)graph_host_node(&driver_ops, &r, token, made);
}

/* The token of a host node of the program's (not one of a copy). */
static int graph_host_params(const struct ops *o, uint64_t node, uint64_t *token)
{
    void *fn = NULL, *data = NULL;
    if (!token)
        return E_INVALID_VALUE;
    int rc = handles_contains(H_GRAPH_NODE, node) ? o->get_host(node, &fn, &data)
                                                  : E_INVALID_HANDLE;
    if (rc < 0)
        return serve_transport(-rc);
    if (rc == 0 && (!is_rec_fn(fn) || !rec_known(data) ||
                    ((struct host_rec *)data)->kind != REC_FUNCTION))
        rc = E_INVALID_VALUE;
    *token = rc == 0 ? ((struct host_rec *)data)->token : 0;
    return rc;
}

cudaError_t serve_rgpu_graph_host_params(cudaGraphNode_t node, uint64_t *token)
{
    return (cudaError_t)graph_host_params(&runtime_ops, u64(node), token);
}

CUresult serve_rgpu_cu_graph_host_params(CUgraphNode node, uint64_t *token)
{
    return (CUresult)graph_host_params(&driver_ops, u64(node), token);
}

/* A copy as the wire describes it (common/rgpu_graph_wire.h), and its
 * bytes once checked. */
struct copy_wire {
    struct rgpu_graph_copy c;
    size_t bytes;
};

/* The copy checked: a direction, an extent rgpu carries, and a device
 * side that is the session's memory over the whole extent.  0, -1 for a
 * request no client sends, or the library's status. */
static int parse_copy(const struct rgpu_graph_copy *c, struct copy_wire *cw)
{
    uint64_t bytes;
    if (!c || c->reserved)
        return -1;
    cw->c = *c;
    if ((c->direction != REC_TO_DEVICE && c->direction != REC_TO_HOST) || !c->width ||
        !c->height || !c->depth || __builtin_mul_overflow(c->width, c->height, &bytes) ||
        __builtin_mul_overflow(bytes, c->depth, &bytes) || bytes > RGPU_GRAPH_COPY_MAX) {
        rgpu_warn("graph copy node: refused a direction or extent rgpu does not carry");
        return E_INVALID_VALUE;
    }
    if (!graph_copy_side_owned(c->dev, c->x, c->y, c->z, c->pitch, c->rows, c->width, c->height,
                               c->depth)) {
        rgpu_warn("graph copy node: refused a device side outside the session's memory");
        return E_INVALID_VALUE;
    }
    cw->bytes = (size_t)bytes;
    return 0;
}

/* The copy between the token's record (made on first use) and the
 * device side.  0, or the library's status. */
static int copy_of(const struct copy_wire *cw, struct copy_node *cn)
{
    const struct rgpu_graph_copy *c = &cw->c;
    uint64_t w = c->width, h = c->height;
    int dir = (int)c->direction, rc = 0;
    cn->rec = rec_for(c->token, dir, cw->bytes, &rc);
    if (!cn->rec)
        return rc;
    memset(&cn->p, 0, sizeof cn->p);
    cn->p.WidthInBytes = w;
    cn->p.Height = h;
    cn->p.Depth = c->depth;
    /* The staging side is packed: pitch the width, rows the height. */
    CUmemorytype *dev_type = dir == REC_TO_DEVICE ? &cn->p.dstMemoryType : &cn->p.srcMemoryType;
    CUmemorytype *host_type = dir == REC_TO_DEVICE ? &cn->p.srcMemoryType : &cn->p.dstMemoryType;
    *dev_type = CU_MEMORYTYPE_DEVICE;
    *host_type = CU_MEMORYTYPE_HOST;
    if (dir == REC_TO_DEVICE) {
        cn->p.srcHost = cn->rec->staging;
        cn->p.srcPitch = w;
        cn->p.srcHeight = h;
        cn->p.dstDevice = c->dev;
        cn->p.dstPitch = c->pitch ? c->pitch : w;
        cn->p.dstHeight = c->rows ? c->rows : h;
        cn->p.dstXInBytes = c->x;
        cn->p.dstY = c->y;
        cn->p.dstZ = c->z;
    } else {
        cn->p.dstHost = cn->rec->staging;
        cn->p.dstPitch = w;
        cn->p.dstHeight = h;
        cn->p.srcDevice = c->dev;
        cn->p.srcPitch = c->pitch ? c->pitch : w;
        cn->p.srcHeight = c->rows ? c->rows : h;
        cn->p.srcXInBytes = c->x;
        cn->p.srcY = c->y;
        cn->p.srcZ = c->z;
    }
    return 0;
}

static int copy_request(const struct ops *o, const struct node_req *r, struct copy_node *cn,
                        uint64_t *made)
{
    struct copy_parts parts;
    uint64_t graph = 0;
    int ours = r->op != RGPU_GRAPH_NODE_ADD && copy_parts(o, r->node, &parts);
    switch (r->op) {
    case RGPU_GRAPH_NODE_ADD: {
        int rc = copy_graph(o, cn, &graph);
        if (rc == 0) {
            rc = o->add_child(made, r->graph, r->deps, r->ndeps, graph);
            o->graph_destroy(graph);    /* the node holds a copy */
        }
        return rc;
    }
    case RGPU_GRAPH_NODE_SET:
        if (ours)
            return set_copy_node(o, &parts, cn);
        rgpu_warn("graph copy node: a copy made between device buffers cannot take host memory "
                  "in rgpu; make the node with its host memory");
        return E_NOT_SUPPORTED;
    default:
        if (ours)
            return exec_set_copy_node(o, r->exec, r->node, &parts, cn);
        rgpu_warn("graph copy node: an executable graph's device copy cannot take host memory");
        return E_INVALID_VALUE;
    }
}

/* A copy node by op; ctx the driver's copy context (the codec checked it
 * as the session's or NULL), 0 for the runtime. */
static int graph_host_copy(const struct ops *o, const struct node_req *r,
                           const struct rgpu_graph_copy *copy, uint64_t ctx, CUgraphNode *made)
{
    struct copy_node cn = { 0 };
    struct copy_wire cw;
    uint64_t node = 0;
    cn.ctx = ctx;
    int rc = check_node_req(r);
    if (rc == 0)
        rc = parse_copy(copy, &cw);
    if (rc == 0)
        rc = copy_of(&cw, &cn);
    if (rc == 0)
        rc = copy_request(o, r, &cn, &node);
    return node_answer(rc < 0 ? -1 : rc, r, node, made);
}

cudaError_t serve_rgpu_graph_host_copy(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                       cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                       size_t ndeps, const struct rgpu_graph_copy *copy,
                                       cudaGraphNode_t *made)
{
    const struct node_req r = { op, u64(graph), u64(exec), u64(node), (const CUgraphNode *)deps,
                                ndeps };
    return (cudaError_t)graph_host_copy(&runtime_ops, &r, copy, 0, (CUgraphNode *)made);
}

CUresult serve_rgpu_cu_graph_host_copy(int op, CUgraph graph, CUgraphExec exec, CUgraphNode node,
                                       const CUgraphNode *deps, size_t ndeps,
                                       const struct rgpu_graph_copy *copy, CUcontext ctx,
                                       CUgraphNode *made)
{
    const struct node_req r = { op, u64(graph), u64(exec), u64(node), deps, ndeps };
    return (CUresult)graph_host_copy(&driver_ops, &r, copy, u64(ctx), made);
}

/* ---- captures ---------------------------------------------------------------------------- */

/* The stream as the call names it: 0 of a _ptsz call is the per-thread one
 * (cudaStreamPerThread and CU_STREAM_PER_THREAD are one value). */
static uint64_t stream_of(uint64_t stream, int ptsz)
{
    return stream == 0 && ptsz ? (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD : stream;
}

/* The copy as a node of stream's capture, after the capture's current
 * dependencies (with their edge data), and the capture's only dependency
 * from now on: what the library does with a copy it captures.  A stream
 * that does not capture makes no record. */
static int capture_copy(const struct ops *o, uint64_t stream, const struct copy_wire *cw,
                        int *captured)
{
    uint64_t graph = 0, child = 0, node = 0;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    struct copy_node cn = { 0 };
    size_t n = 0;
    int st = o->capture(stream, &graph, &deps, &edges, &n);
    *captured = st > 0;
    if (st <= 0)
        return -st;
    int rc = copy_of(cw, &cn);
    if (rc != 0)
        return rc;
    CUgraphNode *to = n ? malloc(n * sizeof *to) : NULL;
    if (n && !to)
        return E_OUT_OF_MEMORY;
    rc = copy_graph(o, &cn, &child);
    if (rc == 0) {
        rc = o->add_child(&node, graph, NULL, 0, child);
        o->graph_destroy(child);
    }
    for (size_t i = 0; i < n; i++)
        to[i] = (CUgraphNode)(uintptr_t)node;
    if (rc == 0 && n)
        rc = o->add_deps(graph, deps, to, edges, n);
    if (rc == 0)
        rc = o->capture_set(stream, (CUgraphNode)(uintptr_t)node);
    if (rc != 0 && node)
        o->node_destroy(node);
    free(to);
    return rc;
}

/* The codec checked the stream as the session's (or a default one). */
static int capture_host_copy(const struct ops *o, uint64_t stream, int ptsz,
                             const struct rgpu_graph_copy *copy, int *captured)
{
    struct copy_wire cw;
    int got = 0;
    if (ptsz != 0 && ptsz != 1)
        return serve_transport(RGPU_EPROTO);
    int rc = parse_copy(copy, &cw);
    if (rc == 0)
        rc = capture_copy(o, stream_of(stream, ptsz), &cw, &got);
    if (rc < 0)
        return serve_transport(RGPU_EPROTO);
    if (captured)
        *captured = got && rc == 0;
    return rc;
}

cudaError_t serve_rgpu_capture_host_copy(cudaStream_t stream, int ptsz,
                                         const struct rgpu_graph_copy *copy, int *captured)
{
    return (cudaError_t)capture_host_copy(&runtime_ops, u64(stream), ptsz, copy, captured);
}

CUresult serve_rgpu_cu_capture_host_copy(CUstream stream, int ptsz,
                                         const struct rgpu_graph_copy *copy, int *captured)
{
    return (CUresult)capture_host_copy(&driver_ops, u64(stream), ptsz, copy, captured);
}

int graph_host_capture_function(const char *lib, const char *name, int is_callback,
                                uint64_t stream, uint64_t token, unsigned flags)
{
    typedef int (*launch_fn)(void *stream, void (*fn)(void *), void *data);
    typedef int (*callback_fn)(void *stream, void (*cb)(CUstream, CUresult, void *), void *data,
                               unsigned flags);
    int rc = 0;
    void *fn = backend_sym(lib, name);
    struct host_rec *rec = fn ? rec_for(token, REC_FUNCTION, 0, &rc) : NULL;
    if (!fn)
        return -RGPU_ENOSYM;
    if (!rec)
        return rc;
    return is_callback ? ((callback_fn)fn)((void *)(uintptr_t)stream, rec_callback, rec, flags)
                       : ((launch_fn)fn)((void *)(uintptr_t)stream, rec_run, rec);
}

/* ---- launches ------------------------------------------------------------------------------ */

/* Executable graphs that hold host nodes of ours: known at instantiation
 * (an update or a child graph's new parameters keep every node's type). */
static struct {
    pthread_mutex_t lock;
    uint64_t *v;
    size_t n, cap;
} X = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 };

static int exec_holds_host_nodes(uint64_t exec)
{
    int found = 0;
    pthread_mutex_lock(&X.lock);
    for (size_t i = 0; i < X.n && !found; i++)
        found = X.v[i] == exec;
    pthread_mutex_unlock(&X.lock);
    return found;
}

static void exec_forget(uint64_t exec)
{
    pthread_mutex_lock(&X.lock);
    size_t k = 0;
    for (size_t i = 0; i < X.n; i++)
        if (X.v[i] != exec)
            X.v[k++] = X.v[i];
    X.n = k;
    pthread_mutex_unlock(&X.lock);
}

static void exec_remember(uint64_t exec)
{
    pthread_mutex_lock(&X.lock);
    if (X.n == X.cap) {
        size_t cap = X.cap ? X.cap * 2 : 16;
        uint64_t *v = realloc(X.v, cap * sizeof *v);
        if (v) {
            X.v = v;
            X.cap = cap;
        }
    }
    if (X.n < X.cap)
        X.v[X.n++] = exec;
    else
        rgpu_warn("out of memory: an executable graph's host nodes will not be waited for");
    pthread_mutex_unlock(&X.lock);
}

/* Whether graph holds a host node (every one in a session is ours), in
 * it or in a child graph; a conditional node's bodies, which the library
 * does not list, are taken to. */
static int holds_host_nodes(const struct ops *o, uint64_t graph, int depth)
{
    size_t count = 0;
    int holds = 0, type;
    if (depth > MAX_DEPTH || o->nodes(graph, NULL, &count) != 0)
        return 1;
    CUgraphNode *nodes = count ? calloc(count, sizeof *nodes) : NULL;
    if (count && (!nodes || o->nodes(graph, nodes, &count) != 0)) {
        free(nodes);
        return 1;
    }
    for (size_t i = 0; i < count && !holds; i++) {
        uint64_t node = (uint64_t)(uintptr_t)nodes[i], child = 0;
        if (o->type(node, &type) != 0)
            holds = 1;
        else if (type == CU_GRAPH_NODE_TYPE_HOST || type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            holds = 1;
        else if (type == CU_GRAPH_NODE_TYPE_GRAPH)
            holds = o->child_graph(node, &child) != 0 || holds_host_nodes(o, child, depth + 1);
    }
    free(nodes);
    return holds;
}

static uint64_t out_value(void *const *argv, int i)
{
    const uint64_t *p = *(uint64_t *const *)argv[i];
    return p ? *p : 0;
}

static uint64_t val(void *const *argv, int i)
{
    return *(const uint64_t *)argv[i];
}

void graph_host_instantiated(void **argv, int status, int runtime)
{
    uint64_t exec = out_value(argv, 0);
    if (status == 0 && exec && records_exist() &&
        holds_host_nodes(ops_of(runtime), val(argv, 1), 0))
        exec_remember(exec);
}

static void post_rt_instantiate(void **argv, int status)
{
    graph_host_instantiated(argv, status, 1);
}

static void post_cu_instantiate(void **argv, int status)
{
    graph_host_instantiated(argv, status, 0);
}

static int pre_exec_destroy(void **argv)
{
    exec_forget(val(argv, 0));
    return 0;
}

/* A copy node of ours is a memcpy node to the program. */
static void node_type_answered(void **argv, int status, int runtime)
{
    int *type = *(int *const *)argv[1];
    if (status == 0 && type && *type == CU_GRAPH_NODE_TYPE_GRAPH &&
        graph_host_is_copy_node(val(argv, 0), runtime))
        *type = CU_GRAPH_NODE_TYPE_MEMCPY;
}

static void post_rt_node_type(void **argv, int status)
{
    node_type_answered(argv, status, 1);
}

static void post_cu_node_type(void **argv, int status)
{
    node_type_answered(argv, status, 0);
}

/* A copy node of ours takes new parameters only with host memory
 * (rgpu_graph_host_copy): between device buffers, a setter would meet a
 * child graph node.  Natively such a change is the graph's to make, and an
 * executable graph's copy may not change what its memory is. */
int graph_host_refuse_copy_node(uint64_t node, int runtime, int exec, const char *what)
{
    if (!graph_host_is_copy_node(node, runtime))
        return 0;
    rgpu_warn("%s: a copy node made with host memory keeps host memory on one side in rgpu",
              what);
    return exec ? E_INVALID_VALUE : E_NOT_SUPPORTED;
}

static int pre_memcpy_set_1d(void **argv)
{
    return graph_host_refuse_copy_node(val(argv, 0), 1, 0, "cudaGraphMemcpyNodeSetParams1D");
}

static int pre_exec_memcpy_set_1d(void **argv)
{
    return graph_host_refuse_copy_node(val(argv, 1), 1, 1, "cudaGraphExecMemcpyNodeSetParams1D");
}

/* A launch; when the executable graph holds host nodes of ours and the
 * stream does not capture, a marker host function follows it (*marked),
 * whose callback tells the client the graph has passed; *plain: it holds
 * none, and the client's later launches of it need not wait. */
static int graph_launch(const struct ops *o, uint64_t exec, uint64_t stream, int ptsz,
                        uint64_t marker, int *marked, int *plain)
{
    int holds = 0, rc, m = 0;
    if (ptsz != 0 && ptsz != 1)
        return serve_transport(RGPU_EPROTO);
    if (!marked || !plain)
        return E_INVALID_VALUE;
    *marked = *plain = 0;
    if (!handles_contains(H_GRAPH_EXEC, exec)) {
        rgpu_warn("graph launch: refused an executable graph the session never handed out");
        rc = E_INVALID_HANDLE;
    } else {
        holds = exec_holds_host_nodes(exec);
        rc = o->launch(exec, stream, ptsz);
    }
    if (rc < 0)
        return serve_transport(-rc);
    /* A graph launched into a capture runs later, as a node of the capture. */
    uint64_t s = stream_of(stream, ptsz), graph;
    if (rc == 0 && holds && o->capture(s, &graph, NULL, NULL, NULL) == 0) {
        m = host_function_marker(o->runtime, ptsz, stream, marker);
        *marked = m == 0;
        if (m != 0)
            rgpu_warn("graph launch: the marker after the graph was refused (%d): the client "
                      "does not wait for its host nodes", m);
    }
    *plain = rc == 0 && !holds;
    return rc;
}

cudaError_t serve_rgpu_graph_launch(cudaGraphExec_t exec, cudaStream_t stream, int ptsz,
                                    uint64_t marker, int *marked, int *plain)
{
    return (cudaError_t)graph_launch(&runtime_ops, u64(exec), u64(stream), ptsz, marker, marked,
                                     plain);
}

CUresult serve_rgpu_cu_graph_launch(CUgraphExec exec, CUstream stream, int ptsz, uint64_t marker,
                                    int *marked, int *plain)
{
    return (CUresult)graph_launch(&driver_ops, u64(exec), u64(stream), ptsz, marker, marked,
                                  plain);
}

/* The requests that make nodes which run on the client (a launch comes
 * after one of them). */
int graph_host_proc(uint32_t proc_id)
{
    return proc_id == RGPU_CUDART_rgpu_graph_host_node->id ||
           proc_id == RGPU_CUDA_rgpu_cu_graph_host_node->id ||
           proc_id == RGPU_CUDART_rgpu_graph_host_copy->id ||
           proc_id == RGPU_CUDA_rgpu_cu_graph_host_copy->id ||
           proc_id == RGPU_CUDART_rgpu_capture_host_copy->id ||
           proc_id == RGPU_CUDA_rgpu_cu_capture_host_copy->id;
}

static const struct guard graph_host_guards[] = {
    { "cudart", "cudaGraphInstantiate", NULL, post_rt_instantiate },
    { "cudart", "cudaGraphInstantiateWithFlags", NULL, post_rt_instantiate },
    { "cuda", "cuGraphInstantiateWithFlags", NULL, post_cu_instantiate },
    { "cudart", "cudaGraphExecDestroy", pre_exec_destroy, NULL },
    { "cuda", "cuGraphExecDestroy", pre_exec_destroy, NULL },
    { "cudart", "cudaGraphNodeGetType", NULL, post_rt_node_type },
    { "cuda", "cuGraphNodeGetType", NULL, post_cu_node_type },
    { "cudart", "cudaGraphMemcpyNodeSetParams1D", pre_memcpy_set_1d, NULL },
    { "cudart", "cudaGraphExecMemcpyNodeSetParams1D", pre_exec_memcpy_set_1d, NULL },
};

const struct guard *graph_host_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(graph_host_guards, lib, name);
}
