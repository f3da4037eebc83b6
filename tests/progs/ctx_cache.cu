// The runtime's calls that change contexts behind the driver API's back:
// rgpu answers cuCtxGetCurrent and cuDevicePrimaryCtxGetState from a cache
// (stubs/cuda_contexts.c), which cudaDeviceReset and cudaSetDeviceFlags must
// drop.  The same program natively and through rgpu prints the same lines.
#include "check.h"

#include <cuda.h>

static int primary_active(unsigned *flags)
{
    int active = -1;
    unsigned f = 0;
    if (cuDevicePrimaryCtxGetState(0, &f, &active) != CUDA_SUCCESS)
        return -1;
    if (flags)
        *flags = f;
    return active;
}

int main()
{
    CUcontext cur = NULL, again = NULL;
    unsigned flags = 0;

    check_cuda(cudaSetDevice(0), "cudaSetDevice 0");
    check_cuda(cudaFree(0), "cudaFree(0) makes the runtime's context");
    check(primary_active(NULL) == 1, "primary context active under the runtime", "not active");
    check(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL, "a context is current",
          "none");
    check(cuCtxGetCurrent(&again) == CUDA_SUCCESS && again == cur, "the same context, asked again",
          "another");

    check_cuda(cudaDeviceReset(), "cudaDeviceReset");
    check(primary_active(NULL) == 0, "primary context inactive after cudaDeviceReset", "active");

    check_cuda(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), "cudaSetDeviceFlags blocking");
    check(primary_active(&flags) >= 0 && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC,
          "cudaSetDeviceFlags shows in the primary context's flags", "flags 0x%x", flags);
    check_cuda(cudaFree(0), "cudaFree(0) after the reset");
    check(primary_active(&flags) == 1 && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC,
          "active again, with the flags set", "flags 0x%x", flags);

    check_cuda(cudaDeviceReset(), "cudaDeviceReset at the end");
    return check_exit_status();
}
