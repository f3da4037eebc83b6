// Conditional graph nodes, as XLA's command buffers and hand-built decode
// loops use them: a while loop whose body counts down on the GPU, an if
// with an else branch and a switch chosen by a kernel from device memory,
// each made through a node record (cudaGraphAddNode, kernel nodes too),
// launched twice with other data; the driver's record
// (cuGraphAddNode_v2, with edge data) for a kernel node and a while loop.
//
//   graph_conditional              the above (the same output natively)
//   graph_conditional bad-handles  also: a conditional handle made for
//                                  another graph and a forged one refused,
//                                  a body graph refused to cudaGraphDestroy,
//                                  and a destroyed graph's body forgotten
//                                  (undefined natively: rgpu only)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"

#define N 256

struct data {
    int *left, *x, *sel, *sel2;
    uint32_t *out, *out2;
};

static struct cudaGraphNodeParams kernel_record(void *func, void **args)
{
    struct cudaGraphNodeParams p = { cudaGraphNodeTypeKernel };
    p.kernel.func = func;
    p.kernel.gridDim = dim3(1);
    p.kernel.blockDim = dim3(32);
    p.kernel.kernelParams = args;
    return p;
}

static struct cudaGraphNodeParams conditional_record(cudaGraphConditionalHandle h,
                                                     enum cudaGraphConditionalNodeType type,
                                                     unsigned size)
{
    struct cudaGraphNodeParams p = { cudaGraphNodeTypeConditional };
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    return p;
}

// A kernel node filling n words of p with v, in graph g after dep (or none).
static bool add_fill(cudaGraph_t g, cudaGraphNode_t *dep, uint32_t *p, uint32_t v,
                     const char *name)
{
    static uint32_t vals[16];
    static uint32_t *ptrs[16];
    static unsigned long long n = N;
    static int used;
    int i = used++ % 16;
    vals[i] = v;
    ptrs[i] = p;
    void *args[] = { &ptrs[i], &vals[i], &n };
    struct cudaGraphNodeParams k = kernel_record((void *)k_fill_u32, args);
    k.kernel.gridDim = dim3((N + 127) / 128);
    k.kernel.blockDim = dim3(128);
    cudaGraphNode_t node;
    return check_cuda(cudaGraphAddNode(&node, g, dep, NULL, dep ? 1 : 0, &k), name);
}

static bool check_words(const uint32_t *d, uint32_t want, const char *name)
{
    static uint32_t h[N];
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int i = 0;
    while (e == cudaSuccess && i < N && h[i] == want)
        i++;
    return check(e == cudaSuccess && i == N, name, "%s, element %d is %u, want %u",
                 cudaGetErrorName(e), i, i < N ? h[i] : 0, want);
}

static int read_int(const int *d)
{
    int v = -1;
    cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);
    return v;
}

// while (left) { x++; left--; } -> if (sel) out = 1 else out = 2 -> switch (sel2) out2 = 10 + case
static cudaGraph_t build(struct data *d, cudaGraph_t *while_body)
{
    cudaGraph_t g;
    cudaGraphNode_t w, s, i, s2, sw;
    cudaGraphConditionalHandle hw, hi, hs;
    if (!check_cuda(cudaGraphCreate(&g, 0), "cudaGraphCreate"))
        return NULL;
    check_cuda(cudaGraphConditionalHandleCreate(&hw, g, 1, cudaGraphCondAssignDefault),
               "cudaGraphConditionalHandleCreate while (default 1, assigned each launch)");
    check_cuda(cudaGraphConditionalHandleCreate(&hi, g, 0, 0),
               "cudaGraphConditionalHandleCreate if");
    check_cuda(cudaGraphConditionalHandleCreate(&hs, g, 0, 0),
               "cudaGraphConditionalHandleCreate switch");

    struct cudaGraphNodeParams wr = conditional_record(hw, cudaGraphCondTypeWhile, 1);
    check_cuda(cudaGraphAddNode(&w, g, NULL, NULL, 0, &wr), "cudaGraphAddNode while");
    *while_body = wr.conditional.phGraph_out[0];
    void *count_args[] = { &d->left, &d->x, &hw };
    struct cudaGraphNodeParams k = kernel_record((void *)k_count_down, count_args);
    cudaGraphNode_t step;
    check_cuda(cudaGraphAddNode(&step, *while_body, NULL, NULL, 0, &k),
               "cudaGraphAddNode kernel record in the while body");

    void *sel_args[] = { &d->sel, &hi };
    k = kernel_record((void *)k_set_cond, sel_args);
    check_cuda(cudaGraphAddNode(&s, g, &w, NULL, 1, &k), "cudaGraphAddNode kernel record");
    struct cudaGraphNodeParams ir = conditional_record(hi, cudaGraphCondTypeIf, 2);
    check_cuda(cudaGraphAddNode(&i, g, &s, NULL, 1, &ir), "cudaGraphAddNode if with else");
    add_fill(ir.conditional.phGraph_out[0], NULL, d->out, 1, "fill node in the if branch");
    add_fill(ir.conditional.phGraph_out[1], NULL, d->out, 2, "fill node in the else branch");

    void *sel2_args[] = { &d->sel2, &hs };
    k = kernel_record((void *)k_set_cond, sel2_args);
    // Edge data given, all default: the same graph as without.
    cudaGraphEdgeData plain;
    memset(&plain, 0, sizeof plain);
    check_cuda(cudaGraphAddNode(&s2, g, &i, &plain, 1, &k),
               "cudaGraphAddNode kernel record with default edge data");
    struct cudaGraphNodeParams sr = conditional_record(hs, cudaGraphCondTypeSwitch, 3);
    check_cuda(cudaGraphAddNode(&sw, g, &s2, NULL, 1, &sr), "cudaGraphAddNode switch of 3");
    for (unsigned c = 0; c < 3; c++) {
        char name[64];
        add_fill(sr.conditional.phGraph_out[c], NULL, d->out2, 10 + c,
                 fmt_name(name, sizeof name, "fill node in switch case %u", c));
    }
    return g;
}

static void run_once(cudaGraphExec_t e, struct data *d, int left, int sel, int sel2)
{
    char name[96];
    cudaMemcpy(d->left, &left, sizeof left, cudaMemcpyHostToDevice);
    cudaMemcpy(d->sel, &sel, sizeof sel, cudaMemcpyHostToDevice);
    cudaMemcpy(d->sel2, &sel2, sizeof sel2, cudaMemcpyHostToDevice);
    cudaMemset(d->x, 0, sizeof(int));
    cudaMemset(d->out2, 0, N * sizeof(uint32_t));
    check_cuda(cudaGraphLaunch(e, 0), fmt_name(name, sizeof name, "cudaGraphLaunch (left %d)", left));
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    int x = read_int(d->x);
    check(x == left, fmt_name(name, sizeof name, "while loop ran %d times", left), "ran %d", x);
    check_words(d->out, sel ? 1 : 2, fmt_name(name, sizeof name, "if (%d) took its %s branch",
                                              sel, sel ? "then" : "else"));
    check_words(d->out2, sel2 < 3 ? 10 + (uint32_t)sel2 : 0,
                fmt_name(name, sizeof name, "switch (%d) ran %s", sel2,
                         sel2 < 3 ? "its case" : "no case"));
}

// The driver's record: a kernel node with edge data, and a while loop
// whose body is that kind of node too.
static void driver_records(struct data *d)
{
    CUgraph g;
    CUgraphNode w, step;
    CUgraphConditionalHandle h;
    CUcontext ctx;
    check(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx, "cuCtxGetCurrent", "no context");
    check(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate", "failed");
    check(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT) ==
              CUDA_SUCCESS, "cuGraphConditionalHandleCreate", "failed");
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 1;
    p.conditional.ctx = ctx;
    CUresult r = cuGraphAddNode(&w, g, NULL, NULL, 0, &p);
    check(r == CUDA_SUCCESS, "cuGraphAddNode while", "error %d", (int)r);
    CUgraph body = p.conditional.phGraph_out[0];

    cudaFunction_t f;
    check_cuda(cudaGetFuncBySymbol(&f, (const void *)k_count_down), "cudaGetFuncBySymbol");
    void *args[] = { &d->left, &d->x, &h };
    CUgraphNodeParams k;
    memset(&k, 0, sizeof k);
    k.type = CU_GRAPH_NODE_TYPE_KERNEL;
    k.kernel.func = (CUfunction)f;
    k.kernel.gridDimX = k.kernel.gridDimY = k.kernel.gridDimZ = 1;
    k.kernel.blockDimX = 32;
    k.kernel.blockDimY = k.kernel.blockDimZ = 1;
    k.kernel.kernelParams = args;
    r = cuGraphAddNode(&step, body, NULL, NULL, 0, &k);
    check(r == CUDA_SUCCESS, "cuGraphAddNode kernel record in the body", "error %d", (int)r);

    CUgraphExec e;
    int left = 6;
    cudaMemcpy(d->left, &left, sizeof left, cudaMemcpyHostToDevice);
    cudaMemset(d->x, 0, sizeof(int));
    check(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS, "cuGraphInstantiateWithFlags",
          "failed");
    check(cuGraphLaunch(e, 0) == CUDA_SUCCESS, "cuGraphLaunch", "failed");
    check(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize", "failed");
    int x = read_int(d->x);
    check(x == 6, "driver while loop ran 6 times", "ran %d", x);
    cuGraphExecDestroy(e);
    cuGraphDestroy(g);
}

static void bad_handles(struct data *d)
{
    cudaGraph_t g, other, body;
    cudaGraphNode_t n;
    cudaGraphConditionalHandle h, theirs;
    cudaGraphCreate(&g, 0);
    cudaGraphCreate(&other, 0);
    cudaGraphConditionalHandleCreate(&h, g, 0, 0);
    cudaGraphConditionalHandleCreate(&theirs, other, 0, 0);
    struct cudaGraphNodeParams p = conditional_record(theirs, cudaGraphCondTypeIf, 1);
    check_err(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), cudaErrorInvalidValue,
              "conditional node with another graph's handle");
    p = conditional_record(h ^ 0x5a5a5a5a00ull, cudaGraphCondTypeIf, 1);
    check_err(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), cudaErrorInvalidValue,
              "conditional node with a forged handle");
    p = conditional_record(h, cudaGraphCondTypeIf, 1);
    check_cuda(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), "conditional node");
    body = p.conditional.phGraph_out[0];
    check_err(cudaGraphDestroy(body), cudaErrorInvalidValue, "cudaGraphDestroy of a body graph");
    add_fill(body, NULL, d->out, 7, "a node in the body");
    check_cuda(cudaGraphDestroy(g), "cudaGraphDestroy of its graph");
    cudaGraphNode_t late;
    check_err(cudaGraphAddEmptyNode(&late, body, NULL, 0), cudaErrorInvalidResourceHandle,
              "a node added to a destroyed graph's body");
    cudaGraphDestroy(other);
}

int main(int argc, char **argv)
{
    struct data d;
    cudaGraph_t body;
    cudaMalloc((void **)&d.left, sizeof(int));
    cudaMalloc((void **)&d.x, sizeof(int));
    cudaMalloc((void **)&d.sel, sizeof(int));
    cudaMalloc((void **)&d.sel2, sizeof(int));
    cudaMalloc((void **)&d.out, N * sizeof(uint32_t));
    check_cuda(cudaMalloc((void **)&d.out2, N * sizeof(uint32_t)), "cudaMalloc");

    cudaGraph_t g = build(&d, &body);
    cudaGraphExec_t e;
    if (g && check_cuda(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate")) {
        run_once(e, &d, 5, 1, 2);
        run_once(e, &d, 3, 0, 0);
        run_once(e, &d, 1, 1, 7);
        check_cuda(cudaGraphExecDestroy(e), "cudaGraphExecDestroy");
    }
    if (g)
        check_cuda(cudaGraphDestroy(g), "cudaGraphDestroy");
    driver_records(&d);
    if (argc > 1 && strcmp(argv[1], "bad-handles") == 0)
        bad_handles(&d);
    return check_failures ? 1 : 0;
}
