// Fake libcudart: CUDA arrays, copies to and from them and texture objects,
// on the fake libcuda's cuArray* / cuMemcpy2D / cuTexObject* (arrays.c), as
// NVIDIA's runtime builds them on its driver.  The runtime's cudaArray_t is
// the driver's CUarray and a cudaTextureObject_t the driver's CUtexObject.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

cudaError_t fg_rt_enter(void);
cudaError_t fg_rt_ret(cudaError_t e);

#define CALL(expr)                                  \
    do {                                            \
        cudaError_t e_ = fg_rt_enter();             \
        if (e_ == cudaSuccess)                      \
            e_ = (cudaError_t)(expr);               \
        return fg_rt_ret(e_);                       \
    } while (0)

static CUarray arr(cudaArray_const_t a) { return (CUarray)(void *)(uintptr_t)a; }

// A channel description to the driver's format and channel count; 0 when
// the driver has no such format (channels of unequal sizes, 3 channels).
static int channel_format(const struct cudaChannelFormatDesc *d, CUarray_format *f,
                          unsigned *n)
{
    int bits = d->x;
    *n = (d->x > 0) + (d->y > 0) + (d->z > 0) + (d->w > 0);
    if ((d->y && d->y != bits) || (d->z && d->z != bits) || (d->w && d->w != bits) ||
        *n == 3 || *n == 0)
        return 0;
    switch (d->f) {
    case cudaChannelFormatKindFloat:
        *f = bits == 32 ? CU_AD_FORMAT_FLOAT : CU_AD_FORMAT_HALF;
        return bits == 32 || bits == 16;
    case cudaChannelFormatKindSigned:
        *f = bits == 8 ? CU_AD_FORMAT_SIGNED_INT8
             : bits == 16 ? CU_AD_FORMAT_SIGNED_INT16 : CU_AD_FORMAT_SIGNED_INT32;
        return bits == 8 || bits == 16 || bits == 32;
    case cudaChannelFormatKindUnsigned:
        *f = bits == 8 ? CU_AD_FORMAT_UNSIGNED_INT8
             : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16 : CU_AD_FORMAT_UNSIGNED_INT32;
        return bits == 8 || bits == 16 || bits == 32;
    default:
        return 0;
    }
}

static struct cudaChannelFormatDesc channel_desc(CUarray_format f, unsigned n)
{
    struct cudaChannelFormatDesc d = { 0, 0, 0, 0, cudaChannelFormatKindNone };
    int bits = 32;
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: bits = 8; d.f = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_UNSIGNED_INT16: bits = 16; d.f = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_UNSIGNED_INT32: d.f = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_SIGNED_INT8: bits = 8; d.f = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_SIGNED_INT16: bits = 16; d.f = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_SIGNED_INT32: d.f = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_HALF: bits = 16; d.f = cudaChannelFormatKindFloat; break;
    default: d.f = cudaChannelFormatKindFloat; break;
    }
    d.x = bits;
    d.y = n > 1 ? bits : 0;
    d.z = n > 2 ? bits : 0;
    d.w = n > 3 ? bits : 0;
    return d;
}

static cudaError_t malloc_3d(cudaArray_t *a, const struct cudaChannelFormatDesc *desc,
                             size_t w, size_t h, size_t depth, unsigned flags)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUarray_format f;
    unsigned n;

    if (!a || !desc || !channel_format(desc, &f, &n))
        return cudaErrorInvalidValue;
    memset(&d, 0, sizeof d);
    d.Width = w;
    d.Height = h;
    d.Depth = depth;
    d.Format = f;
    d.NumChannels = n;
    d.Flags = flags;
    return (cudaError_t)cuArray3DCreate_v2((CUarray *)(void *)a, &d);
}

cudaError_t CUDARTAPI cudaMallocArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc,
                                      size_t w, size_t h, unsigned int flags)
{
    CALL(malloc_3d(a, desc, w, h, 0, flags));
}

cudaError_t CUDARTAPI cudaMalloc3DArray(cudaArray_t *a, const struct cudaChannelFormatDesc *desc,
                                        struct cudaExtent e, unsigned int flags)
{
    CALL(malloc_3d(a, desc, e.width, e.height, e.depth, flags));
}

cudaError_t CUDARTAPI cudaFreeArray(cudaArray_t a)
{
    if (!a)
        return cudaSuccess;     // as cudaFree(NULL)
    CALL(cuArrayDestroy(arr(a)));
}

static cudaError_t array_info(struct cudaChannelFormatDesc *desc, struct cudaExtent *e,
                              unsigned *flags, cudaArray_t a)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult r = cuArray3DGetDescriptor_v2(&d, arr(a));

    if (r != CUDA_SUCCESS)
        return (cudaError_t)r;
    if (desc)
        *desc = channel_desc(d.Format, d.NumChannels);
    if (e) {
        e->width = d.Width;
        e->height = d.Height;
        e->depth = d.Depth;
    }
    if (flags)
        *flags = d.Flags;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaArrayGetInfo(struct cudaChannelFormatDesc *desc,
                                       struct cudaExtent *e, unsigned int *flags,
                                       cudaArray_t a)
{
    CALL(array_info(desc, e, flags, a));
}

cudaError_t CUDARTAPI cudaGetChannelDesc(struct cudaChannelFormatDesc *desc,
                                         cudaArray_const_t a)
{
    CALL(desc ? array_info(desc, NULL, NULL, (cudaArray_t)(uintptr_t)a)
              : cudaErrorInvalidValue);
}

// ---- copies ---------------------------------------------------------------------------

// The side of a copy that is not the array: host or device by kind.
static CUmemorytype other_side(enum cudaMemcpyKind kind, int is_src)
{
    if (kind == cudaMemcpyDefault)
        return CU_MEMORYTYPE_UNIFIED;
    int host = is_src ? kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost
                      : kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    return host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
}

static cudaError_t copy_array_2d(CUDA_MEMCPY2D *c, enum cudaMemcpyKind kind, int async,
                                 cudaStream_t s)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    return (cudaError_t)(async ? cuMemcpy2DAsync_v2(c, s) : cuMemcpy2D_v2(c));
}

static cudaError_t to_array(cudaArray_t dst, size_t x, size_t y, const void *src,
                            size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind, int async, cudaStream_t s)
{
    CUDA_MEMCPY2D c;

    if (spitch < width)
        return cudaErrorInvalidPitchValue;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = other_side(kind, 1);
    c.srcHost = src;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = arr(dst);
    c.dstXInBytes = x;
    c.dstY = y;
    c.WidthInBytes = width;
    c.Height = height;
    return copy_array_2d(&c, kind, async, s);
}

static cudaError_t from_array(void *dst, size_t dpitch, cudaArray_const_t src, size_t x,
                              size_t y, size_t width, size_t height,
                              enum cudaMemcpyKind kind, int async, cudaStream_t s)
{
    CUDA_MEMCPY2D c;

    if (dpitch < width)
        return cudaErrorInvalidPitchValue;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = arr(src);
    c.srcXInBytes = x;
    c.srcY = y;
    c.dstMemoryType = other_side(kind, 0);
    c.dstHost = dst;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    return copy_array_2d(&c, kind, async, s);
}

cudaError_t CUDARTAPI cudaMemcpy2DToArray(cudaArray_t dst, size_t x, size_t y,
                                          const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind)
{
    CALL(to_array(dst, x, y, src, spitch, width, height, kind, 0, NULL));
}

cudaError_t CUDARTAPI cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t x, size_t y,
                                               const void *src, size_t spitch, size_t width,
                                               size_t height, enum cudaMemcpyKind kind,
                                               cudaStream_t s)
{
    CALL(to_array(dst, x, y, src, spitch, width, height, kind, 1, s));
}

cudaError_t CUDARTAPI cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src,
                                            size_t x, size_t y, size_t width, size_t height,
                                            enum cudaMemcpyKind kind)
{
    CALL(from_array(dst, dpitch, src, x, y, width, height, kind, 0, NULL));
}

cudaError_t CUDARTAPI cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch,
                                                 cudaArray_const_t src, size_t x, size_t y,
                                                 size_t width, size_t height,
                                                 enum cudaMemcpyKind kind, cudaStream_t s)
{
    CALL(from_array(dst, dpitch, src, x, y, width, height, kind, 1, s));
}

cudaError_t CUDARTAPI cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t xd, size_t yd,
                                               cudaArray_const_t src, size_t xs, size_t ys,
                                               size_t width, size_t height,
                                               enum cudaMemcpyKind kind)
{
    CUDA_MEMCPY2D c;

    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = arr(src);
    c.srcXInBytes = xs;
    c.srcY = ys;
    c.dstArray = arr(dst);
    c.dstXInBytes = xd;
    c.dstY = yd;
    c.WidthInBytes = width;
    c.Height = height;
    CALL(copy_array_2d(&c, kind, 0, NULL));
}

// ---- texture objects ------------------------------------------------------------------

static cudaError_t create_texture(cudaTextureObject_t *out, const struct cudaResourceDesc *res,
                                  const struct cudaTextureDesc *tex,
                                  const struct cudaResourceViewDesc *view)
{
    CUDA_RESOURCE_DESC r;
    CUDA_TEXTURE_DESC t;

    if (!out || !res || !tex)
        return cudaErrorInvalidValue;
    if (view || res->resType != cudaResourceTypeArray)
        return cudaErrorNotSupported;       // as the fake driver: arrays only
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = arr(res->res.array.array);
    memset(&t, 0, sizeof t);
    for (int i = 0; i < 3; i++)
        t.addressMode[i] = (CUaddress_mode)tex->addressMode[i];
    t.filterMode = (CUfilter_mode)tex->filterMode;
    t.flags = (tex->readMode == cudaReadModeElementType ? CU_TRSF_READ_AS_INTEGER : 0) |
              (tex->normalizedCoords ? CU_TRSF_NORMALIZED_COORDINATES : 0);
    memcpy(t.borderColor, tex->borderColor, sizeof t.borderColor);
    return (cudaError_t)cuTexObjectCreate(out, &r, &t, NULL);
}

cudaError_t CUDARTAPI cudaCreateTextureObject(cudaTextureObject_t *out,
                                              const struct cudaResourceDesc *res,
                                              const struct cudaTextureDesc *tex,
                                              const struct cudaResourceViewDesc *view)
{
    CALL(create_texture(out, res, tex, view));
}

cudaError_t CUDARTAPI cudaDestroyTextureObject(cudaTextureObject_t t)
{
    CALL(cuTexObjectDestroy(t));
}

static cudaError_t texture_resource(struct cudaResourceDesc *res, cudaTextureObject_t t)
{
    CUDA_RESOURCE_DESC r;
    CUresult e = res ? cuTexObjectGetResourceDesc(&r, t) : CUDA_ERROR_INVALID_VALUE;

    if (e != CUDA_SUCCESS)
        return (cudaError_t)e;
    memset(res, 0, sizeof *res);
    res->resType = cudaResourceTypeArray;
    res->res.array.array = (cudaArray_t)(void *)r.res.array.hArray;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *res,
                                                       cudaTextureObject_t t)
{
    CALL(texture_resource(res, t));
}

// ---- 3D copies ------------------------------------------------------------------------

// cudaMemcpy3D between an array and linear memory (host or device), as the
// driver's cuMemcpy3D: the array side's position and the extent count
// elements, which become bytes here.
static cudaError_t memcpy_3d(const struct cudaMemcpy3DParms *p, int async, cudaStream_t s)
{
    CUDA_ARRAY3D_DESCRIPTOR ad;
    CUDA_MEMCPY3D c;

    if (!p || (p->srcArray && p->dstArray) || (!p->srcArray && !p->dstArray))
        return cudaErrorNotSupported;   // linear-to-linear and array-to-array: not modelled
    if ((unsigned)p->kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    int to_array = p->dstArray != NULL;
    CUresult r = cuArray3DGetDescriptor_v2(&ad, arr(to_array ? p->dstArray : p->srcArray));
    if (r != CUDA_SUCCESS)
        return (cudaError_t)r;
    struct cudaChannelFormatDesc cd = channel_desc(ad.Format, ad.NumChannels);
    size_t elem = (size_t)(cd.x + cd.y + cd.z + cd.w) / 8;
    const struct cudaPitchedPtr *lin = to_array ? &p->srcPtr : &p->dstPtr;
    const struct cudaPos *apos = to_array ? &p->dstPos : &p->srcPos;
    const struct cudaPos *lpos = to_array ? &p->srcPos : &p->dstPos;
    CUmemorytype lt = other_side(p->kind, to_array);
    memset(&c, 0, sizeof c);
    if (to_array) {
        c.srcMemoryType = lt;
        c.srcHost = lin->ptr;
        c.srcDevice = (CUdeviceptr)(uintptr_t)lin->ptr;
        c.srcPitch = lin->pitch;
        c.srcHeight = lin->ysize;
        c.srcXInBytes = lpos->x;
        c.srcY = lpos->y;
        c.srcZ = lpos->z;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = arr(p->dstArray);
        c.dstXInBytes = apos->x * elem;
        c.dstY = apos->y;
        c.dstZ = apos->z;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = arr(p->srcArray);
        c.srcXInBytes = apos->x * elem;
        c.srcY = apos->y;
        c.srcZ = apos->z;
        c.dstMemoryType = lt;
        c.dstHost = lin->ptr;
        c.dstDevice = (CUdeviceptr)(uintptr_t)lin->ptr;
        c.dstPitch = lin->pitch;
        c.dstHeight = lin->ysize;
        c.dstXInBytes = lpos->x;
        c.dstY = lpos->y;
        c.dstZ = lpos->z;
    }
    c.WidthInBytes = p->extent.width * elem;
    c.Height = p->extent.height;
    c.Depth = p->extent.depth;
    return (cudaError_t)(async ? cuMemcpy3DAsync_v2(&c, s) : cuMemcpy3D_v2(&c));
}

cudaError_t CUDARTAPI cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    CALL(memcpy_3d(p, 0, NULL));
}

cudaError_t CUDARTAPI cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t s)
{
    CALL(memcpy_3d(p, 1, s));
}

// ---- surface objects ------------------------------------------------------------------

static cudaError_t create_surface(cudaSurfaceObject_t *out, const struct cudaResourceDesc *res)
{
    CUDA_RESOURCE_DESC r;

    if (!out || !res || res->resType != cudaResourceTypeArray)
        return cudaErrorInvalidValue;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = arr(res->res.array.array);
    return (cudaError_t)cuSurfObjectCreate(out, &r);
}

cudaError_t CUDARTAPI cudaCreateSurfaceObject(cudaSurfaceObject_t *out,
                                              const struct cudaResourceDesc *res)
{
    CALL(create_surface(out, res));
}

cudaError_t CUDARTAPI cudaDestroySurfaceObject(cudaSurfaceObject_t s)
{
    CALL(cuSurfObjectDestroy(s));
}

static cudaError_t surface_resource(struct cudaResourceDesc *res, cudaSurfaceObject_t s)
{
    CUDA_RESOURCE_DESC r;
    CUresult e = res ? cuSurfObjectGetResourceDesc(&r, s) : CUDA_ERROR_INVALID_VALUE;

    if (e != CUDA_SUCCESS)
        return (cudaError_t)e;
    memset(res, 0, sizeof *res);
    res->resType = cudaResourceTypeArray;
    res->res.array.array = (cudaArray_t)(void *)r.res.array.hArray;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *res,
                                                       cudaSurfaceObject_t s)
{
    CALL(surface_resource(res, s));
}
