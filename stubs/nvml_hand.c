/* Hand-written parts of libnvidia-ml: error texts on the client, and the
 * lists sized by a count in memory (rgpu.nvml_list; server side in
 * daemon/hand_nvml.c).  Everything else is generated from codegen/nvml.ann. */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
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
 * out; entries (entry bytes each) are filled when they fit. */
static nvmlReturn_t nvml_list(const char *what, int list, nvmlDevice_t device, unsigned arg,
                              unsigned *count, void *entries, size_t entry)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (!count || (*count && !entries))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned capacity = *count < RGPU_NVML_LIST_MAX ? *count : RGPU_NVML_LIST_MAX;
    rgpu_req_begin(&req, rgpu_proc_id("nvml", RGPU_H_NVML_LIST), 0);
    msgpack_pack_array(&req.pk, 4);
    msgpack_pack_uint64(&req.pk, (uint64_t)list);
    msgpack_pack_uint64(&req.pk, (uint64_t)(uintptr_t)device);
    msgpack_pack_uint64(&req.pk, arg);
    msgpack_pack_uint64(&req.pk, capacity);
    int rc = rgpu_req_exchange(LIB, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return (nvmlReturn_t)rc;
    nvmlReturn_t status = (nvmlReturn_t)rgpu_reply_status(LIB, &reply);
    uint64_t n = rgpu_reply_u64(&reply, 0);
    const msgpack_object *bin = rgpu_reply_bin(&reply, 1);
    if (status == NVML_SUCCESS || status == NVML_ERROR_INSUFFICIENT_SIZE)
        *count = n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
    if (status == NVML_SUCCESS) {
        /* The server answers at most what it was asked for. */
        if (!bin || n > capacity || bin->via.bin.size != n * entry)
            status = NVML_ERROR_UNKNOWN;
        else if (n)
            memcpy(entries, bin->via.bin.ptr, bin->via.bin.size);
    }
    rgpu_reply_free(&reply);
    return status;
}

/* The session's process, shown as this one: its server pid means nothing
 * here. */
static nvmlReturn_t processes(const char *what, int list, nvmlDevice_t device,
                              unsigned *count, nvmlProcessInfo_t *infos)
{
    nvmlReturn_t rc = nvml_list(what, list, device, 0, count, infos, sizeof *infos);
    for (unsigned i = 0; rc == NVML_SUCCESS && i < *count; i++)
        infos[i].pid = (unsigned)getpid();
    return rc;
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int *infoCount,
                                                                 nvmlProcessInfo_t *infos)
{
    return processes("nvmlDeviceGetComputeRunningProcesses_v3", RGPU_NVML_LIST_COMPUTE_PROCS,
                     device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos)
{
    return processes("nvmlDeviceGetGraphicsRunningProcesses_v3", RGPU_NVML_LIST_GRAPHICS_PROCS,
                     device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                    unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos)
{
    return processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", RGPU_NVML_LIST_MPS_PROCS,
                     device, infoCount, infos);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                   nvmlPageRetirementCause_t cause,
                                                   unsigned int *pageCount,
                                                   unsigned long long *addresses)
{
    return nvml_list("nvmlDeviceGetRetiredPages", RGPU_NVML_LIST_RETIRED_PAGES, device,
                     (unsigned)cause, pageCount, addresses, sizeof *addresses);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device,
                                                            unsigned int *count,
                                                            unsigned int *clocksMHz)
{
    return nvml_list("nvmlDeviceGetSupportedMemoryClocks", RGPU_NVML_LIST_MEMORY_CLOCKS, device,
                     0, count, clocksMHz, sizeof *clocksMHz);
}

RGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
                                                              unsigned int memoryClockMHz,
                                                              unsigned int *count,
                                                              unsigned int *clocksMHz)
{
    return nvml_list("nvmlDeviceGetSupportedGraphicsClocks", RGPU_NVML_LIST_GRAPHICS_CLOCKS,
                     device, memoryClockMHz, count, clocksMHz, sizeof *clocksMHz);
}
