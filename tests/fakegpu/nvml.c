/* The fake GPU's NVML: libnvidia-ml.so.1 for rgpud in CI.  Its answers come
 * from the fake libcuda where CUDA knows them too (name, UUID, memory, PCI
 * location, compute capability, clocks), so that NVML and CUDA agree as on
 * a real GPU; the rest are plausible constants of a data-centre GPU.
 * Setting calls change what the queries answer (compute mode, power limit),
 * in this process only. */
/* The library defines the old entry points beside the new ones, as
 * NVIDIA's does: without the header's renaming macros. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <cuda.h>
#include <nvml.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define FAKE_DRIVER_VERSION "580.95.05"
#define FAKE_NVML_VERSION   "13.580.95.05"
#define FAKE_TEMPERATURE    41          /* degrees C */
#define FAKE_SLOWDOWN_TEMP  87
#define FAKE_SHUTDOWN_TEMP  92
#define FAKE_POWER_USAGE    71500       /* mW */
#define FAKE_POWER_MAX      350000
#define FAKE_POWER_MIN      100000
#define FAKE_FAN_SPEED      30          /* percent */
#define FAKE_SERIAL         "1650000000001"

/* The fake libcuda's: the host's physical devices (core.c; NVML sees them
 * all, whatever CUDA_VISIBLE_DEVICES says, as NVIDIA's does), each one's
 * UUID and attributes, the ordinal CUDA knows it by in this process (-1:
 * not visible), and memory in use per visible device (driver_mem.c). */
int fakegpu_device_count(void);
void fakegpu_uuid_text(int physical, char out[41]);
int fakegpu_physical_attribute(int physical, CUdevice_attribute attrib);
int fakegpu_visible_ordinal(int physical);
size_t fakegpu_memory_used(int dev);

#define FAKE_NAME           "rgpu fake GPU"     /* the fake libcuda's device name */
#define FAKE_TOTAL_MEMORY   (16ull << 30)       /* and its memory */

struct nvmlDevice_st {
    int index;
    unsigned power_limit;
    nvmlComputeMode_t compute_mode;
};

#define MAX_DEVICES 8           /* the fake libcuda's FG_MAX_DEVICES */
#define DEVICE_INIT(i) { i, 300000, NVML_COMPUTEMODE_DEFAULT }
static struct nvmlDevice_st devices[MAX_DEVICES] = {
    DEVICE_INIT(0), DEVICE_INIT(1), DEVICE_INIT(2), DEVICE_INIT(3),
    DEVICE_INIT(4), DEVICE_INIT(5), DEVICE_INIT(6), DEVICE_INIT(7),
};
#define NDEVICES fakegpu_device_count()
static int init_count;

/* ---- initialisation ------------------------------------------------------------------ */

nvmlReturn_t nvmlInit_v2(void)
{
    __atomic_add_fetch(&init_count, 1, __ATOMIC_RELAXED);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    int left = __atomic_load_n(&init_count, __ATOMIC_RELAXED);
    while (left > 0 && !__atomic_compare_exchange_n(&init_count, &left, left - 1, 0,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return left > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static int initialised(void)
{
    return __atomic_load_n(&init_count, __ATOMIC_RELAXED) > 0;
}

/* The device behind a handle: NULL for one this library never made. */
static struct nvmlDevice_st *device_of(nvmlDevice_t d)
{
    for (int i = 0; i < NDEVICES; i++)
        if (d == &devices[i])
            return d;
    return NULL;
}

/* Every device query: initialised, a known handle, somewhere to write. */
#define DEVICE_QUERY(dev, out)                                   \
    do {                                                         \
        if (!initialised())                                      \
            return NVML_ERROR_UNINITIALIZED;                     \
        if (!device_of(dev) || !(out))                           \
            return NVML_ERROR_INVALID_ARGUMENT;                  \
    } while (0)

/* ---- devices and their identities --------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = NDEVICES;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned)NDEVICES || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE_QUERY(device, index);
    *index = (unsigned)device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    DEVICE_QUERY(device, minor);
    *minor = (unsigned)device->index;
    return NVML_SUCCESS;
}

/* A string answer into the caller's buffer, as NVML does. */
static nvmlReturn_t copy_out(const char *s, char *buf, unsigned int length)
{
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    DEVICE_QUERY(device, name);
    return copy_out(FAKE_NAME, name, length);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    DEVICE_QUERY(device, version);
    return copy_out("96.00.74.00.01", version, length);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    DEVICE_QUERY(device, type);
    *type = NVML_BRAND_NVIDIA;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    char text[41];
    DEVICE_QUERY(device, uuid);
    fakegpu_uuid_text(device->index, text);
    return copy_out(text, uuid, length);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    char text[NVML_DEVICE_UUID_BUFFER_SIZE];
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < NDEVICES; i++)
        if (nvmlDeviceGetUUID(&devices[i], text, sizeof text) == NVML_SUCCESS &&
            strcmp(text, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    DEVICE_QUERY(device, serial);
    return copy_out(FAKE_SERIAL, serial, length);
}

static int attribute(CUdevice_attribute a, int index)
{
    return fakegpu_physical_attribute(index, a);
}

/* Memory this process holds on a device (the fake knows no other's). */
static size_t memory_used(const struct nvmlDevice_st *d)
{
    int ordinal = fakegpu_visible_ordinal(d->index);
    return ordinal < 0 ? 0 : fakegpu_memory_used(ordinal);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_QUERY(device, pci);
    memset(pci, 0, sizeof *pci);
    pci->domain = (unsigned)attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, device->index);
    pci->bus = (unsigned)attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device->index);
    pci->device = (unsigned)attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device->index);
    pci->pciDeviceId = 0x233010deu;     /* vendor NVIDIA (10de) */
    pci->pciSubSystemId = 0x16c110deu;
    snprintf(pci->busId, sizeof pci->busId, "%08x:%02x:%02x.0", pci->domain, pci->bus,
             pci->device);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", pci->domain,
             pci->bus, pci->device);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    nvmlPciInfo_t pci;
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!pciBusId || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < NDEVICES; i++)
        if (nvmlDeviceGetPciInfo_v3(&devices[i], &pci) == NVML_SUCCESS &&
            (strcasecmp(pci.busId, pciBusId) == 0 || strcasecmp(pci.busIdLegacy, pciBusId) == 0)) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEVICE_QUERY(device, major);
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device->index);
    *minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device->index);
    return NVML_SUCCESS;
}

/* ---- memory and load -------------------------------------------------------------------- */

static unsigned long long total_memory(const struct nvmlDevice_st *d)
{
    (void)d;
    return FAKE_TOTAL_MEMORY;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    DEVICE_QUERY(device, memory);
    memory->total = total_memory(device);
    memory->used = memory_used(device);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    DEVICE_QUERY(device, memory);
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = total_memory(device);
    memory->reserved = 0;
    memory->used = memory_used(device);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

/* The fake computes on the CPU when asked, and not between calls. */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    DEVICE_QUERY(device, utilization);
    utilization->gpu = 0;
    utilization->memory = 0;
    return NVML_SUCCESS;
}

/* ---- temperature, power, clocks, fans ------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int *temp)
{
    DEVICE_QUERY(device, temp);
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = FAKE_TEMPERATURE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t type,
                                               unsigned int *temp)
{
    DEVICE_QUERY(device, temp);
    if (type == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
        *temp = FAKE_SHUTDOWN_TEMP;
    else if (type == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
        *temp = FAKE_SLOWDOWN_TEMP;
    else
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    DEVICE_QUERY(device, power);
    *power = FAKE_POWER_USAGE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEVICE_QUERY(device, limit);
    *limit = device->power_limit;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    return nvmlDeviceGetPowerManagementLimit(device, limit);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEVICE_QUERY(device, limit);
    *limit = 300000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                          unsigned int *minLimit,
                                                          unsigned int *maxLimit)
{
    DEVICE_QUERY(device, minLimit);
    if (!maxLimit)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minLimit = FAKE_POWER_MIN;
    *maxLimit = FAKE_POWER_MAX;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!device_of(device) || limit < FAKE_POWER_MIN || limit > FAKE_POWER_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    device->power_limit = limit;
    return NVML_SUCCESS;
}

/* Clocks in MHz: CUDA's rates are in kHz. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock)
{
    DEVICE_QUERY(device, clock);
    if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM)
        *clock = (unsigned)attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device->index) / 1000;
    else if (type == NVML_CLOCK_MEM)
        *clock = (unsigned)attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device->index) / 1000;
    else
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock)
{
    return nvmlDeviceGetClockInfo(device, type, clock);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    DEVICE_QUERY(device, speed);
    *speed = FAKE_FAN_SPEED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    DEVICE_QUERY(device, pState);
    *pState = NVML_PSTATE_0;
    return NVML_SUCCESS;
}

/* ---- modes -------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    DEVICE_QUERY(device, mode);
    *mode = device->compute_mode;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode)
{
    if (!initialised())
        return NVML_ERROR_UNINITIALIZED;
    if (!device_of(device) || (int)mode < 0 || mode >= NVML_COMPUTEMODE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    device->compute_mode = mode;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    DEVICE_QUERY(device, mode);
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display)
{
    DEVICE_QUERY(device, display);
    *display = NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending)
{
    DEVICE_QUERY(device, current);
    if (!pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive)
{
    DEVICE_QUERY(device, isActive);
    *isActive = NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    DEVICE_QUERY(device, eccCounts);
    if ((int)errorType < 0 || errorType >= NVML_MEMORY_ERROR_TYPE_COUNT ||
        (int)counterType < 0 || counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eccCounts = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    DEVICE_QUERY(device, currentMode);
    if (!pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending)
{
    DEVICE_QUERY(device, isPending);
    *isPending = NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int *pageCount, unsigned long long *addresses)
{
    (void)addresses;
    DEVICE_QUERY(device, pageCount);
    if ((int)cause < 0 || cause >= NVML_PAGE_RETIREMENT_CAUSE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *pageCount = 0;
    return NVML_SUCCESS;
}

/* The process holding device memory is this one: the fake's memory is
 * this process's. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    DEVICE_QUERY(device, infoCount);
    size_t used = memory_used(device);
    unsigned n = used ? 1 : 0;
    if (*infoCount < n) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *infoCount = n;
    if (n) {
        if (!infos)
            return NVML_ERROR_INVALID_ARGUMENT;
        infos[0].pid = (unsigned)getpid();
        infos[0].usedGpuMemory = used;
        infos[0].gpuInstanceId = infos[0].computeInstanceId = 0xffffffffu;
    }
    return NVML_SUCCESS;
}

/* ---- versions ------------------------------------------------------------------------------ */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(FAKE_DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    return copy_out(FAKE_NVML_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    return cuDriverGetVersion(cudaDriverVersion) == CUDA_SUCCESS ? NVML_SUCCESS
                                                                 : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    return result == NVML_SUCCESS ? "Success" : "fake NVML error";
}
