/* Hand-written CUDA array copies and texture objects of libcudart.
 *
 * Arrays live in the server: the client holds their handles and never
 * dereferences them (cudaMallocArray, cudaFreeArray and cudaArrayGetInfo
 * are generated; the session's handle table checks every array named).
 * A copy between host memory and an array moves the host rows packed, as
 * the 2D copies do; one between device memory and an array names the
 * device range, which the server checks against the session's memory.
 * A texture object's resource descriptor holds an array handle or a
 * device pointer in a union, so it travels field by field; its texture
 * and view descriptors hold neither and travel as bytes.  Server side:
 * daemon/hand_arrays.c; argument lists: common/rgpu_hand_procs.h. */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "client_ranges.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

static uint64_t u64(const void *p) { return (uint64_t)(uintptr_t)p; }

static int is_device(const void *p)
{
    int kind = rgpu_ranges_find(u64(p), NULL, NULL);
    return kind == RGPU_RANGE_DEVICE || kind == RGPU_RANGE_MAPPED || kind == RGPU_RANGE_MANAGED;
}

/* Whether the side of a copy that is not the array is device memory. */
static int other_side_on_device(const void *p, enum cudaMemcpyKind kind, int is_src)
{
    if (kind == cudaMemcpyDefault)
        return is_device(p);
    return is_src ? kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost
                  : kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice;
}

/* ---- copies ------------------------------------------------------------------ */

static cudaError_t to_array(cudaArray_t dst, size_t x, size_t y, const void *src, size_t spitch,
                            size_t width, size_t height, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    static const char what[] = "cudaMemcpy2DToArray";
    struct rgpu_req req;

    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    if (width > spitch)
        return RESULT(cudaErrorInvalidPitchValue);
    if ((uint64_t)width * height > RGPU_FRAME_MAX - 4096)
        return RESULT(cudaErrorInvalidValue);   /* TODO: split tall copies */
    if (other_side_on_device(src, kind, 1)) {
        rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_DTOA_2D), 0);
        msgpack_pack_array(&req.pk, 8);
        msgpack_pack_uint64(&req.pk, u64(dst));
        msgpack_pack_uint64(&req.pk, x);
        msgpack_pack_uint64(&req.pk, y);
        msgpack_pack_uint64(&req.pk, u64(src));
        msgpack_pack_uint64(&req.pk, spitch);
        msgpack_pack_uint64(&req.pk, width);
        msgpack_pack_uint64(&req.pk, height);
        msgpack_pack_uint64(&req.pk, u64(stream));
        return rgpu_req_status(LIB, what, &req);
    }
    if (width && height && !src)
        return RESULT(cudaErrorInvalidValue);
    char *rows = malloc(width * height + 1);
    if (!rows)
        return RESULT(cudaErrorMemoryAllocation);
    /* The rows travel packed; the server lays them into the array. */
    for (size_t r = 0; r < height; r++)
        memcpy(rows + r * width, (const char *)src + r * spitch, width);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_HTOA_2D), 0);
    msgpack_pack_array(&req.pk, 7);
    msgpack_pack_uint64(&req.pk, u64(dst));
    msgpack_pack_uint64(&req.pk, x);
    msgpack_pack_uint64(&req.pk, y);
    msgpack_pack_uint64(&req.pk, width);
    msgpack_pack_uint64(&req.pk, height);
    msgpack_pack_uint64(&req.pk, u64(stream));
    rgpu_req_payload(&req, rows, width * height);
    int rc = rgpu_req_status(LIB, what, &req);
    free(rows);
    return rc;
}

/* The reply's packed rows laid out at dpitch in dst. */
static int land_rows(struct rgpu_reply *reply, const char *what, char *dst, size_t dpitch,
                     size_t width, size_t height)
{
    int rc = rgpu_reply_status(LIB, reply);
    const msgpack_object *o = rgpu_reply_bin(reply, 0);
    if (rc == 0 && o && o->via.bin.size == width * height) {
        for (size_t r = 0; r < height; r++)
            memcpy(dst + r * dpitch, o->via.bin.ptr + r * width, width);
    } else if (rc == 0) {
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    }
    rgpu_reply_free(reply);
    if (rc == 0 && rgpu_mapped_active())
        rgpu_mapped_after_sync();       /* a copy to the host waits, as a synchronize */
    return rc;
}

static cudaError_t from_array(void *dst, size_t dpitch, cudaArray_const_t src, size_t x,
                              size_t y, size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    static const char what[] = "cudaMemcpy2DFromArray";
    struct rgpu_req req;
    struct rgpu_reply reply;

    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    if (width > dpitch)
        return RESULT(cudaErrorInvalidPitchValue);
    if ((uint64_t)width * height > RGPU_FRAME_MAX - 4096)
        return RESULT(cudaErrorInvalidValue);   /* TODO: split tall copies */
    if (other_side_on_device(dst, kind, 0)) {
        rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_ATOD_2D), 0);
        msgpack_pack_array(&req.pk, 8);
        msgpack_pack_uint64(&req.pk, u64(dst));
        msgpack_pack_uint64(&req.pk, dpitch);
        msgpack_pack_uint64(&req.pk, u64(src));
        msgpack_pack_uint64(&req.pk, x);
        msgpack_pack_uint64(&req.pk, y);
        msgpack_pack_uint64(&req.pk, width);
        msgpack_pack_uint64(&req.pk, height);
        msgpack_pack_uint64(&req.pk, u64(stream));
        return rgpu_req_status(LIB, what, &req);
    }
    if (width && height && !dst)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_ATOH_2D), 0);
    msgpack_pack_array(&req.pk, 6);
    msgpack_pack_uint64(&req.pk, u64(src));
    msgpack_pack_uint64(&req.pk, x);
    msgpack_pack_uint64(&req.pk, y);
    msgpack_pack_uint64(&req.pk, width);
    msgpack_pack_uint64(&req.pk, height);
    msgpack_pack_uint64(&req.pk, u64(stream));
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    return land_rows(&reply, what, dst, dpitch, width, height);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                            const void *src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind)
{
    return to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset,
                                                 size_t hOffset, const void *src, size_t spitch,
                                                 size_t width, size_t height,
                                                 enum cudaMemcpyKind kind)
{
    return to_array(dst, wOffset, hOffset, src, spitch, width, height, kind,
                    cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset,
                                                 size_t hOffset, const void *src, size_t spitch,
                                                 size_t width, size_t height,
                                                 enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset,
                                                      size_t hOffset, const void *src,
                                                      size_t spitch, size_t width,
                                                      size_t height, enum cudaMemcpyKind kind,
                                                      cudaStream_t stream)
{
    return to_array(dst, wOffset, hOffset, src, spitch, width, height, kind,
                    stream ? stream : cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src,
                                              size_t wOffset, size_t hOffset, size_t width,
                                              size_t height, enum cudaMemcpyKind kind)
{
    return from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DFromArray_ptds(void *dst, size_t dpitch,
                                                   cudaArray_const_t src, size_t wOffset,
                                                   size_t hOffset, size_t width, size_t height,
                                                   enum cudaMemcpyKind kind)
{
    return from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind,
                      cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch,
                                                   cudaArray_const_t src, size_t wOffset,
                                                   size_t hOffset, size_t width, size_t height,
                                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void *dst, size_t dpitch,
                                                        cudaArray_const_t src, size_t wOffset,
                                                        size_t hOffset, size_t width,
                                                        size_t height, enum cudaMemcpyKind kind,
                                                        cudaStream_t stream)
{
    return from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind,
                      stream ? stream : cudaStreamPerThread);
}

/* ---- 3D copies between host memory and an array, layer by layer -------------- */

/* Bytes per element of an array: 0 when it cannot be asked. */
static size_t array_element(cudaArray_const_t a)
{
    struct cudaChannelFormatDesc d;
    struct cudaExtent e;
    unsigned flags;
    if (cudaArrayGetInfo(&d, &e, &flags, (cudaArray_t)(uintptr_t)a) != cudaSuccess)
        return 0;
    int bits = d.x + d.y + d.z + d.w;
    return bits > 0 && bits % 8 == 0 ? (size_t)bits / 8 : 0;
}

/* One layer: rows of the host side at their pitch, packed on the wire. */
static cudaError_t layer_3d(cudaArray_const_t array, size_t x, size_t y, size_t z, char *host,
                            size_t pitch, size_t width, size_t height, int to_array,
                            cudaStream_t stream)
{
    static const char what[] = "cudaMemcpy3D";
    struct rgpu_req req;
    struct rgpu_reply reply;
    char *rows = NULL;
    if (to_array) {
        rows = malloc(width * height + 1);
        if (!rows)
            return RESULT(cudaErrorMemoryAllocation);
        for (size_t r = 0; r < height; r++)
            memcpy(rows + r * width, host + r * pitch, width);
    }
    rgpu_req_begin(&req, rgpu_proc_id("cudart", to_array ? RGPU_H_HTOA_3D : RGPU_H_ATOH_3D), 0);
    msgpack_pack_array(&req.pk, to_array ? 8 : 7);
    msgpack_pack_uint64(&req.pk, u64(array));
    msgpack_pack_uint64(&req.pk, x);
    msgpack_pack_uint64(&req.pk, y);
    msgpack_pack_uint64(&req.pk, z);
    msgpack_pack_uint64(&req.pk, width);
    msgpack_pack_uint64(&req.pk, height);
    msgpack_pack_uint64(&req.pk, u64(stream));
    if (to_array) {
        rgpu_req_payload(&req, rows, width * height);
        int rc = rgpu_req_status(LIB, what, &req);
        free(rows);
        return rc;
    }
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    return land_rows(&reply, what, host, pitch, width, height);
}

static cudaError_t memcpy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    static int logged;
    if (!p)
        return RESULT(cudaErrorInvalidValue);
    int to_array = p->dstArray != NULL;
    cudaArray_const_t array = to_array ? p->dstArray : p->srcArray;
    const struct cudaPitchedPtr *lin = to_array ? &p->srcPtr : &p->dstPtr;
    const struct cudaPos *apos = to_array ? &p->dstPos : &p->srcPos;
    const struct cudaPos *lpos = to_array ? &p->srcPos : &p->dstPos;
    if (!array || (p->srcArray && p->dstArray) ||
        other_side_on_device(lin->ptr, p->kind, to_array))
        return rgpu_refused(LIB, "cudaMemcpy3D",
                            "3D copies other than between host memory and an array: not "
                            "remoted yet", &logged);
    size_t elem = array_element(array);
    if (!elem)
        return RESULT(cudaErrorInvalidValue);
    size_t width = p->extent.width * elem, height = p->extent.height;
    if (width > lin->pitch || (uint64_t)width * height > RGPU_FRAME_MAX - 4096)
        return RESULT(cudaErrorInvalidValue);
    cudaError_t rc = cudaSuccess;
    for (size_t z = 0; rc == cudaSuccess && z < p->extent.depth; z++) {
        char *host = (char *)lin->ptr +
                     ((lpos->z + z) * lin->ysize + lpos->y) * lin->pitch + lpos->x;
        rc = layer_3d(array, apos->x * elem, apos->y, apos->z + z, host, lin->pitch, width,
                      height, to_array, stream);
    }
    return rc;
}

RGPU_EXPORT cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    return memcpy_3d(p, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
    return memcpy_3d(p, cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return memcpy_3d(p, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p,
                                               cudaStream_t stream)
{
    return memcpy_3d(p, stream ? stream : cudaStreamPerThread);
}

/* ---- texture objects ------------------------------------------------------------ */

/* The resource descriptor as [type, handle or device address, channel
 * format bytes, width, height, pitch, size]: 7 elements. */
static void pack_resource(msgpack_packer *pk, const struct cudaResourceDesc *r)
{
    uint64_t where = 0, w = 0, h = 0, pitch = 0, size = 0;
    const struct cudaChannelFormatDesc *fmt = NULL;

    switch (r->resType) {
    case cudaResourceTypeArray:
        where = u64(r->res.array.array);
        break;
    case cudaResourceTypeLinear:
        where = u64(r->res.linear.devPtr);
        fmt = &r->res.linear.desc;
        size = r->res.linear.sizeInBytes;
        break;
    case cudaResourceTypePitch2D:
        where = u64(r->res.pitch2D.devPtr);
        fmt = &r->res.pitch2D.desc;
        w = r->res.pitch2D.width;
        h = r->res.pitch2D.height;
        pitch = r->res.pitch2D.pitchInBytes;
        break;
    default:
        break;          /* refused before */
    }
    struct cudaChannelFormatDesc none;
    memset(&none, 0, sizeof none);
    msgpack_pack_array(pk, 7);
    msgpack_pack_uint64(pk, (uint64_t)r->resType);
    msgpack_pack_uint64(pk, where);
    msgpack_pack_bin(pk, sizeof none);
    msgpack_pack_bin_body(pk, fmt ? fmt : &none, sizeof none);
    msgpack_pack_uint64(pk, w);
    msgpack_pack_uint64(pk, h);
    msgpack_pack_uint64(pk, pitch);
    msgpack_pack_uint64(pk, size);
}

static uint64_t obj_u64(const msgpack_object *o, unsigned i)
{
    return o->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER
               ? o->via.array.ptr[i].via.u64 : 0;
}

/* The resource descriptor the server answered, as pack_resource packs it. */
static int unpack_resource(const msgpack_object *o, struct cudaResourceDesc *r)
{
    if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 7 ||
        o->via.array.ptr[2].type != MSGPACK_OBJECT_BIN ||
        o->via.array.ptr[2].via.bin.size != sizeof(struct cudaChannelFormatDesc))
        return -1;
    struct cudaChannelFormatDesc fmt;
    memcpy(&fmt, o->via.array.ptr[2].via.bin.ptr, sizeof fmt);
    memset(r, 0, sizeof *r);
    r->resType = (enum cudaResourceType)obj_u64(o, 0);
    uint64_t where = obj_u64(o, 1);
    switch (r->resType) {
    case cudaResourceTypeArray:
        r->res.array.array = (cudaArray_t)(uintptr_t)where;
        return 0;
    case cudaResourceTypeLinear:
        r->res.linear.devPtr = (void *)(uintptr_t)where;
        r->res.linear.desc = fmt;
        r->res.linear.sizeInBytes = obj_u64(o, 6);
        return 0;
    case cudaResourceTypePitch2D:
        r->res.pitch2D.devPtr = (void *)(uintptr_t)where;
        r->res.pitch2D.desc = fmt;
        r->res.pitch2D.width = obj_u64(o, 3);
        r->res.pitch2D.height = obj_u64(o, 4);
        r->res.pitch2D.pitchInBytes = obj_u64(o, 5);
        return 0;
    default:
        return -1;
    }
}

RGPU_EXPORT cudaError_t cudaCreateTextureObject(cudaTextureObject_t *pTexObject,
                                                const struct cudaResourceDesc *pResDesc,
                                                const struct cudaTextureDesc *pTexDesc,
                                                const struct cudaResourceViewDesc *pResViewDesc)
{
    static const char what[] = "cudaCreateTextureObject";
    struct rgpu_req req;
    struct rgpu_reply reply;

    if (!pTexObject || !pResDesc || !pTexDesc)
        return RESULT(cudaErrorInvalidValue);
    if (pResDesc->resType == cudaResourceTypeMipmappedArray) {
        static int logged;
        return rgpu_refused(LIB, "cudaCreateTextureObject",
                            "textures on mipmapped arrays: not remoted yet", &logged);
    }
    if (pResDesc->resType != cudaResourceTypeArray &&
        pResDesc->resType != cudaResourceTypeLinear &&
        pResDesc->resType != cudaResourceTypePitch2D)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_TEX_CREATE), 0);
    msgpack_pack_array(&req.pk, 3);
    pack_resource(&req.pk, pResDesc);
    msgpack_pack_bin(&req.pk, sizeof *pTexDesc);
    msgpack_pack_bin_body(&req.pk, pTexDesc, sizeof *pTexDesc);
    if (pResViewDesc) {
        msgpack_pack_bin(&req.pk, sizeof *pResViewDesc);
        msgpack_pack_bin_body(&req.pk, pResViewDesc, sizeof *pResViewDesc);
    } else {
        msgpack_pack_nil(&req.pk);
    }
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess)
        *pTexObject = rgpu_reply_u64(&reply, 0);
    rgpu_reply_free(&reply);
    return rc;
}

RGPU_EXPORT cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_TEX_DESTROY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, texObject);
    return rgpu_req_status(LIB, "cudaDestroyTextureObject", &req);
}

/* One of a texture object's descriptors: [object, which] -> [descriptor]. */
static int texture_query(cudaTextureObject_t t, unsigned which, const char *what,
                         struct rgpu_reply *reply)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_TEX_QUERY), 0);
    msgpack_pack_array(&req.pk, 2);
    msgpack_pack_uint64(&req.pk, t);
    msgpack_pack_uint64(&req.pk, which);
    int rc = rgpu_req_exchange(LIB, what, &req, reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, reply);
    if (rc != cudaSuccess)
        rgpu_reply_free(reply);
    return rc;
}

RGPU_EXPORT cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                                         cudaTextureObject_t texObject)
{
    static const char what[] = "cudaGetTextureObjectResourceDesc";
    struct rgpu_reply reply;
    if (!pResDesc)
        return RESULT(cudaErrorInvalidValue);
    int rc = texture_query(texObject, RGPU_TEX_QUERY_RESOURCE, what, &reply);
    if (rc != cudaSuccess)
        return rc;
    if (unpack_resource(rgpu_reply_out(&reply, 0), pResDesc) != 0)
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return rc;
}

/* A descriptor that travels as its bytes. */
static cudaError_t texture_bytes(cudaTextureObject_t t, unsigned which, const char *what,
                                 void *out, size_t size)
{
    struct rgpu_reply reply;
    if (!out)
        return RESULT(cudaErrorInvalidValue);
    int rc = texture_query(t, which, what, &reply);
    if (rc != cudaSuccess)
        return rc;
    const msgpack_object *o = rgpu_reply_bin(&reply, 0);
    if (o && o->via.bin.size == size)
        memcpy(out, o->via.bin.ptr, size);
    else
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return rc;
}

RGPU_EXPORT cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *pTexDesc,
                                                        cudaTextureObject_t texObject)
{
    return texture_bytes(texObject, RGPU_TEX_QUERY_TEXTURE, "cudaGetTextureObjectTextureDesc",
                         pTexDesc, sizeof *pTexDesc);
}

RGPU_EXPORT cudaError_t cudaGetTextureObjectResourceViewDesc(
    struct cudaResourceViewDesc *pResViewDesc, cudaTextureObject_t texObject)
{
    return texture_bytes(texObject, RGPU_TEX_QUERY_VIEW, "cudaGetTextureObjectResourceViewDesc",
                         pResViewDesc, sizeof *pResViewDesc);
}

/* ---- surface objects: an array resource, as texture objects' ------------------- */

RGPU_EXPORT cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *pSurfObject,
                                                const struct cudaResourceDesc *pResDesc)
{
    static const char what[] = "cudaCreateSurfaceObject";
    struct rgpu_req req;
    struct rgpu_reply reply;

    if (!pSurfObject || !pResDesc || pResDesc->resType != cudaResourceTypeArray)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_SURF_CREATE), 0);
    msgpack_pack_array(&req.pk, 1);
    pack_resource(&req.pk, pResDesc);
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess)
        *pSurfObject = rgpu_reply_u64(&reply, 0);
    rgpu_reply_free(&reply);
    return rc;
}

RGPU_EXPORT cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_SURF_DESTROY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, surfObject);
    return rgpu_req_status(LIB, "cudaDestroySurfaceObject", &req);
}

RGPU_EXPORT cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                                         cudaSurfaceObject_t surfObject)
{
    static const char what[] = "cudaGetSurfaceObjectResourceDesc";
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!pResDesc)
        return RESULT(cudaErrorInvalidValue);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_SURF_QUERY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, surfObject);
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == cudaSuccess && unpack_resource(rgpu_reply_out(&reply, 0), pResDesc) != 0)
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return rc;
}
