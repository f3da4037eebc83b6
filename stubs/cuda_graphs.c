/* CUDA graphs built node by node through the driver: kernel nodes, whose
 * arguments travel packed by the function's layout (or as the caller's
 * own `extra` buffer), as cuLaunchKernel's do, and come back packed when
 * queried; node and edge lists (memcpy and host nodes:
 * stubs/cuda_graph_host.c);
 * memory-allocation nodes; the dot description, written here; and stream
 * capture, counted on the client as the runtime's is (a statically linked
 * runtime builds and captures its graphs through these).  Server side:
 * daemon/hand_graphs.c; the rest of the graph calls are generated
 * (codegen/cuda.ann). */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "client_ranges.h"
#include "write_file.h"
#include "graph_edges.h"
#include "graph_params.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

CUresult rgpu_cuda_pack_params(CUfunction f, void **kernelParams, void **extra,
                               const void **buf, size_t *len, unsigned char **owned);

struct node_op {
    const char *what;
    unsigned op;
    uint64_t owner, node;
    const CUgraphNode *deps;
    size_t ndeps;
    const CUDA_KERNEL_NODE_PARAMS *p;
};

/* The launch handle of the parameters: the function, else the kernel
 * (CUDA's rule: kern is used only when func is NULL). */
static CUfunction node_function(const CUDA_KERNEL_NODE_PARAMS *p)
{
    return p->func ? p->func : (CUfunction)(void *)p->kern;
}

/* [op, owner, node, bin deps, function, gx, gy, gz, bx, by, bz, shmem, packed,
 *  bin params] */
static void pack_node(struct rgpu_req *req, const struct node_op *o, const void *params,
                      size_t len)
{
    const CUDA_KERNEL_NODE_PARAMS *p = o->p;
    struct rgpu_graph_node_req r = { o->op, o->owner, o->node, (void *const *)o->deps,
                                     o->ndeps };
    rgpu_graph_pack_node_req(req, &r, 14);
    msgpack_pack_uint64(&req->pk, (uint64_t)(uintptr_t)node_function(p));
    msgpack_pack_uint32(&req->pk, p->gridDimX);
    msgpack_pack_uint32(&req->pk, p->gridDimY);
    msgpack_pack_uint32(&req->pk, p->gridDimZ);
    msgpack_pack_uint32(&req->pk, p->blockDimX);
    msgpack_pack_uint32(&req->pk, p->blockDimY);
    msgpack_pack_uint32(&req->pk, p->blockDimZ);
    msgpack_pack_uint32(&req->pk, p->sharedMemBytes);
    msgpack_pack_uint32(&req->pk, p->extra ? 1 : 0);
    rgpu_req_payload(req, params, len);
}

static CUresult node_call(const struct node_op *o, CUgraphNode *made)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    const void *params = NULL;
    size_t len = 0;
    unsigned char *owned = NULL;

    if (!o->p || (o->ndeps && !o->deps) || (o->p->kernelParams && o->p->extra))
        return CUDA_ERROR_INVALID_VALUE;
    if (!node_function(o->p))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = rgpu_cuda_pack_params(node_function(o->p), o->p->kernelParams, o->p->extra,
                                        &params, &len, &owned);
    if (rc != CUDA_SUCCESS)
        return rc;
    rgpu_printing_graph_kernel(rgpu_printing_may((uint64_t)(uintptr_t)node_function(o->p)));
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_KERNEL_NODE), 0);
    pack_node(&req, o, params, len);
    int t = rgpu_req_exchange(LIB, o->what, &req, &reply);
    free(owned);
    if (t != RGPU_REPLY_READY)
        return (CUresult)t;
    rc = (CUresult)rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS && made) {
        uint64_t node = rgpu_reply_u64(&reply, 0);
        rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), node, 0);
        *made = (CUgraphNode)(uintptr_t)node;
    }
    rgpu_reply_free(&reply);
    return rc;
}

RGPU_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies,
                                             const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphAddKernelNode", RGPU_GRAPH_NODE_ADD,
                         (uint64_t)(uintptr_t)hGraph, 0, dependencies, numDependencies,
                         nodeParams };
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    return node_call(&o, phGraphNode);
}

RGPU_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphExecKernelNodeSetParams", RGPU_GRAPH_EXEC_SET,
                         (uint64_t)(uintptr_t)hGraphExec, (uint64_t)(uintptr_t)hNode, NULL, 0,
                         nodeParams };
    return node_call(&o, NULL);
}

RGPU_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphKernelNodeSetParams", RGPU_GRAPH_NODE_SET, 0,
                         (uint64_t)(uintptr_t)hNode, NULL, 0, nodeParams };
    return node_call(&o, NULL);
}

/* ---- node lists ------------------------------------------------------------------------ */

/* A graph's nodes (which 0) or roots (1), as the runtime's
 * (stubs/cudart_graphs.c): with nodes NULL, the count; else the caller's
 * *count entries filled (NULL past the graph's) and *count the number
 * filled, each node known from now on. */
static CUresult graph_nodes(int which, CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    return (CUresult)rgpu_graph_nodes_ask(LIB, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_NODES),
                                          which ? "cuGraphGetRootNodes" : "cuGraphGetNodes",
                                          which, (uint64_t)(uintptr_t)graph, (void **)nodes,
                                          count);
}

RGPU_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    return graph_nodes(0, hGraph, nodes, numNodes);
}

RGPU_EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes,
                                         size_t *numRootNodes)
{
    return graph_nodes(1, hGraph, rootNodes, numRootNodes);
}

/* The library writes the description on the server, into memory; the
 * text comes back and is written here, to the caller's file. */
RGPU_EXPORT CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_DOT), 0);
    msgpack_pack_array(&req.pk, 2);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)hGraph);
    msgpack_pack_uint32(&req.pk, flags);
    int rc = rgpu_req_exchange(LIB, "cuGraphDebugDotPrint", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    const msgpack_object *text = rgpu_reply_bin(&reply, 0);
    if (rc == CUDA_SUCCESS && (!text || rgpu_write_file(path, text->via.bin.ptr,
                                                        text->via.bin.size) != 0))
        rc = CUDA_ERROR_OPERATING_SYSTEM;
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

/* ---- stream capture ------------------------------------------------------------------------- */

/* As the runtime's (stubs/cudart_cache.c): a capture under way is counted
 * in the core, whose waiting policy and the runtime's capture questions
 * depend on it.  A statically linked runtime captures through these. */
static CUresult counted_begin(const struct rgpu_proc *proc, const void *const *argv)
{
    CUresult rc = (CUresult)rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_capture_begin();
    return rc;
}

static CUresult counted_end(const struct rgpu_proc *proc, CUstream stream, CUgraph *phGraph)
{
    const void *argv[] = { &stream, &phGraph };
    CUresult rc = (CUresult)rgpu_call(LIB, proc, argv);
    /* Ending fails when the capture was invalidated, but it is over. */
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
        rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        rgpu_capture_end();
    return rc;
}

RGPU_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCapture_v2, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCapture_v2_ptsz, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 const CUgraphEdgeData *dependencyData,
                                                 size_t numDependencies, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &hGraph, &dependencies, &dependencyData, &numDependencies,
                           &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCaptureToGraph, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                      const CUgraphNode *dependencies,
                                                      const CUgraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &hGraph, &dependencies, &dependencyData, &numDependencies,
                           &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCaptureToGraph_ptsz, argv);
}

RGPU_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return counted_end(RGPU_CUDA_cuStreamEndCapture, hStream, phGraph);
}

RGPU_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return counted_end(RGPU_CUDA_cuStreamEndCapture_ptsz, hStream, phGraph);
}

/* The capture's state with its dependency arrays, as the runtime's
 * (stubs/cudart_hand.c): the nodes and edges come back in the reply into
 * arrays kept on the client per stream (common/rgpu_capture_arrays.c). */
struct capture_query {
    CUstream stream;
    int per_thread;
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
};

static int ask_capture_info(void *ctx, void *nodes, void *edges, size_t room, size_t *count)
{
    const struct capture_query *q = ctx;
    return rgpu_cu_capture_info(q->stream, q->per_thread, q->status, q->id, q->graph,
                                (CUgraphNode *)nodes, (CUgraphEdgeData *)edges, room, count);
}

static CUresult capture_info(int per_thread, CUstream stream, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *count)
{
    struct capture_query q = { stream, per_thread, status, id, graph };
    void *nodes = NULL, *edge_data = NULL;
    size_t n = 0;
    int rc = rgpu_capture_query_arrays((uint64_t)(uintptr_t)stream, per_thread,
                                       sizeof(CUgraphNode), sizeof(CUgraphEdgeData),
                                       deps != NULL, edges != NULL, ask_capture_info, &q, &nodes,
                                       &edge_data, &n);
    if (rc < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return (CUresult)rc;
    if (deps)
        *deps = n ? (const CUgraphNode *)nodes : NULL;
    if (edges)
        *edges = n ? (const CUgraphEdgeData *)edge_data : NULL;
    if (count)
        *count = n;
    return CUDA_SUCCESS;
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               const CUgraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out)
{
    return capture_info(0, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out,
                                                    size_t *numDependencies_out)
{
    return capture_info(1, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

/* _v2 is _v3 without edge data. */
RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out)
{
    return capture_info(0, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    size_t *numDependencies_out)
{
    return capture_info(1, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

/* ---- memory-allocation nodes --------------------------------------------------------------- */

/* As the runtime's (stubs/cudart_graphs.c): the record as its parts, the
 * address back, recorded as device memory. */
RGPU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies,
                                            CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!phGraphNode || !nodeParams || (numDependencies && !dependencies) ||
        (nodeParams->accessDescCount && !nodeParams->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_MEM_ALLOC), 0);
    msgpack_pack_array(&req.pk, 5);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)hGraph);
    msgpack_pack_bin(&req.pk, numDependencies * sizeof(uint64_t));
    for (size_t i = 0; i < numDependencies; i++) {
        uint64_t h = (uint64_t)(uintptr_t)dependencies[i];
        msgpack_pack_bin_body(&req.pk, &h, sizeof h);
    }
    msgpack_pack_bin(&req.pk, sizeof nodeParams->poolProps);
    msgpack_pack_bin_body(&req.pk, &nodeParams->poolProps, sizeof nodeParams->poolProps);
    size_t descs = nodeParams->accessDescCount * sizeof *nodeParams->accessDescs;
    msgpack_pack_bin(&req.pk, descs);
    msgpack_pack_bin_body(&req.pk, nodeParams->accessDescs, descs);
    msgpack_pack_uint64(&req.pk, nodeParams->bytesize);
    int rc = rgpu_req_exchange(LIB, "cuGraphAddMemAllocNode", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS) {
        uint64_t node = rgpu_reply_u64(&reply, 0), dptr = rgpu_reply_u64(&reply, 1);
        rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), node, 0);
        rgpu_ranges_add(dptr, nodeParams->bytesize, RGPU_RANGE_DEVICE);
        *phGraphNode = (CUgraphNode)(uintptr_t)node;
        nodeParams->dptr = (CUdeviceptr)dptr;
    }
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

/* ---- edge lists ------------------------------------------------------------------------------ */

RGPU_EXPORT CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                        CUgraphEdgeData *edgeData, size_t *numEdges)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!numEdges || !from != !to || (edgeData && !from))
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_EDGES), 0);
    msgpack_pack_array(&req.pk, 3);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)hGraph);
    msgpack_pack_uint64(&req.pk, from ? *numEdges : 0);
    msgpack_pack_uint32(&req.pk, edgeData ? 1 : 0);
    int rc = rgpu_req_exchange(LIB, "cuGraphGetEdges", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS && rgpu_graph_edges_take(&reply, (void **)from, (void **)to, edgeData,
                                                    sizeof *edgeData, numEdges) != 0)
        rc = rgpu_transport_status(LIB, "cuGraphGetEdges", RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

/* ---- a kernel node's parameters, queried ------------------------------------------------------ */

/* The function the node launches (a handle this process holds), its shape
 * and its arguments as pointers into a copy kept for the caller
 * (stubs/graph_params.h). */
RGPU_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                   CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_GRAPH_KERNEL_PARAMS), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)hNode);
    int rc = rgpu_req_exchange(LIB, "cuGraphKernelNodeGetParams", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    void **args = rc == CUDA_SUCCESS ? rgpu_keep_node_args((uint64_t)(uintptr_t)hNode,
                                                           rgpu_reply_out(&reply, 8),
                                                           rgpu_reply_bin(&reply, 9))
                                     : NULL;
    if (rc == CUDA_SUCCESS && !args)
        rc = rgpu_transport_status(LIB, "cuGraphKernelNodeGetParams", RGPU_EPROTO);
    if (rc == CUDA_SUCCESS) {
        memset(nodeParams, 0, sizeof *nodeParams);
        nodeParams->func = (CUfunction)(uintptr_t)rgpu_reply_u64(&reply, 0);
        nodeParams->gridDimX = (unsigned)rgpu_reply_u64(&reply, 1);
        nodeParams->gridDimY = (unsigned)rgpu_reply_u64(&reply, 2);
        nodeParams->gridDimZ = (unsigned)rgpu_reply_u64(&reply, 3);
        nodeParams->blockDimX = (unsigned)rgpu_reply_u64(&reply, 4);
        nodeParams->blockDimY = (unsigned)rgpu_reply_u64(&reply, 5);
        nodeParams->blockDimZ = (unsigned)rgpu_reply_u64(&reply, 6);
        nodeParams->sharedMemBytes = (unsigned)rgpu_reply_u64(&reply, 7);
        nodeParams->kernelParams = args;
        nodeParams->kern = (CUkernel)(uintptr_t)rgpu_reply_u64(&reply, 10);
        nodeParams->ctx = (CUcontext)(uintptr_t)rgpu_reply_u64(&reply, 11);
    }
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}
