// Fake libcudart: CUDA graphs built node by node, on the fake libcuda's
// cuGraph* (graph.c), as NVIDIA's runtime builds them on its driver.  The
// runtime's graph, node and executable-graph handles are the driver's;
// its parameter records are converted field by field.  A kernel's `func`
// is the driver's function (what cudaLaunchKernel takes in this fake).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

cudaError_t fg_rt_enter(void);
cudaError_t fg_rt_ret(cudaError_t e);

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a)
SAME(cudaErrorGraphExecUpdateFailure, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
SAME(cudaGraphExecUpdateErrorTopologyChanged, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
SAME(cudaGraphNodeTypeKernel, CU_GRAPH_NODE_TYPE_KERNEL);
SAME(cudaGraphNodeTypeEventRecord, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
_Static_assert(sizeof(cudaGraphExecUpdateResultInfo) == sizeof(CUgraphExecUpdateResultInfo),
               "update result");
_Static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data");

// Runs a driver call in the thread's context and returns its result as the
// runtime's (the codes are the same numbers).
#define CALL(expr)                                  \
    do {                                            \
        cudaError_t e_ = fg_rt_enter();             \
        if (e_ == cudaSuccess)                      \
            e_ = (cudaError_t)(expr);               \
        return fg_rt_ret(e_);                       \
    } while (0)

static CUgraphNode *deps(const cudaGraphNode_t *d)
{
    return (CUgraphNode *)(void *)d;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params(const struct cudaKernelNodeParams *p)
{
    CUDA_KERNEL_NODE_PARAMS k = {
        (CUfunction)p->func, p->gridDim.x, p->gridDim.y, p->gridDim.z,
        p->blockDim.x, p->blockDim.y, p->blockDim.z, p->sharedMemBytes,
        p->kernelParams, p->extra, NULL, NULL,
    };
    return k;
}

// A 1D copy between linear addresses, told apart by address (unified).
static CUDA_MEMCPY3D copy_1d(void *dst, const void *src, size_t count)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.WidthInBytes = count;
    c.Height = c.Depth = 1;
    return c;
}

static CUDA_MEMSET_NODE_PARAMS memset_params(const struct cudaMemsetParams *p)
{
    CUDA_MEMSET_NODE_PARAMS m = { (CUdeviceptr)(uintptr_t)p->dst, p->pitch, p->value,
                                  p->elementSize, p->width, p->height };
    return m;
}

cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
    CALL(cuGraphCreate((CUgraph *)g, flags));
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t g)
{
    CALL(cuGraphDestroy(g));
}

cudaError_t CUDARTAPI cudaGraphAddKernelNode(cudaGraphNode_t *n, cudaGraph_t g,
                                             const cudaGraphNode_t *d, size_t nd,
                                             const struct cudaKernelNodeParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_KERNEL_NODE_PARAMS k = kernel_params(p);
    CUresult r;
    cudaError_t e = fg_rt_enter();
    if (e != cudaSuccess)
        return fg_rt_ret(e);
    r = cuGraphAddKernelNode_v2((CUgraphNode *)n, g, deps(d), nd, &k);
    // A bad function is a bad device function to the runtime.
    return fg_rt_ret(r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidDeviceFunction
                                                    : (cudaError_t)r);
}

cudaError_t CUDARTAPI cudaGraphKernelNodeSetParams(cudaGraphNode_t n,
                                                   const struct cudaKernelNodeParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_KERNEL_NODE_PARAMS k = kernel_params(p);
    CALL(cuGraphKernelNodeSetParams_v2(n, &k));
}

cudaError_t CUDARTAPI cudaGraphExecKernelNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t n,
                                                       const struct cudaKernelNodeParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_KERNEL_NODE_PARAMS k = kernel_params(p);
    CALL(cuGraphExecKernelNodeSetParams_v2(x, n, &k));
}

cudaError_t CUDARTAPI cudaGraphAddMemcpyNode1D(cudaGraphNode_t *n, cudaGraph_t g,
                                               const cudaGraphNode_t *d, size_t nd, void *dst,
                                               const void *src, size_t count,
                                               enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return fg_rt_ret(cudaErrorInvalidMemcpyDirection);
    CUDA_MEMCPY3D c = copy_1d(dst, src, count);
    CALL(cuGraphAddMemcpyNode((CUgraphNode *)n, g, deps(d), nd, &c, NULL));
}

cudaError_t CUDARTAPI cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t n, void *dst,
                                                     const void *src, size_t count,
                                                     enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return fg_rt_ret(cudaErrorInvalidMemcpyDirection);
    CUDA_MEMCPY3D c = copy_1d(dst, src, count);
    CALL(cuGraphMemcpyNodeSetParams(n, &c));
}

cudaError_t CUDARTAPI cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t x, cudaGraphNode_t n,
                                                         void *dst, const void *src,
                                                         size_t count, enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return fg_rt_ret(cudaErrorInvalidMemcpyDirection);
    CUDA_MEMCPY3D c = copy_1d(dst, src, count);
    CALL(cuGraphExecMemcpyNodeSetParams(x, n, &c, NULL));
}

cudaError_t CUDARTAPI cudaGraphMemsetNodeSetParams(cudaGraphNode_t n,
                                                   const struct cudaMemsetParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_MEMSET_NODE_PARAMS m = memset_params(p);
    CALL(cuGraphMemsetNodeSetParams(n, &m));
}

cudaError_t CUDARTAPI cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t n,
                                                       const struct cudaMemsetParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_MEMSET_NODE_PARAMS m = memset_params(p);
    CALL(cuGraphExecMemsetNodeSetParams(x, n, &m, NULL));
}

cudaError_t CUDARTAPI cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t n,
                                                           cudaGraph_t child)
{
    CALL(cuGraphExecChildGraphNodeSetParams(x, n, child));
}

cudaError_t CUDARTAPI cudaGraphAddMemsetNode(cudaGraphNode_t *n, cudaGraph_t g,
                                             const cudaGraphNode_t *d, size_t nd,
                                             const struct cudaMemsetParams *p)
{
    if (!p)
        return fg_rt_ret(cudaErrorInvalidValue);
    CUDA_MEMSET_NODE_PARAMS m = memset_params(p);
    CALL(cuGraphAddMemsetNode((CUgraphNode *)n, g, deps(d), nd, &m, NULL));
}

cudaError_t CUDARTAPI cudaGraphAddEmptyNode(cudaGraphNode_t *n, cudaGraph_t g,
                                            const cudaGraphNode_t *d, size_t nd)
{
    CALL(cuGraphAddEmptyNode((CUgraphNode *)n, g, deps(d), nd));
}

cudaError_t CUDARTAPI cudaGraphAddChildGraphNode(cudaGraphNode_t *n, cudaGraph_t g,
                                                 const cudaGraphNode_t *d, size_t nd,
                                                 cudaGraph_t child)
{
    CALL(cuGraphAddChildGraphNode((CUgraphNode *)n, g, deps(d), nd, child));
}

cudaError_t CUDARTAPI cudaGraphAddEventRecordNode(cudaGraphNode_t *n, cudaGraph_t g,
                                                  const cudaGraphNode_t *d, size_t nd,
                                                  cudaEvent_t ev)
{
    CALL(cuGraphAddEventRecordNode((CUgraphNode *)n, g, deps(d), nd, ev));
}

cudaError_t CUDARTAPI cudaGraphAddEventWaitNode(cudaGraphNode_t *n, cudaGraph_t g,
                                                const cudaGraphNode_t *d, size_t nd,
                                                cudaEvent_t ev)
{
    CALL(cuGraphAddEventWaitNode((CUgraphNode *)n, g, deps(d), nd, ev));
}

cudaError_t CUDARTAPI cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t *from,
                                               const cudaGraphNode_t *to,
                                               const cudaGraphEdgeData *edges, size_t n)
{
    CALL(cuGraphAddDependencies_v2(g, deps(from), deps(to), (const CUgraphEdgeData *)edges, n));
}

cudaError_t CUDARTAPI cudaGraphNodeGetType(cudaGraphNode_t n, enum cudaGraphNodeType *t)
{
    CALL(cuGraphNodeGetType(n, (CUgraphNodeType *)t));
}

cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count)
{
    CALL(cuGraphGetNodes(g, (CUgraphNode *)nodes, count));
}

cudaError_t CUDARTAPI cudaGraphGetRootNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count)
{
    CALL(cuGraphGetRootNodes(g, (CUgraphNode *)nodes, count));
}

cudaError_t CUDARTAPI cudaGraphDestroyNode(cudaGraphNode_t n)
{
    CALL(cuGraphDestroyNode(n));
}

cudaError_t CUDARTAPI cudaGraphClone(cudaGraph_t *clone, cudaGraph_t g)
{
    CALL(cuGraphClone((CUgraph *)clone, g));
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
                                           unsigned long long flags)
{
    CALL(cuGraphInstantiateWithFlags((CUgraphExec *)x, g, flags));
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
                                                    unsigned long long flags)
{
    CALL(cuGraphInstantiateWithFlags((CUgraphExec *)x, g, flags));
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t x)
{
    CALL(cuGraphExecDestroy(x));
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
    CALL(cuGraphLaunch(x, s));
}

cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t x, cudaStream_t s)
{
    CALL(cuGraphUpload(x, s));
}

cudaError_t CUDARTAPI cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
                                          cudaGraphExecUpdateResultInfo *info)
{
    CALL(cuGraphExecUpdate_v2(x, g, (CUgraphExecUpdateResultInfo *)(void *)info));
}

cudaError_t CUDARTAPI cudaGraphDebugDotPrint(cudaGraph_t g, const char *path, unsigned int flags)
{
    CALL(cuGraphDebugDotPrint(g, path, flags));
}

_Static_assert(sizeof(cudaGraphInstantiateParams) == sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS),
               "instantiate parameters");
SAME(cudaGraphInstantiateFlagUpload, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
SAME(cudaGraphInstantiateSuccess, CUDA_GRAPH_INSTANTIATE_SUCCESS);

cudaError_t CUDARTAPI cudaGraphInstantiateWithParams(cudaGraphExec_t *x, cudaGraph_t g,
                                                     cudaGraphInstantiateParams *p)
{
    CALL(cuGraphInstantiateWithParams((CUgraphExec *)x, g,
                                      (CUDA_GRAPH_INSTANTIATE_PARAMS *)(void *)p));
}

_Static_assert(sizeof(struct cudaMemAllocNodeParams) == sizeof(CUDA_MEM_ALLOC_NODE_PARAMS),
               "alloc node parameters");

cudaError_t CUDARTAPI cudaGraphAddMemAllocNode(cudaGraphNode_t *n, cudaGraph_t g,
                                               const cudaGraphNode_t *d, size_t nd,
                                               struct cudaMemAllocNodeParams *p)
{
    CALL(cuGraphAddMemAllocNode((CUgraphNode *)n, g, deps(d), nd,
                                (CUDA_MEM_ALLOC_NODE_PARAMS *)(void *)p));
}

cudaError_t CUDARTAPI cudaGraphAddMemFreeNode(cudaGraphNode_t *n, cudaGraph_t g,
                                              const cudaGraphNode_t *d, size_t nd, void *dptr)
{
    CALL(cuGraphAddMemFreeNode((CUgraphNode *)n, g, deps(d), nd, (CUdeviceptr)(uintptr_t)dptr));
}

cudaError_t CUDARTAPI cudaGraphGetEdges(cudaGraph_t g, cudaGraphNode_t *from, cudaGraphNode_t *to,
                                        cudaGraphEdgeData *data, size_t *count)
{
    CALL(cuGraphGetEdges_v2(g, (CUgraphNode *)from, (CUgraphNode *)to, (CUgraphEdgeData *)data,
                            count));
}

cudaError_t CUDARTAPI cudaGraphKernelNodeGetParams(cudaGraphNode_t n, struct cudaKernelNodeParams *p)
{
    CUDA_KERNEL_NODE_PARAMS k;
    cudaError_t e = fg_rt_enter();
    if (e == cudaSuccess && !p)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = (cudaError_t)cuGraphKernelNodeGetParams_v2(n, &k);
    if (e == cudaSuccess) {
        memset(p, 0, sizeof *p);
        p->func = (void *)k.func;
        p->gridDim.x = k.gridDimX;
        p->gridDim.y = k.gridDimY;
        p->gridDim.z = k.gridDimZ;
        p->blockDim.x = k.blockDimX;
        p->blockDim.y = k.blockDimY;
        p->blockDim.z = k.blockDimZ;
        p->sharedMemBytes = k.sharedMemBytes;
        p->kernelParams = k.kernelParams;
    }
    return fg_rt_ret(e == cudaErrorInvalidResourceHandle ? cudaErrorInvalidDeviceFunction : e);
}

// A 3D copy between pitched linear buffers (addresses told apart by
// value, unified); CUDA arrays are not modelled.
static cudaError_t copy_3d(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *c)
{
    if (!p)
        return cudaErrorInvalidValue;
    if (p->srcArray || p->dstArray)
        return cudaErrorNotSupported;
    if ((unsigned)p->kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    memset(c, 0, sizeof *c);
    c->srcMemoryType = c->dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c->srcDevice = (CUdeviceptr)(uintptr_t)p->srcPtr.ptr;
    c->srcPitch = p->srcPtr.pitch;
    c->srcHeight = p->srcPtr.ysize;
    c->srcXInBytes = p->srcPos.x;
    c->srcY = p->srcPos.y;
    c->srcZ = p->srcPos.z;
    c->dstDevice = (CUdeviceptr)(uintptr_t)p->dstPtr.ptr;
    c->dstPitch = p->dstPtr.pitch;
    c->dstHeight = p->dstPtr.ysize;
    c->dstXInBytes = p->dstPos.x;
    c->dstY = p->dstPos.y;
    c->dstZ = p->dstPos.z;
    c->WidthInBytes = p->extent.width;
    c->Height = p->extent.height;
    c->Depth = p->extent.depth;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphAddMemcpyNode(cudaGraphNode_t *n, cudaGraph_t g,
                                             const cudaGraphNode_t *d, size_t nd,
                                             const struct cudaMemcpy3DParms *p)
{
    CUDA_MEMCPY3D c;
    cudaError_t e = copy_3d(p, &c);
    if (e != cudaSuccess)
        return fg_rt_ret(e);
    CALL(cuGraphAddMemcpyNode((CUgraphNode *)n, g, deps(d), nd, &c, NULL));
}

cudaError_t CUDARTAPI cudaGraphMemcpyNodeSetParams(cudaGraphNode_t n,
                                                   const struct cudaMemcpy3DParms *p)
{
    CUDA_MEMCPY3D c;
    cudaError_t e = copy_3d(p, &c);
    if (e != cudaSuccess)
        return fg_rt_ret(e);
    CALL(cuGraphMemcpyNodeSetParams(n, &c));
}

cudaError_t CUDARTAPI cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t n,
                                                       const struct cudaMemcpy3DParms *p)
{
    CUDA_MEMCPY3D c;
    cudaError_t e = copy_3d(p, &c);
    if (e != cudaSuccess)
        return fg_rt_ret(e);
    CALL(cuGraphExecMemcpyNodeSetParams(x, n, &c, NULL));
}

_Static_assert(sizeof(struct cudaHostNodeParams) == sizeof(CUDA_HOST_NODE_PARAMS), "host node");

cudaError_t CUDARTAPI cudaGraphAddHostNode(cudaGraphNode_t *n, cudaGraph_t g,
                                           const cudaGraphNode_t *d, size_t nd,
                                           const struct cudaHostNodeParams *p)
{
    CALL(cuGraphAddHostNode((CUgraphNode *)n, g, deps(d), nd, (const CUDA_HOST_NODE_PARAMS *)p));
}

cudaError_t CUDARTAPI cudaGraphHostNodeGetParams(cudaGraphNode_t n, struct cudaHostNodeParams *p)
{
    CALL(cuGraphHostNodeGetParams(n, (CUDA_HOST_NODE_PARAMS *)p));
}

cudaError_t CUDARTAPI cudaGraphHostNodeSetParams(cudaGraphNode_t n,
                                                 const struct cudaHostNodeParams *p)
{
    CALL(cuGraphHostNodeSetParams(n, (const CUDA_HOST_NODE_PARAMS *)p));
}

cudaError_t CUDARTAPI cudaGraphExecHostNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t n,
                                                     const struct cudaHostNodeParams *p)
{
    CALL(cuGraphExecHostNodeSetParams(x, n, (const CUDA_HOST_NODE_PARAMS *)p));
}

cudaError_t CUDARTAPI cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t n, cudaGraph_t *g)
{
    CALL(cuGraphChildGraphNodeGetGraph(n, (CUgraph *)g));
}

cudaError_t CUDARTAPI cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t n, cudaEvent_t *ev)
{
    CALL(cuGraphEventRecordNodeGetEvent(n, (CUevent *)ev));
}

cudaError_t CUDARTAPI cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t n, cudaEvent_t *ev)
{
    CALL(cuGraphEventWaitNodeGetEvent(n, (CUevent *)ev));
}

cudaError_t CUDARTAPI cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t n, cudaEvent_t ev)
{
    CALL(cuGraphEventRecordNodeSetEvent(n, ev));
}

cudaError_t CUDARTAPI cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t n, cudaEvent_t ev)
{
    CALL(cuGraphEventWaitNodeSetEvent(n, ev));
}

cudaError_t CUDARTAPI cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t x, cudaGraphNode_t n,
                                                           cudaEvent_t ev)
{
    CALL(cuGraphExecEventRecordNodeSetEvent(x, n, ev));
}

cudaError_t CUDARTAPI cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t x, cudaGraphNode_t n,
                                                         cudaEvent_t ev)
{
    CALL(cuGraphExecEventWaitNodeSetEvent(x, n, ev));
}

// Conditional nodes and their handles, in the thread's current context.
cudaError_t CUDARTAPI cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *out,
                                                       cudaGraph_t g, unsigned int value,
                                                       unsigned int flags)
{
    CUcontext ctx = NULL;
    CALL(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS
             ? cuGraphConditionalHandleCreate((CUgraphConditionalHandle *)out, g, ctx, value, flags)
             : CUDA_ERROR_INVALID_CONTEXT);
}

SAME(cudaGraphNodeTypeConditional, CU_GRAPH_NODE_TYPE_CONDITIONAL);
SAME(cudaGraphCondTypeWhile, CU_GRAPH_COND_TYPE_WHILE);

// Node records of the types the driver's record takes here (graph.c).
cudaError_t CUDARTAPI cudaGraphAddNode(cudaGraphNode_t *n, cudaGraph_t g, const cudaGraphNode_t *d,
                                       const cudaGraphEdgeData *data, size_t nd,
                                       struct cudaGraphNodeParams *p)
{
    CUgraphNodeParams q;
    cudaError_t e = fg_rt_enter();
    if (e != cudaSuccess)
        return fg_rt_ret(e);
    if (!p || p->type != cudaGraphNodeTypeConditional)
        return fg_rt_ret(p ? cudaErrorNotSupported : cudaErrorInvalidValue);
    memset(&q, 0, sizeof q);
    q.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    q.conditional.handle = p->conditional.handle;
    q.conditional.type = (CUgraphConditionalNodeType)p->conditional.type;
    q.conditional.size = p->conditional.size;
    if (cuCtxGetCurrent(&q.conditional.ctx) != CUDA_SUCCESS)
        return fg_rt_ret(cudaErrorInvalidValue);
    e = (cudaError_t)cuGraphAddNode_v2((CUgraphNode *)n, g, deps(d),
                                       (const CUgraphEdgeData *)data, nd, &q);
    if (e == cudaSuccess)
        p->conditional.phGraph_out = (cudaGraph_t *)q.conditional.phGraph_out;
    return fg_rt_ret(e);
}

// ---- stream capture (capture.c) -------------------------------------------------------

SAME(cudaStreamCaptureStatusActive, CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME(cudaStreamCaptureModeRelaxed, CU_STREAM_CAPTURE_MODE_RELAXED);
SAME(cudaStreamSetCaptureDependencies, CU_STREAM_SET_CAPTURE_DEPENDENCIES);

// Declared by cuda.h only under per-thread default streams.
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph graph,
                                                  const CUgraphNode *deps,
                                                  const CUgraphEdgeData *edges, size_t n,
                                                  CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph *out);
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status);
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *status,
                                                cuuint64_t *id, CUgraph *graph,
                                                const CUgraphNode **deps,
                                                const CUgraphEdgeData **edges, size_t *n);
CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode *deps,
                                                           const CUgraphEdgeData *edges,
                                                           size_t n, unsigned int flags);

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    CALL(cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)mode));
}

cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    CALL(cuStreamBeginCapture_v2_ptsz(s, (CUstreamCaptureMode)mode));
}

cudaError_t CUDARTAPI cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g,
                                                    const cudaGraphNode_t *d,
                                                    const cudaGraphEdgeData *e, size_t n,
                                                    enum cudaStreamCaptureMode mode)
{
    CALL(cuStreamBeginCaptureToGraph(s, g, deps(d), (const CUgraphEdgeData *)e, n,
                                     (CUstreamCaptureMode)mode));
}

cudaError_t CUDARTAPI cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                         const cudaGraphNode_t *d,
                                                         const cudaGraphEdgeData *e, size_t n,
                                                         enum cudaStreamCaptureMode mode)
{
    CALL(cuStreamBeginCaptureToGraph_ptsz(s, g, deps(d), (const CUgraphEdgeData *)e, n,
                                          (CUstreamCaptureMode)mode));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    CALL(cuStreamEndCapture(s, (CUgraph *)g));
}

cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    CALL(cuStreamEndCapture_ptsz(s, (CUgraph *)g));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    CALL(cuStreamIsCapturing(s, (CUstreamCaptureStatus *)st));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t s,
                                                 enum cudaStreamCaptureStatus *st)
{
    CALL(cuStreamIsCapturing_ptsz(s, (CUstreamCaptureStatus *)st));
}

cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                               unsigned long long *id, cudaGraph_t *g,
                                               const cudaGraphNode_t **d,
                                               const cudaGraphEdgeData **e, size_t *n)
{
    CALL(cuStreamGetCaptureInfo_v3(s, (CUstreamCaptureStatus *)st, (cuuint64_t *)id,
                                   (CUgraph *)g, (const CUgraphNode **)d,
                                   (const CUgraphEdgeData **)e, n));
}

cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t s,
                                                    enum cudaStreamCaptureStatus *st,
                                                    unsigned long long *id, cudaGraph_t *g,
                                                    const cudaGraphNode_t **d,
                                                    const cudaGraphEdgeData **e, size_t *n)
{
    CALL(cuStreamGetCaptureInfo_v3_ptsz(s, (CUstreamCaptureStatus *)st, (cuuint64_t *)id,
                                        (CUgraph *)g, (const CUgraphNode **)d,
                                        (const CUgraphEdgeData **)e, n));
}

cudaError_t CUDARTAPI cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t *d,
                                                          const cudaGraphEdgeData *e, size_t n,
                                                          unsigned int flags)
{
    CALL(cuStreamUpdateCaptureDependencies_v2(s, (CUgraphNode *)d, (const CUgraphEdgeData *)e,
                                              n, flags));
}

cudaError_t CUDARTAPI cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t s,
                                                               cudaGraphNode_t *d,
                                                               const cudaGraphEdgeData *e,
                                                               size_t n, unsigned int flags)
{
    CALL(cuStreamUpdateCaptureDependencies_v2_ptsz(s, (CUgraphNode *)d,
                                                   (const CUgraphEdgeData *)e, n, flags));
}
