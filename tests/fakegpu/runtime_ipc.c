// Fake libcudart: IPC handles, on the fake libcuda's (ipc.c).  The runtime's
// handles and flags are the driver's, byte for byte.
#include <cuda.h>
#include <cuda_runtime_api.h>

cudaError_t fg_rt_enter(void);
cudaError_t fg_rt_ret(cudaError_t e);

_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle), "mem handle");
_Static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(CUipcEventHandle), "event handle");

// Runs a driver call in the thread's context and returns its result as the
// runtime's (the codes are the same numbers).
#define CALL(expr)                                  \
    do {                                            \
        cudaError_t e_ = fg_rt_enter();             \
        if (e_ == cudaSuccess)                      \
            e_ = (cudaError_t)(expr);               \
        return fg_rt_ret(e_);                       \
    } while (0)

cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    CALL(cuIpcGetMemHandle((CUipcMemHandle *)(void *)handle, (CUdeviceptr)devPtr));
}

cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                           unsigned int flags)
{
    CUipcMemHandle h;
    __builtin_memcpy(&h, &handle, sizeof h);
    CALL(cuIpcOpenMemHandle_v2((CUdeviceptr *)(void *)devPtr, h, flags));
}

cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *devPtr)
{
    CALL(cuIpcCloseMemHandle((CUdeviceptr)devPtr));
}

cudaError_t CUDARTAPI cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    CALL(cuIpcGetEventHandle((CUipcEventHandle *)(void *)handle, (CUevent)event));
}

cudaError_t CUDARTAPI cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    CUipcEventHandle h;
    __builtin_memcpy(&h, &handle, sizeof h);
    CALL(cuIpcOpenEventHandle((CUevent *)(void *)event, h));
}
