/* Hand-written CUDA array copies of libcudart.
 *
 * Arrays live in the server: the client holds their handles and never
 * dereferences them (cudaMallocArray, cudaFreeArray, cudaArrayGetInfo and
 * texture and surface objects are generated; the session's handle table
 * checks every array named).  A copy between host memory and an array
 * moves the host rows packed, in bands of a copy chunk; one between device
 * memory and an array names the device range, which the server checks
 * against the session's memory.  The requests are rgpu's own procedures
 * (codegen/cudart_own.h); server side daemon/hand_arrays.c. */
#include "rgpu_client.h"
#include "rgpu_proto.h"
#include "client_ranges.h"
#include "cudart_own.h"
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

/* Rows per request of a copy between host memory and an array: tall
 * copies go in bands of at most a copy chunk each. */
static size_t band_rows(size_t width, size_t height)
{
    size_t rows = width ? RGPU_COPY_CHUNK / width : height;
    return rows ? rows : 1;
}

/* Host rows at their pitch, packed into a band of width-byte rows. */
static void pack_rows(char *band, const char *host, size_t pitch, size_t width, size_t rows)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(band + r * width, host + r * pitch, width);
}

static void unpack_rows(char *host, size_t pitch, const char *band, size_t width, size_t rows)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(host + r * pitch, band + r * width, width);
}

/* A copy between host memory and an array, band by band: layer z of a 3D
 * array for cudaMemcpy3D, or the 2D copy (layer < 0). */
static cudaError_t host_and_array(cudaArray_const_t array, size_t x, size_t y, long layer,
                                  char *host, size_t pitch, size_t width, size_t height,
                                  int to_array, cudaStream_t stream)
{
    if (width && height && !host)
        return RESULT(cudaErrorInvalidValue);
    if (width > RGPU_COPY_CHUNK)
        return RESULT(cudaErrorInvalidValue);   /* a row larger than a frame */
    size_t step = band_rows(width, height);
    char *band = malloc(width * (step < height ? step : height) + 1);
    if (!band)
        return RESULT(cudaErrorMemoryAllocation);
    cudaError_t rc = cudaSuccess;
    cudaArray_t a = (cudaArray_t)(uintptr_t)array;
    size_t r = 0;
    do {            /* an empty copy still has its arguments checked */
        size_t rows = height - r < step ? height - r : step, n = width * rows;
        char *at = host ? host + r * pitch : NULL;
        if (to_array) {
            pack_rows(band, at, pitch, width, rows);
            rc = layer < 0 ? rgpu_array_from_host(a, x, y + r, width, rows, stream, band, n)
                           : rgpu_array_layer_from_host(a, x, y + r, (size_t)layer, width, rows,
                                                        stream, band, n);
        } else {
            rc = layer < 0 ? rgpu_array_to_host(array, x, y + r, width, rows, stream, band, n)
                           : rgpu_array_layer_to_host(array, x, y + r, (size_t)layer, width,
                                                      rows, stream, band, n);
            if (rc == cudaSuccess)
                unpack_rows(at, pitch, band, width, rows);
        }
        r += step;
    } while (rc == cudaSuccess && r < height);
    free(band);
    if (rc == cudaSuccess && !to_array && rgpu_mapped_active())
        rgpu_mapped_after_sync();       /* a copy to the host waits, as a synchronize */
    return rc;
}

static cudaError_t to_array(cudaArray_t dst, size_t x, size_t y, const void *src, size_t spitch,
                            size_t width, size_t height, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    if (width > spitch)
        return RESULT(cudaErrorInvalidPitchValue);
    if (other_side_on_device(src, kind, 1))
        return rgpu_array_from_device(dst, x, y, src, spitch, width, height, stream);
    return host_and_array(dst, x, y, -1, (char *)(uintptr_t)src, spitch, width, height, 1,
                          stream);
}

static cudaError_t from_array(void *dst, size_t dpitch, cudaArray_const_t src, size_t x,
                              size_t y, size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    if (width > dpitch)
        return RESULT(cudaErrorInvalidPitchValue);
    if (other_side_on_device(dst, kind, 0))
        return rgpu_array_to_device(dst, dpitch, src, x, y, width, height, stream);
    return host_and_array(src, x, y, -1, dst, dpitch, width, height, 0, stream);
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

/* Bytes per element of an array, and of its rows: 0 when they cannot be
 * asked. */
static size_t array_element_row(cudaArray_const_t a, size_t *row)
{
    struct cudaChannelFormatDesc d;
    struct cudaExtent e;
    unsigned flags;
    *row = 0;
    if (cudaArrayGetInfo(&d, &e, &flags, (cudaArray_t)(uintptr_t)a) != cudaSuccess)
        return 0;
    int bits = d.x + d.y + d.z + d.w;
    size_t elem = bits > 0 && bits % 8 == 0 ? (size_t)bits / 8 : 0;
    *row = e.width * elem;
    return elem;
}

static size_t array_element(cudaArray_const_t a)
{
    size_t row;
    return array_element_row(a, &row);
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
    if (width > lin->pitch)
        return RESULT(cudaErrorInvalidValue);
    cudaError_t rc = cudaSuccess;
    for (size_t z = 0; rc == cudaSuccess && z < p->extent.depth; z++) {
        char *host = (char *)lin->ptr +
                     ((lpos->z + z) * lin->ysize + lpos->y) * lin->pitch + lpos->x;
        rc = host_and_array(array, apos->x * elem, apos->y, (long)(apos->z + z), host,
                            lin->pitch, width, height, to_array, stream);
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

/* ---- the deprecated 1D copies ---------------------------------------------------
 * cudaMemcpyToArray and its kin copy count bytes from an offset (x bytes
 * into row y) on, the array's rows taken one after another: the whole of
 * a 2D array from its corner is one such copy.  The rows they touch are
 * at most three 2D copies (the rest of the first row, whole rows, the
 * start of the last), made as cudaMemcpy2DToArray's are; the library
 * checks each against the array. */

struct span {
    size_t x, y, width, height;
    size_t offset;              /* into the linear side */
};

/* The pieces of count bytes from (x, y) on, in rows of row bytes.  An
 * offset past the row is one piece, for the library to refuse. */
static int linear_spans(size_t row, size_t x, size_t y, size_t count, struct span s[3])
{
    int n = 0;
    if (x >= row) {
        s[n++] = (struct span){ x, y, count, 1, 0 };
        return n;
    }
    size_t first = count < row - x ? count : row - x, off = first;
    s[n++] = (struct span){ x, y, first, 1, 0 };
    count -= first;
    y++;
    if (count >= row) {
        size_t rows = count / row;
        s[n++] = (struct span){ 0, y, row, rows, off };
        off += rows * row;
        count -= rows * row;
        y += rows;
    }
    if (count)
        s[n++] = (struct span){ 0, y, count, 1, off };
    return n;
}

/* The spans of a 1D copy into or out of array: 0 pieces when its rows
 * cannot be asked. */
static int array_spans(cudaArray_const_t array, size_t x, size_t y, size_t count,
                       struct span s[3])
{
    size_t row;
    return array_element_row(array, &row) ? linear_spans(row, x, y, count, s) : 0;
}

static cudaError_t to_array_1d(cudaArray_t dst, size_t x, size_t y, const void *src,
                               size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    struct span s[3];
    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    int n = array_spans(dst, x, y, count, s);
    cudaError_t rc = n ? cudaSuccess : RESULT(cudaErrorInvalidValue);
    for (int i = 0; i < n && rc == cudaSuccess; i++)
        rc = to_array(dst, s[i].x, s[i].y, (const char *)src + s[i].offset, s[i].width,
                      s[i].width, s[i].height, kind, stream);
    return rc;
}

static cudaError_t from_array_1d(void *dst, cudaArray_const_t src, size_t x, size_t y,
                                 size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    struct span s[3];
    if ((unsigned)kind > cudaMemcpyDefault)
        return RESULT(cudaErrorInvalidMemcpyDirection);
    int n = array_spans(src, x, y, count, s);
    cudaError_t rc = n ? cudaSuccess : RESULT(cudaErrorInvalidValue);
    for (int i = 0; i < n && rc == cudaSuccess; i++)
        rc = from_array((char *)dst + s[i].offset, s[i].width, src, s[i].x, s[i].y, s[i].width,
                        s[i].height, kind, stream);
    return rc;
}

RGPU_EXPORT cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                          const void *src, size_t count,
                                          enum cudaMemcpyKind kind)
{
    return to_array_1d(dst, wOffset, hOffset, src, count, kind, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                               const void *src, size_t count,
                                               enum cudaMemcpyKind kind)
{
    return to_array_1d(dst, wOffset, hOffset, src, count, kind, cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                               const void *src, size_t count,
                                               enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return to_array_1d(dst, wOffset, hOffset, src, count, kind, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset,
                                                    size_t hOffset, const void *src,
                                                    size_t count, enum cudaMemcpyKind kind,
                                                    cudaStream_t stream)
{
    return to_array_1d(dst, wOffset, hOffset, src, count, kind,
                       stream ? stream : cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset,
                                            size_t hOffset, size_t count,
                                            enum cudaMemcpyKind kind)
{
    return from_array_1d(dst, src, wOffset, hOffset, count, kind, NULL);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromArray_ptds(void *dst, cudaArray_const_t src,
                                                 size_t wOffset, size_t hOffset, size_t count,
                                                 enum cudaMemcpyKind kind)
{
    return from_array_1d(dst, src, wOffset, hOffset, count, kind, cudaStreamPerThread);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src,
                                                 size_t wOffset, size_t hOffset, size_t count,
                                                 enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return from_array_1d(dst, src, wOffset, hOffset, count, kind, stream);
}

RGPU_EXPORT cudaError_t cudaMemcpyFromArrayAsync_ptsz(void *dst, cudaArray_const_t src,
                                                      size_t wOffset, size_t hOffset,
                                                      size_t count, enum cudaMemcpyKind kind,
                                                      cudaStream_t stream)
{
    return from_array_1d(dst, src, wOffset, hOffset, count, kind,
                         stream ? stream : cudaStreamPerThread);
}

/* Generated (codegen/cudart.ann); cuda_runtime_api.h declares the _ptds
 * form only for programs built with per-thread default streams. */
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                          cudaArray_const_t src, size_t wOffsetSrc,
                                          size_t hOffsetSrc, size_t width, size_t height,
                                          enum cudaMemcpyKind kind);

/* Between two arrays whose rows may differ: pieces that end where either
 * side's row does, as 2D copies between arrays (generated: both handles
 * checked); whole rows at once where both sides start rows of one size. */
static cudaError_t array_to_array_1d(cudaArray_t dst, size_t xd, size_t yd,
                                     cudaArray_const_t src, size_t xs, size_t ys, size_t count,
                                     enum cudaMemcpyKind kind, int per_thread)
{
    size_t rd, rs;
    if (!array_element_row(dst, &rd) || !array_element_row(src, &rs))
        return RESULT(cudaErrorInvalidValue);
    cudaError_t rc = cudaSuccess;
    do {            /* an empty copy still has its arguments checked */
        size_t width = count, height = 1;
        if (xd < rd && xs < rs) {
            width = width < rd - xd ? width : rd - xd;
            width = width < rs - xs ? width : rs - xs;
        }
        if (xd == 0 && xs == 0 && rd == rs && count >= rd) {
            width = rd;
            height = count / rd;
        }
        rc = per_thread ? cudaMemcpy2DArrayToArray_ptds(dst, xd, yd, src, xs, ys, width, height,
                                                        kind)
                        : cudaMemcpy2DArrayToArray(dst, xd, yd, src, xs, ys, width, height,
                                                   kind);
        count -= width * height;
        if (height > 1) {
            yd += height;
            ys += height;
        } else {
            xd += width;
            xs += width;
        }
        if (xd == rd) {
            xd = 0;
            yd++;
        }
        if (xs == rs) {
            xs = 0;
            ys++;
        }
    } while (rc == cudaSuccess && count);
    return rc;
}

RGPU_EXPORT cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst,
                                               size_t hOffsetDst, cudaArray_const_t src,
                                               size_t wOffsetSrc, size_t hOffsetSrc,
                                               size_t count, enum cudaMemcpyKind kind)
{
    return array_to_array_1d(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count,
                             kind, 0);
}

RGPU_EXPORT cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst,
                                                    size_t hOffsetDst, cudaArray_const_t src,
                                                    size_t wOffsetSrc, size_t hOffsetSrc,
                                                    size_t count, enum cudaMemcpyKind kind)
{
    return array_to_array_1d(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count,
                             kind, 1);
}
