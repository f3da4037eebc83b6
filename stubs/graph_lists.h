/* The graph requests whose client side the runtime (stubs/cudart_graphs.c)
 * and the driver (stubs/cuda_graphs.c) share: node and edge lists, the dot
 * description, memory-allocation nodes.  Each library sends its own
 * procedure of rgpu's (codegen/cudart_own.h, codegen/cuda_own.h, "graphs"),
 * whose arguments are its twin's, so one implementation here serves both:
 * proc is the library's, statuses are its own (the runtime's recorded as
 * its last error).  Node handles, node records and edge records are the
 * same bytes in both APIs; the codec notes the nodes an answer carries as
 * the session's. */
#ifndef RGPU_GRAPH_LISTS_H
#define RGPU_GRAPH_LISTS_H

#include "rgpu_client.h"
#include "client_ranges.h"
#include "write_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One of the statuses both libraries number alike, as lib returns it. */
static inline int rgpu_graph_status(const struct rgpu_lib *lib, int status)
{
    return lib->is_runtime ? rgpu_runtime_result(status) : status;
}

/* The most entries a list asks for: a graph larger than the server
 * answers is refused there. */
static inline size_t rgpu_graph_list_room(const void *list, const size_t *count)
{
    return !list ? 0 : *count < RGPU_GRAPH_LIST_MAX ? *count : RGPU_GRAPH_LIST_MAX;
}

/* A graph's nodes (roots 0) or roots (1), CUDA's way: with nodes NULL,
 * *count becomes how many there are; else the caller's *count entries are
 * filled, those past the graph's NULL, and *count becomes the number
 * filled. */
static inline int rgpu_graph_nodes_ask(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                       void *graph, int roots, void **nodes, size_t *count)
{
    size_t room = rgpu_graph_list_room(nodes, count), total = 0, *total_out = &total;
    const void *argv[] = { &graph, &roots, &nodes, &room, &total_out };
    int rc = rgpu_call(lib, proc, argv);
    if (rc != 0)
        return rc;
    size_t got = total < room ? total : room;
    if (!nodes) {
        *count = total;
        return 0;
    }
    for (size_t i = got; i < *count; i++)
        nodes[i] = NULL;
    *count = got;
    return 0;
}

/* A graph's edges, as its nodes: with from and to NULL the count; else
 * *count entries of from, to and (where not NULL) the edge records filled,
 * NULL and zeroes past the graph's. */
static inline int rgpu_graph_edges_ask(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                       void *graph, void **from, void **to, uint64_t *edges,
                                       size_t *count)
{
    size_t room = rgpu_graph_list_room(from, count), total = 0, *total_out = &total;
    const void *argv[] = { &graph, &from, &to, &edges, &room, &total_out };
    if (!count || !from != !to || (edges && !from))
        return rgpu_graph_status(lib, lib->invalid_value);
    int rc = rgpu_call(lib, proc, argv);
    if (rc != 0)
        return rc;
    size_t got = total < room ? total : room;
    if (!from) {
        *count = total;
        return 0;
    }
    for (size_t i = got; i < *count; i++) {
        from[i] = to[i] = NULL;
        if (edges)
            edges[i] = 0;
    }
    *count = got;
    return 0;
}

/* The dot description: printed by the library on the server, written here
 * to the caller's file.  Asked with room for a usual graph's, again with
 * room for all of a larger one. */
#define RGPU_GRAPH_DOT_FIRST (64u << 10)
static inline int rgpu_graph_dot_ask(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                     void *graph, const char *path, unsigned int flags)
{
    size_t room = RGPU_GRAPH_DOT_FIRST, size = 0, *size_out = &size;
    char *text = NULL;
    int rc = 0;
    if (!path)
        return rgpu_graph_status(lib, lib->invalid_value);
    for (int asked = 0; rc == 0 && asked < 2 && (!asked || size > room); asked++) {
        room = asked ? size : room;
        char *bigger = realloc(text, room ? room : 1);
        if (!bigger) {
            free(text);
            return rgpu_transport_status(lib, proc->name, RGPU_ENOMEM);
        }
        text = bigger;
        const void *argv[] = { &graph, &flags, &text, &room, &size_out };
        rc = rgpu_call(lib, proc, argv);
    }
    if (rc == 0 && size > room)
        rc = rgpu_transport_status(lib, proc->name, RGPU_EPROTO);
    /* cudaErrorOperatingSystem and CUDA_ERROR_OPERATING_SYSTEM: 304 */
    if (rc == 0 && rgpu_write_file(path, text, size) != 0)
        rc = rgpu_graph_status(lib, 304);
    free(text);
    return rc;
}

/* A memory-allocation node: the record's parts travel (the runtime's and
 * the driver's records are the same bytes); the address comes back, fixed
 * from now on, and is device memory to this process's range table as to
 * the server's.  The range stays recorded after the graph's free node
 * runs, as the address stays reserved for the graph. */
struct rgpu_graph_alloc {
    void *graph;
    void *const *deps;
    size_t ndeps;
    const void *props, *descs;
    size_t ndescs, bytesize;
};

static inline int rgpu_graph_mem_alloc_ask(const struct rgpu_lib *lib,
                                           const struct rgpu_proc *proc,
                                           const struct rgpu_graph_alloc *a, void **node,
                                           uint64_t *dptr)
{
    void *made = NULL, **made_out = &made;
    const void *argv[] = { &made_out, &a->graph, &a->deps, &a->ndeps, &a->props, &a->descs,
                           &a->ndescs, &a->bytesize, &dptr };
    if (!node || !dptr || (a->ndeps && !a->deps) || (a->ndescs && !a->descs))
        return rgpu_graph_status(lib, lib->invalid_value);
    int rc = rgpu_call(lib, proc, argv);
    if (rc == 0) {
        rgpu_ranges_add(*dptr, a->bytesize, RGPU_RANGE_DEVICE);
        *node = made;
    }
    return rc;
}

#endif
