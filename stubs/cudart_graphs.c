/* CUDA graphs built node by node through the runtime: what the generator
 * cannot describe.  Kernel nodes carry their arguments packed by the
 * kernel's layout, as launches do (one procedure adds a node, sets a
 * node's parameters, or sets them in an executable graph), and come back
 * packed when queried; node and edge lists come back as handles (memcpy
 * and host nodes: stubs/cudart_graph_host.c); memory-allocation nodes
 * travel as the parts of their record; the dot description is written
 * here; a capture into an existing graph is counted as captures are.
 * Server side: daemon/hand_graphs.c; the rest of the graph calls are
 * generated (codegen/cudart.ann). */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "client_ranges.h"
#include "write_file.h"
#include "graph_edges.h"
#include "graph_params.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

int rgpu_cudart_kernel_pack(const void *func, void **args, uint64_t *handle,
                            unsigned char **buf, size_t *len);

/* One kernel-node request: which operation on which handles. */
struct node_op {
    const char *what;
    unsigned op;
    uint64_t owner, node;
    const cudaGraphNode_t *deps;
    size_t ndeps;
    const struct cudaKernelNodeParams *p;
};

static int refuse_extra(const char *what)
{
    static int logged;
    return rgpu_refused(LIB, what, "kernel arguments in the `extra` format: not remoted for "
                        "runtime graph nodes (use kernelParams)", &logged);
}

/* [op, owner, node, bin deps, kernel, gx, gy, gz, bx, by, bz, shmem, bin params] */
static void pack_node(struct rgpu_req *req, const struct node_op *o, uint64_t kernel,
                      const void *params, size_t len)
{
    const struct cudaKernelNodeParams *p = o->p;
    struct rgpu_graph_node_req r = { o->op, o->owner, o->node, (void *const *)o->deps,
                                     o->ndeps };
    rgpu_graph_pack_node_req(req, &r, 13);
    msgpack_pack_uint64(&req->pk, kernel);
    msgpack_pack_uint32(&req->pk, p->gridDim.x);
    msgpack_pack_uint32(&req->pk, p->gridDim.y);
    msgpack_pack_uint32(&req->pk, p->gridDim.z);
    msgpack_pack_uint32(&req->pk, p->blockDim.x);
    msgpack_pack_uint32(&req->pk, p->blockDim.y);
    msgpack_pack_uint32(&req->pk, p->blockDim.z);
    msgpack_pack_uint32(&req->pk, p->sharedMemBytes);
    rgpu_req_payload(req, params, len);
}

/* The operation, waiting for the answer (a graph is built once and
 * launched many times: the round trip is paid outside the hot loop, and
 * an update's error must come back at once). */
static cudaError_t node_call(const struct node_op *o, cudaGraphNode_t *made)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    unsigned char *params = NULL;
    size_t len = 0;
    uint64_t kernel = 0;

    if (!o->p || (o->ndeps && !o->deps))
        return RESULT(cudaErrorInvalidValue);
    if (o->p->extra)
        return refuse_extra(o->what);
    int rc = rgpu_cudart_kernel_pack(o->p->func, o->p->kernelParams, &kernel, &params, &len);
    if (rc != cudaSuccess)
        return rc;
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_GRAPH_KERNEL_NODE), 0);
    pack_node(&req, o, kernel, params, len);
    rc = rgpu_req_exchange(LIB, o->what, &req, &reply);
    free(params);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess && made) {
        uint64_t node = rgpu_reply_u64(&reply, 0);
        rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), node, 0);
        *made = (cudaGraphNode_t)(uintptr_t)node;
    }
    rgpu_reply_free(&reply);
    return rc;
}

RGPU_EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphAddKernelNode", RGPU_GRAPH_NODE_ADD,
                         (uint64_t)(uintptr_t)graph, 0, pDependencies, numDependencies,
                         pNodeParams };
    if (!pGraphNode)
        return RESULT(cudaErrorInvalidValue);
    return node_call(&o, pGraphNode);
}

RGPU_EXPORT cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                     const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphKernelNodeSetParams", RGPU_GRAPH_NODE_SET, 0,
                         (uint64_t)(uintptr_t)node, NULL, 0, pNodeParams };
    return node_call(&o, NULL);
}

RGPU_EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
    const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphExecKernelNodeSetParams", RGPU_GRAPH_EXEC_SET,
                         (uint64_t)(uintptr_t)hGraphExec, (uint64_t)(uintptr_t)node, NULL, 0,
                         pNodeParams };
    return node_call(&o, NULL);
}

/* ---- the dot description ------------------------------------------------------------ */

/* The library writes the description on the server, into memory; the
 * text comes back and is written here, to the caller's file. */
RGPU_EXPORT cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path,
                                               unsigned int flags)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!path)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_GRAPH_DOT), 0);
    msgpack_pack_array(&req.pk, 2);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_uint32(&req.pk, flags);
    int rc = rgpu_req_exchange(LIB, "cudaGraphDebugDotPrint", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    const msgpack_object *text = rgpu_reply_bin(&reply, 0);
    if (rc == cudaSuccess && (!text || rgpu_write_file(path, text->via.bin.ptr,
                                                       text->via.bin.size) != 0))
        rc = RESULT(cudaErrorOperatingSystem);
    rgpu_reply_free(&reply);
    return rc;
}

/* ---- capture into an existing graph ------------------------------------------------------ */

/* As cudaStreamBeginCapture (stubs/cudart_cache.c): a capture under way is
 * counted here, so that the capture questions are asked only while one is;
 * cudaStreamEndCapture ends it and answers the graph captured into. */
static cudaError_t begin_capture_to_graph(const struct rgpu_proc *proc, cudaStream_t stream,
                                          cudaGraph_t graph, const cudaGraphNode_t *deps,
                                          const cudaGraphEdgeData *data, size_t n,
                                          enum cudaStreamCaptureMode mode)
{
    const void *argv[] = { &stream, &graph, &deps, &data, &n, &mode };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == cudaSuccess)
        rgpu_capture_begin();
    return rc;
}

#undef cudaStreamBeginCaptureToGraph
RGPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *dependencies,
                                                      const cudaGraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(RGPU_CUDART_cudaStreamBeginCaptureToGraph, stream, graph,
                                  dependencies, dependencyData, numDependencies, mode);
}

RGPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(
    cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,
    const cudaGraphEdgeData *dependencyData, size_t numDependencies,
    enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(RGPU_CUDART_cudaStreamBeginCaptureToGraph_ptsz, stream, graph,
                                  dependencies, dependencyData, numDependencies, mode);
}

/* ---- node lists ------------------------------------------------------------------------ */

/* A graph's nodes (which 0) or roots (1), CUDA's way: with nodes NULL,
 * *count becomes how many there are; else the caller's *count entries are
 * filled, those past the graph's NULL, and *count becomes the number
 * filled.  The handles are the session's from now on (the server adds
 * them), and known here. */
int rgpu_cudart_graph_nodes(int which, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);
int rgpu_cudart_graph_nodes(int which, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count)
{
    if (!count)
        return RESULT(cudaErrorInvalidValue);
    return rgpu_graph_nodes_ask(LIB, rgpu_proc_id("cudart", RGPU_H_GRAPH_NODES),
                                which ? "cudaGraphGetRootNodes" : "cudaGraphGetNodes", which,
                                (uint64_t)(uintptr_t)graph, (void **)nodes, count);
}

RGPU_EXPORT cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes,
                                              size_t *pNumRootNodes)
{
    return rgpu_cudart_graph_nodes(1, graph, pRootNodes, pNumRootNodes);
}

/* ---- memory-allocation nodes ---------------------------------------------------------- */

/* The record travels as its parts (its one pointer is an array of access
 * descriptors); the address comes back, fixed from now on, and is device
 * memory to this process's range table as to the server's.  The range
 * stays recorded after the graph's free node runs, as the address stays
 * reserved for the graph. */
RGPU_EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t *pDependencies,
                                                 size_t numDependencies,
                                                 struct cudaMemAllocNodeParams *nodeParams)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!pGraphNode || !nodeParams || (numDependencies && !pDependencies) ||
        (nodeParams->accessDescCount && !nodeParams->accessDescs))
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_GRAPH_MEM_ALLOC), 0);
    msgpack_pack_array(&req.pk, 5);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_bin(&req.pk, numDependencies * sizeof(uint64_t));
    for (size_t i = 0; i < numDependencies; i++) {
        uint64_t h = (uint64_t)(uintptr_t)pDependencies[i];
        msgpack_pack_bin_body(&req.pk, &h, sizeof h);
    }
    msgpack_pack_bin(&req.pk, sizeof nodeParams->poolProps);
    msgpack_pack_bin_body(&req.pk, &nodeParams->poolProps, sizeof nodeParams->poolProps);
    size_t descs = nodeParams->accessDescCount * sizeof *nodeParams->accessDescs;
    msgpack_pack_bin(&req.pk, descs);
    msgpack_pack_bin_body(&req.pk, nodeParams->accessDescs, descs);
    msgpack_pack_uint64(&req.pk, nodeParams->bytesize);
    int rc = rgpu_req_exchange(LIB, "cudaGraphAddMemAllocNode", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess) {
        uint64_t node = rgpu_reply_u64(&reply, 0), dptr = rgpu_reply_u64(&reply, 1);
        rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), node, 0);
        rgpu_ranges_add(dptr, nodeParams->bytesize, RGPU_RANGE_DEVICE);
        *pGraphNode = (cudaGraphNode_t)(uintptr_t)node;
        nodeParams->dptr = (void *)(uintptr_t)dptr;
    }
    rgpu_reply_free(&reply);
    return rc;
}

/* ---- edge lists ------------------------------------------------------------------------- */

RGPU_EXPORT cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from,
                                          cudaGraphNode_t *to, cudaGraphEdgeData *edgeData,
                                          size_t *numEdges)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!numEdges || !from != !to || (edgeData && !from))
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_GRAPH_EDGES), 0);
    msgpack_pack_array(&req.pk, 3);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)graph);
    msgpack_pack_uint64(&req.pk, from ? *numEdges : 0);
    msgpack_pack_uint32(&req.pk, edgeData ? 1 : 0);
    int rc = rgpu_req_exchange(LIB, "cudaGraphGetEdges", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess && rgpu_graph_edges_take(&reply, (void **)from, (void **)to, edgeData,
                                                   sizeof *edgeData, numEdges) != 0)
        rc = rgpu_transport_status(LIB, "cudaGraphGetEdges", RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return rc;
}

/* ---- a kernel node's parameters, queried ------------------------------------------------ */

const void *rgpu_cudart_host_fn(uint64_t h);

/* The kernel comes back as the host stub nvcc registered (what programs
 * compare with their kernels); a kernel this process never registered is
 * the runtime's invalid device function, as natively. */
RGPU_EXPORT cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                                     struct cudaKernelNodeParams *pNodeParams)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_GRAPH_KERNEL_PARAMS), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)node);
    int rc = rgpu_req_exchange(LIB, "cudaGraphKernelNodeGetParams", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    const void *fn = rc == cudaSuccess ? rgpu_cudart_host_fn(rgpu_reply_u64(&reply, 0)) : NULL;
    if (rc == cudaSuccess && !fn)
        rc = RESULT(cudaErrorInvalidDeviceFunction);
    void **args = rc == cudaSuccess ? rgpu_keep_node_args((uint64_t)(uintptr_t)node,
                                                          rgpu_reply_out(&reply, 8),
                                                          rgpu_reply_bin(&reply, 9))
                                    : NULL;
    if (rc == cudaSuccess && !args)
        rc = rgpu_transport_status(LIB, "cudaGraphKernelNodeGetParams", RGPU_EPROTO);
    if (rc == cudaSuccess) {
        memset(pNodeParams, 0, sizeof *pNodeParams);
        pNodeParams->func = (void *)fn;
        pNodeParams->gridDim.x = (unsigned)rgpu_reply_u64(&reply, 1);
        pNodeParams->gridDim.y = (unsigned)rgpu_reply_u64(&reply, 2);
        pNodeParams->gridDim.z = (unsigned)rgpu_reply_u64(&reply, 3);
        pNodeParams->blockDim.x = (unsigned)rgpu_reply_u64(&reply, 4);
        pNodeParams->blockDim.y = (unsigned)rgpu_reply_u64(&reply, 5);
        pNodeParams->blockDim.z = (unsigned)rgpu_reply_u64(&reply, 6);
        pNodeParams->sharedMemBytes = (unsigned)rgpu_reply_u64(&reply, 7);
        pNodeParams->kernelParams = args;
    }
    rgpu_reply_free(&reply);
    return rc;
}
