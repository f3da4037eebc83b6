// A multithreaded client.  The runtime keeps the current device and the
// last error per host thread, so rgpu must give each client thread its own
// state: one thread's failed launch must not show up in another thread's
// cudaGetLastError.  The threads also allocate, launch and copy
// concurrently on their own streams, which exercises the client core's
// sharing of one connection.  Each thread logs its checks to its own buffer;
// main prints them in thread order so the output is deterministic.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels.cuh"

#define NTHREADS 8
#define N (1 << 16)
#define ROUNDS 10

struct worker {
    int id;
    char *log;
    size_t len;
};

static pthread_barrier_t barrier;

static void work(int id)
{
    char name[128];
    int dev = -1;

    check_cuda(cudaSetDevice(0), fmt_name(name, sizeof name, "thread %d cudaSetDevice(0)", id));
    cudaError_t e = cudaGetDevice(&dev);
    check(e == cudaSuccess && dev == 0, fmt_name(name, sizeof name, "thread %d cudaGetDevice", id),
          "%s, device %d", cudaGetErrorName(e), dev);

    // Only thread 0 makes a bad launch; the first barrier makes sure it has
    // happened before the other threads look at their own last error, the
    // second that thread 0 reads (and so clears) its error only after they
    // have looked: a wrongly shared error state cannot hide.
    if (id == 0)
        k_empty<<<1, 2048>>>();
    pthread_barrier_wait(&barrier);
    if (id != 0)
        check_err(cudaGetLastError(), cudaSuccess,
                  fmt_name(name, sizeof name, "thread %d does not see thread 0's error", id));
    pthread_barrier_wait(&barrier);
    if (id == 0) {
        check_err(cudaPeekAtLastError(), BAD_LAUNCH_ERROR, "thread 0 sees its own error");
        check_err(cudaGetLastError(), BAD_LAUNCH_ERROR, "thread 0 reads its own error");
        check_err(cudaGetLastError(), cudaSuccess, "thread 0 error cleared");
    }

    cudaStream_t s;
    uint32_t *d, *h = (uint32_t *)malloc(N * sizeof(uint32_t));
    if (!check_cuda(cudaStreamCreate(&s), fmt_name(name, sizeof name, "thread %d cudaStreamCreate", id)) ||
        !check_cuda(cudaMalloc(&d, N * sizeof(uint32_t)), fmt_name(name, sizeof name, "thread %d cudaMalloc", id)))
        return;

    // A value per thread and round, so a copy that returns another
    // thread's (or an earlier round's) data is caught.
    int bad_round = -1, bad_i = 0;
    uint32_t want = 0;
    cudaError_t err = cudaSuccess;
    for (int r = 0; r < ROUNDS && bad_round < 0 && err == cudaSuccess; r++) {
        want = 0xA0000000u | ((uint32_t)id << 16) | (uint32_t)r;
        k_fill_u32<<<(N + 255) / 256, 256, 0, s>>>(d, want, N);
        err = cudaMemcpyAsync(h, d, N * sizeof(uint32_t), cudaMemcpyDeviceToHost, s);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(s);
        for (int i = 0; i < N && err == cudaSuccess; i++)
            if (h[i] != want) {
                bad_round = r;
                bad_i = i;
                break;
            }
    }
    fmt_name(name, sizeof name, "thread %d k_fill_u32 x%d on its own stream", id, ROUNDS);
    if (err != cudaSuccess)
        check(false, name, "%s", cudaGetErrorName(err));
    else
        check(bad_round < 0, name, "round %d: element %d is 0x%08x, want 0x%08x", bad_round, bad_i,
              h[bad_i], want);

    // Large copies both ways, all threads at once: through rgpu they stream
    // in pieces (a payload read by this thread's worker, data frames
    // between other threads' replies).  An odd size and a pattern per thread.
    size_t big = ((size_t)3 << 19) + 4099;
    unsigned char *src = (unsigned char *)malloc(big), *back = (unsigned char *)malloc(big), *dbig;
    if (src && back &&
        check_cuda(cudaMalloc(&dbig, big), fmt_name(name, sizeof name, "thread %d cudaMalloc big", id))) {
        for (size_t i = 0; i < big; i++)
            src[i] = (unsigned char)(i * 7 + (size_t)id * 13 + (i >> 12));
        memset(back, 0, big);
        err = cudaMemcpy(dbig, src, big, cudaMemcpyHostToDevice);
        if (err == cudaSuccess)
            err = cudaMemcpy(back, dbig, big, cudaMemcpyDeviceToHost);
        fmt_name(name, sizeof name, "thread %d %zu bytes there and back", id, big);
        if (err != cudaSuccess)
            check(false, name, "%s", cudaGetErrorName(err));
        else
            check(memcmp(src, back, big) == 0, name, "the bytes differ");
        check_cuda(cudaFree(dbig), fmt_name(name, sizeof name, "thread %d cudaFree big", id));
    }
    free(src);
    free(back);

    check_cuda(cudaFree(d), fmt_name(name, sizeof name, "thread %d cudaFree", id));
    check_cuda(cudaStreamDestroy(s), fmt_name(name, sizeof name, "thread %d cudaStreamDestroy", id));
    free(h);
}

static void *run(void *arg)
{
    struct worker *w = (struct worker *)arg;
    check_out = open_memstream(&w->log, &w->len);
    if (!check_out)
        abort();
    work(w->id);
    fclose(check_out);
    check_out = NULL;
    return NULL;
}

int main(void)
{
    pthread_t tid[NTHREADS];
    struct worker w[NTHREADS];

    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        w[i].id = i;
        w[i].log = NULL;
        w[i].len = 0;
        if (pthread_create(&tid[i], NULL, run, &w[i]) != 0) {
            printf("FAIL pthread_create %d\n", i);
            return 1;
        }
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(tid[i], NULL);
        fputs(w[i].log, stdout);
        free(w[i].log);
    }
    check_err(cudaGetLastError(), cudaSuccess, "main thread does not see thread 0's error");
    pthread_barrier_destroy(&barrier);
    return check_exit_status();
}
