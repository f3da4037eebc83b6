// Stream-ordered allocations, frees and copies from pageable host memory,
// run once in streams and then captured into a graph (memory nodes and host
// copy nodes) and launched twice with other host data; and the same nodes
// added one by one to a graph.  The work forks to a second stream made
// inside the capture, through events made there too, and joins back.
// Through rgpu the host copies of the capture are nodes that move the bytes
// each time the graph runs (common/rgpu_graph_host.c).
//
//   capture_memnodes [N]   elements of each buffer (default 1 Mi ints)
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels.cuh"

struct arrays {
    int n;
    size_t bytes;
    int *in, *twice, *four;     // pageable host memory
};

static unsigned blocks_for(int n) { return (unsigned)(n + 255) / 256; }

// in -> device (stream-ordered allocation) -> twice on a second stream's
// copy back, four times on the first's; every device buffer freed in stream
// order.  Made inside a capture, the second stream and the events are too.
static void work_in_streams(cudaStream_t s1, const struct arrays *a, const char *when)
{
    char name[160];
    int *d_in = NULL, *d_twice = NULL, *d_four = NULL;
    cudaStream_t s2;
    cudaEvent_t doubled, quadrupled, freed;
    bool ok = cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess &&
              cudaEventCreateWithFlags(&doubled, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&quadrupled, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&freed, cudaEventDisableTiming) == cudaSuccess;
    check(ok, fmt_name(name, sizeof name, "a second stream and three events (%s)", when),
          "a call failed");

    check_cuda(cudaMallocAsync((void **)&d_in, a->bytes, s1),
               fmt_name(name, sizeof name, "cudaMallocAsync input (%s)", when));
    check_cuda(cudaMallocAsync((void **)&d_twice, a->bytes, s1),
               fmt_name(name, sizeof name, "cudaMallocAsync twice (%s)", when));
    check_cuda(cudaMemcpyAsync(d_in, a->in, a->bytes, cudaMemcpyHostToDevice, s1),
               fmt_name(name, sizeof name, "cudaMemcpyAsync from pageable memory (%s)", when));
    k_double<<<blocks_for(a->n), 256, 0, s1>>>(d_twice, d_in, a->n);
    check_cuda(cudaEventRecord(doubled, s1), fmt_name(name, sizeof name, "record (%s)", when));

    check_cuda(cudaStreamWaitEvent(s2, doubled, 0),
               fmt_name(name, sizeof name, "second stream waits (%s)", when));
    check_cuda(cudaMemcpyAsync(a->twice, d_twice, a->bytes, cudaMemcpyDeviceToHost, s2),
               fmt_name(name, sizeof name, "cudaMemcpyAsync to pageable memory, second stream (%s)",
                        when));

    check_cuda(cudaFreeAsync(d_in, s1), fmt_name(name, sizeof name, "cudaFreeAsync input (%s)",
                                                   when));
    check_cuda(cudaMallocAsync((void **)&d_four, a->bytes, s1),
               fmt_name(name, sizeof name, "cudaMallocAsync after a free (%s)", when));
    k_double<<<blocks_for(a->n), 256, 0, s1>>>(d_four, d_twice, a->n);
    check_cuda(cudaEventRecord(quadrupled, s1), fmt_name(name, sizeof name, "record (%s)", when));
    check_cuda(cudaMemcpyAsync(a->four, d_four, a->bytes, cudaMemcpyDeviceToHost, s1),
               fmt_name(name, sizeof name, "cudaMemcpyAsync to pageable memory (%s)", when));
    check_cuda(cudaFreeAsync(d_four, s1), fmt_name(name, sizeof name, "cudaFreeAsync (%s)", when));

    check_cuda(cudaStreamWaitEvent(s2, quadrupled, 0),
               fmt_name(name, sizeof name, "second stream waits again (%s)", when));
    check_cuda(cudaFreeAsync(d_twice, s2),
               fmt_name(name, sizeof name, "cudaFreeAsync on the second stream (%s)", when));
    check_cuda(cudaEventRecord(freed, s2), fmt_name(name, sizeof name, "record (%s)", when));
    check_cuda(cudaStreamWaitEvent(s1, freed, 0),
               fmt_name(name, sizeof name, "first stream joins (%s)", when));

    cudaStreamDestroy(s2);
    cudaEventDestroy(doubled);
    cudaEventDestroy(quadrupled);
    cudaEventDestroy(freed);
}

static void fill(struct arrays *a, int base)
{
    for (int i = 0; i < a->n; i++) {
        a->in[i] = base + i % 1000;
        a->twice[i] = a->four[i] = -1;
    }
}

static void check_results(const struct arrays *a, const char *when)
{
    char name[160];
    int i = 0;
    while (i < a->n && a->twice[i] == 2 * a->in[i] && a->four[i] == 4 * a->in[i])
        i++;
    check(i == a->n,
          fmt_name(name, sizeof name, "host buffers hold 2x and 4x the input (%s)", when),
          "element %d: %d and %d for %d", i, i < a->n ? a->twice[i] : 0,
          i < a->n ? a->four[i] : 0, i < a->n ? a->in[i] : 0);
}

// An allocation node, a copy of pageable memory to it, a kernel, a copy
// back and a free node, added one by one, launched twice.
static void explicit_graph(cudaStream_t s, struct arrays *a)
{
    cudaGraph_t g;
    cudaGraphExec_t exec;
    cudaGraphNode_t alloc_in, alloc_out, in, kernel, out, free_in, free_out;
    struct cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = a->bytes;
    if (!check_cuda(cudaGraphCreate(&g, 0), "cudaGraphCreate"))
        return;
    check_cuda(cudaGraphAddMemAllocNode(&alloc_in, g, NULL, 0, &ap), "cudaGraphAddMemAllocNode");
    int *d_in = (int *)ap.dptr;
    check_cuda(cudaGraphAddMemAllocNode(&alloc_out, g, &alloc_in, 1, &ap),
               "cudaGraphAddMemAllocNode (second)");
    int *d_out = (int *)ap.dptr;
    check_cuda(cudaGraphAddMemcpyNode1D(&in, g, &alloc_out, 1, d_in, a->in, a->bytes,
                                        cudaMemcpyHostToDevice),
               "cudaGraphAddMemcpyNode1D from pageable memory to an allocation node's");
    void *args[] = { &d_out, &d_in, &a->n };
    struct cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *)k_double;
    kp.gridDim = dim3(blocks_for(a->n));
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    check_cuda(cudaGraphAddKernelNode(&kernel, g, &in, 1, &kp), "cudaGraphAddKernelNode");
    check_cuda(cudaGraphAddMemcpyNode1D(&out, g, &kernel, 1, a->twice, d_out, a->bytes,
                                        cudaMemcpyDeviceToHost),
               "cudaGraphAddMemcpyNode1D to pageable memory");
    check_cuda(cudaGraphAddMemFreeNode(&free_in, g, &kernel, 1, d_in), "cudaGraphAddMemFreeNode");
    check_cuda(cudaGraphAddMemFreeNode(&free_out, g, &out, 1, d_out),
               "cudaGraphAddMemFreeNode (second)");
    if (check_cuda(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate (explicit)")) {
        for (int run = 0; run < 2; run++) {
            fill(a, 7 * (run + 1));
            check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch (explicit)");
            check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (explicit)");
            int i = 0;
            while (i < a->n && a->twice[i] == 2 * a->in[i])
                i++;
            check(i == a->n, "explicit graph: the host buffer holds 2x the input",
                  "element %d: %d for %d", i, i < a->n ? a->twice[i] : 0,
                  i < a->n ? a->in[i] : 0);
        }
        cudaGraphExecDestroy(exec);
    }
    cudaGraphDestroy(g);
}

int main(int argc, char **argv)
{
    struct arrays a;
    a.n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    a.bytes = (size_t)a.n * sizeof(int);
    a.in = (int *)malloc(a.bytes);
    a.twice = (int *)malloc(a.bytes);
    a.four = (int *)malloc(a.bytes);
    cudaStream_t s;
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");

    // In streams first.
    fill(&a, 1);
    work_in_streams(s, &a, "streams");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (streams)");
    check_results(&a, "streams");

    // The same captured: a graph of memory nodes, kernels and host copies.
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
                   "cudaStreamBeginCapture")) {
        work_in_streams(s, &a, "capture");
        check_cuda(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    }
    if (graph && check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
        check_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy before the launches");
        for (int run = 0; run < 2; run++) {
            char when[32];
            fmt_name(when, sizeof when, "graph run %d", run + 1);
            fill(&a, 100 * (run + 1));
            check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
            check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (graph)");
            check_results(&a, when);
        }
        check_cuda(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    }
    explicit_graph(s, &a);
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    free(a.in);
    free(a.twice);
    free(a.four);
    return check_exit_status();
}
