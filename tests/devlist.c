/* The GPUs a process sees, through CUDA (runtime and driver) and NVML, one
 * line each, for tests/devices.sh to compare: natively on the fake GPU
 * with a CUDA_VISIBLE_DEVICES, and through rgpu against an rgpud serving a
 * subset of the host's GPUs.
 *
 *   devlist [ABSENT-UUID ABSENT-PCI]...
 *
 * Lines:
 *   cuda N devices | cuda no device (STATUS)
 *   cuda K UUID PCI            K's identity, the same by every road that
 *                              gives it (else a FAIL line)
 *   p2p A B RANK ATOMIC        the pair's attributes, runtime and driver
 *   nvml N devices
 *   nvml K UUID PCI            by index; by UUID, by PCI bus id and
 *                              nvmlDeviceGetIndex must name K again
 *   absent UUID ok             a GPU the process must not see: not found
 *                              by UUID or PCI bus id in NVML, in CUDA by
 *                              PCI bus id
 * Exits non-zero after any FAIL line. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEV 16

static int failures;

static void fail(const char *what, int k, long got)
{
    printf("FAIL %s (device %d: %ld)\n", what, k, got);
    failures++;
}

static void uuid_text(const unsigned char *b, char out[64])
{
    snprintf(out, 64, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

/* Device k through the runtime and the driver; its identity agrees. */
static void cuda_device(int k)
{
    struct cudaDeviceProp p;
    char bus[32], cu_bus[32], uuid[64], prop_uuid[64];
    CUdevice dev = -1, by_pci = -1;
    CUuuid u;
    int rt_by_pci = -1, bus_attr = -1;
    if (cudaGetDeviceProperties(&p, k) != cudaSuccess || cuDeviceGet(&dev, k) != CUDA_SUCCESS ||
        cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS ||
        cudaDeviceGetPCIBusId(bus, sizeof bus, k) != cudaSuccess ||
        cuDeviceGetPCIBusId(cu_bus, sizeof cu_bus, dev) != CUDA_SUCCESS ||
        cudaDeviceGetAttribute(&bus_attr, cudaDevAttrPciBusId, k) != cudaSuccess) {
        fail("a device query failed", k, 0);
        return;
    }
    uuid_text((const unsigned char *)u.bytes, uuid);
    uuid_text((const unsigned char *)p.uuid.bytes, prop_uuid);
    if (strcmp(uuid, prop_uuid) != 0)
        fail("cudaGetDeviceProperties' UUID is not cuDeviceGetUuid's", k, 0);
    if (strcasecmp(bus, cu_bus) != 0 || p.pciBusID != bus_attr ||
        (int)strtol(bus + 5, NULL, 16) != bus_attr)
        fail("the runtime's and the driver's PCI bus ids differ", k, bus_attr);
    if (cudaDeviceGetByPCIBusId(&rt_by_pci, bus) != cudaSuccess || rt_by_pci != k)
        fail("cudaDeviceGetByPCIBusId", k, rt_by_pci);
    if (cuDeviceGetByPCIBusId(&by_pci, bus) != CUDA_SUCCESS || by_pci != dev)
        fail("cuDeviceGetByPCIBusId", k, by_pci);
    printf("cuda %d %s %s\n", k, uuid, bus);
}

static void p2p(int n)
{
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int rank = -1, atomic = -1, cu_rank = -2, cu_atomic = -2;
            if (a == b)
                continue;
            if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b) !=
                    cudaSuccess ||
                cudaDeviceGetP2PAttribute(&atomic, cudaDevP2PAttrNativeAtomicSupported, a, b) !=
                    cudaSuccess ||
                cuDeviceGetP2PAttribute(&cu_rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, a,
                                        b) != CUDA_SUCCESS ||
                cuDeviceGetP2PAttribute(&cu_atomic,
                                        CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, a,
                                        b) != CUDA_SUCCESS ||
                rank != cu_rank || atomic != cu_atomic)
                fail("P2P attributes", a * 100 + b, rank);
            printf("p2p %d %d %d %d\n", a, b, rank, atomic);
        }
}

static void cuda_devices(void)
{
    int n = -1, cur = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("cuda no device (%s, count %d)\n", cudaGetErrorName(e), n);
        (void)cudaGetLastError();
        return;
    }
    printf("cuda %d devices\n", n);
    for (int k = 0; k < n && k < MAX_DEV; k++)
        cuda_device(k);
    p2p(n < MAX_DEV ? n : MAX_DEV);
    CUdevice dev;
    if (cudaSetDevice(n) != cudaErrorInvalidDevice || cuDeviceGet(&dev, n) != CUDA_ERROR_INVALID_DEVICE)
        fail("a device past the count is refused", n, 0);
    (void)cudaGetLastError();
    if (n > 0 && (cudaSetDevice(n - 1) != cudaSuccess || cudaGetDevice(&cur) != cudaSuccess ||
                  cur != n - 1))
        fail("cudaSetDevice to the last device", n - 1, cur);
}

static void nvml_device(unsigned k)
{
    nvmlDevice_t h, by_uuid, by_pci;
    nvmlPciInfo_t pci;
    char uuid[96];
    unsigned index = 999;
    if (nvmlDeviceGetHandleByIndex_v2(k, &h) != NVML_SUCCESS ||
        nvmlDeviceGetUUID(h, uuid, sizeof uuid) != NVML_SUCCESS ||
        nvmlDeviceGetPciInfo_v3(h, &pci) != NVML_SUCCESS ||
        nvmlDeviceGetIndex(h, &index) != NVML_SUCCESS) {
        fail("an NVML query failed", (int)k, 0);
        return;
    }
    if (index != k)
        fail("nvmlDeviceGetIndex", (int)k, index);
    if (nvmlDeviceGetHandleByUUID(uuid, &by_uuid) != NVML_SUCCESS || by_uuid != h)
        fail("nvmlDeviceGetHandleByUUID", (int)k, 0);
    if (nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by_pci) != NVML_SUCCESS || by_pci != h)
        fail("nvmlDeviceGetHandleByPciBusId", (int)k, 0);
    /* NVML writes 8 hex digits of domain, CUDA 4: print CUDA's form. */
    printf("nvml %u %s %04x:%02x:%02x.0\n", k, uuid, pci.domain, pci.bus, pci.device);
}

static void nvml_devices(void)
{
    unsigned n = 0;
    nvmlDevice_t h;
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS) {
        fail("NVML", -1, 0);
        return;
    }
    printf("nvml %u devices\n", n);
    for (unsigned k = 0; k < n && k < MAX_DEV; k++)
        nvml_device(k);
    if (nvmlDeviceGetHandleByIndex_v2(n, &h) != NVML_ERROR_INVALID_ARGUMENT)
        fail("an NVML index past the count is refused", (int)n, 0);
}

/* A GPU this process must not reach, by its UUID and PCI bus id. */
static void absent(const char *uuid, const char *pci)
{
    nvmlDevice_t h;
    int dev = -1;
    CUdevice cu = -1;
    nvmlReturn_t by_uuid = nvmlDeviceGetHandleByUUID(uuid, &h);
    nvmlReturn_t by_pci = nvmlDeviceGetHandleByPciBusId_v2(pci, &h);
    cudaError_t rt = cudaDeviceGetByPCIBusId(&dev, pci);
    CUresult drv = cuDeviceGetByPCIBusId(&cu, pci);
    (void)cudaGetLastError();
    if (by_uuid != NVML_ERROR_NOT_FOUND || by_pci != NVML_ERROR_NOT_FOUND ||
        (rt != cudaErrorInvalidDevice && rt != cudaErrorNoDevice) ||
        (drv != CUDA_ERROR_INVALID_DEVICE && drv != CUDA_ERROR_NOT_INITIALIZED &&
         drv != CUDA_ERROR_NO_DEVICE)) {
        printf("FAIL absent %s %s reached: NVML %d %d, CUDA %d %d\n", uuid, pci, by_uuid,
               by_pci, rt, drv);
        failures++;
        return;
    }
    printf("absent %s ok\n", uuid);
}

int main(int argc, char **argv)
{
    if (argc % 2 != 1) {
        fprintf(stderr, "usage: %s [ABSENT-UUID ABSENT-PCI]...\n", argv[0]);
        return 2;
    }
    cuda_devices();
    nvml_devices();
    for (int i = 1; i + 1 < argc; i += 2)
        absent(argv[i], argv[i + 1]);
    nvmlShutdown();
    return failures ? 1 : 0;
}
