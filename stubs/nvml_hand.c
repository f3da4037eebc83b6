/* Hand-written parts of libnvidia-ml: error texts on the client, and the
 * lists sized by a count in memory (rgpu_nvml_list, codegen/nvml_own.h;
 * server side in daemon/hand_nvml.c).  Everything else is generated from codegen/nvml.ann. */
#include "rgpu_client.h"
#include "nvml_own.h"
#include "nvml_procs.h"

#include <nvml.h>
#include <string.h>
#include <unistd.h>

#define LIB (&rgpu_nvml_lib)

/* The header's description of each status: answered without a server, as
 * a program may ask before nvmlInit or after it failed. */
RGPU_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    const char *s = rgpu_nvml_error_string((int)result);
    return s ? s : "Unknown Error";
}

/* One list query: count is the caller's capacity in and the list's length
 * out; entries are filled when they fit. */
static nvmlReturn_t nvml_list(int list, nvmlDevice_t device, unsigned arg, unsigned *count,
                              void *entries)
{
    unsigned n = 0;
    if (!count || (*count && !entries))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned capacity = *count < RGPU_NVML_LIST_MAX ? *count : RGPU_NVML_LIST_MAX;
    nvmlReturn_t status = rgpu_nvml_list((unsigned)list, device, arg, entries, capacity, &n);
    if (status == NVML_SUCCESS || status == NVML_ERROR_INSUFFICIENT_SIZE)
        *count = n;
    /* The server answers at most what it was asked for. */
    if (status == NVML_SUCCESS && n > capacity)
        status = NVML_ERROR_UNKNOWN;
    return status;
}

/* The session's process, shown as this one: its server pid means nothing
 * here. */
static nvmlReturn_t processes(int list, nvmlDevice_t device, unsigned *count,
                              nvmlProcessInfo_t *infos)
{
    nvmlReturn_t rc = nvml_list(list, device, 0, count, infos);
    for (unsigned i = 0; rc == NVML_SUCCESS && i < *count; i++)
        infos[i].pid = (unsigned)getpid();
    return rc;
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int *infoCount,
                                                                 nvmlProcessInfo_t *infos)
{
    return processes(RGPU_NVML_LIST_COMPUTE_PROCS, device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos)
{
    return processes(RGPU_NVML_LIST_GRAPHICS_PROCS, device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                    unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos)
{
    return processes(RGPU_NVML_LIST_MPS_PROCS, device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                   nvmlPageRetirementCause_t cause,
                                                   unsigned int *pageCount,
                                                   unsigned long long *addresses)
{
    return nvml_list(RGPU_NVML_LIST_RETIRED_PAGES, device, (unsigned)cause, pageCount,
                     addresses);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device,
                                                            unsigned int *count,
                                                            unsigned int *clocksMHz)
{
    return nvml_list(RGPU_NVML_LIST_MEMORY_CLOCKS, device, 0, count, clocksMHz);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
                                                              unsigned int memoryClockMHz,
                                                              unsigned int *count,
                                                              unsigned int *clocksMHz)
{
    return nvml_list(RGPU_NVML_LIST_GRAPHICS_CLOCKS, device, memoryClockMHz, count, clocksMHz);
}
