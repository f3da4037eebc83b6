/* The driver's 2D copies (cuMemcpy2D_v2, cuMemcpy2DUnaligned_v2,
 * cuMemcpy2DAsync_v2), made of the 1D copies the stub already serves.  The
 * static CUDA runtime uses them even for host-to-host copies of pinned
 * memory.  A copy whose rows are contiguous on both sides is one 1D copy;
 * otherwise device-to-host reads the whole span once and scatters the rows
 * here, and host-to-device or device-to-device copies go row by row (each
 * row goes without waiting, like any copy to the device).  A copy with a
 * CUDA array side goes to stubs/cuda_arrays.c.  No server code of its own:
 * the 1D copies' is daemon/hand_cuda.c and daemon/copy.c. */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "cuda_procs.h"
#include "cuda_arrays.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

/* One side of the copy: where its first byte is, and whether that is
 * device memory. */
struct side {
    uintptr_t addr;
    size_t pitch;
    int device;
};

static CUresult side_of(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x,
                        size_t y, size_t pitch, struct side *s)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        s->addr = (uintptr_t)host;
        s->device = 0;
        break;
    case CU_MEMORYTYPE_DEVICE:
        s->addr = (uintptr_t)dev;
        s->device = 1;
        break;
    case CU_MEMORYTYPE_UNIFIED:     /* unified addressing: the ranges decide */
        s->addr = (uintptr_t)dev;
        s->device = rgpu_ranges_find(dev, NULL, NULL) == RGPU_RANGE_DEVICE;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    s->addr += y * pitch + x;
    s->pitch = pitch;
    return CUDA_SUCCESS;
}

static CUresult copy_1d(const struct side *d, const struct side *s, size_t n, CUstream stream,
                        int async)
{
    if (!n)
        return CUDA_SUCCESS;
    if (d->device && s->device)
        return async ? cuMemcpyDtoDAsync_v2(d->addr, s->addr, n, stream)
                     : cuMemcpyDtoD_v2(d->addr, s->addr, n);
    if (d->device)
        return async ? cuMemcpyHtoDAsync_v2(d->addr, (const void *)s->addr, n, stream)
                     : cuMemcpyHtoD_v2(d->addr, (const void *)s->addr, n);
    if (s->device)
        return async ? cuMemcpyDtoHAsync_v2((void *)d->addr, s->addr, n, stream)
                     : cuMemcpyDtoH_v2((void *)d->addr, s->addr, n);
    /* Host to host, in stream order: what the stream holds runs first. */
    CUresult rc = stream || !async ? cuStreamSynchronize(stream) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        memmove((void *)d->addr, (const void *)s->addr, n);
    return rc;
}

/* Device to host with padded rows: one read of the span, rows scattered. */
static CUresult gather_from_device(const struct side *d, const struct side *s, size_t width,
                                   size_t height, CUstream stream, int async)
{
    size_t span = (height - 1) * s->pitch + width;
    unsigned char *buf = malloc(span);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* The rows are needed here now: the read waits even for an async copy,
     * which CUDA allows (the copy is done when the call returns). */
    CUresult rc = async ? cuMemcpyDtoHAsync_v2(buf, s->addr, span, stream)
                        : cuMemcpyDtoH_v2(buf, s->addr, span);
    if (rc == CUDA_SUCCESS && async)
        rc = cuStreamSynchronize(stream);
    for (size_t row = 0; rc == CUDA_SUCCESS && row < height; row++)
        memcpy((unsigned char *)d->addr + row * d->pitch, buf + row * s->pitch, width);
    free(buf);
    return rc;
}

CUresult rgpu_cuda_copy_2d(const CUDA_MEMCPY2D *c, CUstream stream, int async)
{
    struct side d, s;
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return rgpu_cuda_array_copy(c, 0, 0, stream);
    CUresult rc = side_of(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                          c->srcPitch, &s);
    if (rc == CUDA_SUCCESS)
        rc = side_of(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
                     c->dstPitch, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    size_t w = c->WidthInBytes, h = c->Height;
    if (!w || !h)
        return CUDA_SUCCESS;
    if (h > 1 && (s.pitch < w || d.pitch < w))
        return CUDA_ERROR_INVALID_VALUE;
    if (h == 1 || (s.pitch == w && d.pitch == w))
        return copy_1d(&d, &s, w * h, stream, async);
    if (s.device && !d.device)
        return gather_from_device(&d, &s, w, h, stream, async);
    for (size_t row = 0; rc == CUDA_SUCCESS && row < h; row++) {
        struct side dr = d, sr = s;
        dr.addr += row * d.pitch;
        sr.addr += row * s.pitch;
        rc = copy_1d(&dr, &sr, w, stream, async);
    }
    return rc;
}

#undef cuMemcpy2D
RGPU_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    return rgpu_cuda_copy_2d(pCopy, NULL, 0);
}

#undef cuMemcpy2DUnaligned
RGPU_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    return rgpu_cuda_copy_2d(pCopy, NULL, 0);
}

#undef cuMemcpy2DAsync
RGPU_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return rgpu_cuda_copy_2d(pCopy, hStream, 1);
}
