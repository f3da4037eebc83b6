// Fake libcuda.so.1: stream-ordered allocation and each device's default
// memory pool.  Allocations are ordinary fake allocations made at once (the
// fake runs work in order anyway), or memory nodes on a capturing stream
// (capture.c); the pool keeps cuMemPool's attributes and
// counts the bytes in use.  It caches nothing, so the memory it reserves is
// what is in use, and cuMemPoolTrimTo has nothing to give back.
#include "fakegpu.h"

#include <stdlib.h>

struct fake_pool {
    int reuse[3];                   // FOLLOW_EVENT, OPPORTUNISTIC, INTERNAL
    cuuint64_t release_threshold;
    cuuint64_t used, used_high, reserved_high;
};

#define POOL_INIT { { 1, 1, 1 }, 0, 0, 0, 0 }
static struct fake_pool default_pools[FG_MAX_DEVICES] = {
    POOL_INIT, POOL_INIT, POOL_INIT, POOL_INIT, POOL_INIT, POOL_INIT, POOL_INIT, POOL_INIT,
};

// What each live stream-ordered allocation holds, and from which pool, for
// the counts.
struct pooled {
    CUdeviceptr p;
    size_t size;
    struct fake_pool *pool;
    struct pooled *next;
};
static struct pooled *pooled;

static struct fake_pool *pool_of(CUmemoryPool pool)
{
    for (int d = 0; d < fg_device_count(); d++)
        if ((struct fake_pool *)pool == &default_pools[d])
            return &default_pools[d];
    return NULL;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (!pool || !fg_device_valid(dev))
        return !fg_device_valid(dev) ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
    *pool = (CUmemoryPool)&default_pools[dev];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetDefaultMemPool(pool, dev);
}

// Called with the lock held.
static CUresult pool_alloc(struct fake_pool *fp, CUdeviceptr *dptr, size_t size)
{
    struct fg_ctx *c;
    struct pooled *e;
    CUresult r = fg_enter(0, &c, NULL);

    if (r != CUDA_SUCCESS)
        return r;
    if (!(e = malloc(sizeof *e)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = fg_mem_alloc(c, size, dptr);
    if (r != CUDA_SUCCESS) {
        free(e);
        return r;
    }
    *e = (struct pooled){ *dptr, size, fp, pooled };
    pooled = e;
    fp->used += size;
    if (fp->used > fp->used_high)
        fp->used_high = fp->used;
    if (fp->used > fp->reserved_high)
        fp->reserved_high = fp->used;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                         CUstream s)
{
    struct fake_pool *fp = pool_of(pool);
    CUresult r;

    if (!dptr || !fp || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fg_capturing(s))
        return fg_capture_alloc(s, (CUdevice)(fp - default_pools), size, dptr);
    fg_lock();
    r = pool_alloc(fp, dptr, size);
    fg_unlock();
    return r;
}

// From the default pool of the current context's device.
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
    CUdevice dev = 0;
    CUresult r = cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS)
        return r;
    return cuMemAllocFromPoolAsync(dptr, size, (CUmemoryPool)&default_pools[dev], s);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    struct fg_ctx *c;
    CUresult r;

    if (fg_capturing(s))
        return fg_capture_free(s, dptr);
    fg_lock();
    r = fg_enter(0, &c, NULL);
    for (struct pooled **pp = &pooled; r == CUDA_SUCCESS && *pp; pp = &(*pp)->next) {
        if ((*pp)->p == dptr) {
            struct pooled *e = *pp;
            e->pool->used -= e->size;
            *pp = e->next;
            free(e);
            break;
        }
    }
    if (r == CUDA_SUCCESS)
        r = fg_mem_free(dptr);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    return pool_of(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The attributes as cuMemPoolSetAttribute documents them: the reuse flags
// are ints, the rest cuuint64_t; the current counts cannot be set and the
// high-water marks only reset to 0.
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct fake_pool *fp = pool_of(pool);
    cuuint64_t v;

    if (!fp || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        fp->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        fp->release_threshold = *(cuuint64_t *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        v = *(cuuint64_t *)value;
        if (v != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
            fp->used_high = fp->used;
        else
            fp->reserved_high = fp->used;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = fp->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = fp->release_threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = fp->used;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = fp->reserved_high;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = fp->used_high;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}
