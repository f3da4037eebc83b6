/* rgpu's own procedures of libnvidia-ml (codegen/nvml.ann, "procedures"):
 * requests of the wire that are no NVML function, declared as C functions
 * so that the one codec marshals them (see codegen/cudart_own.h for the
 * conventions). */
#ifndef RGPU_NVML_OWN_H
#define RGPU_NVML_OWN_H

#include <nvml.h>
#include <stdint.h>

/* The queries whose array is sized by a count in memory. */
enum rgpu_nvml_list {
    RGPU_NVML_LIST_COMPUTE_PROCS,   /* nvmlDeviceGetComputeRunningProcesses_v3 */
    RGPU_NVML_LIST_GRAPHICS_PROCS,  /* nvmlDeviceGetGraphicsRunningProcesses_v3 */
    RGPU_NVML_LIST_MPS_PROCS,       /* nvmlDeviceGetMPSComputeRunningProcesses_v3 */
    RGPU_NVML_LIST_RETIRED_PAGES,   /* nvmlDeviceGetRetiredPages (arg: cause) */
    RGPU_NVML_LIST_MEMORY_CLOCKS,   /* nvmlDeviceGetSupportedMemoryClocks */
    RGPU_NVML_LIST_GRAPHICS_CLOCKS, /* nvmlDeviceGetSupportedGraphicsClocks (arg: memory clock) */
    RGPU_NVML_LIST_KINDS
};
#define RGPU_NVML_LIST_MAX 1024

/* One such query (stubs/nvml_hand.c, daemon/hand_nvml.c): list one of
 * enum rgpu_nvml_list, device a handle the session holds, arg the
 * function's extra value, capacity the caller's entries (at most
 * RGPU_NVML_LIST_MAX; each of rgpu_nvml_list_entry_size(list) bytes,
 * common/nvml_types.c).
 * *count is what the list holds; the entries come only when they fit, else
 * the status is NVML_ERROR_INSUFFICIENT_SIZE, as natively.  Process lists
 * hold the session's own process only. */
nvmlReturn_t rgpu_nvml_list(unsigned int list, nvmlDevice_t device, unsigned int arg,
                            void *entries, unsigned int capacity, unsigned int *count);

#endif
