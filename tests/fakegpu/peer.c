// Fake libcuda.so.1: several devices and peer access between them.  The
// devices' memory is one arena (mem.c), so a device reaches its peers'
// memory whatever the peer-access state; the state is kept so that the
// calls answer as the driver's do (already enabled, not enabled).
#include "fakegpu.h"

// Per context: the peer devices whose memory it enabled access to.
#define MAX_PEER_CTX 64
static struct {
    CUcontext ctx;
    unsigned peers;             // bit d: device d
} peer_state[MAX_PEER_CTX];

static unsigned *peers_of(CUcontext ctx, int make)
{
    for (int i = 0; i < MAX_PEER_CTX; i++)
        if (peer_state[i].ctx == ctx)
            return &peer_state[i].peers;
    for (int i = 0; make && i < MAX_PEER_CTX; i++)
        if (!peer_state[i].ctx) {
            peer_state[i].ctx = ctx;
            peer_state[i].peers = 0;
            return &peer_state[i].peers;
        }
    return NULL;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fg_device_valid(dev) || !fg_device_valid(peerDev))
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
                                         CUdevice srcDevice, CUdevice dstDevice)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fg_device_valid(srcDevice) || !fg_device_valid(dstDevice) || srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    // Physical devices 0-1, 2-3, ... are pairs on one link (rank 0,
    // native atomics); other pairs go through the host bridge (rank 1):
    // the answers differ per pair, as on a real host.
    int linked = fg_device_physical(srcDevice) / 2 == fg_device_physical(dstDevice) / 2;
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
        *value = !linked;
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
        *value = linked;
        return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
        *value = 1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

// The device of a context (current: ctx NULL), or -1.
static CUdevice device_of(CUcontext ctx)
{
    CUcontext saved = NULL;
    CUdevice dev = -1;
    if (!ctx)
        return cuCtxGetDevice(&dev) == CUDA_SUCCESS ? dev : -1;
    if (cuCtxGetCurrent(&saved) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        dev = -1;
    (void)cuCtxSetCurrent(saved);
    return dev;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    CUcontext cur = NULL;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (!cur)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUdevice mine = device_of(NULL), peer = device_of(peerContext);
    if (peer < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (peer == mine)
        return CUDA_ERROR_INVALID_DEVICE;
    fg_lock();
    unsigned *p = peers_of(cur, 1);
    if (!p)
        r = CUDA_ERROR_TOO_MANY_PEERS;
    else if (*p & (1u << peer))
        r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else
        *p |= 1u << peer;
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
    CUcontext cur = NULL;
    CUresult r = cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (!cur)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUdevice peer = device_of(peerContext);
    if (peer < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    fg_lock();
    unsigned *p = peers_of(cur, 0);
    if (!p || !(*p & (1u << peer)))
        r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    else
        *p &= ~(1u << peer);
    fg_unlock();
    return r;
}

// Copies between contexts: the arena is shared, so a plain device copy.
CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
    if (device_of(dstContext) < 0 || device_of(srcContext) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return cuMemcpyDtoD_v2(dstDevice, srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                   CUstream hStream)
{
    if (device_of(dstContext) < 0 || device_of(srcContext) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return cuMemcpyDtoDAsync_v2(dstDevice, srcDevice, ByteCount, hStream);
}
