/* CUDA arrays in the driver stub: copies with an array side (cuMemcpy2D's,
 * and cuMemcpy3D's layer by layer), which the static CUDA runtime makes
 * its array copies through.  Arrays live in the server (cuArrayCreate_v2,
 * texture and surface objects and the rest are generated, their handles
 * checked by the session's table); host rows travel packed in bands of a
 * copy chunk, device ranges are checked by the server.  The requests are
 * rgpu's own procedures (codegen/cuda_own.h); server side
 * daemon/hand_arrays.c. */
#include "rgpu_client.h"
#include "rgpu_proto.h"
#include "client_ranges.h"
#include "cuda_arrays.h"
#include "cuda_own.h"
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

/* Rows per request of a copy between host memory and an array: tall
 * copies go in bands of at most a copy chunk each. */
static size_t band_rows(size_t width, size_t height)
{
    size_t rows = width ? RGPU_COPY_CHUNK / width : height;
    return rows ? rows : 1;
}

/* Host memory and an array, band by band; host is the first byte of the
 * copy's host side, which steps by pitch per row. */
static CUresult host_and_array(CUarray array, size_t x, size_t y, size_t z, char *host,
                               size_t pitch, size_t w, size_t h, int to_array, CUstream stream)
{
    if (w && h && !host)
        return CUDA_ERROR_INVALID_VALUE;
    if (w > RGPU_COPY_CHUNK)
        return CUDA_ERROR_INVALID_VALUE;        /* a row larger than a frame */
    size_t step = band_rows(w, h);
    char *band = malloc(w * (step < h ? step : h) + 1);
    if (!band)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    size_t r = 0;
    do {            /* an empty copy still has its arguments checked */
        size_t rows = h - r < step ? h - r : step, n = w * rows;
        char *at = host ? host + r * pitch : NULL;
        if (to_array) {
            for (size_t i = 0; i < rows; i++)
                memcpy(band + i * w, at + i * pitch, w);
            rc = rgpu_cu_array_from_host(array, x, y + r, z, w, rows, stream, band, n);
        } else {
            rc = rgpu_cu_array_to_host(array, x, y + r, z, w, rows, stream, band, n);
            for (size_t i = 0; rc == CUDA_SUCCESS && i < rows; i++)
                memcpy(at + i * pitch, band + i * w, w);
        }
        r += step;
    } while (rc == CUDA_SUCCESS && r < h);
    free(band);
    if (rc == CUDA_SUCCESS && !to_array && rgpu_mapped_active())
        rgpu_mapped_after_sync();       /* a copy to the host waits, as a synchronize */
    return rc;
}

/* The first byte of a host side's copy: row y, byte x. */
static char *first_byte(uint64_t addr, size_t y, size_t pitch, size_t x)
{
    return addr ? (char *)(uintptr_t)addr + y * pitch + x : NULL;
}

CUresult rgpu_cuda_array_copy(const CUDA_MEMCPY2D *c, size_t src_z, size_t dst_z,
                              CUstream stream)
{
    int src_array = c->srcMemoryType == CU_MEMORYTYPE_ARRAY;
    int dst_array = c->dstMemoryType == CU_MEMORYTYPE_ARRAY;
    uint64_t addr;
    int device;

    if (src_array && dst_array)
        return rgpu_cu_array_to_array(c->dstArray, c->dstXInBytes, c->dstY, dst_z, c->srcArray,
                                      c->srcXInBytes, c->srcY, src_z, c->WidthInBytes, c->Height,
                                      stream);
    if (dst_array) {
        if (linear_side(c->srcMemoryType, c->srcHost, c->srcDevice, &addr, &device))
            return CUDA_ERROR_INVALID_VALUE;
        if (!device)
            return host_and_array(c->dstArray, c->dstXInBytes, c->dstY, dst_z,
                                  first_byte(addr, c->srcY, c->srcPitch, c->srcXInBytes),
                                  c->srcPitch, c->WidthInBytes, c->Height, 1, stream);
        return rgpu_cu_array_from_device(c->dstArray, c->dstXInBytes, c->dstY, dst_z,
                                         addr + c->srcY * c->srcPitch + c->srcXInBytes,
                                         c->srcPitch, c->WidthInBytes, c->Height, stream);
    }
    if (linear_side(c->dstMemoryType, c->dstHost, c->dstDevice, &addr, &device))
        return CUDA_ERROR_INVALID_VALUE;
    if (!device)
        return host_and_array(c->srcArray, c->srcXInBytes, c->srcY, src_z,
                              first_byte(addr, c->dstY, c->dstPitch, c->dstXInBytes),
                              c->dstPitch, c->WidthInBytes, c->Height, 0, stream);
    return rgpu_cu_array_to_device(addr + c->dstY * c->dstPitch + c->dstXInBytes, c->dstPitch,
                                   c->srcArray, c->srcXInBytes, c->srcY, src_z, c->WidthInBytes,
                                   c->Height, stream);
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
