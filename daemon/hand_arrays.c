/* CUDA arrays, server side: the copies with an array side (rgpu's own
 * procedures, codegen/cudart_own.h and codegen/cuda_own.h; client side
 * stubs/cudart_arrays.c and stubs/cuda_arrays.c) and the guards of the
 * generated texture and surface object calls.
 *
 * Array and stream handles reach these functions only when the session's
 * handle table holds them (the codec checks them by their type); device
 * ranges are checked here over their whole pitched extent.  The real
 * libraries check offsets and extents against the array itself.
 *
 * A texture or surface object's resource descriptor holds an array handle
 * or a device range in a union that the codec passes as bytes: the guards
 * check the member its type names, and the session keeps the objects it
 * created in the handle table under a class of its own (the runtime's
 * objects are the driver's: one class each for both), so that a client
 * can name no object it never made. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"
#include "cudart_serve.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define REAL_CU(name) ((__typeof__(&name))backend_sym("cuda", #name))
/* A server function without its library function cannot run at all. */
#define NEED(fn) do { if (!(fn)) return serve_transport(RGPU_ENOSYM); } while (0)

static int owned_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height)
{
    uint64_t extent;
    return owned_extent_2d(pitch, width, height, &extent) == 0 && owned_range(ptr, extent);
}

/* A pitched device side: NULL only for an empty copy, else owned. */
static int device_side_ok(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height)
{
    if (!width || !height)
        return 1;
    return ptr && owned_2d(ptr, pitch, width, height);
}

/* ---- the runtime's copies ------------------------------------------------------- */

/* A copy on stream is done before the reply: the request's host bytes go
 * with it, or the reply's come back in it. */
static cudaError_t sync_after(cudaStream_t stream, cudaError_t rc)
{
    if (rc != cudaSuccess)
        return rc;
    return REAL(cudaStreamSynchronize)(stream);
}

/* The packed rows of a band: exactly width * height bytes, present when
 * there are any (a client may send NULL for a buffer whatever its length
 * says). */
static int band_fits(const void *rows, size_t width, size_t height, size_t rows_size)
{
    return (rows || !rows_size) && (!width || height <= rows_size / width) &&
           width * height == rows_size;
}

cudaError_t serve_rgpu_array_from_host(cudaArray_t array, size_t x, size_t y, size_t width,
                                       size_t height, cudaStream_t stream, const void *rows,
                                       size_t rows_size)
{
    NEED(REAL(cudaMemcpy2DToArrayAsync) && REAL(cudaStreamSynchronize));
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    return sync_after(stream, REAL(cudaMemcpy2DToArrayAsync)(array, x, y, rows, width, width,
                                                             height, cudaMemcpyHostToDevice,
                                                             stream));
}

cudaError_t serve_rgpu_array_to_host(cudaArray_const_t array, size_t x, size_t y, size_t width,
                                     size_t height, cudaStream_t stream, void *rows,
                                     size_t rows_size)
{
    NEED(REAL(cudaMemcpy2DFromArrayAsync) && REAL(cudaStreamSynchronize));
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    return sync_after(stream, REAL(cudaMemcpy2DFromArrayAsync)(rows, width, array, x, y, width,
                                                               height, cudaMemcpyDeviceToHost,
                                                               stream));
}

cudaError_t serve_rgpu_array_from_device(cudaArray_t array, size_t x, size_t y, const void *src,
                                         size_t spitch, size_t width, size_t height,
                                         cudaStream_t stream)
{
    NEED(REAL(cudaMemcpy2DToArrayAsync));
    if (!device_side_ok((uint64_t)(uintptr_t)src, spitch, width, height))
        return cudaErrorInvalidValue;
    return REAL(cudaMemcpy2DToArrayAsync)(array, x, y, src, spitch, width, height,
                                          cudaMemcpyDeviceToDevice, stream);
}

cudaError_t serve_rgpu_array_to_device(void *dst, size_t dpitch, cudaArray_const_t array,
                                       size_t x, size_t y, size_t width, size_t height,
                                       cudaStream_t stream)
{
    NEED(REAL(cudaMemcpy2DFromArrayAsync));
    if (!device_side_ok((uint64_t)(uintptr_t)dst, dpitch, width, height))
        return cudaErrorInvalidValue;
    return REAL(cudaMemcpy2DFromArrayAsync)(dst, dpitch, array, x, y, width, height,
                                            cudaMemcpyDeviceToDevice, stream);
}

/* Bytes per element of a channel format: 0 when a channel's size is not a
 * whole, non-negative number of bytes. */
static uint64_t format_bytes(const struct cudaChannelFormatDesc *f)
{
    int bits[4] = { f->x, f->y, f->z, f->w };
    uint64_t total = 0;
    for (int i = 0; i < 4; i++) {
        if (bits[i] < 0 || bits[i] % 8 || bits[i] > 64)
            return 0;
        total += (uint64_t)bits[i] / 8;
    }
    return total;
}

/* One layer of a cudaMemcpy3D between host bytes and an array: x and
 * width in bytes, which the array's element size turns into the elements
 * cudaMemcpy3D counts in. */
static cudaError_t layer_3d(void *host, cudaArray_const_t array, size_t x, size_t y, size_t z,
                            size_t w, size_t h, int to_array, cudaStream_t stream)
{
    struct cudaChannelFormatDesc desc;
    struct cudaExtent ext;
    unsigned flags;
    cudaError_t rc = REAL(cudaArrayGetInfo)(&desc, &ext, &flags, (cudaArray_t)array);
    if (rc != cudaSuccess)
        return rc;
    uint64_t elem = format_bytes(&desc);
    if (!elem || x % elem || w % elem)
        return cudaErrorInvalidValue;
    if (!w || !h)
        return cudaSuccess;
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    struct cudaPitchedPtr lin = { host, w, w / elem, h };
    struct cudaPos pos = { x / elem, y, z };
    if (to_array) {
        p.srcPtr = lin;
        p.dstArray = (cudaArray_t)array;
        p.dstPos = pos;
        p.kind = cudaMemcpyHostToDevice;
    } else {
        p.dstPtr = lin;
        p.srcArray = (cudaArray_t)array;
        p.srcPos = pos;
        p.kind = cudaMemcpyDeviceToHost;
    }
    p.extent.width = w / elem;
    p.extent.height = h;
    p.extent.depth = 1;
    return sync_after(stream, REAL(cudaMemcpy3DAsync)(&p, stream));
}

#define NEED_3D() \
    NEED(REAL(cudaArrayGetInfo) && REAL(cudaMemcpy3DAsync) && REAL(cudaStreamSynchronize))

cudaError_t serve_rgpu_array_layer_from_host(cudaArray_t array, size_t x, size_t y, size_t z,
                                             size_t width, size_t height, cudaStream_t stream,
                                             const void *rows, size_t rows_size)
{
    NEED_3D();
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    return layer_3d((void *)(uintptr_t)rows, array, x, y, z, width, height, 1, stream);
}

cudaError_t serve_rgpu_array_layer_to_host(cudaArray_const_t array, size_t x, size_t y,
                                           size_t z, size_t width, size_t height,
                                           cudaStream_t stream, void *rows, size_t rows_size)
{
    NEED_3D();
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    return layer_3d(rows, array, x, y, z, width, height, 0, stream);
}

/* ---- the driver's copies, one layer z at a time ------------------------------------ */

/* One layer between linear memory (host or device) and an array, on
 * stream; to_array picks the direction.  A copy with a host side is done
 * before the reply. */
static CUresult cu_copy_layer(const void *host, CUdeviceptr dev, size_t pitch, CUarray array,
                              size_t x, size_t y, size_t z, size_t w, size_t h, int to_array,
                              CUstream stream)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    CUmemorytype lin = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (to_array) {
        p.srcMemoryType = lin;
        p.srcHost = host;
        p.srcDevice = dev;
        p.srcPitch = pitch;
        p.srcHeight = h;
        p.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        p.dstArray = array;
        p.dstXInBytes = x;
        p.dstY = y;
        p.dstZ = z;
    } else {
        p.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        p.srcArray = array;
        p.srcXInBytes = x;
        p.srcY = y;
        p.srcZ = z;
        p.dstMemoryType = lin;
        p.dstHost = (void *)(uintptr_t)host;
        p.dstDevice = dev;
        p.dstPitch = pitch;
        p.dstHeight = h;
    }
    p.WidthInBytes = w;
    p.Height = h;
    p.Depth = 1;
    CUresult rc = REAL_CU(cuMemcpy3DAsync_v2)(&p, stream);
    if (rc == CUDA_SUCCESS && host)
        rc = REAL_CU(cuStreamSynchronize)(stream);
    return rc;
}

#define NEED_CU_COPY() NEED(REAL_CU(cuMemcpy3DAsync_v2) && REAL_CU(cuStreamSynchronize))

CUresult serve_rgpu_cu_array_from_host(CUarray array, size_t x, size_t y, size_t z,
                                       size_t width, size_t height, CUstream stream,
                                       const void *rows, size_t rows_size)
{
    NEED_CU_COPY();
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    if (!rows_size)
        return CUDA_SUCCESS;
    return cu_copy_layer(rows, 0, width, array, x, y, z, width, height, 1, stream);
}

CUresult serve_rgpu_cu_array_to_host(CUarray array, size_t x, size_t y, size_t z, size_t width,
                                     size_t height, CUstream stream, void *rows,
                                     size_t rows_size)
{
    NEED_CU_COPY();
    if (!band_fits(rows, width, height, rows_size))
        return serve_transport(RGPU_EPROTO);
    if (!rows_size)
        return CUDA_SUCCESS;
    return cu_copy_layer(rows, 0, width, array, x, y, z, width, height, 0, stream);
}

CUresult serve_rgpu_cu_array_from_device(CUarray array, size_t x, size_t y, size_t z,
                                         CUdeviceptr src, size_t spitch, size_t width,
                                         size_t height, CUstream stream)
{
    NEED_CU_COPY();
    if (!width || !height)
        return CUDA_SUCCESS;
    if (!device_side_ok(src, spitch, width, height))
        return CUDA_ERROR_INVALID_VALUE;
    return cu_copy_layer(NULL, src, spitch, array, x, y, z, width, height, 1, stream);
}

CUresult serve_rgpu_cu_array_to_device(CUdeviceptr dst, size_t dpitch, CUarray array, size_t x,
                                       size_t y, size_t z, size_t width, size_t height,
                                       CUstream stream)
{
    NEED_CU_COPY();
    if (!width || !height)
        return CUDA_SUCCESS;
    if (!device_side_ok(dst, dpitch, width, height))
        return CUDA_ERROR_INVALID_VALUE;
    return cu_copy_layer(NULL, dst, dpitch, array, x, y, z, width, height, 0, stream);
}

CUresult serve_rgpu_cu_array_to_array(CUarray dst, size_t dx, size_t dy, size_t dz, CUarray src,
                                      size_t sx, size_t sy, size_t sz, size_t width,
                                      size_t height, CUstream stream)
{
    CUDA_MEMCPY3D p;
    NEED(REAL_CU(cuMemcpy3DAsync_v2));
    if (!width || !height)
        return CUDA_SUCCESS;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = p.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    p.srcArray = src;
    p.srcXInBytes = sx;
    p.srcY = sy;
    p.srcZ = sz;
    p.dstArray = dst;
    p.dstXInBytes = dx;
    p.dstY = dy;
    p.dstZ = dz;
    p.WidthInBytes = width;
    p.Height = height;
    p.Depth = 1;
    return REAL_CU(cuMemcpy3DAsync_v2)(&p, stream);
}

/* ---- resource descriptors ---------------------------------------------------------- */

/* The runtime's array handles (cudaArray_t is struct cudaArray *), the
 * driver's, and the session's own classes for texture and surface
 * objects. */
static uint32_t array_class(void) { return rgpu_handle_class("cudaArray"); }
static uint32_t cu_array_class(void) { return rgpu_handle_class("CUarray_st"); }
static uint32_t texture_class(void) { return rgpu_handle_class("rgpu.texture object"); }
static uint32_t surface_class(void) { return rgpu_handle_class("rgpu.surface object"); }

/* Whether the runtime's resource descriptor names only what the session
 * owns, in the union member its type selects (the others are zeroed, so
 * that no unchecked bytes reach the runtime).  Mipmapped arrays are
 * refused: rgpu creates none, so none can be the session's. */
static int resource_ok(struct cudaResourceDesc *r, int arrays_only)
{
    struct cudaResourceDesc c;
    memset(&c, 0, sizeof c);
    c.resType = r->resType;
    c.flags = r->flags;
    switch (r->resType) {
    case cudaResourceTypeArray:
        c.res.array.array = r->res.array.array;
        *r = c;
        return handles_contains(array_class(), (uint64_t)(uintptr_t)c.res.array.array);
    case cudaResourceTypeLinear:
        c.res.linear = r->res.linear;
        *r = c;
        return !arrays_only && c.res.linear.devPtr &&
               owned_range((uint64_t)(uintptr_t)c.res.linear.devPtr, c.res.linear.sizeInBytes);
    case cudaResourceTypePitch2D: {
        c.res.pitch2D = r->res.pitch2D;
        *r = c;
        uint64_t elem = format_bytes(&c.res.pitch2D.desc), w = c.res.pitch2D.width;
        return !arrays_only && c.res.pitch2D.devPtr && elem && w <= UINT64_MAX / elem &&
               owned_2d((uint64_t)(uintptr_t)c.res.pitch2D.devPtr, c.res.pitch2D.pitchInBytes,
                        w * elem, c.res.pitch2D.height);
    }
    default:
        return 0;
    }
}

static uint64_t cu_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;       /* other formats: refused for linear memory */
    }
}

/* The driver's resource descriptor, as resource_ok. */
static int cu_resource_ok(CUDA_RESOURCE_DESC *r, int arrays_only)
{
    CUDA_RESOURCE_DESC c;
    memset(&c, 0, sizeof c);
    c.resType = r->resType;
    c.flags = r->flags;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        c.res.array.hArray = r->res.array.hArray;
        *r = c;
        return handles_contains(cu_array_class(), (uint64_t)(uintptr_t)c.res.array.hArray);
    case CU_RESOURCE_TYPE_LINEAR:
        c.res.linear.devPtr = r->res.linear.devPtr;
        c.res.linear.format = r->res.linear.format;
        c.res.linear.numChannels = r->res.linear.numChannels;
        c.res.linear.sizeInBytes = r->res.linear.sizeInBytes;
        *r = c;
        return !arrays_only && c.res.linear.devPtr &&
               owned_range(c.res.linear.devPtr, c.res.linear.sizeInBytes);
    case CU_RESOURCE_TYPE_PITCH2D: {
        c.res.pitch2D.devPtr = r->res.pitch2D.devPtr;
        c.res.pitch2D.format = r->res.pitch2D.format;
        c.res.pitch2D.numChannels = r->res.pitch2D.numChannels;
        c.res.pitch2D.width = r->res.pitch2D.width;
        c.res.pitch2D.height = r->res.pitch2D.height;
        c.res.pitch2D.pitchInBytes = r->res.pitch2D.pitchInBytes;
        *r = c;
        uint64_t channels = c.res.pitch2D.numChannels, w = c.res.pitch2D.width;
        uint64_t elem = cu_format_bytes(c.res.pitch2D.format) * (channels <= 4 ? channels : 0);
        return !arrays_only && c.res.pitch2D.devPtr && elem && w <= UINT64_MAX / elem &&
               owned_2d(c.res.pitch2D.devPtr, c.res.pitch2D.pitchInBytes, w * elem,
                        c.res.pitch2D.height);
    }
    default:
        return 0;
    }
}

/* ---- guards of the texture and surface object calls ----------------------------- */

/* argv[i] points at the decoded argument: for a pointer kind, at the
 * pointer to the frame's copy of the bytes (NULL when the client sent
 * NULL, which the library answers itself). */
static void *arg_ptr(void **argv, int i)
{
    return *(void **)argv[i];
}

static uint64_t arg_val(void **argv, int i)
{
    return *(uint64_t *)argv[i];
}

/* (object *, resource, ...): the resource checked.  The status codes the
 * refusals return are the same numbers in both APIs. */
static int pre_texture_create(void **argv)
{
    struct cudaResourceDesc *r = arg_ptr(argv, 1);
    return !r || resource_ok(r, 0) ? 0 : cudaErrorInvalidValue;
}

static int pre_surface_create(void **argv)
{
    struct cudaResourceDesc *r = arg_ptr(argv, 1);
    return !r || resource_ok(r, 1) ? 0 : cudaErrorInvalidValue;
}

static int pre_cu_texture_create(void **argv)
{
    CUDA_RESOURCE_DESC *r = arg_ptr(argv, 1);
    return !r || cu_resource_ok(r, 0) ? 0 : CUDA_ERROR_INVALID_VALUE;
}

static int pre_cu_surface_create(void **argv)
{
    CUDA_RESOURCE_DESC *r = arg_ptr(argv, 1);
    return !r || cu_resource_ok(r, 1) ? 0 : CUDA_ERROR_INVALID_VALUE;
}

/* The object a create wrote (argument 0), kept on success. */
static void post_texture_create(void **argv, int status)
{
    const uint64_t *obj = arg_ptr(argv, 0);
    if (status == 0 && obj && *obj)
        handles_add(texture_class(), *obj);
}

static void post_surface_create(void **argv, int status)
{
    const uint64_t *obj = arg_ptr(argv, 0);
    if (status == 0 && obj && *obj)
        handles_add(surface_class(), *obj);
}

/* A destroy or a query names an object the session made: argument 0 for
 * a destroy, 1 for a query (its descriptor comes first). */
static int object_known(uint32_t cls, const char *what, uint64_t obj)
{
    if (handles_contains(cls, obj))
        return 0;
    rgpu_warn("refused a %s the session never handed out: 0x%llx", what,
              (unsigned long long)obj);
    return cudaErrorInvalidValue;
}

static int pre_texture_known0(void **argv)
{
    return object_known(texture_class(), "texture object", arg_val(argv, 0));
}

static int pre_texture_known1(void **argv)
{
    return object_known(texture_class(), "texture object", arg_val(argv, 1));
}

static int pre_surface_known0(void **argv)
{
    return object_known(surface_class(), "surface object", arg_val(argv, 0));
}

static int pre_surface_known1(void **argv)
{
    return object_known(surface_class(), "surface object", arg_val(argv, 1));
}

static void post_texture_destroyed(void **argv, int status)
{
    if (status == 0)
        handles_remove(texture_class(), arg_val(argv, 0));
}

static void post_surface_destroyed(void **argv, int status)
{
    if (status == 0)
        handles_remove(surface_class(), arg_val(argv, 0));
}

static const struct guard array_guards[] = {
    { "cudart", "cudaCreateTextureObject", pre_texture_create, post_texture_create },
    { "cudart", "cudaDestroyTextureObject", pre_texture_known0, post_texture_destroyed },
    { "cudart", "cudaGetTextureObjectResourceDesc", pre_texture_known1, NULL },
    { "cudart", "cudaGetTextureObjectTextureDesc", pre_texture_known1, NULL },
    { "cudart", "cudaGetTextureObjectResourceViewDesc", pre_texture_known1, NULL },
    { "cudart", "cudaCreateSurfaceObject", pre_surface_create, post_surface_create },
    { "cudart", "cudaDestroySurfaceObject", pre_surface_known0, post_surface_destroyed },
    { "cudart", "cudaGetSurfaceObjectResourceDesc", pre_surface_known1, NULL },
    { "cuda", "cuTexObjectCreate", pre_cu_texture_create, post_texture_create },
    { "cuda", "cuTexObjectDestroy", pre_texture_known0, post_texture_destroyed },
    { "cuda", "cuTexObjectGetResourceDesc", pre_texture_known1, NULL },
    { "cuda", "cuTexObjectGetTextureDesc", pre_texture_known1, NULL },
    { "cuda", "cuTexObjectGetResourceViewDesc", pre_texture_known1, NULL },
    { "cuda", "cuSurfObjectCreate", pre_cu_surface_create, post_surface_create },
    { "cuda", "cuSurfObjectDestroy", pre_surface_known0, post_surface_destroyed },
    { "cuda", "cuSurfObjectGetResourceDesc", pre_surface_known1, NULL },
};

const struct guard *array_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(array_guards, lib, name);
}
