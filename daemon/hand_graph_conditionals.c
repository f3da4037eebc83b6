/* Conditional graph nodes (if, while, switch) and their handles, server
 * side, for the runtime and the driver (client side
 * stubs/graph_conditionals.h; argument lists common/rgpu_hand_procs.h).
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
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)
#define RT(name) ((__typeof__(&name))backend_sym("cudart", #name))
#define DRV(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define MAX_DEPS 4096       /* as the other node calls (hand_graphs.c) */
#define MAX_BODIES 1024     /* body graphs of one node (a switch's cases) */
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

/* [graph, ctx, default value, flags] -> [handle] */
static int cond_handle(struct hand_call *c, int runtime)
{
    uint64_t v[4], handle = 0;
    int rc;
    PROTO_IF(args_count(c, 4) || arg_u64s(c, 4, v) || v[2] > UINT32_MAX || v[3] > UINT32_MAX);
    msgpack_pack_array(c->out, 1);
    if (!handles_contains(H_GRAPH, v[0]) || (!runtime && !handles_valid(H_CONTEXT, v[1]))) {
        rgpu_warn("conditional handle: refused a graph or context the session never handed out");
        rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    } else if (runtime) {
        __typeof__(&cudaGraphConditionalHandleCreate) f = RT(cudaGraphConditionalHandleCreate);
        if (!f)
            return -RGPU_ENOSYM;
        cudaGraphConditionalHandle h = 0;
        rc = f(&h, (cudaGraph_t)v[0], (unsigned)v[2], (unsigned)v[3]);
        handle = h;
    } else {
        __typeof__(&cuGraphConditionalHandleCreate) f = DRV(cuGraphConditionalHandleCreate);
        if (!f)
            return -RGPU_ENOSYM;
        CUgraphConditionalHandle h = 0;
        rc = f(&h, (CUgraph)v[0], (CUcontext)v[1], (unsigned)v[2], (unsigned)v[3]);
        handle = h;
    }
    if (rc == 0 && remember_handle(v[0], handle) != 0)
        rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    msgpack_pack_uint64(c->out, rc == 0 ? handle : 0);
    return rc;
}

static int h_graph_cond_handle(struct hand_call *c)
{
    return cond_handle(c, 1);
}

static int h_cu_graph_cond_handle(struct hand_call *c)
{
    return cond_handle(c, 0);
}

/* ---- conditional nodes ---------------------------------------------------------------- */

struct cond_call {
    uint64_t graph, handle, type, size, ctx;
    CUgraphNode deps[MAX_DEPS];
    size_t ndeps;
};

/* [graph, bin dependencies, handle, type, size, ctx] */
static int parse_cond_call(struct hand_call *c, struct cond_call *n)
{
    const void *deps;
    size_t len;
    uint64_t type_size[2];
    if (args_count(c, 6) || arg_u64(c, 0, &n->graph) || arg_bin(c, 1, &deps, &len) ||
        arg_u64(c, 2, &n->handle) || arg_u64(c, 3, &type_size[0]) ||
        arg_u64(c, 4, &type_size[1]) || arg_u64(c, 5, &n->ctx))
        return -1;
    if (len % sizeof(uint64_t) || len / sizeof(uint64_t) > MAX_DEPS)
        return -1;
    n->type = type_size[0];
    n->size = type_size[1];
    n->ndeps = len / sizeof(uint64_t);
    return graph_deps_take(deps, n->ndeps, n->deps) ? 0 : 1;
}

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
        p.conditional.size = (unsigned)n->size;
        int rc = f((cudaGraphNode_t *)node, (cudaGraph_t)n->graph, (cudaGraphNode_t *)n->deps,
                   NULL, n->ndeps, &p);
        for (uint64_t i = 0; rc == 0 && i < n->size; i++)
            bodies[i] = (uint64_t)(uintptr_t)p.conditional.phGraph_out[i];
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
    p.conditional.size = (unsigned)n->size;
    p.conditional.ctx = (CUcontext)n->ctx;
    int rc = f(node, (CUgraph)n->graph, n->deps, NULL, n->ndeps, &p);
    for (uint64_t i = 0; rc == 0 && i < n->size; i++)
        bodies[i] = (uint64_t)(uintptr_t)p.conditional.phGraph_out[i];
    return rc;
}

/* The node's checks, in the order the library would answer them: 0 or
 * the status to answer instead. */
static int cond_call_refusal(const struct cond_call *n, int runtime)
{
    int bad_handle = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    int bad_value = runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    if (!handles_contains(H_GRAPH, n->graph) || (!runtime && !handles_valid(H_CONTEXT, n->ctx))) {
        rgpu_warn("conditional node: refused a graph, node or context the session never "
                  "handed out");
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

static int cond_node(struct hand_call *c, int runtime)
{
    struct cond_call *n = calloc(1, sizeof *n);
    uint64_t bodies[MAX_BODIES];
    CUgraphNode node = NULL;
    int rc;
    if (!n)
        return runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    int parsed = parse_cond_call(c, n);
    if (parsed < 0) {
        free(n);
        return -RGPU_EPROTO;
    }
    msgpack_pack_array(c->out, 2);
    if (parsed) {
        rgpu_warn("conditional node: refused a dependency the session never handed out");
        rc = runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    } else {
        rc = cond_call_refusal(n, runtime);
    }
    if (rc == 0)
        rc = add_cond_node(n, runtime, &node, bodies);
    if (rc == 0) {
        handles_add(H_GRAPH_NODE, (uint64_t)(uintptr_t)node);
        if (remember_bodies(n->graph, (uint64_t)(uintptr_t)node, bodies, (unsigned)n->size))
            rc = runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    }
    msgpack_pack_uint64(c->out, rc == 0 ? (uint64_t)(uintptr_t)node : 0);
    size_t sent = rc == 0 ? (size_t)n->size * sizeof(uint64_t) : 0;
    msgpack_pack_bin(c->out, sent);
    if (sent)
        msgpack_pack_bin_body(c->out, bodies, sent);
    free(n);
    return rc;
}

static int h_graph_cond_node(struct hand_call *c)
{
    return cond_node(c, 1);
}

static int h_cu_graph_cond_node(struct hand_call *c)
{
    return cond_node(c, 0);
}

const struct hand_proc hand_graph_conditional_procs[] = {
    { "cudart", RGPU_H_GRAPH_COND_HANDLE, h_graph_cond_handle },
    { "cuda", RGPU_H_CU_GRAPH_COND_HANDLE, h_cu_graph_cond_handle },
    { "cudart", RGPU_H_GRAPH_COND_NODE, h_graph_cond_node },
    { "cuda", RGPU_H_CU_GRAPH_COND_NODE, h_cu_graph_cond_node },
};
const int hand_graph_conditional_nprocs =
    sizeof hand_graph_conditional_procs / sizeof hand_graph_conditional_procs[0];
