/* Read-only facts of the driver, answered on the client after the first
 * time, as the runtime stub does for its own (stubs/cudart_cache.c): the
 * driver version, the device count, each ordinal's device and each
 * device's attributes.  They cannot change while the process runs, and a
 * cached answer exists only after the driver gave one (so after cuInit). */
#include "rgpu_client.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <pthread.h>

#define LIB (&rgpu_cuda_lib)
#define MAX_DEVICES 64
#define MAX_ATTRS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int driver_version, device_count = -1;
static CUdevice device_of[MAX_DEVICES];
static unsigned char device_known[MAX_DEVICES];
static int attr_value[MAX_DEVICES][MAX_ATTRS];
static unsigned char attr_known[MAX_DEVICES][MAX_ATTRS];
static unsigned char attrs_fetched[MAX_DEVICES];

/* Every attribute the driver answers for dev, in one round trip, the first
 * time one is asked: a static CUDA runtime's cudaGetDeviceProperties asks
 * some 100 of them, each a wait.  Those the driver refuses stay unknown and
 * are asked alone, so that their error is the driver's. */
static void fetch_all_attributes(CUdevice dev)
{
    int values[MAX_ATTRS];
    unsigned char answered[MAX_ATTRS];
    CUresult rc = rgpu_cu_device_attrs(values, answered, MAX_ATTRS, dev);
    pthread_mutex_lock(&lock);
    attrs_fetched[dev] = rc == CUDA_SUCCESS;    /* before cuInit: asked again later */
    for (unsigned a = 0; rc == CUDA_SUCCESS && a < MAX_ATTRS; a++) {
        if (answered[a]) {
            attr_value[dev][a] = values[a];
            attr_known[dev][a] = 1;
        }
    }
    pthread_mutex_unlock(&lock);
}

#undef cuDriverGetVersion
RGPU_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    const void *argv[] = { &driverVersion };
    pthread_mutex_lock(&lock);
    int known = driver_version;
    pthread_mutex_unlock(&lock);
    if (driverVersion && known) {
        *driverVersion = known;
        return CUDA_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUDA_cuDriverGetVersion, argv);
    if (rc == CUDA_SUCCESS && driverVersion) {
        pthread_mutex_lock(&lock);
        driver_version = *driverVersion;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

#undef cuDeviceGetCount
RGPU_EXPORT CUresult cuDeviceGetCount(int *count)
{
    const void *argv[] = { &count };
    pthread_mutex_lock(&lock);
    int known = device_count;
    pthread_mutex_unlock(&lock);
    if (count && known >= 0) {
        *count = known;
        return CUDA_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUDA_cuDeviceGetCount, argv);
    if (rc == CUDA_SUCCESS && count) {
        pthread_mutex_lock(&lock);
        device_count = *count;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

#undef cuDeviceGet
RGPU_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    const void *argv[] = { &device, &ordinal };
    int cacheable = device && ordinal >= 0 && ordinal < MAX_DEVICES, known = 0;
    pthread_mutex_lock(&lock);
    if (cacheable && device_known[ordinal]) {
        *device = device_of[ordinal];
        known = 1;
    }
    pthread_mutex_unlock(&lock);
    if (known)
        return CUDA_SUCCESS;
    int rc = rgpu_call(LIB, RGPU_CUDA_cuDeviceGet, argv);
    if (rc == CUDA_SUCCESS && cacheable) {
        pthread_mutex_lock(&lock);
        device_of[ordinal] = *device;
        device_known[ordinal] = 1;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

#undef cuDeviceGetAttribute
RGPU_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    const void *argv[] = { &pi, &attrib, &dev };
    int cacheable = pi && dev >= 0 && dev < MAX_DEVICES && (int)attrib >= 0 &&
                    (int)attrib < MAX_ATTRS,
        known = 0;
    pthread_mutex_lock(&lock);
    if (cacheable && attr_known[dev][attrib]) {
        *pi = attr_value[dev][attrib];
        known = 1;
    }
    pthread_mutex_unlock(&lock);
    if (known)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    int fetched = cacheable && attrs_fetched[dev];
    pthread_mutex_unlock(&lock);
    if (cacheable && !fetched) {
        fetch_all_attributes(dev);
        pthread_mutex_lock(&lock);
        if (attr_known[dev][attrib]) {
            *pi = attr_value[dev][attrib];
            known = 1;
        }
        pthread_mutex_unlock(&lock);
        if (known)
            return CUDA_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUDA_cuDeviceGetAttribute, argv);
    if (rc == CUDA_SUCCESS)
        *pi = rgpu_mapped_device_attr(attrib, *pi);
    if (rc == CUDA_SUCCESS && cacheable) {
        pthread_mutex_lock(&lock);
        attr_value[dev][attrib] = *pi;
        attr_known[dev][attrib] = 1;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}
