/* CUDA arrays and texture objects, server side (client side:
 * stubs/cudart_arrays.c; argument lists: common/rgpu_hand_procs.h).
 *
 * An array handle from the wire is used only when the session's handle
 * table holds it (cudaMallocArray's generated procedure added it); a
 * device range only when the session owns it (daemon/owned.c).  The real
 * runtime checks offsets and extents against the array itself.  Texture
 * objects are 64-bit values the driver hands out; the session keeps those
 * it created in the handle table too, under a class of its own, so that a
 * client cannot name one it never made. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

/* The runtime's array handles (cudaArray_t is struct cudaArray *), and the
 * session's own class for texture objects (the runtime's are the
 * driver's: one class for both). */
static uint32_t array_class(void) { return rgpu_handle_class("cudaArray"); }
static uint32_t texture_class(void) { return rgpu_handle_class("rgpu.texture object"); }

/* Refuses, before the runtime sees them, an array or a stream the session
 * never handed out: nouts empty outputs and the runtime's bad-handle status. */
static int refuse_unknown(struct hand_call *c, uint64_t array, uint64_t stream, unsigned nouts)
{
    if (!handles_contains(array_class(), array))
        return hand_refuse_handle(c, nouts, "CUDA array", cudaErrorInvalidResourceHandle);
    if (!handles_valid(H_STREAM, stream))
        return hand_refuse_handle(c, nouts, "stream", cudaErrorInvalidResourceHandle);
    return 0;
}

static int owned_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height)
{
    uint64_t extent;
    return owned_extent_2d(pitch, width, height, &extent) == 0 && owned_range(ptr, extent);
}

/* A copy on stream is done before the reply (the request's host bytes go
 * with it); the caller resolved cudaStreamSynchronize. */
static int sync_after(uint64_t stream, int rc)
{
    if (rc != cudaSuccess)
        return rc;
    return REAL(cudaStreamSynchronize)((cudaStream_t)stream);
}

/* ---- copies ------------------------------------------------------------------ */

/* [array, x, y, width, height, stream, bin rows] -> [] */
static int h_htoa_2d(struct hand_call *c)
{
    uint64_t v[6];
    const void *rows;
    size_t n;
    PROTO_IF(args_count(c, 7) || arg_u64s(c, 6, v) || arg_bin(c, 6, &rows, &n));
    PROTO_IF((v[3] && v[4] > n / v[3]) || v[3] * v[4] != n);
    int refused = refuse_unknown(c, v[0], v[5], 0);
    if (refused)
        return refused;
    NEED(REAL(cudaMemcpy2DToArrayAsync) && REAL(cudaStreamSynchronize));
    msgpack_pack_array(c->out, 0);
    return sync_after(v[5], REAL(cudaMemcpy2DToArrayAsync)(
                                (cudaArray_t)v[0], v[1], v[2], rows, v[3], v[3], v[4],
                                cudaMemcpyHostToDevice, (cudaStream_t)v[5]));
}

/* [array, x, y, width, height, stream] -> [bin rows] */
static int h_atoh_2d(struct hand_call *c)
{
    uint64_t v[6];
    PROTO_IF(args_count(c, 6) || arg_u64s(c, 6, v));
    if (v[3] && v[4] > (RGPU_FRAME_MAX - 4096) / v[3])
        return -RGPU_ETOOBIG;
    int refused = refuse_unknown(c, v[0], v[5], 1);
    if (refused)
        return refused;
    NEED(REAL(cudaMemcpy2DFromArrayAsync) && REAL(cudaStreamSynchronize));
    size_t n = v[3] * v[4];
    void *buf = malloc(n ? n : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = sync_after(v[5], REAL(cudaMemcpy2DFromArrayAsync)(
                                  buf, v[3], (cudaArray_const_t)v[0], v[1], v[2], v[3], v[4],
                                  cudaMemcpyDeviceToHost, (cudaStream_t)v[5]));
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc == cudaSuccess ? n : 0);
    return rc;
}

/* [array, x, y, src, spitch, width, height, stream] -> [] */
static int h_dtoa_2d(struct hand_call *c)
{
    uint64_t v[8];
    PROTO_IF(args_count(c, 8) || arg_u64s(c, 8, v));
    int refused = refuse_unknown(c, v[0], v[7], 0);
    if (refused)
        return refused;
    NEED(REAL(cudaMemcpy2DToArrayAsync));
    msgpack_pack_array(c->out, 0);
    if ((!v[3] && v[5] && v[6]) || !owned_2d(v[3], v[4], v[5], v[6]))
        return cudaErrorInvalidValue;
    return REAL(cudaMemcpy2DToArrayAsync)((cudaArray_t)v[0], v[1], v[2], (const void *)v[3],
                                          v[4], v[5], v[6], cudaMemcpyDeviceToDevice,
                                          (cudaStream_t)v[7]);
}

/* [dst, dpitch, array, x, y, width, height, stream] -> [] */
static int h_atod_2d(struct hand_call *c)
{
    uint64_t v[8];
    PROTO_IF(args_count(c, 8) || arg_u64s(c, 8, v));
    int refused = refuse_unknown(c, v[2], v[7], 0);
    if (refused)
        return refused;
    NEED(REAL(cudaMemcpy2DFromArrayAsync));
    msgpack_pack_array(c->out, 0);
    if ((!v[0] && v[5] && v[6]) || !owned_2d(v[0], v[1], v[5], v[6]))
        return cudaErrorInvalidValue;
    return REAL(cudaMemcpy2DFromArrayAsync)((void *)v[0], v[1], (cudaArray_const_t)v[2], v[3],
                                            v[4], v[5], v[6], cudaMemcpyDeviceToDevice,
                                            (cudaStream_t)v[7]);
}

static uint64_t format_bytes(const struct cudaChannelFormatDesc *f);

/* One layer of a cudaMemcpy3D between host bytes and an array: x and
 * width in bytes, which the array's element size turns into the elements
 * cudaMemcpy3D counts in. */
static int layer_3d(void *host, uint64_t array, uint64_t x, uint64_t y, uint64_t z,
                    uint64_t w, uint64_t h, int to_array, uint64_t stream)
{
    struct cudaChannelFormatDesc desc;
    struct cudaExtent ext;
    unsigned flags;
    int rc = REAL(cudaArrayGetInfo)(&desc, &ext, &flags, (cudaArray_t)array);
    if (rc != cudaSuccess)
        return rc;
    uint64_t elem = format_bytes(&desc);
    if (!elem || x % elem || w % elem)
        return cudaErrorInvalidValue;
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
    return sync_after(stream, REAL(cudaMemcpy3DAsync)(&p, (cudaStream_t)stream));
}

#define NEED_3D() \
    NEED(REAL(cudaArrayGetInfo) && REAL(cudaMemcpy3DAsync) && REAL(cudaStreamSynchronize))

/* [array, x, y, z, width, height, stream, bin rows] -> [] */
static int h_htoa_3d(struct hand_call *c)
{
    uint64_t v[7];
    const void *rows;
    size_t n;
    PROTO_IF(args_count(c, 8) || arg_u64s(c, 7, v) || arg_bin(c, 7, &rows, &n));
    PROTO_IF((v[4] && v[5] > n / v[4]) || v[4] * v[5] != n);
    int refused = refuse_unknown(c, v[0], v[6], 0);
    if (refused)
        return refused;
    NEED_3D();
    msgpack_pack_array(c->out, 0);
    if (!n)
        return cudaSuccess;
    return layer_3d((void *)rows, v[0], v[1], v[2], v[3], v[4], v[5], 1, v[6]);
}

/* [array, x, y, z, width, height, stream] -> [bin rows] */
static int h_atoh_3d(struct hand_call *c)
{
    uint64_t v[7];
    PROTO_IF(args_count(c, 7) || arg_u64s(c, 7, v));
    if (v[4] && v[5] > (RGPU_FRAME_MAX - 4096) / v[4])
        return -RGPU_ETOOBIG;
    int refused = refuse_unknown(c, v[0], v[6], 1);
    if (refused)
        return refused;
    NEED_3D();
    size_t n = v[4] * v[5];
    void *buf = malloc(n ? n : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = n ? layer_3d(buf, v[0], v[1], v[2], v[3], v[4], v[5], 0, v[6]) : cudaSuccess;
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc == cudaSuccess ? n : 0);
    return rc;
}

/* ---- texture objects ------------------------------------------------------------ */

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

/* The resource descriptor from its wire form (RGPU_H_TEX_CREATE), every
 * array and device range checked: 0, or -1 when refused. */
static int resource_from_wire(const msgpack_object *o, struct cudaResourceDesc *r)
{
    uint64_t v[7];
    struct cudaChannelFormatDesc fmt;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 7 ||
        o->via.array.ptr[2].type != MSGPACK_OBJECT_BIN ||
        o->via.array.ptr[2].via.bin.size != sizeof fmt)
        return -1;
    for (unsigned i = 0; i < 7; i++) {
        if (i == 2)
            continue;
        if (o->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return -1;
        v[i] = o->via.array.ptr[i].via.u64;
    }
    memcpy(&fmt, o->via.array.ptr[2].via.bin.ptr, sizeof fmt);
    memset(r, 0, sizeof *r);
    r->resType = (enum cudaResourceType)v[0];
    uint64_t elem = format_bytes(&fmt);
    switch (v[0]) {
    case cudaResourceTypeArray:
        r->res.array.array = (cudaArray_t)v[1];
        return handles_contains(array_class(), v[1]) ? 0 : -1;
    case cudaResourceTypeLinear:
        r->res.linear.devPtr = (void *)v[1];
        r->res.linear.desc = fmt;
        r->res.linear.sizeInBytes = v[6];
        return v[1] && owned_range(v[1], v[6]) ? 0 : -1;
    case cudaResourceTypePitch2D:
        r->res.pitch2D.devPtr = (void *)v[1];
        r->res.pitch2D.desc = fmt;
        r->res.pitch2D.width = v[3];
        r->res.pitch2D.height = v[4];
        r->res.pitch2D.pitchInBytes = v[5];
        return v[1] && elem && v[3] <= UINT64_MAX / elem && owned_2d(v[1], v[5], v[3] * elem, v[4])
                   ? 0 : -1;
    default:
        return -1;
    }
}

static void pack_resource(msgpack_packer *pk, const struct cudaResourceDesc *r)
{
    uint64_t where = 0, w = 0, h = 0, pitch = 0, size = 0;
    struct cudaChannelFormatDesc fmt;
    memset(&fmt, 0, sizeof fmt);
    if (r->resType == cudaResourceTypeArray) {
        where = (uint64_t)(uintptr_t)r->res.array.array;
    } else if (r->resType == cudaResourceTypeLinear) {
        where = (uint64_t)(uintptr_t)r->res.linear.devPtr;
        fmt = r->res.linear.desc;
        size = r->res.linear.sizeInBytes;
    } else if (r->resType == cudaResourceTypePitch2D) {
        where = (uint64_t)(uintptr_t)r->res.pitch2D.devPtr;
        fmt = r->res.pitch2D.desc;
        w = r->res.pitch2D.width;
        h = r->res.pitch2D.height;
        pitch = r->res.pitch2D.pitchInBytes;
    }
    msgpack_pack_array(pk, 7);
    msgpack_pack_uint64(pk, (uint64_t)r->resType);
    msgpack_pack_uint64(pk, where);
    msgpack_pack_bin(pk, sizeof fmt);
    msgpack_pack_bin_body(pk, &fmt, sizeof fmt);
    msgpack_pack_uint64(pk, w);
    msgpack_pack_uint64(pk, h);
    msgpack_pack_uint64(pk, pitch);
    msgpack_pack_uint64(pk, size);
}

/* [resource, bin texture descriptor, bin view descriptor or nil] -> [object] */
static int h_tex_create(struct hand_call *c)
{
    struct cudaResourceDesc res;
    struct cudaTextureDesc tex;
    struct cudaResourceViewDesc view;
    const void *p;
    size_t n;
    PROTO_IF(args_count(c, 3) || arg_bin(c, 1, &p, &n) || n != sizeof tex);
    memcpy(&tex, p, sizeof tex);
    const msgpack_object *view_arg = &c->args->via.array.ptr[2];
    int has_view = view_arg->type != MSGPACK_OBJECT_NIL;
    if (has_view) {
        PROTO_IF(arg_bin(c, 2, &p, &n) || n != sizeof view);
        memcpy(&view, p, sizeof view);
    }
    NEED(REAL(cudaCreateTextureObject));
    msgpack_pack_array(c->out, 1);
    if (resource_from_wire(&c->args->via.array.ptr[0], &res) != 0) {
        msgpack_pack_nil(c->out);
        return cudaErrorInvalidValue;
    }
    cudaTextureObject_t obj = 0;
    int rc = REAL(cudaCreateTextureObject)(&obj, &res, &tex, has_view ? &view : NULL);
    if (rc == cudaSuccess && obj)
        handles_add(texture_class(), obj);
    msgpack_pack_uint64(c->out, rc == cudaSuccess ? obj : 0);
    return rc;
}

/* [object] -> [] */
static int h_tex_destroy(struct hand_call *c)
{
    uint64_t obj;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &obj));
    if (!handles_contains(texture_class(), obj))
        return hand_refuse_handle(c, 0, "texture object", cudaErrorInvalidValue);
    NEED(REAL(cudaDestroyTextureObject));
    int rc = REAL(cudaDestroyTextureObject)(obj);
    if (rc == cudaSuccess)
        handles_remove(texture_class(), obj);
    msgpack_pack_array(c->out, 0);
    return rc;
}

/* The texture object's resource descriptor, in its wire form. */
static int query_resource(struct hand_call *c, uint64_t obj)
{
    struct cudaResourceDesc res;
    NEED(REAL(cudaGetTextureObjectResourceDesc));
    int rc = REAL(cudaGetTextureObjectResourceDesc)(&res, obj);
    msgpack_pack_array(c->out, 1);
    if (rc == cudaSuccess)
        pack_resource(c->out, &res);
    else
        msgpack_pack_nil(c->out);
    return rc;
}

/* The texture or view descriptor, as its bytes (neither holds a pointer). */
static int query_bytes(struct hand_call *c, uint64_t obj, uint64_t which)
{
    __typeof__(&cudaGetTextureObjectTextureDesc) tex_fn = REAL(cudaGetTextureObjectTextureDesc);
    __typeof__(&cudaGetTextureObjectResourceViewDesc) view_fn =
        REAL(cudaGetTextureObjectResourceViewDesc);
    int is_tex = which == RGPU_TEX_QUERY_TEXTURE;
    size_t n = is_tex ? sizeof(struct cudaTextureDesc) : sizeof(struct cudaResourceViewDesc);
    NEED(is_tex ? (void *)tex_fn : (void *)view_fn);
    void *buf = calloc(1, n);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = is_tex ? tex_fn(buf, obj) : view_fn(buf, obj);
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc == cudaSuccess ? n : 0);
    return rc;
}

/* [object, which] -> [descriptor] */
static int h_tex_query(struct hand_call *c)
{
    uint64_t obj, which;
    PROTO_IF(args_count(c, 2) || arg_u64(c, 0, &obj) || arg_u64(c, 1, &which) ||
             which > RGPU_TEX_QUERY_VIEW);
    if (!handles_contains(texture_class(), obj))
        return hand_refuse_handle(c, 1, "texture object", cudaErrorInvalidValue);
    return which == RGPU_TEX_QUERY_RESOURCE ? query_resource(c, obj) : query_bytes(c, obj, which);
}

/* ---- the driver's: copies layer by layer, texture objects -------------------- */

#define REAL_CU(name) ((__typeof__(&name))backend_sym("cuda", #name))

static uint32_t cu_array_class(void) { return rgpu_handle_class("CUarray_st"); }

static int cu_refuse_unknown(struct hand_call *c, uint64_t array, uint64_t stream, unsigned nouts)
{
    if (!handles_contains(cu_array_class(), array))
        return hand_refuse_handle(c, nouts, "CUDA array", CUDA_ERROR_INVALID_HANDLE);
    if (!handles_valid(H_STREAM, stream))
        return hand_refuse_handle(c, nouts, "stream", CUDA_ERROR_INVALID_HANDLE);
    return 0;
}

/* One layer between linear memory (host or device) and an array, on
 * stream; to_array picks the direction. */
static int cu_copy_layer(const void *host, uint64_t dev, uint64_t pitch, uint64_t array,
                         uint64_t x, uint64_t y, uint64_t z, uint64_t w, uint64_t h,
                         int to_array, uint64_t stream)
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
        p.dstArray = (CUarray)array;
        p.dstXInBytes = x;
        p.dstY = y;
        p.dstZ = z;
    } else {
        p.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        p.srcArray = (CUarray)array;
        p.srcXInBytes = x;
        p.srcY = y;
        p.srcZ = z;
        p.dstMemoryType = lin;
        p.dstHost = (void *)host;
        p.dstDevice = dev;
        p.dstPitch = pitch;
        p.dstHeight = h;
    }
    p.WidthInBytes = w;
    p.Height = h;
    p.Depth = 1;
    int rc = REAL_CU(cuMemcpy3DAsync_v2)(&p, (CUstream)stream);
    if (rc == CUDA_SUCCESS && host)     /* the host bytes are the request's or the reply's */
        rc = REAL_CU(cuStreamSynchronize)((CUstream)stream);
    return rc;
}

#define NEED_CU_COPY() NEED(REAL_CU(cuMemcpy3DAsync_v2) && REAL_CU(cuStreamSynchronize))

/* [array, x, y, z, width, height, stream, bin rows] -> [] */
static int h_cu_htoa(struct hand_call *c)
{
    uint64_t v[7];
    const void *rows;
    size_t n;
    PROTO_IF(args_count(c, 8) || arg_u64s(c, 7, v) || arg_bin(c, 7, &rows, &n));
    PROTO_IF((v[4] && v[5] > n / v[4]) || v[4] * v[5] != n);
    int refused = cu_refuse_unknown(c, v[0], v[6], 0);
    if (refused)
        return refused;
    NEED_CU_COPY();
    msgpack_pack_array(c->out, 0);
    if (!n)
        return CUDA_SUCCESS;
    return cu_copy_layer(rows, 0, v[4], v[0], v[1], v[2], v[3], v[4], v[5], 1, v[6]);
}

/* [array, x, y, z, width, height, stream] -> [bin rows] */
static int h_cu_atoh(struct hand_call *c)
{
    uint64_t v[7];
    PROTO_IF(args_count(c, 7) || arg_u64s(c, 7, v));
    if (v[4] && v[5] > (RGPU_FRAME_MAX - 4096) / v[4])
        return -RGPU_ETOOBIG;
    int refused = cu_refuse_unknown(c, v[0], v[6], 1);
    if (refused)
        return refused;
    NEED_CU_COPY();
    size_t n = v[4] * v[5];
    void *buf = malloc(n ? n : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = n ? cu_copy_layer(buf, 0, v[4], v[0], v[1], v[2], v[3], v[4], v[5], 0, v[6])
               : CUDA_SUCCESS;
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc == CUDA_SUCCESS ? n : 0);
    return rc;
}

/* [dev, pitch, array, x, y, z, width, height, stream] -> []: to_array picks
 * the direction. */
static int cu_device_array(struct hand_call *c, int to_array)
{
    uint64_t v[9];
    PROTO_IF(args_count(c, 9) || arg_u64s(c, 9, v));
    int refused = cu_refuse_unknown(c, v[2], v[8], 0);
    if (refused)
        return refused;
    NEED_CU_COPY();
    msgpack_pack_array(c->out, 0);
    if (!v[6] || !v[7])
        return CUDA_SUCCESS;
    if (!v[0] || !owned_2d(v[0], v[1], v[6], v[7]))
        return CUDA_ERROR_INVALID_VALUE;
    return cu_copy_layer(NULL, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], to_array, v[8]);
}

static int h_cu_dtoa(struct hand_call *c) { return cu_device_array(c, 1); }
static int h_cu_atod(struct hand_call *c) { return cu_device_array(c, 0); }

static uint64_t cu_format_bytes(uint64_t f)
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

/* The driver's resource descriptor from its wire form, checked: 0 or -1. */
static int cu_resource_from_wire(const msgpack_object *o, CUDA_RESOURCE_DESC *r)
{
    uint64_t v[9];
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 9)
        return -1;
    for (unsigned i = 0; i < 9; i++) {
        if (o->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return -1;
        v[i] = o->via.array.ptr[i].via.u64;
    }
    memset(r, 0, sizeof *r);
    r->resType = (CUresourcetype)v[0];
    r->flags = (unsigned)v[8];
    uint64_t elem = cu_format_bytes(v[2]) * (v[3] <= 4 ? v[3] : 0);
    switch (v[0]) {
    case CU_RESOURCE_TYPE_ARRAY:
        r->res.array.hArray = (CUarray)v[1];
        return handles_contains(cu_array_class(), v[1]) ? 0 : -1;
    case CU_RESOURCE_TYPE_LINEAR:
        r->res.linear.devPtr = v[1];
        r->res.linear.format = (CUarray_format)v[2];
        r->res.linear.numChannels = (unsigned)v[3];
        r->res.linear.sizeInBytes = v[7];
        return v[1] && owned_range(v[1], v[7]) ? 0 : -1;
    case CU_RESOURCE_TYPE_PITCH2D:
        r->res.pitch2D.devPtr = v[1];
        r->res.pitch2D.format = (CUarray_format)v[2];
        r->res.pitch2D.numChannels = (unsigned)v[3];
        r->res.pitch2D.width = v[4];
        r->res.pitch2D.height = v[5];
        r->res.pitch2D.pitchInBytes = v[6];
        return v[1] && elem && v[4] <= UINT64_MAX / elem && owned_2d(v[1], v[6], v[4] * elem, v[5])
                   ? 0 : -1;
    default:
        return -1;
    }
}

static void cu_pack_resource(msgpack_packer *pk, const CUDA_RESOURCE_DESC *r)
{
    uint64_t v[9] = { (uint64_t)r->resType, 0, 0, 0, 0, 0, 0, 0, r->flags };
    if (r->resType == CU_RESOURCE_TYPE_ARRAY) {
        v[1] = (uint64_t)(uintptr_t)r->res.array.hArray;
    } else if (r->resType == CU_RESOURCE_TYPE_LINEAR) {
        v[1] = r->res.linear.devPtr;
        v[2] = (uint64_t)r->res.linear.format;
        v[3] = r->res.linear.numChannels;
        v[7] = r->res.linear.sizeInBytes;
    } else if (r->resType == CU_RESOURCE_TYPE_PITCH2D) {
        v[1] = r->res.pitch2D.devPtr;
        v[2] = (uint64_t)r->res.pitch2D.format;
        v[3] = r->res.pitch2D.numChannels;
        v[4] = r->res.pitch2D.width;
        v[5] = r->res.pitch2D.height;
        v[6] = r->res.pitch2D.pitchInBytes;
    }
    msgpack_pack_array(pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_uint64(pk, v[i]);
}

/* [resource, bin texture descriptor, bin view descriptor or nil] -> [object] */
static int h_cu_tex_create(struct hand_call *c)
{
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    CUDA_RESOURCE_VIEW_DESC view;
    const void *p;
    size_t n;
    PROTO_IF(args_count(c, 3) || arg_bin(c, 1, &p, &n) || n != sizeof tex);
    memcpy(&tex, p, sizeof tex);
    int has_view = c->args->via.array.ptr[2].type != MSGPACK_OBJECT_NIL;
    if (has_view) {
        PROTO_IF(arg_bin(c, 2, &p, &n) || n != sizeof view);
        memcpy(&view, p, sizeof view);
    }
    NEED(REAL_CU(cuTexObjectCreate));
    msgpack_pack_array(c->out, 1);
    if (cu_resource_from_wire(&c->args->via.array.ptr[0], &res) != 0) {
        msgpack_pack_nil(c->out);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUtexObject obj = 0;
    int rc = REAL_CU(cuTexObjectCreate)(&obj, &res, &tex, has_view ? &view : NULL);
    if (rc == CUDA_SUCCESS && obj)
        handles_add(texture_class(), obj);
    msgpack_pack_uint64(c->out, rc == CUDA_SUCCESS ? obj : 0);
    return rc;
}

/* [object] -> [] */
static int h_cu_tex_destroy(struct hand_call *c)
{
    uint64_t obj;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &obj));
    if (!handles_contains(texture_class(), obj))
        return hand_refuse_handle(c, 0, "texture object", CUDA_ERROR_INVALID_VALUE);
    NEED(REAL_CU(cuTexObjectDestroy));
    int rc = REAL_CU(cuTexObjectDestroy)(obj);
    if (rc == CUDA_SUCCESS)
        handles_remove(texture_class(), obj);
    msgpack_pack_array(c->out, 0);
    return rc;
}

/* [object, which] -> [descriptor] */
static int h_cu_tex_query(struct hand_call *c)
{
    uint64_t obj, which;
    PROTO_IF(args_count(c, 2) || arg_u64(c, 0, &obj) || arg_u64(c, 1, &which) ||
             which > RGPU_TEX_QUERY_VIEW);
    if (!handles_contains(texture_class(), obj))
        return hand_refuse_handle(c, 1, "texture object", CUDA_ERROR_INVALID_VALUE);
    if (which == RGPU_TEX_QUERY_RESOURCE) {
        CUDA_RESOURCE_DESC res;
        NEED(REAL_CU(cuTexObjectGetResourceDesc));
        int rc = REAL_CU(cuTexObjectGetResourceDesc)(&res, obj);
        msgpack_pack_array(c->out, 1);
        if (rc == CUDA_SUCCESS)
            cu_pack_resource(c->out, &res);
        else
            msgpack_pack_nil(c->out);
        return rc;
    }
    __typeof__(&cuTexObjectGetTextureDesc) tex_fn = REAL_CU(cuTexObjectGetTextureDesc);
    __typeof__(&cuTexObjectGetResourceViewDesc) view_fn = REAL_CU(cuTexObjectGetResourceViewDesc);
    int is_tex = which == RGPU_TEX_QUERY_TEXTURE;
    size_t n = is_tex ? sizeof(CUDA_TEXTURE_DESC) : sizeof(CUDA_RESOURCE_VIEW_DESC);
    NEED(is_tex ? (void *)tex_fn : (void *)view_fn);
    void *buf = calloc(1, n);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = is_tex ? tex_fn(buf, obj) : view_fn(buf, obj);
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc == CUDA_SUCCESS ? n : 0);
    return rc;
}

/* ---- surface objects (runtime and driver) ------------------------------------- */

static uint32_t surface_class(void) { return rgpu_handle_class("rgpu.surface object"); }

/* [resource] -> [object] */
static int h_surf_create(struct hand_call *c)
{
    struct cudaResourceDesc res;
    PROTO_IF(args_count(c, 1));
    NEED(REAL(cudaCreateSurfaceObject));
    msgpack_pack_array(c->out, 1);
    if (resource_from_wire(&c->args->via.array.ptr[0], &res) != 0) {
        msgpack_pack_nil(c->out);
        return cudaErrorInvalidValue;
    }
    cudaSurfaceObject_t obj = 0;
    int rc = REAL(cudaCreateSurfaceObject)(&obj, &res);
    if (rc == cudaSuccess && obj)
        handles_add(surface_class(), obj);
    msgpack_pack_uint64(c->out, rc == cudaSuccess ? obj : 0);
    return rc;
}

static int h_cu_surf_create(struct hand_call *c)
{
    CUDA_RESOURCE_DESC res;
    PROTO_IF(args_count(c, 1));
    NEED(REAL_CU(cuSurfObjectCreate));
    msgpack_pack_array(c->out, 1);
    if (cu_resource_from_wire(&c->args->via.array.ptr[0], &res) != 0) {
        msgpack_pack_nil(c->out);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUsurfObject obj = 0;
    int rc = REAL_CU(cuSurfObjectCreate)(&obj, &res);
    if (rc == CUDA_SUCCESS && obj)
        handles_add(surface_class(), obj);
    msgpack_pack_uint64(c->out, rc == CUDA_SUCCESS ? obj : 0);
    return rc;
}

/* [object] -> []; the status codes of both APIs are the same numbers. */
static int surf_destroy(struct hand_call *c, int (*destroy)(uint64_t))
{
    uint64_t obj;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &obj));
    if (!handles_contains(surface_class(), obj))
        return hand_refuse_handle(c, 0, "surface object", cudaErrorInvalidValue);
    int rc = destroy(obj);
    if (rc == cudaSuccess)
        handles_remove(surface_class(), obj);
    msgpack_pack_array(c->out, 0);
    return rc;
}

static int rt_surf_destroy(uint64_t obj) { return REAL(cudaDestroySurfaceObject)(obj); }
static int cu_surf_destroy(uint64_t obj) { return REAL_CU(cuSurfObjectDestroy)(obj); }

static int h_surf_destroy(struct hand_call *c)
{
    NEED(REAL(cudaDestroySurfaceObject));
    return surf_destroy(c, rt_surf_destroy);
}

static int h_cu_surf_destroy(struct hand_call *c)
{
    NEED(REAL_CU(cuSurfObjectDestroy));
    return surf_destroy(c, cu_surf_destroy);
}

/* [object] -> [resource] */
static int h_surf_query(struct hand_call *c)
{
    uint64_t obj;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &obj));
    if (!handles_contains(surface_class(), obj))
        return hand_refuse_handle(c, 1, "surface object", cudaErrorInvalidValue);
    NEED(REAL(cudaGetSurfaceObjectResourceDesc));
    struct cudaResourceDesc res;
    int rc = REAL(cudaGetSurfaceObjectResourceDesc)(&res, obj);
    msgpack_pack_array(c->out, 1);
    if (rc == cudaSuccess)
        pack_resource(c->out, &res);
    else
        msgpack_pack_nil(c->out);
    return rc;
}

static int h_cu_surf_query(struct hand_call *c)
{
    uint64_t obj;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &obj));
    if (!handles_contains(surface_class(), obj))
        return hand_refuse_handle(c, 1, "surface object", CUDA_ERROR_INVALID_VALUE);
    NEED(REAL_CU(cuSurfObjectGetResourceDesc));
    CUDA_RESOURCE_DESC res;
    int rc = REAL_CU(cuSurfObjectGetResourceDesc)(&res, obj);
    msgpack_pack_array(c->out, 1);
    if (rc == CUDA_SUCCESS)
        cu_pack_resource(c->out, &res);
    else
        msgpack_pack_nil(c->out);
    return rc;
}

const struct hand_proc hand_array_procs[] = {
    { "cudart", RGPU_H_HTOA_2D, h_htoa_2d },
    { "cudart", RGPU_H_ATOH_2D, h_atoh_2d },
    { "cudart", RGPU_H_DTOA_2D, h_dtoa_2d },
    { "cudart", RGPU_H_ATOD_2D, h_atod_2d },
    { "cudart", RGPU_H_HTOA_3D, h_htoa_3d },
    { "cudart", RGPU_H_ATOH_3D, h_atoh_3d },
    { "cudart", RGPU_H_TEX_CREATE, h_tex_create },
    { "cudart", RGPU_H_TEX_DESTROY, h_tex_destroy },
    { "cudart", RGPU_H_TEX_QUERY, h_tex_query },
    { "cudart", RGPU_H_SURF_CREATE, h_surf_create },
    { "cudart", RGPU_H_SURF_DESTROY, h_surf_destroy },
    { "cudart", RGPU_H_SURF_QUERY, h_surf_query },
    { "cuda", RGPU_H_CU_SURF_CREATE, h_cu_surf_create },
    { "cuda", RGPU_H_CU_SURF_DESTROY, h_cu_surf_destroy },
    { "cuda", RGPU_H_CU_SURF_QUERY, h_cu_surf_query },
    { "cuda", RGPU_H_CU_HTOA, h_cu_htoa },
    { "cuda", RGPU_H_CU_ATOH, h_cu_atoh },
    { "cuda", RGPU_H_CU_DTOA, h_cu_dtoa },
    { "cuda", RGPU_H_CU_ATOD, h_cu_atod },
    { "cuda", RGPU_H_CU_TEX_CREATE, h_cu_tex_create },
    { "cuda", RGPU_H_CU_TEX_DESTROY, h_cu_tex_destroy },
    { "cuda", RGPU_H_CU_TEX_QUERY, h_cu_tex_query },
};
const int hand_array_nprocs = sizeof hand_array_procs / sizeof hand_array_procs[0];
