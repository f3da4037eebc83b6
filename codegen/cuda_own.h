/* rgpu's own procedures of libcuda (codegen/cuda.ann, "procedures"):
 * requests of the wire that are no driver function, declared as C
 * functions so that the one codec marshals them as it does the driver's
 * (see codegen/cudart_own.h for the conventions). */
#ifndef RGPU_CUDA_OWN_H
#define RGPU_CUDA_OWN_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <vector_types.h>

#include "../common/rgpu_graph_wire.h"

#include "rgpu_module_wire.h"

/* ---- CUDA arrays: stubs/cuda_arrays.c, daemon/hand_arrays.c --------------------
 * One layer z of an array (0 for a 2D one) and linear memory; x and width
 * count bytes, y and height rows.  Host rows travel packed (rows_size =
 * width * height) and the copy is done before the reply; device sides
 * name a pitched device range that the server checks over its extent. */

CUresult rgpu_cu_array_from_host(CUarray array, size_t x, size_t y, size_t z, size_t width,
                                 size_t height, CUstream stream, const void *rows,
                                 size_t rows_size);
CUresult rgpu_cu_array_to_host(CUarray array, size_t x, size_t y, size_t z, size_t width,
                               size_t height, CUstream stream, void *rows, size_t rows_size);
CUresult rgpu_cu_array_from_device(CUarray array, size_t x, size_t y, size_t z,
                                   CUdeviceptr src, size_t spitch, size_t width, size_t height,
                                   CUstream stream);
CUresult rgpu_cu_array_to_device(CUdeviceptr dst, size_t dpitch, CUarray array, size_t x,
                                 size_t y, size_t z, size_t width, size_t height,
                                 CUstream stream);
/* Between two arrays (both handles checked as the session's), enqueued on
 * stream: no host memory is involved. */
CUresult rgpu_cu_array_to_array(CUarray dst, size_t dx, size_t dy, size_t dz, CUarray src,
                                size_t sx, size_t sy, size_t sz, size_t width, size_t height,
                                CUstream stream);

/* ---- copies between host and device memory: stubs/cuda_hand.c through
 * common/rgpu_copy.c, daemon/hand_cuda.c and daemon/copy.c ----------------------
 * One chunk of a cuMemcpyHtoD or cuMemcpyDtoH (and their Async forms), as
 * the runtime's rgpu_htod and rgpu_dtoh (codegen/cudart_own.h). */
CUresult rgpu_cu_htod(CUdeviceptr dst, CUstream stream, size_t count, const void *data);
CUresult rgpu_cu_dtoh(void *data, size_t count, CUdeviceptr src, CUstream stream);

/* ---- host functions: stubs/cuda_host_functions.c, daemon/host_functions.c -------
 * cuLaunchHostFunc (callback 0) or cuStreamAddCallback (callback 1), as the
 * runtime's rgpu_host_func (codegen/cudart_own.h). */
CUresult rgpu_cu_host_func(CUstream stream, int ptsz, int callback, uint64_t id,
                           unsigned int flags, uint64_t token, int *captured);

/* ---- the primary context: stubs/cuda_export.c, daemon/hand_cuda_export.c ---------
 * dev's primary context, neither retained nor made active: what the
 * runtime's export table asks before it retains it (retaining and
 * releasing instead would create and destroy it). */
CUresult rgpu_cu_primary_ctx(CUcontext *ctx, CUdevice dev);

/* ---- device attributes: stubs/cuda_cache.c, daemon/hand_cuda.c ------------------
 * Every attribute of dev in one round trip (a static runtime's
 * cudaGetDeviceProperties asks some 100): for each attribute a < count,
 * answered[a] is 1 and values[a] its value when the driver answers it with
 * success, else answered[a] is 0 and the client asks that one alone, so
 * that its error is the driver's. */
CUresult rgpu_cu_device_attrs(int *values, unsigned char *answered, size_t count, CUdevice dev);

/* ---- names: stubs/cuda_launch.c, daemon/hand_cuda_launch.c ---------------------
 * cuFuncGetName and cuKernelGetName: the driver's name of a function or
 * kernel the session was handed, into name (max_size bytes, its NUL
 * included; a longer name is cut there, and the client asks again with a
 * larger buffer).  The client keeps the string, as the driver keeps the
 * one it returns. */
CUresult rgpu_cu_func_name(char *name, size_t max_size, CUfunction function);
CUresult rgpu_cu_kernel_name(char *name, size_t max_size, CUkernel kernel);

/* ---- occupancy: stubs/cuda_launch.c, daemon/hand_cuda_launch.c -------------------
 * cuOccupancyMaxPotentialBlockSizeWithFlags (and without flags: 0).  Its
 * callback, which gives the dynamic shared memory a block size needs, is
 * the program's and runs on the client: smem_by_block[b - 1] is its answer
 * for block size b, for b from 1 to count, and the server's driver runs
 * against that table (count 0: no callback, dynamic_smem for every block
 * size).  A block size outside the table the driver asks about fails the
 * call with CUDA_ERROR_NOT_SUPPORTED. */
CUresult rgpu_cu_occupancy_block_size(int *min_grid_size, int *block_size, CUfunction func,
                                      const size_t *smem_by_block, size_t count,
                                      size_t dynamic_smem, int block_size_limit,
                                      unsigned int flags);

/* ---- stream capture: stubs/cuda_graphs.c, daemon/hand_cuda.c --------------------
 * cuStreamGetCaptureInfo_v3 (per_thread: its _ptsz form), and _v2 with
 * edges NULL: as rgpu_capture_info of codegen/cudart_own.h. */
CUresult rgpu_cu_capture_info(CUstream stream, int per_thread, CUstreamCaptureStatus *status,
                              cuuint64_t *id, CUgraph *graph, CUgraphNode *deps,
                              CUgraphEdgeData *edges, size_t max_deps, size_t *count);

/* ==== launches, modules and images ================================================
 * (stubs/cuda_launch.c, stubs/cuda_modules.c, daemon/hand_cuda_launch.c,
 * daemon/hand_cuda_modules.c; records and bounds: codegen/rgpu_module_wire.h) */

/* ---- launches ---------------------------------------------------------------------
 * The parameters' layout of a function (or of a kernel, which a launch may
 * name in its place): *nparams of them, the first max_params in params. */
CUresult rgpu_cu_param_layout(CUfunction function, struct rgpu_param_slot *params,
                              size_t max_params, size_t *nparams);
/* cuLaunchKernel: the arguments packed by the function's layout, or, packed
 * 1, the caller's own buffer (`extra`), params_size bytes either way. */
CUresult rgpu_cu_launch(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shmem, CUstream stream, int packed,
                        size_t params_size, const void *params);
/* cuLaunchKernelEx with nattrs launch attributes (the cooperative launches
 * are sent as such). */
CUresult rgpu_cu_launch_ex(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                           unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                           unsigned int block_z, unsigned int shmem, CUstream stream, int packed,
                           const struct rgpu_launch_attr *attrs, size_t nattrs,
                           size_t params_size, const void *params);

/* ---- modules, libraries and JIT linking ----------------------------------------------
 * Images are image_size bytes at image, or, image NULL, the image of
 * image_size bytes this client thread sent ahead in pieces (rgpu_image_piece
 * of codegen/rgpu_own.h); the server checks their headers against their
 * bytes before the library reads them.  JIT options: noptions records and
 * the name lists' strings in names (struct rgpu_jit_option); what the
 * library wrote into them comes back in *result, the logs' texts in logs
 * (logs_size bytes of room, *logs_used filled). */

/* cuModuleLoadData(Ex). */
CUresult rgpu_cu_module_load(CUmodule *module, const struct rgpu_jit_option *options,
                             size_t noptions, const char *names, size_t names_size,
                             struct rgpu_jit_result *result, char *logs, size_t logs_size,
                             size_t *logs_used, size_t image_size, const void *image);
/* cuLibraryLoadData (library options are answered on the client). */
CUresult rgpu_cu_library_load(CUlibrary *library, const struct rgpu_jit_option *options,
                              size_t noptions, const char *names, size_t names_size,
                              struct rgpu_jit_result *result, char *logs, size_t logs_size,
                              size_t *logs_used, size_t image_size, const void *image);
/* cuLinkCreate_v2.  The state keeps the create's options on the server,
 * since the driver writes its logs into them while it lives: the calls
 * below bring them back as they stand (state_result, state_logs). */
CUresult rgpu_cu_link_create(CUlinkState *link, const struct rgpu_jit_option *options,
                             size_t noptions, const char *names, size_t names_size,
                             struct rgpu_jit_result *result, char *logs, size_t logs_size,
                             size_t *logs_used);
/* cuLinkAddData_v2 of an input named name (NULL: none), with options of its
 * own. */
CUresult rgpu_cu_link_add(CUlinkState link, CUjitInputType type, const char *name,
                          const struct rgpu_jit_option *options, size_t noptions,
                          const char *names, size_t names_size,
                          struct rgpu_jit_result *state_result, char *state_logs,
                          size_t state_logs_size, size_t *state_logs_used,
                          struct rgpu_jit_result *result, char *logs, size_t logs_size,
                          size_t *logs_used, size_t image_size, const void *image);
/* cuLinkComplete: the linked image's size; it stays with the state, read in
 * pieces of at most RGPU_IMAGE_PIECE bytes with rgpu_cu_link_read. */
CUresult rgpu_cu_link_complete(CUlinkState link, size_t *size,
                               struct rgpu_jit_result *state_result, char *state_logs,
                               size_t state_logs_size, size_t *state_logs_used);
CUresult rgpu_cu_link_read(CUlinkState link, size_t offset, void *bytes, size_t size);
/* cuLinkDestroy. */
CUresult rgpu_cu_link_destroy(CUlinkState link);
/* ==== graphs (stubs/cuda_graphs.c, stubs/cuda_graph_host.c,
 * stubs/graph_conditionals.h, common/rgpu_graph_host.c; served with the
 * runtime's twins) ===========================================================
 * As the runtime's of codegen/cudart_own.h, argument for argument: the
 * driver's calls through them (a statically linked runtime builds its
 * graphs so). */

/* A kernel node by op; function a CUfunction or a CUkernel; packed: params
 * is the caller's own `extra` buffer rather than arguments packed by the
 * function's layout. */
CUresult rgpu_cu_graph_kernel_node(int op, CUgraph graph, CUgraphExec exec, CUgraphNode node,
                                   const CUgraphNode *deps, size_t ndeps, CUfunction function,
                                   dim3 grid, dim3 block, unsigned int shmem, int packed,
                                   CUgraphNode *made, const void *params, size_t params_size);
/* cuGraphKernelNodeGetParams_v2: the function, kernel and context the
 * driver names (a statically linked runtime finds its kernel by either),
 * the shape, and the arguments packed by the function's layout. */
CUresult rgpu_cu_graph_kernel_params(CUgraphNode node, uint64_t *function, uint64_t *kernel,
                                     uint64_t *ctx, dim3 *grid, dim3 *block,
                                     unsigned int *shmem, uint32_t *offsets, uint32_t *sizes,
                                     size_t max_params, size_t *nparams, void *params,
                                     size_t max_bytes, size_t *nbytes);
CUresult rgpu_cu_graph_dot(CUgraph graph, unsigned int flags, char *text, size_t max_size,
                           size_t *size);
CUresult rgpu_cu_graph_nodes(CUgraph graph, int roots, CUgraphNode *nodes, size_t capacity,
                             size_t *count);
CUresult rgpu_cu_graph_edges(CUgraph graph, CUgraphNode *from, CUgraphNode *to,
                             CUgraphEdgeData *edges, size_t capacity, size_t *count);
CUresult rgpu_cu_graph_mem_alloc(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                 size_t ndeps, const CUmemPoolProps *props,
                                 const CUmemAccessDesc *descs, size_t ndescs, size_t bytesize,
                                 uint64_t *dptr);
/* Conditional handles and nodes in ctx. */
CUresult rgpu_cu_graph_cond_handle(CUgraphConditionalHandle *handle, CUgraph graph,
                                   CUcontext ctx, unsigned int value, unsigned int flags);
CUresult rgpu_cu_graph_cond_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                 size_t ndeps, CUgraphConditionalHandle handle,
                                 unsigned int type, unsigned int size, CUcontext ctx,
                                 CUgraph *bodies);
/* Host nodes, copies with host memory (ctx: the copy's context, NULL for
 * the thread's current one) and launches. */
CUresult rgpu_cu_graph_host_node(int op, CUgraph graph, CUgraphExec exec, CUgraphNode node,
                                 const CUgraphNode *deps, size_t ndeps, uint64_t token,
                                 CUgraphNode *made);
CUresult rgpu_cu_graph_host_params(CUgraphNode node, uint64_t *token);
CUresult rgpu_cu_graph_host_copy(int op, CUgraph graph, CUgraphExec exec, CUgraphNode node,
                                 const CUgraphNode *deps, size_t ndeps,
                                 const struct rgpu_graph_copy *copy, CUcontext ctx,
                                 CUgraphNode *made);
CUresult rgpu_cu_capture_host_copy(CUstream stream, int ptsz, const struct rgpu_graph_copy *copy,
                                   int *captured);
CUresult rgpu_cu_graph_launch(CUgraphExec exec, CUstream stream, int ptsz, uint64_t marker,
                              int *marked, int *plain);

#endif
