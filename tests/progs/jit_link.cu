// JIT linking and JIT options through the driver API: cuLink* over a
// kernel (jit_kernel.cuh) and the function it calls, defined in another
// input (jit_device.cuh), both compiled at build time as relocatable code
// (cubin, fatbin, PTX) and embedded here; the info and error logs, their
// sizes and the wall time the driver writes back; a log cut to a small
// buffer; a bad input; an input added from a file; cuModuleLoadDataEx and
// cuLibraryLoadData with JIT options.  Link with -lcuda.
//
// On a GPU every input links, and the logs are printed as the driver wrote
// them: the native run and the run through rgpu must print the same.  On
// rgpu's fake GPU (its device name says so), which has no JIT compiler,
// PTX inputs fail with CUDA_ERROR_NOT_SUPPORTED and the logs are the fake's
// own lines, checked exactly (tests/fakegpu/README.md).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include "check.h"
#include "jit_kernel_cubin.h"   // generated: const unsigned char jit_kernel_cubin[]
#include "jit_kernel_ptx.h"     // jit_kernel_ptx[] (no NUL)
#include "jit_device_cubin.h"   // jit_device_cubin[]
#include "jit_device_fatbin.h"  // jit_device_fatbin[]
#include "kernels_fatbin.h"     // kernels_fatbin[]: kernels.cuh
#include "kernels_ptx.h"        // kernels_ptx[] (no NUL)

#define N 1000
#define THREADS 128
#define LOG_SIZE 4096

static const char AXPY[] = "_Z6k_axpyfPKfPfi";     // k_axpy(float, const float*, float*, int)
static const char FILL[] = "_Z10k_fill_u32Pjjy";   // k_fill_u32(uint32_t*, uint32_t, unsigned long long)

static bool fake;       // rgpu's fake GPU: no JIT compiler, logs of its own

static const char *err_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

// An 8-aligned copy of an embedded image (the generated arrays have no
// alignment), with a NUL after it for PTX.
static void *copy_of(const unsigned char *p, size_t n)
{
    unsigned char *c = (unsigned char *)malloc(n + 1);
    memcpy(c, p, n);
    c[n] = 0;
    return c;
}

// ---- the JIT options of one call -------------------------------------------------

enum { INFO, INFO_SIZE, ERROR, ERROR_SIZE, WALL, VERBOSE, NOPTS };

struct jit {
    char info[LOG_SIZE], error[LOG_SIZE];
    unsigned info_cap;
    CUjit_option opt[NOPTS];
    void *val[NOPTS];
};

// Both logs, the wall time (preset to -1, so that writing it shows) and
// verbose logging; an info log of info_cap bytes.
static void jit_init(struct jit *j, unsigned info_cap)
{
    static const CUjit_option ids[NOPTS] = {
        CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME, CU_JIT_LOG_VERBOSE};
    float unset = -1.0f;
    // Empty strings with garbage after them: a log written must end in
    // its own NUL.
    memset(j->info, 0x5a, sizeof j->info);
    memset(j->error, 0x5a, sizeof j->error);
    j->info[0] = j->error[0] = 0;
    j->info_cap = info_cap;
    memcpy(j->opt, ids, sizeof ids);
    j->val[INFO] = j->info;
    j->val[INFO_SIZE] = (void *)(uintptr_t)info_cap;
    j->val[ERROR] = j->error;
    j->val[ERROR_SIZE] = (void *)(uintptr_t)LOG_SIZE;
    j->val[WALL] = NULL;
    memcpy(&j->val[WALL], &unset, sizeof unset);
    j->val[VERBOSE] = (void *)(uintptr_t)1;
}

static unsigned written(const struct jit *j, int which)
{
    return (unsigned)(uintptr_t)j->val[which];
}

static float wall_time(const struct jit *j)
{
    float ms;
    memcpy(&ms, &j->val[WALL], sizeof ms);
    return ms;
}

// A log is a string inside its buffer.
static bool log_ok(const char *log, unsigned cap)
{
    return cap > 0 && memchr(log, 0, cap) != NULL;
}

// On a GPU the logs are printed as written, to stderr: what a driver logs
// depends on its JIT cache (rgpud's sessions run without one) and on time
// (ptxas prints its compile time), so stdout, which the native and rgpu
// runs compare, keeps only what every run shares.  On the fake GPU they
// are checked against what it writes.
static void print_log(const char *what, const char *log)
{
    if (fake)
        return;
    const char *p = log;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "%s| %.*s\n", what, len, p);
        p += len + (nl ? 1 : 0);
    }
}

// Each log a string inside its buffer (the driver caps them there, the NUL
// included).  What the driver wrote besides (the sizes, the wall time) is
// its own business: printed on a GPU, checked exactly on the fake GPU.
static void check_logs(const struct jit *j, const char *what)
{
    char name[160];
    check(log_ok(j->info, j->info_cap), fmt_name(name, sizeof name, "%s: info log inside its buffer", what),
          "no NUL in its %u bytes", j->info_cap);
    check(log_ok(j->error, LOG_SIZE), fmt_name(name, sizeof name, "%s: error log inside its buffer", what),
          "no NUL in its %u bytes", LOG_SIZE);
    if (fake)
        return;
    fprintf(stderr, "info: %s: log sizes written %u and %u\n", what, written(j, INFO_SIZE),
            written(j, ERROR_SIZE));
    printf("info: %s: wall time written: %s\n", what, wall_time(j) >= 0.0f ? "yes" : "no");
    print_log("info log", log_ok(j->info, j->info_cap) ? j->info : "");
    print_log("error log", log_ok(j->error, LOG_SIZE) ? j->error : "");
}

// On the fake GPU, a log must be exactly `want` and its size the bytes used.
static void check_fake_log(const char *log, unsigned size_written, const char *want, const char *name)
{
    if (!fake)
        return;
    char n[200];
    check(strcmp(log, want) == 0, fmt_name(n, sizeof n, "%s: the fake GPU's lines", name),
          "got \"%s\", want \"%s\"", log, want);
    check(size_written == strlen(want) + 1, fmt_name(n, sizeof n, "%s: size used written", name),
          "%u, want %zu", size_written, strlen(want) + 1);
}

// ---- running the linked kernel -----------------------------------------------------

// Loads image, runs k_jit_scale over x = 0..N-1 and checks y = 2x + 1.
static void run_linked(const void *image, const char *what)
{
    CUmodule mod;
    CUfunction f;
    CUdeviceptr x, y;
    float h[N];
    char name[160];

    if (!check_cu(cuModuleLoadData(&mod, image), fmt_name(name, sizeof name, "%s: cuModuleLoadData", what)) ||
        !check_cu(cuModuleGetFunction(&f, mod, "k_jit_scale"),
                  fmt_name(name, sizeof name, "%s: cuModuleGetFunction k_jit_scale", what)))
        return;
    if (!check_cu(cuMemAlloc(&x, sizeof h), "cuMemAlloc x") || !check_cu(cuMemAlloc(&y, sizeof h), "cuMemAlloc y"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = (float)i;
    check_cu(cuMemcpyHtoD(x, h, sizeof h), "cuMemcpyHtoD x");
    int n = N;
    void *params[] = {&y, &x, &n};
    check_cu(cuLaunchKernel(f, (N + THREADS - 1) / THREADS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             fmt_name(name, sizeof name, "%s: cuLaunchKernel k_jit_scale", what));
    memset(h, 0, sizeof h);
    check_cu(cuMemcpyDtoH(h, y, sizeof h), "cuMemcpyDtoH y");
    int i = 0;
    while (i < N && h[i] == 2.0f * (float)i + 1.0f)
        i++;
    check(i == N, fmt_name(name, sizeof name, "%s: y = 2x + 1", what), "y[%d] = %g", i, i < N ? h[i] : 0.0f);
    check_cu(cuMemFree(x), "cuMemFree x");
    check_cu(cuMemFree(y), "cuMemFree y");
    check_cu(cuModuleUnload(mod), fmt_name(name, sizeof name, "%s: cuModuleUnload", what));
}

// ---- linking -----------------------------------------------------------------------

struct input {
    CUjitInputType type;
    const unsigned char *bytes;
    size_t size;
    const char *name;
    const char *kind;       // the fake's word for it
};

static const struct input KERNEL_CUBIN = {CU_JIT_INPUT_CUBIN, jit_kernel_cubin, sizeof jit_kernel_cubin,
                                          "jit_kernel.cubin", "cubin"};
static const struct input KERNEL_PTX = {CU_JIT_INPUT_PTX, jit_kernel_ptx, sizeof jit_kernel_ptx,
                                        "jit_kernel.ptx", "PTX"};
static const struct input DEVICE_CUBIN = {CU_JIT_INPUT_CUBIN, jit_device_cubin, sizeof jit_device_cubin,
                                          "jit_device.cubin", "cubin"};
static const struct input DEVICE_FATBIN = {CU_JIT_INPUT_FATBINARY, jit_device_fatbin,
                                           sizeof jit_device_fatbin, "jit_device.fatbin", "fatbin"};

static CUresult add(CUlinkState st, const struct input *in)
{
    void *data = copy_of(in->bytes, in->size);
    // PTX is a string: its size counts the NUL.
    size_t size = in->type == CU_JIT_INPUT_PTX ? in->size + 1 : in->size;
    CUresult r = cuLinkAddData(st, in->type, data, size, in->name, 0, NULL, NULL);
    free(data);
    return r;
}

// The info log the fake GPU writes for inputs a and b linked into size bytes.
static void fake_link_log(char *buf, size_t cap, const struct input *a, const struct input *b,
                          size_t size)
{
    snprintf(buf, cap,
             "fakegpu link: added %s '%s' (%zu bytes)\n"
             "fakegpu link: added %s '%s' (%zu bytes)\n"
             "fakegpu link: linked 2 inputs into a fatbin of %zu bytes\n",
             a->kind, a->name, a->size, b->kind, b->name, b->size, size);
}

// a and b linked; the result loaded and run.  A PTX input on the fake GPU
// must fail, saying why in the error log.
static void test_link(const struct input *a, const struct input *b)
{
    struct jit j;
    CUlinkState st;
    char what[160], want[1024];
    snprintf(what, sizeof what, "link %s + %s", a->name, b->name);

    jit_init(&j, LOG_SIZE);
    char name[200];
    if (!check_cu(cuLinkCreate(NOPTS, j.opt, j.val, &st), fmt_name(name, sizeof name, "%s: cuLinkCreate", what)))
        return;
    CUresult r = add(st, a);
    if (fake && a->type == CU_JIT_INPUT_PTX) {
        check_cu_is(r, CUDA_ERROR_NOT_SUPPORTED, fmt_name(name, sizeof name, "%s: cuLinkAddData PTX", what));
        snprintf(want, sizeof want,
                 "fakegpu link: cannot compile PTX '%s': the fake GPU has no JIT compiler\n", a->name);
        check_fake_log(j.error, written(&j, ERROR_SIZE), want, what);
        check_cu(cuLinkDestroy(st), fmt_name(name, sizeof name, "%s: cuLinkDestroy", what));
        return;
    }
    check_cu(r, fmt_name(name, sizeof name, "%s: cuLinkAddData %s", what, a->name));
    check_cu(add(st, b), fmt_name(name, sizeof name, "%s: cuLinkAddData %s", what, b->name));
    void *cubin = NULL;
    size_t size = 0;
    if (check_cu(cuLinkComplete(st, &cubin, &size), fmt_name(name, sizeof name, "%s: cuLinkComplete", what)))
        check(cubin && size > 0, fmt_name(name, sizeof name, "%s: an image", what), "%p, %zu bytes", cubin, size);
    check_logs(&j, what);
    if (fake)
        check(wall_time(&j) >= 0.0f, fmt_name(name, sizeof name, "%s: wall time written", what), "%g",
              wall_time(&j));
    fake_link_log(want, sizeof want, a, b, size);
    check_fake_log(j.info, written(&j, INFO_SIZE), want, what);
    check_fake_log(j.error, written(&j, ERROR_SIZE), "", "link error log");
    if (cubin) {
        // The image lives until cuLinkDestroy: load it from a copy, as the
        // driver copies what it loads.
        void *image = copy_of((const unsigned char *)cubin, size);
        run_linked(image, what);
        free(image);
    }
    check_cu(cuLinkDestroy(st), fmt_name(name, sizeof name, "%s: cuLinkDestroy", what));
}

// The info log cut to 24 bytes: 23 characters and a NUL.
static void test_truncated_log(void)
{
    struct jit j;
    CUlinkState st;
    void *cubin;
    size_t size = 0;
    char want[1024];

    jit_init(&j, 24);
    if (!check_cu(cuLinkCreate(NOPTS, j.opt, j.val, &st), "small log: cuLinkCreate"))
        return;
    check_cu(add(st, &KERNEL_CUBIN), "small log: cuLinkAddData");
    check_cu(add(st, &DEVICE_FATBIN), "small log: cuLinkAddData");
    check_cu(cuLinkComplete(st, &cubin, &size), "small log: cuLinkComplete");
    check(log_ok(j.info, 24), "small log: the info log fits its 24 bytes", "no NUL in them");
    if (!fake)
        printf("info: small log: size written %u\n", written(&j, INFO_SIZE));
    print_log("small info log", log_ok(j.info, 24) ? j.info : "");
    fake_link_log(want, sizeof want, &KERNEL_CUBIN, &DEVICE_FATBIN, size);
    want[23] = 0;
    check_fake_log(j.info, written(&j, INFO_SIZE), want, "small log");
    check_cu(cuLinkDestroy(st), "small log: cuLinkDestroy");
}

// Bytes that are no cubin: refused, with an error log.
static void test_bad_input(void)
{
    struct jit j;
    CUlinkState st;
    unsigned char junk[256];
    void *cubin;
    size_t size;

    memset(junk, 0x5a, sizeof junk);
    jit_init(&j, LOG_SIZE);
    if (!check_cu(cuLinkCreate(NOPTS, j.opt, j.val, &st), "bad input: cuLinkCreate"))
        return;
    CUresult r = cuLinkAddData(st, CU_JIT_INPUT_CUBIN, junk, sizeof junk, "junk.cubin", 0, NULL, NULL);
    if (r == CUDA_SUCCESS)
        r = cuLinkComplete(st, &cubin, &size);
    check(r != CUDA_SUCCESS, "bad input: refused", "it linked");
    // The driver's own verdict and words, for the native and rgpu runs to agree on.
    printf("info: bad input -> %s\n", err_name(r));
    check_logs(&j, "bad input");
    check_fake_log(j.error, written(&j, ERROR_SIZE),
                   "fakegpu link: 'junk.cubin' is not a cubin the fake GPU can read\n", "bad input");
    check_cu(cuLinkDestroy(st), "bad input: cuLinkDestroy");
}

// cuLinkAddFile: the file is read where the program runs.
static void test_add_file(void)
{
    char path[] = "/tmp/rgpu-jit-link-XXXXXX";
    int fd = mkstemp(path);
    if (!check(fd >= 0, "add file: a temporary file", "mkstemp failed"))
        return;
    bool wrote = write(fd, jit_kernel_cubin, sizeof jit_kernel_cubin) == (ssize_t)sizeof jit_kernel_cubin;
    close(fd);
    check(wrote, "add file: cubin written", "short write");

    struct jit j;
    CUlinkState st;
    void *cubin = NULL;
    size_t size = 0;
    jit_init(&j, LOG_SIZE);
    if (check_cu(cuLinkCreate(NOPTS, j.opt, j.val, &st), "add file: cuLinkCreate")) {
        check_cu(cuLinkAddFile(st, CU_JIT_INPUT_CUBIN, path, 0, NULL, NULL), "add file: cuLinkAddFile");
        check_cu(add(st, &DEVICE_CUBIN), "add file: cuLinkAddData");
        check_cu_is(cuLinkAddFile(st, CU_JIT_INPUT_CUBIN, "/nonexistent/rgpu.cubin", 0, NULL, NULL),
                    CUDA_ERROR_FILE_NOT_FOUND, "add file: a file that does not exist");
        if (check_cu(cuLinkComplete(st, &cubin, &size), "add file: cuLinkComplete")) {
            void *image = copy_of((const unsigned char *)cubin, size);
            run_linked(image, "add file");
            free(image);
        }
        if (fake) {
            char want[600];
            snprintf(want, sizeof want, "fakegpu link: added cubin '%s' (%zu bytes)\n", path,
                     sizeof jit_kernel_cubin);
            check(strncmp(j.info, want, strlen(want)) == 0, "add file: the log names the file",
                  "\"%s\"", j.info);
        }
        check_cu(cuLinkDestroy(st), "add file: cuLinkDestroy");
    }
    unlink(path);
}

// ---- loading with JIT options ---------------------------------------------------------

// k_axpy of a loaded module: y = 3x + y.
static void run_axpy(CUfunction f, const char *what)
{
    CUdeviceptr x, y;
    float h[N];
    char name[160];
    if (!check_cu(cuMemAlloc(&x, sizeof h), "cuMemAlloc x") || !check_cu(cuMemAlloc(&y, sizeof h), "cuMemAlloc y"))
        return;
    for (int i = 0; i < N; i++)
        h[i] = (float)i;
    check_cu(cuMemcpyHtoD(x, h, sizeof h), "cuMemcpyHtoD x");
    check_cu(cuMemcpyHtoD(y, h, sizeof h), "cuMemcpyHtoD y");
    float a = 3.0f;
    int n = N;
    void *params[] = {&a, &x, &y, &n};
    check_cu(cuLaunchKernel(f, (N + THREADS - 1) / THREADS, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL),
             fmt_name(name, sizeof name, "%s: cuLaunchKernel k_axpy", what));
    check_cu(cuMemcpyDtoH(h, y, sizeof h), "cuMemcpyDtoH y");
    int i = 0;
    while (i < N && h[i] == 4.0f * (float)i)
        i++;
    check(i == N, fmt_name(name, sizeof name, "%s: y = 3x + y", what), "y[%d] = %g", i, i < N ? h[i] : 0.0f);
    check_cu(cuMemFree(x), "cuMemFree x");
    check_cu(cuMemFree(y), "cuMemFree y");
}

static void test_load_ex(void)
{
    struct jit j;
    CUmodule mod;
    CUfunction f;

    jit_init(&j, LOG_SIZE);
    void *fatbin = copy_of(kernels_fatbin, sizeof kernels_fatbin);
    if (check_cu(cuModuleLoadDataEx(&mod, fatbin, NOPTS, j.opt, j.val), "cuModuleLoadDataEx fatbin")) {
        check_logs(&j, "cuModuleLoadDataEx fatbin");
        check_fake_log(j.info, written(&j, INFO_SIZE),
                       "fakegpu: loaded the module's cubin, nothing to compile\n", "cuModuleLoadDataEx fatbin");
        if (check_cu(cuModuleGetFunction(&f, mod, AXPY), "cuModuleLoadDataEx fatbin: k_axpy"))
            run_axpy(f, "cuModuleLoadDataEx fatbin");
        check_cu(cuModuleUnload(mod), "cuModuleUnload");
    }
    free(fatbin);

    jit_init(&j, LOG_SIZE);
    void *ptx = copy_of(kernels_ptx, sizeof kernels_ptx);
    CUresult r = cuModuleLoadDataEx(&mod, ptx, NOPTS, j.opt, j.val);
    if (fake) {
        check_cu_is(r, CUDA_ERROR_NOT_SUPPORTED, "cuModuleLoadDataEx PTX on the fake GPU");
        check_fake_log(j.error, written(&j, ERROR_SIZE),
                       "fakegpu: cannot compile PTX: the fake GPU has no JIT compiler\n",
                       "cuModuleLoadDataEx PTX");
    } else if (check_cu(r, "cuModuleLoadDataEx PTX")) {
        check_logs(&j, "cuModuleLoadDataEx PTX");
        if (check_cu(cuModuleGetFunction(&f, mod, AXPY), "cuModuleLoadDataEx PTX: k_axpy"))
            run_axpy(f, "cuModuleLoadDataEx PTX");
        check_cu(cuModuleUnload(mod), "cuModuleUnload");
    }
    free(ptx);
}

// cuLibraryLoadData with JIT options and CU_LIBRARY_BINARY_IS_PRESERVED
// (the image is kept until the unload, as the option promises).
static void test_library(void)
{
    struct jit j;
    CUlibrary lib;
    CUkernel k;
    CUlibraryOption lopt[] = {CU_LIBRARY_BINARY_IS_PRESERVED};
    void *lval[] = {(void *)(uintptr_t)1};

    jit_init(&j, LOG_SIZE);
    void *fatbin = copy_of(kernels_fatbin, sizeof kernels_fatbin);
    if (check_cu(cuLibraryLoadData(&lib, fatbin, j.opt, j.val, NOPTS, lopt, lval, 1),
                 "cuLibraryLoadData with options")) {
        check_logs(&j, "cuLibraryLoadData");
        check_fake_log(j.info, written(&j, INFO_SIZE),
                       "fakegpu: loaded the module's cubin, nothing to compile\n", "cuLibraryLoadData");
        if (check_cu(cuLibraryGetKernel(&k, lib, FILL), "cuLibraryGetKernel k_fill_u32")) {
            CUdeviceptr d;
            uint32_t h[N], v = 0xfeed0001;
            unsigned long long n = N;
            void *params[] = {&d, &v, &n};
            check_cu(cuMemAlloc(&d, sizeof h), "cuMemAlloc d");
            check_cu(cuLaunchKernel((CUfunction)k, (N + THREADS - 1) / THREADS, 1, 1, THREADS, 1, 1, 0, NULL,
                                    params, NULL),
                     "cuLibraryLoadData: cuLaunchKernel k_fill_u32");
            check_cu(cuMemcpyDtoH(h, d, sizeof h), "cuMemcpyDtoH d");
            int i = 0;
            while (i < N && h[i] == v)
                i++;
            check(i == N, "cuLibraryLoadData: k_fill_u32 filled", "h[%d] = 0x%x", i, i < N ? h[i] : 0);
            check_cu(cuMemFree(d), "cuMemFree d");
        }
        check_cu(cuLibraryUnload(lib), "cuLibraryUnload");
    }
    free(fatbin);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    char devname[256] = "";

    if (!check_cu(cuInit(0), "cuInit") || !check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !check_cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
        return 1;
    cuDeviceGetName(devname, sizeof devname, dev);
    fake = strstr(devname, "rgpu fake GPU") != NULL;
    if (fake)
        printf("info: the fake GPU: PTX inputs fail, the logs are its own\n");

    test_link(&KERNEL_CUBIN, &DEVICE_FATBIN);
    test_link(&KERNEL_CUBIN, &DEVICE_CUBIN);
    test_link(&KERNEL_PTX, &DEVICE_CUBIN);
    test_truncated_log();
    test_bad_input();
    test_add_file();
    test_load_ex();
    test_library();

    check_cu(cuCtxSetCurrent(NULL), "cuCtxSetCurrent NULL");
    check_cu(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
    return check_exit_status();
}
