// Launches with attributes and the kernel handles that programs pass between
// the runtime and the driver, as Triton's and JAX's launchers do:
// - every launch attribute a single GPU takes, through the runtime
//   (cudaLaunchKernelEx, the C++ template over cudaLaunchKernelExC) and
//   through the driver (cuLaunchKernelEx), each launch's data checked;
// - cooperative launches with a grid-wide barrier (cudaLaunchCooperativeKernel,
//   cuLaunchCooperativeKernel, the cooperative attribute), and a grid too
//   large to be resident at once;
// - cudaGetFuncBySymbol and cudaGetKernel, their handles launched through the
//   driver; function and kernel names; the driver's library and kernel calls
//   on a fatbin of kernels.cuh, from memory and from a file.
// Errors whose exact code the driver chooses are printed as "info:" lines,
// which the GPU machine compares between native and rgpu runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"
#include "kernels_fatbin.h" // generated: const unsigned char kernels_fatbin[]

#define THREADS 128
#define BLOCKS 8
#define N (THREADS * BLOCKS)

static const char FILL[] = "_Z10k_fill_u32Pjjy";

// A call that must fail; which error the driver picks is printed for the
// native and rgpu runs to agree on.
static void check_fails(int r, const char *errname, const char *name)
{
    char buf[200];
    if (check(r != 0, fmt_name(buf, sizeof buf, "%s fails", name), "it succeeded"))
        printf("info: %s -> %s\n", name, errname);
}

static void cu_fails(CUresult r, const char *name)
{
    const char *s = "?";
    cuGetErrorName(r, &s);
    check_fails(r, s, name);
}

static void rt_fails(cudaError_t e, const char *name)
{
    check_fails(e, cudaGetErrorName(e), name);
    cudaGetLastError(); // not a sticky error: clear it
}

// Every element of d (n of them) must be want.
static void check_u32(const uint32_t *d, size_t n, uint32_t want, const char *name)
{
    uint32_t *h = (uint32_t *)malloc(n * sizeof *h);
    cudaError_t e = cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost);
    size_t i = 0;
    while (e == cudaSuccess && i < n && h[i] == want)
        i++;
    if (e != cudaSuccess)
        check_cuda(e, name);
    else
        check(i == n, name, "element %zu is 0x%x, want 0x%x", i, i < n ? h[i] : 0, want);
    free(h);
}

// ---- each attribute, through both APIs --------------------------------------------------

struct fixture {
    uint32_t *d;
    CUfunction fill; // k_fill_u32 as the driver sees it
    cudaStream_t s;
    cudaEvent_t untimed, timed;
    int least_priority, greatest_priority, domains;
};

// k_fill_u32 over d with `value`, launched through the runtime and then the
// driver with the same attributes; each launch's data is checked.
static void launch_both(struct fixture *fx, const char *what, cudaLaunchAttribute *attrs,
                        unsigned n, uint32_t value)
{
    char name[200];
    unsigned long long count = N;

    cudaLaunchConfig_t rc = {};
    rc.gridDim = dim3(BLOCKS);
    rc.blockDim = dim3(THREADS);
    rc.stream = fx->s;
    rc.attrs = attrs;
    rc.numAttrs = n;
    check_cuda(cudaLaunchKernelEx(&rc, k_fill_u32, fx->d, value, count),
               fmt_name(name, sizeof name, "cudaLaunchKernelEx %s", what));
    check_cuda(cudaStreamSynchronize(fx->s), fmt_name(name, sizeof name, "sync after %s", what));
    check_u32(fx->d, N, value, fmt_name(name, sizeof name, "cudaLaunchKernelEx %s data", what));

    // The driver's records are the runtime's, member for member.
    CUlaunchConfig dc = {};
    dc.gridDimX = BLOCKS;
    dc.gridDimY = dc.gridDimZ = 1;
    dc.blockDimX = THREADS;
    dc.blockDimY = dc.blockDimZ = 1;
    dc.hStream = (CUstream)fx->s;
    dc.attrs = (CUlaunchAttribute *)attrs;
    dc.numAttrs = n;
    value ^= 0x00ff0000u;
    void *params[] = {&fx->d, &value, &count};
    check_cu(cuLaunchKernelEx(&dc, fx->fill, params, NULL),
             fmt_name(name, sizeof name, "cuLaunchKernelEx %s", what));
    check_cu(cuStreamSynchronize((CUstream)fx->s),
             fmt_name(name, sizeof name, "cuStreamSynchronize after %s", what));
    check_u32(fx->d, N, value, fmt_name(name, sizeof name, "cuLaunchKernelEx %s data", what));
}

static cudaLaunchAttribute attr(cudaLaunchAttributeID id)
{
    cudaLaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = id;
    return a;
}

static void test_attributes(struct fixture *fx)
{
    uint32_t v = 0xA0000000u;
    cudaLaunchAttribute a[3];

    launch_both(fx, "no attributes", NULL, 0, v++);
    a[0] = attr(cudaLaunchAttributeIgnore);
    launch_both(fx, "ignored attribute", a, 1, v++);

    a[0] = attr(cudaLaunchAttributePriority);
    a[0].val.priority = fx->greatest_priority;
    launch_both(fx, "priority greatest", a, 1, v++);
    a[0].val.priority = fx->least_priority;
    launch_both(fx, "priority least", a, 1, v++);

    a[0] = attr(cudaLaunchAttributeProgrammaticStreamSerialization);
    a[0].val.programmaticStreamSerializationAllowed = 1;
    launch_both(fx, "programmatic stream serialization", a, 1, v++);

    a[0] = attr(cudaLaunchAttributeMemSyncDomain);
    a[0].val.memSyncDomain = cudaLaunchMemSyncDomainRemote;
    launch_both(fx, "memory sync domain remote", a, 1, v++);
    a[0] = attr(cudaLaunchAttributeMemSyncDomainMap);
    a[0].val.memSyncDomainMap.default_ = 0;
    a[0].val.memSyncDomainMap.remote = (unsigned char)(fx->domains - 1);
    launch_both(fx, "memory sync domain map", a, 1, v++);

    a[0] = attr(cudaLaunchAttributeClusterDimension);
    a[0].val.clusterDim.x = 2;
    a[0].val.clusterDim.y = a[0].val.clusterDim.z = 1;
    launch_both(fx, "cluster 2x1x1", a, 1, v++);
    a[1] = attr(cudaLaunchAttributeClusterSchedulingPolicyPreference);
    a[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
    launch_both(fx, "cluster 2x1x1 spread", a, 2, v++);
    // What Triton sends for a kernel with num_ctas > 1 and PDL.
    a[2] = attr(cudaLaunchAttributeProgrammaticStreamSerialization);
    a[2].val.programmaticStreamSerializationAllowed = 1;
    launch_both(fx, "cluster, policy and serialization", a, 3, v++);

    a[0] = attr(cudaLaunchAttributeAccessPolicyWindow);
    a[0].val.accessPolicyWindow.base_ptr = fx->d;
    a[0].val.accessPolicyWindow.num_bytes = N * sizeof(uint32_t);
    a[0].val.accessPolicyWindow.hitRatio = 0.5f;
    a[0].val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    a[0].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    launch_both(fx, "access policy window", a, 1, v++);

    a[0] = attr(cudaLaunchAttributePreferredSharedMemoryCarveout);
    a[0].val.sharedMemCarveout = 50;
    launch_both(fx, "shared memory carveout 50", a, 1, v++);

    a[0] = attr(cudaLaunchAttributeCooperative);
    a[0].val.cooperative = 1;
    launch_both(fx, "cooperative", a, 1, v++);

    a[0] = attr(cudaLaunchAttributeLaunchCompletionEvent);
    a[0].val.launchCompletionEvent.event = fx->untimed;
    launch_both(fx, "launch completion event", a, 1, v++);
    check_cuda(cudaEventSynchronize(fx->untimed), "launch completion event synchronize");
    check_cuda(cudaEventQuery(fx->untimed), "launch completion event complete");

    a[0] = attr(cudaLaunchAttributeProgrammaticEvent);
    a[0].val.programmaticEvent.event = fx->untimed;
    a[0].val.programmaticEvent.triggerAtBlockStart = 0;
    launch_both(fx, "programmatic event", a, 1, v++);
    a[0].val.programmaticEvent.triggerAtBlockStart = 1;
    launch_both(fx, "programmatic event at block start", a, 1, v++);
    // Another stream orders itself after the event.
    cudaStream_t s2;
    if (check_cuda(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "second stream")) {
        check_cuda(cudaStreamWaitEvent(s2, fx->untimed, 0), "wait for the programmatic event");
        check_cuda(cudaStreamSynchronize(s2), "second stream synchronize");
        check_cuda(cudaStreamDestroy(s2), "second stream destroy");
    }
}

// Attributes the driver refuses: a cluster that does not tile the grid, a
// device-updatable node outside a capture (and an event that may be timed).
static void test_attribute_errors(struct fixture *fx)
{
    unsigned long long count = N;
    uint32_t value = 1;
    void *args[] = {&fx->d, &value, &count};
    cudaLaunchAttribute a = attr(cudaLaunchAttributeClusterDimension);
    cudaLaunchConfig_t rc = {};
    rc.gridDim = dim3(BLOCKS);
    rc.blockDim = dim3(THREADS);
    rc.stream = fx->s;
    rc.attrs = &a;
    rc.numAttrs = 1;
    CUlaunchConfig dc = {};
    dc.gridDimX = BLOCKS;
    dc.gridDimY = dc.gridDimZ = 1;
    dc.blockDimX = THREADS;
    dc.blockDimY = dc.blockDimZ = 1;
    dc.hStream = (CUstream)fx->s;
    dc.attrs = (CUlaunchAttribute *)&a;
    dc.numAttrs = 1;

    a.val.clusterDim.x = 3;
    a.val.clusterDim.y = a.val.clusterDim.z = 1;
    rt_fails(cudaLaunchKernelExC(&rc, (const void *)k_fill_u32, args),
             "cudaLaunchKernelExC cluster 3 of 8 blocks");
    cu_fails(cuLaunchKernelEx(&dc, fx->fill, args, NULL), "cuLaunchKernelEx cluster 3 of 8 blocks");

    // cuda.h requires an event with timing disabled; whether the driver
    // refuses one that may be timed is its business: printed.
    a = attr(cudaLaunchAttributeLaunchCompletionEvent);
    a.val.launchCompletionEvent.event = fx->timed;
    printf("info: cudaLaunchKernelExC completion event that may be timed -> %s\n",
           cudaGetErrorName(cudaLaunchKernelExC(&rc, (const void *)k_fill_u32, args)));
    cudaGetLastError();
    const char *s = "?";
    cuGetErrorName(cuLaunchKernelEx(&dc, fx->fill, args, NULL), &s);
    printf("info: cuLaunchKernelEx completion event that may be timed -> %s\n", s);

    // rgpu refuses it (not supported), the driver outside a capture: both fail.
    a = attr(cudaLaunchAttributeDeviceUpdatableKernelNode);
    a.val.deviceUpdatableKernelNode.deviceUpdatable = 1;
    check(cudaLaunchKernelExC(&rc, (const void *)k_fill_u32, args) != cudaSuccess,
          "cudaLaunchKernelExC device-updatable node outside a capture fails", "it succeeded");
    cudaGetLastError();
    check(cuLaunchKernelEx(&dc, fx->fill, args, NULL) != CUDA_SUCCESS,
          "cuLaunchKernelEx device-updatable node outside a capture fails", "it succeeded");
    check_cuda(cudaStreamSynchronize(fx->s), "stream still usable after refused launches");
}

// ---- cooperative launches --------------------------------------------------------------------

// out[i] == data[n - 1 - i] == 3 * (n - 1 - i) + 1: the barrier held.
static void check_reversed(const int *out, int n, const char *name)
{
    int *h = (int *)malloc(n * sizeof *h);
    cudaError_t e = cudaMemcpy(h, out, n * sizeof *h, cudaMemcpyDeviceToHost);
    int i = 0;
    while (e == cudaSuccess && i < n && h[i] == 3 * (n - 1 - i) + 1)
        i++;
    if (e != cudaSuccess)
        check_cuda(e, name);
    else
        check(i == n, name, "out[%d] = %d, want %d", i, i < n ? h[i] : 0, 3 * (n - 1 - i) + 1);
    free(h);
}

static void test_cooperative(struct fixture *fx, int sms)
{
    int per_sm = 0, *data, *out, info[2];
    CUfunction coop, grid_info;
    if (!check_cuda(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_coop_reverse, THREADS, 0),
            "occupancy of k_coop_reverse") ||
        !check(per_sm > 0, "k_coop_reverse fits an SM", "%d blocks", per_sm) ||
        !check_cuda(cudaGetFuncBySymbol(&coop, (const void *)k_coop_reverse),
                    "cudaGetFuncBySymbol k_coop_reverse") ||
        !check_cuda(cudaGetFuncBySymbol(&grid_info, (const void *)k_grid_info),
                    "cudaGetFuncBySymbol k_grid_info"))
        return;
    const int resident = per_sm * sms;
    const int blocks = resident < BLOCKS ? resident : BLOCKS, n = blocks * THREADS - 5;
    if (!check_cuda(cudaMalloc(&data, (resident + 1) * THREADS * sizeof(int)),
                    "cudaMalloc coop data") ||
        !check_cuda(cudaMalloc(&out, (resident + 1) * THREADS * sizeof(int)),
                    "cudaMalloc coop out"))
        return;

    int nn = n;
    void *args[] = {&data, &out, &nn};
    check_cuda(cudaMemset(out, 0, n * sizeof(int)), "clear coop out");
    check_cuda(cudaLaunchCooperativeKernel((const void *)k_coop_reverse, dim3(blocks),
                                           dim3(THREADS), args, 0, fx->s),
               "cudaLaunchCooperativeKernel k_coop_reverse");
    check_cuda(cudaStreamSynchronize(fx->s), "sync after cudaLaunchCooperativeKernel");
    check_reversed(out, n, "cudaLaunchCooperativeKernel grid.sync() result");

    check_cuda(cudaMemset(out, 0, n * sizeof(int)), "clear coop out again");
    check_cu(cuLaunchCooperativeKernel(coop, blocks, 1, 1, THREADS, 1, 1, 0, (CUstream)fx->s, args),
             "cuLaunchCooperativeKernel k_coop_reverse");
    check_cu(cuStreamSynchronize((CUstream)fx->s), "sync after cuLaunchCooperativeKernel");
    check_reversed(out, n, "cuLaunchCooperativeKernel grid.sync() result");

    // The whole device's worth of blocks at once, then one more.
    nn = resident * THREADS;
    check_cuda(cudaLaunchCooperativeKernel((const void *)k_coop_reverse, dim3(resident),
                                           dim3(THREADS), args, 0, fx->s),
               "cudaLaunchCooperativeKernel every resident block");
    check_cuda(cudaStreamSynchronize(fx->s), "sync after the largest cooperative grid");
    check_reversed(out, nn, "largest cooperative grid result");
    check_err(cudaLaunchCooperativeKernel((const void *)k_coop_reverse, dim3(resident + 1),
                                          dim3(THREADS), args, 0, fx->s),
              cudaErrorCooperativeLaunchTooLarge, "cudaLaunchCooperativeKernel one block too many");
    cudaGetLastError();
    check_cu_is(cuLaunchCooperativeKernel(coop, resident + 1, 1, 1, THREADS, 1, 1, 0,
                                          (CUstream)fx->s, args),
                CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                "cuLaunchCooperativeKernel one block too many");
    cudaLaunchAttribute a = attr(cudaLaunchAttributeCooperative);
    a.val.cooperative = 1;
    cudaLaunchConfig_t rc = {};
    rc.gridDim = dim3(resident + 1);
    rc.blockDim = dim3(THREADS);
    rc.stream = fx->s;
    rc.attrs = &a;
    rc.numAttrs = 1;
    check_err(cudaLaunchKernelEx(&rc, k_coop_reverse, data, out, nn),
              cudaErrorCooperativeLaunchTooLarge,
              "cudaLaunchKernelEx cooperative, one block too many");
    cudaGetLastError();

    // What the kernel sees: a grid that may sync, or (uncooperative) not.
    int *dinfo = data;
    rc.gridDim = dim3(blocks);
    check_cuda(cudaLaunchKernelEx(&rc, k_grid_info, dinfo),
               "cudaLaunchKernelEx cooperative k_grid_info");
    check_cuda(cudaMemcpy(info, dinfo, sizeof info, cudaMemcpyDeviceToHost), "copy k_grid_info");
    check(info[0] == 1 && info[1] == blocks, "cooperative grid is valid to sync",
          "valid %d, blocks %d", info[0], info[1]);
    void *iargs[] = {&dinfo};
    check_cu(
        cuLaunchKernel(grid_info, blocks, 1, 1, THREADS, 1, 1, 0, (CUstream)fx->s, iargs, NULL),
        "cuLaunchKernel k_grid_info");
    check_cuda(cudaMemcpy(info, dinfo, sizeof info, cudaMemcpyDeviceToHost),
               "copy k_grid_info again");
    check(info[1] == blocks, "uncooperative k_grid_info blocks", "blocks %d", info[1]);
    printf("info: uncooperative grid valid to sync: %d\n", info[0]);

    check_cuda(cudaFree(data), "cudaFree coop data");
    check_cuda(cudaFree(out), "cudaFree coop out");
}

// ---- handles between the runtime and the driver, and names --------------------------------

static void test_handles(struct fixture *fx)
{
    const char *name = NULL, *name2 = NULL;
    unsigned long long count = N;
    uint32_t value = 0xB0000001u;
    void *params[] = {&fx->d, &value, &count};

    // cudaGetFuncBySymbol's CUfunction, launched through the driver.
    check_cu(cuLaunchKernel(fx->fill, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel on cudaGetFuncBySymbol's function");
    check_u32(fx->d, N, value, "cudaGetFuncBySymbol launch data");

    check_cuda(cudaFuncGetName(&name, (const void *)k_fill_u32), "cudaFuncGetName");
    check(name && strcmp(name, FILL) == 0, "cudaFuncGetName is the mangled name", "%s",
          name ? name : "NULL");
    check_cu(cuFuncGetName(&name2, fx->fill), "cuFuncGetName");
    check(name2 && strcmp(name2, FILL) == 0, "cuFuncGetName is the mangled name", "%s",
          name2 ? name2 : "NULL");
    check_err(cudaFuncGetName(NULL, (const void *)k_fill_u32), cudaErrorInvalidValue,
              "cudaFuncGetName NULL");
    cudaGetLastError();
    check_cu_is(cuFuncGetName(NULL, fx->fill), CUDA_ERROR_INVALID_VALUE, "cuFuncGetName NULL");

    // cudaGetKernel: a cudaKernel_t that is a CUkernel too.
    cudaKernel_t kern;
    CUfunction kf;
    if (!check_cuda(cudaGetKernel(&kern, (const void *)k_fill_u32), "cudaGetKernel"))
        return;
    check_cu(cuKernelGetName(&name, (CUkernel)kern), "cuKernelGetName on cudaGetKernel's kernel");
    check(name && strcmp(name, FILL) == 0, "cuKernelGetName is the mangled name", "%s",
          name ? name : "NULL");
    check_cuda(cudaFuncGetName(&name, (const void *)kern), "cudaFuncGetName on a cudaKernel_t");
    check(name && strcmp(name, FILL) == 0, "cudaFuncGetName on a cudaKernel_t is the mangled name",
          "%s", name ? name : "NULL");
    check_cu(cuKernelGetFunction(&kf, (CUkernel)kern),
             "cuKernelGetFunction on cudaGetKernel's kernel");
    value = 0xB0000002u;
    check_cu(cuLaunchKernel(kf, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel on cuKernelGetFunction's function");
    check_u32(fx->d, N, value, "cuKernelGetFunction launch data");
    value = 0xB0000003u;
    check_cuda(cudaLaunchKernel((const void *)kern, dim3(BLOCKS), dim3(THREADS), params, 0, NULL),
               "cudaLaunchKernel with a cudaKernel_t");
    check_u32(fx->d, N, value, "cudaLaunchKernel with a cudaKernel_t data");
    cudaLaunchConfig_t rc = {};
    rc.gridDim = dim3(BLOCKS);
    rc.blockDim = dim3(THREADS);
    check_cuda(cudaLaunchKernelEx(&rc, kern, fx->d, 0xB0000004u, count),
               "cudaLaunchKernelEx with a cudaKernel_t");
    check_u32(fx->d, N, 0xB0000004u, "cudaLaunchKernelEx with a cudaKernel_t data");
    check_cu(cuLaunchKernel((CUfunction)kern, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             "cuLaunchKernel with a CUkernel");
    check_u32(fx->d, N, value, "cuLaunchKernel with a CUkernel data");
}

// cuLibraryLoadData on kernels.cuh's fatbin, and the driver's kernel calls.
static void test_library(struct fixture *fx, const void *image)
{
    CUlibrary lib, lib2 = NULL;
    CUkernel k;
    CUfunction f;
    unsigned count = 0;
    const char *name = NULL;
    int threads = 0;

    if (!check_cu(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0),
                  "cuLibraryLoadData") ||
        !check_cu(cuLibraryGetKernel(&k, lib, FILL), "cuLibraryGetKernel k_fill_u32"))
        return;
    check_cu(cuKernelGetName(&name, k), "cuKernelGetName");
    check(name && strcmp(name, FILL) == 0, "cuKernelGetName of cuLibraryGetKernel's kernel", "%s",
          name ? name : "NULL");
    check_cu(cuKernelGetLibrary(&lib2, k), "cuKernelGetLibrary");
    check(lib2 == lib, "cuKernelGetLibrary is the library", "another handle");
    check_cu(cuKernelGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0),
             "cuKernelGetAttribute");
    check(threads >= THREADS, "cuKernelGetAttribute max threads", "%d", threads);

    if (check_cu(cuLibraryGetKernelCount(&count, lib), "cuLibraryGetKernelCount") &&
        check(count >= 1 && count < 64, "cuLibraryGetKernelCount", "%u", count)) {
        CUkernel all[64];
        int found = 0;
        check_cu(cuLibraryEnumerateKernels(all, count, lib), "cuLibraryEnumerateKernels");
        for (unsigned i = 0; i < count; i++)
            found += cuKernelGetName(&name, all[i]) == CUDA_SUCCESS && strcmp(name, FILL) == 0;
        check(found == 1, "cuLibraryEnumerateKernels lists k_fill_u32 once", "%d times", found);
        printf("info: kernels in the library: %u\n", count);
    }

    unsigned long long n = N;
    uint32_t value = 0xC0000001u;
    void *params[] = {&fx->d, &value, &n};
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    a.value.priority = fx->greatest_priority;
    CUlaunchConfig dc = {};
    dc.gridDimX = BLOCKS;
    dc.gridDimY = dc.gridDimZ = 1;
    dc.blockDimX = THREADS;
    dc.blockDimY = dc.blockDimZ = 1;
    dc.attrs = &a;
    dc.numAttrs = 1;
    check_cu(cuLaunchKernelEx(&dc, (CUfunction)k, params, NULL), "cuLaunchKernelEx on a CUkernel");
    check_u32(fx->d, N, value, "cuLaunchKernelEx on a CUkernel data");
    value = 0xC0000002u;
    if (check_cu(cuKernelGetFunction(&f, k), "cuKernelGetFunction")) {
        check_cu(cuLaunchKernelEx(&dc, f, params, NULL),
                 "cuLaunchKernelEx on cuKernelGetFunction's function");
        check_u32(fx->d, N, value, "cuLaunchKernelEx on cuKernelGetFunction's function data");
        check_cu(cuFuncGetName(&name, f), "cuFuncGetName of cuKernelGetFunction's function");
        check(name && strcmp(name, FILL) == 0, "cuFuncGetName of the library's function", "%s",
              name ? name : "NULL");
    }
    check_cu(cuLibraryUnload(lib), "cuLibraryUnload");
}

// cuLaunchKernelEx as Triton's launcher finds it: through cuGetProcAddress.
static void test_proc_address(struct fixture *fx)
{
    typedef decltype(&cuLaunchKernelEx) launch_ex_fn;
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuGetProcAddress("cuLaunchKernelEx", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if (!check(r == CUDA_SUCCESS && q == CU_GET_PROC_ADDRESS_SUCCESS && fn,
               "cuGetProcAddress cuLaunchKernelEx", "result %d, status %d", (int)r, (int)q))
        return;
    unsigned long long n = N;
    uint32_t value = 0xE0000001u;
    void *params[] = {&fx->d, &value, &n};
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig dc = {};
    dc.gridDimX = BLOCKS;
    dc.gridDimY = dc.gridDimZ = 1;
    dc.blockDimX = THREADS;
    dc.blockDimY = dc.blockDimZ = 1;
    dc.hStream = (CUstream)fx->s;
    dc.attrs = &a;
    dc.numAttrs = 1;
    check_cu(((launch_ex_fn)fn)(&dc, fx->fill, params, NULL),
             "cuLaunchKernelEx through cuGetProcAddress");
    check_cu(cuStreamSynchronize((CUstream)fx->s), "sync after cuGetProcAddress's launch");
    check_u32(fx->d, N, value, "cuLaunchKernelEx through cuGetProcAddress data");
}

// cuLibraryLoadFromFile: the file is the program's (through rgpu, the
// client's), the library as good as one loaded from bytes.
static void test_library_file(struct fixture *fx, const void *image, size_t size)
{
    char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/rgpu-launch-attrs-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    bool written = f && fwrite(image, 1, size, f) == size;
    if (f)
        fclose(f);
    if (!check(written, "fatbin written to a file", "cannot write %s", path))
        return;

    CUlibrary lib;
    CUkernel k;
    if (check_cu(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0),
                 "cuLibraryLoadFromFile") &&
        check_cu(cuLibraryGetKernel(&k, lib, FILL), "cuLibraryGetKernel from the file's library")) {
        unsigned long long n = N;
        uint32_t value = 0xD0000001u;
        void *params[] = {&fx->d, &value, &n};
        check_cu(cuLaunchKernel((CUfunction)k, BLOCKS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
                 "cuLaunchKernel from the file's library");
        check_u32(fx->d, N, value, "cuLaunchKernel from the file's library data");
        check_cu(cuLibraryUnload(lib), "cuLibraryUnload the file's library");
    }
    unlink(path);
    cu_fails(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0),
             "cuLibraryLoadFromFile of a missing file");
}

int main(void)
{
    struct fixture fx;
    cudaDeviceProp prop;
    memset(&fx, 0, sizeof fx);

    // The generated array has no alignment guarantee: hand the driver an
    // 8-aligned copy.
    void *image = malloc(sizeof kernels_fatbin);
    memcpy(image, kernels_fatbin, sizeof kernels_fatbin);

    if (!check_cuda(cudaSetDevice(0), "cudaSetDevice") ||
        !check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") ||
        !check_cuda(cudaMalloc(&fx.d, N * sizeof(uint32_t)), "cudaMalloc") ||
        !check_cuda(cudaStreamCreateWithFlags(&fx.s, cudaStreamNonBlocking), "cudaStreamCreate") ||
        !check_cuda(cudaEventCreateWithFlags(&fx.untimed, cudaEventDisableTiming),
                    "untimed event") ||
        !check_cuda(cudaEventCreate(&fx.timed), "timed event") ||
        !check_cuda(cudaDeviceGetStreamPriorityRange(&fx.least_priority, &fx.greatest_priority),
                    "cudaDeviceGetStreamPriorityRange") ||
        !check_cuda(cudaDeviceGetAttribute(&fx.domains, cudaDevAttrMemSyncDomainCount, 0),
                    "cudaDevAttrMemSyncDomainCount") ||
        !check_cuda(cudaGetFuncBySymbol(&fx.fill, (const void *)k_fill_u32),
                    "cudaGetFuncBySymbol k_fill_u32"))
        return 1;
    check(fx.domains >= 1, "at least one memory sync domain", "%d", fx.domains);
    CUfunction again = NULL;
    check_cuda(cudaGetFuncBySymbol(&again, (const void *)k_fill_u32), "cudaGetFuncBySymbol again");
    check(again == fx.fill, "cudaGetFuncBySymbol answers the same function", "another handle");

    test_attributes(&fx);
    test_attribute_errors(&fx);
    test_cooperative(&fx, prop.multiProcessorCount);
    test_handles(&fx);
    test_proc_address(&fx);
    test_library(&fx, image);
    test_library_file(&fx, image, sizeof kernels_fatbin);

    check_cuda(cudaEventDestroy(fx.untimed), "cudaEventDestroy untimed");
    check_cuda(cudaEventDestroy(fx.timed), "cudaEventDestroy timed");
    check_cuda(cudaStreamDestroy(fx.s), "cudaStreamDestroy");
    check_cuda(cudaFree(fx.d), "cudaFree");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    free(image);
    return check_exit_status();
}
