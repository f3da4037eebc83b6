// CUDA IPC between two processes: the parent allocates and fills device
// memory, records an interprocess event and passes both handles (as hex on
// the command line) to children it starts from its own executable.  The
// first child opens them with the runtime API, the second with the driver
// API; each adds 1 to every element through the opened pointer and closes
// it.  The parent then reads its memory back.  Through rgpu each process
// has its own session on the GPU host, where the handles are opened.
// Handles made of garbage must be refused without harm.
#include "check.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 4096

static void to_hex(const void *p, size_t n, char *out)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static bool from_hex(const char *s, void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;
    if (strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        b[i] = (unsigned char)v;
    }
    return true;
}

static bool all_equal_plus(const int *h, int add)
{
    for (int i = 0; i < N; i++)
        if (h[i] != i * 3 + add)
            return false;
    return true;
}

// Garbage handles: refused, and the process goes on.
static void garbage(void)
{
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    void *p = NULL;
    cudaEvent_t ev = NULL;
    memset(&mh, 0x5a, sizeof mh);
    memset(&eh, 0x5a, sizeof eh);
    check(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess,
          "child: garbage memory handle refused", "opened at %p", p);
    cudaGetLastError();
    check(cudaIpcOpenEventHandle(&ev, eh) != cudaSuccess, "child: garbage event handle refused",
          "opened");
    cudaGetLastError();
}

static int runtime_child(const cudaIpcMemHandle_t &mh, const cudaIpcEventHandle_t &eh)
{
    static int h[N];
    void *p = NULL;
    cudaEvent_t ev;
    garbage();
    if (!check_cuda(cudaIpcOpenEventHandle(&ev, eh), "child: cudaIpcOpenEventHandle") ||
        !check_cuda(cudaEventSynchronize(ev), "child: cudaEventSynchronize") ||
        !check_cuda(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess),
                    "child: cudaIpcOpenMemHandle"))
        return 1;
    // cudaMemcpyDefault: the opened pointer must be known for device memory.
    check_cuda(cudaMemcpy(h, p, sizeof h, cudaMemcpyDefault), "child: read the parent's memory");
    check(all_equal_plus(h, 0), "child: the parent's values", "h[1] = %d", h[1]);
    cudaPointerAttributes attr;
    check(cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice,
          "child: opened pointer is device memory", "type %d", (int)attr.type);
    for (int i = 0; i < N; i++)
        h[i] += 1;
    check_cuda(cudaMemcpy(p, h, sizeof h, cudaMemcpyHostToDevice), "child: write through it");
    check_cuda(cudaMemset((char *)p + sizeof h, 0x11, 256), "child: memset through it");
    check_cuda(cudaDeviceSynchronize(), "child: synchronize");
    check_cuda(cudaIpcCloseMemHandle(p), "child: cudaIpcCloseMemHandle");
    check_cuda(cudaEventDestroy(ev), "child: cudaEventDestroy");
    return check_exit_status();
}

static int driver_child(const cudaIpcMemHandle_t &mh, const cudaIpcEventHandle_t &eh)
{
    static int h[N];
    CUipcMemHandle dmh;
    CUipcEventHandle deh;
    CUdeviceptr d = 0;
    CUevent ev;
    memcpy(&dmh, &mh, sizeof dmh);
    memcpy(&deh, &eh, sizeof deh);
    check_cuda(cudaFree(0), "driver child: runtime context");
    check(cuIpcOpenEventHandle(&ev, deh) == CUDA_SUCCESS && cuEventSynchronize(ev) == CUDA_SUCCESS,
          "driver child: cuIpcOpenEventHandle", "failed");
    if (!check(cuIpcOpenMemHandle(&d, dmh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS,
               "driver child: cuIpcOpenMemHandle", "failed"))
        return 1;
    CUdeviceptr base = 0;
    size_t size = 0;
    check(cuMemGetAddressRange(&base, &size, d + 8) == CUDA_SUCCESS && base == d &&
              size == 2 * sizeof h,
          "driver child: cuMemGetAddressRange", "size %zu", size);
    check(cuMemcpyDtoH(h, d, sizeof h) == CUDA_SUCCESS && all_equal_plus(h, 1),
          "driver child: the first child's values", "h[1] = %d", h[1]);
    for (int i = 0; i < N; i++)
        h[i] += 1;
    check(cuMemcpyHtoD(d, h, sizeof h) == CUDA_SUCCESS, "driver child: write through it",
          "failed");
    check(cuIpcCloseMemHandle(d) == CUDA_SUCCESS, "driver child: cuIpcCloseMemHandle", "failed");
    check(cuEventDestroy(ev) == CUDA_SUCCESS, "driver child: cuEventDestroy", "failed");
    return check_exit_status();
}

// tests/ipc-identity.sh: "export" prints the handles of filled memory and
// keeps them alive until stdin closes; "try HEX HEX" says whether this
// process may open them (not part of the output compared on a GPU).
// "export COUNT MIB" (tests/shm-leftovers.sh) exports COUNT allocations
// of MIB MiB more first, never freed, and prints "exported COUNT".
static int export_and_wait(int count, size_t mib)
{
    for (int i = 0; i < count; i++) {
        void *p = NULL;
        cudaIpcMemHandle_t more;
        if (cudaMalloc(&p, mib << 20) != cudaSuccess || cudaIpcGetMemHandle(&more, p) != cudaSuccess)
            return 1;
    }
    if (count)
        printf("exported %d\n", count);
    static int h[N];
    int *d = NULL;
    cudaEvent_t ev;
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    char mhex[2 * sizeof mh + 1], ehex[2 * sizeof eh + 1];
    for (int i = 0; i < N; i++)
        h[i] = i * 3;
    if (cudaMalloc(&d, sizeof h) != cudaSuccess ||
        cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaIpcGetMemHandle(&mh, d) != cudaSuccess || cudaIpcGetEventHandle(&eh, ev) != cudaSuccess)
        return 1;
    to_hex(&mh, sizeof mh, mhex);
    to_hex(&eh, sizeof eh, ehex);
    printf("handles %s %s\n", mhex, ehex);
    fflush(stdout);
    while (getchar() != EOF)
        ;
    return 0;
}

static int try_open(const cudaIpcMemHandle_t &mh, const cudaIpcEventHandle_t &eh)
{
    static int h[N];
    void *p = NULL;
    cudaEvent_t ev;
    cudaError_t m = cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess);
    cudaGetLastError();
    cudaError_t e = cudaIpcOpenEventHandle(&ev, eh);
    cudaGetLastError();
    printf("memory %s\n", m == cudaSuccess ? "opened" : "refused");
    printf("event %s\n", e == cudaSuccess ? "opened" : "refused");
    if (m == cudaSuccess) {
        bool same = cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess &&
                    all_equal_plus(h, 0);
        printf("contents %s\n", same ? "match" : "differ");
        cudaIpcCloseMemHandle(p);
    }
    return 0;
}

static bool run_child(const char *self, const char *kind, const char *mh, const char *eh)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, kind, mh, eh, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "export") == 0)
        return export_and_wait(0, 0);
    if (argc == 4 && strcmp(argv[1], "export") == 0)
        return export_and_wait(atoi(argv[2]), (size_t)atoi(argv[3]));
    if (argc == 4) {
        cudaIpcMemHandle_t mh;
        cudaIpcEventHandle_t eh;
        if (!from_hex(argv[2], &mh, sizeof mh) || !from_hex(argv[3], &eh, sizeof eh))
            return 2;
        if (strcmp(argv[1], "try") == 0)
            return try_open(mh, eh);
        return strcmp(argv[1], "driver") == 0 ? driver_child(mh, eh) : runtime_child(mh, eh);
    }

    static int h[N];
    int *d = NULL;
    cudaEvent_t ev, plain;
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    char mhex[2 * sizeof mh + 1], ehex[2 * sizeof eh + 1];

    for (int i = 0; i < N; i++)
        h[i] = i * 3;
    if (!check_cuda(cudaMalloc(&d, 2 * sizeof h), "cudaMalloc") ||
        !check_cuda(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), "fill") ||
        !check_cuda(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming),
                    "interprocess event") ||
        !check_cuda(cudaEventRecord(ev, 0), "cudaEventRecord") ||
        !check_cuda(cudaIpcGetMemHandle(&mh, d), "cudaIpcGetMemHandle") ||
        !check_cuda(cudaIpcGetEventHandle(&eh, ev), "cudaIpcGetEventHandle"))
        return check_exit_status();
    check_cuda(cudaEventCreate(&plain), "plain event");
    check(cudaIpcGetEventHandle(&eh, plain) != cudaSuccess,
          "a timing event has no IPC handle", "got one");
    cudaGetLastError();
    check_cuda(cudaIpcGetEventHandle(&eh, ev), "cudaIpcGetEventHandle again");
    to_hex(&mh, sizeof mh, mhex);
    to_hex(&eh, sizeof eh, ehex);

    check(run_child(argv[0], "runtime", mhex, ehex), "runtime child", "failed");
    check(run_child(argv[0], "driver", mhex, ehex), "driver child", "failed");

    memset(h, 0, sizeof h);
    check_cuda(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), "read back");
    check(all_equal_plus(h, 2), "both children's writes", "h[1] = %d", h[1]);
    unsigned char tail[256];
    check(cudaMemcpy(tail, (char *)d + sizeof h, sizeof tail, cudaMemcpyDeviceToHost) ==
                  cudaSuccess &&
              tail[0] == 0x11 && tail[255] == 0x11,
          "the child's memset", "tail %02x", tail[0]);
    check_cuda(cudaEventDestroy(plain), "destroy plain event");
    check_cuda(cudaEventDestroy(ev), "destroy event");
    check_cuda(cudaFree(d), "cudaFree");
    return check_exit_status();
}
