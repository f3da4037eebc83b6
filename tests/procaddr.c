/* cuGetProcAddress hands back the ABI the caller asked for (answered by the
 * stub itself, no server needed): the newest not newer than the requested
 * CUDA version, the per-thread-stream flavour when asked. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void expect(const char *sym, int version, cuuint64_t flags, const char *want)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult r;
    Dl_info info = { 0 };
    cuGetProcAddress(sym, &fn, version, flags, &r);
    const char *got = fn && dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "(none)";
    if (strcmp(got, want) == 0) {
        printf("ok %s@%d -> %s\n", sym, version, want);
    } else {
        printf("FAIL %s@%d: got %s, want %s\n", sym, version, got, want);
        failures++;
    }
}

int main(void)
{
    const cuuint64_t plain = CU_GET_PROC_ADDRESS_DEFAULT;
    expect("cuCtxCreate", 3020, plain, "cuCtxCreate_v2");
    expect("cuCtxCreate", 12000, plain, "cuCtxCreate_v3");
    expect("cuCtxCreate", 13000, plain, "cuCtxCreate_v4");
    expect("cuMemAlloc", 12000, plain, "cuMemAlloc_v2");
    expect("cuStreamGetCaptureInfo", 12000, plain, "cuStreamGetCaptureInfo_v2");
    expect("cuStreamGetCaptureInfo", 3020, plain, "(none)");
    expect("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
           "cuMemcpyHtoD_v2_ptds");
    expect("cuInit", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuInit");
    expect("cuNoSuchFunction", 13000, plain, "(none)");
    return failures ? 1 : 0;
}
