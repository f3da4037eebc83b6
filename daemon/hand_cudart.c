/* The runtime's procedures written by hand, server side: the serve_
 * functions of rgpu's own (codegen/cudart_own.h: copies between host and
 * device memory, whose one implementation for both APIs is
 * daemon/copy.c, copies on the device, the registered fatbins' loads,
 * kernels, their launches and queries) and cuBLAS's matrices
 * (codegen/cublas_own.h).  Client side: stubs/cudart_hand.c. */
#include "rgpud.h"
#include "copy.h"
#include "image_check.h"
#include "launch_attrs.h"
#include "owned.h"
#include "owned_handles.h"
#include "cudart_serve.h"
#include "cublas_serve.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The real runtime's functions, resolved on first use. */
#define REAL(name) ((__typeof__(&name))real_sym(#name))

static void *real_sym(const char *name)
{
    return backend_sym("cudart", name);
}

/* ---- handles this session created: never trust the client's ------------ */

struct kernel_rec {
    uint64_t handle;
    unsigned nparams;
    uint32_t *offset, *size;
    struct kernel_rec *next;
};

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_rec *kernels;

/* Libraries are in the session's handle table (owned_handles.c): loaded
 * here, or through the driver's cuLibraryLoadData (one CUlib_st class). */
static int known_library(uint64_t lib)
{
    return lib && handles_contains(H_LIBRARY, lib);
}

static struct kernel_rec *find_kernel(uint64_t handle)
{
    struct kernel_rec *k;
    pthread_mutex_lock(&handles_lock);
    for (k = kernels; k && k->handle != handle; k = k->next)
        ;
    pthread_mutex_unlock(&handles_lock);
    return k;
}

/* ---- copies ------------------------------------------------------------------ */

/* Every device range a copy touches must be the session's
 * (daemon/owned.c): a "device" address that is really the session's own
 * memory would make the copy read or write the session itself. */
static int owned_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height)
{
    uint64_t extent;
    return owned_extent_2d(pitch, width, height, &extent) == 0 && owned_range(ptr, extent);
}

static int rt_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
    return REAL(cudaMemcpyAsync)((void *)dst, src, n, cudaMemcpyHostToDevice,
                                 (cudaStream_t)stream);
}

static int rt_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
    return REAL(cudaMemcpyAsync)(dst, (const void *)src, n, cudaMemcpyDeviceToHost,
                                 (cudaStream_t)stream);
}

static int rt_sync(uint64_t stream)
{
    return REAL(cudaStreamSynchronize)((cudaStream_t)stream);
}

static int rt_available(void)
{
    return REAL(cudaMemcpyAsync) && REAL(cudaStreamSynchronize);
}

static const struct copy_api runtime_copies = { rt_htod, rt_dtoh, rt_sync, rt_available,
                                                cudaErrorInvalidValue };

/* The copies between host and device memory (daemon/copy.c serves them for
 * both APIs; the codec checked the stream and the device range). */
cudaError_t serve_rgpu_htod(void *dst, cudaStream_t stream, size_t count, const void *data)
{
    return copy_served(copy_htod(&runtime_copies, (uint64_t)(uintptr_t)dst,
                                 (uint64_t)(uintptr_t)stream, data, count));
}

cudaError_t serve_rgpu_dtoh(void *data, size_t count, const void *src, cudaStream_t stream)
{
    return copy_served(copy_dtoh(&runtime_copies, data, count, (uint64_t)(uintptr_t)src,
                                 (uint64_t)(uintptr_t)stream));
}

/* The codec checked dst and src over count bytes, and the stream; the
 * ranges are asked again here, so that no annotation change can open the
 * server's own memory to a copy kind. */
cudaError_t serve_rgpu_copy_dtod(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream, int async)
{
    if (!REAL(cudaMemcpyAsync) || !REAL(cudaMemcpy))
        return serve_transport(RGPU_ENOSYM);
    if ((kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) ||
        ((!dst || !src) && count) || !owned_range((uint64_t)(uintptr_t)dst, count) ||
        !owned_range((uint64_t)(uintptr_t)src, count))
        return cudaErrorInvalidValue;
    if (async)
        return REAL(cudaMemcpyAsync)(dst, src, count, kind, stream);
    return REAL(cudaMemcpy)(dst, src, count, kind);
}

/* The rows of a 2D copy travel packed, rows_size = width * height bytes,
 * in the frame or streamed (read whole here: the copy lays them out at
 * dpitch), or back ahead of the reply; the pitched range is checked over
 * its whole extent. */
static int rows_fit(size_t width, size_t height, size_t rows_size)
{
    return (!width || height <= rows_size / width) && width * height == rows_size;
}

static int htod_2d(void *dst, size_t dpitch, size_t width, size_t height, cudaStream_t stream,
                   size_t rows_size, const void *rows)
{
    uint64_t d = (uint64_t)(uintptr_t)dst;
    if (!REAL(cudaMemcpy2DAsync) || !REAL(cudaStreamSynchronize))
        return -RGPU_ENOSYM;
    if (!rows_fit(width, height, rows_size))
        return -RGPU_EPROTO;
    if ((!dst && width && height) || !owned_2d(d, dpitch, width, height) ||
        (!rows && !serve_stream_left() && rows_size))
        return cudaErrorInvalidValue;
    void *read = NULL;
    if (serve_stream_left()) {
        if (!(read = malloc(rows_size)))
            return -RGPU_ENOMEM;
        serve_stream_read(read, rows_size);
        rows = read;
    }
    int rc = REAL(cudaMemcpy2DAsync)(dst, dpitch, rows, width, width, height,
                                     cudaMemcpyHostToDevice, stream);
    if (rc == cudaSuccess)
        rc = REAL(cudaStreamSynchronize)(stream);    /* the rows are freed after we return */
    free(read);
    return rc;
}

static int dtoh_2d(void *rows, size_t rows_size, const void *src, size_t spitch, size_t width,
                   size_t height, cudaStream_t stream)
{
    uint64_t s = (uint64_t)(uintptr_t)src;
    size_t sink = serve_sink_len();
    if (!REAL(cudaMemcpy2DAsync) || !REAL(cudaStreamSynchronize))
        return -RGPU_ENOSYM;
    if (!rows_fit(width, height, rows_size))
        return -RGPU_EPROTO;
    if (rows_size > RGPU_FRAME_MAX - 4096)
        return -RGPU_ETOOBIG;
    if ((!src && width && height) || !owned_2d(s, spitch, width, height) ||
        (!rows && !sink && rows_size))
        return cudaErrorInvalidValue;
    void *buf = sink ? malloc(sink) : rows;
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = REAL(cudaMemcpy2DAsync)(buf, width, src, spitch, width, height,
                                     cudaMemcpyDeviceToHost, stream);
    if (rc == cudaSuccess)
        rc = REAL(cudaStreamSynchronize)(stream);
    if (sink && rc == cudaSuccess) {
        serve_data_begin(sink);
        serve_data_write(buf, sink);
        serve_data_end();
    }
    if (sink)
        free(buf);
    return rc;
}

cudaError_t serve_rgpu_htod_2d(void *dst, size_t dpitch, size_t width, size_t height,
                               cudaStream_t stream, size_t rows_size, const void *rows)
{
    return copy_served(htod_2d(dst, dpitch, width, height, stream, rows_size, rows));
}

cudaError_t serve_rgpu_dtoh_2d(void *rows, size_t rows_size, const void *src, size_t spitch,
                               size_t width, size_t height, cudaStream_t stream)
{
    return copy_served(dtoh_2d(rows, rows_size, src, spitch, width, height, stream));
}

/* cuBLAS's matrices and vectors (codegen/cublas_own.h): the same copies,
 * any failure of the runtime's cuBLAS's mapping error. */
static cublasStatus_t cublas_copy_status(int rc)
{
    return rc < 0    ? (cublasStatus_t)serve_transport(-rc)
           : rc == 0 ? CUBLAS_STATUS_SUCCESS
                     : CUBLAS_STATUS_MAPPING_ERROR;
}

cublasStatus_t serve_rgpu_cublas_htod_2d(void *dst, size_t dpitch, size_t width, size_t height,
                                         cudaStream_t stream, size_t rows_size, const void *rows)
{
    return cublas_copy_status(htod_2d(dst, dpitch, width, height, stream, rows_size, rows));
}

cublasStatus_t serve_rgpu_cublas_dtoh_2d(void *rows, size_t rows_size, const void *src,
                                         size_t spitch, size_t width, size_t height,
                                         cudaStream_t stream)
{
    return cublas_copy_status(dtoh_2d(rows, rows_size, src, spitch, width, height, stream));
}

/* The codec checked the stream; the pitched ranges are checked here. */
cudaError_t serve_rgpu_copy_dtod_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                                    size_t width, size_t height, cudaStream_t stream)
{
    uint64_t d = (uint64_t)(uintptr_t)dst, s = (uint64_t)(uintptr_t)src;
    if (!REAL(cudaMemcpy2DAsync))
        return serve_transport(RGPU_ENOSYM);
    if (((!dst || !src) && width && height) || !owned_2d(d, dpitch, width, height) ||
        !owned_2d(s, spitch, width, height))
        return cudaErrorInvalidValue;
    return REAL(cudaMemcpy2DAsync)(dst, dpitch, src, spitch, width, height,
                                   cudaMemcpyDeviceToDevice, stream);
}

/* ---- modules and kernels ------------------------------------------------------- */

/* A registered fatbin (codegen/cudart_own.h): the call takes no size, so
 * only an image whose headers stay inside its bytes may reach it, as a
 * copy with zeros after it.  The codec records the library as the
 * session's. */
cudaError_t serve_rgpu_lib_load(cudaLibrary_t *library, size_t image_size, const void *image)
{
    struct image_arg img;
    if (!REAL(cudaLibraryLoadData))
        return serve_transport(RGPU_ENOSYM);
    int rc = image_take(image, image_size, &img);
    if (rc < 0)
        return serve_transport(-rc);
    void *copy = NULL;
    if (!library)
        rc = cudaErrorInvalidValue;
    else if (!image_acceptable(img.p, img.n))
        rc = cudaErrorInvalidKernelImage;
    else if (!(copy = image_for_library(&img)))
        rc = -RGPU_ENOMEM;
    else
        rc = REAL(cudaLibraryLoadData)(library, copy, NULL, NULL, 0, NULL, NULL, 0);
    image_done(&img, copy);
    return rc < 0 ? (cudaError_t)serve_transport(-rc) : (cudaError_t)rc;
}

static void layout_of(struct kernel_rec *k)
{
    __typeof__(&cudaFuncGetParamInfo) info = REAL(cudaFuncGetParamInfo);
    size_t off, size;
    k->nparams = 0;
    while (info && k->nparams < 4096 &&
           info((const void *)k->handle, k->nparams, &off, &size) == cudaSuccess) {
        uint32_t *o = realloc(k->offset, (k->nparams + 1) * sizeof *o);
        uint32_t *s = realloc(k->size, (k->nparams + 1) * sizeof *s);
        if (o)
            k->offset = o;
        if (s)
            k->size = s;
        if (!o || !s)
            break;
        k->offset[k->nparams] = (uint32_t)off;
        k->size[k->nparams] = (uint32_t)size;
        k->nparams++;
    }
    /* Walking past the last parameter sets the runtime's last error. */
    __typeof__(&cudaGetLastError) clear = REAL(cudaGetLastError);
    if (clear)
        clear();
}

/* The kernel's record, its layout asked of the runtime the first time. */
static struct kernel_rec *kernel_rec_of(uint64_t handle)
{
    struct kernel_rec *k = find_kernel(handle);
    if (k || !(k = calloc(1, sizeof *k)))
        return k;
    k->handle = handle;
    layout_of(k);
    pthread_mutex_lock(&handles_lock);
    k->next = kernels;
    kernels = k;
    pthread_mutex_unlock(&handles_lock);
    return k;
}

/* The codec checked the library as a handle of the session's (NULL
 * passes it) and records the kernel as one. */
cudaError_t serve_rgpu_kernel_get(cudaKernel_t *kernel, cudaLibrary_t library, const char *name,
                                  struct rgpu_param_slot *params, size_t max_params,
                                  size_t *nparams)
{
    if (!REAL(cudaLibraryGetKernel))
        return serve_transport(RGPU_ENOSYM);
    if (!name || strnlen(name, RGPU_JIT_NAME_MAX) >= RGPU_JIT_NAME_MAX)
        return serve_transport(RGPU_EPROTO);
    if (!kernel || !nparams)
        return cudaErrorInvalidValue;
    *nparams = 0;
    if (!known_library((uint64_t)(uintptr_t)library))
        return cudaErrorInvalidResourceHandle;
    cudaError_t rc = REAL(cudaLibraryGetKernel)(kernel, library, name);
    struct kernel_rec *k = rc == cudaSuccess ? kernel_rec_of((uint64_t)(uintptr_t)*kernel) : NULL;
    for (unsigned i = 0; k && i < k->nparams; i++)
        if (params && i < max_params)
            params[i] = (struct rgpu_param_slot){ k->offset[i], k->size[i] };
    *nparams = k ? k->nparams : 0;
    return rc;
}

/* A graph's kernel node names its kernel and arguments as a launch does
 * (daemon/hand_graphs.c): 1 for a kernel the session never resolved, -1
 * when the arguments do not fit its layout, else 0 with argv filled. */
int hand_cudart_kernel_argv(uint64_t kern, const void *params, size_t n, void **argv,
                            unsigned max)
{
    struct kernel_rec *k = find_kernel(kern);
    if (!k)
        return 1;
    return layout_argv(k->offset, k->size, k->nparams, params, n, argv, max) ? -1 : 0;
}

/* The layout of a kernel the session resolved (a graph's kernel node
 * queried, daemon/hand_graphs.c): 0, or -1 for an unknown kernel. */
int hand_cudart_kernel_layout(uint64_t kern, const uint32_t **offset, const uint32_t **size,
                              unsigned *n)
{
    struct kernel_rec *k = find_kernel(kern);
    if (!k)
        return -1;
    *offset = k->offset;
    *size = k->size;
    *n = k->nparams;
    return 0;
}

/* The launch both procedures describe, the codec having checked the
 * kernel and the stream as the session's (and params as params_size
 * bytes): without attributes cudaLaunchKernel's, with them
 * cudaLaunchKernelExC's.  Arguments that do not fit the kernel's layout
 * are a protocol error. */
static cudaError_t launch(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                          cudaStream_t stream, CUlaunchAttribute *attrs, unsigned nattrs,
                          size_t params_size, const void *params)
{
    void *argv[512];
    struct kernel_rec *k = find_kernel((uint64_t)(uintptr_t)kernel);
    if (k && layout_argv(k->offset, k->size, k->nparams, params, params_size, argv, 512))
        return serve_transport(RGPU_EPROTO);
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    if (!attrs) {
        if (!REAL(cudaLaunchKernel))
            return serve_transport(RGPU_ENOSYM);
        return REAL(cudaLaunchKernel)((const void *)kernel, grid, block, argv, shmem, stream);
    }
    if (!REAL(cudaLaunchKernelExC))
        return serve_transport(RGPU_ENOSYM);
    /* The runtime's records are the driver's (daemon/launch_attrs.c). */
    cudaLaunchConfig_t config = { grid, block, shmem, stream,
                                  (cudaLaunchAttribute *)(void *)attrs, nattrs };
    return REAL(cudaLaunchKernelExC)(&config, (const void *)kernel, argv);
}

cudaError_t serve_rgpu_launch(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                              cudaStream_t stream, size_t params_size, const void *params)
{
    return launch(kernel, grid, block, shmem, stream, NULL, 0, params_size, params);
}

cudaError_t serve_rgpu_launch_ex(cudaKernel_t kernel, dim3 grid, dim3 block, size_t shmem,
                                 cudaStream_t stream, const struct rgpu_launch_attr *attrs,
                                 size_t nattrs, size_t params_size, const void *params)
{
    CUlaunchAttribute a[RGPU_LAUNCH_ATTRS_MAX];
    switch (launch_attrs_take(attrs, nattrs, a)) {     /* it logs what it refuses */
    case LAUNCH_ATTRS_MALFORMED:
        return serve_transport(RGPU_EPROTO);
    case LAUNCH_ATTRS_BAD_EVENT:
        return cudaErrorInvalidResourceHandle;
    case LAUNCH_ATTRS_BAD_WINDOW:
        return cudaErrorInvalidValue;
    case LAUNCH_ATTRS_OK:
        break;
    }
    return launch(kernel, grid, block, shmem, stream, a, (unsigned)nattrs, params_size, params);
}

/* The kernels' own procedures (codegen/cudart_own.h): the codec checked
 * the kernel as one the session handed out; the runtime's answers are for
 * kernels it registered from the session's libraries. */
cudaError_t serve_rgpu_func_by_symbol(cudaFunction_t *function, cudaKernel_t kernel)
{
    __typeof__(&cuKernelGetFunction) get =
        (__typeof__(&cuKernelGetFunction))backend_sym("cuda", "cuKernelGetFunction");
    if (!get || !REAL(cudaFree))
        return serve_transport(RGPU_ENOSYM);
    if (!function)
        return cudaErrorInvalidValue;
    if (!find_kernel((uint64_t)(uintptr_t)kernel))
        return cudaErrorInvalidDeviceFunction;
    CUfunction f = NULL;
    CUresult r = get(&f, (CUkernel)kernel);
    if (r == CUDA_ERROR_INVALID_CONTEXT && REAL(cudaFree)(NULL) == cudaSuccess)
        r = get(&f, (CUkernel)kernel);
    *function = (cudaFunction_t)f;
    /* The runtime numbers the driver's codes alike, but for handles. */
    return r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidDeviceFunction : (cudaError_t)r;
}

cudaError_t serve_rgpu_func_attrs(struct cudaFuncAttributes *attr, cudaKernel_t kernel)
{
    if (!REAL(cudaFuncGetAttributes))
        return serve_transport(RGPU_ENOSYM);
    if (!find_kernel((uint64_t)(uintptr_t)kernel))
        return cudaErrorInvalidDeviceFunction;
    if (!attr)
        return cudaErrorInvalidValue;
    return REAL(cudaFuncGetAttributes)(attr, (const void *)kernel);
}

cudaError_t serve_rgpu_func_set_attr(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value)
{
    if (!REAL(cudaFuncSetAttribute))
        return serve_transport(RGPU_ENOSYM);
    if (!find_kernel((uint64_t)(uintptr_t)kernel))
        return cudaErrorInvalidDeviceFunction;
    return REAL(cudaFuncSetAttribute)((const void *)kernel, attr, value);
}

cudaError_t serve_rgpu_occupancy(int *num_blocks, cudaKernel_t kernel, int block_size,
                                 size_t dynamic_smem, unsigned int flags)
{
    if (!REAL(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags))
        return serve_transport(RGPU_ENOSYM);
    if (!find_kernel((uint64_t)(uintptr_t)kernel))
        return cudaErrorInvalidDeviceFunction;
    if (!num_blocks)
        return cudaErrorInvalidValue;
    return REAL(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(
        num_blocks, (const void *)kernel, block_size, dynamic_smem, flags);
}

cudaError_t serve_rgpu_occupancy_smem(size_t *bytes, cudaKernel_t kernel, int num_blocks,
                                      int block_size)
{
    if (!REAL(cudaOccupancyAvailableDynamicSMemPerBlock))
        return serve_transport(RGPU_ENOSYM);
    if (!find_kernel((uint64_t)(uintptr_t)kernel))
        return cudaErrorInvalidDeviceFunction;
    if (!bytes)
        return cudaErrorInvalidValue;
    return REAL(cudaOccupancyAvailableDynamicSMemPerBlock)(bytes, (const void *)kernel,
                                                           num_blocks, block_size);
}

/* What a capture query handed back, into the client's arrays: at most max
 * of the n dependencies (the rest zeros, which record nothing), nodes and
 * edges of 8 bytes each, as both APIs lay them out.  Shared with the
 * driver's (daemon/hand_cuda.c). */
void capture_arrays_out(const void *nodes, const void *edges, size_t n, void *deps_out,
                        void *edges_out, size_t max)
{
    size_t k = !nodes ? 0 : n < max ? n : max;
    if (deps_out) {
        memset(deps_out, 0, max * sizeof(uint64_t));
        if (k)
            memcpy(deps_out, nodes, k * sizeof(uint64_t));
    }
    if (edges_out) {
        memset(edges_out, 0, max * sizeof(uint64_t));
        if (edges && k)
            memcpy(edges_out, edges, k * sizeof(uint64_t));
    }
}

/* cudaStreamGetCaptureInfo with its arrays (codegen/cudart_own.h); the
 * nodes join the session's handles as the codec sends them. */
cudaError_t serve_rgpu_capture_info(cudaStream_t stream, int per_thread,
                                    enum cudaStreamCaptureStatus *status,
                                    unsigned long long *id, cudaGraph_t *graph,
                                    cudaGraphNode_t *deps, cudaGraphEdgeData *edges,
                                    size_t max_deps, size_t *count)
{
    _Static_assert(sizeof(cudaGraphEdgeData) == sizeof(uint64_t), "8-byte edge records");
    __typeof__(&cudaStreamGetCaptureInfo) query =
        (__typeof__(&cudaStreamGetCaptureInfo))real_sym(
            per_thread ? "cudaStreamGetCaptureInfo_ptsz" : "cudaStreamGetCaptureInfo");
    const cudaGraphNode_t *d = NULL;
    const cudaGraphEdgeData *e = NULL;
    size_t n = 0;
    if (!query)
        return serve_transport(RGPU_ENOSYM);
    cudaError_t rc = query(stream, status, id, graph, deps ? &d : NULL, edges ? &e : NULL, &n);
    if (rc != cudaSuccess)
        n = 0;
    capture_arrays_out(d, e, n, deps, edges, max_deps);
    if (count)
        *count = n;
    return rc;
}

/* The device of memory the session owns (the codec checked ptr as
 * such), asked of the driver: its device ordinals are the runtime's. */
cudaError_t serve_rgpu_pointer_device(int *device, const void *ptr)
{
    CUresult (*attribute)(void *, CUpointer_attribute, CUdeviceptr) =
        (CUresult (*)(void *, CUpointer_attribute, CUdeviceptr))backend_sym(
            "cuda", "cuPointerGetAttribute");
    if (!attribute)
        return serve_transport(RGPU_ENOSYM);
    if (!ptr || !device)
        return cudaErrorInvalidValue;
    *device = -1;
    return attribute(device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                     (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS ? cudaSuccess
                                                                  : cudaErrorInvalidValue;
}
