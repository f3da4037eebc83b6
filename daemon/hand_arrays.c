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

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

/* The runtime's array handles (cudaArray_t is struct cudaArray *), and the
 * session's own class for texture objects. */
static uint32_t array_class(void) { return rgpu_handle_class("cudaArray"); }
static uint32_t texture_class(void) { return rgpu_handle_class("rgpu.cudaTextureObject"); }

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

const struct hand_proc hand_array_procs[] = {
    { "cudart", RGPU_H_HTOA_2D, h_htoa_2d },
    { "cudart", RGPU_H_ATOH_2D, h_atoh_2d },
    { "cudart", RGPU_H_DTOA_2D, h_dtoa_2d },
    { "cudart", RGPU_H_ATOD_2D, h_atod_2d },
    { "cudart", RGPU_H_TEX_CREATE, h_tex_create },
    { "cudart", RGPU_H_TEX_DESTROY, h_tex_destroy },
    { "cudart", RGPU_H_TEX_QUERY, h_tex_query },
};
const int hand_array_nprocs = sizeof hand_array_procs / sizeof hand_array_procs[0];
