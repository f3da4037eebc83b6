// CUDA arrays and texture objects of the fake GPU.
//
// An array is a host buffer of Width x Height x Depth elements of its format
// and channel count, rows packed (the layout is opaque to programs, as on a
// GPU, so any layout is honest).  Copies reach it through cuMemcpy2D's array
// sides (driver_mem.c asks fg_array_side).  A texture object is a handle to
// a copy of its resource and texture descriptors; CPU twins fetch through
// fg_tex2d_float with point sampling, unnormalized or normalized
// coordinates, and clamp or border addressing (wrap and mirror: clamp).
#include "fakegpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fg_array {
    CUDA_ARRAY3D_DESCRIPTOR d;
    size_t elem;                    // bytes per element (all channels)
    unsigned char *data;
};

struct fg_tex {
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
};

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

static size_t dim(size_t v) { return v ? v : 1; }

// An array's elements live in host memory here, allocated whole: a larger
// one is refused as a full device refuses it (out of memory), so that a
// hostile extent (16384 cubed, within the device's limits) cannot take
// the test machine's memory.
#define FG_ARRAY_MAX_BYTES (256ull << 20)

static CUresult array_new(const CUDA_ARRAY3D_DESCRIPTOR *d, CUarray *out)
{
    struct fg_ctx *c;
    size_t fb = d ? format_bytes(d->Format) : 0;

    if (!out || !d || !fb || d->Width == 0 ||
        (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) ||
        (d->Depth && !d->Height))
        return CUDA_ERROR_INVALID_VALUE;
    // The device's 3D limits (cudaDevAttrMaxTexture3DWidth...): 16384.
    if (d->Width > 16384 || d->Height > 16384 || d->Depth > 16384)
        return CUDA_ERROR_INVALID_VALUE;
    // Each extent is at most 16384 and an element at most 16 bytes: no overflow.
    if ((unsigned long long)d->Width * dim(d->Height) * dim(d->Depth) * fb * d->NumChannels >
        FG_ARRAY_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fg_array *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->d = *d;
    a->elem = fb * d->NumChannels;
    a->data = calloc(d->Width * dim(d->Height) * dim(d->Depth), a->elem);
    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    uint64_t h = r == CUDA_SUCCESS && a->data ? fg_handle_new(FG_ARRAY, a, NULL) : 0;
    fg_unlock();
    if (!h) {
        free(a->data);
        free(a);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUarray)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d)
{
    CUDA_ARRAY3D_DESCRIPTOR d3 = { 0 };

    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    d3.Width = d->Width;
    d3.Height = d->Height;
    d3.Format = d->Format;
    d3.NumChannels = d->NumChannels;
    return array_new(&d3, out);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (d && d->Flags & ~(unsigned)CUDA_ARRAY3D_SURFACE_LDST)
        return CUDA_ERROR_NOT_SUPPORTED;     // layered, cubemap...: not modelled
    return array_new(d, out);
}

// The array behind h, or NULL; lock held.
static struct fg_array *array_get(CUarray h)
{
    return fg_handle_get((uint64_t)(uintptr_t)h, FG_ARRAY);
}

CUresult CUDAAPI cuArrayDestroy(CUarray h)
{
    fg_lock();
    struct fg_array *a = array_get(h);
    if (a)
        fg_handle_drop((uint64_t)(uintptr_t)h);
    fg_unlock();
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    free(a->data);
    free(a);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray h)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    struct fg_array *a = array_get(h);
    if (a)
        *d = a->d;
    fg_unlock();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *d, CUarray h)
{
    CUDA_ARRAY3D_DESCRIPTOR d3;
    CUresult r = cuArray3DGetDescriptor_v2(d ? &d3 : NULL, h);

    if (r != CUDA_SUCCESS)
        return r;
    if (d3.Depth)
        return CUDA_ERROR_INVALID_VALUE;     // a 3D array has no 2D descriptor
    d->Width = d3.Width;
    d->Height = d3.Height;
    d->Format = d3.Format;
    d->NumChannels = d3.NumChannels;
    return CUDA_SUCCESS;
}

CUresult fg_array_side(CUarray h, size_t x_bytes, size_t y, size_t z,
                       size_t width_bytes, size_t height, size_t depth,
                       uintptr_t *base, size_t *pitch, size_t *slice)
{
    struct fg_array *a = array_get(h);

    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t row = a->d.Width * a->elem, rows = dim(a->d.Height), layers = dim(a->d.Depth);
    if (x_bytes > row || width_bytes > row - x_bytes || y > rows || height > rows - y ||
        z > layers || depth > layers - z || x_bytes % a->elem || width_bytes % a->elem)
        return CUDA_ERROR_INVALID_VALUE;
    *base = (uintptr_t)a->data;
    *pitch = row;
    *slice = row * rows;
    return CUDA_SUCCESS;
}

// ---- texture objects ------------------------------------------------------------------

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
                                   const CUDA_TEXTURE_DESC *tex,
                                   const CUDA_RESOURCE_VIEW_DESC *view)
{
    struct fg_ctx *c;

    if (!out || !res || !tex)
        return CUDA_ERROR_INVALID_VALUE;
    if (view || res->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;     // linear and pitch2D: not modelled
    struct fg_tex *t = malloc(sizeof *t);
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->res = *res;
    t->tex = *tex;
    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && !array_get(res->res.array.hArray))
        r = CUDA_ERROR_INVALID_VALUE;
    uint64_t h = r == CUDA_SUCCESS ? fg_handle_new(FG_TEXTURE, t, NULL) : 0;
    fg_unlock();
    if (!h) {
        free(t);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject h)
{
    fg_lock();
    struct fg_tex *t = fg_handle_get(h, FG_TEXTURE);
    if (t)
        fg_handle_drop(h);
    fg_unlock();
    if (!t)
        return CUDA_ERROR_INVALID_VALUE;
    free(t);
    return CUDA_SUCCESS;
}

static CUresult tex_query(CUtexObject h, CUDA_RESOURCE_DESC *res, CUDA_TEXTURE_DESC *tex)
{
    fg_lock();
    struct fg_tex *t = fg_handle_get(h, FG_TEXTURE);
    if (t && res)
        *res = t->res;
    if (t && tex)
        *tex = t->tex;
    fg_unlock();
    return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *res, CUtexObject h)
{
    return res ? tex_query(h, res, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *tex, CUtexObject h)
{
    return tex ? tex_query(h, NULL, tex) : CUDA_ERROR_INVALID_VALUE;
}

// A coordinate to an element index: point sampling takes floor; clamp
// keeps it in [0, n); border gives -1 outside.
static long texel_index(float coord, int normalized, size_t n, CUaddress_mode mode)
{
    float x = normalized ? coord * (float)n : coord;
    long i = (long)floorf(x);
    if (i >= 0 && (size_t)i < n)
        return i;
    if (mode == CU_TR_ADDRESS_MODE_BORDER)
        return -1;
    return i < 0 ? 0 : (long)n - 1;
}

float fg_tex2d_float(struct fg_thread *th, CUtexObject h, float x, float y)
{
    // Twins run with the lock held (fg_exec), as every device access does.
    struct fg_tex *t = fg_handle_get(h, FG_TEXTURE);
    struct fg_array *a = t ? array_get(t->res.res.array.hArray) : NULL;

    if (!a || a->d.Format != CU_AD_FORMAT_FLOAT || a->d.NumChannels != 1) {
        th->fault = CUDA_ERROR_ILLEGAL_ADDRESS;   // what a stale object gives
        return 0.0f;
    }
    int norm = (t->tex.flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
    long i = texel_index(x, norm, a->d.Width, t->tex.addressMode[0]);
    long j = texel_index(y, norm, dim(a->d.Height), t->tex.addressMode[1]);
    if (i < 0 || j < 0)
        return 0.0f;
    float v;
    memcpy(&v, a->data + ((size_t)j * a->d.Width + (size_t)i) * a->elem, sizeof v);
    return v;
}

// ---- surface objects ------------------------------------------------------------------

// A surface object is a handle to its array (surf2Dwrite stores into it).
CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res)
{
    struct fg_ctx *c;

    if (!out || !res || res->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_RESOURCE_DESC *copy = malloc(sizeof *copy);
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *copy = *res;
    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    struct fg_array *a = r == CUDA_SUCCESS ? array_get(res->res.array.hArray) : NULL;
    // Only arrays made for surface load/store, as a GPU requires.
    if (r == CUDA_SUCCESS && (!a || !(a->d.Flags & CUDA_ARRAY3D_SURFACE_LDST)))
        r = CUDA_ERROR_INVALID_VALUE;
    uint64_t h = r == CUDA_SUCCESS ? fg_handle_new(FG_SURFACE, copy, NULL) : 0;
    fg_unlock();
    if (!h) {
        free(copy);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject h)
{
    fg_lock();
    CUDA_RESOURCE_DESC *res = fg_handle_get(h, FG_SURFACE);
    if (res)
        fg_handle_drop(h);
    fg_unlock();
    free(res);
    return res ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUsurfObject h)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    CUDA_RESOURCE_DESC *res = fg_handle_get(h, FG_SURFACE);
    if (res)
        *out = *res;
    fg_unlock();
    return res ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void fg_surf2d_write_float(struct fg_thread *th, CUsurfObject h, float v, int x_bytes, int y)
{
    CUDA_RESOURCE_DESC *res = fg_handle_get(h, FG_SURFACE);
    struct fg_array *a = res ? array_get(res->res.array.hArray) : NULL;

    // The default boundary mode traps: an access outside the array faults.
    if (!a || a->elem != sizeof v || x_bytes < 0 || y < 0 || x_bytes % (int)sizeof v ||
        (size_t)x_bytes / sizeof v >= a->d.Width || (size_t)y >= dim(a->d.Height)) {
        th->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
        return;
    }
    memcpy(a->data + (size_t)y * a->d.Width * a->elem + (size_t)x_bytes, &v, sizeof v);
}
