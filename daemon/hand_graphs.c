/* CUDA graphs built node by node, server side (client side:
 * stubs/cudart_graphs.c, stubs/cuda_graphs.c; argument lists:
 * common/rgpu_hand_procs.h), for the runtime and the driver: kernel nodes
 * added, set and queried; node and edge lists; memory-allocation nodes;
 * the dot description, written into a memory file whose text goes back to
 * the client; and the guards of the generated graph calls (extents of
 * memset and memcpy nodes, the upload stream of an instantiation, a
 * destroyed graph's nodes).
 *
 * A kernel node's arguments arrive packed by the kernel's layout, as a
 * launch's do, and are unpacked into an argument vector the library copies
 * when the node is made or set.  Every graph, executable graph and node is
 * checked against the session's handle table; nodes the library hands out
 * are added to it, and leave it with their graph, so that a destroyed
 * graph's nodes are refused afterwards. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

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

#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define RT(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define MAX_DEPS 4096       /* dependencies one call may list */
#define MAX_PARAMS 512      /* kernel parameters, as launches */
#define MAX_LIST (1u << 20) /* nodes or edges one answer may carry */

static uint32_t H_GRAPH_NODE;

__attribute__((constructor)) static void graph_classes_init(void)
{
    H_GRAPH_NODE = rgpu_handle_class("CUgraphNode_st");
}

/* The call as both libraries' procedures describe it. */
struct node_call {
    uint64_t op, owner, node, kernel;
    uint64_t dim[6], shmem, packed;
    const void *deps;
    size_t ndeps;
    const void *params;
    size_t nparams_bytes;
};

/* [op, owner, node, bin deps, kernel, gx, gy, gz, bx, by, bz, shmem
 *  (, packed), bin params]: with_packed for the driver's shape. */
static int parse_node_call(struct hand_call *c, int with_packed, struct node_call *n)
{
    unsigned count = with_packed ? 14 : 13;
    const void *deps;
    size_t deps_len;
    uint64_t v[3], dim[9];
    memset(n, 0, sizeof *n);
    if (args_count(c, count) || arg_u64s(c, 3, v) || arg_bin(c, 3, &deps, &deps_len) ||
        arg_bin(c, count - 1, &n->params, &n->nparams_bytes))
        return -1;
    /* kernel, the six dimensions, shmem (, packed) */
    for (unsigned i = 0; i < 8u + (unsigned)with_packed; i++)
        if (arg_u64(c, 4 + i, &dim[i]))
            return -1;
    if (deps_len % sizeof(uint64_t) || deps_len / sizeof(uint64_t) > MAX_DEPS || v[0] > 2)
        return -1;
    for (unsigned i = 1; i < 7; i++)
        if (dim[i] > UINT32_MAX)
            return -1;
    n->op = v[0];
    n->owner = v[1];
    n->node = v[2];
    n->deps = deps;         /* the frame's bytes; read with memcpy below */
    n->ndeps = deps_len / sizeof(uint64_t);
    n->kernel = dim[0];
    memcpy(n->dim, &dim[1], sizeof n->dim);
    n->shmem = dim[7];
    n->packed = with_packed ? dim[8] : 0;
    return n->shmem > UINT32_MAX ? -1 : 0;
}

/* n dependencies (u64 node handles in a frame's bytes) as node handles,
 * each one of the session's: 1, else 0. */
int graph_deps_take(const void *bytes, size_t n, struct CUgraphNode_st **out)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h;
        memcpy(&h, (const unsigned char *)bytes + i * sizeof h, sizeof h);
        if (!handles_contains(H_GRAPH_NODE, h))
            return 0;
        out[i] = (CUgraphNode)(uintptr_t)h;
    }
    return 1;
}

static int deps_valid(const struct node_call *n, CUgraphNode *out)
{
    return graph_deps_take(n->deps, n->ndeps, out);
}

/* The handles the operation names: a graph and dependencies to add to, a
 * node to set, or an executable graph and its node. */
static int handles_named(const struct node_call *n, CUgraphNode *deps)
{
    switch (n->op) {
    case RGPU_GRAPH_NODE_ADD:
        return handles_contains(H_GRAPH, n->owner) && deps_valid(n, deps);
    case RGPU_GRAPH_NODE_SET:
        return handles_contains(H_GRAPH_NODE, n->node);
    default:
        return handles_contains(H_GRAPH_EXEC, n->owner) &&
               handles_contains(H_GRAPH_NODE, n->node);
    }
}

static int reply_node(struct hand_call *c, uint64_t node, int rc)
{
    if (rc == 0 && node)
        handles_add(H_GRAPH_NODE, node);
    msgpack_pack_array(c->out, 1);
    msgpack_pack_uint64(c->out, rc == 0 ? node : 0);
    return rc;
}

static int refuse(struct hand_call *c, const char *what, int status)
{
    rgpu_warn("graph kernel node: refused %s", what);
    return reply_node(c, 0, status);
}

/* ---- the runtime ----------------------------------------------------------------- */

static int rt_node(const struct node_call *n, CUgraphNode *deps, void **argv, uint64_t *node)
{
    struct cudaKernelNodeParams p = {
        (void *)(uintptr_t)n->kernel,
        { (unsigned)n->dim[0], (unsigned)n->dim[1], (unsigned)n->dim[2] },
        { (unsigned)n->dim[3], (unsigned)n->dim[4], (unsigned)n->dim[5] },
        (unsigned)n->shmem, argv, NULL,
    };
    cudaGraphNode_t made = NULL;
    int rc;
    switch (n->op) {
    case RGPU_GRAPH_NODE_ADD:
        if (!RT(cudaGraphAddKernelNode))
            return -RGPU_ENOSYM;
        rc = RT(cudaGraphAddKernelNode)(&made, (cudaGraph_t)n->owner, deps, n->ndeps, &p);
        *node = (uint64_t)(uintptr_t)made;
        return rc;
    case RGPU_GRAPH_NODE_SET:
        if (!RT(cudaGraphKernelNodeSetParams))
            return -RGPU_ENOSYM;
        *node = n->node;
        return RT(cudaGraphKernelNodeSetParams)((cudaGraphNode_t)n->node, &p);
    default:
        if (!RT(cudaGraphExecKernelNodeSetParams))
            return -RGPU_ENOSYM;
        *node = n->node;
        return RT(cudaGraphExecKernelNodeSetParams)((cudaGraphExec_t)n->owner,
                                                    (cudaGraphNode_t)n->node, &p);
    }
}

static int h_graph_kernel_node(struct hand_call *c)
{
    struct node_call n;
    CUgraphNode deps[MAX_DEPS];
    void *argv[MAX_PARAMS];
    uint64_t node = 0;
    PROTO_IF(parse_node_call(c, 0, &n));
    if (!handles_named(&n, deps))
        return refuse(c, "a graph, executable graph or node the session never handed out",
                      cudaErrorInvalidResourceHandle);
    int k = hand_cudart_kernel_argv(n.kernel, n.params, n.nparams_bytes, argv, MAX_PARAMS);
    PROTO_IF(k < 0);
    if (k > 0)
        return refuse(c, "a kernel the session never resolved", cudaErrorInvalidDeviceFunction);
    int rc = rt_node(&n, deps, argv, &node);
    if (rc < 0)
        return rc;
    return reply_node(c, n.op == RGPU_GRAPH_NODE_ADD ? node : 0, rc);
}

/* ---- a kernel node's parameters, queried --------------------------------------------- */

/* [kernel, gx, gy, gz, bx, by, bz, shmem, layout, bin params]: the
 * arguments copied out of the library's pointers at the layout's offsets
 * (each inside the layout's extent, which the library's own query gave). */
static void pack_kernel_params(struct hand_call *c, uint64_t kernel, const unsigned *dim,
                               unsigned shmem, const uint32_t *off, const uint32_t *size,
                               unsigned n, void *const *args, unsigned extra)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < n; i++)
        if ((size_t)off[i] + size[i] > bytes)
            bytes = (size_t)off[i] + size[i];
    msgpack_pack_array(c->out, 10 + extra);     /* the caller packs the extra ones */
    msgpack_pack_uint64(c->out, kernel);
    for (int i = 0; i < 6; i++)
        msgpack_pack_uint32(c->out, dim[i]);
    msgpack_pack_uint32(c->out, shmem);
    msgpack_pack_array(c->out, n);
    for (unsigned i = 0; i < n; i++) {
        msgpack_pack_array(c->out, 2);
        msgpack_pack_uint32(c->out, off[i]);
        msgpack_pack_uint32(c->out, size[i]);
    }
    unsigned char *buf = calloc(1, bytes ? bytes : 1);
    for (unsigned i = 0; buf && i < n; i++)
        memcpy(buf + off[i], args[i], size[i]);
    msgpack_pack_bin(c->out, buf ? bytes : 0);
    if (buf && bytes)
        msgpack_pack_bin_body(c->out, buf, bytes);
    free(buf);
}

static int no_params(struct hand_call *c, int status)
{
    msgpack_pack_array(c->out, 0);
    return status;
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

static int h_graph_kernel_params(struct hand_call *c)
{
    uint64_t node;
    const uint32_t *off, *size;
    unsigned n;
    struct cudaKernelNodeParams p;
    CUDA_KERNEL_NODE_PARAMS d;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &node));
    NEED(RT(cudaGraphKernelNodeGetParams));
    if (!handles_contains(H_GRAPH_NODE, node))
        return no_params(c, cudaErrorInvalidResourceHandle);
    memset(&p, 0, sizeof p);
    int rc = RT(cudaGraphKernelNodeGetParams)((cudaGraphNode_t)node, &p);
    uint64_t kern = (uint64_t)(uintptr_t)p.func;
    if ((rc == cudaErrorInvalidDeviceFunction ||
         (rc == cudaSuccess && hand_cudart_kernel_layout(kern, &off, &size, &n) != 0)) &&
        kernel_by_driver(node, &d)) {
        kern = (uint64_t)(uintptr_t)d.kern;
        p.gridDim = (dim3){ d.gridDimX, d.gridDimY, d.gridDimZ };
        p.blockDim = (dim3){ d.blockDimX, d.blockDimY, d.blockDimZ };
        p.sharedMemBytes = d.sharedMemBytes;
        p.kernelParams = d.kernelParams;
        rc = cudaSuccess;
    }
    if (rc != cudaSuccess)
        return no_params(c, rc);
    /* A kernel this session resolved, with its arguments as pointers: else
     * the runtime's own answer for a kernel it does not know. */
    if (hand_cudart_kernel_layout(kern, &off, &size, &n) != 0 || (n && !p.kernelParams))
        return no_params(c, cudaErrorInvalidDeviceFunction);
    const unsigned dim[6] = { p.gridDim.x, p.gridDim.y, p.gridDim.z,
                              p.blockDim.x, p.blockDim.y, p.blockDim.z };
    pack_kernel_params(c, kern, dim, p.sharedMemBytes, off, size, n, p.kernelParams, 0);
    return cudaSuccess;
}

static int h_cu_graph_kernel_params(struct hand_call *c)
{
    uint64_t node;
    const uint32_t *off, *size;
    unsigned n;
    CUDA_KERNEL_NODE_PARAMS p;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &node));
    NEED(DRV(cuGraphKernelNodeGetParams_v2));
    if (!handles_contains(H_GRAPH_NODE, node))
        return no_params(c, CUDA_ERROR_INVALID_HANDLE);
    memset(&p, 0, sizeof p);
    int rc = DRV(cuGraphKernelNodeGetParams_v2)((CUgraphNode)node, &p);
    if (rc != CUDA_SUCCESS)
        return no_params(c, rc);
    uint64_t func = (uint64_t)(uintptr_t)(p.func ? (void *)p.func : (void *)p.kern);
    if (hand_cuda_function_layout(func, &off, &size, &n) != 0 || (n && !p.kernelParams)) {
        rgpu_warn("cuGraphKernelNodeGetParams: a function without a layout asked for, or "
                  "arguments in the extra format: not served");
        return no_params(c, CUDA_ERROR_NOT_SUPPORTED);
    }
    const unsigned dim[6] = { p.gridDimX, p.gridDimY, p.gridDimZ,
                              p.blockDimX, p.blockDimY, p.blockDimZ };
    /* [function, ..., bin params, kernel, context]: both handles the driver
     * names (a statically linked runtime finds its kernel by either). */
    pack_kernel_params(c, (uint64_t)(uintptr_t)p.func, dim, p.sharedMemBytes, off, size, n,
                       p.kernelParams, 2);
    msgpack_pack_uint64(c->out, (uint64_t)(uintptr_t)p.kern);
    msgpack_pack_uint64(c->out, (uint64_t)(uintptr_t)p.ctx);
    return CUDA_SUCCESS;
}

/* ---- the driver ------------------------------------------------------------------ */

static int drv_node(const struct node_call *n, CUgraphNode *deps, void **argv, void **extra,
                    uint64_t *node)
{
    CUDA_KERNEL_NODE_PARAMS p = {
        (CUfunction)(uintptr_t)n->kernel,
        (unsigned)n->dim[0], (unsigned)n->dim[1], (unsigned)n->dim[2],
        (unsigned)n->dim[3], (unsigned)n->dim[4], (unsigned)n->dim[5],
        (unsigned)n->shmem, extra ? NULL : argv, extra, NULL, NULL,
    };
    CUgraphNode made = NULL;
    int rc;
    if (n->op == RGPU_GRAPH_NODE_ADD) {
        if (!DRV(cuGraphAddKernelNode_v2))
            return -RGPU_ENOSYM;
        rc = DRV(cuGraphAddKernelNode_v2)(&made, (CUgraph)n->owner, deps, n->ndeps, &p);
        *node = (uint64_t)(uintptr_t)made;
        return rc;
    }
    if (n->op == RGPU_GRAPH_NODE_SET) {
        if (!DRV(cuGraphKernelNodeSetParams_v2))
            return -RGPU_ENOSYM;
        return DRV(cuGraphKernelNodeSetParams_v2)((CUgraphNode)n->node, &p);
    }
    if (!DRV(cuGraphExecKernelNodeSetParams_v2))
        return -RGPU_ENOSYM;
    return DRV(cuGraphExecKernelNodeSetParams_v2)((CUgraphExec)n->owner, (CUgraphNode)n->node,
                                                  &p);
}

static int h_cu_graph_kernel_node(struct hand_call *c)
{
    struct node_call n;
    CUgraphNode deps[MAX_DEPS];
    void *argv[MAX_PARAMS];
    uint64_t node = 0;
    PROTO_IF(parse_node_call(c, 1, &n));
    if (!handles_named(&n, deps))
        return refuse(c, "a graph, executable graph or node the session never handed out",
                      CUDA_ERROR_INVALID_HANDLE);
    size_t size = n.nparams_bytes;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)n.params,
                      CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
    if (n.packed) {
        /* The caller's own buffer: the function need only be known. */
        if (!guard_function_known(n.kernel))
            return refuse(c, "a function the session was never handed",
                          CUDA_ERROR_INVALID_HANDLE);
    } else {
        int k = hand_cuda_function_argv(n.kernel, n.params, n.nparams_bytes, argv, MAX_PARAMS);
        PROTO_IF(k < 0);
        if (k > 0)
            return refuse(c, "a function without a layout asked for", CUDA_ERROR_INVALID_HANDLE);
    }
    int rc = drv_node(&n, deps, argv, n.packed ? extra : NULL, &node);
    if (rc < 0)
        return rc;
    return reply_node(c, n.op == RGPU_GRAPH_NODE_ADD ? node : 0, rc);
}

/* ---- edge lists ------------------------------------------------------------------ */

_Static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data");

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

static void pack_nodes(struct hand_call *c, const CUgraphNode *nodes, size_t n)
{
    msgpack_pack_bin(c->out, n * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)(uintptr_t)nodes[i];
        handles_add(H_GRAPH_NODE, h);
        msgpack_pack_bin_body(c->out, &h, sizeof h);
    }
}

/* Without edge data asked for, the library answers as it does natively
 * when an edge has some (a lossy query). */
static int graph_edges(struct hand_call *c, int runtime)
{
    uint64_t v[3];
    size_t count = 0;
    CUgraphNode *from = NULL, *to = NULL;
    CUgraphEdgeData *data = NULL;
    PROTO_IF(args_count(c, 3) || arg_u64s(c, 3, v) || v[2] > 1);
    int oom = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    int rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    if (handles_contains(H_GRAPH, v[0]))
        rc = edge_list(v[0], runtime, NULL, NULL, NULL, &count);
    if (rc < 0)
        return rc;
    if (rc == 0 && count > MAX_LIST)
        rc = oom;
    if (rc == 0 && count && (!(from = calloc(count, sizeof *from)) ||
                             !(to = calloc(count, sizeof *to)) ||
                             (v[2] && !(data = calloc(count, sizeof *data)))))
        rc = oom;
    if (rc == 0 && count)
        rc = edge_list(v[0], runtime, from, to, data, &count);
    size_t sent = rc == 0 ? (count < v[1] ? count : (size_t)v[1]) : 0;
    msgpack_pack_array(c->out, 4);
    msgpack_pack_uint64(c->out, rc == 0 ? count : 0);
    pack_nodes(c, from, sent);
    pack_nodes(c, to, sent);
    msgpack_pack_bin(c->out, data ? sent * sizeof *data : 0);
    if (data && sent)
        msgpack_pack_bin_body(c->out, data, sent * sizeof *data);
    free(from);
    free(to);
    free(data);
    return rc;
}

static int h_graph_edges(struct hand_call *c)
{
    return graph_edges(c, 1);
}

static int h_cu_graph_edges(struct hand_call *c)
{
    return graph_edges(c, 0);
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

/* The record rebuilt from the client's bytes: the pool properties' one
 * pointer (Windows security attributes) is NULL, the descriptors point into
 * the frame.  0, or -1 for a malformed request. */
static int alloc_params(struct hand_call *c, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    const void *props, *descs;
    size_t props_len, descs_len;
    uint64_t bytes;
    if (arg_bin(c, 2, &props, &props_len) || arg_bin(c, 3, &descs, &descs_len) ||
        arg_u64(c, 4, &bytes) || props_len != sizeof p->poolProps ||
        descs_len % sizeof(CUmemAccessDesc) ||
        descs_len / sizeof(CUmemAccessDesc) > MAX_ACCESS_DESCS)
        return -1;
    memset(p, 0, sizeof *p);
    memcpy(&p->poolProps, props, sizeof p->poolProps);
    p->poolProps.win32SecurityAttributes = NULL;
    p->accessDescs = descs_len ? descs : NULL;
    p->accessDescCount = descs_len / sizeof(CUmemAccessDesc);
    p->bytesize = bytes;
    return 0;
}

/* The allocation is made when the graph runs, at an address fixed now: the
 * range is the session's device memory from here on (kernels, copies and
 * memsets of the graph name it). */
static int graph_mem_alloc(struct hand_call *c, int runtime)
{
    struct node_call n;     /* only its dependencies */
    CUgraphNode deps[MAX_DEPS];
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    uint64_t graph;
    CUgraphNode made = NULL;
    const void *dep_bytes;
    size_t dep_len;
    PROTO_IF(args_count(c, 5) || arg_u64(c, 0, &graph) || arg_bin(c, 1, &dep_bytes, &dep_len) ||
             dep_len % sizeof(uint64_t) || dep_len / sizeof(uint64_t) > MAX_DEPS ||
             alloc_params(c, &p));
    memset(&n, 0, sizeof n);
    n.deps = dep_bytes;
    n.ndeps = dep_len / sizeof(uint64_t);
    int rc;
    msgpack_pack_array(c->out, 2);
    if (!handles_contains(H_GRAPH, graph) || !deps_valid(&n, deps)) {
        rgpu_warn("graph memory node: refused a graph or node the session never handed out");
        rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    } else if (runtime) {
        __typeof__(&cudaGraphAddMemAllocNode) f = RT(cudaGraphAddMemAllocNode);
        NEED(f);
        rc = f((cudaGraphNode_t *)&made, (cudaGraph_t)graph, (cudaGraphNode_t *)deps, n.ndeps,
               (struct cudaMemAllocNodeParams *)(void *)&p);
    } else {
        __typeof__(&cuGraphAddMemAllocNode) f = DRV(cuGraphAddMemAllocNode);
        NEED(f);
        rc = f(&made, (CUgraph)graph, deps, n.ndeps, &p);
    }
    if (rc == 0) {
        handles_add(H_GRAPH_NODE, (uint64_t)(uintptr_t)made);
        (void)owned_add(p.dptr, p.bytesize, OWNED_POOL, 0);
    }
    msgpack_pack_uint64(c->out, rc == 0 ? (uint64_t)(uintptr_t)made : 0);
    msgpack_pack_uint64(c->out, rc == 0 ? p.dptr : 0);
    return rc;
}

static int h_graph_mem_alloc(struct hand_call *c)
{
    return graph_mem_alloc(c, 1);
}

static int h_cu_graph_mem_alloc(struct hand_call *c)
{
    return graph_mem_alloc(c, 0);
}

/* ---- node lists ------------------------------------------------------------------ */

/* The library's list of a graph's nodes (which 0) or roots (1). */
static int node_list(uint64_t graph, int which, int runtime, CUgraphNode *nodes, size_t *count)
{
    if (runtime) {
        __typeof__(&cudaGraphGetNodes) f = which ? RT(cudaGraphGetRootNodes) : RT(cudaGraphGetNodes);
        if (!f)
            return -RGPU_ENOSYM;
        return (int)f((cudaGraph_t)graph, (cudaGraphNode_t *)nodes, count);
    }
    __typeof__(&cuGraphGetNodes) f = which ? DRV(cuGraphGetRootNodes) : DRV(cuGraphGetNodes);
    if (!f)
        return -RGPU_ENOSYM;
    return (int)f((CUgraph)graph, nodes, count);
}

/* The nodes come back to the client, which may name them from now on: each
 * is added to the session's table (they are the graph's, and go with it). */
static int graph_nodes(struct hand_call *c, int runtime)
{
    uint64_t v[3];
    size_t count = 0;
    CUgraphNode *nodes = NULL;
    PROTO_IF(args_count(c, 3) || arg_u64s(c, 3, v) || v[0] > 1);
    int rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    if (handles_contains(H_GRAPH, v[1]))
        rc = node_list(v[1], (int)v[0], runtime, NULL, &count);
    if (rc < 0)
        return rc;
    if (rc == 0 && count > MAX_LIST)
        rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == 0 && count && !(nodes = calloc(count, sizeof *nodes)))
        rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == 0 && count)
        rc = node_list(v[1], (int)v[0], runtime, nodes, &count);
    size_t sent = rc == 0 ? (count < v[2] ? count : (size_t)v[2]) : 0;
    msgpack_pack_array(c->out, 2);
    msgpack_pack_uint64(c->out, rc == 0 ? count : 0);
    msgpack_pack_bin(c->out, sent * sizeof(uint64_t));
    for (size_t i = 0; i < sent; i++) {
        uint64_t h = (uint64_t)(uintptr_t)nodes[i];
        handles_add(H_GRAPH_NODE, h);
        msgpack_pack_bin_body(c->out, &h, sizeof h);
    }
    free(nodes);
    return rc;
}

static int h_graph_nodes(struct hand_call *c)
{
    return graph_nodes(c, 1);
}

static int h_cu_graph_nodes(struct hand_call *c)
{
    return graph_nodes(c, 0);
}

/* ---- cudaGraphDebugDotPrint ------------------------------------------------------ */

#define DOT_MAX (64u << 20)     /* a larger description is refused */

/* The library writes the dot file to a path: here an anonymous memory file
 * named through /proc/self/fd (a session may write no file of the host's),
 * read back and sent to the client, which writes the caller's. */
static int read_back(int fd, struct hand_call *c)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > DOT_MAX)
        return -1;
    size_t size = (size_t)st.st_size, got = 0;
    char *text = malloc(size ? size : 1);
    if (!text)
        return -1;
    while (got < size) {
        ssize_t n = pread(fd, text + got, size - got, (off_t)got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    msgpack_pack_array(c->out, 1);
    msgpack_pack_bin(c->out, got);
    msgpack_pack_bin_body(c->out, text, got);
    free(text);
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

static int graph_dot(struct hand_call *c, int runtime)
{
    uint64_t graph, flags;
    PROTO_IF(args_count(c, 2) || arg_u64(c, 0, &graph) || arg_u64(c, 1, &flags) ||
             flags > UINT32_MAX);
    NEED(runtime ? (void *)RT(cudaGraphDebugDotPrint) : (void *)DRV(cuGraphDebugDotPrint));
    int rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    int fd = -1;
    if (handles_contains(H_GRAPH, graph)) {
        fd = memfd_create("rgpu-graph-dot", MFD_CLOEXEC);
        rc = runtime ? cudaErrorOperatingSystem : CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (fd >= 0)
        rc = print_dot(graph, (unsigned)flags, fd, runtime);
    if (rc == 0 && read_back(fd, c) != 0)
        rc = runtime ? cudaErrorOperatingSystem : CUDA_ERROR_OPERATING_SYSTEM;
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_bin(c->out, 0);
    }
    return rc;
}

static int h_graph_dot(struct hand_call *c)
{
    return graph_dot(c, 1);
}

static int h_cu_graph_dot(struct hand_call *c)
{
    return graph_dot(c, 0);
}

const struct hand_proc hand_graph_procs[] = {
    { "cudart", RGPU_H_GRAPH_KERNEL_NODE, h_graph_kernel_node },
    { "cuda", RGPU_H_CU_GRAPH_KERNEL_NODE, h_cu_graph_kernel_node },
    { "cudart", RGPU_H_GRAPH_DOT, h_graph_dot },
    { "cudart", RGPU_H_GRAPH_NODES, h_graph_nodes },
    { "cuda", RGPU_H_CU_GRAPH_NODES, h_cu_graph_nodes },
    { "cudart", RGPU_H_GRAPH_MEM_ALLOC, h_graph_mem_alloc },
    { "cudart", RGPU_H_GRAPH_EDGES, h_graph_edges },
    { "cudart", RGPU_H_GRAPH_KERNEL_PARAMS, h_graph_kernel_params },
    { "cuda", RGPU_H_CU_GRAPH_KERNEL_PARAMS, h_cu_graph_kernel_params },
    { "cuda", RGPU_H_CU_GRAPH_EDGES, h_cu_graph_edges },
    { "cuda", RGPU_H_CU_GRAPH_MEM_ALLOC, h_cu_graph_mem_alloc },
    { "cuda", RGPU_H_CU_GRAPH_DOT, h_cu_graph_dot },
};
const int hand_graph_nprocs = sizeof hand_graph_procs / sizeof hand_graph_procs[0];

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
