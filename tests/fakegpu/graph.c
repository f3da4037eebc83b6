// Fake libcuda: CUDA graphs built node by node (cuGraph*).
//
// A graph is a list of nodes, each with the nodes it depends on.  An
// executable graph is a private copy made at instantiation; a launch runs
// its nodes in dependency order (each after all it depends on), one at a
// time, through the public driver calls a program would make (the fake
// runs work synchronously, so stream order is the order here; a host node
// is the stream's host function, cuLaunchHostFunc, which the nodes after
// it wait for: host_functions.c).  Kernel
// nodes keep their arguments packed by the function's layout, as the
// driver copies them when a node is made or set.  Node kinds: kernel,
// memcpy (linear memory, 1D to 3D, device or host), memset, host, empty,
// child graph, event record and event wait, memory alloc and free,
// conditional (if, while,
// switch: body graphs owned by the node, run by the value a kernel set
// through fg_cond_set); the others are CUDA_ERROR_NOT_SUPPORTED.
// cuGraphDebugDotPrint writes the nodes and edges as a dot digraph.
//
// cuGraphExecUpdate takes a graph's parameters into an executable graph
// when both have the same nodes (type by type, in order) and the same
// edges; otherwise it reports CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
// (or NODE_TYPE_CHANGED) and CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE.
//
// Locking: the graphs have their own mutex, taken before fg_lock (for the
// handle table) and held while a launch calls the public cu* functions,
// which take fg_lock themselves; nothing under fg_lock calls back here.
#include "fakegpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fg_graph;

struct gnode {
    CUgraphNode handle;
    struct fg_graph *graph;
    CUgraphNodeType type;
    unsigned ndeps;
    struct gnode **deps;
    // What the node stands for elsewhere: in a clone or an executable
    // graph, the node of the graph it was copied from (and, after an
    // update, the node of the graph that updated it).
    CUgraphNode origin, updated_from;
    // Kernel: function, shape and the arguments packed by its layout.
    CUfunction func;
    unsigned dim[6], shmem;
    unsigned char *args;
    size_t args_len;
    void **argv;                // pointers into args, for queries
    CUDA_MEMCPY3D copy;
    CUDA_MEMSET_NODE_PARAMS set;
    CUevent event;
    CUDA_HOST_NODE_PARAMS host; // a host node's function and data
    struct fg_graph *child;     // a copy, owned by the node
    CUdeviceptr mem;            // memory nodes: the allocation
    // An alloc node and its copies (clones, instantiations) share the
    // allocation, freed with the last of them: a program may destroy the
    // graph it instantiated and launch the executable graph.
    unsigned *mem_refs;
    // Conditional: the handle's record and the body graphs (owned).
    struct fg_cond *cond;
    CUgraphConditionalNodeType cond_type;
    unsigned nbodies;
    struct fg_graph **bodies;
    int visit;                  // launch bookkeeping
};

struct fg_graph {
    CUgraph handle;
    CUgraph origin;             // a copy's original (conditional handles are its)
    unsigned n;
    struct gnode **nodes;
};

struct fg_exec {
    CUgraphExec handle;
    struct fg_graph *g;
};

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

// Conditional handles (the end of this file).
static unsigned fg_cond_value(struct fg_cond *c);
static void fg_cond_launching(CUgraph origin);

static uint64_t h64(const void *h) { return (uint64_t)(uintptr_t)h; }

// ---- handles ----------------------------------------------------------------------

static uint64_t handle_new(enum fg_kind kind, void *obj)
{
    fg_lock();
    uint64_t h = fg_handle_new(kind, obj, NULL);
    fg_unlock();
    return h;
}

static void *handle_get(const void *h, enum fg_kind kind)
{
    fg_lock();
    void *o = fg_handle_get(h64(h), kind);
    fg_unlock();
    return o;
}

static void handle_drop(const void *h)
{
    fg_lock();
    fg_handle_drop(h64(h));
    fg_unlock();
}

// Every graph call needs an initialised driver and a current context.
static CUresult enter(void)
{
    struct fg_ctx *c;
    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    fg_unlock();
    return r;
}

// ---- graphs and nodes ----------------------------------------------------------

static struct fg_graph *graph_new(void)
{
    struct fg_graph *g = calloc(1, sizeof *g);
    if (g && !(g->handle = (CUgraph)(uintptr_t)handle_new(FG_GRAPH, g))) {
        free(g);
        return NULL;
    }
    return g;
}

static void graph_free(struct fg_graph *g);

static void node_free(struct gnode *n)
{
    if (n->mem_refs && --*n->mem_refs == 0) {
        cuMemFree_v2(n->mem);
        free(n->mem_refs);
    }
    handle_drop(n->handle);
    if (n->child)
        graph_free(n->child);
    for (unsigned i = 0; i < n->nbodies; i++)
        if (n->bodies[i])
            graph_free(n->bodies[i]);
    free(n->bodies);
    free(n->deps);
    free(n->args);
    free(n->argv);
    free(n);
}

static void graph_free(struct fg_graph *g)
{
    for (unsigned i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    handle_drop(g->handle);
    free(g);
}

static int node_index(const struct fg_graph *g, const struct gnode *n)
{
    for (unsigned i = 0; i < g->n; i++)
        if (g->nodes[i] == n)
            return (int)i;
    return -1;
}

static int has_dep(const struct gnode *n, const struct gnode *d)
{
    for (unsigned i = 0; i < n->ndeps; i++)
        if (n->deps[i] == d)
            return 1;
    return 0;
}

static CUresult add_dep(struct gnode *n, struct gnode *d)
{
    if (n == d || d->graph != n->graph)
        return CUDA_ERROR_INVALID_VALUE;
    if (has_dep(n, d))
        return CUDA_ERROR_INVALID_VALUE;        // CUDA: the edge exists already
    struct gnode **deps = realloc(n->deps, (n->ndeps + 1) * sizeof *deps);
    if (!deps)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->deps = deps;
    n->deps[n->ndeps++] = d;
    return CUDA_SUCCESS;
}

// A new node of g depending on deps[0..ndeps) (nodes of g), filled by the
// caller.  Lock held.
static CUresult node_new(struct fg_graph *g, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeType type, struct gnode **out)
{
    if (ndeps && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    struct gnode *n = calloc(1, sizeof *n);
    struct gnode **nodes = realloc(g->nodes, (g->n + 1) * sizeof *nodes);
    if (nodes)
        g->nodes = nodes;
    if (!n || !nodes) {
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->graph = g;
    n->type = type;
    for (size_t i = 0; i < ndeps; i++) {
        struct gnode *d = handle_get(deps[i], FG_GRAPH_NODE);
        CUresult r = d ? add_dep(n, d) : CUDA_ERROR_INVALID_VALUE;
        if (r != CUDA_SUCCESS) {
            free(n->deps);
            free(n);
            return r;
        }
    }
    if (!(n->handle = (CUgraphNode)(uintptr_t)handle_new(FG_GRAPH_NODE, n))) {
        free(n->deps);
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes[g->n++] = n;
    *out = n;
    return CUDA_SUCCESS;
}

// The graph and the new node's handle, checked as CUDA checks them.
static CUresult begin_add(CUgraphNode *ph, CUgraph hg, struct fg_graph **g)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    *g = handle_get(hg, FG_GRAPH);
    return *g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- node parameters ---------------------------------------------------------------

// The kernel's arguments, packed by its layout (kernelParams) or as the
// caller's own buffer (extra), checked as cuLaunchKernel checks them.
static CUresult kernel_params(struct gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUfunction f = p->func ? p->func : (CUfunction)(void *)p->kern;
    unsigned char *args = NULL;
    size_t len = 0;

    fg_lock();
    struct fg_func *fn = fg_handle_get(h64(f), FG_FUNC);
    if (fn) {
        len = fn->param_size;
        args = calloc(1, len ? len : 1);
        if (args && p->kernelParams && !p->extra) {
            for (unsigned i = 0; i < fn->nparams; i++)
                memcpy(args + fn->params[i].offset, p->kernelParams[i], fn->params[i].size);
        } else if (args && p->extra) {
            const void *buf = NULL;
            size_t size = 0;
            for (unsigned i = 0; p->extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                    buf = p->extra[i + 1];
                else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                    size = *(const size_t *)p->extra[i + 1];
            }
            if (buf && size >= len)
                memcpy(args, buf, len);
            else
                fn = NULL;
        } else if (fn->nparams) {
            fn = NULL;          // arguments missing
        }
    }
    fg_unlock();
    if (!fn) {
        free(args);
        return h64(f) && handle_get(f, FG_FUNC) ? CUDA_ERROR_INVALID_VALUE
                                                : CUDA_ERROR_INVALID_HANDLE;
    }
    if (!args)
        return CUDA_ERROR_OUT_OF_MEMORY;
    free(n->args);
    n->func = f;
    n->args = args;
    n->args_len = len;
    const unsigned dim[6] = { p->gridDimX, p->gridDimY, p->gridDimZ,
                              p->blockDimX, p->blockDimY, p->blockDimZ };
    memcpy(n->dim, dim, sizeof dim);
    n->shmem = p->sharedMemBytes;
    return CUDA_SUCCESS;
}

static CUresult memset_params(struct gnode *n, const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) ||
        !p->width || !p->height)
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = p->width * p->elementSize;
    if (p->height > 1 && p->pitch < row)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    int ok = fg_mem_valid(p->dst, p->height > 1 ? p->pitch * (p->height - 1) + row : row);
    fg_unlock();
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    n->set = *p;
    return CUDA_SUCCESS;
}

// Linear memory only (no CUDA arrays): host, device or unified addresses.
static uintptr_t copy_addr(CUmemorytype t, const void *host, CUdeviceptr dev)
{
    return t == CU_MEMORYTYPE_HOST ? (uintptr_t)host : (uintptr_t)dev;
}

static CUresult memcpy_params(struct gnode *n, const CUDA_MEMCPY3D *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!p->WidthInBytes || !p->Height || !p->Depth)
        return CUDA_ERROR_INVALID_VALUE;
    n->copy = *p;
    return CUDA_SUCCESS;
}

// ---- running a graph -----------------------------------------------------------------

static CUresult run_graph(struct fg_graph *g, CUstream s);

static CUresult run_kernel(const struct gnode *n, CUstream s)
{
    void *argv[512];
    fg_lock();
    struct fg_func *fn = fg_handle_get(h64(n->func), FG_FUNC);
    unsigned np = fn ? fn->nparams : 0;
    for (unsigned i = 0; i < np && i < 512; i++)
        argv[i] = n->args + fn->params[i].offset;
    fg_unlock();
    if (!fn)
        return CUDA_ERROR_INVALID_HANDLE;       // its module was unloaded
    return cuLaunchKernel(n->func, n->dim[0], n->dim[1], n->dim[2], n->dim[3], n->dim[4],
                          n->dim[5], n->shmem, s, argv, NULL);
}

static CUresult run_memcpy(const CUDA_MEMCPY3D *p, CUstream s)
{
    uintptr_t src = copy_addr(p->srcMemoryType, p->srcHost, p->srcDevice);
    uintptr_t dst = copy_addr(p->dstMemoryType, p->dstHost, p->dstDevice);
    size_t spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes;
    size_t dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
    size_t sheight = p->srcHeight ? p->srcHeight : p->Height;
    size_t dheight = p->dstHeight ? p->dstHeight : p->Height;
    src += p->srcXInBytes + p->srcY * spitch + p->srcZ * spitch * sheight;
    dst += p->dstXInBytes + p->dstY * dpitch + p->dstZ * dpitch * dheight;
    for (size_t z = 0; z < p->Depth; z++)
        for (size_t y = 0; y < p->Height; y++) {
            CUresult r = cuMemcpyAsync(dst + z * dpitch * dheight + y * dpitch,
                                       src + z * spitch * sheight + y * spitch,
                                       p->WidthInBytes, s);
            if (r != CUDA_SUCCESS)
                return r;
        }
    return CUDA_SUCCESS;
}

static CUresult run_memset(const CUDA_MEMSET_NODE_PARAMS *p, CUstream s)
{
    size_t pitch = p->height > 1 ? p->pitch : p->width * p->elementSize;
    switch (p->elementSize) {
    case 1: return cuMemsetD2D8Async(p->dst, pitch, (unsigned char)p->value, p->width,
                                     p->height, s);
    case 2: return cuMemsetD2D16Async(p->dst, pitch, (unsigned short)p->value, p->width,
                                      p->height, s);
    default: return cuMemsetD2D32Async(p->dst, pitch, p->value, p->width, p->height, s);
    }
}

static CUresult run_conditional(const struct gnode *n, CUstream s)
{
    CUresult r = CUDA_SUCCESS;
    unsigned v = fg_cond_value(n->cond);
    switch (n->cond_type) {
    case CU_GRAPH_COND_TYPE_IF:
        if (v || n->nbodies == 2)
            r = run_graph(n->bodies[v ? 0 : 1], s);
        break;
    case CU_GRAPH_COND_TYPE_WHILE:
        for (; v && r == CUDA_SUCCESS; v = fg_cond_value(n->cond))
            r = run_graph(n->bodies[0], s);
        break;
    default:    // switch
        if (v < n->nbodies)
            r = run_graph(n->bodies[v], s);
        break;
    }
    return r;
}

static CUresult run_node(struct gnode *n, CUstream s)
{
    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return run_conditional(n, s);
    case CU_GRAPH_NODE_TYPE_KERNEL: return run_kernel(n, s);
    case CU_GRAPH_NODE_TYPE_MEMCPY: return run_memcpy(&n->copy, s);
    case CU_GRAPH_NODE_TYPE_MEMSET: return run_memset(&n->set, s);
    case CU_GRAPH_NODE_TYPE_GRAPH: return run_graph(n->child, s);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return cuEventRecord(n->event, s);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return cuStreamWaitEvent(s, n->event, 0);
    case CU_GRAPH_NODE_TYPE_HOST: return cuLaunchHostFunc(s, n->host.fn, n->host.userData);
    default: return CUDA_SUCCESS;       // empty
    }
}

// Depth first: a node runs after everything it depends on.  visit: 0 not
// yet, 1 under way (seeing it again is a cycle), 2 done.
static CUresult visit(struct gnode *n, CUstream s, int run)
{
    if (n->visit == 2)
        return CUDA_SUCCESS;
    if (n->visit == 1)
        return CUDA_ERROR_INVALID_VALUE;
    n->visit = 1;
    for (unsigned i = 0; i < n->ndeps; i++) {
        CUresult r = visit(n->deps[i], s, run);
        if (r != CUDA_SUCCESS)
            return r;
    }
    n->visit = 2;
    return run ? run_node(n, s) : CUDA_SUCCESS;
}

static CUresult walk(struct fg_graph *g, CUstream s, int run)
{
    CUresult r = CUDA_SUCCESS;
    for (unsigned i = 0; i < g->n; i++)
        g->nodes[i]->visit = 0;
    for (unsigned i = 0; i < g->n && r == CUDA_SUCCESS; i++)
        r = visit(g->nodes[i], s, run);
    return r;
}

static CUresult run_graph(struct fg_graph *g, CUstream s)
{
    return walk(g, s, 1);
}

// ---- copies: clones, executable graphs, child graphs --------------------------------

static struct fg_graph *graph_copy(const struct fg_graph *src);

static CUresult copy_bodies(struct gnode *n, const struct gnode *o)
{
    if (!(n->bodies = calloc(o->nbodies, sizeof *n->bodies)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (; n->nbodies < o->nbodies; n->nbodies++)
        if (!(n->bodies[n->nbodies] = graph_copy(o->bodies[n->nbodies])))
            return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

static struct fg_graph *graph_copy(const struct fg_graph *src)
{
    struct fg_graph *g = graph_new();
    if (!g)
        return NULL;
    g->origin = src->origin ? src->origin : src->handle;
    g->nodes = calloc(src->n ? src->n : 1, sizeof *g->nodes);
    if (!g->nodes)
        goto fail;
    for (unsigned i = 0; i < src->n; i++) {
        const struct gnode *o = src->nodes[i];
        struct gnode *n = malloc(sizeof *n);
        if (!n)
            goto fail;
        *n = *o;
        n->graph = g;
        n->origin = o->handle;
        n->updated_from = NULL;
        n->deps = NULL;
        n->args = NULL;
        n->argv = NULL;
        n->child = NULL;
        n->bodies = NULL;
        n->nbodies = 0;
        if (n->mem_refs)
            ++*n->mem_refs;         // the original's allocation, shared
        n->handle = (CUgraphNode)(uintptr_t)handle_new(FG_GRAPH_NODE, n);
        g->nodes[g->n++] = n;
        n->ndeps = 0;
        if (!n->handle || (o->args_len && !(n->args = malloc(o->args_len))) ||
            (o->child && !(n->child = graph_copy(o->child))))
            goto fail;
        if (o->args_len)
            memcpy(n->args, o->args, o->args_len);
        if (o->nbodies && copy_bodies(n, o) != CUDA_SUCCESS)
            goto fail;
    }
    // Edges once every node exists: a node may depend on a later one.
    for (unsigned i = 0; i < src->n; i++) {
        const struct gnode *o = src->nodes[i];
        struct gnode *n = g->nodes[i];
        n->deps = calloc(o->ndeps ? o->ndeps : 1, sizeof *n->deps);
        if (!n->deps)
            goto fail;
        for (unsigned d = 0; d < o->ndeps; d++)
            n->deps[n->ndeps++] = g->nodes[node_index(src, o->deps[d])];
    }
    return g;
fail:
    graph_free(g);
    return NULL;
}

// ---- the driver API ----------------------------------------------------------------

CUresult CUDAAPI cuGraphCreate(CUgraph *ph, unsigned int flags)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = graph_new();
    pthread_mutex_unlock(&graph_lock);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = g->handle;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph h)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(h, FG_GRAPH);
    if (g)
        graph_free(g);
    pthread_mutex_unlock(&graph_lock);
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Adds a node of type t; fill sets its parameters (NULL: none).
typedef CUresult (*fill_fn)(struct gnode *n, const void *arg);

static CUresult add_node(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeType t, fill_fn fill, const void *arg)
{
    struct fg_graph *g;
    struct gnode *n;
    pthread_mutex_lock(&graph_lock);
    CUresult r = begin_add(ph, hg, &g);
    if (r == CUDA_SUCCESS)
        r = node_new(g, deps, ndeps, t, &n);
    if (r == CUDA_SUCCESS && fill && (r = fill(n, arg)) != CUDA_SUCCESS) {
        g->n--;
        node_free(n);
    }
    if (r == CUDA_SUCCESS)
        *ph = n->handle;
    pthread_mutex_unlock(&graph_lock);
    return r;
}

static CUresult fill_kernel(struct gnode *n, const void *p) { return kernel_params(n, p); }
static CUresult fill_memset(struct gnode *n, const void *p) { return memset_params(n, p); }
static CUresult fill_memcpy(struct gnode *n, const void *p) { return memcpy_params(n, p); }

static CUresult fill_event(struct gnode *n, const void *ev)
{
    CUevent e = (CUevent)(uintptr_t)ev;
    if (!handle_get(e, FG_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    n->event = e;
    return CUDA_SUCCESS;
}

static CUresult fill_host(struct gnode *n, const void *arg)
{
    const CUDA_HOST_NODE_PARAMS *p = arg;
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    n->host = *p;
    return CUDA_SUCCESS;
}

static CUresult fill_child(struct gnode *n, const void *child)
{
    struct fg_graph *c = handle_get(child, FG_GRAPH);
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    n->child = graph_copy(c);       // CUDA embeds a copy
    return n->child ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                         size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL, fill_kernel, p);
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                      size_t ndeps, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMCPY, fill_memcpy, p);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                      size_t ndeps, const CUDA_MEMSET_NODE_PARAMS *p,
                                      CUcontext ctx)
{
    (void)ctx;
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMSET, fill_memset, p);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                     size_t ndeps)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_EMPTY, NULL, NULL);
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                    size_t ndeps, const CUDA_HOST_NODE_PARAMS *p)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_HOST, fill_host, p);
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                          size_t ndeps, CUgraph child)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_GRAPH, fill_child, child);
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                           size_t ndeps, CUevent ev)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_EVENT_RECORD, fill_event, ev);
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                         size_t ndeps, CUevent ev)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_WAIT_EVENT, fill_event, ev);
}

// Memory nodes: the allocation is made when the node is, at the address
// CUDA would fix then, and lives as long as the graph; at launch neither
// node does anything (a GPU maps and unmaps the memory at those points).
static CUresult fill_alloc(struct gnode *n, const void *arg)
{
    CUDA_MEM_ALLOC_NODE_PARAMS *p = (CUDA_MEM_ALLOC_NODE_PARAMS *)arg;
    if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        p->poolProps.location.id != 0 || !p->bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    n->mem_refs = malloc(sizeof *n->mem_refs);
    CUresult r = n->mem_refs ? cuMemAlloc_v2(&n->mem, p->bytesize) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *n->mem_refs = 1;
        p->dptr = n->mem;
    } else {
        free(n->mem_refs);
        n->mem_refs = NULL;
    }
    return r;
}

static CUresult fill_free(struct gnode *n, const void *arg)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)arg;
    fg_lock();
    int ok = fg_mem_valid(p, 1);
    fg_unlock();
    n->mem = p;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                        size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_ALLOC, fill_alloc, p);
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                       size_t ndeps, CUdeviceptr p)
{
    return add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_FREE, fill_free,
                    (const void *)(uintptr_t)p);
}

CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hg, const CUgraphNode *from,
                                           const CUgraphNode *to, const CUgraphEdgeData *edges,
                                           size_t n)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    if (!g)
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        struct gnode *a = handle_get(from[i], FG_GRAPH_NODE);
        struct gnode *b = handle_get(to[i], FG_GRAPH_NODE);
        // Only full-completion edges (the default edge data).
        if (edges && (edges[i].from_port || edges[i].to_port || edges[i].type))
            r = CUDA_ERROR_NOT_SUPPORTED;
        else if (!a || !b || a->graph != g || b->graph != g)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            r = add_dep(b, a);
    }
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *type)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    if (n && type)
        *type = n->type;
    pthread_mutex_unlock(&graph_lock);
    return !n ? CUDA_ERROR_INVALID_VALUE : type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// A graph's nodes (roots: only those without dependencies), CUDA's way:
// without an array, how many; with one, *count entries filled (NULL past
// the graph's) and *count the number filled.
static CUresult list_nodes(CUgraph hg, CUgraphNode *nodes, size_t *count, int roots)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    CUresult r = g && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    for (unsigned i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
        if (roots && g->nodes[i]->ndeps)
            continue;
        if (nodes && k < *count)
            nodes[k] = g->nodes[i]->handle;
        k++;
    }
    if (r == CUDA_SUCCESS && nodes) {
        for (size_t i = k; i < *count; i++)
            nodes[i] = NULL;
        if (k < *count)
            *count = k;
    } else if (r == CUDA_SUCCESS) {
        *count = k;
    }
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hg, CUgraphNode *nodes, size_t *count)
{
    return list_nodes(hg, nodes, count, 0);
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hg, CUgraphNode *nodes, size_t *count)
{
    return list_nodes(hg, nodes, count, 1);
}

// The edges, node by node in order and each node's dependencies in order;
// CUDA's way with the arrays (all edges here carry the default data).
CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hg, CUgraphNode *from, CUgraphNode *to,
                                    CUgraphEdgeData *data, size_t *count)
{
    if (!count || !from != !to || (data && !from))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    size_t k = 0;
    for (unsigned i = 0; g && i < g->n; i++)
        for (unsigned d = 0; d < g->nodes[i]->ndeps; d++, k++)
            if (from && k < *count) {
                from[k] = g->nodes[i]->deps[d]->handle;
                to[k] = g->nodes[i]->handle;
                if (data)
                    memset(&data[k], 0, sizeof data[k]);
            }
    if (g && from) {
        for (size_t i = k; i < *count; i++) {
            from[i] = to[i] = NULL;
            if (data)
                memset(&data[i], 0, sizeof data[i]);
        }
        if (k < *count)
            *count = k;
    } else if (g) {
        *count = k;
    }
    pthread_mutex_unlock(&graph_lock);
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Removes a node and every edge to it.
CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode h)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    if (n) {
        struct fg_graph *g = n->graph;
        for (unsigned i = 0; i < g->n; i++) {
            struct gnode *o = g->nodes[i];
            unsigned k = 0;
            for (unsigned d = 0; d < o->ndeps; d++)
                if (o->deps[d] != n)
                    o->deps[k++] = o->deps[d];
            o->ndeps = k;
        }
        int at = node_index(g, n);
        memmove(&g->nodes[at], &g->nodes[at + 1], (g->n - (unsigned)at - 1) * sizeof *g->nodes);
        g->n--;
        node_free(n);
    }
    pthread_mutex_unlock(&graph_lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphClone(CUgraph *ph, CUgraph original)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(original, FG_GRAPH), *c = NULL;
    if (g && ph && (c = graph_copy(g)))
        *ph = c->handle;
    pthread_mutex_unlock(&graph_lock);
    return !g || !ph ? CUDA_ERROR_INVALID_VALUE : c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    CUresult r = !n || !p || n->type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE
                                                                   : kernel_params(n, p);
    pthread_mutex_unlock(&graph_lock);
    return r;
}

// The node's parameters, the arguments as pointers into its own copy
// (valid until its parameters change, as CUDA's).
CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    CUresult r = !n || !p || n->type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE
                                                                   : CUDA_SUCCESS;
    fg_lock();
    struct fg_func *fn = r == CUDA_SUCCESS ? fg_handle_get(h64(n->func), FG_FUNC) : NULL;
    if (r == CUDA_SUCCESS && !fn)
        r = CUDA_ERROR_INVALID_HANDLE;      // its module was unloaded
    void **argv = fn ? calloc(fn->nparams ? fn->nparams : 1, sizeof *argv) : NULL;
    for (unsigned i = 0; argv && i < fn->nparams; i++)
        argv[i] = n->args + fn->params[i].offset;
    fg_unlock();
    if (r == CUDA_SUCCESS && !argv)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        free(n->argv);
        n->argv = argv;
        memset(p, 0, sizeof *p);
        // A function here is also its kernel's value (module.c): both.
        p->func = n->func;
        p->kern = (CUkernel)(void *)n->func;
        p->gridDimX = n->dim[0];
        p->gridDimY = n->dim[1];
        p->gridDimZ = n->dim[2];
        p->blockDimX = n->dim[3];
        p->blockDimY = n->dim[4];
        p->blockDimZ = n->dim[5];
        p->sharedMemBytes = n->shmem;
        p->kernelParams = argv;
    }
    pthread_mutex_unlock(&graph_lock);
    return r;
}

// ---- executable graphs ---------------------------------------------------------------

// Auto-free on launch and node priorities change nothing here (no memory
// nodes, one stream at a time); device launch is not modelled; an upload
// is asked for through cuGraphInstantiateWithParams only.
static CUresult instantiate(CUgraphExec *ph, CUgraph hg, unsigned long long flags, int params)
{
    const unsigned long long plain = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (flags & ~(plain | (params ? CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    struct fg_exec *e = NULL;
    r = g ? walk(g, NULL, 0) : CUDA_ERROR_INVALID_VALUE;        // a cycle?
    if (r == CUDA_SUCCESS && (!(e = calloc(1, sizeof *e)) || !(e->g = graph_copy(g)) ||
                              !(e->handle = (CUgraphExec)(uintptr_t)handle_new(FG_GRAPH_EXEC, e)))) {
        if (e && e->g)
            graph_free(e->g);
        free(e);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        *ph = e->handle;
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *ph, CUgraph hg,
                                             unsigned long long flags)
{
    return instantiate(ph, hg, flags, 0);
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *ph, CUgraph hg,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
        fg_lock();
        CUresult r = fg_check_stream(p->hUploadStream);
        fg_unlock();
        if (r != CUDA_SUCCESS)
            return r;
    }
    CUresult r = instantiate(ph, hg, p->flags, 1);
    p->hErrNode_out = NULL;
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                      : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec h)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(h, FG_GRAPH_EXEC);
    if (e) {
        handle_drop(e->handle);
        graph_free(e->g);
        free(e);
    }
    pthread_mutex_unlock(&graph_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec h, CUstream s)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(h, FG_GRAPH_EXEC);
    fg_lock();
    r = e ? fg_check_stream(s) : CUDA_ERROR_INVALID_VALUE;
    fg_unlock();
    if (r == CUDA_SUCCESS) {
        fg_cond_launching(e->g->origin);
        r = run_graph(e->g, s);
    }
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec h, CUstream s)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(h, FG_GRAPH_EXEC);
    pthread_mutex_unlock(&graph_lock);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    CUresult r = fg_check_stream(s);
    fg_unlock();
    return r;       // nothing to upload: device memory is host memory
}

// The executable graph's copy of node h (the node it was instantiated
// from, or updated from).  Lock held.
static struct gnode *exec_node(struct fg_exec *e, CUgraphNode h)
{
    for (unsigned i = 0; h && i < e->g->n; i++)
        if (e->g->nodes[i]->origin == h || e->g->nodes[i]->updated_from == h)
            return e->g->nodes[i];
    return NULL;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec h, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS *p)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(h, FG_GRAPH_EXEC);
    struct gnode *n = e ? exec_node(e, node) : NULL;
    CUresult r = !e || !n || !p || n->type != CU_GRAPH_NODE_TYPE_KERNEL
                     ? CUDA_ERROR_INVALID_VALUE : kernel_params(n, p);
    pthread_mutex_unlock(&graph_lock);
    return r;
}

// A node's (or an executable graph's copy of a node's) new parameters,
// of its own type.  Lock held.
static CUresult set_node(struct gnode *n, CUgraphNodeType t, fill_fn fill, const void *arg)
{
    return !n || n->type != t ? CUDA_ERROR_INVALID_VALUE : fill(n, arg);
}

static CUresult set_in_graph(CUgraphNode h, CUgraphNodeType t, fill_fn fill, const void *arg)
{
    pthread_mutex_lock(&graph_lock);
    CUresult r = set_node(handle_get(h, FG_GRAPH_NODE), t, fill, arg);
    pthread_mutex_unlock(&graph_lock);
    return r;
}

static CUresult set_in_exec(CUgraphExec x, CUgraphNode h, CUgraphNodeType t, fill_fn fill,
                            const void *arg)
{
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(x, FG_GRAPH_EXEC);
    CUresult r = set_node(e ? exec_node(e, h) : NULL, t, fill, arg);
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p)
{
    return set_in_graph(h, CU_GRAPH_NODE_TYPE_MEMSET, fill_memset, p);
}

CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D *p)
{
    return set_in_graph(h, CU_GRAPH_NODE_TYPE_MEMCPY, fill_memcpy, p);
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_MEMSET, fill_memset, p);
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_MEMCPY, fill_memcpy, p);
}

static CUresult event_node(CUgraphNode h, CUgraphNodeType t, CUevent *out)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    CUresult r = !n || n->type != t || !out ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        *out = n->event;
    pthread_mutex_unlock(&graph_lock);
    return r;
}

CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode h, CUevent *out)
{
    return event_node(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, out);
}

CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode h, CUevent *out)
{
    return event_node(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, out);
}

CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode h, CUevent ev)
{
    return set_in_graph(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, fill_event, ev);
}

CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode h, CUevent ev)
{
    return set_in_graph(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, fill_event, ev);
}

CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode h, CUevent ev)
{
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, fill_event, ev);
}

CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec x, CUgraphNode h, CUevent ev)
{
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, fill_event, ev);
}

static CUgraphExecUpdateResult same_topology(const struct fg_graph *a, const struct fg_graph *b,
                                             CUgraphNode *bad);

// A child graph of the same shape replaces the executable graph's copy.
static CUresult fill_child_same_shape(struct gnode *n, const void *child)
{
    struct fg_graph *c = handle_get(child, FG_GRAPH);
    CUgraphNode bad;
    if (!c || same_topology(n->child, c, &bad) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct fg_graph *copy = graph_copy(c);
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    graph_free(n->child);
    n->child = copy;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode h, CUgraph child)
{
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_GRAPH, fill_child_same_shape, child);
}

// Node h when it is of type t and there is somewhere to answer (out);
// else NULL.  Lock held.
static struct gnode *typed_node(CUgraphNode h, CUgraphNodeType t, const void *out)
{
    struct gnode *n = handle_get(h, FG_GRAPH_NODE);
    return n && out && n->type == t ? n : NULL;
}

// The node's own graph, not a copy: changes to it are the node's.
CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = typed_node(h, CU_GRAPH_NODE_TYPE_GRAPH, out);
    if (n)
        *out = n->child->handle;
    pthread_mutex_unlock(&graph_lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p)
{
    return set_in_graph(h, CU_GRAPH_NODE_TYPE_HOST, fill_host, p);
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec x, CUgraphNode h,
                                              const CUDA_HOST_NODE_PARAMS *p)
{
    return set_in_exec(x, h, CU_GRAPH_NODE_TYPE_HOST, fill_host, p);
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS *p)
{
    pthread_mutex_lock(&graph_lock);
    struct gnode *n = typed_node(h, CU_GRAPH_NODE_TYPE_HOST, p);
    if (n)
        *p = n->host;
    pthread_mutex_unlock(&graph_lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Whether b has a's shape: node types in order and the same edges.
static CUgraphExecUpdateResult same_topology(const struct fg_graph *a, const struct fg_graph *b,
                                             CUgraphNode *bad)
{
    if (a->n != b->n)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (unsigned i = 0; i < a->n; i++) {
        const struct gnode *x = a->nodes[i], *y = b->nodes[i];
        *bad = y->handle;
        if (x->type != y->type)
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (x->ndeps != y->ndeps)
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (unsigned d = 0; d < x->ndeps; d++)
            if (node_index(a, x->deps[d]) != node_index(b, y->deps[d]))
                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    }
    *bad = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

// Node y's parameters into x (same type).  Lock held.
static CUresult take_params(struct gnode *x, const struct gnode *y)
{
    if (y->args_len) {
        unsigned char *args = malloc(y->args_len);
        if (!args)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(args, y->args, y->args_len);
        free(x->args);
        x->args = args;
    }
    x->args_len = y->args_len;
    x->func = y->func;
    memcpy(x->dim, y->dim, sizeof x->dim);
    x->shmem = y->shmem;
    x->copy = y->copy;
    x->set = y->set;
    x->event = y->event;
    x->host = y->host;
    x->updated_from = y->handle;
    if (y->child) {
        struct fg_graph *c = graph_copy(y->child);
        if (!c)
            return CUDA_ERROR_OUT_OF_MEMORY;
        if (x->child)
            graph_free(x->child);
        x->child = c;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec h, CUgraph hg, CUgraphExecUpdateResultInfo *info)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (!info)
        return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&graph_lock);
    struct fg_exec *e = handle_get(h, FG_GRAPH_EXEC);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    if (!e || !g) {
        pthread_mutex_unlock(&graph_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUgraphNode bad = NULL;
    info->result = same_topology(e->g, g, &bad);
    info->errorNode = bad;
    for (unsigned i = 0; info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS && i < g->n; i++)
        if ((r = take_params(e->g->nodes[i], g->nodes[i])) != CUDA_SUCCESS)
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    pthread_mutex_unlock(&graph_lock);
    if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    return CUDA_SUCCESS;
}

// ---- the dot description --------------------------------------------------------------

static const char *type_name(CUgraphNodeType t)
{
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "KERNEL";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "MEMSET";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "GRAPH";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "EVENT_RECORD";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "WAIT_EVENT";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "MEM_ALLOC";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "MEM_FREE";
    case CU_GRAPH_NODE_TYPE_HOST: return "HOST";
    default: return "EMPTY";
    }
}

// A dot digraph of the nodes (by index and type) and edges, written to
// path as the driver writes its own (a file it opens and truncates).
CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hg, const char *path, unsigned int flags)
{
    (void)flags;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct fg_graph *g = handle_get(hg, FG_GRAPH);
    FILE *f = g ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "digraph fakegpu_graph {\n");
        for (unsigned i = 0; i < g->n; i++)
            fprintf(f, "  n%u [label=\"%u %s\"];\n", i, i, type_name(g->nodes[i]->type));
        for (unsigned i = 0; i < g->n; i++)
            for (unsigned d = 0; d < g->nodes[i]->ndeps; d++)
                fprintf(f, "  n%d -> n%u;\n", node_index(g, g->nodes[i]->deps[d]), i);
        fprintf(f, "}\n");
    }
    int ok = f && fclose(f) == 0;
    pthread_mutex_unlock(&graph_lock);
    return !g ? CUDA_ERROR_INVALID_VALUE : ok ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

// ---- conditional nodes -------------------------------------------------------------

// A conditional handle: its value, which kernels of the graph set
// (fg_cond_set) and a launch resets when asked to.  Handles are numbers
// of our own, never freed (CUDA frees them with their graph; a test makes
// a few).  Their own lock: kernels set them while a launch holds graph_lock.
struct fg_cond {
    CUgraphConditionalHandle handle;
    CUgraph graph;
    unsigned value, initial;
    int assign_default;
};

static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fg_cond *conds[1024];
static unsigned nconds;

static struct fg_cond *cond_find(CUgraphConditionalHandle h)
{
    for (unsigned i = 0; i < nconds; i++)
        if (conds[i]->handle == h)
            return conds[i];
    return NULL;
}

static unsigned fg_cond_value(struct fg_cond *c)
{
    pthread_mutex_lock(&cond_lock);
    unsigned v = c->value;
    pthread_mutex_unlock(&cond_lock);
    return v;
}

static void fg_cond_launching(CUgraph origin)
{
    pthread_mutex_lock(&cond_lock);
    for (unsigned i = 0; i < nconds; i++)
        if (conds[i]->graph == origin && conds[i]->assign_default)
            conds[i]->value = conds[i]->initial;
    pthread_mutex_unlock(&cond_lock);
}

int fg_cond_set(unsigned long long handle, unsigned value)
{
    pthread_mutex_lock(&cond_lock);
    struct fg_cond *c = cond_find(handle);
    if (c)
        c->value = value;
    pthread_mutex_unlock(&cond_lock);
    return c ? 0 : -1;
}

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph hg,
                                                CUcontext ctx, unsigned int value,
                                                unsigned int flags)
{
    CUresult r = enter();
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !handle_get(hg, FG_GRAPH) || flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    int ctx_ok = ctx && fg_handle_get(h64(ctx), FG_CTX);
    fg_unlock();
    if (!ctx_ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fg_cond *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&cond_lock);
    if (c && nconds < sizeof conds / sizeof conds[0]) {
        *c = (struct fg_cond){ 0xc0d0000u + nconds, hg, value, value,
                               (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0 };
        conds[nconds++] = c;
        *out = c->handle;
        c = NULL;
        r = CUDA_SUCCESS;
    } else {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&cond_lock);
    free(c);
    return r;
}

// The node's bodies, as CUDA makes them: empty graphs the node owns.
static CUresult fill_conditional(struct gnode *n, const void *arg)
{
    CUDA_CONDITIONAL_NODE_PARAMS *p = (CUDA_CONDITIONAL_NODE_PARAMS *)arg;
    unsigned most = p->type == CU_GRAPH_COND_TYPE_WHILE ? 1
                    : p->type == CU_GRAPH_COND_TYPE_IF  ? 2
                                                        : 1024;
    pthread_mutex_lock(&cond_lock);
    struct fg_cond *c = cond_find(p->handle);
    int mine = c && c->graph == n->graph->handle;
    pthread_mutex_unlock(&cond_lock);
    if (!mine || p->type > CU_GRAPH_COND_TYPE_SWITCH || !p->size || p->size > most)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(n->bodies = calloc(p->size, sizeof *n->bodies)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->cond = c;
    n->cond_type = p->type;
    for (; n->nbodies < p->size; n->nbodies++)
        if (!(n->bodies[n->nbodies] = graph_new()))
            return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < p->size; i++) {
        n->bodies[i]->origin = n->graph->origin ? n->graph->origin : n->graph->handle;
        p->phGraph_out[i] = n->bodies[i]->handle;
    }
    return CUDA_SUCCESS;
}

// Node records: conditional nodes, and kernel and empty nodes by their
// own calls (what rgpud asks of this fake); edge data must be the default.
CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                   const CUgraphEdgeData *data, size_t ndeps,
                                   CUgraphNodeParams *p)
{
    static const CUgraphEdgeData plain;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; data && i < ndeps; i++)
        if (memcmp(&data[i], &plain, sizeof plain) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
        static _Thread_local CUgraph out[1024];     // the driver's array: the node's, here the fake's
        CUDA_CONDITIONAL_NODE_PARAMS c = p->conditional;
        c.phGraph_out = out;
        CUresult r = add_node(ph, g, deps, ndeps, CU_GRAPH_NODE_TYPE_CONDITIONAL,
                              fill_conditional, &c);
        p->conditional.phGraph_out = out;
        return r;
    }
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        memcpy(&k, &p->kernel, sizeof k);
        return cuGraphAddKernelNode_v2(ph, g, deps, ndeps, &k);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(ph, g, deps, ndeps);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}
