/* Sizes of values whose type an attribute decides: the value is an
 * untyped pointer, and both ends of the wire size the buffer by the
 * attribute (0 refuses an attribute we do not know).  cuPointerGetAttribute's
 * first, memory pools' below. */
#include <stdint.h>

#include <cuda.h>

uint32_t rgpu_cu_pointer_attr_size(int attribute);

uint32_t rgpu_cu_pointer_attr_size(int attribute)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:          /* CUmemorytype */
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:          /* bool, as unsigned int */
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return 4;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        return 8;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
        return 0;
    }
}

/* Sizes of a memory pool attribute's value (cuMemPool{Set,Get}Attribute and
 * the runtime's cudaMemPool{Set,Get}Attribute, whose enums agree): the
 * reuse flags are ints, the threshold and the counts cuuint64_t; 0 refuses
 * an attribute we do not know. */
uint32_t rgpu_mempool_attr_size(int attribute);

uint32_t rgpu_mempool_attr_size(int attribute)
{
    switch (attribute) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        return sizeof(int);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        return sizeof(cuuint64_t);
    default:
        return 0;
    }
}

/* The arrays a TMA tensor map is encoded from, sized by the tensor's rank:
 * rank dimensions and box sizes, rank - 1 strides (the first is the element
 * size), rank - 2 im2col corner offsets. */
uint32_t rgpu_tensor_rank_u64s(int rank);
uint32_t rgpu_tensor_rank_u32s(int rank);
uint32_t rgpu_tensor_strides_size(int rank);
uint32_t rgpu_tensor_corners_size(int rank);

static uint32_t rank_items(int rank, int less, uint32_t item)
{
    return rank > less && rank <= 5 ? (uint32_t)(rank - less) * item : 0;
}

uint32_t rgpu_tensor_rank_u64s(int rank)
{
    return rank_items(rank, 0, sizeof(cuuint64_t));
}

uint32_t rgpu_tensor_rank_u32s(int rank)
{
    return rank_items(rank, 0, sizeof(cuuint32_t));
}

/* Rank 1 has no strides, but the driver wants a pointer: one element (of
 * the client's own, stubs/cuda_tensor_map.c) travels. */
uint32_t rgpu_tensor_strides_size(int rank)
{
    return rank == 1 ? sizeof(cuuint64_t) : rank_items(rank, 1, sizeof(cuuint64_t));
}

uint32_t rgpu_tensor_corners_size(int rank)
{
    return rank_items(rank, 2, sizeof(int));
}
