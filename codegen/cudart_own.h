/* rgpu's own procedures of libcudart (codegen/cudart.ann, "procedures"):
 * requests of the wire that are no runtime function, declared as C
 * functions so that the one codec marshals them as it does the library's.
 * The client function of each is generated and called by the hand-written
 * stub named beside it; the server runs serve_<name>, written by hand in
 * the daemon file named.  Parameters follow the library's conventions:
 * handles are checked against the session's table by their type, device
 * pointers by their annotation, buffers by their length parameter.  An
 * output may reach serve_<name> as NULL whatever its length says (a
 * client that asked for none): each serve_ function checks its own. */
#ifndef RGPU_CUDART_OWN_H
#define RGPU_CUDART_OWN_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "rgpu_module_wire.h"
#include "../common/rgpu_graph_wire.h"

/* ---- CUDA arrays: stubs/cudart_arrays.c, daemon/hand_arrays.c ------------------
 * x and width count bytes, y and height rows.  Host rows travel packed
 * (rows_size = width * height), done before the reply as the runtime's
 * synchronous copies are.  Device sides name a pitched device range that
 * the server checks over its whole extent. */

/* cudaMemcpy2DToArray(Async) from host memory. */
cudaError_t rgpu_array_from_host(cudaArray_t array, size_t x, size_t y, size_t width,
                                 size_t height, cudaStream_t stream, const void *rows,
                                 size_t rows_size);
/* cudaMemcpy2DFromArray(Async) to host memory. */
cudaError_t rgpu_array_to_host(cudaArray_const_t array, size_t x, size_t y, size_t width,
                               size_t height, cudaStream_t stream, void *rows, size_t rows_size);
/* cudaMemcpy2DToArray(Async) from device memory. */
cudaError_t rgpu_array_from_device(cudaArray_t array, size_t x, size_t y, const void *src,
                                   size_t spitch, size_t width, size_t height,
                                   cudaStream_t stream);
/* cudaMemcpy2DFromArray(Async) to device memory. */
cudaError_t rgpu_array_to_device(void *dst, size_t dpitch, cudaArray_const_t array, size_t x,
                                  size_t y, size_t width, size_t height, cudaStream_t stream);
/* One layer z of a cudaMemcpy3D between host memory and an array. */
cudaError_t rgpu_array_layer_from_host(cudaArray_t array, size_t x, size_t y, size_t z,
                                       size_t width, size_t height, cudaStream_t stream,
                                       const void *rows, size_t rows_size);
cudaError_t rgpu_array_layer_to_host(cudaArray_const_t array, size_t x, size_t y, size_t z,
                                     size_t width, size_t height, cudaStream_t stream,
                                     void *rows, size_t rows_size);

/* ---- copies between host and device memory: stubs/cudart_memory.c and
 * stubs/cublas_hand.c through common/rgpu_copy.c, daemon/hand_cudart.c and
 * daemon/copy.c -------------------------------------------------------------------
 * One chunk of a cudaMemcpy(Async) of at most RGPU_COPY_CHUNK bytes,
 * complete before its reply (the client sends the next chunk meanwhile).
 * The host bytes never pass through a frame buffer of the client's: a
 * chunk to the device is written from the program's buffer, and from
 * RGPU_STREAM_MIN bytes up the server reads it from the socket in pieces,
 * each copied while the next arrives; a chunk to the host comes back, from
 * that size up, ahead of the reply, read straight into the program's
 * buffer (the annotations' stream and sink).  The device range is the
 * session's over all count bytes. */
cudaError_t rgpu_htod(void *dst, cudaStream_t stream, size_t count, const void *data);
cudaError_t rgpu_dtoh(void *data, size_t count, const void *src, cudaStream_t stream);
/* cudaMemcpy2D(Async), cublasSetMatrix and their kin: height rows of width
 * bytes, packed on the wire (rows_size = width * height), the device side
 * dpitch or spitch apart and checked over its whole pitched extent. */
cudaError_t rgpu_htod_2d(void *dst, size_t dpitch, size_t width, size_t height,
                         cudaStream_t stream, size_t rows_size, const void *rows);
cudaError_t rgpu_dtoh_2d(void *rows, size_t rows_size, const void *src, size_t spitch,
                         size_t width, size_t height, cudaStream_t stream);

/* ---- host functions: stubs/cudart_host_functions.c, daemon/host_functions.c -----
 * cudaLaunchHostFunc (callback 0) or cudaStreamAddCallback (callback 1, with
 * its flags), their _ptsz forms when ptsz: a host function of rgpud's on
 * stream that sends [CALLBACK, id, status] when the stream reaches it and
 * holds the stream until the client answers [CALLBACK_DONE, id]
 * (common/rgpu_proto.h); id names the program's function on the client
 * (common/rgpu_callbacks.c).  token: sent while a capture is under way,
 * else 0; when the stream captures, the function becomes a host node of
 * the capture that names token (daemon/graph_host.c) and *captured is 1. */
cudaError_t rgpu_host_func(cudaStream_t stream, int ptsz, int callback, uint64_t id,
                           unsigned int flags, uint64_t token, int *captured);

/* ---- copies on the device: stubs/cudart_memory.c, daemon/hand_cudart.c ---------
 * cudaMemcpy(Async) and cudaMemcpy2D(Async) between device ranges.  Both
 * sides must be the session's device memory whatever kind says (a
 * host-to-host or default copy through the server would name rgpud's own
 * memory): the codec checks the 1D ranges, the server the pitched ones
 * over their whole extent.  rgpu_copy_dtod with async 0 is cudaMemcpy. */
cudaError_t rgpu_copy_dtod(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                           cudaStream_t stream, int async);
cudaError_t rgpu_copy_dtod_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaStream_t stream);

/* ---- kernels: stubs/cudart_hand.c, daemon/hand_cudart.c ------------------------
 * A kernel is the server's handle the client learnt for a host stub
 * (rgpu.kernel_get); one the session never handed out is refused with
 * cudaErrorInvalidDeviceFunction, as an unknown host stub is natively. */

/* cudaGetFuncBySymbol: the kernel's function in the serving thread's
 * current context. */
cudaError_t rgpu_func_by_symbol(cudaFunction_t *function, cudaKernel_t kernel);
/* cudaFuncGetAttributes. */
cudaError_t rgpu_func_attrs(struct cudaFuncAttributes *attr, cudaKernel_t kernel);
/* cudaFuncSetAttribute. */
cudaError_t rgpu_func_set_attr(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value);
/* cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags. */
cudaError_t rgpu_occupancy(int *num_blocks, cudaKernel_t kernel, int block_size,
                           size_t dynamic_smem, unsigned int flags);
/* cudaOccupancyAvailableDynamicSMemPerBlock. */
cudaError_t rgpu_occupancy_smem(size_t *bytes, cudaKernel_t kernel, int num_blocks,
                                int block_size);

/* ---- stream capture: stubs/cudart_hand.c, daemon/hand_cudart.c -----------------
 * cudaStreamGetCaptureInfo (per_thread: its _ptsz form) with the capture's
 * dependency arrays, which the library hands back as pointers into memory
 * of its own: at most max_deps nodes into deps, and where edges is not
 * NULL their edge data; count says how many dependencies there are (the
 * client asks again with room for all).  deps NULL asks for no nodes, as
 * a NULL dependencies_out does.  The nodes join the session's handles. */
cudaError_t rgpu_capture_info(cudaStream_t stream, int per_thread,
                              enum cudaStreamCaptureStatus *status, unsigned long long *id,
                              cudaGraph_t *graph, cudaGraphNode_t *deps,
                              cudaGraphEdgeData *edges, size_t max_deps, size_t *count);

/* ---- memory: stubs/cudart_memory.c, daemon/hand_cudart.c -----------------------
 * The device of memory the session owns, for cudaPointerGetAttributes
 * (asked once per allocation whose device the client did not learn when
 * it was made). */
cudaError_t rgpu_pointer_device(int *device, const void *ptr);

/* ==== launches, modules and images ================================================
 * (stubs/cudart_hand.c, daemon/hand_cudart.c; records and bounds:
 * codegen/rgpu_module_wire.h) */

/* A fatbin nvcc registered, loaded on its first use (cudaLibraryLoadData
 * without options): image_size bytes at image, or, image NULL, the image of
 * image_size bytes this client thread sent ahead in pieces (rgpu_image_piece
 * of codegen/rgpu_own.h).  The server checks the image's headers against
 * its bytes before the library reads it. */
cudaError_t rgpu_lib_load(cudaLibrary_t *library, size_t image_size, const void *image);

/* cudaLibraryGetKernel of the kernel nvcc registered as name, and its
 * parameters' layout: *nparams of them, the first max_params in params. */
cudaError_t rgpu_kernel_get(cudaKernel_t *kernel, cudaLibrary_t library, const char *name,
                            struct rgpu_param_slot *params, size_t max_params, size_t *nparams);

/* cudaLaunchKernel of a kernel rgpu_kernel_get handed out, its arguments
 * packed by its layout (params_size bytes). */
cudaError_t rgpu_launch(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                        cudaStream_t stream, size_t params_size, const void *params);
/* cudaLaunchKernelExC with nattrs launch attributes (the cooperative
 * launches are sent as such). */
cudaError_t rgpu_launch_ex(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                           cudaStream_t stream, const struct rgpu_launch_attr *attrs,
                           size_t nattrs, size_t params_size, const void *params);
/* ==== graphs (stubs/cudart_graphs.c, stubs/cudart_graph_host.c,
 * stubs/graph_conditionals.h, common/rgpu_graph_host.c; served with the
 * driver's twins by daemon/hand_graphs.c, daemon/hand_graph_conditionals.c
 * and daemon/graph_host.c) =================================================
 * The arguments of each are those of its driver twin in codegen/cuda_own.h,
 * in the same order (common/rgpu_graph_wire.h).  Every call waits for its
 * answer: a graph is built once and launched many times, and an update's
 * error must come back at once.  Node, graph and executable-graph handles
 * are checked against the session's table; the server holds each to the
 * operation (a graph to add to, a node to set, an executable graph and its
 * node), and the nodes and body graphs it hands out join the table. */

/* A kernel node added (op RGPU_GRAPH_NODE_ADD: graph, deps; *made the new
 * node), given new parameters (SET: node) or given them in an executable
 * graph (EXEC_SET: exec, node).  kernel: the server's handle the client
 * learnt for a host stub; params: its arguments packed by the kernel's
 * layout, as a launch's. */
cudaError_t rgpu_graph_kernel_node(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                   cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                   size_t ndeps, cudaKernel_t kernel, dim3 grid, dim3 block,
                                   unsigned int shmem, cudaGraphNode_t *made,
                                   const void *params, size_t params_size);
/* cudaGraphKernelNodeGetParams: the kernel (the server's handle, which
 * the client maps back to its host stub), the shape, and the arguments
 * packed by the kernel's layout: *nparams parameters at offsets and sizes,
 * *nbytes bytes of params (the first max_params and max_bytes travel). */
cudaError_t rgpu_graph_kernel_params(cudaGraphNode_t node, uint64_t *kernel, dim3 *grid,
                                     dim3 *block, unsigned int *shmem, uint32_t *offsets,
                                     uint32_t *sizes, size_t max_params, size_t *nparams,
                                     void *params, size_t max_bytes, size_t *nbytes);
/* cudaGraphDebugDotPrint: the library writes the description on the
 * server, into memory; *size is its length, of which the first max_size
 * bytes come back in text (the client asks again with room for all), and
 * the client writes the caller's file. */
cudaError_t rgpu_graph_dot(cudaGraph_t graph, unsigned int flags, char *text, size_t max_size,
                           size_t *size);
/* cudaGraphGetNodes (roots 0) and cudaGraphGetRootNodes (1): *count nodes
 * in all, the first capacity of them in nodes (nodes NULL: the count). */
cudaError_t rgpu_graph_nodes(cudaGraph_t graph, int roots, cudaGraphNode_t *nodes,
                             size_t capacity, size_t *count);
/* cudaGraphGetEdges: *count edges in all, the first capacity of them in
 * from, to and, where it is not NULL, edges (from NULL: the count). */
cudaError_t rgpu_graph_edges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
                             cudaGraphEdgeData *edges, size_t capacity, size_t *count);
/* cudaGraphAddMemAllocNode, the record as its parts (its one pointer, the
 * Windows security attributes of props, is NULL on the server); *dptr the
 * address the allocation will have, the session's device memory from now
 * on. */
cudaError_t rgpu_graph_mem_alloc(cudaGraphNode_t *node, cudaGraph_t graph,
                                 const cudaGraphNode_t *deps, size_t ndeps,
                                 const struct cudaMemPoolProps *props,
                                 const struct cudaMemAccessDesc *descs, size_t ndescs,
                                 size_t bytesize, uint64_t *dptr);

/* Conditional nodes (stubs/graph_conditionals.h): a conditional handle
 * for graph (cudaGraphConditionalHandleCreate), and a conditional node
 * (a node record of type conditional) of handle, one made for graph; its
 * size body graphs are the node's, made by the library with it. */
cudaError_t rgpu_graph_cond_handle(cudaGraphConditionalHandle *handle, cudaGraph_t graph,
                                   unsigned int value, unsigned int flags);
cudaError_t rgpu_graph_cond_node(cudaGraphNode_t *node, cudaGraph_t graph,
                                 const cudaGraphNode_t *deps, size_t ndeps,
                                 cudaGraphConditionalHandle handle, unsigned int type,
                                 unsigned int size, cudaGraph_t *bodies);

/* Host nodes and copies with host memory (common/rgpu_graph_host.c): the
 * program's function and memory stay on the client; the server's node
 * names them by a token (RGPU_MSG_CALLBACK when it runs). */
/* A host node running token's function, by op as rgpu_graph_kernel_node. */
cudaError_t rgpu_graph_host_node(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                 cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                 size_t ndeps, uint64_t token, cudaGraphNode_t *made);
/* cudaGraphHostNodeGetParams: the token of a host node of the program's. */
cudaError_t rgpu_graph_host_params(cudaGraphNode_t node, uint64_t *token);
/* A copy node between host memory and the device, by op. */
cudaError_t rgpu_graph_host_copy(int op, cudaGraph_t graph, cudaGraphExec_t exec,
                                 cudaGraphNode_t node, const cudaGraphNode_t *deps,
                                 size_t ndeps, const struct rgpu_graph_copy *copy,
                                 cudaGraphNode_t *made);
/* Such a copy on stream (ptsz: its _ptsz form, stream 0 the per-thread
 * one) becomes a node of the stream's capture, *captured 1; a stream that
 * does not capture: *captured 0, nothing done. */
cudaError_t rgpu_capture_host_copy(cudaStream_t stream, int ptsz,
                                   const struct rgpu_graph_copy *copy, int *captured);
/* cudaGraphLaunch(_ptsz) of an executable graph that may hold host nodes
 * of ours: when it does, a marker host function follows it on the stream
 * and sends [CALLBACK, marker, 0] once the graph has passed (*marked 1);
 * *plain: it holds none. */
cudaError_t rgpu_graph_launch(cudaGraphExec_t exec, cudaStream_t stream, int ptsz,
                              uint64_t marker, int *marked, int *plain);

#endif
