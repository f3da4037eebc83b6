// cudaMemset, cudaMemsetAsync and cudaMemset2D on odd sizes and offsets,
// checked against a host model of the whole buffer (so that writes outside
// the range are caught too); cudaMemGetInfo sanity.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define BUF (1u << 20)

// (offset, length, value): odd sizes, unaligned offsets, a zero length, and
// values whose high bits must be ignored (only the low byte is used).
static const struct { size_t off, n; int value; } cases[] = {
    {0, 1, 0x11},        {1, 1, 0x22},          {3, 5, 0x33},
    {7, 4097, 0x44},     {1000, 0, 0x55},       {4095, 65537, 0x166},
    {BUF - 3, 3, -1},    {12345, 300001, 0x77}, {0, BUF, 0},
};

// Copies the device buffer back and compares it with the model.
static void compare(const uint8_t *dev, const uint8_t *model, uint8_t *tmp, const char *name)
{
    cudaError_t e = cudaMemcpy(tmp, dev, BUF, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        check(false, name, "cudaMemcpy: %s", cudaGetErrorName(e));
        return;
    }
    size_t i = 0;
    while (i < BUF && tmp[i] == model[i])
        i++;
    check(i == BUF, name, "byte %zu is 0x%02x, want 0x%02x", i, i < BUF ? tmp[i] : 0,
          i < BUF ? model[i] : 0);
}

static void test_linear(bool async, cudaStream_t s)
{
    const char *fn = async ? "cudaMemsetAsync" : "cudaMemset";
    uint8_t *dev, *model = (uint8_t *)malloc(BUF), *tmp = (uint8_t *)malloc(BUF);
    char name[128];

    if (!check_cuda(cudaMalloc((void **)&dev, BUF), fmt_name(name, sizeof name, "%s cudaMalloc", fn)))
        return;
    // Start from a known non-zero state so that a dropped memset shows.
    memset(model, 0xA5, BUF);
    check_cuda(cudaMemcpy(dev, model, BUF, cudaMemcpyHostToDevice),
               fmt_name(name, sizeof name, "%s init", fn));

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t off = cases[i].off, n = cases[i].n;
        cudaError_t e;
        if (async) {
            e = cudaMemsetAsync(dev + off, cases[i].value, n, s);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(s);
        } else {
            e = cudaMemset(dev + off, cases[i].value, n);
        }
        memset(model + off, (uint8_t)cases[i].value, n);
        fmt_name(name, sizeof name, "%s off %zu len %zu value 0x%x", fn, off, n, cases[i].value);
        if (check(e == cudaSuccess, name, "%s", cudaGetErrorName(e)))
            compare(dev, model, tmp, fmt_name(name, sizeof name, "%s off %zu len %zu data", fn, off, n));
    }
    check_cuda(cudaFree(dev), fmt_name(name, sizeof name, "%s cudaFree", fn));
    free(model);
    free(tmp);
}

// cudaMemset2D of the whole pitched area, then of an inner rectangle at an
// odd column; read back the rows (width bytes each) and compare.
static void test_2d(void)
{
    const size_t width = 333, height = 17;
    const size_t x = 5, y = 2, w = 100, h = 7;
    uint8_t *dev, model[17][333], got[17][333];
    size_t pitch;

    if (!check_cuda(cudaMallocPitch((void **)&dev, &pitch, width, height), "2d cudaMallocPitch"))
        return;
    check_cuda(cudaMemset2D(dev, pitch, 0x11, width, height), "2d cudaMemset2D whole");
    check_cuda(cudaMemset2D(dev + y * pitch + x, pitch, 0x22, w, h), "2d cudaMemset2D inner");
    memset(model, 0x11, sizeof model);
    for (size_t r = y; r < y + h; r++)
        memset(&model[r][x], 0x22, w);
    memset(got, 0, sizeof got);
    check_cuda(cudaMemcpy2D(got, width, dev, pitch, width, height, cudaMemcpyDeviceToHost),
               "2d cudaMemcpy2D");
    check(memcmp(got, model, sizeof model) == 0, "2d data", "mismatch");
    check_cuda(cudaFree(dev), "2d cudaFree");
}

int main(void)
{
    cudaStream_t s;
    size_t free_b = 0, total_b = 0;

    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    test_linear(false, s);
    test_linear(true, s);
    test_2d();

    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    check(e == cudaSuccess && total_b > 0 && free_b <= total_b, "cudaMemGetInfo free <= total",
          "%s, free %zu total %zu", cudaGetErrorName(e), free_b, total_b);

    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    return check_exit_status();
}
