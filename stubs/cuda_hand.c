/* Hand-written parts of libcuda.so.1: what codegen/cuda.ann marks
 * `hand`, `client` or `local`, contexts apart (cuda_contexts.c) and
 * modules, libraries and JIT linking (cuda_modules.c).  Server side:
 * daemon/hand_cuda.c. */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "client_ranges.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

static int transport(const char *what, int rc)
{
    return rgpu_transport_status(LIB, what, rc);
}

/* ---- answered locally ---------------------------------------------------------- */

#undef cuGetErrorName
RGPU_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    *pStr = rgpu_cuda_error_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#undef cuGetErrorString
RGPU_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    /* The driver's texts come from the server's driver (asked once); the
     * header's description stands in without one. */
    *pStr = rgpu_server_error_string(LIB, error);
    if (!*pStr)
        *pStr = rgpu_cuda_error_string(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuGetProcAddress hands back our own functions, the ABI the caller asked
 * for: the newest one not newer than cudaVersion, per-thread-stream
 * flavour where asked and one exists (table: build/stubs/cuda_procaddr.c). */
extern const struct rgpu_procaddr rgpu_cuda_procaddr[];

static const struct rgpu_procaddr *best_abi(const char *symbol, int version, int per_thread,
                                            int *known)
{
    const struct rgpu_procaddr *best = NULL;
    for (const struct rgpu_procaddr *p = rgpu_cuda_procaddr; p->base; p++) {
        if (strcmp(p->base, symbol) != 0 || p->per_thread != per_thread)
            continue;
        *known = 1;
        if ((int)p->version <= version && (!best || p->version > best->version))
            best = p;
    }
    return best;
}

static void *self_symbol(const char *name)
{
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *fn = self ? dlsym(self, name) : NULL;
    if (self)
        dlclose(self);
    return fn;
}

#undef cuGetProcAddress_v2
RGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus)
{
    int known = 0;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct rgpu_procaddr *p = best_abi(symbol, cudaVersion, per_thread, &known);
    if (!p && per_thread)       /* most functions have no per-thread flavour */
        p = best_abi(symbol, cudaVersion, 0, &known);
    /* Functions without a PFN typedef are exported under their own name. */
    *pfn = p ? self_symbol(p->symbol) : known ? NULL : self_symbol(symbol);
    CUdriverProcAddressQueryResult r = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS
                                       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (symbolStatus)
        *symbolStatus = r;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Pinned host memory is plain client memory. */
#undef cuMemAllocHost
RGPU_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    return posix_memalign(pp, 4096, bytesize ? bytesize : 1) == 0 ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_OUT_OF_MEMORY;
}

#undef cuMemHostAlloc
RGPU_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (Flags & CU_MEMHOSTALLOC_DEVICEMAP) {
        static int logged;
        return rgpu_refused(LIB, "cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP)",
                            "mapped host memory lives on the client", &logged);
    }
    return cuMemAllocHost_v2(pp, bytesize);
}

#undef cuMemFreeHost
RGPU_EXPORT CUresult cuMemFreeHost(void *p)
{
    free(p);
    return CUDA_SUCCESS;
}

#undef cuMemHostRegister
RGPU_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    (void)bytesize;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_DEVICEMAP) {
        static int logged;
        return rgpu_refused(LIB, "cuMemHostRegister(CU_MEMHOSTREGISTER_DEVICEMAP)",
                            "mapped host memory lives on the client", &logged);
    }
    return CUDA_SUCCESS;
}

#undef cuMemHostUnregister
RGPU_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#undef cuMemHostGetFlags
RGPU_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    (void)p;
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = 0;
    return CUDA_SUCCESS;
}

/* ---- allocations ---------------------------------------------------------------- */

#undef cuMemAlloc
RGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    const void *argv[] = { &dptr, &bytesize };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAlloc_v2, argv);
    if (rc == CUDA_SUCCESS && dptr)
        rgpu_ranges_add(*dptr, bytesize, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemAllocPitch
RGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                        size_t Height, unsigned int ElementSizeBytes)
{
    const void *argv[] = { &dptr, &pPitch, &WidthInBytes, &Height, &ElementSizeBytes };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemAllocPitch_v2, argv);
    if (rc == CUDA_SUCCESS && dptr && pPitch)
        rgpu_ranges_add(*dptr, *pPitch * Height, RGPU_RANGE_DEVICE);
    return rc;
}

/* A stream-ordered allocation (argv as the procedure takes it): the address
 * is known at the call, so the range is recorded then. */
static CUresult alloc_async(const struct rgpu_proc *proc, const void *const *argv,
                            CUdeviceptr *dptr, size_t bytesize)
{
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS && dptr)
        rgpu_ranges_add(*dptr, bytesize, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemAllocAsync
RGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocAsync, argv, dptr, bytesize);
}

RGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocAsync_ptsz, argv, dptr, bytesize);
}

#undef cuMemAllocFromPoolAsync
RGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &pool, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocFromPoolAsync, argv, dptr, bytesize);
}

RGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream hStream)
{
    const void *argv[] = { &dptr, &bytesize, &pool, &hStream };
    return alloc_async(RGPU_CUDA_cuMemAllocFromPoolAsync_ptsz, argv, dptr, bytesize);
}

#undef cuMemFree
RGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    const void *argv[] = { &dptr };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemFree_v2, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(dptr);
    return rc;
}

static CUresult free_async(const struct rgpu_proc *proc, CUdeviceptr dptr, CUstream hStream)
{
    const void *argv[] = { &dptr, &hStream };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(dptr);
    return rc;
}

#undef cuMemFreeAsync
RGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(RGPU_CUDA_cuMemFreeAsync, dptr, hStream);
}

RGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(RGPU_CUDA_cuMemFreeAsync_ptsz, dptr, hStream);
}

/* ---- copies ------------------------------------------------------------------------- */

static CUresult htod(CUdeviceptr dst, const void *src, size_t count, CUstream stream)
{
    uint64_t s = (uint64_t)(uintptr_t)stream;
    if (rgpu_sticky_error())
        return (CUresult)rgpu_sticky_error();
    return rgpu_copy_htod(LIB, rgpu_proc_id("cuda", RGPU_H_CU_HTOD), "cuMemcpyHtoD", dst, src,
                          count, s, !rgpu_lazy_copy_to_device(dst, count, s));
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t count, CUstream stream)
{
    return rgpu_copy_dtoh(LIB, rgpu_proc_id("cuda", RGPU_H_CU_DTOH), "cuMemcpyDtoH", dst, src,
                          count, (uint64_t)(uintptr_t)stream);
}

#undef cuMemcpyHtoD
RGPU_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return htod(dstDevice, srcHost, ByteCount, NULL);
}

#undef cuMemcpyHtoDAsync
RGPU_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream)
{
    return htod(dstDevice, srcHost, ByteCount, hStream);
}

#undef cuMemcpyDtoH
RGPU_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return dtoh(dstHost, srcDevice, ByteCount, NULL);
}

#undef cuMemcpyDtoHAsync
RGPU_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream)
{
    return dtoh(dstHost, srcDevice, ByteCount, hStream);
}

/* ---- launches ------------------------------------------------------------------------ */

struct layout {
    uint64_t func;
    struct rgpu_layout l;
    struct layout *next;
};

static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static struct layout *layouts;

/* A function's parameter layout, asked from the server once and cached. */
static CUresult layout_of(CUfunction f, struct layout **out)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    uint64_t func = (uint64_t)(uintptr_t)f;
    struct layout *l;

    pthread_mutex_lock(&layout_lock);
    for (l = layouts; l && l->func != func; l = l->next)
        ;
    pthread_mutex_unlock(&layout_lock);
    if (l) {
        *out = l;
        return CUDA_SUCCESS;
    }
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_PARAM_LAYOUT), 0);
    msgpack_pack_array(&req.pk, 1);
    msgpack_pack_uint64(&req.pk, func);
    int rc = rgpu_req_exchange(LIB, "cuLaunchKernel", &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(LIB, &reply);
    if (rc == CUDA_SUCCESS) {
        l = calloc(1, sizeof *l);
        if (l && rgpu_layout_parse(rgpu_reply_out(&reply, 0), &l->l) < 0) {
            free(l);
            l = NULL;
        }
        if (!l) {
            rc = transport("cuLaunchKernel", RGPU_EPROTO);
        } else {
            l->func = func;
            pthread_mutex_lock(&layout_lock);
            l->next = layouts;
            layouts = l;
            pthread_mutex_unlock(&layout_lock);
            *out = l;
        }
    }
    rgpu_reply_free(&reply);
    return rc;
}

/* Kernel arguments as one buffer: either packed by the caller (`extra`) or
 * from kernelParams by the layout. */
static CUresult pack_params(CUfunction f, void **kernelParams, void **extra,
                            const void **buf, size_t *len, unsigned char **owned)
{
    *owned = NULL;
    if (extra) {
        const void *p = NULL;
        size_t n = 0;
        for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                p = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                n = *(const size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        *buf = p;
        *len = n;
        return p || !n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    struct layout *l = NULL;
    CUresult rc = layout_of(f, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (l->l.nparams && !kernelParams)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *b = malloc(l->l.bytes ? l->l.bytes : 1);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rgpu_layout_pack(&l->l, kernelParams, b);
    *buf = b;
    *len = l->l.bytes;
    *owned = b;
    return CUDA_SUCCESS;
}

/* A launch goes without waiting only when the driver's handle checks can
 * be made here: a function and a stream this process was handed (else the
 * server's answer, the driver's own error, comes back at once). */
static int launch_must_wait(CUfunction f, CUstream stream)
{
    uint64_t h = (uint64_t)(uintptr_t)f;
    return !rgpu_may_skip_reply() || !rgpu_stream_known((uint64_t)(uintptr_t)stream) ||
           !(rgpu_handle_known(rgpu_handle_class("CUfunc_st"), h) ||
             rgpu_handle_known(rgpu_handle_class("CUkern_st"), h));
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                       void **kernelParams, void **extra)
{
    struct rgpu_req req;
    const void *buf;
    size_t len;
    unsigned char *owned;

    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (rgpu_sticky_error())
        return rgpu_sticky_error();
    /* The launch does not wait for the server, so an impossible shape must
     * fail here, as the driver fails it at once.  1024 threads per block
     * is the limit of every GPU CUDA 13 supports. */
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 || bz > 64 ||
        gy > 65535 || gz > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = pack_params(f, kernelParams, extra, &buf, &len, &owned);
    if (rc != CUDA_SUCCESS)
        return rc;
    int wait = launch_must_wait(f, stream);
    rgpu_req_begin(&req, rgpu_proc_id("cuda", RGPU_H_CU_LAUNCH), wait ? 0 : RGPU_CALL_NOREPLY);
    msgpack_pack_array(&req.pk, 11);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)f);
    msgpack_pack_uint32(&req.pk, gx);
    msgpack_pack_uint32(&req.pk, gy);
    msgpack_pack_uint32(&req.pk, gz);
    msgpack_pack_uint32(&req.pk, bx);
    msgpack_pack_uint32(&req.pk, by);
    msgpack_pack_uint32(&req.pk, bz);
    msgpack_pack_uint32(&req.pk, shmem);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)stream);
    msgpack_pack_uint32(&req.pk, extra ? 1 : 0);
    rgpu_req_payload(&req, buf, len);
    if (wait) {
        rc = (CUresult)rgpu_req_status(LIB, "cuLaunchKernel", &req);
        free(owned);
        return rc;
    }
    int t = rgpu_req_send(&req, NULL);
    free(owned);
    return t == RGPU_OK ? CUDA_SUCCESS : transport("cuLaunchKernel", t);
}

RGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra)
{
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream, kernelParams, extra);
}

RGPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                         unsigned int gridDimY, unsigned int gridDimZ,
                                         unsigned int blockDimX, unsigned int blockDimY,
                                         unsigned int blockDimZ, unsigned int sharedMemBytes,
                                         CUstream hStream, void **kernelParams, void **extra)
{
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, hStream ? hStream : CU_STREAM_PER_THREAD, kernelParams,
                  extra);
}

/* ---- unified copies and virtual memory ---------------------------------------- */

#undef cuMemMap
RGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    const void *argv[] = { &ptr, &size, &offset, &handle, &flags };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemMap, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_add(ptr, size, RGPU_RANGE_DEVICE);
    return rc;
}

#undef cuMemUnmap
RGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    const void *argv[] = { &ptr, &size };
    int rc = rgpu_call(LIB, RGPU_CUDA_cuMemUnmap, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_ranges_remove(ptr);
    return rc;
}

static int on_device(CUdeviceptr p)
{
    return rgpu_ranges_find(p, NULL, NULL) == RGPU_RANGE_DEVICE;
}

/* With unified addressing either side may be host memory: the bytes of
 * host memory must travel, so decide from the ranges we handed out. */
static CUresult unified_copy(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream stream,
                             int async)
{
    int d = on_device(dst), s = on_device(src);
    if (d && s)
        return async ? cuMemcpyDtoDAsync_v2(dst, src, count, stream)
                     : cuMemcpyDtoD_v2(dst, src, count);
    if (d)
        return htod(dst, (const void *)(uintptr_t)src, count, stream);
    if (s)
        return dtoh((void *)(uintptr_t)dst, src, count, stream);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, count);
    return CUDA_SUCCESS;
}

#undef cuMemcpy
RGPU_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return unified_copy(dst, src, ByteCount, NULL, 0);
}

#undef cuMemcpyAsync
RGPU_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream)
{
    return unified_copy(dst, src, ByteCount, hStream, 1);
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cuda_lib);
}
