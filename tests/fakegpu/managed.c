// Fake libcuda.so.1: managed memory (cuMemAllocManaged) and what programs
// ask and tell of it: prefetches, advice, stream attachment and range
// attributes.
//
// A managed allocation is device memory of the arena (the fake has one
// memory for host and device) plus, per 4 KiB page, the advice given and
// the last prefetch's destination, as the driver keeps them per page: a
// range attribute holds a value only when every page of the range agrees
// (else the "no value" answer: 0, or CU_DEVICE_INVALID for locations).
// Prefetches move nothing and advice changes nothing but the answers;
// both check their arguments as the driver does.
#include "fakegpu.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096
#define MAX_MANAGED 256

struct page_state {
    signed char preferred;      // device ordinal, CU_DEVICE_CPU or CU_DEVICE_INVALID
    signed char last_prefetch;
    unsigned char read_mostly;
    unsigned char accessed_by;  // device 0 (the only one) set as accessing
};

static struct managed {
    CUdeviceptr base;
    size_t size;
    struct page_state *pages;   // NULL: a free slot
} managed[MAX_MANAGED];

static struct managed *find(CUdeviceptr p, size_t count)
{
    for (int i = 0; i < MAX_MANAGED; i++) {
        struct managed *m = &managed[i];
        if (m->pages && fg_mem_valid(m->base, m->size) && p >= m->base && p - m->base < m->size &&
            count <= m->size - (p - m->base))
            return m;
    }
    return NULL;
}

int fg_managed_holds(CUdeviceptr p)
{
    return find(p, 0) != NULL;
}

void fg_managed_forget(CUdeviceptr p)
{
    for (int i = 0; i < MAX_MANAGED; i++) {
        if (managed[i].pages && managed[i].base == p) {
            free(managed[i].pages);
            managed[i].pages = NULL;
        }
    }
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct fg_ctx *c;
    struct managed *slot = NULL;
    CUresult r;

    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    for (int i = 0; r == CUDA_SUCCESS && i < MAX_MANAGED && !slot; i++)
        if (!managed[i].pages)
            slot = &managed[i];
    if (r == CUDA_SUCCESS && !slot)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    size_t npages = (bytesize + PAGE - 1) / PAGE;
    struct page_state *pages = r == CUDA_SUCCESS ? calloc(npages, sizeof *pages) : NULL;
    if (r == CUDA_SUCCESS && !pages)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        r = fg_mem_alloc(c, bytesize, dptr);
    if (r == CUDA_SUCCESS) {
        for (size_t i = 0; i < npages; i++)
            pages[i].preferred = pages[i].last_prefetch = (signed char)CU_DEVICE_INVALID;
        *slot = (struct managed){ *dptr, bytesize, pages };
        pages = NULL;
    }
    free(pages);
    fg_unlock();
    return r;
}

// The pages [first, last] of m that [p, p+count) touches.
static void page_span(const struct managed *m, CUdeviceptr p, size_t count, size_t *first,
                      size_t *last)
{
    *first = (p - m->base) / PAGE;
    *last = (p - m->base + (count ? count - 1 : 0)) / PAGE;
}

// Where a location points: device 0 or the CPU; -3 for anything else.
static int location_device(CUmemLocation loc)
{
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id == 0)
        return 0;
    if (loc.type == CU_MEM_LOCATION_TYPE_HOST)
        return CU_DEVICE_CPU;
    return -3;
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream hStream)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_ENQUEUE, &c, &skip);
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(hStream);
    struct managed *m = r == CUDA_SUCCESS ? find(devPtr, count) : NULL;
    int dev = location_device(location);
    if (r == CUDA_SUCCESS && (!m || count == 0 || flags != 0 || dev == -3))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !skip) {
        size_t first, last;
        page_span(m, devPtr, count, &first, &last);
        for (size_t i = first; i <= last; i++)
            m->pages[i].last_prefetch = (signed char)dev;
    }
    fg_unlock();
    return r;
}

// The CUDA 8 form, a device ordinal (CU_DEVICE_CPU for the host).
#undef cuMemPrefetchAsync
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                    CUstream hStream)
{
    CUmemLocation loc = { dstDevice == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST
                                                     : CU_MEM_LOCATION_TYPE_DEVICE,
                          dstDevice };
    return cuMemPrefetchAsync_v2(devPtr, count, loc, 0, hStream);
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                         CUstream hStream)
{
    return cuMemPrefetchAsync(devPtr, count, dstDevice, hStream);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                            CUmemLocation location, unsigned int flags,
                                            CUstream hStream)
{
    return cuMemPrefetchAsync_v2(devPtr, count, location, flags, hStream);
}

static void advise_page(struct page_state *pg, CUmem_advise advice, int dev)
{
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: pg->read_mostly = 1; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: pg->read_mostly = 0; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: pg->preferred = (signed char)dev; break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        pg->preferred = (signed char)CU_DEVICE_INVALID;
        break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: pg->accessed_by = fg_device_valid(dev); break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: pg->accessed_by = 0; break;
    }
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                CUmemLocation location)
{
    struct fg_ctx *c;
    CUresult r;
    int needs_location = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                         advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                         advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    struct managed *m = r == CUDA_SUCCESS ? find(devPtr, count) : NULL;
    int dev = location_device(location);
    if (r == CUDA_SUCCESS && (!m || count == 0 || advice < CU_MEM_ADVISE_SET_READ_MOSTLY ||
                              advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY ||
                              (needs_location && dev == -3)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        size_t first, last;
        page_span(m, devPtr, count, &first, &last);
        for (size_t i = first; i <= last; i++)
            advise_page(&m->pages[i], advice, dev);
    }
    fg_unlock();
    return r;
}

#undef cuMemAdvise
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUdevice device)
{
    CUmemLocation loc = { device == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST
                                                  : CU_MEM_LOCATION_TYPE_DEVICE,
                          device };
    return cuMemAdvise_v2(devPtr, count, advice, loc);
}

// One attribute over pages [first, last]: its value when they all agree.
static int page_value(const struct page_state *pg, CUmem_range_attribute a)
{
    switch (a) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: return pg->read_mostly;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: return pg->preferred;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: return pg->last_prefetch;
    default: return pg->accessed_by;
    }
}

static void range_value(const struct managed *m, size_t first, size_t last,
                        CUmem_range_attribute a, void *data, size_t dataSize)
{
    int v = page_value(&m->pages[first], a);
    int agree = 1;
    for (size_t i = first + 1; i <= last; i++)
        agree &= page_value(&m->pages[i], a) == v;
    if (a == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
        // The devices set as accessing every page, then CU_DEVICE_INVALID.
        int *out = data;
        size_t n = dataSize / 4, k = 0;
        if (agree && v && k < n)
            out[k++] = 0;
        while (k < n)
            out[k++] = CU_DEVICE_INVALID;
        return;
    }
    if (!agree)
        v = a == CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY ? 0 : CU_DEVICE_INVALID;
    memcpy(data, &v, 4);
}

CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dataSize,
                                        CUmem_range_attribute attribute, CUdeviceptr devPtr,
                                        size_t count)
{
    struct fg_ctx *c;
    CUresult r;
    int sized = attribute == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY
                    ? dataSize > 0 && dataSize % 4 == 0
                    : dataSize == 4 && attribute >= CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY &&
                          attribute <= CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION;

    if (!data || !sized || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    struct managed *m = r == CUDA_SUCCESS ? find(devPtr, count) : NULL;
    if (r == CUDA_SUCCESS && !m)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        size_t first, last;
        page_span(m, devPtr, count, &first, &last);
        range_value(m, first, last, attribute, data, dataSize);
    }
    fg_unlock();
    return r;
}

// Attaching checks its arguments only: the fake's memory is always
// reachable.  The range must be a whole managed allocation (length 0 means
// all of it).
CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                        unsigned int flags)
{
    struct fg_ctx *c;
    int skip = 0;
    CUresult r;

    fg_lock();
    r = fg_enter(FG_ENQUEUE, &c, &skip);
    if (r == CUDA_SUCCESS)
        r = fg_check_stream(hStream);
    struct managed *m = r == CUDA_SUCCESS ? find(dptr, length) : NULL;
    if (r == CUDA_SUCCESS &&
        (!m || m->base != dptr || (length && length != m->size) ||
         (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
          flags != CU_MEM_ATTACH_SINGLE)))
        r = CUDA_ERROR_INVALID_VALUE;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
                                             unsigned int flags)
{
    return cuStreamAttachMemAsync(hStream, dptr, length, flags);
}
