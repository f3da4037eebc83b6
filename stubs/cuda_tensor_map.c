/* TMA tensor maps: the server's driver encodes them (generated procedures,
 * codegen/cuda.ann), from arrays whose lengths the rank gives (1 to 5
 * dimensions; rank - 1 strides; rank - 2 im2col corners).  A rank outside
 * what cuda.h allows cannot say how many elements to send, so it is
 * answered here with the driver's status for it.  A 1-D map has no
 * strides to send: a pointer the program passed becomes one to a zero of
 * ours (the driver wants one, and reads none), NULL stays NULL. */
#include "rgpu_client.h"
#include "cuda_procs.h"

#include <cuda.h>

#define LIB (&rgpu_cuda_lib)

#undef cuTensorMapEncodeTiled
RGPU_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap,
                                            CUtensorMapDataType tensorDataType,
                                            cuuint32_t tensorRank, void *globalAddress,
                                            const cuuint64_t *globalDim,
                                            const cuuint64_t *globalStrides,
                                            const cuuint32_t *boxDim,
                                            const cuuint32_t *elementStrides,
                                            CUtensorMapInterleave interleave,
                                            CUtensorMapSwizzle swizzle,
                                            CUtensorMapL2promotion l2Promotion,
                                            CUtensorMapFloatOOBfill oobFill)
{
    if (tensorRank < 1 || tensorRank > 5)
        return CUDA_ERROR_INVALID_VALUE;
    static const cuuint64_t no_strides = 0;
    if (tensorRank == 1 && globalStrides)
        globalStrides = &no_strides;
    const void *argv[] = { &tensorMap, &tensorDataType, &tensorRank, &globalAddress, &globalDim,
                           &globalStrides, &boxDim, &elementStrides, &interleave, &swizzle,
                           &l2Promotion, &oobFill };
    return rgpu_call(LIB, RGPU_CUDA_cuTensorMapEncodeTiled, argv);
}

#undef cuTensorMapEncodeIm2col
RGPU_EXPORT CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap,
                                             CUtensorMapDataType tensorDataType,
                                             cuuint32_t tensorRank, void *globalAddress,
                                             const cuuint64_t *globalDim,
                                             const cuuint64_t *globalStrides,
                                             const int *pixelBoxLowerCorner,
                                             const int *pixelBoxUpperCorner,
                                             cuuint32_t channelsPerPixel,
                                             cuuint32_t pixelsPerColumn,
                                             const cuuint32_t *elementStrides,
                                             CUtensorMapInterleave interleave,
                                             CUtensorMapSwizzle swizzle,
                                             CUtensorMapL2promotion l2Promotion,
                                             CUtensorMapFloatOOBfill oobFill)
{
    if (tensorRank < 3 || tensorRank > 5)      /* im2col: 3 to 5 dimensions */
        return CUDA_ERROR_INVALID_VALUE;
    const void *argv[] = { &tensorMap, &tensorDataType, &tensorRank, &globalAddress,
                           &globalDim, &globalStrides, &pixelBoxLowerCorner,
                           &pixelBoxUpperCorner, &channelsPerPixel, &pixelsPerColumn,
                           &elementStrides, &interleave, &swizzle, &l2Promotion, &oobFill };
    return rgpu_call(LIB, RGPU_CUDA_cuTensorMapEncodeIm2col, argv);
}

#undef cuTensorMapEncodeIm2colWide
RGPU_EXPORT CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *tensorMap,
                                                 CUtensorMapDataType tensorDataType,
                                                 cuuint32_t tensorRank, void *globalAddress,
                                                 const cuuint64_t *globalDim,
                                                 const cuuint64_t *globalStrides,
                                                 int pixelBoxLowerCornerWidth,
                                                 int pixelBoxUpperCornerWidth,
                                                 cuuint32_t channelsPerPixel,
                                                 cuuint32_t pixelsPerColumn,
                                                 const cuuint32_t *elementStrides,
                                                 CUtensorMapInterleave interleave,
                                                 CUtensorMapIm2ColWideMode mode,
                                                 CUtensorMapSwizzle swizzle,
                                                 CUtensorMapL2promotion l2Promotion,
                                                 CUtensorMapFloatOOBfill oobFill)
{
    if (tensorRank < 3 || tensorRank > 5)
        return CUDA_ERROR_INVALID_VALUE;
    const void *argv[] = { &tensorMap, &tensorDataType, &tensorRank, &globalAddress,
                           &globalDim, &globalStrides, &pixelBoxLowerCornerWidth,
                           &pixelBoxUpperCornerWidth, &channelsPerPixel, &pixelsPerColumn,
                           &elementStrides, &interleave, &mode, &swizzle, &l2Promotion,
                           &oobFill };
    return rgpu_call(LIB, RGPU_CUDA_cuTensorMapEncodeIm2colWide, argv);
}
