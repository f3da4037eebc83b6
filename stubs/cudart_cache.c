/* Read-only facts of the runtime, answered on the client after the first
 * time (a round trip is the unit of cost: docs/architecture.md, "What the
 * client answers itself"): the device count, each device's properties and
 * attributes, the driver version, and each thread's current device; calls
 * that change contexts tell the driver stub's cache (stubs/cuda_contexts.c).
 * PyTorch asks for these thousands of times; each would be a round trip.
 * What can change (the current device) is updated by the calls that change
 * it. */
#include "rgpu_client.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)
#define MAX_DEVICES 64
#define MAX_ATTRS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int device_count = -1;
static int driver_version;
static struct cudaDeviceProp *props[MAX_DEVICES];
static int attr_value[MAX_DEVICES][MAX_ATTRS];
static unsigned char attr_known[MAX_DEVICES][MAX_ATTRS];

#undef cudaGetDeviceCount
RGPU_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    const void *argv[] = { &count };
    if (!count)
        return RESULT(cudaErrorInvalidValue);
    pthread_mutex_lock(&lock);
    int known = device_count;
    pthread_mutex_unlock(&lock);
    if (known >= 0) {
        *count = known;
        return cudaSuccess;
    }
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaGetDeviceCount, argv);
    if (rc == cudaSuccess) {
        pthread_mutex_lock(&lock);
        device_count = *count;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

#undef cudaDriverGetVersion
RGPU_EXPORT cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    const void *argv[] = { &driverVersion };
    if (!driverVersion)
        return RESULT(cudaErrorInvalidValue);
    if (driver_version) {
        *driverVersion = driver_version;
        return cudaSuccess;
    }
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaDriverGetVersion, argv);
    if (rc == cudaSuccess)
        driver_version = *driverVersion;
    return rc;
}

#undef cudaGetDeviceProperties
RGPU_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    const void *argv[] = { &prop, &device };
    if (!prop)
        return RESULT(cudaErrorInvalidValue);
    int cacheable = device >= 0 && device < MAX_DEVICES;
    pthread_mutex_lock(&lock);
    struct cudaDeviceProp *known = cacheable ? props[device] : NULL;
    if (known)
        *prop = *known;
    pthread_mutex_unlock(&lock);
    if (known)
        return cudaSuccess;
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaGetDeviceProperties, argv);
    if (rc == cudaSuccess) {
        /* Managed memory is coherent at synchronisations only
         * (common/rgpu_mapped.c): the facts of such a device. */
        prop->concurrentManagedAccess = 0;
        prop->pageableMemoryAccess = 0;
        prop->canUseHostPointerForRegisteredMem = 0;
        prop->pageableMemoryAccessUsesHostPageTables = 0;
        prop->directManagedMemAccessFromHost = 0;
    }
    if (rc == cudaSuccess && cacheable) {
        struct cudaDeviceProp *copy = malloc(sizeof *copy);
        if (copy) {
            *copy = *prop;
            pthread_mutex_lock(&lock);
            if (!props[device])
                props[device] = copy;
            else
                free(copy);
            pthread_mutex_unlock(&lock);
        }
    }
    return rc;
}

#undef cudaDeviceGetAttribute
RGPU_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    const void *argv[] = { &value, &attr, &device };
    if (!value)
        return RESULT(cudaErrorInvalidValue);
    int cacheable = device >= 0 && device < MAX_DEVICES && attr >= 0 && attr < MAX_ATTRS;
    pthread_mutex_lock(&lock);
    int known = cacheable && attr_known[device][attr];
    if (known)
        *value = attr_value[device][attr];
    pthread_mutex_unlock(&lock);
    if (known)
        return cudaSuccess;
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaDeviceGetAttribute, argv);
    if (rc == cudaSuccess)
        *value = rgpu_mapped_device_attr(attr, *value);
    if (rc == cudaSuccess && cacheable) {
        pthread_mutex_lock(&lock);
        attr_value[device][attr] = *value;
        attr_known[device][attr] = 1;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

/* The stream priorities of the current device: a fact of the device. */
static int priority_known[MAX_DEVICES], priority_least[MAX_DEVICES],
    priority_greatest[MAX_DEVICES];

#undef cudaDeviceGetStreamPriorityRange
RGPU_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority,
                                                         int *greatestPriority)
{
    int least = 0, greatest = 0, dev = -1;
    int *lp = &least, *gp = &greatest;
    const void *argv[] = { &lp, &gp };
    int cacheable = cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES;
    pthread_mutex_lock(&lock);
    int known = cacheable && priority_known[dev];
    if (known) {
        least = priority_least[dev];
        greatest = priority_greatest[dev];
    }
    pthread_mutex_unlock(&lock);
    if (!known) {
        /* Both asked, whichever the caller wants: either may be NULL. */
        int rc = rgpu_call(LIB, RGPU_CUDART_cudaDeviceGetStreamPriorityRange, argv);
        if (rc != cudaSuccess)
            return rc;
        if (cacheable) {
            pthread_mutex_lock(&lock);
            priority_least[dev] = least;
            priority_greatest[dev] = greatest;
            priority_known[dev] = 1;
            pthread_mutex_unlock(&lock);
        }
    }
    if (leastPriority)
        *leastPriority = least;
    if (greatestPriority)
        *greatestPriority = greatest;
    return cudaSuccess;
}

/* ---- the current device ------------------------------------------------------------ */

#undef cudaGetDevice
RGPU_EXPORT cudaError_t cudaGetDevice(int *device)
{
    const void *argv[] = { &device };
    if (!device)
        return RESULT(cudaErrorInvalidValue);
    if (rgpu_thread_device(device))
        return cudaSuccess;
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaGetDevice, argv);
    if (rc == cudaSuccess)
        rgpu_thread_set_device(*device);
    return rc;
}

/* Setting the device the thread already has is a no-op for CUDA once it
 * is known current (PyTorch's device guards do it around every op). */
#undef cudaSetDevice
RGPU_EXPORT cudaError_t cudaSetDevice(int device)
{
    const void *argv[] = { &device };
    int current;
    if (rgpu_thread_device(&current) && current == device)
        return cudaSuccess;
    int rc = rgpu_call(LIB, RGPU_CUDART_cudaSetDevice, argv);
    if (rc == cudaSuccess)
        rgpu_thread_set_device(device);
    return rc;
}

/* Calls that may change the primary context, whose state and current-ness
 * the driver stub answers from the core's cache: forget it. */
#undef cudaDeviceReset
RGPU_EXPORT cudaError_t cudaDeviceReset(void)
{
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDART_cudaDeviceReset, NULL);
}

#undef cudaSetDeviceFlags
RGPU_EXPORT cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    const void *argv[] = { &flags };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDART_cudaSetDeviceFlags, argv);
}

#undef cudaInitDevice
RGPU_EXPORT cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    const void *argv[] = { &device, &deviceFlags, &flags };
    rgpu_contexts_changed();
    return rgpu_call(LIB, RGPU_CUDART_cudaInitDevice, argv);
}

/* ---- stream capture: asked only while a capture is under way ----------------------- */

/* PyTorch's allocator asks cudaStreamIsCapturing at every allocation.  A
 * capture can only start through the begin-capture stubs (here,
 * stubs/cudart_graphs.c, and the driver's in stubs/cuda_graphs.c), so
 * while none is under way in this process the answer is
 * known: not capturing.  The count lives in the core (rgpu_capture_*),
 * whose waiting policy needs it too. */
static cudaError_t begin_capture(const struct rgpu_proc *proc, cudaStream_t stream,
                                 enum cudaStreamCaptureMode mode)
{
    const void *argv[] = { &stream, &mode };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == cudaSuccess)
        rgpu_capture_begin();
    return rc;
}

static cudaError_t end_capture(const struct rgpu_proc *proc, cudaStream_t stream,
                               cudaGraph_t *pGraph)
{
    const void *argv[] = { &stream, &pGraph };
    int rc = rgpu_call(LIB, proc, argv);
    /* Ending fails when the capture was invalidated, but it is over. */
    if (rc == cudaSuccess || rc == cudaErrorStreamCaptureInvalidated ||
        rc == cudaErrorStreamCaptureUnjoined)
        rgpu_capture_end();
    return rc;
}

static cudaError_t is_capturing(const struct rgpu_proc *proc, cudaStream_t stream,
                                enum cudaStreamCaptureStatus *status)
{
    const void *argv[] = { &stream, &status };
    if (status && !rgpu_capture_active()) {
        *status = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    return rgpu_call(LIB, proc, argv);
}

#undef cudaStreamBeginCapture
RGPU_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin_capture(RGPU_CUDART_cudaStreamBeginCapture, stream, mode);
}

RGPU_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                    enum cudaStreamCaptureMode mode)
{
    return begin_capture(RGPU_CUDART_cudaStreamBeginCapture_ptsz, stream, mode);
}

#undef cudaStreamEndCapture
RGPU_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end_capture(RGPU_CUDART_cudaStreamEndCapture, stream, pGraph);
}

RGPU_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end_capture(RGPU_CUDART_cudaStreamEndCapture_ptsz, stream, pGraph);
}

#undef cudaStreamIsCapturing
RGPU_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                              enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(RGPU_CUDART_cudaStreamIsCapturing, stream, pCaptureStatus);
}

RGPU_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                   enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(RGPU_CUDART_cudaStreamIsCapturing_ptsz, stream, pCaptureStatus);
}
