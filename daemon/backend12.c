/* A session that serves a CUDA 12 client with CUDA 12's own libraries
 * (rgpud --cuda12-lib-dir, docs/cuda12.md).
 *
 * The session's procedures are CUDA 13's (generated from its headers,
 * hand-written against them).  Each reaches the CUDA 12 function that
 * takes the same bytes, as rgpu-gen --compat found it: the same name where
 * the prototypes agree or CUDA 13's extends CUDA 12's layout, else CUDA
 * 12's versioned name of the same function (cudaStreamGetCaptureInfo is
 * CUDA 12's cudaStreamGetCaptureInfo_v3); a procedure with none is
 * refused as a function the server lacks (RGPU_ENOSYM), never called with
 * bytes CUDA 12 would misread.  cudaGetDeviceProperties, whose CUDA 12
 * layout is another, is rgpud's own: CUDA 13's structure filled from the
 * driver, which both majors share. */
#include "rgpud.h"
#include "older_names.h"
#include "rgpu_device_props.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

static int attribute(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    CUresult (*get)(int *, CUdevice_attribute, CUdevice) = DRV(cuDeviceGetAttribute);
    if (get && get(&v, a, dev) != CUDA_SUCCESS)
        v = 0;
    return v;
}

/* cudaGetDeviceProperties with CUDA 13's layout: each field from the
 * driver attribute that holds it, the identity from the driver's calls. */
static cudaError_t device_properties(struct cudaDeviceProp *p, int device)
{
    CUdevice dev;
    CUresult (*get)(CUdevice *, int) = DRV(cuDeviceGet);
    CUresult (*total)(size_t *, CUdevice) = DRV(cuDeviceTotalMem_v2);
    CUresult (*name)(char *, int, CUdevice) = DRV(cuDeviceGetName);
    CUresult (*uuid)(CUuuid *, CUdevice) = DRV(cuDeviceGetUuid_v2);
    CUresult (*luid)(char *, unsigned *, CUdevice) = DRV(cuDeviceGetLuid);
    if (!p)
        return cudaErrorInvalidValue;
    if (!get || !total || !name || !uuid)
        return cudaErrorNotSupported;
    if (get(&dev, device) != CUDA_SUCCESS)
        return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    if (total(&p->totalGlobalMem, dev) != CUDA_SUCCESS ||
        name(p->name, (int)sizeof p->name, dev) != CUDA_SUCCESS ||
        uuid((CUuuid *)&p->uuid, dev) != CUDA_SUCCESS)
        return cudaErrorInvalidDevice;
    /* Windows' LUID: the driver refuses it elsewhere, and CUDA leaves it 0. */
    if (luid && luid(p->luid, &p->luidDeviceNodeMask, dev) != CUDA_SUCCESS) {
        memset(p->luid, 0, sizeof p->luid);
        p->luidDeviceNodeMask = 0;
    }
#define FROM_ATTRIBUTE(field, a) p->field = attribute(dev, CU_DEVICE_ATTRIBUTE_##a);
    RGPU_DEVICE_PROP_ATTRIBUTES(FROM_ATTRIBUTE)
#undef FROM_ATTRIBUTE
    return cudaSuccess;
}

#ifdef RGPU_CUDA12_NAMES

static const struct rgpu_older_name *names_of(const char *lib, unsigned *n)
{
    *n = 0;
    if (strcmp(lib, "cudart") == 0) {
        *n = rgpu_cudart12_nnames;
        return rgpu_cudart12_names;
    }
    if (strcmp(lib, "cublas") == 0) {
        *n = rgpu_cublas12_nnames;
        return rgpu_cublas12_names;
    }
    if (strcmp(lib, "cublasLt") == 0) {
        *n = rgpu_cublasLt12_nnames;
        return rgpu_cublasLt12_names;
    }
    return NULL;
}

static int by_name(const void *key, const void *entry)
{
    return strcmp(key, ((const struct rgpu_older_name *)entry)->name);
}

void *backend12_sym(void *handle, const char *lib, const char *name)
{
    unsigned n;
    if (strcmp(lib, "cudart") == 0 && strcmp(name, "cudaGetDeviceProperties") == 0)
        return (void *)device_properties;
    const struct rgpu_older_name *names = names_of(lib, &n);
    const struct rgpu_older_name *e = names ? bsearch(name, names, n, sizeof *names, by_name)
                                            : NULL;
    return e ? dlsym(handle, e->older) : NULL;
}

int backend12_available(void)
{
    return 1;
}

#else   /* built without CUDA 12 stubs (-Dcuda12=): no CUDA 12 library is opened */

void *backend12_sym(void *handle, const char *lib, const char *name)
{
    (void)handle, (void)lib, (void)name, (void)device_properties;
    return NULL;
}

int backend12_available(void)
{
    return 0;
}

#endif
