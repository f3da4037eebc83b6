/* rgpud must refuse context and function handles it never handed out: on a
 * real driver a destroyed or invented context passed to cuCtxSetCurrent can
 * crash the process, so this test only ever runs through rgpu. */
#include <cuda.h>
#include <stdio.h>

static int failures;

static void expect(CUresult got, CUresult want, const char *what)
{
    if (got == want) {
        printf("ok %s\n", what);
    } else {
        printf("FAIL %s: got %d, want %d\n", what, (int)got, (int)want);
        failures++;
    }
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx = NULL, cur = NULL;

    expect(cuInit(0), CUDA_SUCCESS, "cuInit");
    expect(cuDeviceGet(&dev, 0), CUDA_SUCCESS, "cuDeviceGet");
    expect(cuCtxSetCurrent((CUcontext)0x1234), CUDA_ERROR_INVALID_CONTEXT,
           "invented context refused");
    expect(cuCtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS, "cuCtxCreate");
    expect(cuCtxSetCurrent(ctx), CUDA_SUCCESS, "created context accepted");
    expect(cuCtxGetCurrent(&cur), CUDA_SUCCESS, "cuCtxGetCurrent");
    expect(cur == ctx ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, CUDA_SUCCESS, "current is created");
    expect(cuCtxDestroy(ctx), CUDA_SUCCESS, "cuCtxDestroy");
    expect(cuCtxSetCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT, "destroyed context refused");
    expect(cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT, "destroyed context not pushed");
    expect(cuCtxDestroy(ctx), CUDA_ERROR_INVALID_CONTEXT, "destroyed context not destroyed twice");
    expect(cuCtxSetCurrent(NULL), CUDA_SUCCESS, "NULL context accepted");
    void *args[] = { NULL };
    expect(cuLaunchKernel((CUfunction)0x1234, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
           CUDA_ERROR_INVALID_HANDLE, "invented function refused");
    return failures ? 1 : 0;
}
