/* CUDA arrays and texture objects in the driver stub: copies with an array
 * side (cuMemcpy2D's, and cuMemcpy3D's layer by layer) and texture
 * objects.  The static CUDA runtime makes its array copies and texture
 * objects through these.  Arrays live in the server (cuArrayCreate_v2 and
 * the rest are generated, their handles checked by the session's table);
 * host rows travel packed, device ranges are checked by the server.  A
 * texture object's resource descriptor holds an array handle or a device
 * pointer in a union, so it travels field by field.  Server side:
 * daemon/hand_arrays.c; argument lists: common/rgpu_hand_procs.h. */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "client_ranges.h"
#include "cuda_arrays.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

static uint64_t u64(const void *p) { return (uint64_t)(uintptr_t)p; }

/* The side of a copy that is not the array: its address and whether it is
 * device memory. */
static int linear_side(CUmemorytype type, const void *host, CUdeviceptr dev, uint64_t *addr,
                       int *device)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *addr = u64(host);
        *device = 0;
        return 0;
    case CU_MEMORYTYPE_DEVICE:
        *addr = dev;
        *device = 1;
        return 0;
    case CU_MEMORYTYPE_UNIFIED:
        *addr = dev;
        *device = rgpu_ranges_find(dev, NULL, NULL) == RGPU_RANGE_DEVICE;
        return 0;
    default:
        return -1;
    }
}

static CUresult host_to_array(const CUDA_MEMCPY2D *c, size_t z, const char *src,
                              CUstream stream)
{
    size_t w = c->WidthInBytes, h = c->Height;
    if (w && h && !src)
        return CUDA_ERROR_INVALID_VALUE;
    char *rows = malloc(w * h + 1);
    if (!rows)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t r = 0; r < h; r++)
        memcpy(rows + r * w, src + (c->srcY + r) * c->srcPitch + c->srcXInBytes, w);
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_HTOA), 0);
    msgpack_pack_array(&req.pk, 8);
    msgpack_pack_uint64(&req.pk, u64(c->dstArray));
    msgpack_pack_uint64(&req.pk, c->dstXInBytes);
    msgpack_pack_uint64(&req.pk, c->dstY);
    msgpack_pack_uint64(&req.pk, z);
    msgpack_pack_uint64(&req.pk, w);
    msgpack_pack_uint64(&req.pk, h);
    msgpack_pack_uint64(&req.pk, u64(stream));
    rgpu_req_payload(&req, rows, w * h);
    int rc = rgpu_req_status(LIB, "cuMemcpy to a CUDA array", &req);
    free(rows);
    return (CUresult)rc;
}

static CUresult array_to_host(const CUDA_MEMCPY2D *c, size_t z, char *dst, CUstream stream)
{
    static const char what[] = "cuMemcpy from a CUDA array";
    size_t w = c->WidthInBytes, h = c->Height;
    if (w && h && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    struct rgpu_req req;
    struct rgpu_reply reply;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_ATOH), 0);
    msgpack_pack_array(&req.pk, 7);
    msgpack_pack_uint64(&req.pk, u64(c->srcArray));
    msgpack_pack_uint64(&req.pk, c->srcXInBytes);
    msgpack_pack_uint64(&req.pk, c->srcY);
    msgpack_pack_uint64(&req.pk, z);
    msgpack_pack_uint64(&req.pk, w);
    msgpack_pack_uint64(&req.pk, h);
    msgpack_pack_uint64(&req.pk, u64(stream));
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    const msgpack_object *o = rgpu_reply_bin(&reply, 0);
    if (rc == 0 && o && o->via.bin.size == w * h) {
        for (size_t r = 0; r < h; r++)
            memcpy(dst + (c->dstY + r) * c->dstPitch + c->dstXInBytes, o->via.bin.ptr + r * w, w);
    } else if (rc == 0) {
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    }
    rgpu_reply_free(&reply);
    if (rc == 0 && rgpu_mapped_active())
        rgpu_mapped_after_sync();       /* a copy to the host waits, as a synchronize */
    return (CUresult)rc;
}

/* Device memory and an array: [device address, pitch, array, x, y, z,
 * width, height, stream]; the device side's offsets folded into its
 * address. */
static CUresult device_and_array(uint64_t dev, size_t pitch, CUarray array, size_t x, size_t y,
                                 size_t z, const CUDA_MEMCPY2D *c, int to_array, CUstream stream)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", to_array ? RGPU_H_CU_DTOA : RGPU_H_CU_ATOD), 0);
    msgpack_pack_array(&req.pk, 9);
    msgpack_pack_uint64(&req.pk, dev);
    msgpack_pack_uint64(&req.pk, pitch);
    msgpack_pack_uint64(&req.pk, u64(array));
    msgpack_pack_uint64(&req.pk, x);
    msgpack_pack_uint64(&req.pk, y);
    msgpack_pack_uint64(&req.pk, z);
    msgpack_pack_uint64(&req.pk, c->WidthInBytes);
    msgpack_pack_uint64(&req.pk, c->Height);
    msgpack_pack_uint64(&req.pk, u64(stream));
    return (CUresult)rgpu_req_status(LIB, "cuMemcpy between device memory and a CUDA array",
                                     &req);
}

CUresult rgpu_cuda_array_copy(const CUDA_MEMCPY2D *c, size_t src_z, size_t dst_z,
                              CUstream stream)
{
    int src_array = c->srcMemoryType == CU_MEMORYTYPE_ARRAY;
    int dst_array = c->dstMemoryType == CU_MEMORYTYPE_ARRAY;
    uint64_t addr;
    int device;

    if ((uint64_t)c->WidthInBytes * c->Height > RGPU_FRAME_MAX - 4096)
        return CUDA_ERROR_INVALID_VALUE;        /* TODO: split tall copies */
    if (src_array && dst_array) {
        static int logged;
        return (CUresult)rgpu_refused(LIB, "cuMemcpy between two CUDA arrays",
                                      "copies between CUDA arrays: not remoted yet", &logged);
    }
    if (dst_array) {
        if (linear_side(c->srcMemoryType, c->srcHost, c->srcDevice, &addr, &device))
            return CUDA_ERROR_INVALID_VALUE;
        if (!device)
            return host_to_array(c, dst_z, (const char *)(uintptr_t)addr, stream);
        return device_and_array(addr + c->srcY * c->srcPitch + c->srcXInBytes, c->srcPitch,
                                c->dstArray, c->dstXInBytes, c->dstY, dst_z, c, 1, stream);
    }
    if (linear_side(c->dstMemoryType, c->dstHost, c->dstDevice, &addr, &device))
        return CUDA_ERROR_INVALID_VALUE;
    if (!device)
        return array_to_host(c, src_z, (char *)(uintptr_t)addr, stream);
    return device_and_array(addr + c->dstY * c->dstPitch + c->dstXInBytes, c->dstPitch,
                            c->srcArray, c->srcXInBytes, c->srcY, src_z, c, 0, stream);
}

/* ---- 3D copies: layer by layer ------------------------------------------------ */

/* Layer z of a 3D copy as a 2D one: a linear side steps by its height
 * times its pitch, an array side by layer (the z the array copy takes). */
static CUDA_MEMCPY2D layer_of(const CUDA_MEMCPY3D *p, size_t z)
{
    size_t sstep = (p->srcZ + z) * p->srcHeight * p->srcPitch;
    size_t dstep = (p->dstZ + z) * p->dstHeight * p->dstPitch;
    int src_array = p->srcMemoryType == CU_MEMORYTYPE_ARRAY;
    int dst_array = p->dstMemoryType == CU_MEMORYTYPE_ARRAY;
    CUDA_MEMCPY2D c = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost && !src_array ? (const char *)p->srcHost + sstep : p->srcHost,
        .srcDevice = p->srcDevice && !src_array ? p->srcDevice + sstep : p->srcDevice,
        .srcArray = p->srcArray, .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost && !dst_array ? (char *)p->dstHost + dstep : p->dstHost,
        .dstDevice = p->dstDevice && !dst_array ? p->dstDevice + dstep : p->dstDevice,
        .dstArray = p->dstArray, .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height,
    };
    return c;
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream stream, int async)
{
    if (!p || p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    for (size_t z = 0; rc == CUDA_SUCCESS && z < p->Depth; z++) {
        CUDA_MEMCPY2D c = layer_of(p, z);
        if (c.srcMemoryType == CU_MEMORYTYPE_ARRAY || c.dstMemoryType == CU_MEMORYTYPE_ARRAY)
            rc = rgpu_cuda_array_copy(&c, p->srcZ + z, p->dstZ + z, stream);
        else
            rc = rgpu_cuda_copy_2d(&c, stream, async);
    }
    return rc;
}

#undef cuMemcpy3D
RGPU_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    return copy_3d(pCopy, NULL, 0);
}

#undef cuMemcpy3DAsync
RGPU_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return copy_3d(pCopy, hStream, 1);
}

/* ---- texture objects ------------------------------------------------------------ */

/* [type, array or device address, format, channels, width, height, pitch,
 * size, flags]: 9 elements. */
static void pack_resource(msgpack_packer *pk, const CUDA_RESOURCE_DESC *r)
{
    uint64_t v[9] = { (uint64_t)r->resType, 0, 0, 0, 0, 0, 0, 0, r->flags };
    if (r->resType == CU_RESOURCE_TYPE_ARRAY) {
        v[1] = u64(r->res.array.hArray);
    } else if (r->resType == CU_RESOURCE_TYPE_LINEAR) {
        v[1] = r->res.linear.devPtr;
        v[2] = (uint64_t)r->res.linear.format;
        v[3] = r->res.linear.numChannels;
        v[7] = r->res.linear.sizeInBytes;
    } else {
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

static int unpack_resource(const msgpack_object *o, CUDA_RESOURCE_DESC *r)
{
    uint64_t v[9];
    if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 9)
        return -1;
    for (int i = 0; i < 9; i++) {
        if (o->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return -1;
        v[i] = o->via.array.ptr[i].via.u64;
    }
    memset(r, 0, sizeof *r);
    r->resType = (CUresourcetype)v[0];
    r->flags = (unsigned)v[8];
    if (r->resType == CU_RESOURCE_TYPE_ARRAY) {
        r->res.array.hArray = (CUarray)(uintptr_t)v[1];
    } else if (r->resType == CU_RESOURCE_TYPE_LINEAR) {
        r->res.linear.devPtr = v[1];
        r->res.linear.format = (CUarray_format)v[2];
        r->res.linear.numChannels = (unsigned)v[3];
        r->res.linear.sizeInBytes = v[7];
    } else if (r->resType == CU_RESOURCE_TYPE_PITCH2D) {
        r->res.pitch2D.devPtr = v[1];
        r->res.pitch2D.format = (CUarray_format)v[2];
        r->res.pitch2D.numChannels = (unsigned)v[3];
        r->res.pitch2D.width = v[4];
        r->res.pitch2D.height = v[5];
        r->res.pitch2D.pitchInBytes = v[6];
    } else {
        return -1;
    }
    return 0;
}

RGPU_EXPORT CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                       const CUDA_TEXTURE_DESC *pTexDesc,
                                       const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    static const char what[] = "cuTexObjectCreate";
    struct rgpu_req req;
    struct rgpu_reply reply;

    if (!pTexObject || !pResDesc || !pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    if (pResDesc->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
        static int logged;
        return (CUresult)rgpu_refused(LIB, what, "textures on mipmapped arrays: not remoted yet",
                                      &logged);
    }
    if (pResDesc->resType != CU_RESOURCE_TYPE_ARRAY &&
        pResDesc->resType != CU_RESOURCE_TYPE_LINEAR &&
        pResDesc->resType != CU_RESOURCE_TYPE_PITCH2D)
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_TEX_CREATE), 0);
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
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS)
        *pTexObject = rgpu_reply_u64(&reply, 0);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

RGPU_EXPORT CUresult cuTexObjectDestroy(CUtexObject texObject)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_TEX_DESTROY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, texObject);
    return (CUresult)rgpu_req_status(LIB, "cuTexObjectDestroy", &req);
}

static int texture_query(CUtexObject t, unsigned which, const char *what,
                         struct rgpu_reply *reply)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_TEX_QUERY), 0);
    msgpack_pack_array(&req.pk, 2);
    msgpack_pack_uint64(&req.pk, t);
    msgpack_pack_uint64(&req.pk, which);
    int rc = rgpu_req_exchange(LIB, what, &req, reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, reply);
    if (rc != CUDA_SUCCESS)
        rgpu_reply_free(reply);
    return rc;
}

RGPU_EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc,
                                                CUtexObject texObject)
{
    static const char what[] = "cuTexObjectGetResourceDesc";
    struct rgpu_reply reply;
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    int rc = texture_query(texObject, RGPU_TEX_QUERY_RESOURCE, what, &reply);
    if (rc != CUDA_SUCCESS)
        return (CUresult)rc;
    if (unpack_resource(rgpu_reply_out(&reply, 0), pResDesc) != 0)
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

static CUresult texture_bytes(CUtexObject t, unsigned which, const char *what, void *out,
                              size_t size)
{
    struct rgpu_reply reply;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    int rc = texture_query(t, which, what, &reply);
    if (rc != CUDA_SUCCESS)
        return (CUresult)rc;
    const msgpack_object *o = rgpu_reply_bin(&reply, 0);
    if (o && o->via.bin.size == size)
        memcpy(out, o->via.bin.ptr, size);
    else
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

RGPU_EXPORT CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    return texture_bytes(texObject, RGPU_TEX_QUERY_TEXTURE, "cuTexObjectGetTextureDesc",
                         pTexDesc, sizeof *pTexDesc);
}

RGPU_EXPORT CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc,
                                                    CUtexObject texObject)
{
    return texture_bytes(texObject, RGPU_TEX_QUERY_VIEW, "cuTexObjectGetResourceViewDesc",
                         pResViewDesc, sizeof *pResViewDesc);
}

/* ---- surface objects: an array resource, as texture objects' ------------------- */

RGPU_EXPORT CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject,
                                        const CUDA_RESOURCE_DESC *pResDesc)
{
    static const char what[] = "cuSurfObjectCreate";
    struct rgpu_req req;
    struct rgpu_reply reply;

    if (!pSurfObject || !pResDesc || pResDesc->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_SURF_CREATE), 0);
    msgpack_pack_array(&req.pk, 1);
    pack_resource(&req.pk, pResDesc);
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS)
        *pSurfObject = rgpu_reply_u64(&reply, 0);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}

RGPU_EXPORT CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
    struct rgpu_req req;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_SURF_DESTROY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, surfObject);
    return (CUresult)rgpu_req_status(LIB, "cuSurfObjectDestroy", &req);
}

RGPU_EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc,
                                                 CUsurfObject surfObject)
{
    static const char what[] = "cuSurfObjectGetResourceDesc";
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_SURF_QUERY), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, surfObject);
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (CUresult)rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS && unpack_resource(rgpu_reply_out(&reply, 0), pResDesc) != 0)
        rc = rgpu_transport_status(LIB, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return (CUresult)rc;
}
