// Fake libcudart.so.13, built only on the public API of the fake
// libcuda.so.1, as NVIDIA's runtime sits on its driver: one set of
// allocations, streams and modules serves both libraries.
//
// Runtime state is per thread (current device, last error); the runtime
// works in the current driver context, retaining the device's primary
// context and making it current when the thread has none.
//
// Error codes: the runtime and driver enums give the same number to every
// code passed through here (asserted below), so driver results are returned
// as they are, except where the runtime reports a different code (bad
// function handles, bad launch configurations, bad pitches).
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "rgpu_device_props.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAME(rt, drv) _Static_assert((int)(rt) == (int)(drv), #rt)
SAME(cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE);
SAME(cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY);
SAME(cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED);
SAME(cudaErrorInvalidDevice, CUDA_ERROR_INVALID_DEVICE);
SAME(cudaErrorInvalidKernelImage, CUDA_ERROR_INVALID_IMAGE);
SAME(cudaErrorDeviceUninitialized, CUDA_ERROR_INVALID_CONTEXT);
SAME(cudaErrorNoKernelImageForDevice, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME(cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE);
SAME(cudaErrorSymbolNotFound, CUDA_ERROR_NOT_FOUND);
SAME(cudaErrorNotReady, CUDA_ERROR_NOT_READY);
SAME(cudaErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(cudaErrorAssert, CUDA_ERROR_ASSERT);
SAME(cudaErrorLaunchOutOfResources, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
SAME(cudaErrorContextIsDestroyed, CUDA_ERROR_CONTEXT_IS_DESTROYED);
SAME(cudaErrorMisalignedAddress, CUDA_ERROR_MISALIGNED_ADDRESS);
SAME(cudaErrorLaunchFailure, CUDA_ERROR_LAUNCH_FAILED);
SAME(cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED);
SAME(cudaDevAttrComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(cudaDevAttrMaxSharedMemoryPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME(cudaJitInfoLogBuffer, CU_JIT_INFO_LOG_BUFFER);
SAME(cudaJitErrorLogBufferSizeBytes, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
SAME(cudaStreamNonBlocking, CU_STREAM_NON_BLOCKING);
SAME(cudaEventDisableTiming, CU_EVENT_DISABLE_TIMING);
SAME(cudaEventInterprocess, CU_EVENT_INTERPROCESS);

#define PITCH_ALIGN 512

static _Thread_local cudaError_t last_error;
static _Thread_local int cur_device;
#define FG_RT_MAX_DEVICES 8             // the fake libcuda's FG_MAX_DEVICES

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primaries[FG_RT_MAX_DEVICES];  // each retained once, kept
static _Atomic int sticky;              // a fault seen: reported until reset

static int is_sticky(cudaError_t e)
{
    return e == cudaErrorIllegalAddress || e == cudaErrorHardwareStackError ||
           e == cudaErrorIllegalInstruction || e == cudaErrorMisalignedAddress ||
           e == cudaErrorInvalidAddressSpace || e == cudaErrorInvalidPc ||
           e == cudaErrorLaunchFailure || e == cudaErrorAssert;
}

// Every runtime call returns through here: failures become the thread's
// last error.
static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) {
        last_error = e;
        if (is_sticky(e))
            atomic_store(&sticky, (int)e);
    }
    return e;
}

static cudaError_t rt(CUresult r) { return (cudaError_t)r; }

// A bad function handle is a bad device function to the runtime.
static cudaError_t rt_func(CUresult r)
{
    return r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_NOT_FOUND
               ? cudaErrorInvalidDeviceFunction : rt(r);
}

// Makes the primary context of the thread's device current, retaining it
// the first time.
static CUresult use_primary(void)
{
    CUresult r = CUDA_SUCCESS;
    if (cur_device < 0 || cur_device >= FG_RT_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    if (!primaries[cur_device])
        r = cuDevicePrimaryCtxRetain(&primaries[cur_device], cur_device);
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS)
        r = cuCtxSetCurrent(primaries[cur_device]);
    return r;
}

// Makes sure the thread has a current context, as the runtime's implicit
// initialisation does.
static cudaError_t ctx(void)
{
    CUcontext cur = NULL;
    CUresult r = cuInit(0);

    if (r == CUDA_SUCCESS)
        r = cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS || cur)
        return rt(r);
    return rt(use_primary());
}

// For runtime_graph.c, the graph calls: the same entry and return.
__attribute__((visibility("hidden"))) cudaError_t fg_rt_enter(void);
__attribute__((visibility("hidden"))) cudaError_t fg_rt_ret(cudaError_t e);
cudaError_t fg_rt_enter(void) { return ctx(); }
cudaError_t fg_rt_ret(cudaError_t e) { return ret(e); }

// Runs a driver call in the thread's context and returns its result.
#define CALL(expr)                                  \
    do {                                            \
        cudaError_t e_ = ctx();                     \
        if (e_ == cudaSuccess)                      \
            e_ = rt(expr);                          \
        return ret(e_);                             \
    } while (0)

// ---- Errors -----------------------------------------------------------------------------

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t e = last_error;
    int s = atomic_load(&sticky);

    last_error = cudaSuccess;
    return s ? (cudaError_t)s : e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    int s = atomic_load(&sticky);

    return s ? (cudaError_t)s : last_error;
}

struct code_name { int code; const char *name; };

static const struct code_name names[] = {
// Generated from driver_types.h (CUDA 13.0) enum cudaError.
    { 0, "cudaSuccess" },
    { 1, "cudaErrorInvalidValue" },
    { 2, "cudaErrorMemoryAllocation" },
    { 3, "cudaErrorInitializationError" },
    { 4, "cudaErrorCudartUnloading" },
    { 5, "cudaErrorProfilerDisabled" },
    { 6, "cudaErrorProfilerNotInitialized" },
    { 7, "cudaErrorProfilerAlreadyStarted" },
    { 8, "cudaErrorProfilerAlreadyStopped" },
    { 9, "cudaErrorInvalidConfiguration" },
    { 12, "cudaErrorInvalidPitchValue" },
    { 13, "cudaErrorInvalidSymbol" },
    { 16, "cudaErrorInvalidHostPointer" },
    { 17, "cudaErrorInvalidDevicePointer" },
    { 18, "cudaErrorInvalidTexture" },
    { 19, "cudaErrorInvalidTextureBinding" },
    { 20, "cudaErrorInvalidChannelDescriptor" },
    { 21, "cudaErrorInvalidMemcpyDirection" },
    { 22, "cudaErrorAddressOfConstant" },
    { 23, "cudaErrorTextureFetchFailed" },
    { 24, "cudaErrorTextureNotBound" },
    { 25, "cudaErrorSynchronizationError" },
    { 26, "cudaErrorInvalidFilterSetting" },
    { 27, "cudaErrorInvalidNormSetting" },
    { 28, "cudaErrorMixedDeviceExecution" },
    { 31, "cudaErrorNotYetImplemented" },
    { 32, "cudaErrorMemoryValueTooLarge" },
    { 34, "cudaErrorStubLibrary" },
    { 35, "cudaErrorInsufficientDriver" },
    { 36, "cudaErrorCallRequiresNewerDriver" },
    { 37, "cudaErrorInvalidSurface" },
    { 43, "cudaErrorDuplicateVariableName" },
    { 44, "cudaErrorDuplicateTextureName" },
    { 45, "cudaErrorDuplicateSurfaceName" },
    { 46, "cudaErrorDevicesUnavailable" },
    { 49, "cudaErrorIncompatibleDriverContext" },
    { 52, "cudaErrorMissingConfiguration" },
    { 53, "cudaErrorPriorLaunchFailure" },
    { 65, "cudaErrorLaunchMaxDepthExceeded" },
    { 66, "cudaErrorLaunchFileScopedTex" },
    { 67, "cudaErrorLaunchFileScopedSurf" },
    { 68, "cudaErrorSyncDepthExceeded" },
    { 69, "cudaErrorLaunchPendingCountExceeded" },
    { 98, "cudaErrorInvalidDeviceFunction" },
    { 100, "cudaErrorNoDevice" },
    { 101, "cudaErrorInvalidDevice" },
    { 102, "cudaErrorDeviceNotLicensed" },
    { 103, "cudaErrorSoftwareValidityNotEstablished" },
    { 127, "cudaErrorStartupFailure" },
    { 200, "cudaErrorInvalidKernelImage" },
    { 201, "cudaErrorDeviceUninitialized" },
    { 205, "cudaErrorMapBufferObjectFailed" },
    { 206, "cudaErrorUnmapBufferObjectFailed" },
    { 207, "cudaErrorArrayIsMapped" },
    { 208, "cudaErrorAlreadyMapped" },
    { 209, "cudaErrorNoKernelImageForDevice" },
    { 210, "cudaErrorAlreadyAcquired" },
    { 211, "cudaErrorNotMapped" },
    { 212, "cudaErrorNotMappedAsArray" },
    { 213, "cudaErrorNotMappedAsPointer" },
    { 214, "cudaErrorECCUncorrectable" },
    { 215, "cudaErrorUnsupportedLimit" },
    { 216, "cudaErrorDeviceAlreadyInUse" },
    { 217, "cudaErrorPeerAccessUnsupported" },
    { 218, "cudaErrorInvalidPtx" },
    { 219, "cudaErrorInvalidGraphicsContext" },
    { 220, "cudaErrorNvlinkUncorrectable" },
    { 221, "cudaErrorJitCompilerNotFound" },
    { 222, "cudaErrorUnsupportedPtxVersion" },
    { 223, "cudaErrorJitCompilationDisabled" },
    { 224, "cudaErrorUnsupportedExecAffinity" },
    { 225, "cudaErrorUnsupportedDevSideSync" },
    { 226, "cudaErrorContained" },
    { 300, "cudaErrorInvalidSource" },
    { 301, "cudaErrorFileNotFound" },
    { 302, "cudaErrorSharedObjectSymbolNotFound" },
    { 303, "cudaErrorSharedObjectInitFailed" },
    { 304, "cudaErrorOperatingSystem" },
    { 400, "cudaErrorInvalidResourceHandle" },
    { 401, "cudaErrorIllegalState" },
    { 402, "cudaErrorLossyQuery" },
    { 500, "cudaErrorSymbolNotFound" },
    { 600, "cudaErrorNotReady" },
    { 700, "cudaErrorIllegalAddress" },
    { 701, "cudaErrorLaunchOutOfResources" },
    { 702, "cudaErrorLaunchTimeout" },
    { 703, "cudaErrorLaunchIncompatibleTexturing" },
    { 704, "cudaErrorPeerAccessAlreadyEnabled" },
    { 705, "cudaErrorPeerAccessNotEnabled" },
    { 708, "cudaErrorSetOnActiveProcess" },
    { 709, "cudaErrorContextIsDestroyed" },
    { 710, "cudaErrorAssert" },
    { 711, "cudaErrorTooManyPeers" },
    { 712, "cudaErrorHostMemoryAlreadyRegistered" },
    { 713, "cudaErrorHostMemoryNotRegistered" },
    { 714, "cudaErrorHardwareStackError" },
    { 715, "cudaErrorIllegalInstruction" },
    { 716, "cudaErrorMisalignedAddress" },
    { 717, "cudaErrorInvalidAddressSpace" },
    { 718, "cudaErrorInvalidPc" },
    { 719, "cudaErrorLaunchFailure" },
    { 720, "cudaErrorCooperativeLaunchTooLarge" },
    { 721, "cudaErrorTensorMemoryLeak" },
    { 800, "cudaErrorNotPermitted" },
    { 801, "cudaErrorNotSupported" },
    { 802, "cudaErrorSystemNotReady" },
    { 803, "cudaErrorSystemDriverMismatch" },
    { 804, "cudaErrorCompatNotSupportedOnDevice" },
    { 805, "cudaErrorMpsConnectionFailed" },
    { 806, "cudaErrorMpsRpcFailure" },
    { 807, "cudaErrorMpsServerNotReady" },
    { 808, "cudaErrorMpsMaxClientsReached" },
    { 809, "cudaErrorMpsMaxConnectionsReached" },
    { 810, "cudaErrorMpsClientTerminated" },
    { 811, "cudaErrorCdpNotSupported" },
    { 812, "cudaErrorCdpVersionMismatch" },
    { 900, "cudaErrorStreamCaptureUnsupported" },
    { 901, "cudaErrorStreamCaptureInvalidated" },
    { 902, "cudaErrorStreamCaptureMerge" },
    { 903, "cudaErrorStreamCaptureUnmatched" },
    { 904, "cudaErrorStreamCaptureUnjoined" },
    { 905, "cudaErrorStreamCaptureIsolation" },
    { 906, "cudaErrorStreamCaptureImplicit" },
    { 907, "cudaErrorCapturedEvent" },
    { 908, "cudaErrorStreamCaptureWrongThread" },
    { 909, "cudaErrorTimeout" },
    { 910, "cudaErrorGraphExecUpdateFailure" },
    { 911, "cudaErrorExternalDevice" },
    { 912, "cudaErrorInvalidClusterSize" },
    { 913, "cudaErrorFunctionNotLoaded" },
    { 914, "cudaErrorInvalidResourceType" },
    { 915, "cudaErrorInvalidResourceConfiguration" },
    { 999, "cudaErrorUnknown" },
    { 10000, "cudaErrorApiFailureBase" },
};

// Texts of codes the driver does not have under the same number.
static const struct code_name texts[] = {
    { cudaErrorInvalidConfiguration, "invalid configuration argument" },
    { cudaErrorInvalidPitchValue, "invalid pitch argument" },
    { cudaErrorInvalidSymbol, "invalid device symbol" },
    { cudaErrorInvalidDevicePointer, "invalid device pointer" },
    { cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy" },
    { cudaErrorMissingConfiguration, "__global__ function call is not configured" },
    { cudaErrorInvalidDeviceFunction, "invalid device function" },
};

const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == (int)error)
            return names[i].name;
    return "unrecognized error code";
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    const char *s = NULL;

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (texts[i].code == (int)error)
            return texts[i].name;
    if (cuGetErrorString((CUresult)error, &s) == CUDA_SUCCESS && s)
        return s;
    return "unrecognized error code";
}

// ---- Device -------------------------------------------------------------------------------

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    CUresult r = cuInit(0);

    if (!count)
        return ret(cudaErrorInvalidValue);
    *count = 0;
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(count);
    return ret(rt(r));
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= n)
        return ret(cudaErrorInvalidDevice);
    cur_device = device;
    // CUDA 12+ initialises the device's primary context right here, and
    // makes it current unless a context of that device already is.
    CUcontext cur = NULL;
    CUdevice cur_dev;
    if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS &&
        cur_dev == device)
        return cudaSuccess;
    return ret(rt(use_primary()));
}

// The device of the thread's current context, where there is one (a
// context made current through the driver API counts), else the last
// device set.
cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    CUcontext cur = NULL;
    CUdevice dev;
    if (!device)
        return ret(cudaErrorInvalidValue);
    if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && cuCtxGetDevice(&dev) == CUDA_SUCCESS)
        cur_device = dev;
    *device = cur_device;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                             int device)
{
    CUresult r = cuInit(0);

    if (r == CUDA_SUCCESS)
        r = cuDeviceGetAttribute(value, (CUdevice_attribute)attr, device);
    return ret(rt(r));
}

static int attr(CUdevice_attribute a, int device)
{
    int v = 0;

    cuDeviceGetAttribute(&v, a, device);
    return v;
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *p,
                                              int device)
{
    CUresult r = cuInit(0);

    if (!p)
        return ret(cudaErrorInvalidValue);
    if (r == CUDA_SUCCESS)
        r = cuDeviceTotalMem_v2(&p->totalGlobalMem, device);   // checks device
    if (r != CUDA_SUCCESS)
        return ret(rt(r));
    memset(p, 0, sizeof *p);
    cuDeviceTotalMem_v2(&p->totalGlobalMem, device);
    cuDeviceGetName(p->name, sizeof p->name, device);
    cuDeviceGetUuid_v2(&p->uuid, device);
#define A(field, a) p->field = attr(CU_DEVICE_ATTRIBUTE_##a, device);
    RGPU_DEVICE_PROP_ATTRIBUTES(A)
#undef A
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int *version)
{
    return ret(rt(cuDriverGetVersion(version)));
}

/* The version this runtime says it is: its headers' (CUDA 13.0's with
 * the toolkit: it has what 13.0 has), or FAKEGPU_CUDART_VERSION where it
 * is built as another release's face (the CUDA 12 one), or
 * RGPU_FAKEGPU_CUDART_VERSION from the session's environment: a runtime
 * claiming a newer version than its functions, so that a test reaches
 * the server's own refusal of a function it lacks. */
#ifndef FAKEGPU_CUDART_VERSION
#define FAKEGPU_CUDART_VERSION CUDART_VERSION
#endif
cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *version)
{
    const char *claimed = getenv("RGPU_FAKEGPU_CUDART_VERSION");
    if (!version)
        return ret(cudaErrorInvalidValue);
    *version = claimed && atoi(claimed) > 0 ? atoi(claimed) : FAKEGPU_CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    CALL(cuCtxSynchronize());
}

// The runtime's profiler calls are the driver's, in the thread's context.
cudaError_t CUDARTAPI cudaProfilerStart(void)
{
    CALL(cuProfilerStart());
}

cudaError_t CUDARTAPI cudaProfilerStop(void)
{
    CALL(cuProfilerStop());
}

// Frees everything of the primary context and forgets a fault; the
// runtime lets go of it, and its next call retains it afresh.
cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    CUresult r = cuInit(0);

    if (r == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxReset_v2(cur_device);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        if (primaries[cur_device])
            (void)cuDevicePrimaryCtxRelease_v2(cur_device);
        primaries[cur_device] = NULL;
        pthread_mutex_unlock(&lock);
        (void)cuCtxSetCurrent(NULL);
        atomic_store(&sticky, 0);
        last_error = cudaSuccess;
    }
    return ret(rt(r));
}

// The flags the primary context gets when it is next made active.
cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int flags)
{
    CUresult r = cuInit(0);

    if (r == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxSetFlags_v2(cur_device, flags);
    return ret(rt(r));
}

// The primary context's flags; mapped host memory is always on, as the
// runtime reports it since CUDA 4.
cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int *flags)
{
    unsigned int f = 0;
    int active = 0;
    CUresult r = cuInit(0);

    if (!flags)
        return ret(cudaErrorInvalidValue);
    if (r == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxGetState(cur_device, &f, &active);
    if (r == CUDA_SUCCESS)
        *flags = f | cudaDeviceMapHost;
    return ret(rt(r));
}

// ---- Memory -------------------------------------------------------------------------------

cudaError_t CUDARTAPI cudaMalloc(void **p, size_t size)
{
    CUdeviceptr d = 0;
    cudaError_t e;

    if (!p)
        return ret(cudaErrorInvalidValue);
    e = ctx();
    if (e == cudaSuccess && size > 0)
        e = rt(cuMemAlloc_v2(&d, size));
    if (e == cudaSuccess)
        *p = (void *)(uintptr_t)d;      // size 0 gives NULL, as CUDA does
    return ret(e);
}

cudaError_t CUDARTAPI cudaMallocPitch(void **p, size_t *pitch, size_t width,
                                      size_t height)
{
    size_t pp = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    cudaError_t e;

    if (!p || !pitch)
        return ret(cudaErrorInvalidValue);
    if (height && pp > SIZE_MAX / height)
        return ret(cudaErrorMemoryAllocation);
    e = cudaMalloc(p, pp * height);
    if (e == cudaSuccess)
        *pitch = pp;
    return e;
}

// Device (or managed) memory as the fake driver knows it, with its device;
// anything else is memory CUDA never saw (the fake pins nothing).
cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    int ordinal = 0;
    unsigned managed = 0;
    if (!a)
        return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    if (cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d) != CUDA_SUCCESS) {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *)p;
        return cudaSuccess;
    }
    cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d);
    a->type = managed ? cudaMemoryTypeManaged : cudaMemoryTypeDevice;
    a->device = ordinal;
    a->devicePointer = (void *)p;
    a->hostPointer = managed ? (void *)p : NULL;
    return cudaSuccess;
}

// cudaFree(NULL) does nothing but still reports a sticky error, which the
// fake driver's cuMemFree(0) does too.
cudaError_t CUDARTAPI cudaFree(void *p)
{
    CALL(cuMemFree_v2((CUdeviceptr)(uintptr_t)p));
}

// ---- Managed memory: the driver's (managed.c), whose numbers the runtime's
// enums and cudaMemLocation share -------------------------------------------------------

cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
    CUdeviceptr d = 0;
    cudaError_t e;

    if (!p)
        return ret(cudaErrorInvalidValue);
    e = ctx();
    if (e == cudaSuccess)
        e = rt(cuMemAllocManaged(&d, size, flags));
    if (e == cudaSuccess)
        *p = (void *)(uintptr_t)d;
    return ret(e);
}

static CUmemLocation location(struct cudaMemLocation loc)
{
    return (CUmemLocation){ (CUmemLocationType)loc.type, loc.id };
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *p, size_t count,
                                           struct cudaMemLocation loc, unsigned int flags,
                                           cudaStream_t s)
{
    CALL(cuMemPrefetchAsync_v2((CUdeviceptr)(uintptr_t)p, count, location(loc), flags,
                               (CUstream)s));
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *p, size_t count,
                                                struct cudaMemLocation loc, unsigned int flags,
                                                cudaStream_t s)
{
    return cudaMemPrefetchAsync(p, count, loc, flags, s ? s : cudaStreamPerThread);
}

cudaError_t CUDARTAPI cudaMemAdvise(const void *p, size_t count, enum cudaMemoryAdvise advice,
                                    struct cudaMemLocation loc)
{
    CALL(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)p, count, (CUmem_advise)advice,
                        location(loc)));
}

cudaError_t CUDARTAPI cudaMemRangeGetAttribute(void *data, size_t dataSize,
                                               enum cudaMemRangeAttribute attribute,
                                               const void *p, size_t count)
{
    CALL(cuMemRangeGetAttribute(data, dataSize, (CUmem_range_attribute)attribute,
                                (CUdeviceptr)(uintptr_t)p, count));
}

cudaError_t CUDARTAPI cudaStreamAttachMemAsync(cudaStream_t s, void *p, size_t length,
                                               unsigned int flags)
{
    CALL(cuStreamAttachMemAsync((CUstream)s, (CUdeviceptr)(uintptr_t)p, length, flags));
}

cudaError_t CUDARTAPI cudaStreamAttachMemAsync_ptsz(cudaStream_t s, void *p, size_t length,
                                                    unsigned int flags)
{
    return cudaStreamAttachMemAsync(s ? s : cudaStreamPerThread, p, length, flags);
}

// ---- Stream-ordered allocation: the fake driver's default pool -------------------------

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool,
                                              cudaStream_t s)
{
    CUdeviceptr d = 0;
    cudaError_t e;

    if (!p)
        return ret(cudaErrorInvalidValue);
    e = ctx();
    if (e == cudaSuccess)
        e = rt(cuMemAllocFromPoolAsync(&d, size, (CUmemoryPool)pool, (CUstream)s));
    if (e == cudaSuccess)
        *p = (void *)(uintptr_t)d;
    return ret(e);
}

cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    CUmemoryPool pool = NULL;
    cudaError_t e = rt(cuDeviceGetDefaultMemPool(&pool, cur_device));

    return e == cudaSuccess ? cudaMallocFromPoolAsync(p, size, (cudaMemPool_t)pool, s) : ret(e);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    CALL(cuMemFreeAsync((CUdeviceptr)(uintptr_t)p, (CUstream)s));
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    return ret(rt(cuDeviceGetDefaultMemPool((CUmemoryPool *)pool, device)));
}

// cudaMemPoolAttr has cuMemPool_attribute's values.
cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    return ret(rt(cuMemPoolSetAttribute((CUmemoryPool)pool, (CUmemPool_attribute)attr, value)));
}

cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    return ret(rt(cuMemPoolGetAttribute((CUmemoryPool)pool, (CUmemPool_attribute)attr, value)));
}

cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t pool, size_t minBytesToKeep)
{
    return ret(rt(cuMemPoolTrimTo((CUmemoryPool)pool, minBytesToKeep)));
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    CALL(cuMemGetInfo_v2(free_bytes, total));
}

static CUresult copy(void *dst, const void *src, size_t n,
                     enum cudaMemcpyKind kind, int async, cudaStream_t s)
{
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst;
    CUdeviceptr sp = (CUdeviceptr)(uintptr_t)src;

    switch (kind) {
    case cudaMemcpyHostToDevice:
        return async ? cuMemcpyHtoDAsync_v2(d, src, n, s)
                     : cuMemcpyHtoD_v2(d, src, n);
    case cudaMemcpyDeviceToHost:
        return async ? cuMemcpyDtoHAsync_v2(dst, sp, n, s)
                     : cuMemcpyDtoH_v2(dst, sp, n);
    case cudaMemcpyDeviceToDevice:
        return async ? cuMemcpyDtoDAsync_v2(d, sp, n, s)
                     : cuMemcpyDtoD_v2(d, sp, n);
    default:        // host to host, or inferred from the addresses
        return async ? cuMemcpyAsync(d, sp, n, s) : cuMemcpy(d, sp, n);
    }
}

static cudaError_t memcpy_entry(void *dst, const void *src, size_t n,
                                enum cudaMemcpyKind kind, int async,
                                cudaStream_t s)
{
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    if ((unsigned)kind > cudaMemcpyDefault)
        return ret(cudaErrorInvalidMemcpyDirection);
    return ret(rt(copy(dst, src, n, kind, async, s)));
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t n,
                                 enum cudaMemcpyKind kind)
{
    return memcpy_entry(dst, src, n, kind, 0, NULL);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                      enum cudaMemcpyKind kind, cudaStream_t s)
{
    return memcpy_entry(dst, src, n, kind, 1, s);
}

static CUmemorytype memtype(enum cudaMemcpyKind kind, int is_src)
{
    switch (kind) {
    case cudaMemcpyHostToHost: return CU_MEMORYTYPE_HOST;
    case cudaMemcpyHostToDevice: return is_src ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    case cudaMemcpyDeviceToHost: return is_src ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    case cudaMemcpyDeviceToDevice: return CU_MEMORYTYPE_DEVICE;
    default: return CU_MEMORYTYPE_UNIFIED;
    }
}

static cudaError_t memcpy2d_entry(void *dst, size_t dpitch, const void *src,
                                  size_t spitch, size_t width, size_t height,
                                  enum cudaMemcpyKind kind, int async,
                                  cudaStream_t s)
{
    CUDA_MEMCPY2D c;
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    if ((unsigned)kind > cudaMemcpyDefault)
        return ret(cudaErrorInvalidMemcpyDirection);
    if (dpitch < width || spitch < width)
        return ret(cudaErrorInvalidPitchValue);
    memset(&c, 0, sizeof c);
    c.srcMemoryType = memtype(kind, 1);
    c.dstMemoryType = memtype(kind, 0);
    c.srcHost = src;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcPitch = spitch;
    c.dstHost = dst;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    return ret(rt(async ? cuMemcpy2DAsync_v2(&c, s) : cuMemcpy2D_v2(&c)));
}

cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src,
                                   size_t spitch, size_t width, size_t height,
                                   enum cudaMemcpyKind kind)
{
    return memcpy2d_entry(dst, dpitch, src, spitch, width, height, kind, 0,
                          NULL);
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch,
                                        const void *src, size_t spitch,
                                        size_t width, size_t height,
                                        enum cudaMemcpyKind kind,
                                        cudaStream_t s)
{
    return memcpy2d_entry(dst, dpitch, src, spitch, width, height, kind, 1, s);
}

cudaError_t CUDARTAPI cudaMemset(void *p, int value, size_t n)
{
    CALL(cuMemsetD8_v2((CUdeviceptr)(uintptr_t)p, (unsigned char)value, n));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void *p, int value, size_t n,
                                      cudaStream_t s)
{
    CALL(cuMemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)value, n, s));
}

cudaError_t CUDARTAPI cudaMemset2D(void *p, size_t pitch, int value,
                                   size_t width, size_t height)
{
    CALL(cuMemsetD2D8_v2((CUdeviceptr)(uintptr_t)p, pitch,
                         (unsigned char)value, width, height));
}

// ---- Streams and events -------------------------------------------------------------------

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s)
{
    CALL(cuStreamCreate(s, 0));
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s,
                                                unsigned int flags)
{
    CALL(cuStreamCreate(s, flags));
}

cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *s,
                                                   unsigned int flags,
                                                   int priority)
{
    CALL(cuStreamCreateWithPriority(s, flags, priority));
}

cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t s, unsigned int *flags)
{
    CALL(cuStreamGetFlags(s, flags));
}

cudaError_t CUDARTAPI cudaStreamGetPriority(cudaStream_t s, int *priority)
{
    CALL(cuStreamGetPriority(s, priority));
}

cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    CALL(cuCtxGetStreamPriorityRange(least, greatest));
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s)
{
    CALL(cuStreamDestroy_v2(s));
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s)
{
    CALL(cuStreamSynchronize(s));
}

// Host functions: the driver's (host_functions.c); a runtime callback's
// status is a cudaError_t, of the same number.  The driver's _ptsz forms are
// declared only under per-thread default streams.
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *data);
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *data,
                                          unsigned int flags);
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    CALL(cuLaunchHostFunc(s, fn, data));
}

cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    CALL(cuLaunchHostFunc_ptsz(s, fn, data));
}

cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *data,
                                            unsigned int flags)
{
    CALL(cuStreamAddCallback(s, (CUstreamCallback)cb, data, flags));
}

cudaError_t CUDARTAPI cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb,
                                                 void *data, unsigned int flags)
{
    CALL(cuStreamAddCallback_ptsz(s, (CUstreamCallback)cb, data, flags));
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t s)
{
    CALL(cuStreamQuery(s));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev,
                                          unsigned int flags)
{
    CALL(cuStreamWaitEvent(s, ev, flags));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *ev)
{
    CALL(cuEventCreate(ev, 0));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *ev,
                                               unsigned int flags)
{
    CALL(cuEventCreate(ev, flags));
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    CALL(cuEventRecord(ev, s));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t ev)
{
    CALL(cuEventSynchronize(ev));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t ev)
{
    CALL(cuEventQuery(ev));
}

cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                           cudaEvent_t end)
{
    CALL(cuEventElapsedTime_v2(ms, start, end));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t ev)
{
    CALL(cuEventDestroy_v2(ev));
}

// ---- Libraries and kernels ---------------------------------------------------------------

cudaError_t CUDARTAPI cudaLibraryLoadData(
    cudaLibrary_t *library, const void *code, enum cudaJitOption *jit_options,
    void **jit_values, unsigned int n_jit,
    enum cudaLibraryOption *lib_options, void **lib_values,
    unsigned int n_lib)
{
    CALL(cuLibraryLoadData(library, code, (CUjit_option *)jit_options,
                           jit_values, n_jit, (CUlibraryOption *)lib_options,
                           lib_values, n_lib));
}

cudaError_t CUDARTAPI cudaLibraryUnload(cudaLibrary_t library)
{
    CALL(cuLibraryUnload(library));
}

cudaError_t CUDARTAPI cudaLibraryGetKernel(cudaKernel_t *kernel,
                                           cudaLibrary_t library,
                                           const char *name)
{
    CALL(cuLibraryGetKernel(kernel, library, name));
}

cudaError_t CUDARTAPI cudaLibraryGetGlobal(void **dptr, size_t *bytes,
                                           cudaLibrary_t library,
                                           const char *name)
{
    CUdeviceptr d = 0;
    cudaError_t e = ctx();

    if (e == cudaSuccess)
        e = rt(cuLibraryGetGlobal(&d, bytes, library, name));
    if (e == cudaSuccess && dptr)
        *dptr = (void *)(uintptr_t)d;
    return ret(e);
}

// func is a cudaKernel_t from cudaLibraryGetKernel: the fake driver takes
// the same value as a CUfunction.
cudaError_t CUDARTAPI cudaFuncGetParamInfo(const void *func, size_t i,
                                           size_t *offset, size_t *size)
{
    CUresult r;
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    r = cuFuncGetParamInfo((CUfunction)(uintptr_t)func, i, offset, size);
    return ret(r == CUDA_ERROR_INVALID_HANDLE ? cudaErrorInvalidDeviceFunction
                                              : rt(r));
}

cudaError_t CUDARTAPI cudaFuncGetAttributes(struct cudaFuncAttributes *a,
                                            const void *func)
{
    CUfunction f = (CUfunction)(uintptr_t)func;
    int v[CU_FUNC_ATTRIBUTE_MAX];
    CUresult r = CUDA_SUCCESS;
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    if (!a)
        return ret(cudaErrorInvalidValue);
    for (int i = 0; i < CU_FUNC_ATTRIBUTE_MAX && r == CUDA_SUCCESS; i++)
        r = cuFuncGetAttribute(&v[i], (CUfunction_attribute)i, f);
    if (r != CUDA_SUCCESS)
        return ret(rt_func(r));
    memset(a, 0, sizeof *a);
    a->sharedSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
    a->constSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES];
    a->localSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES];
    a->maxThreadsPerBlock = v[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    a->numRegs = v[CU_FUNC_ATTRIBUTE_NUM_REGS];
    a->ptxVersion = v[CU_FUNC_ATTRIBUTE_PTX_VERSION];
    a->binaryVersion = v[CU_FUNC_ATTRIBUTE_BINARY_VERSION];
    a->cacheModeCA = v[CU_FUNC_ATTRIBUTE_CACHE_MODE_CA];
    a->maxDynamicSharedSizeBytes = v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
    a->preferredShmemCarveout = v[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT];
    a->clusterDimMustBeSet = v[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET];
    a->requiredClusterWidth = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
    a->requiredClusterHeight = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT];
    a->requiredClusterDepth = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH];
    a->clusterSchedulingPolicyPreference =
        v[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE];
    a->nonPortableClusterSizeAllowed =
        v[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr,
                                           int value)
{
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    // The runtime's attribute numbers are the driver's for these.
    return ret(rt_func(cuFuncSetAttribute((CUfunction)(uintptr_t)func,
                                          (CUfunction_attribute)attr, value)));
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    return ret(rt_func(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        numBlocks, (CUfunction)(uintptr_t)func, blockSize, dynamicSMemSize, flags)));
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks,
                                                                    const void *func,
                                                                    int blockSize,
                                                                    size_t dynamicSMemSize)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                  dynamicSMemSize, 0);
}

cudaError_t CUDARTAPI cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize,
                                                                const void *func, int numBlocks,
                                                                int blockSize)
{
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    return ret(rt_func(cuOccupancyAvailableDynamicSMemPerBlock(
        dynamicSmemSize, (CUfunction)(uintptr_t)func, numBlocks, blockSize)));
}

// What a launch with an impossible configuration reports.  Measured on an
// H200 (driver 580, CUDA 13.0 runtime): cudaErrorInvalidValue for every such
// launch (too many threads, an empty grid, too much shared memory); CUDA 12
// runtimes said cudaErrorInvalidConfiguration.  More threads than the
// kernel's __launch_bounds__ is left to the driver.
#if CUDART_VERSION >= 13000
#define BAD_LAUNCH cudaErrorInvalidValue
#else
#define BAD_LAUNCH cudaErrorInvalidConfiguration
#endif

static int config_ok(dim3 g, dim3 b)
{
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;

    return g.x && g.y && g.z && b.x && b.y && b.z &&
           b.x <= 1024 && b.y <= 1024 && b.z <= 64 && threads <= 1024 &&
           g.x <= 2147483647u && g.y <= 65535 && g.z <= 65535;
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                                       void **args, size_t shmem,
                                       cudaStream_t s)
{
    CUfunction f = (CUfunction)(uintptr_t)func;
    int max_threads = 0;
    CUresult r;
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    // A bad handle is reported before a bad configuration.
    r = cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
    if (r != CUDA_SUCCESS)
        return ret(rt_func(r));
    if (!config_ok(grid, block) || shmem > UINT32_MAX)
        return ret(BAD_LAUNCH);
    r = cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                       (unsigned)shmem, s, args, NULL);
    return ret(rt_func(r));
}

// The runtime's launch attributes are the driver's, id for id and member
// for member: the array is handed on as it is.
_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "attributes");
SAME(cudaLaunchAttributeCooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
SAME(cudaLaunchAttributeLaunchCompletionEvent, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);
SAME(cudaErrorCooperativeLaunchTooLarge, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
SAME(cudaErrorInvalidClusterSize, CUDA_ERROR_INVALID_CLUSTER_SIZE);

cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                          void **args)
{
    CUfunction f = (CUfunction)(uintptr_t)func;
    int max_threads = 0;
    CUresult r;
    cudaError_t e = ctx();

    if (e != cudaSuccess)
        return ret(e);
    if (!config)
        return ret(cudaErrorInvalidValue);
    r = cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
    if (r != CUDA_SUCCESS)
        return ret(rt_func(r));
    if (!config_ok(config->gridDim, config->blockDim) || config->dynamicSmemBytes > UINT32_MAX)
        return ret(BAD_LAUNCH);
    CUlaunchConfig c = {
        config->gridDim.x, config->gridDim.y, config->gridDim.z,
        config->blockDim.x, config->blockDim.y, config->blockDim.z,
        (unsigned)config->dynamicSmemBytes, config->stream,
        (CUlaunchAttribute *)(void *)config->attrs, config->numAttrs,
    };
    return ret(rt_func(cuLaunchKernelEx(&c, f, args, NULL)));
}

// ---- Several devices: peer access and copies between devices ------------------------

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceCanAccessPeer(canAccessPeer, device, peerDevice);
    return ret(rt(r));
}

cudaError_t CUDARTAPI cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr,
                                                int srcDevice, int dstDevice)
{
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetP2PAttribute(value, (CUdevice_P2PAttribute)attr, srcDevice, dstDevice);
    return ret(rt(r));
}

// The primary context of device, retained by the runtime (as cudaSetDevice
// would); NULL when there is no such device.
static CUcontext primary_of(int device)
{
    int n = 0;
    CUcontext c = NULL;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS || device < 0 || device >= n ||
        device >= FG_RT_MAX_DEVICES)
        return NULL;
    pthread_mutex_lock(&lock);
    if (!primaries[device])
        (void)cuDevicePrimaryCtxRetain(&primaries[device], device);
    c = primaries[device];
    pthread_mutex_unlock(&lock);
    return c;
}

// The runtime's peer access is from the current device's context to the
// peer device's primary context.
cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    cudaError_t e = ctx();
    if (e != cudaSuccess)
        return ret(e);
    CUcontext peer = primary_of(peerDevice);
    if (!peer)
        return ret(cudaErrorInvalidDevice);
    return ret(rt(cuCtxEnablePeerAccess(peer, flags)));
}

cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peerDevice)
{
    cudaError_t e = ctx();
    if (e != cudaSuccess)
        return ret(e);
    CUcontext peer = primary_of(peerDevice);
    if (!peer)
        return ret(cudaErrorInvalidDevice);
    return ret(rt(cuCtxDisablePeerAccess(peer)));
}

// Copies between devices need no peer access: the runtime stages them.
cudaError_t CUDARTAPI cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                     size_t count)
{
    CUcontext d = primary_of(dstDevice), s = primary_of(srcDevice);
    if (!d || !s)
        return ret(cudaErrorInvalidDevice);
    CALL(cuMemcpyPeer((CUdeviceptr)(uintptr_t)dst, d, (CUdeviceptr)(uintptr_t)src, s, count));
}

cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                          int srcDevice, size_t count, cudaStream_t stream)
{
    CUcontext d = primary_of(dstDevice), s = primary_of(srcDevice);
    if (!d || !s)
        return ret(cudaErrorInvalidDevice);
    CALL(cuMemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, d, (CUdeviceptr)(uintptr_t)src, s, count,
                           (CUstream)stream));
}

cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    CUresult r = cuInit(0);
    if (!pciBusId || len <= 0)
        return ret(cudaErrorInvalidValue);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetPCIBusId(pciBusId, len, device);
    return ret(rt(r));
}

cudaError_t CUDARTAPI cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    CUresult r = cuInit(0);
    CUdevice dev = 0;
    if (!device || !pciBusId)
        return ret(cudaErrorInvalidValue);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetByPCIBusId(&dev, pciBusId);
    if (r == CUDA_SUCCESS)
        *device = dev;
    return ret(rt(r));
}
