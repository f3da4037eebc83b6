// The deprecated 1D copies to, from and between CUDA arrays, as texture
// programs still fill their arrays: cudaMemcpyToArray and
// cudaMemcpyFromArray (and their Async forms) see a 2D array's rows one
// after another, from an offset (wOffset bytes into row hOffset) on, over
// host or device memory; cudaMemcpyArrayToArray between two arrays of
// other widths; cudaMemcpy2DArrayToArray; a 1D array.  Each result is
// read back with cudaMemcpy2DFromArray and compared with a model of the
// array on the host.
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define W 37            // an odd row of floats: 148 bytes
#define H 9
#define W2 20           // a second array, narrower

static float model_a[H][W], model_b[H][W2];

// The whole of an array, read back its 2D way.
static void read_back(cudaArray_t a, float *out, size_t w, size_t h)
{
    cudaMemcpy2DFromArray(out, w * sizeof(float), a, 0, 0, w * sizeof(float), h,
                          cudaMemcpyDeviceToHost);
}

static void check_array(cudaArray_t a, const float *model, size_t w, size_t h, const char *name)
{
    static float got[H * W];
    memset(got, 0xff, sizeof got);
    read_back(a, got, w, h);
    size_t i = 0;
    while (i < w * h && got[i] == model[i])
        i++;
    check(i == w * h, name, "element %zu (row %zu) is %g, want %g", i, i / w,
          i < w * h ? got[i] : 0.0f, i < w * h ? model[i] : 0.0f);
}

static void check_floats(const float *got, const float *want, size_t n, const char *name)
{
    size_t i = 0;
    while (i < n && got[i] == want[i])
        i++;
    check(i == n, name, "element %zu is %g, want %g", i, i < n ? got[i] : 0.0f,
          i < n ? want[i] : 0.0f);
}

// count bytes of src into the model from (x bytes, row y) on, row after row.
static void model_write(float *model, size_t w, size_t x, size_t y, const float *src,
                        size_t count)
{
    memcpy((char *)model + y * w * sizeof(float) + x, src, count);
}

static void model_read(const float *model, size_t w, size_t x, size_t y, float *dst,
                       size_t count)
{
    memcpy(dst, (const char *)model + y * w * sizeof(float) + x, count);
}

static void fill(float *p, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        p[i] = base + (float)i;
}

static void host_copies(cudaArray_t a)
{
    static float src[H * W], out[H * W], want[H * W];
    size_t row = W * sizeof(float);

    // The whole array from its corner, as texture programs fill one.
    fill(src, H * W, 1.0f);
    check_cuda(cudaMemcpyToArray(a, 0, 0, src, sizeof src, cudaMemcpyHostToDevice),
               "cudaMemcpyToArray, the whole array");
    model_write(&model_a[0][0], W, 0, 0, src, sizeof src);
    check_array(a, &model_a[0][0], W, H, "the array holds the host's rows");
    memset(out, 0, sizeof out);
    check_cuda(cudaMemcpyFromArray(out, a, 0, 0, sizeof out, cudaMemcpyDeviceToHost),
               "cudaMemcpyFromArray, the whole array");
    check_floats(out, &model_a[0][0], H * W, "the host holds the array's rows");

    // From 5 floats into row 2 on: the rest of that row, two whole rows
    // and 7 floats of the next.
    size_t x = 5 * sizeof(float), count = (W - 5) * sizeof(float) + 2 * row + 7 * sizeof(float);
    fill(src, count / sizeof(float), 500.0f);
    check_cuda(cudaMemcpyToArray(a, x, 2, src, count, cudaMemcpyHostToDevice),
               "cudaMemcpyToArray from an offset over several rows");
    model_write(&model_a[0][0], W, x, 2, src, count);
    check_array(a, &model_a[0][0], W, H, "the rows after the offset, and nothing else");

    // Back from another offset, over a row's end.
    x = 30 * sizeof(float);
    count = 12 * sizeof(float);
    memset(out, 0, sizeof out);
    check_cuda(cudaMemcpyFromArray(out, a, x, 4, count, cudaMemcpyDeviceToHost),
               "cudaMemcpyFromArray from an offset over a row's end");
    model_read(&model_a[0][0], W, x, 4, want, count);
    check_floats(out, want, count / sizeof(float), "the bytes after the offset");

    // Within one row, cudaMemcpyDefault.
    fill(src, 4, -8.0f);
    check_cuda(cudaMemcpyToArray(a, 9 * sizeof(float), 7, src, 4 * sizeof(float),
                                 cudaMemcpyDefault),
               "cudaMemcpyToArray within a row, cudaMemcpyDefault");
    model_write(&model_a[0][0], W, 9 * sizeof(float), 7, src, 4 * sizeof(float));
    check_array(a, &model_a[0][0], W, H, "the four floats inside the row");
}

static void device_and_async_copies(cudaArray_t a)
{
    static float src[H * W], out[H * W], want[H * W];
    float *d = NULL;
    cudaStream_t s;
    size_t bytes = 3 * W * sizeof(float) + 11 * sizeof(float);
    check_cuda(cudaMalloc((void **)&d, sizeof src), "cudaMalloc");
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");

    // Device memory to the array and back, from offsets.
    fill(src, H * W, 2000.0f);
    cudaMemcpy(d, src, sizeof src, cudaMemcpyHostToDevice);
    check_cuda(cudaMemcpyToArray(a, 3 * sizeof(float), 1, d, bytes, cudaMemcpyDeviceToDevice),
               "cudaMemcpyToArray from device memory");
    model_write(&model_a[0][0], W, 3 * sizeof(float), 1, src, bytes);
    check_array(a, &model_a[0][0], W, H, "the array holds the device memory's bytes");
    cudaMemset(d, 0, sizeof src);
    check_cuda(cudaMemcpyFromArray(d, a, 10 * sizeof(float), 5, bytes, cudaMemcpyDefault),
               "cudaMemcpyFromArray to device memory, cudaMemcpyDefault");
    cudaMemcpy(out, d, bytes, cudaMemcpyDeviceToHost);
    model_read(&model_a[0][0], W, 10 * sizeof(float), 5, want, bytes);
    check_floats(out, want, bytes / sizeof(float), "device memory holds the array's bytes");

    // On a stream.
    fill(src, H * W, 3000.0f);
    check_cuda(cudaMemcpyToArrayAsync(a, 0, 6, src, 2 * W * sizeof(float),
                                      cudaMemcpyHostToDevice, s),
               "cudaMemcpyToArrayAsync");
    model_write(&model_a[0][0], W, 0, 6, src, 2 * W * sizeof(float));
    memset(out, 0, sizeof out);
    check_cuda(cudaMemcpyFromArrayAsync(out, a, 0, 0, sizeof out, cudaMemcpyDeviceToHost, s),
               "cudaMemcpyFromArrayAsync");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    check_floats(out, &model_a[0][0], H * W, "the stream's copies in order");
    cudaStreamDestroy(s);
    cudaFree(d);
}

static void array_to_array(cudaArray_t a, cudaArray_t b)
{
    static float zero[H * W2];
    check_cuda(cudaMemcpyToArray(b, 0, 0, zero, sizeof zero, cudaMemcpyHostToDevice),
               "cudaMemcpyToArray, zeros");
    memset(model_b, 0, sizeof model_b);

    // Rows of 37 floats into rows of 20: the bytes run on row after row.
    size_t count = 50 * sizeof(float);
    check_cuda(cudaMemcpyArrayToArray(b, 6 * sizeof(float), 1, a, 33 * sizeof(float), 2, count,
                                      cudaMemcpyDeviceToDevice),
               "cudaMemcpyArrayToArray between arrays of other widths");
    static float bytes[H * W];
    model_read(&model_a[0][0], W, 33 * sizeof(float), 2, bytes, count);
    model_write(&model_b[0][0], W2, 6 * sizeof(float), 1, bytes, count);
    check_array(b, &model_b[0][0], W2, H, "the second array holds the first's bytes");

    // A 2D block: 10 floats of 3 rows.
    check_cuda(cudaMemcpy2DArrayToArray(b, 4 * sizeof(float), 5, a, 8 * sizeof(float), 2,
                                        10 * sizeof(float), 3, cudaMemcpyDeviceToDevice),
               "cudaMemcpy2DArrayToArray");
    for (int r = 0; r < 3; r++)
        memcpy(&model_b[5 + r][4], &model_a[2 + r][8], 10 * sizeof(float));
    check_array(b, &model_b[0][0], W2, H, "the block at its place");
}

static void one_dimensional(void)
{
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    cudaArray_t c;
    static float src[64], out[64], model[100];
    if (!check_cuda(cudaMallocArray(&c, &desc, 100), "cudaMallocArray 1D"))
        return;
    fill(src, 64, 7.0f);
    memset(model, 0, sizeof model);
    static float zero[100];
    check_cuda(cudaMemcpyToArray(c, 0, 0, zero, sizeof zero, cudaMemcpyHostToDevice),
               "cudaMemcpyToArray 1D, zeros");
    check_cuda(cudaMemcpyToArray(c, 16 * sizeof(float), 0, src, sizeof src,
                                 cudaMemcpyHostToDevice),
               "cudaMemcpyToArray 1D at an offset");
    memcpy(&model[16], src, sizeof src);
    static float all[100];
    check_cuda(cudaMemcpyFromArray(all, c, 0, 0, sizeof all, cudaMemcpyDeviceToHost),
               "cudaMemcpyFromArray 1D");
    check_floats(all, model, 100, "the 1D array's elements");
    check_cuda(cudaMemcpyFromArray(out, c, 20 * sizeof(float), 0, 10 * sizeof(float),
                                   cudaMemcpyDeviceToHost),
               "cudaMemcpyFromArray 1D at an offset");
    check_floats(out, &model[20], 10, "ten elements from the offset");
    cudaFreeArray(c);
}

int main(void)
{
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    cudaArray_t a, b;
    if (!check_cuda(cudaMallocArray(&a, &desc, W, H), "cudaMallocArray") ||
        !check_cuda(cudaMallocArray(&b, &desc, W2, H), "cudaMallocArray (narrower)"))
        return check_exit_status();
    host_copies(a);
    device_and_async_copies(a);
    array_to_array(a, b);
    one_dimensional();
    check_cuda(cudaFreeArray(a), "cudaFreeArray");
    check_cuda(cudaFreeArray(b), "cudaFreeArray (narrower)");
    return check_exit_status();
}
