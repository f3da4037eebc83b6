// Fake libcuda.so.1: memory allocation, copies, fills, virtual memory
// management.
//
// Copies that name a side as device memory (the D in HtoD) fail with
// CUDA_ERROR_INVALID_VALUE unless the whole range lies in one or more live
// allocations.  A side given as host memory is taken as device memory when
// its address lies in the device range, as unified addressing does, and
// otherwise as memory of this process.
#include "fakegpu.h"

static int uva_dev(uintptr_t p) { return fg_mem_in_arena(p); }

// ---- Allocation -------------------------------------------------------------------------

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct fg_ctx *c;
    CUresult r;

    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_mem_alloc(c, bytesize, dptr);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    // Freeing 0 is taken as a no-op, as cudaFree(NULL) is documented to be
    // (uncertain for cuMemFree itself).
    if (r == CUDA_SUCCESS && dptr)
        r = fg_mem_free(dptr);
    if (r == CUDA_SUCCESS && dptr)
        fg_managed_forget(dptr);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct fg_ctx *c;
    CUresult r;

    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        fg_mem_info(free_bytes, total);
    fg_unlock();
    return r;
}

// ---- Page-locked host memory ---------------------------------------------------------------
//
// Nothing is pinned (every copy is a memcpy); what is kept is which ranges
// are registered and by which context, so that registering the same memory
// twice fails and a context's teardown unregisters its ranges, as on a GPU.

#define FG_MAX_REGISTERED 64
static struct {
    uintptr_t base;
    size_t size;
    struct fg_ctx *owner;       // NULL: a free slot
} registered[FG_MAX_REGISTERED];

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    struct fg_ctx *c;
    CUresult r;
    uintptr_t b = (uintptr_t)p;

    if (!p || bytesize == 0 || b + bytesize < b)
        return CUDA_ERROR_INVALID_VALUE;
    // Mapped, I/O or read-only registrations are beyond this fake.
    if (Flags & ~(unsigned)CU_MEMHOSTREGISTER_PORTABLE)
        return CUDA_ERROR_NOT_SUPPORTED;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    int slot = -1;
    for (int i = 0; r == CUDA_SUCCESS && i < FG_MAX_REGISTERED; i++) {
        if (!registered[i].owner) {
            slot = slot < 0 ? i : slot;
        } else if (b < registered[i].base + registered[i].size &&
                   registered[i].base < b + bytesize) {
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (r == CUDA_SUCCESS && slot < 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        registered[slot].base = b;
        registered[slot].size = bytesize;
        registered[slot].owner = c;
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    for (int i = 0; r == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED && i < FG_MAX_REGISTERED; i++) {
        if (registered[i].owner && registered[i].base == (uintptr_t)p) {
            registered[i].owner = NULL;
            r = CUDA_SUCCESS;
        }
    }
    fg_unlock();
    return r;
}

void fg_host_release_owned(struct fg_ctx *owner)
{
    for (int i = 0; i < FG_MAX_REGISTERED; i++)
        if (registered[i].owner == owner)
            registered[i].owner = NULL;
}

// ---- Copies -------------------------------------------------------------------------------

static CUresult copy(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev,
                     size_t n, int async, CUstream s)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    uint64_t idle = 0;

    if (async && fg_capturing(s))
        return fg_capture_copy(dst, src, n, s);
    fg_lock();
    if (!async)
        fg_output_flush_current();      // a blocking copy prints what kernels printed
    r = fg_enter(async ? FG_ENQUEUE : 0, &c, &skip);
    if (r == CUDA_SUCCESS && async)
        r = fg_check_stream(s);
    if (r == CUDA_SUCCESS)
        r = fg_copy(dst, dst_dev, src, src_dev, n, !skip);
    if (r == CUDA_SUCCESS && !skip && dst_dev != src_dev)
        idle = fg_engine_copy(n);
    fg_unlock();
    if (!async)
        fg_engine_wait(idle);
    return r;
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(dst, 1, (uintptr_t)src, uva_dev((uintptr_t)src), n, 0, NULL);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy((uintptr_t)dst, uva_dev((uintptr_t)dst), src, 1, n, 0, NULL);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, 1, src, 1, n, 0, NULL);
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(dst, uva_dev(dst), src, uva_dev(src), n, 0, NULL);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                      size_t n, CUstream s)
{
    return copy(dst, 1, (uintptr_t)src, uva_dev((uintptr_t)src), n, 1, s);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n,
                                      CUstream s)
{
    return copy((uintptr_t)dst, uva_dev((uintptr_t)dst), src, 1, n, 1, s);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src,
                                      size_t n, CUstream s)
{
    return copy(dst, 1, src, 1, n, 1, s);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                               CUstream s)
{
    return copy(dst, uva_dev(dst), src, uva_dev(src), n, 1, s);
}

// One side of a 2D copy: its base address and whether it is device memory.
static CUresult side_2d(CUmemorytype type, const void *host, CUdeviceptr dev,
                        uintptr_t *base, int *is_dev)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *base = (uintptr_t)host;
        *is_dev = uva_dev(*base);
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
        *base = dev;
        *is_dev = 1;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED:
        *base = dev;
        *is_dev = uva_dev(dev);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

// side_2d, or a CUDA array (arrays.c): its storage is host memory of the
// fake, and its own row pitch replaces the descriptor's (ignored for arrays).
// z: the layer of a 3D array (cuMemcpy3D copies layer by layer).
static CUresult side_2d_any(CUmemorytype type, const void *host, CUdeviceptr dev,
                            CUarray array, size_t x, size_t y, size_t z, size_t pitch,
                            size_t width, size_t height, uintptr_t *base, int *is_dev,
                            size_t *pitch_out)
{
    size_t slice;

    *pitch_out = pitch;
    if (type != CU_MEMORYTYPE_ARRAY)
        return side_2d(type, host, dev, base, is_dev);
    *is_dev = 0;
    CUresult r = fg_array_side(array, x, y, z, width, height, 1, base, pitch_out, &slice);
    *base += z * slice;
    return r;
}

// Validates every row before copying any, so a bad range copies nothing.
static CUresult copy_2d_layer(const CUDA_MEMCPY2D *p, size_t src_z, size_t dst_z, int run)
{
    uintptr_t sb, db;
    int sd, dd;
    CUresult r;

    size_t spitch, dpitch;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    r = side_2d_any(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                    p->srcY, src_z, p->srcPitch, p->WidthInBytes, p->Height, &sb, &sd,
                    &spitch);
    if (r == CUDA_SUCCESS)
        r = side_2d_any(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
                        p->dstXInBytes, p->dstY, dst_z, p->dstPitch, p->WidthInBytes, p->Height,
                        &db, &dd, &dpitch);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->Height > 1 && (spitch < p->WidthInBytes || dpitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    for (int pass = 0; pass < 2; pass++)
        for (size_t y = 0; y < p->Height; y++) {
            uintptr_t s = sb + (p->srcY + y) * spitch + p->srcXInBytes;
            uintptr_t d = db + (p->dstY + y) * dpitch + p->dstXInBytes;
            r = fg_copy(d, dd, s, sd, p->WidthInBytes, pass && run);
            if (r != CUDA_SUCCESS)
                return r;
        }
    return CUDA_SUCCESS;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, int run)
{
    return copy_2d_layer(p, 0, 0, run);
}

// A 3D copy as its layers: linear sides step by height * pitch, array
// sides by layer.  Validated whole before any layer is copied.
static CUresult copy_3d(const CUDA_MEMCPY3D *p, int run)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    for (int pass = 0; pass < 2; pass++)
        for (size_t z = 0; z < p->Depth; z++) {
            size_t sz = p->srcZ + z, dz = p->dstZ + z;
            size_t sstep = sz * p->srcHeight * p->srcPitch, dstep = dz * p->dstHeight * p->dstPitch;
            CUDA_MEMCPY2D c = {
                .srcXInBytes = p->srcXInBytes, .srcY = p->srcY,
                .srcMemoryType = p->srcMemoryType,
                .srcHost = p->srcHost ? (const char *)p->srcHost + sstep : NULL,
                .srcDevice = p->srcDevice ? p->srcDevice + sstep : 0,
                .srcArray = p->srcArray, .srcPitch = p->srcPitch,
                .dstXInBytes = p->dstXInBytes, .dstY = p->dstY,
                .dstMemoryType = p->dstMemoryType,
                .dstHost = p->dstHost ? (char *)p->dstHost + dstep : NULL,
                .dstDevice = p->dstDevice ? p->dstDevice + dstep : 0,
                .dstArray = p->dstArray, .dstPitch = p->dstPitch,
                .WidthInBytes = p->WidthInBytes, .Height = p->Height,
            };
            CUresult r = copy_2d_layer(&c, p->srcMemoryType == CU_MEMORYTYPE_ARRAY ? sz : 0,
                                       p->dstMemoryType == CU_MEMORYTYPE_ARRAY ? dz : 0,
                                       pass && run);
            if (r != CUDA_SUCCESS)
                return r;
        }
    return CUDA_SUCCESS;
}

static CUresult copy_3d_entry(const CUDA_MEMCPY3D *p, int async, CUstream s)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    fg_lock();
    if (!async)
        fg_output_flush_current();
    r = fg_enter(async ? FG_ENQUEUE : 0, &c, &skip);
    if (r == CUDA_SUCCESS && async)
        r = fg_check_stream(s);
    if (r == CUDA_SUCCESS)
        r = copy_3d(p, !skip);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
    return copy_3d_entry(p, 0, NULL);
}

CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream s)
{
    return copy_3d_entry(p, 1, s);
}

static CUresult copy_2d_entry(const CUDA_MEMCPY2D *p, int async, CUstream s)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    fg_lock();
    if (!async)
        fg_output_flush_current();
    r = fg_enter(async ? FG_ENQUEUE : 0, &c, &skip);
    if (r == CUDA_SUCCESS && async)
        r = fg_check_stream(s);
    if (r == CUDA_SUCCESS)
        r = copy_2d(p, !skip);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
    return copy_2d_entry(p, 0, NULL);
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
    return copy_2d_entry(p, 0, NULL);
}

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream s)
{
    return copy_2d_entry(p, 1, s);
}

// ---- Fills --------------------------------------------------------------------------------

// width is in elements, pitch in bytes; height 1 is a plain fill.
static CUresult fill(CUdeviceptr p, size_t pitch, uint32_t v, size_t elem,
                     size_t width, size_t height, int async, CUstream s)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    fg_lock();
    r = fg_enter(async ? FG_ENQUEUE : 0, &c, &skip);
    if (r == CUDA_SUCCESS && async)
        r = fg_check_stream(s);
    if (r == CUDA_SUCCESS && height > 1 &&
        (pitch < width * elem || pitch % elem))
        r = CUDA_ERROR_INVALID_VALUE;
    for (int pass = 0; pass < 2 && r == CUDA_SUCCESS; pass++)
        for (size_t y = 0; y < height && r == CUDA_SUCCESS; y++)
            r = fg_fill(p + y * pitch, v, elem, width, pass && !skip);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
    return fill(p, 0, v, 1, n, 1, 0, NULL);
}

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr p, unsigned short v, size_t n)
{
    return fill(p, 0, v, 2, n, 1, 0, NULL);
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr p, unsigned int v, size_t n)
{
    return fill(p, 0, v, 4, n, 1, 0, NULL);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n,
                                 CUstream s)
{
    return fill(p, 0, v, 1, n, 1, 1, s);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr p, unsigned short v, size_t n,
                                  CUstream s)
{
    return fill(p, 0, v, 2, n, 1, 1, s);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n,
                                  CUstream s)
{
    return fill(p, 0, v, 4, n, 1, 1, s);
}

CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr p, size_t pitch, unsigned char v,
                                 size_t w, size_t h)
{
    return fill(p, pitch, v, 1, w, h, 0, NULL);
}

CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr p, size_t pitch,
                                  unsigned short v, size_t w, size_t h)
{
    return fill(p, pitch, v, 2, w, h, 0, NULL);
}

CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr p, size_t pitch, unsigned int v,
                                  size_t w, size_t h)
{
    return fill(p, pitch, v, 4, w, h, 0, NULL);
}

CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr p, size_t pitch,
                                   unsigned char v, size_t w, size_t h,
                                   CUstream s)
{
    return fill(p, pitch, v, 1, w, h, 1, s);
}

CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr p, size_t pitch,
                                    unsigned short v, size_t w, size_t h,
                                    CUstream s)
{
    return fill(p, pitch, v, 2, w, h, 1, s);
}

CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr p, size_t pitch,
                                    unsigned int v, size_t w, size_t h,
                                    CUstream s)
{
    return fill(p, pitch, v, 4, w, h, 1, s);
}

// ---- Virtual memory management ---------------------------------------------------------
//
// Physical handles and reservations belong to the process, not a context.

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return prop->location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// Runs op under the lock once the driver is initialised.
#define VMM_CALL(op)                                          \
    do {                                                      \
        struct fg_ctx *c_;                                    \
        CUresult r_;                                          \
        fg_lock();                                            \
        r_ = fg_enter(FG_CTX_OPTIONAL, &c_, NULL);            \
        if (r_ == CUDA_SUCCESS)                               \
            r_ = (op);                                        \
        fg_unlock();                                          \
        return r_;                                            \
    } while (0)

CUresult CUDAAPI cuMemGetAllocationGranularity(
    size_t *granularity, const CUmemAllocationProp *prop,
    CUmemAllocationGranularity_flags option)
{
    CUresult r;

    (void)option;       // minimum and recommended are the same: 2 MiB
    if (!granularity)
        return CUDA_ERROR_INVALID_VALUE;
    r = check_prop(prop);
    if (r == CUDA_SUCCESS)
        *granularity = FG_GRANULARITY;
    return r;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    CUresult r = check_prop(prop);

    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    VMM_CALL(fg_vmm_create(size, handle));
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    VMM_CALL(fg_vmm_release(handle));
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                     size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    if (!ptr || flags)
        return CUDA_ERROR_INVALID_VALUE;
    VMM_CALL(fg_vmm_reserve(size, alignment, addr, ptr));
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    VMM_CALL(fg_vmm_addr_free(ptr, size));
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    VMM_CALL(fg_vmm_map(ptr, size, offset, handle));
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    VMM_CALL(fg_vmm_unmap(ptr, size));
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                const CUmemAccessDesc *desc, size_t count)
{
    int access = -1;

    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id != 0)
            return CUDA_ERROR_INVALID_DEVICE;
        // Read-only is treated as read-write: nothing checks the difference.
        access = desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    }
    VMM_CALL(fg_vmm_set_access(ptr, size, access));
}

// ---- What the static CUDA runtime asks of the driver ------------------------------

// Rows padded to 512 bytes, as the fake runtime's cudaMallocPitch pads them.
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                    size_t height, unsigned int elementSize)
{
    const size_t align = 512;
    size_t pp = (width + align - 1) / align * align;

    if (!dptr || !pitch || !width || !height ||
        (elementSize != 4 && elementSize != 8 && elementSize != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (pp > SIZE_MAX / height)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = cuMemAlloc_v2(dptr, pp * height);
    if (r == CUDA_SUCCESS)
        *pitch = pp;
    return r;
}

// Device memory only: the device, its address and range, the current context.
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                       CUdeviceptr ptr)
{
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *host;
    fg_lock();
    int dev = fg_mem_span(ptr, &host) > 0;
    int managed = dev && fg_managed_holds(ptr);
    struct fg_ctx *owner = dev ? fg_mem_owner(ptr) : NULL;
    CUdevice ordinal = owner ? owner->device : 0;
    CUcontext owner_ctx = owner ? owner->handle : NULL;
    CUdeviceptr start = 0;
    size_t size = 0;
    if (dev && fg_mem_range(ptr, &start, &size) < 0)
        start = size = 0;       // mapped into reserved address space: not told
    fg_unlock();
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    // Managed memory is the host's at the same address (managed.c).
    if (managed && (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
                    attribute == CU_POINTER_ATTRIBUTE_HOST_POINTER)) {
        if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(unsigned *)data = 1;
        else
            *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    }
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        return CUDA_ERROR_INVALID_VALUE;    // not mapped into host memory
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = ordinal;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = start;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned *)data = attribute == CU_POINTER_ATTRIBUTE_MAPPED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (owner_ctx) {
            *(CUcontext *)data = owner_ctx;
            return CUDA_SUCCESS;
        }
        return cuCtxGetCurrent((CUcontext *)data);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* For the fake NVML (nvml.c), as NVIDIA's driver tells its own NVML: the
 * device memory in use on dev, whichever process or context holds it. */
size_t fakegpu_memory_used(int dev);
size_t fakegpu_memory_used(int dev)
{
    fg_lock();
    size_t n = fg_mem_used_on(dev);
    fg_unlock();
    return n;
}
