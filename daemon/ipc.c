/* CUDA IPC between client processes of this rgpud: the server side.
 *
 * Each client process has its own session, a process of the GPU host, so
 * a handle one client gets (cuIpcGetMemHandle, generated) is the driver's
 * own 64 bytes, and another client's session opens it with the real driver,
 * which validates its handles: garbage, a handle of another host, or one
 * whose memory is freed fails there.  That failure is logged here with what
 * it most likely means, and the library's error goes back unchanged.
 *
 * Memory a session opens joins its table of owned memory (daemon/owned.c)
 * with the allocation's size from cuMemGetAddressRange, so that copies,
 * memsets and kernel arguments may use it; a close forgets it.  Sessions
 * share nothing: the table is this session's.  Who may open whose memory:
 * docs/security.md, "CUDA IPC". */
#include "rgpud.h"
#include "owned.h"
#include "rgpu_log.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

static uint64_t val(void *const *argv, int i)
{
    return *(const uint64_t *)argv[i];
}

static uint64_t out_value(void *const *argv, int i)
{
    const uint64_t *p = *(uint64_t *const *)argv[i];
    return p ? *p : 0;
}

/* The opened allocation's size, from the session's driver: 0 when it
 * does not know the address (then nothing is recorded and every use of the
 * pointer is refused, which is safe). */
static uint64_t opened_size(uint64_t ptr)
{
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        (CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr))backend_sym(
            "cuda", "cuMemGetAddressRange_v2");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!range || range(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS || base != ptr)
        return 0;
    return size;
}

static void record_opened(const char *fn, void **argv, int status)
{
    uint64_t ptr = out_value(argv, 0), size;
    if (status != 0) {
        rgpu_warn("%s: the driver refused the handle (error %d): IPC handle not made by "
                  "this GPU host's rgpud (another host's, garbage, or its memory is freed)",
                  fn, status);
        return;
    }
    size = ptr ? opened_size(ptr) : 0;
    if (!size || owned_add(ptr, size, OWNED_IPC, 0) < 0)
        rgpu_error("%s: opened memory at 0x%llx of unknown size: it cannot be used", fn,
                   (unsigned long long)ptr);
    else
        rgpu_info("%s: opened %llu bytes at 0x%llx", fn, (unsigned long long)size,
                  (unsigned long long)ptr);
}

static void post_open_driver(void **argv, int status)
{
    record_opened("cuIpcOpenMemHandle", argv, status);
}

static void post_open_runtime(void **argv, int status)
{
    record_opened("cudaIpcOpenMemHandle", argv, status);
}

/* The driver refuses to close what it did not open by IPC, so only an
 * opened range is forgotten here. */
static void post_close(void **argv, int status)
{
    if (status == 0)
        (void)owned_remove(val(argv, 0));
}

static void post_open_event(void **argv, int status)
{
    (void)argv;
    if (status != 0)
        rgpu_warn("cuIpcOpenEventHandle: the driver refused the handle (error %d): IPC handle "
                  "not made by this GPU host's rgpud (another host's, or garbage)", status);
}

static const struct guard ipc_guards[] = {
    { "cuda", "cuIpcOpenMemHandle_v2", NULL, post_open_driver },
    { "cuda", "cuIpcCloseMemHandle", NULL, post_close },
    { "cuda", "cuIpcOpenEventHandle", NULL, post_open_event },
    { "cudart", "cudaIpcOpenMemHandle", NULL, post_open_runtime },
    { "cudart", "cudaIpcCloseMemHandle", NULL, post_close },
    { "cudart", "cudaIpcOpenEventHandle", NULL, post_open_event },
};

const struct guard *ipc_guard_for(const char *lib, const char *name)
{
    for (size_t i = 0; i < sizeof ipc_guards / sizeof ipc_guards[0]; i++)
        if (strcmp(ipc_guards[i].lib, lib) == 0 && strcmp(ipc_guards[i].name, name) == 0)
            return &ipc_guards[i];
    return NULL;
}
