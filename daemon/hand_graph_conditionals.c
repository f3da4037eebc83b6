/* Conditional graph nodes (if, while, switch) and their handles, server
 * side: the serve_ functions of rgpu's own rgpu_graph_cond_handle,
 * rgpu_graph_cond_node and their driver twins (codegen/cudart_own.h,
 * codegen/cuda_own.h), one implementation for both (client side
 * stubs/graph_conditionals.h and the stubs' *_graph_records.c).
 *
 * A conditional node comes with body graphs the library made and owns.
 * The client fills them with nodes, so each is a graph of the session's
 * (in the handle table) while its node lives; but it is the node's, not
 * the client's: destroying it is refused, and it leaves the table with its
 * node or its node's graph, nested bodies with it.  A conditional handle
 * is a number the library gives for one graph: a node names only one the
 * session was given for that graph. */
#include "rgpud.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cudart_serve.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RT(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define MAX_BODIES RGPU_GRAPH_MAX_BODIES
#define MAX_RECORDS 65536   /* bodies and handles a session may hold */

struct body {
    uint64_t graph, node, body;     /* body of node in graph */
};

struct cond_handle {
    uint64_t graph, handle;
};

static struct {
    pthread_mutex_t lock;
    struct body *bodies;
    size_t nbodies, bodies_cap;
    struct cond_handle *handles;
    size_t nhandles, handles_cap;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint32_t H_GRAPH_NODE;

__attribute__((constructor)) static void cond_classes_init(void)
{
    H_GRAPH_NODE = rgpu_handle_class("CUgraphNode_st");
}

/* ---- the records ------------------------------------------------------------------ */

/* Room for one more record in an array of cap (doubling from 16). */
static int reserve(void **array, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return 0;
    if (count >= MAX_RECORDS)
        return -1;
    size_t more = *cap ? *cap * 2 : 16;
    void *bigger = realloc(*array, more * size);
    if (!bigger)
        return -1;
    *array = bigger;
    *cap = more;
    return 0;
}

static int remember_handle(uint64_t graph, uint64_t handle)
{
    pthread_mutex_lock(&R.lock);
    int rc = reserve((void **)&R.handles, &R.handles_cap, R.nhandles, sizeof *R.handles);
    if (rc == 0)
        R.handles[R.nhandles++] = (struct cond_handle){ graph, handle };
    pthread_mutex_unlock(&R.lock);
    return rc;
}

static int handle_of(uint64_t graph, uint64_t handle)
{
    int found = 0;
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.nhandles && !found; i++)
        found = R.handles[i].graph == graph && R.handles[i].handle == handle;
    pthread_mutex_unlock(&R.lock);
    return found;
}

static int remember_bodies(uint64_t graph, uint64_t node, const uint64_t *bodies, unsigned n)
{
    int rc = 0;
    pthread_mutex_lock(&R.lock);
    for (unsigned i = 0; i < n && rc == 0; i++) {
        rc = reserve((void **)&R.bodies, &R.bodies_cap, R.nbodies, sizeof *R.bodies);
        if (rc == 0)
            R.bodies[R.nbodies++] = (struct body){ graph, node, bodies[i] };
    }
    pthread_mutex_unlock(&R.lock);
    for (unsigned i = 0; rc == 0 && i < n; i++)
        handles_add(H_GRAPH, bodies[i]);
    return rc;
}

int graph_cond_is_body(uint64_t graph)
{
    int found = 0;
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.nbodies && !found; i++)
        found = R.bodies[i].body == graph;
    pthread_mutex_unlock(&R.lock);
    return found;
}

/* Take out one body of graph (or of node, when node is nonzero): its
 * handle, else 0. */
static uint64_t take_body(uint64_t graph, uint64_t node)
{
    uint64_t body = 0;
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.nbodies && !body; i++)
        if (node ? R.bodies[i].node == node : R.bodies[i].graph == graph) {
            body = R.bodies[i].body;
            R.bodies[i] = R.bodies[--R.nbodies];
        }
    pthread_mutex_unlock(&R.lock);
    return body;
}

static void forget_handles(uint64_t graph)
{
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.nhandles;)
        if (R.handles[i].graph == graph)
            R.handles[i] = R.handles[--R.nhandles];
        else
            i++;
    pthread_mutex_unlock(&R.lock);
}

/* A body leaves with its nodes, its own bodies and handles.  Nesting is
 * bounded by what the client made, each level a node of its own. */
static void forget_body(uint64_t body, int runtime)
{
    graph_cond_forget_graph(body, runtime);
    graph_forget_nodes(body, runtime);
    handles_remove(H_GRAPH, body);
}

void graph_cond_forget_graph(uint64_t graph, int runtime)
{
    uint64_t body;
    forget_handles(graph);
    while ((body = take_body(graph, 0)) != 0)
        forget_body(body, runtime);
}

void graph_cond_forget_node(uint64_t node, int runtime)
{
    uint64_t body;
    while ((body = take_body(0, node)) != 0)
        forget_body(body, runtime);
}

/* ---- conditional handles ------------------------------------------------------------ */

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* A handle for graph (ctx: the driver's, which the codec checked as the
 * session's or NULL), recorded for it. */
static int cond_handle(uint64_t graph, uint64_t ctx, unsigned value, unsigned flags, int runtime,
                       uint64_t *handle)
{
    uint64_t h = 0;
    int rc;
    if (!handle)
        return runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    if (!handles_contains(H_GRAPH, graph)) {
        rgpu_warn("conditional handle: refused a graph the session never handed out");
        rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    } else if (runtime) {
        __typeof__(&cudaGraphConditionalHandleCreate) f = RT(cudaGraphConditionalHandleCreate);
        if (!f)
            return serve_transport(RGPU_ENOSYM);
        cudaGraphConditionalHandle made = 0;
        rc = f(&made, (cudaGraph_t)graph, value, flags);
        h = made;
    } else {
        __typeof__(&cuGraphConditionalHandleCreate) f = DRV(cuGraphConditionalHandleCreate);
        if (!f)
            return serve_transport(RGPU_ENOSYM);
        CUgraphConditionalHandle made = 0;
        rc = f(&made, (CUgraph)graph, (CUcontext)ctx, value, flags);
        h = made;
    }
    if (rc == 0 && remember_handle(graph, h) != 0)
        rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    *handle = rc == 0 ? h : 0;
    return rc;
}

cudaError_t serve_rgpu_graph_cond_handle(cudaGraphConditionalHandle *handle, cudaGraph_t graph,
                                         unsigned int value, unsigned int flags)
{
    uint64_t h = 0;
    int rc = cond_handle(u64(graph), 0, value, flags, 1, handle ? &h : NULL);
    if (handle)
        *handle = h;
    return (cudaError_t)rc;
}

CUresult serve_rgpu_cu_graph_cond_handle(CUgraphConditionalHandle *handle, CUgraph graph,
                                         CUcontext ctx, unsigned int value, unsigned int flags)
{
    uint64_t h = 0;
    int rc = cond_handle(u64(graph), u64(ctx), value, flags, 0, handle ? &h : NULL);
    if (handle)
        *handle = h;
    return (CUresult)rc;
}

/* ---- conditional nodes ---------------------------------------------------------------- */

struct cond_call {
    uint64_t graph, handle, ctx;
    unsigned type, size;
    const CUgraphNode *deps;
    size_t ndeps;
};

static int add_cond_node(const struct cond_call *n, int runtime, CUgraphNode *node,
                         uint64_t *bodies)
{
    if (runtime) {
        __typeof__(&cudaGraphAddNode) f = RT(cudaGraphAddNode);
        if (!f)
            return -RGPU_ENOSYM;
        struct cudaGraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = cudaGraphNodeTypeConditional;
        p.conditional.handle = n->handle;
        p.conditional.type = (enum cudaGraphConditionalNodeType)n->type;
        p.conditional.size = n->size;
        int rc = f((cudaGraphNode_t *)node, (cudaGraph_t)n->graph,
                   (const cudaGraphNode_t *)n->deps, NULL, n->ndeps, &p);
        for (unsigned i = 0; rc == 0 && i < n->size; i++)
            bodies[i] = u64(p.conditional.phGraph_out[i]);
        return rc;
    }
    __typeof__(&cuGraphAddNode_v2) f = DRV(cuGraphAddNode_v2);
    if (!f)
        return -RGPU_ENOSYM;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = n->handle;
    p.conditional.type = (CUgraphConditionalNodeType)n->type;
    p.conditional.size = n->size;
    p.conditional.ctx = (CUcontext)n->ctx;
    int rc = f(node, (CUgraph)n->graph, n->deps, NULL, n->ndeps, &p);
    for (unsigned i = 0; rc == 0 && i < n->size; i++)
        bodies[i] = u64(p.conditional.phGraph_out[i]);
    return rc;
}

/* The node's checks, in the order the library would answer them: 0 or
 * the status to answer instead. */
static int cond_call_refusal(const struct cond_call *n, int runtime)
{
    int bad_handle = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    int bad_value = runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    if (!graph_deps_known(n->deps, n->ndeps)) {
        rgpu_warn("conditional node: refused a dependency the session never handed out");
        return bad_handle;
    }
    if (!handles_contains(H_GRAPH, n->graph)) {
        rgpu_warn("conditional node: refused a graph the session never handed out");
        return bad_handle;
    }
    if (!handle_of(n->graph, n->handle)) {
        rgpu_warn("conditional node: refused a conditional handle not made for its graph");
        return bad_value;
    }
    /* The library checks the type's sizes; ours bounds the answer. */
    if (n->type > 2 || n->size == 0 || n->size > MAX_BODIES)
        return bad_value;
    return 0;
}

/* The node, its bodies into the client's answer (size of them, which the
 * codec sized by the request). */
static int cond_node(const struct cond_call *n, int runtime, CUgraphNode *node, CUgraph *out)
{
    uint64_t bodies[MAX_BODIES];
    CUgraphNode made = NULL;
    if (graph_deps_malformed(n->deps, n->ndeps))
        return serve_transport(RGPU_EPROTO);
    int rc = cond_call_refusal(n, runtime);
    if (rc == 0 && (!node || !out))
        rc = runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    if (rc == 0)
        rc = add_cond_node(n, runtime, &made, bodies);
    if (rc < 0)
        return serve_transport(-rc);
    if (rc == 0) {
        handles_add(H_GRAPH_NODE, u64(made));
        if (remember_bodies(n->graph, u64(made), bodies, n->size))
            rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (node)
        *node = rc == 0 ? made : NULL;
    if (rc == 0)
        memcpy(out, bodies, (size_t)n->size * sizeof *bodies);
    return rc;
}

cudaError_t serve_rgpu_graph_cond_node(cudaGraphNode_t *node, cudaGraph_t graph,
                                       const cudaGraphNode_t *deps, size_t ndeps,
                                       cudaGraphConditionalHandle handle, unsigned int type,
                                       unsigned int size, cudaGraph_t *bodies)
{
    const struct cond_call n = { u64(graph), handle, 0, type, size, (const CUgraphNode *)deps,
                                 ndeps };
    return (cudaError_t)cond_node(&n, 1, (CUgraphNode *)node, (CUgraph *)bodies);
}

CUresult serve_rgpu_cu_graph_cond_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                       size_t ndeps, CUgraphConditionalHandle handle,
                                       unsigned int type, unsigned int size, CUcontext ctx,
                                       CUgraph *bodies)
{
    const struct cond_call n = { u64(graph), handle, u64(ctx), type, size, deps, ndeps };
    return (CUresult)cond_node(&n, 0, node, bodies);
}
