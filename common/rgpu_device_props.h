/* The fields of CUDA 13's cudaDeviceProp that a device attribute holds,
 * as X(field, the CU_DEVICE_ATTRIBUTE_ name's suffix): the same fact two
 * ways.  Read by rgpud to fill CUDA 13's structure where CUDA 12's runtime
 * serves a session (daemon/backend12.c), and by the fake backend's runtime
 * (tests/fakegpu). The name, UUID, LUID and memory size come from their
 * own driver calls. */
#ifndef RGPU_DEVICE_PROPS_H
#define RGPU_DEVICE_PROPS_H

#define RGPU_DEVICE_PROP_ATTRIBUTES(X) \
    X(sharedMemPerBlock, MAX_SHARED_MEMORY_PER_BLOCK) \
    X(regsPerBlock, MAX_REGISTERS_PER_BLOCK) \
    X(warpSize, WARP_SIZE) \
    X(memPitch, MAX_PITCH) \
    X(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK) \
    X(maxThreadsDim[0], MAX_BLOCK_DIM_X) \
    X(maxThreadsDim[1], MAX_BLOCK_DIM_Y) \
    X(maxThreadsDim[2], MAX_BLOCK_DIM_Z) \
    X(maxGridSize[0], MAX_GRID_DIM_X) \
    X(maxGridSize[1], MAX_GRID_DIM_Y) \
    X(maxGridSize[2], MAX_GRID_DIM_Z) \
    X(totalConstMem, TOTAL_CONSTANT_MEMORY) \
    X(major, COMPUTE_CAPABILITY_MAJOR) \
    X(minor, COMPUTE_CAPABILITY_MINOR) \
    X(textureAlignment, TEXTURE_ALIGNMENT) \
    X(texturePitchAlignment, TEXTURE_PITCH_ALIGNMENT) \
    X(multiProcessorCount, MULTIPROCESSOR_COUNT) \
    X(integrated, INTEGRATED) \
    X(canMapHostMemory, CAN_MAP_HOST_MEMORY) \
    X(maxTexture1D, MAXIMUM_TEXTURE1D_WIDTH) \
    X(maxTexture1DMipmap, MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH) \
    X(maxTexture2D[0], MAXIMUM_TEXTURE2D_WIDTH) \
    X(maxTexture2D[1], MAXIMUM_TEXTURE2D_HEIGHT) \
    X(maxTexture2DMipmap[0], MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH) \
    X(maxTexture2DMipmap[1], MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT) \
    X(maxTexture2DLinear[0], MAXIMUM_TEXTURE2D_LINEAR_WIDTH) \
    X(maxTexture2DLinear[1], MAXIMUM_TEXTURE2D_LINEAR_HEIGHT) \
    X(maxTexture2DLinear[2], MAXIMUM_TEXTURE2D_LINEAR_PITCH) \
    X(maxTexture2DGather[0], MAXIMUM_TEXTURE2D_GATHER_WIDTH) \
    X(maxTexture2DGather[1], MAXIMUM_TEXTURE2D_GATHER_HEIGHT) \
    X(maxTexture3D[0], MAXIMUM_TEXTURE3D_WIDTH) \
    X(maxTexture3D[1], MAXIMUM_TEXTURE3D_HEIGHT) \
    X(maxTexture3D[2], MAXIMUM_TEXTURE3D_DEPTH) \
    X(maxTexture3DAlt[0], MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE) \
    X(maxTexture3DAlt[1], MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE) \
    X(maxTexture3DAlt[2], MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE) \
    X(maxTextureCubemap, MAXIMUM_TEXTURECUBEMAP_WIDTH) \
    X(maxTexture1DLayered[0], MAXIMUM_TEXTURE1D_LAYERED_WIDTH) \
    X(maxTexture1DLayered[1], MAXIMUM_TEXTURE1D_LAYERED_LAYERS) \
    X(maxTexture2DLayered[0], MAXIMUM_TEXTURE2D_LAYERED_WIDTH) \
    X(maxTexture2DLayered[1], MAXIMUM_TEXTURE2D_LAYERED_HEIGHT) \
    X(maxTexture2DLayered[2], MAXIMUM_TEXTURE2D_LAYERED_LAYERS) \
    X(maxTextureCubemapLayered[0], MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH) \
    X(maxTextureCubemapLayered[1], MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS) \
    X(maxSurface1D, MAXIMUM_SURFACE1D_WIDTH) \
    X(maxSurface2D[0], MAXIMUM_SURFACE2D_WIDTH) \
    X(maxSurface2D[1], MAXIMUM_SURFACE2D_HEIGHT) \
    X(maxSurface3D[0], MAXIMUM_SURFACE3D_WIDTH) \
    X(maxSurface3D[1], MAXIMUM_SURFACE3D_HEIGHT) \
    X(maxSurface3D[2], MAXIMUM_SURFACE3D_DEPTH) \
    X(maxSurface1DLayered[0], MAXIMUM_SURFACE1D_LAYERED_WIDTH) \
    X(maxSurface1DLayered[1], MAXIMUM_SURFACE1D_LAYERED_LAYERS) \
    X(maxSurface2DLayered[0], MAXIMUM_SURFACE2D_LAYERED_WIDTH) \
    X(maxSurface2DLayered[1], MAXIMUM_SURFACE2D_LAYERED_HEIGHT) \
    X(maxSurface2DLayered[2], MAXIMUM_SURFACE2D_LAYERED_LAYERS) \
    X(maxSurfaceCubemap, MAXIMUM_SURFACECUBEMAP_WIDTH) \
    X(maxSurfaceCubemapLayered[0], MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH) \
    X(maxSurfaceCubemapLayered[1], MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS) \
    X(surfaceAlignment, SURFACE_ALIGNMENT) \
    X(concurrentKernels, CONCURRENT_KERNELS) \
    X(ECCEnabled, ECC_ENABLED) \
    X(pciBusID, PCI_BUS_ID) \
    X(pciDeviceID, PCI_DEVICE_ID) \
    X(pciDomainID, PCI_DOMAIN_ID) \
    X(tccDriver, TCC_DRIVER) \
    X(asyncEngineCount, ASYNC_ENGINE_COUNT) \
    X(unifiedAddressing, UNIFIED_ADDRESSING) \
    X(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH) \
    X(l2CacheSize, L2_CACHE_SIZE) \
    X(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE) \
    X(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR) \
    X(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED) \
    X(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED) \
    X(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED) \
    X(sharedMemPerMultiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) \
    X(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR) \
    X(managedMemory, MANAGED_MEMORY) \
    X(isMultiGpuBoard, MULTI_GPU_BOARD) \
    X(multiGpuBoardGroupID, MULTI_GPU_BOARD_GROUP_ID) \
    X(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED) \
    X(pageableMemoryAccess, PAGEABLE_MEMORY_ACCESS) \
    X(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS) \
    X(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED) \
    X(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM) \
    X(cooperativeLaunch, COOPERATIVE_LAUNCH) \
    X(sharedMemPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) \
    X(pageableMemoryAccessUsesHostPageTables, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES) \
    X(directManagedMemAccessFromHost, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST) \
    X(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR) \
    X(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE) \
    X(reservedSharedMemPerBlock, RESERVED_SHARED_MEMORY_PER_BLOCK) \
    X(hostRegisterSupported, HOST_REGISTER_SUPPORTED) \
    X(sparseCudaArraySupported, SPARSE_CUDA_ARRAY_SUPPORTED) \
    X(hostRegisterReadOnlySupported, READ_ONLY_HOST_REGISTER_SUPPORTED) \
    X(timelineSemaphoreInteropSupported, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED) \
    X(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED) \
    X(gpuDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED) \
    X(gpuDirectRDMAFlushWritesOptions, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS) \
    X(gpuDirectRDMAWritesOrdering, GPU_DIRECT_RDMA_WRITES_ORDERING) \
    X(memoryPoolSupportedHandleTypes, MEMPOOL_SUPPORTED_HANDLE_TYPES) \
    X(deferredMappingCudaArraySupported, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED) \
    X(ipcEventSupported, IPC_EVENT_SUPPORTED) \
    X(clusterLaunch, CLUSTER_LAUNCH) \
    X(unifiedFunctionPointers, UNIFIED_FUNCTION_POINTERS) \
    X(deviceNumaConfig, NUMA_CONFIG) \
    X(deviceNumaId, NUMA_ID) \
    X(mpsEnabled, MPS_ENABLED) \
    X(hostNumaId, HOST_NUMA_ID) \
    X(gpuPciDeviceID, GPU_PCI_DEVICE_ID) \
    X(gpuPciSubsystemID, GPU_PCI_SUBSYSTEM_ID) \
    X(hostNumaMultinodeIpcSupported, HOST_NUMA_MULTINODE_IPC_SUPPORTED)

#endif
