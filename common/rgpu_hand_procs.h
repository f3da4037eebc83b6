/* Hand-written procedures: calls that still pack their arguments by hand
 * (graphs, the shared-memory copies), until they move to the codec as
 * rgpu's own procedures (codegen/<lib>_own.h), as the copies, host
 * functions, NVML lists, log settings, cuBLASLt's descriptors, launches,
 * modules, JIT linking and the library digest did.  Client side in
 * stubs/ and common/, server side in the daemon files named.  Their ids
 * come from rgpu_proc_id() over these names, like the generated ones, so
 * they are as stable; the "rgpu." prefix keeps them apart from CUDA's own
 * names.
 *
 * Arguments (one msgpack array each; "bin" last where present):
 */
#ifndef RGPU_HAND_PROCS_H
#define RGPU_HAND_PROCS_H

#include <stdint.h>

/* rgpu_fence of rgpu's own library (codegen/rgpu_own.h), by the name its
 * id is made of: common/rgpu_mapped.c sends what the program changed ahead
 * of every request but this one. */
#define RGPU_H_FENCE         "rgpu_fence"

/* [op, owner, node, bin dependencies, kernel, gx, gy, gz, bx, by, bz, shmem,
 *  bin params] -> [node]   a graph's kernel node, added (op ADD: owner the
 * graph, dependencies u64 node handles) or given new parameters (op SET:
 * node; op EXEC_SET: owner the executable graph, node); params packed by the
 * kernel's layout as a launch's (daemon/hand_graphs.c) */
#define RGPU_H_GRAPH_KERNEL_NODE    "rgpu.graph_kernel_node"
/* the same for the driver: the kernel a CUfunction or CUkernel, and one
 * more element before the params, packed (the caller's `extra` buffer) */
#define RGPU_H_CU_GRAPH_KERNEL_NODE "rgpu.cu_graph_kernel_node"
/* [graph, flags] -> [bin dot text]   cudaGraphDebugDotPrint: the library
 * writes the file on the server (into memory), the client writes the
 * caller's file */
#define RGPU_H_GRAPH_DOT            "rgpu.graph_dot"
/* the same for the driver's cuGraphDebugDotPrint */
#define RGPU_H_CU_GRAPH_DOT         "rgpu.cu_graph_dot"
/* [which, graph, capacity] -> [count, bin nodes]   a graph's nodes
 * (which 0) or root nodes (1): the total count and at most capacity u64
 * node handles (cudaGraphGetNodes, cudaGraphGetRootNodes) */
#define RGPU_H_GRAPH_NODES          "rgpu.graph_nodes"
/* the same for the driver's cuGraphGetNodes, cuGraphGetRootNodes */
#define RGPU_H_CU_GRAPH_NODES       "rgpu.cu_graph_nodes"
/* [graph, bin dependencies, bin poolProps, bin accessDescs, bytesize] ->
 * [node, dptr]   a memory-allocation node (cudaGraphAddMemAllocNode): the
 * pool properties as cudaMemPoolProps' bytes, the access descriptors as an
 * array of cudaMemAccessDesc (daemon/hand_graphs.c rebuilds the record) */
#define RGPU_H_GRAPH_MEM_ALLOC      "rgpu.graph_mem_alloc"
/* the same for the driver's cuGraphAddMemAllocNode */
#define RGPU_H_CU_GRAPH_MEM_ALLOC   "rgpu.cu_graph_mem_alloc"
/* [graph, capacity, want edge data] -> [count, bin from, bin to, bin edge
 * data]   a graph's edges (cudaGraphGetEdges): the total count and at
 * most capacity of each, node handles as u64, edge data as the library's
 * records */
#define RGPU_H_GRAPH_EDGES          "rgpu.graph_edges"
/* the same for the driver's cuGraphGetEdges_v2 */
#define RGPU_H_CU_GRAPH_EDGES       "rgpu.cu_graph_edges"
/* [node] -> [kernel, gx, gy, gz, bx, by, bz, shmem, [[offset, size]...], bin
 * params]   a kernel node's parameters (cudaGraphKernelNodeGetParams): the
 * kernel, its layout and its arguments packed by it */
#define RGPU_H_GRAPH_KERNEL_PARAMS  "rgpu.graph_kernel_params"
/* the same for the driver's cuGraphKernelNodeGetParams_v2: the function
 * first, the kernel and the context after the params */
#define RGPU_H_CU_GRAPH_KERNEL_PARAMS "rgpu.cu_graph_kernel_params"
enum rgpu_graph_node_op { RGPU_GRAPH_NODE_ADD, RGPU_GRAPH_NODE_SET, RGPU_GRAPH_EXEC_SET };
/* [graph, ctx, default value, flags] -> [handle]   a conditional handle
 * for graph (cudaGraphConditionalHandleCreate: ctx 0) */
#define RGPU_H_GRAPH_COND_HANDLE    "rgpu.graph_cond_handle"
/* the same for the driver's cuGraphConditionalHandleCreate */
#define RGPU_H_CU_GRAPH_COND_HANDLE "rgpu.cu_graph_cond_handle"
/* [graph, bin dependencies, handle, type, size, ctx] -> [node, bin bodies]
 * a conditional node (a node record of type conditional): its size body
 * graphs come back as u64 graph handles (daemon/hand_graph_conditionals.c) */
#define RGPU_H_GRAPH_COND_NODE      "rgpu.graph_cond_node"
/* the same for the driver (ctx the node's context) */
#define RGPU_H_CU_GRAPH_COND_NODE   "rgpu.cu_graph_cond_node"
/* Graph host nodes and copies to or from host memory (library "cudart" or
 * "cuda": the runtime's or the driver's calls; daemon/graph_host.c, client
 * common/rgpu_graph_host.c).  A token names, on the client, the program's
 * function and data or a copy's host region; the server's node sends
 * [CALLBACK, run, 0, token(, bin)] each time it runs and waits for
 * [CALLBACK_DONE, run(, bin)] (common/rgpu_proto.h).
 *
 * [op, owner, node, bin dependencies, token] -> [node]   a host node, added
 * (op ADD: owner the graph), set (SET: node) or set in an executable graph
 * (EXEC_SET: owner the executable graph, node) */
#define RGPU_H_GRAPH_HOST_NODE      "rgpu.graph_host_node"
/* [node] -> [token]   cudaGraphHostNodeGetParams */
#define RGPU_H_GRAPH_HOST_PARAMS    "rgpu.graph_host_params"
/* [op, owner, node, bin dependencies, ctx, direction, token, width, height,
 *  depth, device ptr, pitch, rows, x, y, z] -> [node]   a copy node between
 * the host region token names (width x height x depth bytes) and device
 * memory (pitch and rows per plane of the device side, 0 for packed; x in
 * bytes); ctx the driver's copy context, 0 for the runtime */
#define RGPU_H_GRAPH_HOST_COPY      "rgpu.graph_host_copy"
enum rgpu_copy_direction { RGPU_COPY_TO_DEVICE = 1, RGPU_COPY_TO_HOST = 2 };
/* The most bytes a graph copy to or from host memory carries: they travel
 * in one callback frame each time the node runs. */
#define RGPU_GRAPH_COPY_MAX         (64u << 20)
/* [stream, ptsz, direction, token, width, height, depth, device ptr, pitch,
 *  rows, x, y, z] -> [captured]   such a copy on a capturing stream becomes a
 * node of the capture (captured 1); a stream that does not capture: 0,
 * nothing done (ptsz: a stream 0 is the per-thread one) */
#define RGPU_H_CAPTURE_HOST_COPY    "rgpu.capture_host_copy"
/* [exec, stream, marker, ptsz] -> [marked, plain]   cudaGraphLaunch: when
 * the executable graph holds host nodes of the session's, a marker host
 * function follows it on the stream and sends [CALLBACK, marker, 0] once
 * the graph has passed (no acknowledgement), and marked is 1; plain: it
 * holds none */
#define RGPU_H_GRAPH_LAUNCH         "rgpu.graph_launch"
/* [dst, 0, bin] -> [] and [src, count, 0] -> [bin]: the client's own copies
 * between the program's copy of shared memory and its GPU copy
 * (common/rgpu_mapped.c), on a non-blocking stream of the session's in
 * the memory's context, never behind the program's work (library "rgpu",
 * daemon/hand_cuda.c) */
#define RGPU_H_SHARED_HTOD     "rgpu.shared_htod"
#define RGPU_H_SHARED_DTOH     "rgpu.shared_dtoh"

#endif
