/* CUDA graphs built node by node, server side, for the runtime and the
 * driver: the serve_ functions of rgpu's own graph procedures
 * (codegen/cudart_own.h and codegen/cuda_own.h, "graphs"; client side
 * stubs/cudart_graphs.c, stubs/cuda_graphs.c) that add, set and query
 * kernel nodes, list a graph's nodes and edges, add memory-allocation
 * nodes and print the dot description (written into a memory file whose
 * text goes back to the client); and the guards of the generated graph
 * calls (extents of memset and memcpy nodes, the upload stream of an
 * instantiation, a destroyed graph's nodes).
 *
 * A runtime procedure and its driver twin take the same arguments and
 * share one implementation: only the library called differs, and the
 * statuses answered where the two number them apart.  A kernel node's
 * arguments arrive packed by the kernel's layout, as a launch's do, and
 * are unpacked into an argument vector the library copies when the node
 * is made or set.  The codec let through every handle argument that is the
 * session's or NULL; each operation holds the ones it names to the
 * session's table, NULL included, and the nodes the library hands out join
 * the table (the codec adds the ones the outputs carry) and leave it with
 * their graph, so that a destroyed graph's nodes are refused afterwards. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cudart_serve.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RT(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define MAX_PARAMS RGPU_GRAPH_PARAMS_MAX    /* kernel parameters, as launches */

/* The statuses both libraries number alike. */
enum {
    E_INVALID_VALUE = 1,        /* cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE */
    E_OUT_OF_MEMORY = 2,        /* cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY */
    E_OPERATING_SYSTEM = 304,   /* cudaErrorOperatingSystem, CUDA_ERROR_OPERATING_SYSTEM */
    E_INVALID_HANDLE = 400,     /* cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE */
    E_NOT_SUPPORTED = 801,      /* cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED */
};
_Static_assert(cudaErrorMemoryAllocation == (int)CUDA_ERROR_OUT_OF_MEMORY, "statuses");
_Static_assert(cudaErrorOperatingSystem == (int)CUDA_ERROR_OPERATING_SYSTEM, "statuses");
_Static_assert(cudaErrorInvalidResourceHandle == (int)CUDA_ERROR_INVALID_HANDLE, "statuses");
_Static_assert(cudaErrorNotSupported == (int)CUDA_ERROR_NOT_SUPPORTED, "statuses");
_Static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data");

static uint32_t H_GRAPH_NODE;

__attribute__((constructor)) static void graph_classes_init(void)
{
    H_GRAPH_NODE = rgpu_handle_class("CUgraphNode_st");
}

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* A library call that reports a missing symbol as minus an RGPU_E* status:
 * the status to answer, the transport's said with it. */
static int answered(int rc)
{
    return rc < 0 ? serve_transport(-rc) : rc;
}

int graph_deps_malformed(const void *deps, size_t n)
{
    return n > RGPU_GRAPH_MAX_DEPS || (n && !deps);
}

int graph_deps_known(const CUgraphNode *deps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!handles_contains(H_GRAPH_NODE, u64(deps[i])))
            return 0;
    return 1;
}

/* ---- kernel nodes ------------------------------------------------------------------ */

/* The call as both libraries' procedures describe it. */
struct node_call {
    int op;
    uint64_t graph, exec, node, kernel;
    const CUgraphNode *deps;
    size_t ndeps;
    unsigned dim[6], shmem;
    int packed;
    const void *params;
    size_t params_size;
};

static void node_call_shape(struct node_call *n, dim3 grid, dim3 block, unsigned shmem,
                            const void *params, size_t params_size)
{
    const unsigned dim[6] = { grid.x, grid.y, grid.z, block.x, block.y, block.z };
    memcpy(n->dim, dim, sizeof dim);
    n->shmem = shmem;
    n->params = params;
    n->params_size = params ? params_size : 0;
}

/* What no client sends: an operation that is none, dependencies past the
 * bound or missing. */
static int node_call_malformed(const struct node_call *n)
{
    return n->op < RGPU_GRAPH_NODE_ADD || n->op > RGPU_GRAPH_EXEC_SET ||
           graph_deps_malformed(n->deps, n->ndeps) ||
           (n->op != RGPU_GRAPH_NODE_ADD && n->ndeps);
}

/* The handles the operation names, each the session's: a graph and
 * dependencies to add to, a node to set, or an executable graph and its
 * node. */
static int handles_named(const struct node_call *n)
{
    switch (n->op) {
    case RGPU_GRAPH_NODE_ADD:
        return handles_contains(H_GRAPH, n->graph) && graph_deps_known(n->deps, n->ndeps);
    case RGPU_GRAPH_NODE_SET:
        return handles_contains(H_GRAPH_NODE, n->node);
    default:
        return handles_contains(H_GRAPH_EXEC, n->exec) && handles_contains(H_GRAPH_NODE, n->node);
    }
}

static int refuse(const char *what, int status)
{
    rgpu_warn("graph kernel node: refused %s", what);
    return status;
}

static int rt_node(const struct node_call *n, void **argv, uint64_t *node)
{
    struct cudaKernelNodeParams p = {
        (void *)(uintptr_t)n->kernel,
        { n->dim[0], n->dim[1], n->dim[2] },
        { n->dim[3], n->dim[4], n->dim[5] },
        n->shmem, argv, NULL,
    };
    cudaGraphNode_t made = NULL;
    int rc;
    switch (n->op) {
    case RGPU_GRAPH_NODE_ADD:
        if (!RT(cudaGraphAddKernelNode))
            return -RGPU_ENOSYM;
        rc = RT(cudaGraphAddKernelNode)(&made, (cudaGraph_t)n->graph,
                                        (const cudaGraphNode_t *)n->deps, n->ndeps, &p);
        *node = u64(made);
        return rc;
    case RGPU_GRAPH_NODE_SET:
        if (!RT(cudaGraphKernelNodeSetParams))
            return -RGPU_ENOSYM;
        return RT(cudaGraphKernelNodeSetParams)((cudaGraphNode_t)n->node, &p);
    default:
        if (!RT(cudaGraphExecKernelNodeSetParams))
            return -RGPU_ENOSYM;
        return RT(cudaGraphExecKernelNodeSetParams)((cudaGraphExec_t)n->exec,
                                                    (cudaGraphNode_t)n->node, &p);
    }
}

static int drv_node(const struct node_call *n, void **argv, void **extra, uint64_t *node)
{
    CUDA_KERNEL_NODE_PARAMS p = {
        (CUfunction)(uintptr_t)n->kernel,
        n->dim[0], n->dim[1], n->dim[2], n->dim[3], n->dim[4], n->dim[5],
        n->shmem, extra ? NULL : argv, extra, NULL, NULL,
    };
    CUgraphNode made = NULL;
    int rc;
    switch (n->op) {
    case RGPU_GRAPH_NODE_ADD:
        if (!DRV(cuGraphAddKernelNode_v2))
            return -RGPU_ENOSYM;
        rc = DRV(cuGraphAddKernelNode_v2)(&made, (CUgraph)n->graph, n->deps, n->ndeps, &p);
        *node = u64(made);
        return rc;
    case RGPU_GRAPH_NODE_SET:
        if (!DRV(cuGraphKernelNodeSetParams_v2))
            return -RGPU_ENOSYM;
        return DRV(cuGraphKernelNodeSetParams_v2)((CUgraphNode)n->node, &p);
    default:
        if (!DRV(cuGraphExecKernelNodeSetParams_v2))
            return -RGPU_ENOSYM;
        return DRV(cuGraphExecKernelNodeSetParams_v2)((CUgraphExec)n->exec,
                                                      (CUgraphNode)n->node, &p);
    }
}

/* The node's arguments as the library takes them: an argument vector
 * unpacked by the kernel's layout, or (the driver's packed) the caller's
 * own buffer.  0, or the status that refuses the call (minus an RGPU_E*
 * status for a request no client sends). */
static int node_arguments(const struct node_call *n, int runtime, void **argv, void **extra,
                          size_t *size)
{
    int k;
    if (runtime) {
        k = hand_cudart_kernel_argv(n->kernel, n->params, n->params_size, argv, MAX_PARAMS);
        return k < 0 ? -RGPU_EPROTO
               : k > 0 ? refuse("a kernel the session never resolved",
                                cudaErrorInvalidDeviceFunction)
                       : 0;
    }
    if (n->packed) {
        /* The caller's own buffer: the function need only be known. */
        *size = n->params_size;
        extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        extra[1] = (void *)n->params;
        extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        extra[3] = size;
        extra[4] = CU_LAUNCH_PARAM_END;
        return guard_function_known(n->kernel)
                   ? 0 : refuse("a function the session was never handed", E_INVALID_HANDLE);
    }
    k = hand_cuda_function_argv(n->kernel, n->params, n->params_size, argv, MAX_PARAMS);
    return k < 0 ? -RGPU_EPROTO
           : k > 0 ? refuse("a function without a layout asked for", E_INVALID_HANDLE) : 0;
}

/* The operation; *made the node added (NULL for the setters). */
static int kernel_node(const struct node_call *n, int runtime, CUgraphNode *made)
{
    void *argv[MAX_PARAMS], *extra[5];
    size_t size = 0;
    uint64_t node = 0;
    if (node_call_malformed(n))
        return serve_transport(RGPU_EPROTO);
    if (!handles_named(n))
        return refuse("a graph, executable graph or node the session never handed out",
                      E_INVALID_HANDLE);
    int rc = node_arguments(n, runtime, argv, extra, &size);
    if (rc == 0)
        rc = runtime ? rt_node(n, argv, &node) : drv_node(n, argv, n->packed ? extra : NULL,
                                                          &node);
    if (made)
        *made = rc == 0 && n->op == RGPU_GRAPH_NODE_ADD ? (CUgraphNode)(uintptr_t)node : NULL;
    return answered(rc);
}

cudaError_t serve_rgpu_graph_kernel_node(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                         cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                         size_t ndeps, cudaKernel_t kernel, dim3 grid,
                                         dim3 block, unsigned int shmem, cudaGraphNode_t *made,
                                         const void *params, size_t params_size)
{
    struct node_call n = { op, u64(graph), u64(exec), u64(node), u64(kernel),
                           (const CUgraphNode *)deps, ndeps, { 0 }, 0, 0, NULL, 0 };
    node_call_shape(&n, grid, block, shmem, params, params_size);
    return (cudaError_t)kernel_node(&n, 1, (CUgraphNode *)made);
}

CUresult serve_rgpu_cu_graph_kernel_node(int op, CUgraph graph, CUgraphExec exec,
                                         CUgraphNode node, const CUgraphNode *deps, size_t ndeps,
                                         CUfunction function, dim3 grid, dim3 block,
                                         unsigned int shmem, int packed, CUgraphNode *made,
                                         const void *params, size_t params_size)
{
    struct node_call n = { op, u64(graph), u64(exec), u64(node), u64(function), deps, ndeps,
                           { 0 }, 0, packed != 0, NULL, 0 };
    node_call_shape(&n, grid, block, shmem, params, params_size);
    return (CUresult)kernel_node(&n, 0, made);
}

/* ---- a kernel node's parameters, queried --------------------------------------------- */

/* What a query answers, as either library gave it. */
struct node_params {
    uint64_t kernel;
    unsigned dim[6], shmem;
    const uint32_t *off, *size;     /* the kernel's layout */
    unsigned n;
    void *const *args;
};

/* The outputs: the shape, the layout, and the arguments copied out of the
 * library's pointers at the layout's offsets (each inside the layout's
 * extent, which the library's own query gave) into params, which the codec
 * zeroed.  The status. */
struct params_out {
    dim3 *grid, *block;
    unsigned int *shmem;
    uint32_t *offsets, *sizes;
    size_t max_params, *nparams;
    unsigned char *params;
    size_t max_bytes, *nbytes;
};

static int params_answer(const struct node_params *p, const struct params_out *o)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < p->n; i++)
        if ((size_t)p->off[i] + p->size[i] > bytes)
            bytes = (size_t)p->off[i] + p->size[i];
    if (!o->grid || !o->block || !o->shmem || !o->nparams || !o->nbytes ||
        (p->n && (!o->offsets || !o->sizes)) || (bytes && !o->params))
        return E_INVALID_VALUE;
    if (p->n > o->max_params || bytes > o->max_bytes) {
        rgpu_warn("graph kernel node query: %u parameters of %zu bytes do not fit the answer",
                  p->n, bytes);
        return E_NOT_SUPPORTED;
    }
    *o->grid = (dim3){ p->dim[0], p->dim[1], p->dim[2] };
    *o->block = (dim3){ p->dim[3], p->dim[4], p->dim[5] };
    *o->shmem = p->shmem;
    for (unsigned i = 0; i < p->n; i++) {
        o->offsets[i] = p->off[i];
        o->sizes[i] = p->size[i];
        memcpy(o->params + p->off[i], p->args[i], p->size[i]);
    }
    *o->nparams = p->n;
    *o->nbytes = bytes;
    return 0;
}

/* The session's kernels are cudaKernel_t handles (cudaLibraryGetKernel),
 * which the runtime may not map back from a node: then the driver's
 * answer names the node's CUkernel, the same handle. */
static int kernel_by_driver(uint64_t node, CUDA_KERNEL_NODE_PARAMS *d)
{
    __typeof__(&cudaGetLastError) clear = RT(cudaGetLastError);
    if (clear)
        clear();        /* the runtime's failed query set its last error */
    memset(d, 0, sizeof *d);
    return DRV(cuGraphKernelNodeGetParams_v2) &&
           DRV(cuGraphKernelNodeGetParams_v2)((CUgraphNode)node, d) == CUDA_SUCCESS && d->kern;
}

cudaError_t serve_rgpu_graph_kernel_params(cudaGraphNode_t node, uint64_t *kernel, dim3 *grid,
                                           dim3 *block, unsigned int *shmem, uint32_t *offsets,
                                           uint32_t *sizes, size_t max_params, size_t *nparams,
                                           void *params, size_t max_bytes, size_t *nbytes)
{
    const struct params_out o = { grid, block, shmem, offsets, sizes, max_params, nparams,
                                  params, max_bytes, nbytes };
    struct node_params np;
    struct cudaKernelNodeParams p;
    CUDA_KERNEL_NODE_PARAMS d;
    if (!RT(cudaGraphKernelNodeGetParams))
        return serve_transport(RGPU_ENOSYM);
    if (!kernel)
        return cudaErrorInvalidValue;
    if (!handles_contains(H_GRAPH_NODE, u64(node)))
        return cudaErrorInvalidResourceHandle;
    memset(&p, 0, sizeof p);
    int rc = RT(cudaGraphKernelNodeGetParams)(node, &p);
    np.kernel = u64(p.func);
    if ((rc == cudaErrorInvalidDeviceFunction ||
         (rc == cudaSuccess && hand_cudart_kernel_layout(np.kernel, &np.off, &np.size,
                                                         &np.n) != 0)) &&
        kernel_by_driver(u64(node), &d)) {
        np.kernel = u64(d.kern);
        p.gridDim = (dim3){ d.gridDimX, d.gridDimY, d.gridDimZ };
        p.blockDim = (dim3){ d.blockDimX, d.blockDimY, d.blockDimZ };
        p.sharedMemBytes = d.sharedMemBytes;
        p.kernelParams = d.kernelParams;
        rc = cudaSuccess;
    }
    if (rc != cudaSuccess)
        return (cudaError_t)rc;
    /* A kernel this session resolved, with its arguments as pointers: else
     * the runtime's own answer for a kernel it does not know. */
    if (hand_cudart_kernel_layout(np.kernel, &np.off, &np.size, &np.n) != 0 ||
        (np.n && !p.kernelParams))
        return cudaErrorInvalidDeviceFunction;
    const unsigned dim[6] = { p.gridDim.x, p.gridDim.y, p.gridDim.z,
                              p.blockDim.x, p.blockDim.y, p.blockDim.z };
    memcpy(np.dim, dim, sizeof dim);
    np.shmem = p.sharedMemBytes;
    np.args = p.kernelParams;
    *kernel = np.kernel;
    return (cudaError_t)params_answer(&np, &o);
}

CUresult serve_rgpu_cu_graph_kernel_params(CUgraphNode node, uint64_t *function,
                                           uint64_t *kernel, uint64_t *ctx, dim3 *grid,
                                           dim3 *block, unsigned int *shmem, uint32_t *offsets,
                                           uint32_t *sizes, size_t max_params, size_t *nparams,
                                           void *params, size_t max_bytes, size_t *nbytes)
{
    const struct params_out o = { grid, block, shmem, offsets, sizes, max_params, nparams,
                                  params, max_bytes, nbytes };
    struct node_params np;
    CUDA_KERNEL_NODE_PARAMS p;
    if (!DRV(cuGraphKernelNodeGetParams_v2))
        return (CUresult)serve_transport(RGPU_ENOSYM);
    if (!function || !kernel || !ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!handles_contains(H_GRAPH_NODE, u64(node)))
        return CUDA_ERROR_INVALID_HANDLE;
    memset(&p, 0, sizeof p);
    CUresult rc = DRV(cuGraphKernelNodeGetParams_v2)(node, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    np.kernel = u64(p.func ? (void *)p.func : (void *)p.kern);
    if (hand_cuda_function_layout(np.kernel, &np.off, &np.size, &np.n) != 0 ||
        (np.n && !p.kernelParams)) {
        rgpu_warn("cuGraphKernelNodeGetParams: a function without a layout asked for, or "
                  "arguments in the extra format: not served");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    const unsigned dim[6] = { p.gridDimX, p.gridDimY, p.gridDimZ,
                              p.blockDimX, p.blockDimY, p.blockDimZ };
    memcpy(np.dim, dim, sizeof dim);
    np.shmem = p.sharedMemBytes;
    np.args = p.kernelParams;
    /* Both handles the driver names: a statically linked runtime finds its
     * kernel by either. */
    *function = u64(p.func);
    *kernel = u64(p.kern);
    *ctx = u64(p.ctx);
    return (CUresult)params_answer(&np, &o);
}

/* ---- node and edge lists ---------------------------------------------------------- */

/* The library's list of a graph's nodes (roots 0) or roots (1). */
static int node_list(uint64_t graph, int roots, int runtime, CUgraphNode *nodes, size_t *count)
{
    if (runtime) {
        __typeof__(&cudaGraphGetNodes) f = roots ? RT(cudaGraphGetRootNodes)
                                                 : RT(cudaGraphGetNodes);
        if (!f)
            return -RGPU_ENOSYM;
        return (int)f((cudaGraph_t)graph, (cudaGraphNode_t *)nodes, count);
    }
    __typeof__(&cuGraphGetNodes) f = roots ? DRV(cuGraphGetRootNodes) : DRV(cuGraphGetNodes);
    if (!f)
        return -RGPU_ENOSYM;
    return (int)f((CUgraph)graph, nodes, count);
}

/* *count nodes in all; the first capacity into nodes, which the client may
 * name from now on (the codec adds them to the session's table: they are
 * the graph's, and go with it). */
static int graph_nodes(uint64_t graph, int roots, int runtime, CUgraphNode *nodes,
                       size_t capacity, size_t *count)
{
    size_t n = 0;
    CUgraphNode *all = NULL;
    if (roots != 0 && roots != 1)
        return serve_transport(RGPU_EPROTO);
    if (!count)
        return E_INVALID_VALUE;
    int rc = E_INVALID_HANDLE;
    if (handles_contains(H_GRAPH, graph))
        rc = node_list(graph, roots, runtime, NULL, &n);
    if (rc == 0 && n > RGPU_GRAPH_LIST_MAX)
        rc = E_OUT_OF_MEMORY;
    if (rc == 0 && n && nodes && !(all = calloc(n, sizeof *all)))
        rc = E_OUT_OF_MEMORY;
    if (rc == 0 && all)
        rc = node_list(graph, roots, runtime, all, &n);
    if (rc == 0 && all)
        memcpy(nodes, all, (n < capacity ? n : capacity) * sizeof *all);
    *count = rc == 0 ? n : 0;
    free(all);
    return answered(rc);
}

cudaError_t serve_rgpu_graph_nodes(cudaGraph_t graph, int roots, cudaGraphNode_t *nodes,
                                   size_t capacity, size_t *count)
{
    return (cudaError_t)graph_nodes(u64(graph), roots, 1, (CUgraphNode *)nodes, capacity, count);
}

CUresult serve_rgpu_cu_graph_nodes(CUgraph graph, int roots, CUgraphNode *nodes, size_t capacity,
                                   size_t *count)
{
    return (CUresult)graph_nodes(u64(graph), roots, 0, nodes, capacity, count);
}

static int edge_list(uint64_t graph, int runtime, CUgraphNode *from, CUgraphNode *to,
                     CUgraphEdgeData *data, size_t *count)
{
    if (runtime) {
        __typeof__(&cudaGraphGetEdges) f = RT(cudaGraphGetEdges);
        if (!f)
            return -RGPU_ENOSYM;
        return (int)f((cudaGraph_t)graph, (cudaGraphNode_t *)from, (cudaGraphNode_t *)to,
                      (cudaGraphEdgeData *)data, count);
    }
    __typeof__(&cuGraphGetEdges_v2) f = DRV(cuGraphGetEdges_v2);
    if (!f)
        return -RGPU_ENOSYM;
    return (int)f((CUgraph)graph, from, to, data, count);
}

/* The edges' lists, as the nodes' (the codec adds both ends' nodes).
 * Without edge data asked for (edges NULL), the library answers as it does
 * natively when an edge has some (a lossy query). */
struct edge_lists {
    CUgraphNode *from, *to;
    CUgraphEdgeData *data;
};

static int graph_edges(uint64_t graph, int runtime, const struct edge_lists *out,
                       size_t capacity, size_t *count)
{
    struct edge_lists all = { NULL, NULL, NULL };
    size_t n = 0;
    if (!count || !out->from != !out->to || (out->data && !out->from))
        return E_INVALID_VALUE;
    int rc = E_INVALID_HANDLE;
    if (handles_contains(H_GRAPH, graph))
        rc = edge_list(graph, runtime, NULL, NULL, NULL, &n);
    if (rc == 0 && n > RGPU_GRAPH_LIST_MAX)
        rc = E_OUT_OF_MEMORY;
    if (rc == 0 && n && out->from &&
        (!(all.from = calloc(n, sizeof *all.from)) || !(all.to = calloc(n, sizeof *all.to)) ||
         (out->data && !(all.data = calloc(n, sizeof *all.data)))))
        rc = E_OUT_OF_MEMORY;
    if (rc == 0 && all.from)
        rc = edge_list(graph, runtime, all.from, all.to, all.data, &n);
    size_t sent = rc == 0 && all.from ? (n < capacity ? n : capacity) : 0;
    if (sent) {
        memcpy(out->from, all.from, sent * sizeof *all.from);
        memcpy(out->to, all.to, sent * sizeof *all.to);
        if (out->data)
            memcpy(out->data, all.data, sent * sizeof *all.data);
    }
    *count = rc == 0 ? n : 0;
    free(all.from);
    free(all.to);
    free(all.data);
    return answered(rc);
}

cudaError_t serve_rgpu_graph_edges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
                                   cudaGraphEdgeData *edges, size_t capacity, size_t *count)
{
    const struct edge_lists out = { (CUgraphNode *)from, (CUgraphNode *)to,
                                    (CUgraphEdgeData *)edges };
    return (cudaError_t)graph_edges(u64(graph), 1, &out, capacity, count);
}

CUresult serve_rgpu_cu_graph_edges(CUgraph graph, CUgraphNode *from, CUgraphNode *to,
                                   CUgraphEdgeData *edges, size_t capacity, size_t *count)
{
    const struct edge_lists out = { from, to, edges };
    return (CUresult)graph_edges(u64(graph), 0, &out, capacity, count);
}

/* ---- memory-allocation nodes ------------------------------------------------------ */

/* The runtime's record is the driver's, member for member. */
_Static_assert(sizeof(struct cudaMemAllocNodeParams) == sizeof(CUDA_MEM_ALLOC_NODE_PARAMS),
               "alloc node parameters");
_Static_assert(offsetof(struct cudaMemAllocNodeParams, dptr) ==
                   offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, dptr), "alloc node address");
_Static_assert(sizeof(struct cudaMemPoolProps) == sizeof(CUmemPoolProps), "pool properties");
_Static_assert(sizeof(struct cudaMemAccessDesc) == sizeof(CUmemAccessDesc), "access descriptor");

#define MAX_ACCESS_DESCS 64     /* more than any host has GPUs */

struct alloc_call {
    uint64_t graph;
    const CUgraphNode *deps;
    size_t ndeps;
    const CUmemPoolProps *props;
    const CUmemAccessDesc *descs;
    size_t ndescs, bytesize;
};

/* The allocation is made when the graph runs, at an address fixed now: the
 * range is the session's device memory from here on (kernels, copies and
 * memsets of the graph name it).  The record is rebuilt from the client's
 * parts: the pool properties' one pointer (Windows security attributes)
 * NULL, the descriptors where the frame holds them. */
static int graph_mem_alloc(const struct alloc_call *a, int runtime, CUgraphNode *node,
                           uint64_t *dptr)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUgraphNode made = NULL;
    int rc;
    if (graph_deps_malformed(a->deps, a->ndeps) || !a->props || a->ndescs > MAX_ACCESS_DESCS ||
        (a->ndescs && !a->descs))
        return serve_transport(RGPU_EPROTO);
    if (!node || !dptr)
        return E_INVALID_VALUE;
    memset(&p, 0, sizeof p);
    p.poolProps = *a->props;
    p.poolProps.win32SecurityAttributes = NULL;
    p.accessDescs = a->ndescs ? a->descs : NULL;
    p.accessDescCount = a->ndescs;
    p.bytesize = a->bytesize;
    if (!handles_contains(H_GRAPH, a->graph) || !graph_deps_known(a->deps, a->ndeps)) {
        rgpu_warn("graph memory node: refused a graph or node the session never handed out");
        rc = E_INVALID_HANDLE;
    } else if (runtime) {
        __typeof__(&cudaGraphAddMemAllocNode) f = RT(cudaGraphAddMemAllocNode);
        rc = f ? (int)f((cudaGraphNode_t *)&made, (cudaGraph_t)a->graph,
                        (const cudaGraphNode_t *)a->deps, a->ndeps,
                        (struct cudaMemAllocNodeParams *)(void *)&p)
               : -RGPU_ENOSYM;
    } else {
        __typeof__(&cuGraphAddMemAllocNode) f = DRV(cuGraphAddMemAllocNode);
        rc = f ? (int)f(&made, (CUgraph)a->graph, a->deps, a->ndeps, &p) : -RGPU_ENOSYM;
    }
    if (rc == 0)
        (void)owned_add(p.dptr, p.bytesize, OWNED_POOL, 0);
    *node = rc == 0 ? made : NULL;
    *dptr = rc == 0 ? p.dptr : 0;
    return answered(rc);
}

cudaError_t serve_rgpu_graph_mem_alloc(cudaGraphNode_t *node, cudaGraph_t graph,
                                       const cudaGraphNode_t *deps, size_t ndeps,
                                       const struct cudaMemPoolProps *props,
                                       const struct cudaMemAccessDesc *descs, size_t ndescs,
                                       size_t bytesize, uint64_t *dptr)
{
    const struct alloc_call a = { u64(graph), (const CUgraphNode *)deps, ndeps,
                                  (const CUmemPoolProps *)(const void *)props,
                                  (const CUmemAccessDesc *)(const void *)descs, ndescs,
                                  bytesize };
    return (cudaError_t)graph_mem_alloc(&a, 1, (CUgraphNode *)node, dptr);
}

CUresult serve_rgpu_cu_graph_mem_alloc(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                       size_t ndeps, const CUmemPoolProps *props,
                                       const CUmemAccessDesc *descs, size_t ndescs,
                                       size_t bytesize, uint64_t *dptr)
{
    const struct alloc_call a = { u64(graph), deps, ndeps, props, descs, ndescs, bytesize };
    return (CUresult)graph_mem_alloc(&a, 0, node, dptr);
}

/* ---- cudaGraphDebugDotPrint ------------------------------------------------------ */

#define DOT_MAX (64u << 20)     /* a larger description is refused */

/* The library writes the dot file to a path: here an anonymous memory file
 * named through /proc/self/fd (a session may write no file of the host's),
 * read back into text as far as it holds (*size: all of it), and sent to
 * the client, which writes the caller's.  0, or -1. */
static int read_back(int fd, char *text, size_t max_size, size_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > DOT_MAX)
        return -1;
    size_t want = (size_t)st.st_size < max_size ? (size_t)st.st_size : max_size, got = 0;
    while (text && got < want) {
        ssize_t n = pread(fd, text + got, want - got, (off_t)got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    *size = (size_t)st.st_size;
    return 0;
}

/* The memory file the library may open for writing during one dot print,
 * by its /proc/self/fd path: the sandbox's trap hands out a duplicate of
 * it for an open of exactly that path (daemon/sandbox.c), since a session
 * may open no file for writing. */
int graph_dot_fd = -1;
char graph_dot_path[64];
static pthread_mutex_t dot_lock = PTHREAD_MUTEX_INITIALIZER;

static int print_dot(uint64_t graph, unsigned flags, int fd, int runtime)
{
    pthread_mutex_lock(&dot_lock);
    snprintf(graph_dot_path, sizeof graph_dot_path, "/proc/self/fd/%d", fd);
    __atomic_store_n(&graph_dot_fd, fd, __ATOMIC_SEQ_CST);
    int rc = runtime ? RT(cudaGraphDebugDotPrint)((cudaGraph_t)graph, graph_dot_path, flags)
                     : DRV(cuGraphDebugDotPrint)((CUgraph)graph, graph_dot_path, flags);
    __atomic_store_n(&graph_dot_fd, -1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&dot_lock);
    return rc;
}

static int graph_dot(uint64_t graph, unsigned flags, int runtime, char *text, size_t max_size,
                     size_t *size)
{
    if (runtime ? !RT(cudaGraphDebugDotPrint) : !DRV(cuGraphDebugDotPrint))
        return serve_transport(RGPU_ENOSYM);
    if (!size)
        return E_INVALID_VALUE;
    *size = 0;
    int rc = E_INVALID_HANDLE;
    int fd = -1;
    if (handles_contains(H_GRAPH, graph)) {
        fd = memfd_create("rgpu-graph-dot", MFD_CLOEXEC);
        rc = E_OPERATING_SYSTEM;
    }
    if (fd >= 0)
        rc = print_dot(graph, flags, fd, runtime);
    if (rc == 0 && read_back(fd, text, max_size, size) != 0)
        rc = E_OPERATING_SYSTEM;
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        *size = 0;
    return rc;
}

cudaError_t serve_rgpu_graph_dot(cudaGraph_t graph, unsigned int flags, char *text,
                                 size_t max_size, size_t *size)
{
    return (cudaError_t)graph_dot(u64(graph), flags, 1, text, max_size, size);
}

CUresult serve_rgpu_cu_graph_dot(CUgraph graph, unsigned int flags, char *text, size_t max_size,
                                 size_t *size)
{
    return (CUresult)graph_dot(u64(graph), flags, 0, text, max_size, size);
}

/* ---- guards of the generated graph calls ------------------------------------------ */

static uint64_t val(void *const *argv, int i)
{
    return *(const uint64_t *)argv[i];
}

/* A graph's nodes go with it: forgotten before the destroy, asked from the
 * library (the handle itself was checked already).  A graph holds at most
 * what the client added, so the list is bounded by what it sent. */
void graph_forget_nodes(uint64_t graph, int runtime)
{
    size_t count = 0;
    if (runtime ? !RT(cudaGraphGetNodes) ||
                      RT(cudaGraphGetNodes)((cudaGraph_t)graph, NULL, &count) != cudaSuccess
                : !DRV(cuGraphGetNodes) ||
                      DRV(cuGraphGetNodes)((CUgraph)graph, NULL, &count) != CUDA_SUCCESS)
        return;
    CUgraphNode *nodes = count ? calloc(count, sizeof *nodes) : NULL;
    if (!nodes)
        return;
    int rc = runtime ? RT(cudaGraphGetNodes)((cudaGraph_t)graph, nodes, &count)
                     : DRV(cuGraphGetNodes)((CUgraph)graph, nodes, &count);
    for (size_t i = 0; rc == 0 && i < count; i++)
        handles_remove(H_GRAPH_NODE, (uint64_t)(uintptr_t)nodes[i]);
    free(nodes);
}

/* A conditional node's body is the node's (hand_graph_conditionals.c). */
static int graph_destroy(uint64_t graph, int runtime)
{
    if (graph_cond_is_body(graph)) {
        rgpu_warn("refused to destroy a conditional node's body graph: it is its node's");
        return runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    }
    graph_cond_forget_graph(graph, runtime);
    graph_forget_nodes(graph, runtime);
    return 0;
}

static int pre_rt_graph_destroy(void **argv)
{
    return graph_destroy(val(argv, 0), 1);
}

static int pre_cu_graph_destroy(void **argv)
{
    return graph_destroy(val(argv, 0), 0);
}

/* A node's bodies go with it (a conditional node's). */
static int pre_rt_node_destroy(void **argv)
{
    graph_cond_forget_node(val(argv, 0), 1);
    return 0;
}

static int pre_cu_node_destroy(void **argv)
{
    graph_cond_forget_node(val(argv, 0), 0);
    return 0;
}

/* A memset node's whole 2D extent must be the session's memory: the
 * runtime's record and the driver's (elementSize 1, 2 or 4). */
static int memset_owned(uint64_t dst, uint64_t pitch, uint64_t elem, uint64_t width,
                        uint64_t height, const char *what)
{
    uint64_t extent;
    if (elem != 1 && elem != 2 && elem != 4)
        return 0;
    if (width > UINT64_MAX / elem || owned_extent_2d(pitch, width * elem, height, &extent) != 0 ||
        !owned_range(dst, extent)) {
        rgpu_warn("%s: refused a destination outside the session's memory", what);
        return 0;
    }
    return 1;
}

static int rt_memset_at(void **argv, int i, const char *what)
{
    const struct cudaMemsetParams *p = *(const struct cudaMemsetParams *const *)argv[i];
    if (!p)
        return 0;           /* the runtime's own answer */
    return memset_owned((uint64_t)(uintptr_t)p->dst, p->pitch, p->elementSize, p->width,
                        p->height, what) ? 0 : cudaErrorInvalidValue;
}

static int cu_memset_at(void **argv, int i, const char *what)
{
    const CUDA_MEMSET_NODE_PARAMS *p = *(const CUDA_MEMSET_NODE_PARAMS *const *)argv[i];
    if (!p)
        return 0;
    return memset_owned(p->dst, p->pitch, p->elementSize, p->width, p->height, what)
               ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static int pre_memset_node(void **argv)
{
    return rt_memset_at(argv, 4, "cudaGraphAddMemsetNode");
}

static int pre_memset_set(void **argv)
{
    return rt_memset_at(argv, 1, "cudaGraphMemsetNodeSetParams");
}

static int pre_exec_memset_set(void **argv)
{
    return rt_memset_at(argv, 2, "cudaGraphExecMemsetNodeSetParams");
}

static int pre_cu_memset_node(void **argv)
{
    return cu_memset_at(argv, 4, "cuGraphAddMemsetNode");
}

static int pre_cu_memset_set(void **argv)
{
    return cu_memset_at(argv, 1, "cuGraphMemsetNodeSetParams");
}

static int pre_cu_exec_memset_set(void **argv)
{
    return cu_memset_at(argv, 2, "cuGraphExecMemsetNodeSetParams");
}

/* One side of a 3D copy: device memory (or unified addresses, which must
 * then be device memory too), every byte of its extent the session's.
 * Host memory and arrays never reach the driver from here: the client
 * refuses them, so from the wire they are forged. */
struct copy_shape {
    uint64_t width, height, depth;      /* bytes, rows, planes */
};

static int copy_side_owned(CUmemorytype type, CUdeviceptr base, size_t x, size_t y, size_t z,
                           size_t pitch, size_t height, const struct copy_shape *e)
{
    uint64_t plane, rows, start, extent;
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
        return 0;
    if (!e->width || !e->height || !e->depth)
        return 1;               /* the library's own answer */
    if (!pitch)
        pitch = e->width;
    if (!height)
        height = e->height;
    if (__builtin_mul_overflow(pitch, height, &plane) ||
        __builtin_mul_overflow(plane, (uint64_t)z, &start) ||
        __builtin_mul_overflow(pitch, (uint64_t)y, &rows) ||
        __builtin_add_overflow(start, rows, &start) ||
        __builtin_add_overflow(start, (uint64_t)x, &start) ||
        __builtin_add_overflow(start, (uint64_t)base, &start))
        return 0;
    /* (depth-1) planes, (height-1) rows, then one row's width. */
    if (__builtin_mul_overflow(plane, e->depth - 1, &extent) ||
        __builtin_mul_overflow(pitch, e->height - 1, &rows) ||
        __builtin_add_overflow(extent, rows, &extent) ||
        __builtin_add_overflow(extent, e->width, &extent))
        return 0;
    return owned_range(start, extent);
}

int graph_copy_side_owned(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch,
                          uint64_t rows, uint64_t w, uint64_t h, uint64_t d)
{
    const struct copy_shape e = { w, h, d };
    return copy_side_owned(CU_MEMORYTYPE_DEVICE, (CUdeviceptr)base, x, y, z, pitch, rows, &e);
}

/* The runtime's record: pitched pointers only (no arrays), x in bytes.  A
 * setter's node (set: argument 0, 1 in an executable graph) may be a copy
 * node with host memory (graph_host.c), which keeps it. */
static int rt_memcpy_at(void **argv, int i, const char *what)
{
    const struct cudaMemcpy3DParms *p = *(const struct cudaMemcpy3DParms *const *)argv[i];
    int refused = i == 4 ? 0 : graph_host_refuse_copy_node(val(argv, i - 1), 1, i == 2, what);
    if (!p || refused)
        return refused;
    const struct copy_shape e = { p->extent.width, p->extent.height, p->extent.depth };
    if (p->srcArray || p->dstArray ||
        !copy_side_owned(CU_MEMORYTYPE_DEVICE, (CUdeviceptr)(uintptr_t)p->srcPtr.ptr,
                         p->srcPos.x, p->srcPos.y, p->srcPos.z, p->srcPtr.pitch,
                         p->srcPtr.ysize, &e) ||
        !copy_side_owned(CU_MEMORYTYPE_DEVICE, (CUdeviceptr)(uintptr_t)p->dstPtr.ptr,
                         p->dstPos.x, p->dstPos.y, p->dstPos.z, p->dstPtr.pitch,
                         p->dstPtr.ysize, &e)) {
        rgpu_warn("%s: refused a copy outside the session's device memory", what);
        return cudaErrorInvalidValue;
    }
    return 0;
}

static int pre_rt_memcpy_node(void **argv)
{
    return rt_memcpy_at(argv, 4, "cudaGraphAddMemcpyNode");
}

static int pre_rt_memcpy_set(void **argv)
{
    return rt_memcpy_at(argv, 1, "cudaGraphMemcpyNodeSetParams");
}

static int pre_rt_exec_memcpy_set(void **argv)
{
    return rt_memcpy_at(argv, 2, "cudaGraphExecMemcpyNodeSetParams");
}

static int cu_memcpy_at(void **argv, int i, const char *what)
{
    const CUDA_MEMCPY3D *p = *(const CUDA_MEMCPY3D *const *)argv[i];
    int refused = i == 4 ? 0 : graph_host_refuse_copy_node(val(argv, i - 1), 0, i == 2, what);
    if (!p || refused)
        return refused;
    const struct copy_shape e = { p->WidthInBytes, p->Height, p->Depth };
    if (!copy_side_owned(p->srcMemoryType, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
                         p->srcPitch, p->srcHeight, &e) ||
        !copy_side_owned(p->dstMemoryType, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ,
                         p->dstPitch, p->dstHeight, &e)) {
        rgpu_warn("%s: refused a copy outside the session's device memory", what);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return 0;
}

static int pre_cu_memcpy_node(void **argv)
{
    return cu_memcpy_at(argv, 4, "cuGraphAddMemcpyNode");
}

static int pre_cu_memcpy_set(void **argv)
{
    return cu_memcpy_at(argv, 1, "cuGraphMemcpyNodeSetParams");
}

static int pre_cu_exec_memcpy_set(void **argv)
{
    return cu_memcpy_at(argv, 2, "cuGraphExecMemcpyNodeSetParams");
}

/* Instantiation with parameters: the upload stream inside the record is a
 * handle like any other (the generated check sees only arguments). */
static void post_rt_instantiate_params(void **argv, int status)
{
    graph_host_instantiated(argv, status, 1);
}

static void post_cu_instantiate_params(void **argv, int status)
{
    graph_host_instantiated(argv, status, 0);
}

static int pre_rt_instantiate_params(void **argv)
{
    const cudaGraphInstantiateParams *p = *(const cudaGraphInstantiateParams *const *)argv[2];
    if (p && !handles_valid(H_STREAM, (uint64_t)(uintptr_t)p->uploadStream)) {
        rgpu_warn("cudaGraphInstantiateWithParams: refused an upload stream the session "
                  "never handed out");
        return cudaErrorInvalidResourceHandle;
    }
    return 0;
}

static int pre_cu_instantiate_params(void **argv)
{
    const CUDA_GRAPH_INSTANTIATE_PARAMS *p = *(const CUDA_GRAPH_INSTANTIATE_PARAMS *const *)argv[2];
    if (p && !handles_valid(H_STREAM, (uint64_t)(uintptr_t)p->hUploadStream)) {
        rgpu_warn("cuGraphInstantiateWithParams: refused an upload stream the session never "
                  "handed out");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return 0;
}

static const struct guard graph_guards[] = {
    { "cudart", "cudaGraphDestroy", pre_rt_graph_destroy, NULL },
    { "cuda", "cuGraphDestroy", pre_cu_graph_destroy, NULL },
    { "cudart", "cudaGraphDestroyNode", pre_rt_node_destroy, NULL },
    { "cuda", "cuGraphDestroyNode", pre_cu_node_destroy, NULL },
    { "cudart", "cudaGraphAddMemsetNode", pre_memset_node, NULL },
    { "cuda", "cuGraphAddMemsetNode", pre_cu_memset_node, NULL },
    { "cuda", "cuGraphAddMemcpyNode", pre_cu_memcpy_node, NULL },
    { "cudart", "cudaGraphAddMemcpyNode", pre_rt_memcpy_node, NULL },
    { "cudart", "cudaGraphMemcpyNodeSetParams", pre_rt_memcpy_set, NULL },
    { "cudart", "cudaGraphExecMemcpyNodeSetParams", pre_rt_exec_memcpy_set, NULL },
    { "cudart", "cudaGraphMemsetNodeSetParams", pre_memset_set, NULL },
    { "cudart", "cudaGraphExecMemsetNodeSetParams", pre_exec_memset_set, NULL },
    { "cuda", "cuGraphMemsetNodeSetParams", pre_cu_memset_set, NULL },
    { "cuda", "cuGraphExecMemsetNodeSetParams", pre_cu_exec_memset_set, NULL },
    { "cuda", "cuGraphMemcpyNodeSetParams", pre_cu_memcpy_set, NULL },
    { "cuda", "cuGraphExecMemcpyNodeSetParams", pre_cu_exec_memcpy_set, NULL },
    { "cudart", "cudaGraphInstantiateWithParams", pre_rt_instantiate_params,
      post_rt_instantiate_params },
    { "cudart", "cudaGraphInstantiateWithParams_ptsz", pre_rt_instantiate_params,
      post_rt_instantiate_params },
    { "cuda", "cuGraphInstantiateWithParams", pre_cu_instantiate_params,
      post_cu_instantiate_params },
    { "cuda", "cuGraphInstantiateWithParams_ptsz", pre_cu_instantiate_params,
      post_cu_instantiate_params },
};

const struct guard *graph_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(graph_guards, lib, name);
}
