// Self-test of the fake GPU's device printf and assert (printf.c), without
// rgpu in between:
//
//   fakegpu-printf-selftest <path of the fake libcudart.so.N> <device_output.cubin>
//
// Runs the kernels of tests/progs/device_output.cuh with this process's
// fds 1 and 2 pointed at files, and checks what appears there after each
// call: nothing at a launch of its own, the kernel's lines at each call
// where the driver prints (the next launch's start, synchronises, a
// blocking copy, a library unload, a device reset), the oldest records gone
// when a kernel prints more than the buffer holds, and an assert's message
// on stderr at the synchronise that fails with cudaErrorAssert, sticky
// until the reset.  Check lines go to the original stdout.
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUNCS(X)                                                              \
    X(cudaMalloc) X(cudaMemcpy) X(cudaMemcpyAsync) X(cudaDeviceSynchronize)   \
    X(cudaDeviceReset) X(cudaStreamCreate) X(cudaStreamSynchronize)           \
    X(cudaEventCreate) X(cudaEventRecord) X(cudaEventSynchronize)             \
    X(cudaGetErrorName) X(cudaLibraryLoadData) X(cudaLibraryUnload)           \
    X(cudaLibraryGetKernel) X(cudaLaunchKernel)

#define DECLARE(f) static __typeof__(&f) p_##f;
FUNCS(DECLARE)

static FILE *report;            // the original stdout
static int failures;

__attribute__((format(printf, 2, 3)))
static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    fprintf(report, "%s ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vfprintf(report, fmt, ap);
    va_end(ap);
    fputc('\n', report);
    fflush(report);
    if (!ok)
        failures++;
}

static void check_err(cudaError_t got, cudaError_t want, const char *what)
{
    check(got == want, "%s -> %s (got %s)", what, p_cudaGetErrorName(want),
          p_cudaGetErrorName(got));
}

// ---- What fds 1 and 2 received ------------------------------------------------------------

static struct capture {
    int fd;                 // the file behind fd 1 or 2
    off_t seen;
    char *text;             // what came since the last look
} out = { -1, 0, NULL }, err = { -1, 0, NULL };

static void capture(struct capture *c, int target)
{
    FILE *f = tmpfile();

    if (!f || (c->fd = dup(fileno(f))) < 0 || dup2(c->fd, target) < 0) {
        perror("capture");
        exit(1);
    }
    fclose(f);
}

// What came to c's descriptor since the last call (a string, reused).
static const char *since(struct capture *c)
{
    off_t end;

    fflush(stdout);
    fflush(stderr);
    end = lseek(c->fd, 0, SEEK_END);
    free(c->text);
    c->text = calloc(1, (size_t)(end - c->seen) + 1);
    if (!c->text || pread(c->fd, c->text, (size_t)(end - c->seen), c->seen) != end - c->seen) {
        perror("reading the capture");
        exit(1);
    }
    c->seen = end;
    return c->text;
}

// One check line; what differs, on lines of its own.
static void expect_text(struct capture *c, const char *want, const char *what)
{
    const char *got = since(c);
    check(!strcmp(got, want), "%s", what);
    if (strcmp(got, want))
        fprintf(report, "  wanted: '%s'\n  got:    '%s'\n", want, got);
}

static void expect_out(const char *want, const char *when)
{
    char what[160];
    snprintf(what, sizeof what, "stdout %s", when);
    expect_text(&out, want, what);
}

// ---- Kernels ----------------------------------------------------------------------------------

static cudaKernel_t kernel(cudaLibrary_t lib, const char *name)
{
    cudaKernel_t k = NULL;

    check(p_cudaLibraryGetKernel(&k, lib, name) == cudaSuccess, "cudaLibraryGetKernel %s", name);
    return k;
}

static cudaError_t launch(cudaKernel_t k, unsigned grid, unsigned block, void **args,
                          cudaStream_t s)
{
    return p_cudaLaunchKernel((const void *)k, (dim3){ grid, 1, 1 }, (dim3){ block, 1, 1 },
                              args, 0, s);
}

static cudaError_t print(cudaKernel_t k, int tag, cudaStream_t s)
{
    int value = tag * 10;
    void *args[] = { &tag, &value };
    return launch(k, 1, 1, args, s);
}

static char *line(int tag)
{
    static char buf[128];
    snprintf(buf, sizeof buf,
             "k_print %d: block [0,0,0] thread [0,0,0] of grid 1 block 1: value %d\n", tag,
             tag * 10);
    return buf;
}

// Where the driver prints: the next launch, the synchronises, a blocking
// copy, not an asynchronous one.
static void test_flush_points(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z7k_printii");
    int tag = 1, value = 11, *d = NULL, x = 0;
    void *args[] = { &tag, &value };
    cudaStream_t s = NULL;
    cudaEvent_t e = NULL;

    check_err(launch(k, 2, 3, args, NULL), cudaSuccess, "launch k_print");
    expect_out("", "after the launch");
    check_err(p_cudaDeviceSynchronize(), cudaSuccess, "cudaDeviceSynchronize");
    expect_out("k_print 1: block [1,0,0] thread [2,0,0] of grid 2 block 3: value 11\n",
               "after cudaDeviceSynchronize");

    print(k, 2, NULL);
    expect_out("", "after a second launch");
    print(k, 3, NULL);
    expect_out(line(2), "after a third launch (its start prints the second's)");
    p_cudaDeviceSynchronize();
    expect_out(line(3), "after cudaDeviceSynchronize");

    check_err(p_cudaStreamCreate(&s), cudaSuccess, "cudaStreamCreate");
    check_err(p_cudaMalloc((void **)&d, sizeof *d), cudaSuccess, "cudaMalloc");
    print(k, 4, s);
    check_err(p_cudaMemcpyAsync(&x, d, sizeof x, cudaMemcpyDeviceToHost, s), cudaSuccess,
              "cudaMemcpyAsync");
    expect_out("", "after cudaMemcpyAsync");
    check_err(p_cudaStreamSynchronize(s), cudaSuccess, "cudaStreamSynchronize");
    expect_out(line(4), "after cudaStreamSynchronize");

    check_err(p_cudaEventCreate(&e), cudaSuccess, "cudaEventCreate");
    print(k, 5, s);
    p_cudaEventRecord(e, s);
    check_err(p_cudaEventSynchronize(e), cudaSuccess, "cudaEventSynchronize");
    expect_out(line(5), "after cudaEventSynchronize");

    print(k, 6, NULL);
    check_err(p_cudaMemcpy(&x, d, sizeof x, cudaMemcpyDeviceToHost), cudaSuccess, "cudaMemcpy");
    expect_out(line(6), "after cudaMemcpy");
}

// A kernel printing more than the buffer holds: the oldest records go.
static void test_overflow(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z7k_linesi");
    int n = 40000;
    void *args[] = { &n };
    // Each record: 5 bytes of head and a line of 29; the buffer is 1 MiB.
    int kept = (1 << 20) / (5 + 29), first = n - kept, lines = 0, got_first = -1, got_last = -1;

    check_err(launch(k, 1, 1, args, NULL), cudaSuccess, "launch k_lines 40000");
    p_cudaDeviceSynchronize();
    const char *text = since(&out);
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
        int i;
        if (sscanf(p, "k_lines: line %d of 40000", &i) == 1) {
            if (got_first < 0)
                got_first = i;
            if (got_last >= 0 && i != got_last + 1)
                break;
            got_last = i;
            lines++;
        }
        if (!strchr(p, '\n'))
            break;
    }
    check(lines == kept && got_first == first && got_last == n - 1,
          "the newest %d of %d lines kept, in order (got %d, from %d to %d)", kept, n, lines,
          got_first, got_last);
}

static void test_formats(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z9k_formatsijxdfc");
    int i = -42;
    unsigned u = 3735928559u;
    long long ll = -1234567890123LL;
    double d = 3.14159265;
    float f = 0.5f;
    char c = 'Z';
    void *args[] = { &i, &u, &ll, &d, &f, &c };

    launch(k, 1, 1, args, NULL);
    p_cudaDeviceSynchronize();
    expect_out("k_formats: -42 3735928559 deadbeef -1234567890123 3.142 3.14e+00 0.5 Z text"
               "   -42|-42  |\n", "k_formats");
}

// A library unload and a device reset print what is left.
static void test_unload_and_reset(cudaLibrary_t *lib, const void *image)
{
    cudaKernel_t k = kernel(*lib, "_Z7k_printii");

    print(k, 7, NULL);
    check_err(p_cudaLibraryUnload(*lib), cudaSuccess, "cudaLibraryUnload");
    expect_out(line(7), "after cudaLibraryUnload");
    check_err(p_cudaLibraryLoadData(lib, image, NULL, NULL, 0, NULL, NULL, 0), cudaSuccess,
              "cudaLibraryLoadData again");
    k = kernel(*lib, "_Z7k_printii");
    print(k, 8, NULL);
    check_err(p_cudaDeviceReset(), cudaSuccess, "cudaDeviceReset");
    expect_out(line(8), "after cudaDeviceReset");
}

static void test_assert(cudaLibrary_t lib)
{
    cudaKernel_t k = kernel(lib, "_Z8k_asserti");
    int bad = 6;
    void *args[] = { &bad };
    void *p = NULL;

    check_err(launch(k, 2, 4, args, NULL), cudaSuccess, "launch k_assert");
    check(!*since(&err), "nothing on stderr after the launch");
    check_err(p_cudaDeviceSynchronize(), cudaErrorAssert, "cudaDeviceSynchronize after it");
    expect_out("k_assert: thread 6 is about to fail its assert\n", "after the assert");
    expect_text(&err, "device_output.cuh:44: void k_assert(int): block: [1,0,0], "
                      "thread: [2,0,0] Assertion `v != bad` failed.\n",
                "stderr: CUDA's assert message");
    check_err(p_cudaMalloc(&p, 16), cudaErrorAssert, "cudaMalloc after it (sticky)");
    check_err(p_cudaDeviceSynchronize(), cudaErrorAssert, "cudaDeviceSynchronize again");
    check(!*since(&err), "the message only once");
    check_err(p_cudaDeviceReset(), cudaSuccess, "cudaDeviceReset");
    check_err(p_cudaMalloc(&p, 16), cudaSuccess, "cudaMalloc after the reset");
}

int main(int argc, char **argv)
{
    cudaLibrary_t lib = NULL;
    void *h, *image;
    FILE *f;
    long n;

    if (argc != 3) {
        fprintf(stderr, "usage: %s libcudart.so.N device_output.cubin\n", argv[0]);
        return 2;
    }
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
#define RESOLVE(fn)                                                    \
    *(void **)&p_##fn = dlsym(h, #fn);                                 \
    if (!p_##fn) {                                                     \
        fprintf(stderr, "%s missing from the fake libraries\n", #fn); \
        return 1;                                                      \
    }
    FUNCS(RESOLVE)
    f = fopen(argv[2], "rb");
    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) ||
        !(image = malloc((size_t)n)) || fread(image, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);

    report = fdopen(dup(STDOUT_FILENO), "w");
    capture(&out, STDOUT_FILENO);
    capture(&err, STDERR_FILENO);
    check_err(p_cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), cudaSuccess,
              "cudaLibraryLoadData");
    test_flush_points(lib);
    test_overflow(lib);
    test_formats(lib);
    test_unload_and_reset(&lib, image);
    test_assert(lib);
    fprintf(report, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
