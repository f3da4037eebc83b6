/* cudaGetDeviceProperties_v2 of libcudart.so.12: CUDA 12's cudaDeviceProp,
 * which CUDA 13 changed (fields removed, others moved: docs/cuda12.md), so
 * the CUDA 13 procedure cannot fill it.  Compiled with the CUDA 12 headers
 * (and only those): each field is filled from the device attribute that
 * holds the same fact, through cudaDeviceGetAttribute, whose prototype is
 * the same in both releases and whose answers the client keeps after the
 * first; the name, UUID, LUID, memory size and unified function pointers,
 * which no runtime attribute gives,
 * come from CUDA 13's cudaDeviceProp (cudart12_props13.c).  Server side:
 * cudaDeviceGetAttribute and cudaGetDeviceProperties, generated. */
#include "cudart12_props.h"
#include "rgpu_client.h"

#include <cuda_runtime_api.h>
#include <string.h>

#if CUDART_VERSION < 12000 || CUDART_VERSION >= 13000
#error "cudart12_props.c is compiled with the CUDA 12 headers"
#endif

enum width { INT, SIZE, UINT };

struct prop_attr {
    size_t offset;
    enum cudaDeviceAttr attr;
    enum width width;
};

#define F(field, attr) { offsetof(struct cudaDeviceProp, field), attr, INT }
#define Z(field, attr) { offsetof(struct cudaDeviceProp, field), attr, SIZE }
#define U(field, attr) { offsetof(struct cudaDeviceProp, field), attr, UINT }

static const struct prop_attr props[] = {
    Z(sharedMemPerBlock, cudaDevAttrMaxSharedMemoryPerBlock),
    F(regsPerBlock, cudaDevAttrMaxRegistersPerBlock),
    F(warpSize, cudaDevAttrWarpSize),
    Z(memPitch, cudaDevAttrMaxPitch),
    F(maxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock),
    F(maxThreadsDim[0], cudaDevAttrMaxBlockDimX),
    F(maxThreadsDim[1], cudaDevAttrMaxBlockDimY),
    F(maxThreadsDim[2], cudaDevAttrMaxBlockDimZ),
    F(maxGridSize[0], cudaDevAttrMaxGridDimX),
    F(maxGridSize[1], cudaDevAttrMaxGridDimY),
    F(maxGridSize[2], cudaDevAttrMaxGridDimZ),
    F(clockRate, cudaDevAttrClockRate),
    Z(totalConstMem, cudaDevAttrTotalConstantMemory),
    F(major, cudaDevAttrComputeCapabilityMajor),
    F(minor, cudaDevAttrComputeCapabilityMinor),
    Z(textureAlignment, cudaDevAttrTextureAlignment),
    Z(texturePitchAlignment, cudaDevAttrTexturePitchAlignment),
    F(deviceOverlap, cudaDevAttrGpuOverlap),
    F(multiProcessorCount, cudaDevAttrMultiProcessorCount),
    F(kernelExecTimeoutEnabled, cudaDevAttrKernelExecTimeout),
    F(integrated, cudaDevAttrIntegrated),
    F(canMapHostMemory, cudaDevAttrCanMapHostMemory),
    F(computeMode, cudaDevAttrComputeMode),
    F(maxTexture1D, cudaDevAttrMaxTexture1DWidth),
    F(maxTexture1DMipmap, cudaDevAttrMaxTexture1DMipmappedWidth),
    F(maxTexture1DLinear, cudaDevAttrMaxTexture1DLinearWidth),
    F(maxTexture2D[0], cudaDevAttrMaxTexture2DWidth),
    F(maxTexture2D[1], cudaDevAttrMaxTexture2DHeight),
    F(maxTexture2DMipmap[0], cudaDevAttrMaxTexture2DMipmappedWidth),
    F(maxTexture2DMipmap[1], cudaDevAttrMaxTexture2DMipmappedHeight),
    F(maxTexture2DLinear[0], cudaDevAttrMaxTexture2DLinearWidth),
    F(maxTexture2DLinear[1], cudaDevAttrMaxTexture2DLinearHeight),
    F(maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch),
    F(maxTexture2DGather[0], cudaDevAttrMaxTexture2DGatherWidth),
    F(maxTexture2DGather[1], cudaDevAttrMaxTexture2DGatherHeight),
    F(maxTexture3D[0], cudaDevAttrMaxTexture3DWidth),
    F(maxTexture3D[1], cudaDevAttrMaxTexture3DHeight),
    F(maxTexture3D[2], cudaDevAttrMaxTexture3DDepth),
    F(maxTexture3DAlt[0], cudaDevAttrMaxTexture3DWidthAlt),
    F(maxTexture3DAlt[1], cudaDevAttrMaxTexture3DHeightAlt),
    F(maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt),
    F(maxTextureCubemap, cudaDevAttrMaxTextureCubemapWidth),
    F(maxTexture1DLayered[0], cudaDevAttrMaxTexture1DLayeredWidth),
    F(maxTexture1DLayered[1], cudaDevAttrMaxTexture1DLayeredLayers),
    F(maxTexture2DLayered[0], cudaDevAttrMaxTexture2DLayeredWidth),
    F(maxTexture2DLayered[1], cudaDevAttrMaxTexture2DLayeredHeight),
    F(maxTexture2DLayered[2], cudaDevAttrMaxTexture2DLayeredLayers),
    F(maxTextureCubemapLayered[0], cudaDevAttrMaxTextureCubemapLayeredWidth),
    F(maxTextureCubemapLayered[1], cudaDevAttrMaxTextureCubemapLayeredLayers),
    F(maxSurface1D, cudaDevAttrMaxSurface1DWidth),
    F(maxSurface2D[0], cudaDevAttrMaxSurface2DWidth),
    F(maxSurface2D[1], cudaDevAttrMaxSurface2DHeight),
    F(maxSurface3D[0], cudaDevAttrMaxSurface3DWidth),
    F(maxSurface3D[1], cudaDevAttrMaxSurface3DHeight),
    F(maxSurface3D[2], cudaDevAttrMaxSurface3DDepth),
    F(maxSurface1DLayered[0], cudaDevAttrMaxSurface1DLayeredWidth),
    F(maxSurface1DLayered[1], cudaDevAttrMaxSurface1DLayeredLayers),
    F(maxSurface2DLayered[0], cudaDevAttrMaxSurface2DLayeredWidth),
    F(maxSurface2DLayered[1], cudaDevAttrMaxSurface2DLayeredHeight),
    F(maxSurface2DLayered[2], cudaDevAttrMaxSurface2DLayeredLayers),
    F(maxSurfaceCubemap, cudaDevAttrMaxSurfaceCubemapWidth),
    F(maxSurfaceCubemapLayered[0], cudaDevAttrMaxSurfaceCubemapLayeredWidth),
    F(maxSurfaceCubemapLayered[1], cudaDevAttrMaxSurfaceCubemapLayeredLayers),
    Z(surfaceAlignment, cudaDevAttrSurfaceAlignment),
    F(concurrentKernels, cudaDevAttrConcurrentKernels),
    F(ECCEnabled, cudaDevAttrEccEnabled),
    F(pciBusID, cudaDevAttrPciBusId),
    F(pciDeviceID, cudaDevAttrPciDeviceId),
    F(pciDomainID, cudaDevAttrPciDomainId),
    F(tccDriver, cudaDevAttrTccDriver),
    F(asyncEngineCount, cudaDevAttrAsyncEngineCount),
    F(unifiedAddressing, cudaDevAttrUnifiedAddressing),
    F(memoryClockRate, cudaDevAttrMemoryClockRate),
    F(memoryBusWidth, cudaDevAttrGlobalMemoryBusWidth),
    F(l2CacheSize, cudaDevAttrL2CacheSize),
    F(persistingL2CacheMaxSize, cudaDevAttrMaxPersistingL2CacheSize),
    F(maxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor),
    F(streamPrioritiesSupported, cudaDevAttrStreamPrioritiesSupported),
    F(globalL1CacheSupported, cudaDevAttrGlobalL1CacheSupported),
    F(localL1CacheSupported, cudaDevAttrLocalL1CacheSupported),
    Z(sharedMemPerMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor),
    F(regsPerMultiprocessor, cudaDevAttrMaxRegistersPerMultiprocessor),
    F(managedMemory, cudaDevAttrManagedMemory),
    F(isMultiGpuBoard, cudaDevAttrIsMultiGpuBoard),
    F(multiGpuBoardGroupID, cudaDevAttrMultiGpuBoardGroupID),
    F(hostNativeAtomicSupported, cudaDevAttrHostNativeAtomicSupported),
    F(singleToDoublePrecisionPerfRatio, cudaDevAttrSingleToDoublePrecisionPerfRatio),
    F(pageableMemoryAccess, cudaDevAttrPageableMemoryAccess),
    F(concurrentManagedAccess, cudaDevAttrConcurrentManagedAccess),
    F(computePreemptionSupported, cudaDevAttrComputePreemptionSupported),
    F(canUseHostPointerForRegisteredMem, cudaDevAttrCanUseHostPointerForRegisteredMem),
    F(cooperativeLaunch, cudaDevAttrCooperativeLaunch),
    F(cooperativeMultiDeviceLaunch, cudaDevAttrCooperativeMultiDeviceLaunch),
    Z(sharedMemPerBlockOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin),
    F(pageableMemoryAccessUsesHostPageTables, cudaDevAttrPageableMemoryAccessUsesHostPageTables),
    F(directManagedMemAccessFromHost, cudaDevAttrDirectManagedMemAccessFromHost),
    F(maxBlocksPerMultiProcessor, cudaDevAttrMaxBlocksPerMultiprocessor),
    F(accessPolicyMaxWindowSize, cudaDevAttrMaxAccessPolicyWindowSize),
    Z(reservedSharedMemPerBlock, cudaDevAttrReservedSharedMemoryPerBlock),
    F(hostRegisterSupported, cudaDevAttrHostRegisterSupported),
    F(sparseCudaArraySupported, cudaDevAttrSparseCudaArraySupported),
    F(hostRegisterReadOnlySupported, cudaDevAttrHostRegisterReadOnlySupported),
    F(timelineSemaphoreInteropSupported, cudaDevAttrTimelineSemaphoreInteropSupported),
    F(memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported),
    F(gpuDirectRDMASupported, cudaDevAttrGPUDirectRDMASupported),
    U(gpuDirectRDMAFlushWritesOptions, cudaDevAttrGPUDirectRDMAFlushWritesOptions),
    F(gpuDirectRDMAWritesOrdering, cudaDevAttrGPUDirectRDMAWritesOrdering),
    U(memoryPoolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes),
    F(deferredMappingCudaArraySupported, cudaDevAttrDeferredMappingCudaArraySupported),
    F(ipcEventSupported, cudaDevAttrIpcEventSupport),
    F(clusterLaunch, cudaDevAttrClusterLaunch),
};

static void store(struct cudaDeviceProp *p, const struct prop_attr *a, int value)
{
    char *at = (char *)p + a->offset;
    if (a->width == SIZE) {
        size_t v = (size_t)(unsigned)value;
        memcpy(at, &v, sizeof v);
    } else if (a->width == UINT) {
        unsigned v = (unsigned)value;
        memcpy(at, &v, sizeof v);
    } else {
        memcpy(at, &value, sizeof value);
    }
}

RGPU_EXPORT cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
{
    struct rgpu_cuda12_identity id;
    struct cudaDeviceProp p;
    if (!prop)
        return cudaErrorInvalidValue;
    int rc = rgpu_cuda12_device_identity(device, &id);
    if (rc != cudaSuccess)
        return (cudaError_t)rc;     /* the CUDA 13 stub has set the last error */
    memset(&p, 0, sizeof p);
    memcpy(p.name, id.name, sizeof p.name);
    memcpy(p.uuid.bytes, id.uuid, sizeof p.uuid.bytes);
    memcpy(p.luid, id.luid, sizeof p.luid);
    p.luidDeviceNodeMask = id.luid_device_node_mask;
    p.totalGlobalMem = id.total_global_mem;
    p.unifiedFunctionPointers = id.unified_function_pointers;
    /* An attribute the server's runtime does not know leaves its field 0,
     * as a device without the feature would; its error is not the
     * program's, so a last error that was clear is cleared again. */
    int clear_before = cudaPeekAtLastError() == cudaSuccess, failed = 0;
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
        int value = 0;
        if (cudaDeviceGetAttribute(&value, props[i].attr, device) == cudaSuccess)
            store(&p, &props[i], value);
        else
            failed = 1;
    }
    if (failed && clear_before)
        (void)cudaGetLastError();
    *prop = p;
    return cudaSuccess;
}
