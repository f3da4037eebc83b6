// TMA tensor maps (cuTensorMapEncodeTiled, cuTensorMapReplaceAddress): the
// fake has no TMA unit, so a map is only encoded and checked.  What is
// checked is what cuda.h documents for the tiled encoding: a rank of 1 to
// 5, a global address aligned to 16 bytes (32 for interleave 32B) inside
// device memory, dimensions above 0 and below 2^32, strides multiples of
// 16 below 2^40, box sizes of 1 to 256 elements, element strides of 1 to 8.
// A strides pointer is required even for rank 1, which has none to give
// (NVIDIA's driver 580 refuses NULL there).  The map's 128 bytes hold the address and the arguments in the fake's own
// layout; NVIDIA's layout is private, and nothing reads the fake's.
#include "fakegpu.h"

#include <string.h>

static int aligned_in_memory(const void *addr, size_t align)
{
    unsigned char *host;
    uintptr_t p = (uintptr_t)addr;

    if (p % align)
        return 0;
    fg_lock();
    int ok = fg_mem_span((CUdeviceptr)p, &host) > 0;
    fg_unlock();
    return ok;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                        void *addr, const cuuint64_t *dims,
                                        const cuuint64_t *strides, const cuuint32_t *box,
                                        const cuuint32_t *elem_strides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle,
                                        CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    size_t align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;

    if (!map || rank < 1 || rank > 5 || !dims || !box || !elem_strides || !strides)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
        (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return CUDA_ERROR_INVALID_VALUE;
    if (!aligned_in_memory(addr, align))
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || dims[i] > (1ull << 32) || box[i] == 0 || box[i] > 256 ||
            elem_strides[i] == 0 || elem_strides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        if (i + 1 < rank && (strides[i] % 16 || strides[i] >= (1ull << 40)))
            return CUDA_ERROR_INVALID_VALUE;
    }
    memset(map, 0, sizeof *map);
    map->opaque[0] = (cuuint64_t)(uintptr_t)addr;
    map->opaque[1] = (cuuint64_t)type | (cuuint64_t)rank << 8 | (cuuint64_t)interleave << 16 |
                     (cuuint64_t)swizzle << 24 | (cuuint64_t)l2 << 32 | (cuuint64_t)oob << 40;
    for (cuuint32_t i = 0; i < rank; i++)
        map->opaque[2 + i] = dims[i] | (cuuint64_t)box[i] << 40 | (cuuint64_t)elem_strides[i] << 56;
    return CUDA_SUCCESS;
}

// The map keeps everything but the address, which must obey the same rules.
CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *map, void *addr)
{
    if (!map || !map->opaque[1])
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = ((map->opaque[1] >> 16) & 0xff) == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
    if (!aligned_in_memory(addr, align))
        return CUDA_ERROR_INVALID_VALUE;
    map->opaque[0] = (cuuint64_t)(uintptr_t)addr;
    return CUDA_SUCCESS;
}
