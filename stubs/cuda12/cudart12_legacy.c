/* libcudart.so.12's functions that CUDA 13 renamed or folded into others,
 * served through the CUDA 13 stub's own (compiled with the CUDA 12
 * headers alone; no procedure of their own):
 *   - cudaThread*: CUDA 4's names of the cudaDevice* functions, which
 *     CUDA 12 still exports and CUDA 13 does not;
 *   - cudaStreamGetCaptureInfo_v2/_v3 (and _ptsz): CUDA 13's
 *     cudaStreamGetCaptureInfo is _v3, and _v2 is it without edge data.
 *     cudaGraphEdgeData has the same layout in both releases. */
#include "rgpu_client.h"

#include <cuda_runtime_api.h>

#if CUDART_VERSION < 12000 || CUDART_VERSION >= 13000
#error "cudart12_legacy.c is compiled with the CUDA 12 headers"
#endif

/* The CUDA 13 stub's functions, under the names they take inside
 * libcudart.so.12, where the exported names are CUDA 12's
 * (stubs/cuda12/meson.build, build/stubs/cuda12/cudart12_renames.h). */
typedef cudaError_t capture_info_fn(cudaStream_t, enum cudaStreamCaptureStatus *,
                                    unsigned long long *, cudaGraph_t *,
                                    const cudaGraphNode_t **, const cudaGraphEdgeData **,
                                    size_t *);
capture_info_fn rgpu_cuda13_cudaStreamGetCaptureInfo, rgpu_cuda13_cudaStreamGetCaptureInfo_ptsz;

RGPU_EXPORT cudaError_t cudaThreadSynchronize(void)
{
    return cudaDeviceSynchronize();
}

RGPU_EXPORT cudaError_t cudaThreadExit(void)
{
    return cudaDeviceReset();
}

RGPU_EXPORT cudaError_t cudaThreadSetLimit(enum cudaLimit limit, size_t value)
{
    return cudaDeviceSetLimit(limit, value);
}

RGPU_EXPORT cudaError_t cudaThreadGetLimit(size_t *pValue, enum cudaLimit limit)
{
    return cudaDeviceGetLimit(pValue, limit);
}

RGPU_EXPORT cudaError_t cudaThreadGetCacheConfig(enum cudaFuncCache *pCacheConfig)
{
    return cudaDeviceGetCacheConfig(pCacheConfig);
}

RGPU_EXPORT cudaError_t cudaThreadSetCacheConfig(enum cudaFuncCache cacheConfig)
{
    return cudaDeviceSetCacheConfig(cacheConfig);
}

RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_v3(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return rgpu_cuda13_cudaStreamGetCaptureInfo(stream, captureStatus_out, id_out, graph_out,
                                                dependencies_out, edgeData_out,
                                                numDependencies_out);
}

RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_v3_ptsz(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return rgpu_cuda13_cudaStreamGetCaptureInfo_ptsz(stream, captureStatus_out, id_out,
                                                     graph_out, dependencies_out, edgeData_out,
                                                     numDependencies_out);
}

RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_v2(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    size_t *numDependencies_out)
{
    return rgpu_cuda13_cudaStreamGetCaptureInfo(stream, captureStatus_out, id_out, graph_out,
                                                dependencies_out, NULL, numDependencies_out);
}

RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    size_t *numDependencies_out)
{
    return rgpu_cuda13_cudaStreamGetCaptureInfo_ptsz(stream, captureStatus_out, id_out,
                                                     graph_out, dependencies_out, NULL,
                                                     numDependencies_out);
}
