// TMA tensor maps as Triton and JAX make them for Hopper GEMMs: the driver
// encodes a 128-byte map from a device address and the tensor's shape, on
// the host, and the map is then passed to kernels by value.  Through rgpu
// the server's driver encodes it from the program's arrays.  What both
// runs print: each call's status (the map's bytes are the driver's private
// layout, and hold the address, which differs between runs).  Link with
// -lcuda.
#include <stdint.h>
#include <string.h>
#include <cuda.h>
#include "check.h"

static CUresult encode_2d(CUtensorMap *map, void *addr, cuuint64_t rows, cuuint64_t cols,
                          cuuint64_t row_bytes, cuuint32_t box)
{
    cuuint64_t dims[2] = { cols, rows }, strides[1] = { row_bytes };
    cuuint32_t boxes[2] = { box, box }, elem[2] = { 1, 1 };
    return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, addr, dims, strides,
                                  boxes, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

static bool nonzero(const CUtensorMap *map)
{
    for (int i = 0; i < CU_TENSOR_MAP_NUM_QWORDS; i++)
        if (map->opaque[i])
            return true;
    return false;
}

int main(void)
{
    CUcontext ctx;
    CUdeviceptr a, b;
    CUtensorMap map;
    check_cu(cuInit(0), "cuInit");
    check_cu(cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check_cu(cuMemAlloc(&a, 256 * 256 * 4), "cuMemAlloc a");
    check_cu(cuMemAlloc(&b, 256 * 256 * 4), "cuMemAlloc b");

    memset(&map, 0, sizeof map);
    check_cu(encode_2d(&map, (void *)(uintptr_t)a, 256, 256, 256 * 4, 64),
             "cuTensorMapEncodeTiled 256x256 float, box 64");
    check(nonzero(&map), "the map is written", "all zeros");
    CUtensorMap copy = map;
    check_cu(cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)b), "cuTensorMapReplaceAddress");
    check(memcmp(&copy, &map, sizeof map) != 0, "the address changed the map", "same bytes");

    // What the driver refuses: a misaligned address, a box over 256
    // elements, a stride that is not a multiple of 16, rank 0.
    check_cu_is(encode_2d(&map, (void *)(uintptr_t)(a + 4), 256, 256, 1024, 64),
                CUDA_ERROR_INVALID_VALUE, "address not 16-byte aligned");
    check_cu_is(encode_2d(&map, (void *)(uintptr_t)a, 256, 256, 1024, 512),
                CUDA_ERROR_INVALID_VALUE, "box of 512 elements");
    check_cu_is(encode_2d(&map, (void *)(uintptr_t)a, 256, 255, 1020, 64),
                CUDA_ERROR_INVALID_VALUE, "row stride of 1020 bytes");
    cuuint64_t dim = 16;
    cuuint32_t box = 16, elem = 1;
    check_cu_is(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0,
                                       (void *)(uintptr_t)a, &dim, NULL, &box, &elem,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                       CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                CUDA_ERROR_INVALID_VALUE, "rank 0");
    // A 1-D map has no strides to give; NVIDIA's driver (580, H200) still
    // refuses a NULL strides pointer for it.
    check_cu_is(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1,
                                       (void *)(uintptr_t)a, &dim, NULL, &box, &elem,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                       CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                CUDA_ERROR_INVALID_VALUE, "1-D map without a strides pointer");

    cuMemFree(a);
    cuMemFree(b);
    cuDevicePrimaryCtxRelease(0);
    return check_failures ? 1 : 0;
}
