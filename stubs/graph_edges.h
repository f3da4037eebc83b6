/* A graph's node and edge lists from the server's answers into the
 * caller's arrays, for the runtime (cudaGraphGetNodes, cudaGraphGetEdges...)
 * and the driver (cuGraphGetNodes, cuGraphGetEdges_v2...): their node and
 * edge-data records are the same bytes. */
#ifndef RGPU_GRAPH_EDGES_H
#define RGPU_GRAPH_EDGES_H

#include "rgpu_client.h"

#include <stdint.h>
#include <string.h>

/* The reply of rgpu.graph_edges / rgpu.cu_graph_edges: [count, bin from,
 * bin to, bin data].  CUDA's way: without arrays, *count becomes how many
 * edges there are; with them, *count entries are filled (NULL and zeroes
 * past the graph's) and *count becomes the number filled.  Each node is
 * known to this process from now on.  0, or -1 for a malformed answer. */
static inline int rgpu_graph_edges_take(const struct rgpu_reply *reply, void **from, void **to,
                                        void *data, size_t data_size, size_t *count)
{
    const msgpack_object *f = rgpu_reply_bin(reply, 1), *t = rgpu_reply_bin(reply, 2),
                         *d = rgpu_reply_bin(reply, 3);
    size_t total = rgpu_reply_u64(reply, 0), cap = from ? *count : 0;
    if (!f || !t || !d || f->via.bin.size != t->via.bin.size || f->via.bin.size % 8)
        return -1;
    size_t got = f->via.bin.size / 8;
    if (got > cap || got > total || (d->via.bin.size && d->via.bin.size != got * data_size))
        return -1;
    if (!from) {
        *count = total;
        return 0;
    }
    uint32_t cls = rgpu_handle_class("CUgraphNode_st");
    for (size_t i = 0; i < cap; i++) {
        uint64_t a = 0, b = 0;
        if (i < got) {
            memcpy(&a, f->via.bin.ptr + i * 8, 8);
            memcpy(&b, t->via.bin.ptr + i * 8, 8);
            rgpu_handle_note(cls, a, 0);
            rgpu_handle_note(cls, b, 0);
        }
        from[i] = (void *)(uintptr_t)a;
        to[i] = (void *)(uintptr_t)b;
        if (data) {
            if (i < got && d->via.bin.size)
                memcpy((char *)data + i * data_size, d->via.bin.ptr + i * data_size, data_size);
            else
                memset((char *)data + i * data_size, 0, data_size);
        }
    }
    *count = got;
    return 0;
}

/* A graph's nodes (which 0) or roots (1) through proc ([which, graph,
 * cap] -> [count, bin nodes]), CUDA's way: with nodes NULL, *count becomes
 * how many there are; else *count entries are filled (NULL past the
 * graph's) and *count becomes the number filled, each node known to this
 * process from now on.  The library's status, or the transport's. */
static inline int rgpu_graph_nodes_ask(const struct rgpu_lib *lib, uint32_t proc,
                                       const char *what, int which, uint64_t graph, void **nodes,
                                       size_t *count)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    rgpu_req_begin(&req, proc, 0);
    msgpack_pack_array(&req.pk, 3);
    msgpack_pack_uint32(&req.pk, (uint32_t)which);
    msgpack_pack_uint64(&req.pk, graph);
    msgpack_pack_uint64(&req.pk, nodes ? *count : 0);
    int rc = rgpu_req_exchange(lib, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(lib, &reply);
    const msgpack_object *list = rgpu_reply_bin(&reply, 1);
    size_t total = rgpu_reply_u64(&reply, 0);
    size_t got = list ? list->via.bin.size / sizeof(uint64_t) : 0;
    if (rc == 0 && (!list || list->via.bin.size % sizeof(uint64_t) ||
                    got > (nodes ? *count : 0) || got > total))
        rc = rgpu_transport_status(lib, what, RGPU_EPROTO);
    if (rc == 0 && !nodes) {
        *count = total;
    } else if (rc == 0) {
        for (size_t i = 0; i < *count; i++) {
            uint64_t h = 0;
            if (i < got) {
                memcpy(&h, list->via.bin.ptr + i * sizeof h, sizeof h);
                rgpu_handle_note(rgpu_handle_class("CUgraphNode_st"), h, 0);
            }
            nodes[i] = (void *)(uintptr_t)h;
        }
        *count = got;
    }
    rgpu_reply_free(&reply);
    return rc;
}

#endif
