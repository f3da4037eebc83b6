/* The runtime's procedures written by hand, server side: the serve_
 * functions of rgpu's own (codegen/cudart_own.h: copies between host and
 * device memory, whose one implementation for both APIs is
 * daemon/copy.c, copies on the device, kernels' queries), cuBLAS's
 * matrices (codegen/cublas_own.h), and the launches and library loads
 * still packed by hand (client side: stubs/cudart_hand.c; argument lists:
 * common/rgpu_hand_procs.h). */
#include "rgpud.h"
#include "copy.h"
#include "image_check.h"
#include "launch_attrs.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
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

#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

/* A stream the session never handed out is refused before the runtime
 * sees it: nouts empty outputs, and the runtime's bad-handle status. */
#define STREAM_OR_REFUSE(c, stream, nouts) \
    do { if (!handles_valid(H_STREAM, (stream))) return bad_stream((c), (nouts)); } while (0)

static int bad_stream(struct hand_call *c, unsigned nouts)
{
    return hand_refuse_handle(c, nouts, "stream", cudaErrorInvalidResourceHandle);
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

/* [image] -> [library]: a bin, or the size of an image staged in pieces
 * (daemon/image_stage.c) */
static int h_lib_load(struct hand_call *c)
{
    struct image_arg img = { 0 };
    cudaLibrary_t lib = NULL;
    PROTO_IF(args_count(c, 1) || image_arg(c, 0, &img) < 0);
    /* The call takes no size: only an image whose headers stay inside the
     * frame may reach it, as a copy with zeros after it. */
    void *copy = NULL;
    int rc = REAL(cudaLibraryLoadData) ? cudaSuccess : -RGPU_ENOSYM;
    if (rc == cudaSuccess && !image_acceptable(img.p, img.n))
        rc = cudaErrorInvalidKernelImage;
    if (rc == cudaSuccess)
        copy = image_for_library(&img);
    if (rc == cudaSuccess && !copy)
        rc = -RGPU_ENOMEM;
    if (rc == cudaSuccess)
        rc = REAL(cudaLibraryLoadData)(&lib, copy, NULL, NULL, 0, NULL, NULL, 0);
    image_done(&img, copy);
    if (rc < 0)
        return rc;
    if (rc == cudaSuccess)
        handles_add(H_LIBRARY, (uint64_t)(uintptr_t)lib);
    msgpack_pack_array(c->out, 1);
    msgpack_pack_uint64(c->out, (uint64_t)(uintptr_t)lib);
    return rc;
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

/* [library, name] -> [kernel, [[offset, size]...]] */
static int h_kernel_get(struct hand_call *c)
{
    uint64_t lib;
    char name[4096];
    cudaKernel_t kern = NULL;
    PROTO_IF(args_count(c, 2) || arg_u64(c, 0, &lib) || arg_str(c, 1, name, sizeof name));
    NEED(REAL(cudaLibraryGetKernel));
    msgpack_pack_array(c->out, 2);
    if (!known_library(lib)) {
        msgpack_pack_uint64(c->out, 0);
        msgpack_pack_array(c->out, 0);
        return cudaErrorInvalidResourceHandle;
    }
    int rc = REAL(cudaLibraryGetKernel)(&kern, (cudaLibrary_t)lib, name);
    struct kernel_rec *k = rc == cudaSuccess ? find_kernel((uint64_t)(uintptr_t)kern) : NULL;
    if (rc == cudaSuccess)      /* generated calls may name it too */
        handles_add(H_KERNEL, (uint64_t)(uintptr_t)kern);
    if (rc == cudaSuccess && !k && (k = calloc(1, sizeof *k))) {
        k->handle = (uint64_t)(uintptr_t)kern;
        layout_of(k);
        pthread_mutex_lock(&handles_lock);
        k->next = kernels;
        kernels = k;
        pthread_mutex_unlock(&handles_lock);
    }
    msgpack_pack_uint64(c->out, (uint64_t)(uintptr_t)kern);
    msgpack_pack_array(c->out, k ? k->nparams : 0);
    for (unsigned i = 0; k && i < k->nparams; i++) {
        msgpack_pack_array(c->out, 2);
        msgpack_pack_uint32(c->out, k->offset[i]);
        msgpack_pack_uint32(c->out, k->size[i]);
    }
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

/* The launch both procedures describe: v holds [kernel, gx, gy, gz, bx,
 * by, bz, shmem, stream], params the argument bytes; without attributes
 * it is cudaLaunchKernel's, with them cudaLaunchKernelExC's. */
static int launch(struct hand_call *c, const uint64_t *v, const void *params, size_t n,
                  CUlaunchAttribute *attrs, unsigned nattrs)
{
    void *argv[512];
    PROTO_IF(v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[3] > UINT32_MAX ||
             v[4] > UINT32_MAX || v[5] > UINT32_MAX || v[6] > UINT32_MAX);
    struct kernel_rec *k = find_kernel(v[0]);
    PROTO_IF(k && layout_argv(k->offset, k->size, k->nparams, params, n, argv, 512));
    STREAM_OR_REFUSE(c, v[8], 0);
    msgpack_pack_array(c->out, 0);
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    dim3 grid = { (unsigned)v[1], (unsigned)v[2], (unsigned)v[3] };
    dim3 block = { (unsigned)v[4], (unsigned)v[5], (unsigned)v[6] };
    if (!attrs) {
        NEED(REAL(cudaLaunchKernel));
        return REAL(cudaLaunchKernel)((const void *)k->handle, grid, block, argv, v[7],
                                      (cudaStream_t)v[8]);
    }
    NEED(REAL(cudaLaunchKernelExC));
    /* The runtime's records are the driver's (daemon/launch_attrs.c). */
    cudaLaunchConfig_t config = { grid, block, v[7], (cudaStream_t)v[8],
                                  (cudaLaunchAttribute *)(void *)attrs, nattrs };
    return REAL(cudaLaunchKernelExC)(&config, (const void *)k->handle, argv);
}

/* [kernel, gx, gy, gz, bx, by, bz, shmem, stream, bin params] */
static int h_launch(struct hand_call *c)
{
    uint64_t v[9];
    const void *params;
    size_t n;
    PROTO_IF(args_count(c, 10) || arg_bin(c, 9, &params, &n) || arg_u64s(c, 9, v));
    return launch(c, v, params, n, NULL, 0);
}

/* [kernel, gx, gy, gz, bx, by, bz, shmem, stream, attrs, bin params] */
static int h_launch_ex(struct hand_call *c)
{
    uint64_t v[9];
    const void *params;
    size_t n;
    CUlaunchAttribute attrs[RGPU_LAUNCH_ATTRS_MAX];
    unsigned nattrs = 0;
    PROTO_IF(args_count(c, 11) || arg_bin(c, 10, &params, &n) || arg_u64s(c, 9, v) ||
             launch_attrs_arg(c, 9, attrs, &nattrs));
    switch (launch_attrs_check(attrs, nattrs)) {     /* it logs what it refuses */
    case LAUNCH_ATTRS_BAD_EVENT:
        msgpack_pack_array(c->out, 0);
        return cudaErrorInvalidResourceHandle;
    case LAUNCH_ATTRS_BAD_WINDOW:
        msgpack_pack_array(c->out, 0);
        return cudaErrorInvalidValue;
    case LAUNCH_ATTRS_OK:
        break;
    }
    return launch(c, v, params, n, attrs, nattrs);
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

const struct hand_proc hand_cudart_procs[] = {
    { "cudart", RGPU_H_LIB_LOAD, h_lib_load },
    { "cudart", RGPU_H_KERNEL_GET, h_kernel_get },
    { "cudart", RGPU_H_LAUNCH, h_launch },
    { "cudart", RGPU_H_LAUNCH_EX, h_launch_ex },
};
const int hand_cudart_nprocs = sizeof hand_cudart_procs / sizeof hand_cudart_procs[0];
