/* device-subset: a client cannot reach a GPU rgpud does not serve.
 *
 *   devhostile RGPUD LIB_DIR
 *
 * rgpud serves GPU 1 of a fake host of three (RGPU_FAKEGPU_DEVICES=3,
 * RGPUD_DEVICES=1).  Through the raw protocol, as no stub would, a client
 * names the other two by every road it has: CUDA ordinals past the count
 * (to cuDeviceGet, attributes, context creation, primary contexts,
 * cudaSetDevice, peer access and copies, P2P attributes), huge and
 * negative ordinals, the other GPUs' PCI bus ids (runtime and driver),
 * and in NVML their indices, UUIDs and PCI bus ids and a device handle
 * forged next to the one it was given.  Each must be refused with the
 * library's own status for a GPU that does not exist, and the session must
 * keep serving.  The other GPUs' identities come from the fake's NVML,
 * loaded here (it ignores CUDA_VISIBLE_DEVICES, as NVIDIA's does). */
#include "rawcall.c"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvml.h>

#define HOST_GPUS 3
#define SERVED 1            /* the host's GPU that rgpud serves */

static char host_uuid[HOST_GPUS][96];
static char host_pci[HOST_GPUS][32];

/* The host's GPUs, from the fake NVML of lib_dir. */
static int read_host(const char *lib_dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libnvidia-ml.so.1", lib_dir);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    nvmlReturn_t (*init)(void) = lib ? (nvmlReturn_t (*)(void))dlsym(lib, "nvmlInit_v2") : NULL;
    nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t *) =
        lib ? (nvmlReturn_t (*)(unsigned, nvmlDevice_t *))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2")
            : NULL;
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned) =
        lib ? (nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned))dlsym(lib, "nvmlDeviceGetUUID")
            : NULL;
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *) =
        lib ? (nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t *))dlsym(lib, "nvmlDeviceGetPciInfo_v3")
            : NULL;
    if (!init || !by_index || !uuid || !pci || init() != NVML_SUCCESS)
        return fail("the fake NVML in %s: %s", lib_dir, lib ? "incomplete" : dlerror());
    for (unsigned i = 0; i < HOST_GPUS; i++) {
        nvmlDevice_t h;
        nvmlPciInfo_t p;
        if (by_index(i, &h) != NVML_SUCCESS || uuid(h, host_uuid[i], sizeof host_uuid[i]) ||
            pci(h, &p) != NVML_SUCCESS)
            return fail("the fake NVML has no GPU %u", i);
        snprintf(host_pci[i], sizeof host_pci[i], "%s", p.busId);
    }
    return 0;
}

/* A call whose API status must be want; its first output in *out.  fmt
 * takes up to three values (a0, a1, a2 in order; callf reads only those
 * its 'u's name). */
static int expect_status(int fd, const char *what, uint64_t want, uint64_t *out,
                         const char *lib, const char *name, const char *fmt, uint64_t a0,
                         uint64_t a1, uint64_t a2)
{
    uint64_t api;
    if (callf(fd, lib, name, &api, out, fmt, a0, a1, a2) < 0)
        return fail_prefix(what);
    if (api != want)
        return fail("%s: %s answered %llu, wanted %llu", what, name, (unsigned long long)api,
                    (unsigned long long)want);
    return 0;
}

/* A call with a string argument and an output (fmt "is", "so"). */
static int expect_named(int fd, const char *what, uint64_t want, const char *lib,
                        const char *name, const char *fmt, const char *s)
{
    uint64_t api;
    if (callf(fd, lib, name, &api, NULL, fmt, s) < 0)
        return fail_prefix(what);
    if (api != want)
        return fail("%s: %s(%s) answered %llu, wanted %llu", what, name, s,
                    (unsigned long long)api, (unsigned long long)want);
    return 0;
}

static int failures;

/* A road that names a GPU by its UUID or PCI bus id: what it must answer
 * for each GPU outside the subset. */
struct by_name {
    const char *lib, *name, *fmt;
    uint64_t want;
    int by_uuid;            /* else by PCI bus id */
};

static int refused_by_name(int fd, const struct by_name *roads, size_t n)
{
    int rc = 0;
    for (int i = 0; i < HOST_GPUS && rc == 0; i++)
        for (size_t k = 0; k < n && rc == 0 && i != SERVED; k++)
            rc = expect_named(fd, roads[k].name, roads[k].want, roads[k].lib, roads[k].name,
                              roads[k].fmt, roads[k].by_uuid ? host_uuid[i] : host_pci[i]);
    return rc;
}

static void report(int fd, int rc, const char *name)
{
    if (rc == 0 && good_call(fd, ++serial_no) < 0)
        rc = -1;
    if (rc < 0) {
        printf("FAIL %s: %s\n", name, why);
        failures++;
    } else {
        printf("ok %s\n", name);
    }
}

#define INVALID_DEVICE 101   /* CUDA_ERROR_INVALID_DEVICE and cudaErrorInvalidDevice */

/* CUDA: the ordinals 1 and 2 (the host has three GPUs, the client sees
 * one), and ordinals no GPU has. */
static void cuda_ordinals(int fd)
{
    static const uint64_t ordinals[] = { 1, 2, 0x7fffffff, 0xffffffff, 0x80000000 };
    char name[64];
    for (size_t i = 0; i < sizeof ordinals / sizeof ordinals[0]; i++) {
        uint64_t d = ordinals[i];
        snprintf(name, sizeof name, "ordinal %#llx", (unsigned long long)d);
        int rc = expect_status(fd, "cuDeviceGet", INVALID_DEVICE, NULL, "cuda", "cuDeviceGet",
                               "iu", d, 0, 0);
        if (rc == 0)
            rc = expect_status(fd, "cuDeviceGetAttribute", INVALID_DEVICE, NULL, "cuda",
                               "cuDeviceGetAttribute", "iuu",
                               CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d, 0);
        if (rc == 0) {      /* every attribute at once: 256 ints and 256 flags */
            uint64_t api;
            if (callf(fd, "cuda", "rgpu_cu_device_attrs", &api, NULL, "uuuu", (uint64_t)1024,
                      (uint64_t)256, (uint64_t)256, d) < 0)
                rc = fail_prefix("rgpu_cu_device_attrs");
            else if (api != INVALID_DEVICE)
                rc = fail("rgpu_cu_device_attrs answered %llu, wanted %d",
                          (unsigned long long)api, INVALID_DEVICE);
        }
        if (rc == 0)
            rc = expect_status(fd, "cuCtxCreate on a raw CUdevice", INVALID_DEVICE, NULL,
                               "cuda", "cuCtxCreate_v2", "ouu", 0, d, 0);
        if (rc == 0)
            rc = expect_status(fd, "cuDevicePrimaryCtxRetain", INVALID_DEVICE, NULL, "cuda",
                               "cuDevicePrimaryCtxRetain", "ou", d, 0, 0);
        if (rc == 0)
            rc = expect_status(fd, "cudaSetDevice", INVALID_DEVICE, NULL, "cudart",
                               "cudaSetDevice", "u", d, 0, 0);
        if (rc == 0)
            rc = expect_status(fd, "cudaDeviceGetAttribute", INVALID_DEVICE, NULL, "cudart",
                               "cudaDeviceGetAttribute", "iuu", cudaDevAttrPciBusId, d, 0);
        if (rc == 0)
            rc = expect_status(fd, "cudaDeviceCanAccessPeer", INVALID_DEVICE, NULL, "cudart",
                               "cudaDeviceCanAccessPeer", "iuu", 0, d, 0);
        if (rc == 0)
            rc = expect_status(fd, "cudaDeviceEnablePeerAccess", INVALID_DEVICE, NULL,
                               "cudart", "cudaDeviceEnablePeerAccess", "uu", d, 0, 0);
        if (rc == 0)
            rc = expect_status(fd, "cuDeviceGetP2PAttribute", INVALID_DEVICE, NULL, "cuda",
                               "cuDeviceGetP2PAttribute", "iuuu",
                               CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, d);
        report(fd, rc, name);
    }
}

/* A copy from the served GPU's memory to "device 2". */
static void peer_copy(int fd)
{
    uint64_t mem = 0, api;
    int rc = must(fd, "cudart", "cudaMalloc", &mem, "ou", 4096, 0);
    if (rc == 0 && callf(fd, "cudart", "cudaMemcpyPeer", &api, NULL, "uuuuu", mem,
                         (uint64_t)2, mem, (uint64_t)0, (uint64_t)4096) < 0)
        rc = -1;
    if (rc == 0 && api != INVALID_DEVICE)
        rc = fail("cudaMemcpyPeer to device 2 answered %llu", (unsigned long long)api);
    if (rc == 0)
        rc = must(fd, "cudart", "cudaFree", NULL, "u", mem, 0);
    report(fd, rc, "peer copy to a GPU outside the subset");
}

/* The other GPUs by PCI bus id, runtime and driver; the served one is
 * device 0. */
static void cuda_bus_ids(int fd)
{
    static const struct by_name roads[] = {
        { "cudart", "cudaDeviceGetByPCIBusId", "is", INVALID_DEVICE, 0 },
        { "cuda", "cuDeviceGetByPCIBusId", "is", INVALID_DEVICE, 0 },
    };
    uint64_t api, dev = 99;
    int rc = refused_by_name(fd, roads, sizeof roads / sizeof roads[0]);
    if (rc == 0 && callf(fd, "cuda", "cuDeviceGetByPCIBusId", &api, &dev, "is",
                         host_pci[SERVED]) < 0)
        rc = -1;
    if (rc == 0 && (api != 0 || dev != 0))
        rc = fail("the served GPU by its PCI bus id: status %llu, device %llu",
                  (unsigned long long)api, (unsigned long long)dev);
    report(fd, rc, "the other GPUs' PCI bus ids");
}

#define NVML_INVALID_ARGUMENT 2
#define NVML_NOT_FOUND 6

static void nvml_roads(int fd)
{
    uint64_t count = 0, handle = 0, api, index = 99;
    int before = refusals();
    int rc = must(fd, "nvml", "nvmlInit_v2", NULL, "", 0, 0);
    if (rc == 0)
        rc = expect_status(fd, "nvmlDeviceGetCount_v2", 0, &count, "nvml",
                           "nvmlDeviceGetCount_v2", "i", 0, 0, 0);
    if (rc == 0 && count != 1)
        rc = fail("NVML shows %llu GPUs, wanted 1", (unsigned long long)count);
    static const uint64_t indices[] = { 1, 2, 0x7fffffff, 0xffffffff, 0x80000000 };
    for (size_t i = 0; i < sizeof indices / sizeof indices[0] && rc == 0; i++)
        rc = expect_status(fd, "nvmlDeviceGetHandleByIndex_v2", NVML_INVALID_ARGUMENT, NULL,
                           "nvml", "nvmlDeviceGetHandleByIndex_v2", "uo", indices[i], 0, 0);
    static const struct by_name roads[] = {
        { "nvml", "nvmlDeviceGetHandleByUUID", "so", NVML_NOT_FOUND, 1 },
        { "nvml", "nvmlDeviceGetHandleByPciBusId_v2", "so", NVML_NOT_FOUND, 0 },
        { "nvml", "nvmlDeviceGetHandleByPciBusId", "so", NVML_NOT_FOUND, 0 },
    };
    if (rc == 0)
        rc = refused_by_name(fd, roads, sizeof roads / sizeof roads[0]);
    /* The served GPU is NVML's device 0, by index and by UUID. */
    if (rc == 0)
        rc = must(fd, "nvml", "nvmlDeviceGetHandleByIndex_v2", &handle, "uo", 0, 0);
    if (rc == 0 && callf(fd, "nvml", "nvmlDeviceGetIndex", &api, &index, "ui", handle, 0) < 0)
        rc = -1;
    if (rc == 0 && (api != 0 || index != 0))
        rc = fail("nvmlDeviceGetIndex of the served GPU: %llu, index %llu",
                  (unsigned long long)api, (unsigned long long)index);
    /* Handles next to it (the fake's devices are an array): never handed
     * out, refused by rgpud itself. */
    for (int64_t d = -64; d <= 64 && rc == 0; d += 4) {
        if (d == 0)
            continue;
        rc = expect_status(fd, "a forged NVML device", NVML_INVALID_ARGUMENT, NULL, "nvml",
                           "nvmlDeviceGetIndex", "ui", handle + (uint64_t)d, 0, 0);
    }
    if (rc == 0 && refusals() < before + 32)
        rc = fail("rgpud logged %d refusals for 32 forged NVML handles", refusals() - before);
    report(fd, rc, "NVML by index, UUID, PCI bus id and forged handle");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    count_proc = rgpu_proc_id("cudart", "cudaGetDeviceCount");
    setenv("RGPU_FAKEGPU_DEVICES", "3", 1);
    setenv("RGPUD_DEVICES", "1", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    if (read_host(argv[2]) < 0 || start_logged(argv[1], argv[2]) < 0) {
        printf("FAIL start: %s\n", why);
        if (daemon_pid)
            stop_daemon();
        unlink(log_path);
        return 1;
    }
    int fd = open_session();
    if (fd < 0 || good_call(fd, ++serial_no) < 0) {
        printf("FAIL a session serving one GPU: %s\n", why);
        stop_daemon();
        unlink(log_path);
        return 1;
    }
    printf("ok one GPU of three served\n");
    cuda_ordinals(fd);
    peer_copy(fd);
    cuda_bus_ids(fd);
    nvml_roads(fd);
    return raw_finish(fd, failures);
}
