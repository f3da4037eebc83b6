/* Conditional graph nodes and their handles on the client, for the runtime
 * (stubs/cudart_graph_records.c) and the driver (stubs/cuda_graph_records.c);
 * server side daemon/hand_graph_conditionals.c, argument lists
 * common/rgpu_hand_procs.h.
 *
 * A conditional node's body graphs are made by the library with the node;
 * they come back as graph handles the program fills with nodes of its own,
 * in an array that CUDA keeps for the node's lifetime: here one of ours,
 * allocated per node and freed with the graph that holds the node
 * (rgpu_graph_keep_bodies; a node removed on its own keeps its array until
 * then, as rgpu cannot tell which arrays the program still reads). */
#ifndef RGPU_GRAPH_CONDITIONALS_H
#define RGPU_GRAPH_CONDITIONALS_H

#include "rgpu_client.h"
#include "rgpu_hand_procs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct rgpu_cond_node {
    uint64_t graph;
    const void *deps;           /* node handles, as the caller's array */
    size_t ndeps;
    uint64_t handle;
    unsigned type, size;
    uint64_t ctx;               /* the driver's; 0 for the runtime */
};

/* The proc of the library: the runtime's or the driver's. */
static inline uint32_t rgpu_cond_proc(const struct rgpu_lib *lib, const char *rt, const char *drv)
{
    return lib->is_runtime ? rgpu_proc_id("cudart", rt) : rgpu_proc_id("cuda", drv);
}

static inline int rgpu_graph_cond_handle(const struct rgpu_lib *lib, const char *what,
                                         uint64_t graph, uint64_t ctx, unsigned value,
                                         unsigned flags, uint64_t *handle)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    rgpu_req_begin(&req, rgpu_cond_proc(lib, RGPU_H_GRAPH_COND_HANDLE, RGPU_H_CU_GRAPH_COND_HANDLE),
                   0);
    msgpack_pack_array(&req.pk, 4);
    msgpack_pack_uint64(&req.pk, graph);
    msgpack_pack_uint64(&req.pk, ctx);
    msgpack_pack_uint32(&req.pk, value);
    msgpack_pack_uint32(&req.pk, flags);
    int rc = rgpu_req_exchange(lib, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(lib, &reply);
    if (rc == 0)
        *handle = rgpu_reply_u64(&reply, 0);
    rgpu_reply_free(&reply);
    return rc;
}

/* The body graphs of a reply, known to this process from now on, in an
 * array of ours; NULL for a malformed answer. */
static inline uint64_t *rgpu_cond_bodies(const struct rgpu_reply *reply, unsigned size)
{
    const msgpack_object *list = rgpu_reply_bin(reply, 1);
    if (!list || list->via.bin.size != (size_t)size * sizeof(uint64_t))
        return NULL;
    uint64_t *bodies = malloc((size_t)size * sizeof *bodies);
    if (!bodies)
        return NULL;
    memcpy(bodies, list->via.bin.ptr, (size_t)size * sizeof *bodies);
    for (unsigned i = 0; i < size; i++)
        rgpu_handle_note(rgpu_handle_class("CUgraph_st"), bodies[i], 0);
    return bodies;
}

/* [graph, bin dependencies, handle, type, size, ctx] -> [node, bin bodies] */
static inline int rgpu_graph_cond_node(const struct rgpu_lib *lib, const char *what,
                                       const struct rgpu_cond_node *c, uint64_t *node,
                                       uint64_t **bodies)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if (c->ndeps && !c->deps)
        return lib->is_runtime ? rgpu_runtime_result(lib->invalid_value) : lib->invalid_value;
    rgpu_req_begin(&req, rgpu_cond_proc(lib, RGPU_H_GRAPH_COND_NODE, RGPU_H_CU_GRAPH_COND_NODE), 0);
    msgpack_pack_array(&req.pk, 6);
    msgpack_pack_uint64(&req.pk, c->graph);
    msgpack_pack_bin(&req.pk, c->ndeps * sizeof(uint64_t));
    for (size_t i = 0; i < c->ndeps; i++) {
        uint64_t h;
        memcpy(&h, (const unsigned char *)c->deps + i * sizeof h, sizeof h);
        msgpack_pack_bin_body(&req.pk, &h, sizeof h);
    }
    msgpack_pack_uint64(&req.pk, c->handle);
    msgpack_pack_uint32(&req.pk, c->type);
    msgpack_pack_uint32(&req.pk, c->size);
    msgpack_pack_uint64(&req.pk, c->ctx);
    int rc = rgpu_req_exchange(lib, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(lib, &reply);
    if (rc == 0) {
        *node = rgpu_reply_u64(&reply, 0);
        *bodies = rgpu_cond_bodies(&reply, c->size);
        if (!*bodies)
            rc = rgpu_transport_status(lib, what, RGPU_EPROTO);
        else {
            rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), *node, 0);
            rgpu_graph_keep_bodies(c->graph, *bodies, c->size);
        }
    }
    rgpu_reply_free(&reply);
    return rc;
}

#endif
