/* NVML through rgpu (tests/nvml.sh): prints what NVML says of every device,
 * the same way natively on the fake GPU and through the stub, so that the
 * two outputs can be compared line by line; checks on the way that NVML
 * and CUDA agree on each device (name, UUID, PCI location, memory), that
 * memory CUDA allocates shows in NVML, and that forged device handles are
 * refused without harm.
 *
 *   nvml_query --settings allowed|refused   what a setting call must do
 *   nvml_query --no-nvml                    the server has no NVML: its
 *                                           calls fail, CUDA still works
 *
 * Lines that differ between the two ways by nature (setting calls) go to
 * stderr. */
#include <cuda.h>
#include <dlfcn.h>
#include <nvml.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

static void expect(nvmlReturn_t got, nvmlReturn_t want, const char *what)
{
    if (got != want) {
        printf("FAIL %s: %d (%s), want %d\n", what, (int)got, nvmlErrorString(got), (int)want);
        failures++;
    }
}

/* CUDA's view of device i, for comparing with NVML's. */
struct cuda_view {
    char name[256];
    char uuid[64];
    char bus_id[32];
    size_t total;
};

static int cuda_view(int i, struct cuda_view *v)
{
    CUdevice dev;
    CUuuid u;
    int domain = 0, bus = 0, device = 0;
    if (cuDeviceGet(&dev, i) != CUDA_SUCCESS ||
        cuDeviceGetName(v->name, sizeof v->name, dev) != CUDA_SUCCESS ||
        cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS ||
        cuDeviceTotalMem(&v->total, dev) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS)
        return -1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(v->uuid, sizeof v->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    snprintf(v->bus_id, sizeof v->bus_id, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus,
             (unsigned)device);
    return 0;
}

/* A query that prints its answer, or its status when it has none. */
#define SHOW(fmt, call, ...)                                                  \
    do {                                                                      \
        nvmlReturn_t rc_ = (call);                                            \
        if (rc_ == NVML_SUCCESS)                                              \
            printf("  " fmt "\n", __VA_ARGS__);                               \
        else                                                                  \
            printf("  %s: %s\n", #call, rc_ == NVML_ERROR_NOT_SUPPORTED       \
                                            ? "not supported" : "error");     \
    } while (0)

static void show_device(unsigned i, nvmlDevice_t d)
{
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char serial[64];
    unsigned index = 0, temp = 0, power = 0, limit = 0, lo = 0, hi = 0, sm = 0, mem = 0, fan = 0;
    unsigned slowdown = 0, cur_mig = 0, pend_mig = 0, pages = 0;
    int major = 0, minor = 0;
    nvmlPciInfo_t pci;
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
    nvmlUtilization_t util;
    nvmlPstates_t ps;
    nvmlComputeMode_t cm;
    nvmlEnableState_t ecc = 0, ecc_pending = 0, persistence = 0, retired_pending = 0;

    printf("device %u\n", i);
    SHOW("index %u", nvmlDeviceGetIndex(d, &index), index);
    SHOW("name %s", nvmlDeviceGetName(d, name, sizeof name), name);
    SHOW("uuid %s", nvmlDeviceGetUUID(d, uuid, sizeof uuid), uuid);
    SHOW("serial %s", nvmlDeviceGetSerial(d, serial, sizeof serial), serial);
    SHOW("pci %s (legacy %s) device id %08x", nvmlDeviceGetPciInfo_v3(d, &pci), pci.busId,
         pci.busIdLegacy, pci.pciDeviceId);
    SHOW("compute capability %d.%d", nvmlDeviceGetCudaComputeCapability(d, &major, &minor),
         major, minor);
    SHOW("memory total %llu", nvmlDeviceGetMemoryInfo(d, &m1), m1.total);
    SHOW("memory v2 total %llu reserved %llu", nvmlDeviceGetMemoryInfo_v2(d, &m2), m2.total,
         m2.reserved);
    SHOW("utilisation gpu %u%% memory %u%%", nvmlDeviceGetUtilizationRates(d, &util), util.gpu,
         util.memory);
    SHOW("temperature %u C", nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &temp), temp);
    SHOW("slowdown temperature %u C",
         nvmlDeviceGetTemperatureThreshold(d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slowdown),
         slowdown);
    SHOW("power %u mW", nvmlDeviceGetPowerUsage(d, &power), power);
    SHOW("power limit %u mW", nvmlDeviceGetPowerManagementLimit(d, &limit), limit);
    SHOW("power limits %u..%u mW", nvmlDeviceGetPowerManagementLimitConstraints(d, &lo, &hi), lo,
         hi);
    SHOW("sm clock %u MHz", nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &sm), sm);
    SHOW("memory clock %u MHz", nvmlDeviceGetMaxClockInfo(d, NVML_CLOCK_MEM, &mem), mem);
    SHOW("fan %u%%", nvmlDeviceGetFanSpeed(d, &fan), fan);
    SHOW("performance state P%d", nvmlDeviceGetPerformanceState(d, &ps), (int)ps);
    SHOW("compute mode %d", nvmlDeviceGetComputeMode(d, &cm), (int)cm);
    SHOW("persistence %d", nvmlDeviceGetPersistenceMode(d, &persistence), (int)persistence);
    SHOW("ecc %d pending %d", nvmlDeviceGetEccMode(d, &ecc, &ecc_pending), (int)ecc,
         (int)ecc_pending);
    SHOW("retired pages pending %d", nvmlDeviceGetRetiredPagesPendingStatus(d, &retired_pending),
         (int)retired_pending);
    SHOW("retired pages %u",
         nvmlDeviceGetRetiredPages(d, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &pages,
                                   NULL),
         pages);
    SHOW("mig %u pending %u", nvmlDeviceGetMigMode(d, &cur_mig, &pend_mig), cur_mig, pend_mig);

    struct cuda_view cv;
    check(cuda_view((int)i, &cv) == 0, "CUDA describes the device");
    check(strcmp(cv.name, name) == 0, "NVML's name is CUDA's");
    check(strcmp(cv.uuid, uuid) == 0, "NVML's UUID is CUDA's");
    check(strcmp(cv.bus_id, pci.busId) == 0, "NVML's PCI bus id is CUDA's");
    check(cv.total == m1.total && m1.total == m2.total, "NVML's memory total is CUDA's");
    nvmlDevice_t again = NULL;
    expect(nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS, "handle by UUID");
    check(again == d, "the UUID names the device");
    again = NULL;
    expect(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &again), NVML_SUCCESS,
           "handle by PCI bus id");
    check(again == d, "the PCI bus id names the device");
}

/* Memory CUDA allocates shows as used in NVML, and the process using it is
 * this one. */
static void memory_follows_cuda(nvmlDevice_t d)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p = 0;
    nvmlMemory_t before, after;
    nvmlProcessInfo_t procs[8];
    unsigned n = 8;
    const size_t size = 64u << 20;

    check(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, dev) == 0 &&
              cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
          "a CUDA context");
    expect(nvmlDeviceGetMemoryInfo(d, &before), NVML_SUCCESS, "memory before");
    check(cuMemAlloc(&p, size) == CUDA_SUCCESS, "cuMemAlloc");
    expect(nvmlDeviceGetMemoryInfo(d, &after), NVML_SUCCESS, "memory after");
    check(after.used >= before.used + size, "NVML sees CUDA's allocation");
    check(after.free + after.used == after.total, "free and used make the total");
    expect(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs), NVML_SUCCESS,
           "compute processes");
    check(n == 1 && procs[0].pid == (unsigned)getpid() && procs[0].usedGpuMemory >= size,
          "the process using the GPU is this one");
    printf("processes with device memory: %u, this one: %s\n", n,
           n == 1 && procs[0].pid == (unsigned)getpid() ? "yes" : "no");
    n = 0;
    expect(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE,
           "process count asked with no room");
    check(n == 1, "the count comes back");
    check(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
}

/* Handles the library never handed out are refused, and the session goes on. */
static void forged_handles(nvmlDevice_t d)
{
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlMemory_t m;
    unsigned n = 4;
    nvmlProcessInfo_t procs[4];
    nvmlDevice_t forged[] = { (nvmlDevice_t)0x1234, (nvmlDevice_t)((char *)d + 8),
                              (nvmlDevice_t)~0ul };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        expect(nvmlDeviceGetName(forged[i], name, sizeof name), NVML_ERROR_INVALID_ARGUMENT,
               "forged handle: name");
        expect(nvmlDeviceGetMemoryInfo(forged[i], &m), NVML_ERROR_INVALID_ARGUMENT,
               "forged handle: memory");
        expect(nvmlDeviceGetComputeRunningProcesses_v3(forged[i], &n, procs),
               NVML_ERROR_INVALID_ARGUMENT, "forged handle: processes");
    }
    expect(nvmlDeviceGetName(d, name, sizeof name), NVML_SUCCESS, "the real handle still works");
    printf("forged handles refused\n");
}

/* A setting call: refused (rgpud's default) or allowed (--nvml-settings,
 * and natively on the fake), and what it set is what is read back. */
static void settings(nvmlDevice_t d, int allowed)
{
    nvmlComputeMode_t before = 0, now = 0;
    expect(nvmlDeviceGetComputeMode(d, &before), NVML_SUCCESS, "compute mode");
    nvmlComputeMode_t other = before == NVML_COMPUTEMODE_DEFAULT ? NVML_COMPUTEMODE_PROHIBITED
                                                                 : NVML_COMPUTEMODE_DEFAULT;
    nvmlReturn_t rc = nvmlDeviceSetComputeMode(d, other);
    expect(nvmlDeviceGetComputeMode(d, &now), NVML_SUCCESS, "compute mode again");
    if (allowed) {
        expect(rc, NVML_SUCCESS, "setting allowed");
        check(now == other, "the setting took");
        expect(nvmlDeviceSetComputeMode(d, before), NVML_SUCCESS, "setting restored");
    } else {
        expect(rc, NVML_ERROR_NO_PERMISSION, "setting refused");
        check(now == before, "nothing changed");
    }
    fprintf(stderr, "setting call: %s\n", nvmlErrorString(rc));
}

/* A function rgpu refuses (the host's CPUs mean nothing on the client):
 * not supported.  The fake NVML lacks it, so natively there is nothing to
 * ask. */
static void refused_call(nvmlDevice_t d)
{
    typedef nvmlReturn_t (*affinity_fn)(nvmlDevice_t, unsigned, unsigned long *);
    affinity_fn affinity = (affinity_fn)dlsym(RTLD_DEFAULT, "nvmlDeviceGetCpuAffinity");
    unsigned long cpus[4];
    if (!affinity)
        return;
    expect(affinity(d, 4, cpus), NVML_ERROR_NOT_SUPPORTED, "a refused call");
    fprintf(stderr, "refused call: %s\n", nvmlErrorString(affinity(d, 4, cpus)));
}

static int no_nvml(void)
{
    int count = 0;
    nvmlReturn_t rc = nvmlInit_v2();
    check(rc != NVML_SUCCESS, "nvmlInit fails without NVML on the server");
    fprintf(stderr, "nvmlInit without NVML: %s\n", nvmlErrorString(rc));
    check(cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0,
          "CUDA still works");
    printf("%s\n", failures ? "FAILED" : "NVML refused, CUDA works");
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int allowed = argc == 3 && strcmp(argv[1], "--settings") == 0 && strcmp(argv[2], "allowed") == 0;
    if (argc == 2 && strcmp(argv[1], "--no-nvml") == 0)
        return no_nvml();
    if (argc != 3 || strcmp(argv[1], "--settings") != 0) {
        fprintf(stderr, "usage: %s --settings allowed|refused | --no-nvml\n", argv[0]);
        return 2;
    }
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    unsigned count = 0;
    int cuda_version = 0, cuda_count = 0;

    printf("error string of NOT_SUPPORTED before init: %s\n",
           nvmlErrorString(NVML_ERROR_NOT_SUPPORTED) ? "yes" : "no");
    expect(nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED, "count before init");
    expect(nvmlInit_v2(), NVML_SUCCESS, "nvmlInit_v2");
    check(cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&cuda_count) == CUDA_SUCCESS, "cuInit");
    SHOW("driver %s", nvmlSystemGetDriverVersion(version, sizeof version), version);
    SHOW("nvml %s", nvmlSystemGetNVMLVersion(version, sizeof version), version);
    SHOW("cuda driver %d", nvmlSystemGetCudaDriverVersion_v2(&cuda_version), cuda_version);
    expect(nvmlDeviceGetCount_v2(&count), NVML_SUCCESS, "device count");
    printf("devices %u\n", count);
    check(count == (unsigned)cuda_count, "NVML counts the devices CUDA does");
    nvmlDevice_t first = NULL;
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t d;
        expect(nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS, "handle by index");
        show_device(i, d);
        if (i == 0)
            first = d;
    }
    nvmlDevice_t none;
    expect(nvmlDeviceGetHandleByIndex_v2(count, &none), NVML_ERROR_INVALID_ARGUMENT,
           "no device past the count");
    if (first) {
        memory_follows_cuda(first);
        forged_handles(first);
        settings(first, allowed);
        refused_call(first);
    }
    expect(nvmlShutdown(), NVML_SUCCESS, "nvmlShutdown");
    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
