/* The one export-table slot the client cannot answer from public driver
 * calls (client side: stubs/cuda_export.c): a device's primary context
 * without retaining it.  Retaining and releasing instead would create and
 * destroy the context, and the runtime asks before it retains. */
#include "rgpud.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"

#include <cuda.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))

static const CUuuid runtime_interface = { {
    0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4, (char)0xe7, 0x4a,
    (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd, (char)0x9d, (char)0xf9 } };

typedef CUresult (*primary_ctx_fn)(CUcontext *ctx, CUdevice dev);

/* The driver's own answer, from its runtime-interface table (slot 2). */
static CUresult driver_primary_ctx(CUdevice dev, CUcontext *ctx)
{
    const void *const *table = NULL;
    CUresult (*get_table)(const void **, const CUuuid *) = REAL(cuGetExportTable);
    if (!get_table)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = get_table((const void **)&table, &runtime_interface);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Word 0 is the table's size in bytes: slot 2 must lie inside it. */
    if (!table || (uintptr_t)table[0] < 3 * sizeof(void *) || !table[2])
        return CUDA_ERROR_NOT_SUPPORTED;
    primary_ctx_fn fn = (primary_ctx_fn)(uintptr_t)table[2];
    return fn(ctx, dev);
}

/* rgpu_cu_primary_ctx (codegen/cuda_own.h): the codec records the context
 * as the session's. */
CUresult serve_rgpu_cu_primary_ctx(CUcontext *ctx, CUdevice dev)
{
    if (!REAL(cuDeviceGetCount))
        return serve_transport(RGPU_ENOSYM);
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = NULL;
    int count = 0;
    CUresult rc = REAL(cuDeviceGetCount)(&count);
    if (rc == CUDA_SUCCESS && (dev < 0 || dev >= count))
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc == CUDA_SUCCESS)
        rc = driver_primary_ctx(dev, ctx);
    if (rc != CUDA_SUCCESS)
        *ctx = NULL;
    return rc;
}
