/* A program built against the headers of a newer CUDA 13 than the
 * server's: the stubs' release (13.5, from the pinned wheels), run against
 * a CUDA 13.0 runtime, the fake backend's or a GPU host's.
 *
 *   minor_prog compare   only what CUDA 13.0 has, through layouts 13.5
 *                        extends (cudaMemLocation by value, the pointer
 *                        attributes): the same output natively and through
 *                        rgpu (tests/gpu/minor_check.sh compares them)
 *   minor_prog full      also what 13.1 and later brought, found at run time
 *                        (dlsym: a 13.0 runtime lacks them, and a program
 *                        that named them at link time would not start on
 *                        it natively):
 *                          - cudaGraphGetId (13.1, generated): refused with
 *                            cudaErrorNotSupported, the session serving on;
 *                            tests/minor/run.sh checks the log line naming
 *                            both versions;
 *                          - cudaLaunchHostFunc_v2 (13.2) and
 *                            cudaGraphConditionalHandleCreate_v2 (13.1)
 *                            without an execution context: served by rgpu's
 *                            client with what 13.0 has; with one, refused.
 *                        Prints "minor: ok" when all of it holds. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if CUDART_VERSION < 13010
#error "build this against the headers of a CUDA 13 newer than 13.0"
#endif

#define N 8192

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "minor: FAIL: %s\n", what);
        failures++;
    }
}

static void check_rc(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "minor: FAIL: %s: %s\n", what, cudaGetErrorName(rc));
        failures++;
    }
}

/* Copies through the device's default pool. */
static void pool_copies(cudaStream_t s)
{
    static unsigned char host[N], back[N];
    cudaMemPool_t pool = NULL;
    unsigned char *dev = NULL;
    check_rc(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
    check_rc(cudaMallocFromPoolAsync((void **)&dev, N, pool, s), "cudaMallocFromPoolAsync");
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 13 + 1);
    check_rc(cudaMemcpyAsync(dev, host, N, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync in");
    check_rc(cudaMemsetAsync(dev + N / 4, 0x3c, N / 8, s), "cudaMemsetAsync");
    check_rc(cudaMemcpyAsync(back, dev, N, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync out");
    check_rc(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    unsigned sum = 0;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        unsigned char want = i >= N / 4 && i < N / 4 + N / 8 ? 0x3c : (unsigned char)(i * 13 + 1);
        bad += back[i] != want;
        sum = sum * 31 + back[i];
    }
    check(!bad, "the bytes that came back");
    printf("minor: pool copies: checksum %08x\n", sum);

    /* CUDA 13.5's cudaPointerAttributes holds a field in 13.0's reserved
     * bytes: 13.0 leaves it as its reserved bytes are. */
    struct cudaPointerAttributes pa;
    memset(&pa, 0, sizeof pa);
    check_rc(cudaPointerGetAttributes(&pa, dev + 8), "cudaPointerGetAttributes");
    check(pa.type == cudaMemoryTypeDevice && pa.device == 0, "the pool memory's attributes");
    printf("minor: pointer attributes: type %d, device %d\n", (int)pa.type, pa.device);
    check_rc(cudaFreeAsync(dev, s), "cudaFreeAsync");
    check_rc(cudaStreamSynchronize(s), "cudaStreamSynchronize after the free");
}

/* Managed memory moved with CUDA 13.5's cudaMemLocation, whose id CUDA
 * 13.5 made a union (a locality domain beside it): the same bytes to 13.0. */
static void managed_prefetch(cudaStream_t s)
{
    unsigned char *m = NULL;
    struct cudaMemLocation dev0;
    memset(&dev0, 0, sizeof dev0);
    dev0.type = cudaMemLocationTypeDevice;
    dev0.id = 0;
    check_rc(cudaMallocManaged((void **)&m, N, cudaMemAttachGlobal), "cudaMallocManaged");
    if (!m)
        return;
    for (int i = 0; i < N; i++)
        m[i] = (unsigned char)i;
    check_rc(cudaMemAdvise(m, N, cudaMemAdviseSetPreferredLocation, dev0),
             "cudaMemAdvise (13.5's location)");
    check_rc(cudaMemPrefetchAsync(m, N, dev0, 0, s), "cudaMemPrefetchAsync (13.5's location)");
    check_rc(cudaMemsetAsync(m + N / 2, 0x42, N / 4, s), "cudaMemsetAsync of managed memory");
    check_rc(cudaStreamSynchronize(s), "cudaStreamSynchronize after the prefetch");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += m[i] != (i >= N / 2 && i < N / 2 + N / 4 ? 0x42 : (unsigned char)i);
    check(!bad, "managed memory after the prefetch and memset");
    printf("minor: managed memory: %02x %02x\n", m[1], m[N / 2]);
    check_rc(cudaFree(m), "cudaFree of managed memory");
}

/* A graph of one memset node, launched twice. */
static cudaGraph_t memset_graph(cudaStream_t s, unsigned char **dev)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    cudaGraphNode_t node;
    static unsigned char back[256];
    struct cudaMemsetParams mp;
    check_rc(cudaMalloc((void **)dev, sizeof back), "cudaMalloc for the graph");
    check_rc(cudaGraphCreate(&g, 0), "cudaGraphCreate");
    memset(&mp, 0, sizeof mp);
    mp.dst = *dev;
    mp.value = 0x77;
    mp.elementSize = 1;
    mp.width = sizeof back;
    mp.height = 1;
    check_rc(cudaGraphAddMemsetNode(&node, g, NULL, 0, &mp), "cudaGraphAddMemsetNode");
    check_rc(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    check_rc(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    check_rc(cudaGraphLaunch(exec, s), "cudaGraphLaunch again");
    check_rc(cudaMemcpyAsync(back, *dev, sizeof back, cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync of the graph's bytes");
    check_rc(cudaStreamSynchronize(s), "cudaStreamSynchronize after the graph");
    check(back[0] == 0x77 && back[sizeof back - 1] == 0x77, "the graph's memset");
    printf("minor: graph memset: %02x\n", back[0]);
    check_rc(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    return g;
}

static int host_calls;

static void CUDART_CB host_fn(void *data)
{
    (void)data;
    host_calls++;
}

/* What 13.1 and later brought, looked up as a program that must also run
 * on an older runtime does. */
static void newer_functions(cudaStream_t s, cudaGraph_t g)
{
    cudaError_t (*graph_get_id)(cudaGraph_t, unsigned int *) =
        (cudaError_t (*)(cudaGraph_t, unsigned int *))dlsym(RTLD_DEFAULT, "cudaGraphGetId");
    cudaError_t (*host_func_v2)(cudaStream_t, cudaHostFn_t, void *, unsigned int) =
        (cudaError_t (*)(cudaStream_t, cudaHostFn_t, void *, unsigned int))dlsym(
            RTLD_DEFAULT, "cudaLaunchHostFunc_v2");
    cudaError_t (*cond_v2)(cudaGraphConditionalHandle *, cudaGraph_t, cudaExecutionContext_t,
                           unsigned int, unsigned int) =
        (cudaError_t (*)(cudaGraphConditionalHandle *, cudaGraph_t, cudaExecutionContext_t,
                         unsigned int, unsigned int))dlsym(RTLD_DEFAULT,
                                                           "cudaGraphConditionalHandleCreate_v2");
    if (!graph_get_id || !host_func_v2 || !cond_v2) {
        printf("minor: this runtime lacks CUDA 13.1's functions (a 13.0 one): not called\n");
        return;
    }
    unsigned id = 12345;
    for (int i = 0; i < 2; i++) {   /* twice: the log line comes once */
        check(graph_get_id(g, &id) == cudaErrorNotSupported,
              "cudaGraphGetId refused by a 13.0 server");
        check(cudaGetLastError() == cudaErrorNotSupported, "the refusal is the last error");
    }
    check(id == 12345, "a refused call writes nothing");
    check(cudaGetLastError() == cudaSuccess, "the last error, once read, is cleared");

    check_rc(host_func_v2(s, host_fn, NULL, cudaHostTaskBlocking),
             "cudaLaunchHostFunc_v2 (blocking)");
    check_rc(host_func_v2(s, host_fn, NULL, cudaHostTaskSpinWait),
             "cudaLaunchHostFunc_v2 (spin-wait)");
    check(host_func_v2(s, host_fn, NULL, 7) == cudaErrorInvalidValue,
          "cudaLaunchHostFunc_v2 with a sync mode CUDA lacks");
    cudaGetLastError();
    check_rc(cudaStreamSynchronize(s), "cudaStreamSynchronize after the host functions");
    check(host_calls == 2, "both host functions ran");

    cudaGraphConditionalHandle h = 0;
    check_rc(cond_v2(&h, g, NULL, 1, cudaGraphCondAssignDefault),
             "cudaGraphConditionalHandleCreate_v2 without an execution context");
    check(cond_v2(&h, g, (cudaExecutionContext_t)(uintptr_t)0x1000, 1, 0) ==
              cudaErrorNotSupported,
          "cudaGraphConditionalHandleCreate_v2 with an execution context refused");
    cudaGetLastError();
}

int main(int argc, char **argv)
{
    int full = argc > 1 && strcmp(argv[1], "full") == 0;
    int version = 0;
    cudaStream_t s;
    unsigned char *graph_mem = NULL;

    check_rc(cudaRuntimeGetVersion(&version), "cudaRuntimeGetVersion");
    printf("minor: built with CUDA %d, runtime %d\n", CUDART_VERSION, version);
    check_rc(cudaStreamCreate(&s), "cudaStreamCreate");
    pool_copies(s);
    managed_prefetch(s);
    cudaGraph_t g = memset_graph(s, &graph_mem);
    if (full)
        newer_functions(s, g);
    /* The session serves on after the refusals. */
    pool_copies(s);
    check_rc(cudaGraphDestroy(g), "cudaGraphDestroy");
    check_rc(cudaFree(graph_mem), "cudaFree");
    check_rc(cudaStreamDestroy(s), "cudaStreamDestroy");
    check_rc(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (failures) {
        printf("minor: %d FAILED\n", failures);
        return 1;
    }
    if (full)
        printf("minor: ok\n");
    return 0;
}
