/* The size of an entry of an NVML list rgpu serves (rgpu_nvml_list,
 * codegen/nvml_own.h): both ends of the wire size the buffer by the list
 * (0 refuses a list we do not know). */
#include "nvml_own.h"

uint32_t rgpu_nvml_list_entry_size(int list);

uint32_t rgpu_nvml_list_entry_size(int list)
{
    switch (list) {
    case RGPU_NVML_LIST_COMPUTE_PROCS:
    case RGPU_NVML_LIST_GRAPHICS_PROCS:
    case RGPU_NVML_LIST_MPS_PROCS:
        return sizeof(nvmlProcessInfo_t);
    case RGPU_NVML_LIST_RETIRED_PAGES:
        return sizeof(unsigned long long);
    case RGPU_NVML_LIST_MEMORY_CLOCKS:
    case RGPU_NVML_LIST_GRAPHICS_CLOCKS:
        return sizeof(unsigned int);
    default:
        return 0;
    }
}
