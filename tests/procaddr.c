/* cuGetProcAddress hands back the ABI the caller asked for (answered by the
 * stub itself, no server needed): the newest not newer than the requested
 * CUDA version, the per-thread-stream flavour when asked.  Programs built
 * with older toolkits ask for older versions and get the older entry
 * points, which libcuda.so.1 still exports. */
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

/* The CUDA 11.3 cuGetProcAddress itself, found by name as such a program
 * finds it, answers as the current one does. */
static void expect_old_entry(void)
{
    typedef CUresult (*old_get_fn)(const char *, void **, int, cuuint64_t);
    old_get_fn old_get = (old_get_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    void *fn = NULL;
    Dl_info info = { 0 };
    CUresult rc = old_get ? old_get("cuCtxCreate", &fn, 11030, 0) : CUDA_ERROR_NOT_FOUND;
    const char *got = rc == CUDA_SUCCESS && fn && dladdr(fn, &info) && info.dli_sname
                          ? info.dli_sname : "(none)";
    if (strcmp(got, "cuCtxCreate_v2") == 0) {
        printf("ok cuGetProcAddress (11.3 form): cuCtxCreate@11030 -> cuCtxCreate_v2\n");
    } else {
        printf("FAIL cuGetProcAddress (11.3 form): got %s (status %d)\n", got, (int)rc);
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

    /* Older versions: the entry point of that ABI, up to the version that
     * replaced it. */
    expect("cuCtxCreate", 2000, plain, "cuCtxCreate");
    expect("cuCtxCreate", 11040, plain, "cuCtxCreate_v3");
    expect("cuMemAlloc", 3000, plain, "cuMemAlloc");
    expect("cuMemAlloc", 3020, plain, "cuMemAlloc_v2");
    expect("cuMemAlloc", 1000, plain, "(none)");
    expect("cuEventElapsedTime", 12000, plain, "cuEventElapsedTime");
    expect("cuEventElapsedTime", 12080, plain, "cuEventElapsedTime_v2");
    expect("cuDevicePrimaryCtxRelease", 10020, plain, "cuDevicePrimaryCtxRelease");
    expect("cuDevicePrimaryCtxRelease", 11000, plain, "cuDevicePrimaryCtxRelease_v2");
    expect("cuCtxDestroy", 3020, plain, "cuCtxDestroy");
    expect("cuCtxDestroy", 4000, plain, "cuCtxDestroy_v2");
    expect("cuGetProcAddress", 11030, plain, "cuGetProcAddress");
    expect("cuGetProcAddress", 12000, plain, "cuGetProcAddress_v2");
    /* The per-thread flavour of an older ABI, and the default flavour
     * where a version had none. */
    expect("cuMemPrefetchAsync", 8000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
           "cuMemPrefetchAsync_ptsz");
    expect("cuMemPrefetchAsync", 12020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
           "cuMemPrefetchAsync_v2_ptsz");
    expect("cuStreamBeginCapture", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
           "cuStreamBeginCapture_ptsz");
    expect("cuMemcpyHtoD", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
           "cuMemcpyHtoD_v2");
    expect_old_entry();
    return failures ? 1 : 0;
}
