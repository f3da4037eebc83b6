// The calls of a training step, as PyTorch makes them, in a loop:
//
//   train_step [STEPS [CONFIGS]]   (STEPS 20; the loss is read every 10 steps)
//
// Each step builds a batch in pageable host memory and copies it in
// (cudaMemcpyAsync + cudaStreamSynchronize, PyTorch's copy of a CPU
// tensor), runs "forward and backward" (kernels, a cuBLAS gemm, a
// device-to-device copy, an event recorded and synchronised), and every
// tenth step reads the loss back (cudaMemcpy to the host).  Natively and
// through rgpu it prints the same losses; tests/step-roundtrips.sh runs it
// with two step counts under RGPU_STATS=1 and requires that the extra steps
// waited for the network once per loss read and never otherwise.
//
// CONFIGS (default 0, at most 544) adds that many launches to each step,
// each of its own grid and block (they add nothing to the losses),
// as a real model's step launches a few hundred kernels in as many
// shapes: rgpu waits for the first launch of each configuration only, so
// the extra steps still wait for their loss reads alone.
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.cuh"

#define N 256           // elements per tensor; the gemm is 16 x 16

struct model {
    cudaStream_t stream;
    cudaEvent_t done;
    cublasHandle_t blas;
    float *x, *w, *y, *g, *loss, *scratch;
    int configs;
};

static bool setup(struct model *m)
{
    bool ok = check_cuda(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking),
                         "stream") &&
              check_cuda(cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming), "event");
    float **bufs[] = { &m->x, &m->w, &m->y, &m->g, &m->loss, &m->scratch };
    for (unsigned i = 0; ok && i < sizeof bufs / sizeof bufs[0]; i++)
        ok = check_cuda(cudaMalloc((void **)bufs[i], N * sizeof(float)), "cudaMalloc");
    ok = ok && check(cublasCreate(&m->blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate", "failed") &&
         check(cublasSetStream(m->blas, m->stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream",
               "failed");
    if (ok) {
        float w[N];
        for (int i = 0; i < N; i++)
            w[i] = (float)((i * 37) % 17) / 64.0f - 0.125f;
        ok = check_cuda(cudaMemcpy(m->w, w, sizeof w, cudaMemcpyHostToDevice), "weights") &&
             check_cuda(cudaMemset(m->loss, 0, N * sizeof(float)), "cudaMemset");
    }
    return ok;
}

// One step; returns the first error, if any.
static cudaError_t step(struct model *m, int s)
{
    float batch[N];         // a fresh pageable buffer each step, like a DataLoader's
    const float one = 1.0f, zero = 0.0f, lr = -0.01f;
    cudaError_t e;
    for (int i = 0; i < N; i++)
        batch[i] = (float)((i * 7 + s * 13) % 29) / 29.0f;
    if ((e = cudaMemcpyAsync(m->x, batch, sizeof batch, cudaMemcpyHostToDevice, m->stream)) ||
        (e = cudaStreamSynchronize(m->stream)))
        return e;
    memset(batch, 0, sizeof batch);         // the buffer is the program's again
    if (cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &one, m->w, 16, m->x, 16,
                    &zero, m->y, 16) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    k_axpy<<<1, N, 0, m->stream>>>(1.0f, m->x, m->y, N);
    if ((e = cudaMemcpyAsync(m->g, m->y, N * sizeof(float), cudaMemcpyDeviceToDevice,
                             m->stream)))
        return e;
    k_axpy<<<1, N, 0, m->stream>>>(lr, m->g, m->w, N);
    k_axpy<<<1, N, 0, m->stream>>>(1.0f / N, m->y, m->loss, 1);
    for (int c = 0; c < m->configs; c++)        // scratch += 0 * y
        k_axpy<<<1 + c % 17, 32 * (1 + c / 17 % 32), 0, m->stream>>>(0.0f, m->y, m->scratch, N);
    if ((e = cudaGetLastError()) || (e = cudaEventRecord(m->done, m->stream)) ||
        (e = cudaEventSynchronize(m->done)))
        return e;
    return cudaSuccess;
}

int main(int argc, char **argv)
{
    struct model m;
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    char name[64];
    m.configs = argc > 2 ? atoi(argv[2]) : 0;
    if (!setup(&m))
        return 1;
    for (int s = 1; s <= steps; s++) {
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
    cublasDestroy(m.blas);
    check_cuda(cudaStreamDestroy(m.stream), "cudaStreamDestroy");
    return check_failures ? 1 : 0;
}
