// One module whose kernels differ in whether they print (printf_mates.cuh),
// launched through the runtime and, loaded from the same source compiled
// into an LZ4-compressed fatbin, through the driver API
// (cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel):
//
//   printf_step                        what the kernels print, in order with the host's lines
//   printf_step STEPS [driver] [big]   one kernel prints, then STEPS training-like steps
//                                      launch only its silent module mates
//
// Without arguments the output is the same natively and through rgpu
// (tests/gpu/run.sh compares; tests/printf-lazy.sh under RGPU_SYNC=lazy
// and strict): each kernel's line comes before the host's line printed
// after the call that synchronised with it (a stream, event, context or
// device synchronise, a copy to the host, a stream synchronise that
// covers it through an event).
//
// With STEPS, tests/step-roundtrips.sh runs it for two step counts under
// RGPU_STATS=1: after the one kernel that printed, a step copies a batch
// in (cudaMemcpyAsync or cuMemcpyHtoDAsync, and a stream synchronise),
// launches pm_mate and pm_finite (an assert, no printf), copies on the
// device and synchronises an event, and every tenth step reads the loss.
// Only the loss reads may wait: the module holds a kernel that prints, but
// none of those launched since the last synchronise can.  `big`: each step
// also copies pageable batches of 32 KiB, 1 MiB (with cudaMemcpy) and
// 64 MiB (cudaMemcpyAsync) in, as a data loader's images: copies to the
// device of any size go without waiting too (what bounds them is how far
// rgpu may run ahead, RGPU_AHEAD_MB).
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "printf_mates.cuh"
#include "printf_mates_fatbin.h"    // generated: const unsigned char printf_mates_fatbin[]

#define N 256
#define BIG_BATCHES 3

static const size_t big_bytes[BIG_BATCHES] = { 32 << 10, 1 << 20, 64 << 20 };

static void host(const char *what)
{
    printf("host: %s\n", what);
    fflush(stdout);
}

// The module of printf_mates.cuh loaded through the driver, its functions.
struct driver_module {
    CUmodule module;
    CUfunction print, via, mate, finite;
};

static bool driver_load(struct driver_module *d)
{
    return check_cu(cuModuleLoadData(&d->module, printf_mates_fatbin), "cuModuleLoadData") &&
           check_cu(cuModuleGetFunction(&d->print, d->module, "_Z8pm_printii"),
                    "cuModuleGetFunction pm_print") &&
           check_cu(cuModuleGetFunction(&d->via, d->module, "_Z6pm_viaii"),
                    "cuModuleGetFunction pm_via") &&
           check_cu(cuModuleGetFunction(&d->mate, d->module, "_Z7pm_matefPKfPfi"),
                    "cuModuleGetFunction pm_mate") &&
           check_cu(cuModuleGetFunction(&d->finite, d->module, "_Z9pm_finitePKfi"),
                    "cuModuleGetFunction pm_finite");
}

static CUresult driver_tagged(CUfunction f, int tag, int value, CUstream s)
{
    void *args[] = { &tag, &value };
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

// ---- what the kernels print, in order ----------------------------------------------

static int show(void)
{
    cudaStream_t s, other;
    cudaEvent_t e;
    float *x = NULL, y = 0.0f;
    struct driver_module d;

    if (!check_cuda(cudaStreamCreate(&s), "cudaStreamCreate") ||
        !check_cuda(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags") ||
        !check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags") ||
        !check_cuda(cudaMalloc(&x, N * sizeof *x), "cudaMalloc") ||
        !check_cuda(cudaMemset(x, 0, N * sizeof *x), "cudaMemset"))
        return 1;

    host("before the kernels");
    pm_print<<<2, 32, 0, s>>>(1, 10);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after pm_print");
    host("after pm_print");

    pm_via<<<1, 32, 0, s>>>(2, 20);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after pm_via");
    host("after pm_via, which prints through a device function");

    pm_mate<<<1, N, 0, s>>>(1.0f, x, x, N);
    pm_finite<<<1, N, 0, s>>>(x, N);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after the silent kernels");
    host("after the silent kernels");

    pm_print<<<1, 1>>>(3, 30);
    check_cuda(cudaMemcpy(&y, x, sizeof y, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
    host("after a copy to the host");

    pm_print<<<1, 1, 0, s>>>(4, 40);
    check_cuda(cudaEventRecord(e, s), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(other, e, 0), "cudaStreamWaitEvent");
    check_cuda(cudaStreamSynchronize(other), "cudaStreamSynchronize of a stream waiting for it");
    host("after a synchronise of another stream that waited for it");

    pm_print<<<1, 1, 0, s>>>(5, 50);
    check_cuda(cudaEventRecord(e, s), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(e), "cudaEventSynchronize");
    host("after cudaEventSynchronize");

    if (!driver_load(&d))
        return 1;
    check_cu(driver_tagged(d.print, 6, 60, (CUstream)s), "cuLaunchKernel pm_print");
    check_cu(cuStreamSynchronize((CUstream)s), "cuStreamSynchronize");
    host("after the driver's pm_print");
    check_cu(driver_tagged(d.via, 7, 70, (CUstream)s), "cuLaunchKernel pm_via");
    check_cu(cuCtxSynchronize(), "cuCtxSynchronize");
    host("after the driver's pm_via");
    check_cu(cuModuleUnload(d.module), "cuModuleUnload");

    pm_print<<<1, 1, 0, other>>>(8, 80);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    host("done");

    check_cuda(cudaEventDestroy(e), "cudaEventDestroy");
    check_cuda(cudaStreamDestroy(other), "cudaStreamDestroy");
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_cuda(cudaFree(x), "cudaFree");
    return check_failures ? 1 : 0;
}

// ---- steps that launch only the silent kernels -----------------------------------------

struct model {
    cudaStream_t stream;
    cudaEvent_t done;
    float *x, *w, *y, *g, *loss;
    int driver;
    struct driver_module d;
    int big;
    unsigned char *big_host[BIG_BATCHES];   // pageable
    void *big_dev[BIG_BATCHES];
};

static bool setup_big(struct model *m)
{
    bool ok = true;
    for (int i = 0; ok && i < BIG_BATCHES; i++) {
        m->big_host[i] = (unsigned char *)malloc(big_bytes[i]);
        ok = check(m->big_host[i] != NULL, "malloc a batch", "out of memory") &&
             check_cuda(cudaMalloc(&m->big_dev[i], big_bytes[i]), "cudaMalloc a batch");
        if (ok)
            memset(m->big_host[i], i + 1, big_bytes[i]);
    }
    return ok;
}

// The big batches of step s, on their way before the stream synchronise
// of x's batch.
static cudaError_t big_batches_in(struct model *m, int s)
{
    cudaError_t e = cudaSuccess;
    for (int i = 0; !e && i < BIG_BATCHES; i++) {
        m->big_host[i][0] = (unsigned char)s;   // a new batch, as far as anyone can tell
        e = i == 1 ? cudaMemcpy(m->big_dev[i], m->big_host[i], big_bytes[i],
                                cudaMemcpyHostToDevice)
                   : cudaMemcpyAsync(m->big_dev[i], m->big_host[i], big_bytes[i],
                                     cudaMemcpyHostToDevice, m->stream);
    }
    return e;
}

static bool setup(struct model *m)
{
    bool ok = check_cuda(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking),
                         "stream") &&
              check_cuda(cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming), "event");
    float **bufs[] = { &m->x, &m->w, &m->y, &m->g, &m->loss };
    for (unsigned i = 0; ok && i < sizeof bufs / sizeof bufs[0]; i++)
        ok = check_cuda(cudaMalloc((void **)bufs[i], N * sizeof(float)), "cudaMalloc") &&
             check_cuda(cudaMemset(*bufs[i], 0, N * sizeof(float)), "cudaMemset");
    if (ok && m->driver)
        ok = driver_load(&m->d);
    if (ok && m->big)
        ok = setup_big(m);
    if (ok) {
        float w[N];
        for (int i = 0; i < N; i++)
            w[i] = (float)((i * 37) % 17) / 64.0f - 0.125f;
        ok = check_cuda(cudaMemcpy(m->w, w, sizeof w, cudaMemcpyHostToDevice), "weights");
    }
    // The module's printing kernel runs once; its line comes at the
    // synchronise, which waits.  The steps after it launch none.
    if (ok && m->driver)
        ok = check_cu(driver_tagged(m->d.print, 0, 0, (CUstream)m->stream), "pm_print");
    else if (ok)
        pm_print<<<1, 32, 0, m->stream>>>(0, 0);
    return ok && check_cuda(cudaStreamSynchronize(m->stream), "cudaStreamSynchronize");
}

static cudaError_t mate(struct model *m, float a, const float *x, float *y)
{
    int n = N;
    void *args[] = { &a, &x, &y, &n };
    if (m->driver)
        return (cudaError_t)cuLaunchKernel(m->d.mate, 1, 1, 1, N, 1, 1, 0, (CUstream)m->stream,
                                           args, NULL);
    pm_mate<<<1, N, 0, m->stream>>>(a, x, y, n);
    return cudaGetLastError();
}

static cudaError_t finite(struct model *m, const float *x)
{
    int n = N;
    void *args[] = { &x, &n };
    if (m->driver)
        return (cudaError_t)cuLaunchKernel(m->d.finite, 1, 1, 1, N, 1, 1, 0,
                                           (CUstream)m->stream, args, NULL);
    pm_finite<<<1, N, 0, m->stream>>>(x, n);
    return cudaGetLastError();
}

static cudaError_t batch_in(struct model *m, const float *batch, size_t bytes)
{
    if (m->driver) {
        CUresult r = cuMemcpyHtoDAsync((CUdeviceptr)m->x, batch, bytes, (CUstream)m->stream);
        return (cudaError_t)(r ? r : cuStreamSynchronize((CUstream)m->stream));
    }
    cudaError_t e = cudaMemcpyAsync(m->x, batch, bytes, cudaMemcpyHostToDevice, m->stream);
    return e ? e : cudaStreamSynchronize(m->stream);
}

// One step; the first error, if any.
static cudaError_t step(struct model *m, int s)
{
    float batch[N];         // a fresh pageable buffer each step, like a DataLoader's
    cudaError_t e;
    for (int i = 0; i < N; i++)
        batch[i] = (float)((i * 7 + s * 13) % 29) / 29.0f;
    if (m->big && (e = big_batches_in(m, s)))
        return e;
    if ((e = batch_in(m, batch, sizeof batch)) || (e = mate(m, 1.0f, m->w, m->x)) ||
        (e = finite(m, m->x)) ||
        (e = cudaMemcpyAsync(m->y, m->x, N * sizeof(float), cudaMemcpyDeviceToDevice,
                             m->stream)) ||
        (e = mate(m, -0.01f, m->y, m->w)) || (e = mate(m, 1.0f / N, m->y, m->loss)) ||
        (e = cudaEventRecord(m->done, m->stream)) || (e = cudaEventSynchronize(m->done)))
        return e;
    return cudaSuccess;
}

static int steps(int count, int driver, int big)
{
    struct model m;
    char name[64];
    memset(&m, 0, sizeof m);
    m.driver = driver;
    m.big = big;
    if (!setup(&m))
        return 1;
    for (int s = 1; s <= count; s++) {
        cudaError_t e = step(&m, s);
        if (!check(e == cudaSuccess, "step", "step %d: %s", s, cudaGetErrorName(e)))
            return 1;
        if (s % 10 == 0) {
            float loss;
            e = cudaMemcpy(&loss, m.loss, sizeof loss, cudaMemcpyDeviceToHost);
            check_cuda(e, fmt_name(name, sizeof name, "loss read at step %d", s));
            printf("step %d loss %.6f\n", s, loss);
        }
    }
    if (driver)
        check_cu(cuModuleUnload(m.d.module), "cuModuleUnload");
    for (int i = 0; big && i < BIG_BATCHES; i++) {
        check_cuda(cudaFree(m.big_dev[i]), "cudaFree a batch");
        free(m.big_host[i]);
    }
    check_cuda(cudaStreamDestroy(m.stream), "cudaStreamDestroy");
    return check_failures ? 1 : 0;
}

static bool has_arg(int argc, char **argv, const char *what)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], what) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    if (argc > 1)
        return steps(atoi(argv[1]), has_arg(argc, argv, "driver"), has_arg(argc, argv, "big"));
    return show();
}
