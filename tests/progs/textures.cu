// CUDA arrays and texture objects: a 2D float array filled row by row from
// padded host rows, a texture object on it fetched by a kernel (point
// sampling, unnormalized coordinates, clamp addressing), copies back out of
// the array to host and device memory, descriptors queried back, a 3D
// array through cudaMemcpy3D, a kernel writing an array through a surface
// object.  (A freed array or destroyed texture object is not used again:
// natively that is a use after free; rgpu's refusal of handles it never
// handed out is tests/handles.c's.)
#include "check.h"
#include "textures.cuh"

#include <string.h>

enum { W = 8, H = 4, PAD = 3 };    // PAD floats after each host row

static float value_at(int x, int y) { return (float)(y * 10 + x) + 0.25f; }

// The host rows, padded: a pitch wider than a row.
static void fill_rows(float rows[H][W + PAD])
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W + PAD; x++)
            rows[y][x] = x < W ? value_at(x, y) : -1.0f;
}

static bool fetch_matches(const float *out, int dx)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int sx = x + dx < W ? x + dx : W - 1;     // clamp addressing
            if (out[y * W + x] != 2.0f * value_at(sx, y))
                return false;
        }
    return true;
}

static cudaTextureObject_t make_texture(cudaArray_t arr)
{
    struct cudaResourceDesc res;
    struct cudaTextureDesc tex;
    cudaTextureObject_t t = 0;

    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = arr;
    memset(&tex, 0, sizeof tex);
    tex.addressMode[0] = cudaAddressModeClamp;
    tex.addressMode[1] = cudaAddressModeClamp;
    tex.filterMode = cudaFilterModePoint;
    tex.readMode = cudaReadModeElementType;
    tex.normalizedCoords = 0;
    check_cuda(cudaCreateTextureObject(&t, &res, &tex, NULL), "create texture object");
    return t;
}

static void fetch(cudaTextureObject_t t, float *dev_out, int dx, const char *name)
{
    float out[H][W];
    k_tex_fetch<<<dim3(1, 2), dim3(W, 2)>>>(t, dev_out, W, H, dx);
    check_cuda(cudaGetLastError(), "launch k_tex_fetch");
    check_cuda(cudaMemcpy(out, dev_out, sizeof out, cudaMemcpyDeviceToHost), "fetch results");
    check(fetch_matches(&out[0][0], dx), name, "out[0][0]=%g out[%d][%d]=%g", out[0][0], H - 1,
          W - 1, out[H - 1][W - 1]);
}

static void check_info(cudaArray_t arr)
{
    struct cudaChannelFormatDesc d;
    struct cudaExtent e;
    unsigned flags = 99;
    check_cuda(cudaArrayGetInfo(&d, &e, &flags, arr), "cudaArrayGetInfo");
    check(d.x == 32 && d.y == 0 && d.f == cudaChannelFormatKindFloat, "array channel format",
          "x=%d y=%d f=%d", d.x, d.y, (int)d.f);
    check(e.width == W && e.height == H && e.depth == 0 && flags == 0, "array extent",
          "%zux%zux%zu flags %u", e.width, e.height, e.depth, flags);
    memset(&d, 0, sizeof d);
    check_cuda(cudaGetChannelDesc(&d, arr), "cudaGetChannelDesc");
    check(d.x == 32 && d.f == cudaChannelFormatKindFloat, "channel desc", "x=%d f=%d", d.x,
          (int)d.f);
}

static void round_trip(cudaArray_t arr)
{
    float back[H][W + PAD];
    memset(back, 0, sizeof back);
    check_cuda(cudaMemcpy2DFromArray(back, sizeof back[0], arr, 0, 0, W * sizeof(float), H,
                                     cudaMemcpyDeviceToHost),
               "cudaMemcpy2DFromArray to host");
    bool same = true;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            same = same && back[y][x] == value_at(x, y);
    check(same && back[0][W] == 0.0f, "array to host round trip", "back[1][2]=%g", back[1][2]);

    // A block of the array (columns 2..4 of rows 1..2) to device memory.
    float *dev = NULL, block[2][3];
    check_cuda(cudaMalloc(&dev, sizeof block), "cudaMalloc block");
    check_cuda(cudaMemcpy2DFromArray(dev, sizeof block[0], arr, 2 * sizeof(float), 1,
                                     sizeof block[0], 2, cudaMemcpyDeviceToDevice),
               "cudaMemcpy2DFromArray to device");
    check_cuda(cudaMemcpy(block, dev, sizeof block, cudaMemcpyDeviceToHost), "block to host");
    check(block[0][0] == value_at(2, 1) && block[1][2] == value_at(4, 2), "array block to device",
          "%g %g", block[0][0], block[1][2]);
    cudaFree(dev);
}

// A 3D array filled and read back with cudaMemcpy3D, layer by layer on
// the wire; its extent queried back.
static void array_3d(void)
{
    enum { X = 4, Y = 3, Z = 2 };
    float in[Z][Y][X], out[Z][Y][X];
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) {
                in[z][y][x] = (float)(1000 * z + 10 * y + x);
                out[z][y][x] = -1.0f;
            }
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    cudaArray_t arr = NULL;
    if (!check_cuda(cudaMalloc3DArray(&arr, &fmt, make_cudaExtent(X, Y, Z)), "cudaMalloc3DArray"))
        return;
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(in, X * sizeof(float), X, Y);
    p.dstArray = arr;
    p.extent = make_cudaExtent(X, Y, Z);
    p.kind = cudaMemcpyHostToDevice;
    check_cuda(cudaMemcpy3D(&p), "cudaMemcpy3D to a 3D array");
    memset(&p, 0, sizeof p);
    p.srcArray = arr;
    p.dstPtr = make_cudaPitchedPtr(out, X * sizeof(float), X, Y);
    p.extent = make_cudaExtent(X, Y, Z);
    p.kind = cudaMemcpyDeviceToHost;
    check_cuda(cudaMemcpy3D(&p), "cudaMemcpy3D from a 3D array");
    check(memcmp(in, out, sizeof in) == 0, "3D array round trip", "out[1][2][3]=%g",
          out[1][2][3]);
    struct cudaChannelFormatDesc d;
    struct cudaExtent e;
    unsigned flags;
    check_cuda(cudaArrayGetInfo(&d, &e, &flags, arr), "cudaArrayGetInfo 3D");
    check(e.width == X && e.height == Y && e.depth == Z, "3D array extent", "%zux%zux%zu",
          e.width, e.height, e.depth);
    check_cuda(cudaFreeArray(arr), "cudaFreeArray 3D");
}

// A copy taller than one request carries (16 MiB of rows): the rows go in
// bands, from and to pitched host memory, and come back whole.
static void tall_copy(void)
{
    enum { TW = 4096, TH = 4608, TP = TW + 4 };
    unsigned char *in = (unsigned char *)malloc((size_t)TP * TH);
    unsigned char *out = (unsigned char *)calloc((size_t)TP, TH);
    if (!in || !out) {
        check(0, "tall copy buffers", "out of host memory");
        return;
    }
    for (size_t y = 0; y < TH; y++)
        for (size_t x = 0; x < TP; x++)
            in[y * TP + x] = (unsigned char)(x * 7 + y * 13);
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<unsigned char>();
    cudaArray_t arr = NULL;
    if (check_cuda(cudaMallocArray(&arr, &fmt, TW, TH, 0), "cudaMallocArray tall")) {
        check_cuda(cudaMemcpy2DToArray(arr, 0, 0, in, TP, TW, TH, cudaMemcpyHostToDevice),
                   "cudaMemcpy2DToArray of 18 MiB");
        check_cuda(cudaMemcpy2DFromArray(out, TP, arr, 0, 0, TW, TH, cudaMemcpyDeviceToHost),
                   "cudaMemcpy2DFromArray of 18 MiB");
        int same = 1;
        for (size_t y = 0; y < TH && same; y++)
            same = memcmp(in + y * TP, out + y * TP, TW) == 0 && out[y * TP + TW] == 0;
        check(same, "tall array round trip", "row %d differs", TH - 1);
        check_cuda(cudaFreeArray(arr), "cudaFreeArray tall");
    }
    free(in);
    free(out);
}

// A kernel writes a surface-capable array through a surface object; the
// array read back.
static void surface_write(void)
{
    enum { SW = 5, SH = 3 };
    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    cudaArray_t arr = NULL;
    if (!check_cuda(cudaMallocArray(&arr, &fmt, SW, SH, cudaArraySurfaceLoadStore),
                    "cudaMallocArray for surfaces"))
        return;
    struct cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = arr;
    cudaSurfaceObject_t surf = 0;
    check_cuda(cudaCreateSurfaceObject(&surf, &res), "cudaCreateSurfaceObject");
    memset(&res, 0, sizeof res);
    check_cuda(cudaGetSurfaceObjectResourceDesc(&res, surf), "cudaGetSurfaceObjectResourceDesc");
    check(res.resType == cudaResourceTypeArray && res.res.array.array == arr,
          "surface resource is the array", "type %d", (int)res.resType);
    k_surf_write<<<dim3(1, 1), dim3(8, 4)>>>(surf, SW, SH);
    check_cuda(cudaGetLastError(), "launch k_surf_write");
    float back[SH][SW];
    check_cuda(cudaMemcpy2DFromArray(back, sizeof back[0], arr, 0, 0, sizeof back[0], SH,
                                     cudaMemcpyDeviceToHost),
               "surface array to host");
    bool same = true;
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++)
            same = same && back[y][x] == 100 * y + x + 0.5f;
    check(same, "surf2Dwrite wrote the array", "back[2][4]=%g", back[2][4]);
    check_cuda(cudaDestroySurfaceObject(surf), "cudaDestroySurfaceObject");
    check_cuda(cudaFreeArray(arr), "cudaFreeArray surfaces");
}

int main(void)
{
    float rows[H][W + PAD];
    fill_rows(rows);

    cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
    cudaArray_t arr = NULL;
    check_cuda(cudaMallocArray(&arr, &fmt, W, H, 0), "cudaMallocArray");
    check_cuda(cudaMemcpy2DToArray(arr, 0, 0, rows, sizeof rows[0], W * sizeof(float), H,
                                   cudaMemcpyHostToDevice),
               "cudaMemcpy2DToArray from host");
    check_info(arr);
    round_trip(arr);

    // A copy that runs past the array's last row is refused.
    check(cudaMemcpy2DToArray(arr, 0, 1, rows, sizeof rows[0], W * sizeof(float), H,
                              cudaMemcpyHostToDevice) != cudaSuccess,
          "copy past the array refused", "succeeded");
    cudaGetLastError();

    cudaTextureObject_t t = make_texture(arr);
    struct cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    check_cuda(cudaGetTextureObjectResourceDesc(&res, t), "cudaGetTextureObjectResourceDesc");
    check(res.resType == cudaResourceTypeArray && res.res.array.array == arr,
          "texture resource is the array", "type %d", (int)res.resType);

    float *dev_out = NULL;
    check_cuda(cudaMalloc(&dev_out, W * H * sizeof(float)), "cudaMalloc out");
    fetch(t, dev_out, 0, "tex2D fetches the texels");
    fetch(t, dev_out, 3, "tex2D clamps past the edge");

    check_cuda(cudaDestroyTextureObject(t), "cudaDestroyTextureObject");
    check_cuda(cudaFreeArray(arr), "cudaFreeArray");
    cudaFree(dev_out);
    array_3d();
    tall_copy();
    surface_write();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return check_failures ? 1 : 0;
}
