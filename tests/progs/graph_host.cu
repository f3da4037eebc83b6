// Graph host nodes and graph copies to or from host memory: the program's
// function runs each time the graph runs, between the nodes it depends on
// and the nodes that depend on it, and a copy node reads or writes host
// memory when it runs, in graph order.  A decode-style loop changes the host
// buffer between launches; exec setters change the function and the host
// pointer; clones, child graphs and cudaGraphExecUpdate carry host nodes; a
// captured stream's host function and host copies become such nodes (on a
// device with stream capture); node records, the driver API, the dot
// description, and an executable graph destroyed while it runs.  Link with
// -lcuda -lpthread.
//
//   graph_host              everything above (the same output natively)
//   graph_host bad-inputs   a host node on a destroyed graph, a copy past
//                           its device memory, a host-to-host copy, one
//                           larger than rgpu carries, device-only new
//                           parameters for a host copy (rgpu only)
//   graph_host client-dies  a child process dies inside a host node while
//                           the server's graph waits for it; the daemon
//                           serves the parent afterwards (rgpu only)
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "kernels.cuh"

#define N 256
#define THREADS 128
#define BLOCKS ((N + THREADS - 1) / THREADS)
#define LAUNCHES 5

// ---- what the host functions record ------------------------------------------------

// Letters appended by host functions, in the order they ran.
struct trace {
    char order[128];
    int n;
    pthread_t thread;           // the last call's
    int ran_elsewhere;          // every call ran on another thread than main's
};

static pthread_t main_thread;

static void trace_add(struct trace *t, char c)
{
    if (t->n < (int)sizeof t->order - 1)
        t->order[t->n++] = c;
    t->order[t->n] = 0;
    t->thread = pthread_self();
    if (pthread_equal(t->thread, main_thread))
        t->ran_elsewhere = 0;
}

static void trace_init(struct trace *t)
{
    memset(t, 0, sizeof *t);
    t->ran_elsewhere = 1;
}

// The letters of `pattern` repeated `times` times.
static const char *repeated(char *buf, size_t size, const char *pattern, int times)
{
    buf[0] = 0;
    for (int i = 0; i < times && strlen(buf) + strlen(pattern) < size; i++)
        strcat(buf, pattern);
    return buf;
}

static struct cudaKernelNodeParams kernel_node(void *func, void **args)
{
    struct cudaKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = func;
    p.gridDim = dim3(BLOCKS);
    p.blockDim = dim3(THREADS);
    p.kernelParams = args;
    return p;
}

// Whether all n ints of h equal want; the first that does not in *bad.
static bool all_equal(const int *h, int want, int *bad)
{
    for (int i = 0; i < N; i++)
        if (h[i] != want) {
            *bad = i;
            return false;
        }
    return true;
}

static void sleep_ms(int ms)
{
    struct timespec t = { 0, ms * 1000000L };
    nanosleep(&t, NULL);
}

// ---- a step as a graph: host nodes between kernels ---------------------------------

struct step {
    struct trace trace;
    int *in, *out;              // pinned host buffers of N ints
    int calls;                  // of the root host node
    int seen[LAUNCHES];         // out[0] when the last host node ran
    int uniform;                // every out[i] was out[0] each time
};

// Root: the value this launch feeds the GPU, written where the copy after
// it reads.
static void CUDART_CB step_feed(void *arg)
{
    struct step *s = (struct step *)arg;
    s->calls++;
    for (int i = 0; i < N; i++)
        s->in[i] = 10 * s->calls;
    trace_add(&s->trace, 'A');
}

static void CUDART_CB step_middle(void *arg)
{
    trace_add(&((struct step *)arg)->trace, 'B');
}

// Last: what the copy before it brought back.
static void CUDART_CB step_read(void *arg)
{
    struct step *s = (struct step *)arg;
    int bad = 0;
    if (s->calls >= 1 && s->calls <= LAUNCHES)
        s->seen[s->calls - 1] = s->out[0];
    if (!all_equal(s->out, s->out[0], &bad))
        s->uniform = 0;
    trace_add(&s->trace, 'C');
}

// A(host) -> copy in to device -> k_double -> B(host) -> k_inc -> copy to
// out -> C(host): each launch k gives out = 2 * 10k + 1.
static void test_step(cudaStream_t stream)
{
    struct step s;
    int *d_in, *d_mid, n = N;
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaGraphNode_t a, h2d, k1, b, k2, d2h, c;
    memset(&s, 0, sizeof s);
    trace_init(&s.trace);
    s.uniform = 1;
    check_cuda(cudaMallocHost(&s.in, N * sizeof(int)), "step: cudaMallocHost in");
    check_cuda(cudaMallocHost(&s.out, N * sizeof(int)), "step: cudaMallocHost out");
    check_cuda(cudaMalloc(&d_in, N * sizeof(int)), "step: cudaMalloc in");
    check_cuda(cudaMalloc(&d_mid, N * sizeof(int)), "step: cudaMalloc mid");
    check_cuda(cudaGraphCreate(&g, 0), "step: cudaGraphCreate");
    struct cudaHostNodeParams hp = { step_feed, &s };
    check_cuda(cudaGraphAddHostNode(&a, g, NULL, 0, &hp), "step: host node A");
    check_cuda(cudaGraphAddMemcpyNode1D(&h2d, g, &a, 1, d_in, s.in, N * sizeof(int),
                                        cudaMemcpyHostToDevice),
               "step: copy node from host memory");
    void *args1[] = { &d_mid, &d_in, &n };
    struct cudaKernelNodeParams kp1 = kernel_node((void *)k_double, args1);
    check_cuda(cudaGraphAddKernelNode(&k1, g, &h2d, 1, &kp1), "step: kernel k_double");
    hp = { step_middle, &s };
    check_cuda(cudaGraphAddHostNode(&b, g, &k1, 1, &hp), "step: host node B between kernels");
    void *args2[] = { &d_mid, &n };
    struct cudaKernelNodeParams kp2 = kernel_node((void *)k_inc, args2);
    check_cuda(cudaGraphAddKernelNode(&k2, g, &b, 1, &kp2), "step: kernel k_inc");
    check_cuda(cudaGraphAddMemcpyNode1D(&d2h, g, &k2, 1, s.out, d_mid, N * sizeof(int),
                                        cudaMemcpyDefault),
               "step: copy node to host memory (default kind)");
    hp = { step_read, &s };
    check_cuda(cudaGraphAddHostNode(&c, g, &d2h, 1, &hp), "step: host node C");

    enum cudaGraphNodeType t1 = cudaGraphNodeTypeEmpty, t2 = cudaGraphNodeTypeEmpty;
    check(cudaGraphNodeGetType(a, &t1) == cudaSuccess && t1 == cudaGraphNodeTypeHost,
          "step: a host node's type", "type %d", (int)t1);
    check(cudaGraphNodeGetType(h2d, &t2) == cudaSuccess && t2 == cudaGraphNodeTypeMemcpy,
          "step: a host copy node's type is memcpy", "type %d", (int)t2);
    size_t count = 0;
    check(cudaGraphGetNodes(g, NULL, &count) == cudaSuccess && count == 7,
          "step: the graph holds seven nodes", "%zu", count);

    check_cuda(cudaGraphInstantiate(&x, g, 0), "step: cudaGraphInstantiate");
    for (int i = 0; i < LAUNCHES; i++)
        check_cuda(cudaGraphLaunch(x, stream), "step: cudaGraphLaunch");
    check_cuda(cudaStreamSynchronize(stream), "step: cudaStreamSynchronize");
    char want[128];
    check(strcmp(s.trace.order, repeated(want, sizeof want, "ABC", LAUNCHES)) == 0,
          "step: host nodes ran in graph order, once per launch", "order %s", s.trace.order);
    int ok = 1;
    for (int i = 0; i < LAUNCHES; i++)
        ok &= s.seen[i] == 2 * 10 * (i + 1) + 1;
    check(ok && s.uniform, "step: each launch's copies read and wrote host memory when they ran",
          "seen %d %d %d %d %d", s.seen[0], s.seen[1], s.seen[2], s.seen[3], s.seen[4]);
    check(s.trace.ran_elsewhere, "step: host functions ran on another thread", "main's");
    int bad = 0;
    check(all_equal(s.out, 2 * 10 * LAUNCHES + 1, &bad), "step: out holds the last launch's",
          "out[%d] = %d", bad, s.out[bad]);

    const char *path = "graph_host.dot";
    check_cuda(cudaGraphDebugDotPrint(g, path, cudaGraphDebugDotFlagsVerbose),
               "step: cudaGraphDebugDotPrint");
    FILE *f = fopen(path, "r");
    char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[len] = 0;
    remove(path);
    check(strstr(text, "digraph") != NULL, "step: the dot file describes the graph",
          "%zu bytes", len);

    check_cuda(cudaGraphExecDestroy(x), "step: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "step: cudaGraphDestroy");
    cudaFree(d_in);
    cudaFree(d_mid);
    cudaFreeHost(s.in);
    cudaFreeHost(s.out);
}

// ---- a decode loop: the host buffer changes between launches ---------------------------

// tokens -> device -> k_double -> back: each launch copies what the host
// buffer holds when it runs.  Halfway the executable graph's copy is moved
// to a second host buffer (cudaGraphExecMemcpyNodeSetParams1D).
static void test_decode(cudaStream_t stream)
{
    int *tok, *tok2, *res, *d_tok, *d_res, n = N;
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaGraphNode_t up, k, down;
    check_cuda(cudaMallocHost(&tok, N * sizeof(int)), "decode: cudaMallocHost tokens");
    check_cuda(cudaMallocHost(&tok2, N * sizeof(int)), "decode: cudaMallocHost tokens 2");
    check_cuda(cudaMallocHost(&res, N * sizeof(int)), "decode: cudaMallocHost results");
    check_cuda(cudaMalloc(&d_tok, N * sizeof(int)), "decode: cudaMalloc tokens");
    check_cuda(cudaMalloc(&d_res, N * sizeof(int)), "decode: cudaMalloc results");
    check_cuda(cudaGraphCreate(&g, 0), "decode: cudaGraphCreate");
    check_cuda(cudaGraphAddMemcpyNode1D(&up, g, NULL, 0, d_tok, tok, N * sizeof(int),
                                        cudaMemcpyHostToDevice),
               "decode: copy node up");
    void *args[] = { &d_res, &d_tok, &n };
    struct cudaKernelNodeParams kp = kernel_node((void *)k_double, args);
    check_cuda(cudaGraphAddKernelNode(&k, g, &up, 1, &kp), "decode: kernel node");
    check_cuda(cudaGraphAddMemcpyNode1D(&down, g, &k, 1, res, d_res, N * sizeof(int),
                                        cudaMemcpyDeviceToHost),
               "decode: copy node down");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "decode: cudaGraphInstantiate");
    int ok = 1, bad = 0, first_bad = -1;
    for (int step = 0; step < 2 * LAUNCHES; step++) {
        int *src = step < LAUNCHES ? tok : tok2;
        if (step == LAUNCHES)
            ok &= cudaGraphExecMemcpyNodeSetParams1D(x, up, d_tok, tok2, N * sizeof(int),
                                                     cudaMemcpyHostToDevice) == cudaSuccess;
        for (int i = 0; i < N; i++) {
            src[i] = 3 * step + i % 7;
            (step < LAUNCHES ? tok2 : tok)[i] = -1;     // the buffer not in use
        }
        ok &= cudaGraphLaunch(x, stream) == cudaSuccess;
        ok &= cudaStreamSynchronize(stream) == cudaSuccess;
        for (int i = 0; i < N; i++)
            if (res[i] != 2 * (3 * step + i % 7) && first_bad < 0) {
                first_bad = step;
                bad = i;
            }
    }
    check(ok && first_bad < 0, "decode: every launch copied the host buffer as it was then",
          "step %d element %d is %d", first_bad, bad, first_bad < 0 ? 0 : res[bad]);
    check_cuda(cudaGraphExecDestroy(x), "decode: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "decode: cudaGraphDestroy");
    cudaFree(d_tok);
    cudaFree(d_res);
    cudaFreeHost(tok);
    cudaFreeHost(tok2);
    cudaFreeHost(res);
}

// ---- setters: another function, another host pointer -------------------------------------

static void CUDART_CB letter_a(void *arg) { trace_add((struct trace *)arg, 'a'); }
static void CUDART_CB letter_b(void *arg) { trace_add((struct trace *)arg, 'b'); }

static void test_setters(cudaStream_t stream)
{
    struct trace t1, t2;
    int *d, *out1, *out2;
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaGraphNode_t h, fill, down;
    uint32_t v = 7;
    unsigned long long n = N;
    trace_init(&t1);
    trace_init(&t2);
    check_cuda(cudaMalloc(&d, N * sizeof(int)), "setters: cudaMalloc");
    check_cuda(cudaMallocHost(&out1, N * sizeof(int)), "setters: cudaMallocHost 1");
    check_cuda(cudaMallocHost(&out2, N * sizeof(int)), "setters: cudaMallocHost 2");
    memset(out1, 0, N * sizeof(int));
    memset(out2, 0, N * sizeof(int));
    check_cuda(cudaGraphCreate(&g, 0), "setters: cudaGraphCreate");
    struct cudaHostNodeParams hp = { letter_a, &t1 };
    check_cuda(cudaGraphAddHostNode(&h, g, NULL, 0, &hp), "setters: host node");
    void *args[] = { &d, &v, &n };
    struct cudaKernelNodeParams kp = kernel_node((void *)k_fill_u32, args);
    check_cuda(cudaGraphAddKernelNode(&fill, g, &h, 1, &kp), "setters: kernel node");
    check_cuda(cudaGraphAddMemcpyNode1D(&down, g, &fill, 1, out1, d, N * sizeof(int),
                                        cudaMemcpyDeviceToHost),
               "setters: copy node down");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "setters: cudaGraphInstantiate");
    check_cuda(cudaGraphLaunch(x, stream), "setters: launch 1");
    check_cuda(cudaStreamSynchronize(stream), "setters: sync 1");
    struct cudaHostNodeParams b = { letter_b, &t2 };
    check_cuda(cudaGraphExecHostNodeSetParams(x, h, &b), "setters: cudaGraphExecHostNodeSetParams");
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(x, down, out2, d, N * sizeof(int),
                                                  cudaMemcpyDeviceToHost),
               "setters: cudaGraphExecMemcpyNodeSetParams1D to another host buffer");
    check_cuda(cudaGraphLaunch(x, stream), "setters: launch 2");
    check_cuda(cudaStreamSynchronize(stream), "setters: sync 2");
    check(strcmp(t1.order, "a") == 0 && strcmp(t2.order, "b") == 0,
          "setters: the executable graph runs the new function with its data",
          "first %s, second %s", t1.order, t2.order);
    int bad = 0;
    check(all_equal(out1, 7, &bad) && all_equal(out2, 7, &bad),
          "setters: each launch wrote the host buffer its node named", "element %d", bad);
    struct cudaHostNodeParams got = { NULL, NULL };
    check(cudaGraphHostNodeGetParams(h, &got) == cudaSuccess && got.fn == letter_a &&
              got.userData == &t1,
          "setters: the graph's own node keeps its function", "another");
    check_cuda(cudaGraphHostNodeSetParams(h, &b), "setters: cudaGraphHostNodeSetParams");
    check(cudaGraphHostNodeGetParams(h, &got) == cudaSuccess && got.fn == letter_b &&
              got.userData == &t2,
          "setters: cudaGraphHostNodeGetParams answers the new function", "the old one");
    check_cuda(cudaGraphExecDestroy(x), "setters: cudaGraphExecDestroy");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "setters: instantiate again");
    check_cuda(cudaGraphLaunch(x, stream), "setters: launch 3");
    check_cuda(cudaStreamSynchronize(stream), "setters: sync 3");
    check(strcmp(t1.order, "a") == 0 && strcmp(t2.order, "bb") == 0,
          "setters: a graph set anew instantiates the new function", "first %s, second %s",
          t1.order, t2.order);
    check_cuda(cudaGraphExecDestroy(x), "setters: cudaGraphExecDestroy 2");
    check_cuda(cudaGraphDestroy(g), "setters: cudaGraphDestroy");
    cudaFree(d);
    cudaFreeHost(out1);
    cudaFreeHost(out2);
}

// ---- clones, child graphs, updates -------------------------------------------------------

// A host node and a copy of d to the host buffer behind it.
static cudaGraph_t host_then_copy(struct trace *t, void (*fn)(void *), int *d, int *host,
                                  cudaGraphNode_t *hnode)
{
    cudaGraph_t g = NULL;
    cudaGraphNode_t h, c;
    struct cudaHostNodeParams hp = { fn, t };
    check_cuda(cudaGraphCreate(&g, 0), "shapes: cudaGraphCreate");
    check_cuda(cudaGraphAddHostNode(&h, g, NULL, 0, &hp), "shapes: host node");
    check_cuda(cudaGraphAddMemcpyNode1D(&c, g, &h, 1, host, d, N * sizeof(int),
                                        cudaMemcpyDeviceToHost),
               "shapes: copy node");
    if (hnode)
        *hnode = h;
    return g;
}

static void launch_and_wait(cudaGraphExec_t x, cudaStream_t stream, const char *name)
{
    check(cudaGraphLaunch(x, stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess,
          name, "failed");
}

static void CUDART_CB letter_p(void *arg) { trace_add((struct trace *)arg, 'p'); }

static void test_shapes(cudaStream_t stream)
{
    struct trace t1, t2, tp;
    int *d, *h1, *h2, bad = 0;
    cudaGraphExec_t x;
    trace_init(&t1);
    trace_init(&t2);
    trace_init(&tp);
    check_cuda(cudaMalloc(&d, N * sizeof(int)), "shapes: cudaMalloc");
    check_cuda(cudaMemset(d, 0, N * sizeof(int)), "shapes: cudaMemset");
    check_cuda(cudaMallocHost(&h1, N * sizeof(int)), "shapes: cudaMallocHost 1");
    check_cuda(cudaMallocHost(&h2, N * sizeof(int)), "shapes: cudaMallocHost 2");
    memset(h1, 0x55, N * sizeof(int));
    memset(h2, 0x55, N * sizeof(int));
    cudaGraph_t g = host_then_copy(&t1, letter_a, d, h1, NULL);

    // A clone runs the same host nodes.
    cudaGraph_t clone = NULL;
    check_cuda(cudaGraphClone(&clone, g), "shapes: cudaGraphClone");
    check_cuda(cudaGraphInstantiate(&x, clone, 0), "shapes: instantiate the clone");
    launch_and_wait(x, stream, "shapes: launch the clone");
    check(strcmp(t1.order, "a") == 0 && all_equal(h1, 0, &bad),
          "shapes: the clone's host node and host copy ran", "order %s", t1.order);
    check_cuda(cudaGraphExecDestroy(x), "shapes: cudaGraphExecDestroy clone");
    check_cuda(cudaGraphDestroy(clone), "shapes: cudaGraphDestroy clone");

    // As a child graph, before a host node of the parent.
    cudaGraph_t parent = NULL;
    cudaGraphNode_t child, after;
    check_cuda(cudaGraphCreate(&parent, 0), "shapes: cudaGraphCreate parent");
    check_cuda(cudaGraphAddChildGraphNode(&child, parent, NULL, 0, g), "shapes: child graph node");
    struct cudaHostNodeParams hp = { letter_p, &tp };
    check_cuda(cudaGraphAddHostNode(&after, parent, &child, 1, &hp), "shapes: parent host node");
    check_cuda(cudaGraphInstantiate(&x, parent, 0), "shapes: instantiate the parent");
    launch_and_wait(x, stream, "shapes: launch the parent");
    check(strcmp(t1.order, "aa") == 0 && strcmp(tp.order, "p") == 0,
          "shapes: the child graph's host node ran, then the parent's", "child %s, parent %s",
          t1.order, tp.order);
    check_cuda(cudaGraphExecDestroy(x), "shapes: cudaGraphExecDestroy parent");
    check_cuda(cudaGraphDestroy(parent), "shapes: cudaGraphDestroy parent");

    // An update with a graph of the same shape: its function and host
    // buffer from then on.
    check_cuda(cudaGraphInstantiate(&x, g, 0), "shapes: instantiate");
    cudaGraph_t g2 = host_then_copy(&t2, letter_b, d, h2, NULL);
    check_cuda(cudaMemset(d, 0x11, N * sizeof(int)), "shapes: cudaMemset 0x11");
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    check(cudaGraphExecUpdate(x, g2, &info) == cudaSuccess &&
              info.result == cudaGraphExecUpdateSuccess,
          "shapes: cudaGraphExecUpdate with host nodes", "result %d", (int)info.result);
    launch_and_wait(x, stream, "shapes: launch the updated graph");
    check(strcmp(t1.order, "aa") == 0 && strcmp(t2.order, "b") == 0 &&
              all_equal(h2, 0x11111111, &bad),
          "shapes: the update's host node and host buffer ran", "first %s, second %s",
          t1.order, t2.order);
    check_cuda(cudaGraphExecDestroy(x), "shapes: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g2), "shapes: cudaGraphDestroy 2");
    check_cuda(cudaGraphDestroy(g), "shapes: cudaGraphDestroy");
    cudaFree(d);
    cudaFreeHost(h1);
    cudaFreeHost(h2);
}

// ---- node records ------------------------------------------------------------------------------

static void test_records(cudaStream_t stream)
{
    struct trace t1, t2;
    cudaGraph_t g;
    cudaGraphNode_t h;
    cudaGraphExec_t x;
    trace_init(&t1);
    trace_init(&t2);
    check_cuda(cudaGraphCreate(&g, 0), "records: cudaGraphCreate");
    struct cudaGraphNodeParams p = { cudaGraphNodeTypeHost };
    p.host.fn = letter_a;
    p.host.userData = &t1;
    check_cuda(cudaGraphAddNode(&h, g, NULL, NULL, 0, &p), "records: cudaGraphAddNode host");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "records: cudaGraphInstantiate");
    launch_and_wait(x, stream, "records: launch 1");
    p.host.fn = letter_b;
    p.host.userData = &t2;
    check_cuda(cudaGraphExecNodeSetParams(x, h, &p), "records: cudaGraphExecNodeSetParams host");
    launch_and_wait(x, stream, "records: launch 2");
    p.host.fn = letter_a;
    p.host.userData = &t2;
    check_cuda(cudaGraphNodeSetParams(h, &p), "records: cudaGraphNodeSetParams host");
    check(strcmp(t1.order, "a") == 0 && strcmp(t2.order, "b") == 0,
          "records: host nodes through node records", "first %s, second %s", t1.order, t2.order);
    check_cuda(cudaGraphExecDestroy(x), "records: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "records: cudaGraphDestroy");
}

// ---- a synchronise waits for the graph's host nodes ---------------------------------------

static int slow_done;

static void CUDART_CB slow_host(void *arg)
{
    (void)arg;
    sleep_ms(100);
    __atomic_store_n(&slow_done, __atomic_load_n(&slow_done, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELEASE);
}

// The synchronise after a launch, and an event recorded after it, return
// only once the host node has returned; an executable graph destroyed
// while it runs still runs its host node once.
static void test_waits(cudaStream_t stream)
{
    cudaGraph_t g;
    cudaGraphNode_t h;
    cudaGraphExec_t x;
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "waits: cudaEventCreate");
    check_cuda(cudaGraphCreate(&g, 0), "waits: cudaGraphCreate");
    struct cudaHostNodeParams hp = { slow_host, NULL };
    check_cuda(cudaGraphAddHostNode(&h, g, NULL, 0, &hp), "waits: host node");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "waits: cudaGraphInstantiate");
    check_cuda(cudaGraphLaunch(x, stream), "waits: launch");
    check_cuda(cudaStreamSynchronize(stream), "waits: cudaStreamSynchronize");
    check(__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE) == 1,
          "waits: the synchronise returned after the host node", "%d done", slow_done);
    check_cuda(cudaGraphLaunch(x, stream), "waits: launch 2");
    check_cuda(cudaEventRecord(ev, stream), "waits: cudaEventRecord");
    check_cuda(cudaEventSynchronize(ev), "waits: cudaEventSynchronize");
    check(__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE) == 2,
          "waits: the event after the graph waited for its host node", "%d done", slow_done);
    check_cuda(cudaGraphLaunch(x, stream), "waits: launch 3");
    check_cuda(cudaGraphExecDestroy(x), "waits: cudaGraphExecDestroy while it runs");
    check_cuda(cudaGraphDestroy(g), "waits: cudaGraphDestroy while it runs");
    check_cuda(cudaStreamSynchronize(stream), "waits: cudaStreamSynchronize 3");
    check(__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE) == 3,
          "waits: a destroyed executable graph's host node ran once", "%d done", slow_done);
    check_cuda(cudaEventDestroy(ev), "waits: cudaEventDestroy");
}

// ---- stream capture ---------------------------------------------------------------------------

static void CUDART_CB count_calls(void *arg)
{
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
}

// A captured stream's host function and copies with host memory: nodes
// that run, and move the bytes, each time the graph does.  A device
// without stream capture (the fake GPU) says so and stops here.
static void test_capture(cudaStream_t stream)
{
    int *in, *out, *d_in, *d_out, n = N, calls = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x;
    check_cuda(cudaMallocHost(&in, N * sizeof(int)), "capture: cudaMallocHost in");
    check_cuda(cudaMallocHost(&out, N * sizeof(int)), "capture: cudaMallocHost out");
    check_cuda(cudaMalloc(&d_in, N * sizeof(int)), "capture: cudaMalloc in");
    check_cuda(cudaMalloc(&d_out, N * sizeof(int)), "capture: cudaMalloc out");
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    if (e == cudaErrorNotSupported || e == cudaErrorSymbolNotFound) {
        printf("skip capture of host functions and host copies: %s (no stream capture on "
               "this device)\n", cudaGetErrorName(e));
        cudaGetLastError();
        goto out;
    }
    check_cuda(e, "capture: cudaStreamBeginCapture");
    check_cuda(cudaMemcpyAsync(d_in, in, N * sizeof(int), cudaMemcpyHostToDevice, stream),
               "capture: cudaMemcpyAsync from host memory");
    k_double<<<BLOCKS, THREADS, 0, stream>>>(d_out, d_in, n);
    check_cuda(cudaLaunchHostFunc(stream, count_calls, &calls), "capture: cudaLaunchHostFunc");
    check_cuda(cudaMemcpyAsync(out, d_out, N * sizeof(int), cudaMemcpyDeviceToHost, stream),
               "capture: cudaMemcpyAsync to host memory");
    check_cuda(cudaStreamEndCapture(stream, &g), "capture: cudaStreamEndCapture");
    {
        size_t count = 8;
        cudaGraphNode_t nodes[8];
        int host = 0, copies = 0, kernels = 0;
        check_cuda(cudaGraphGetNodes(g, nodes, &count), "capture: cudaGraphGetNodes");
        for (size_t i = 0; i < count; i++) {
            enum cudaGraphNodeType t = cudaGraphNodeTypeEmpty;
            cudaGraphNodeGetType(nodes[i], &t);
            host += t == cudaGraphNodeTypeHost;
            copies += t == cudaGraphNodeTypeMemcpy;
            kernels += t == cudaGraphNodeTypeKernel;
        }
        check(count == 4 && host == 1 && copies == 2 && kernels == 1,
              "capture: two copy nodes, a kernel and a host node", "%zu nodes: %d %d %d", count,
              host, copies, kernels);
        check_cuda(cudaGraphInstantiate(&x, g, 0), "capture: cudaGraphInstantiate");
        int ok = 1, first_bad = -1;
        for (int step = 0; step < LAUNCHES; step++) {
            for (int i = 0; i < N; i++)
                in[i] = step * 5 + i;
            ok &= cudaGraphLaunch(x, stream) == cudaSuccess;
            ok &= cudaStreamSynchronize(stream) == cudaSuccess;
            for (int i = 0; i < N && first_bad < 0; i++)
                if (out[i] != 2 * (step * 5 + i))
                    first_bad = step;
        }
        check(ok && first_bad < 0 && calls == LAUNCHES,
              "capture: each launch ran the host function and copied the host buffers",
              "step %d, %d calls", first_bad, calls);
        check_cuda(cudaGraphExecDestroy(x), "capture: cudaGraphExecDestroy");
        check_cuda(cudaGraphDestroy(g), "capture: cudaGraphDestroy");
    }
out:
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFreeHost(in);
    cudaFreeHost(out);
}

// ---- the driver API ------------------------------------------------------------------------------

static void CUDA_CB driver_letter(void *arg) { trace_add((struct trace *)arg, 'd'); }
static void CUDA_CB driver_letter2(void *arg) { trace_add((struct trace *)arg, 'e'); }

static void test_driver(cudaStream_t stream)
{
    struct trace t1, t2;
    CUgraph g;
    CUgraphNode h, up, down;
    CUgraphExec x;
    CUcontext ctx = NULL;
    CUdeviceptr d;
    int *in, *out, bad = 0;
    trace_init(&t1);
    trace_init(&t2);
    check_cu(cuCtxGetCurrent(&ctx), "driver: cuCtxGetCurrent");
    check_cu(cuMemAlloc(&d, N * sizeof(int)), "driver: cuMemAlloc");
    check_cuda(cudaMallocHost(&in, N * sizeof(int)), "driver: cudaMallocHost in");
    check_cuda(cudaMallocHost(&out, N * sizeof(int)), "driver: cudaMallocHost out");
    check_cu(cuGraphCreate(&g, 0), "driver: cuGraphCreate");
    CUDA_HOST_NODE_PARAMS hp = { driver_letter, &t1 };
    check_cu(cuGraphAddHostNode(&h, g, NULL, 0, &hp), "driver: cuGraphAddHostNode");
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = in;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.WidthInBytes = N * sizeof(int);
    c.Height = c.Depth = 1;
    check_cu(cuGraphAddMemcpyNode(&up, g, &h, 1, &c, ctx), "driver: cuGraphAddMemcpyNode up");
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = d;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = out;
    c.WidthInBytes = N * sizeof(int);
    c.Height = c.Depth = 1;
    check_cu(cuGraphAddMemcpyNode(&down, g, &up, 1, &c, ctx), "driver: cuGraphAddMemcpyNode down");
    CUgraphNodeType type;
    check(cuGraphNodeGetType(up, &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_MEMCPY,
          "driver: a host copy node's type is memcpy", "type %d", (int)type);
    check_cu(cuGraphInstantiateWithFlags(&x, g, 0), "driver: cuGraphInstantiateWithFlags");
    for (int i = 0; i < N; i++)
        in[i] = 4 * i;
    check_cu(cuGraphLaunch(x, (CUstream)stream), "driver: cuGraphLaunch");
    check_cu(cuStreamSynchronize((CUstream)stream), "driver: cuStreamSynchronize");
    bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (out[i] != 4 * i)
            bad = i;
    check(bad < 0 && strcmp(t1.order, "d") == 0, "driver: the host node ran and the bytes went round",
          "element %d, order %s", bad, t1.order);
    CUDA_HOST_NODE_PARAMS got = { NULL, NULL };
    check(cuGraphHostNodeGetParams(h, &got) == CUDA_SUCCESS && got.fn == driver_letter &&
              got.userData == &t1,
          "driver: cuGraphHostNodeGetParams", "another function");
    CUDA_HOST_NODE_PARAMS other = { driver_letter2, &t2 };
    check_cu(cuGraphExecHostNodeSetParams(x, h, &other), "driver: cuGraphExecHostNodeSetParams");
    check_cu(cuGraphLaunch(x, (CUstream)stream), "driver: cuGraphLaunch 2");
    check_cu(cuStreamSynchronize((CUstream)stream), "driver: cuStreamSynchronize 2");
    check(strcmp(t1.order, "d") == 0 && strcmp(t2.order, "e") == 0,
          "driver: the executable graph's new function ran", "first %s, second %s", t1.order,
          t2.order);
    check_cu(cuGraphHostNodeSetParams(h, &other), "driver: cuGraphHostNodeSetParams");
    check_cu(cuGraphExecDestroy(x), "driver: cuGraphExecDestroy");
    check_cu(cuGraphDestroy(g), "driver: cuGraphDestroy");
    cuMemFree(d);
    cudaFreeHost(in);
    cudaFreeHost(out);
}

// ---- bad inputs (rgpu only: undefined or served natively) ---------------------------------

static void test_bad_inputs(cudaStream_t stream)
{
    struct trace t;
    cudaGraph_t g, dead;
    cudaGraphNode_t node, up;
    cudaGraphExec_t x;
    int *d, *host;
    (void)stream;
    trace_init(&t);
    check_cuda(cudaMalloc(&d, N * sizeof(int)), "bad: cudaMalloc");
    check_cuda(cudaMallocHost(&host, N * sizeof(int)), "bad: cudaMallocHost");
    check_cuda(cudaGraphCreate(&dead, 0), "bad: cudaGraphCreate");
    check_cuda(cudaGraphDestroy(dead), "bad: cudaGraphDestroy");
    struct cudaHostNodeParams hp = { letter_a, &t };
    check_err(cudaGraphAddHostNode(&node, dead, NULL, 0, &hp), cudaErrorInvalidResourceHandle,
              "bad: a host node on a destroyed graph");
    cudaGetLastError();
    check_cuda(cudaGraphCreate(&g, 0), "bad: cudaGraphCreate 2");
    struct cudaHostNodeParams none = { NULL, &t };
    check_err(cudaGraphAddHostNode(&node, g, NULL, 0, &none), cudaErrorInvalidValue,
              "bad: a host node without a function");
    cudaGetLastError();
    check_err(cudaGraphAddMemcpyNode1D(&node, g, NULL, 0, d + 1, host, N * sizeof(int),
                                       cudaMemcpyHostToDevice),
              cudaErrorInvalidValue, "bad: a host copy past the end of its device memory");
    cudaGetLastError();
    static int a[N], b[N];
    check_err(cudaGraphAddMemcpyNode1D(&node, g, NULL, 0, a, b, sizeof a, cudaMemcpyHostToHost),
              cudaErrorNotSupported, "bad: a graph copy from host to host (not remoted)");
    cudaGetLastError();
    size_t huge = (size_t)65 << 20;
    char *big = (char *)malloc(huge), *dbig = NULL;
    check_cuda(cudaMalloc(&dbig, huge), "bad: cudaMalloc 65 MiB");
    check_err(cudaGraphAddMemcpyNode1D(&node, g, NULL, 0, dbig, big, huge,
                                       cudaMemcpyHostToDevice),
              cudaErrorNotSupported, "bad: a host copy node larger than a frame carries");
    cudaGetLastError();
    free(big);
    cudaFree(dbig);
    check_cuda(cudaGraphAddMemcpyNode1D(&up, g, NULL, 0, d, host, N * sizeof(int),
                                        cudaMemcpyHostToDevice),
               "bad: a host copy node");
    int *d2;
    check_cuda(cudaMalloc(&d2, N * sizeof(int)), "bad: cudaMalloc 2");
    check_err(cudaGraphMemcpyNodeSetParams1D(up, d2, d, N * sizeof(int),
                                             cudaMemcpyDeviceToDevice),
              cudaErrorNotSupported, "bad: a host copy node given device-only parameters");
    cudaGetLastError();
    check_cuda(cudaGraphInstantiate(&x, g, 0), "bad: cudaGraphInstantiate");
    check_err(cudaGraphExecMemcpyNodeSetParams1D(x, up, host, d, N * sizeof(int),
                                                 cudaMemcpyDeviceToHost),
              cudaErrorInvalidValue, "bad: an executable graph's host copy turned around");
    cudaGetLastError();
    check_err(cudaGraphHostNodeGetParams(up, &hp), cudaErrorInvalidValue,
              "bad: a copy node's host parameters");
    cudaGetLastError();
    check_cuda(cudaGraphExecDestroy(x), "bad: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "bad: cudaGraphDestroy 2");
    cudaFree(d);
    cudaFree(d2);
    cudaFreeHost(host);
}

// ---- a client that dies inside a host node ------------------------------------------------

static void CUDART_CB die(void *arg)
{
    (void)arg;
    _exit(7);
}

// The child dies while the server's graph waits for its host node; the
// parent, a session of its own, is served as before.
static void test_client_dies(cudaStream_t *stream)
{
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        cudaGraph_t g;
        cudaGraphNode_t h;
        cudaGraphExec_t x;
        struct cudaHostNodeParams hp = { die, NULL };
        if (cudaGraphCreate(&g, 0) == cudaSuccess &&
            cudaGraphAddHostNode(&h, g, NULL, 0, &hp) == cudaSuccess &&
            cudaGraphInstantiate(&x, g, 0) == cudaSuccess && cudaGraphLaunch(x, 0) == cudaSuccess)
            cudaStreamSynchronize(0);
        _exit(3);       // the host node never ran
    }
    int status = 0;
    check(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
              WEXITSTATUS(status) == 7,
          "dies: the child died inside its host node", "status %d", status);
    check_cuda(cudaStreamCreate(stream), "dies: cudaStreamCreate after");
    test_records(*stream);
}

int main(int argc, char **argv)
{
    cudaStream_t stream = NULL;
    main_thread = pthread_self();
    if (argc > 1 && strcmp(argv[1], "client-dies") == 0) {
        test_client_dies(&stream);
        return check_exit_status();
    }
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    if (argc > 1 && strcmp(argv[1], "bad-inputs") == 0) {
        test_bad_inputs(stream);
        return check_exit_status();
    }
    test_step(stream);
    test_decode(stream);
    test_setters(stream);
    test_shapes(stream);
    test_records(stream);
    test_waits(stream);
    test_capture(stream);
    test_driver(stream);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}
