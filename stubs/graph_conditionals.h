/* Conditional graph nodes on the client, for the runtime
 * (stubs/cudart_graph_records.c) and the driver (stubs/cuda_graph_records.c),
 * through rgpu's own procedures rgpu_graph_cond_node and
 * rgpu_cu_graph_cond_node (codegen/cudart_own.h, codegen/cuda_own.h);
 * server side daemon/hand_graph_conditionals.c.
 *
 * A conditional node's body graphs are made by the library with the node;
 * they come back as graph handles the program fills with nodes of its own
 * (the codec notes them as the session's), in an array that CUDA keeps for
 * the node's lifetime: here one of ours, allocated per node and freed with
 * the graph that holds the node (rgpu_graph_keep_bodies; a node removed on
 * its own keeps its array until then, as rgpu cannot tell which arrays the
 * program still reads). */
#ifndef RGPU_GRAPH_CONDITIONALS_H
#define RGPU_GRAPH_CONDITIONALS_H

#include "rgpu_client.h"
#include "rgpu_graph_wire.h"

#include <stdint.h>
#include <stdlib.h>

/* The node's record, as both libraries' have it (ctx: the driver's, NULL
 * for the runtime, whose procedure has none). */
struct rgpu_cond_node {
    void *graph;
    const void *deps;           /* node handles, as the caller's array */
    size_t ndeps;
    uint64_t handle;
    unsigned int type, size;
    void *ctx;
};

/* The node made (*made) with its bodies in an array of ours (*bodies)
 * through proc, the library's; its status.  A node of more bodies than
 * the server makes is refused here, before its array is allocated. */
static inline int rgpu_cond_node_add(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                     const struct rgpu_cond_node *c, void **made,
                                     void ***bodies)
{
    if ((c->ndeps && !c->deps) || c->size > RGPU_GRAPH_MAX_BODIES)
        return lib->is_runtime ? rgpu_runtime_result(lib->invalid_value) : lib->invalid_value;
    void **list = calloc(c->size ? c->size : 1, sizeof *list);
    if (!list)   /* cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY: 2 */
        return lib->is_runtime ? rgpu_runtime_result(2) : 2;
    const void *rt_argv[] = { &made, &c->graph, &c->deps, &c->ndeps, &c->handle, &c->type,
                              &c->size, &list };
    const void *drv_argv[] = { &made, &c->graph, &c->deps, &c->ndeps, &c->handle, &c->type,
                               &c->size, &c->ctx, &list };
    int rc = rgpu_call(lib, proc, lib->is_runtime ? rt_argv : drv_argv);
    if (rc != 0) {
        free(list);
        return rc;
    }
    rgpu_graph_keep_bodies((uint64_t)(uintptr_t)c->graph, (uint64_t *)(void *)list, c->size);
    *bodies = list;
    return 0;
}

#endif
