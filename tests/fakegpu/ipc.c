// Fake libcuda: IPC handles between processes (cuIpc*), and
// cuMemGetAddressRange_v2, which rgpu asks for an opened handle's size.
//
// A GPU lets two processes see one allocation; here device memory is host
// memory of one process, so an exported allocation moves into a POSIX
// shared-memory object (mem.c, fg_mem_export) and the handle names it.
// Another process maps the object at a device address of its own, as a
// real import maps the same physical memory at a new address.  The exporter's
// cuMemFree removes the object's name: a later open fails, as opening the
// handle of freed memory does on a GPU; opened mappings stay until closed.
//
// Event handles: work here finishes when it is enqueued, so an exported
// event is always complete by the time another process could wait on it;
// the opened event is a new interprocess event of the opening process.
//
// Shared-memory objects live in /dev/shm under the names NVIDIA's driver
// gives its IPC files (cuda.shm.*), which rgpud's session sandbox lets the
// driver create, open and unlink there (daemon/sandbox.c, cuda_shm_call).
#include "fakegpu.h"

#include <string.h>
#include <unistd.h>

// The handle's 64 bytes.
struct mem_handle {
    char magic[8];                  // "fgIPCm1"
    uint32_t pid;                   // the exporting process
    uint32_t zero;
    uint64_t size;
    char name[FG_IPC_NAME];
};
_Static_assert(sizeof(struct mem_handle) == sizeof(CUipcMemHandle), "handle size");

struct event_handle {
    char magic[8];                  // "fgIPCe1"
    uint32_t pid;
    char unused[52];
};
_Static_assert(sizeof(struct event_handle) == sizeof(CUipcEventHandle), "handle size");

static const char mem_magic[8] = "fgIPCm1";
static const char event_magic[8] = "fgIPCe1";

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    struct mem_handle h = { .pid = (uint32_t)getpid() };
    struct fg_ctx *c;
    CUresult r;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(h.magic, mem_magic, sizeof h.magic);
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_mem_export(dptr, h.name, &h.size);
    fg_unlock();
    if (r == CUDA_SUCCESS)
        memcpy(pHandle, &h, sizeof h);
    return r;
}

// A process cannot open its own handle (the driver refuses it with an
// invalid-context error).
CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                       unsigned int Flags)
{
    struct mem_handle h;
    struct fg_ctx *c;
    CUresult r;

    memcpy(&h, &handle, sizeof h);
    if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
        memcmp(h.magic, mem_magic, sizeof h.magic) != 0 ||
        memchr(h.name, 0, sizeof h.name) == NULL || strncmp(h.name, "/cuda.shm.fakegpu-", 18) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == (uint32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_mem_import(c, h.name, h.size, pdptr);
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS)
        r = fg_mem_close_import(dptr);
    fg_unlock();
    return r;
}

// Only events made with CU_EVENT_INTERPROCESS can be exported.
CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
    struct event_handle h = { .pid = (uint32_t)getpid() };
    struct fg_ctx *c;
    unsigned flags = 0;
    CUresult r;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(h.magic, event_magic, sizeof h.magic);
    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && fg_event_flags(event, &flags) < 0)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && !(flags & CU_EVENT_INTERPROCESS))
        r = CUDA_ERROR_INVALID_VALUE;
    fg_unlock();
    if (r == CUDA_SUCCESS)
        memcpy(pHandle, &h, sizeof h);
    return r;
}

CUresult CUDAAPI cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
    struct event_handle h;

    memcpy(&h, &handle, sizeof h);
    if (!phEvent || memcmp(h.magic, event_magic, sizeof h.magic) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == (uint32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT;
    return cuEventCreate(phEvent, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    struct fg_ctx *c;
    CUresult r;

    fg_lock();
    r = fg_enter(0, &c, NULL);
    if (r == CUDA_SUCCESS && fg_mem_range(dptr, &base, &size) < 0)
        r = CUDA_ERROR_NOT_FOUND;
    fg_unlock();
    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = base;
        if (psize)
            *psize = size;
    }
    return r;
}
