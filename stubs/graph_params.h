/* A graph's kernel node queried (cudaGraphKernelNodeGetParams,
 * cuGraphKernelNodeGetParams_v2): the arguments the server sent, packed by
 * the kernel's layout, kept for the caller as the pointers CUDA hands
 * back.  Each stub library holds its own list. */
#ifndef RGPU_GRAPH_PARAMS_H
#define RGPU_GRAPH_PARAMS_H

#include "rgpu_client.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The arguments of the last query of each node, kept for the caller: the
 * pointers CUDA hands back stay valid while the node keeps its
 * parameters; here until the same node is asked again. */
struct queried {
    uint64_t node;
    unsigned char *bytes;
    void **args;
    struct queried *next;
};
static pthread_mutex_t queried_lock = PTHREAD_MUTEX_INITIALIZER;
static struct queried *queried;

/* The arguments of node as pointers into a copy kept for it (NULL for a
 * malformed answer). */
static inline void **rgpu_keep_node_args(uint64_t node, const msgpack_object *layout,
                                         const msgpack_object *bin)
{
    struct rgpu_layout l;
    if (!layout || !bin || rgpu_layout_parse(layout, &l) < 0)
        return NULL;
    struct queried *q = calloc(1, sizeof *q);
    int ok = q && bin->via.bin.size >= l.bytes &&
             (q->bytes = malloc(l.bytes ? l.bytes : 1)) &&
             (q->args = calloc(l.nparams ? l.nparams : 1, sizeof *q->args));
    for (unsigned i = 0; ok && i < l.nparams; i++)
        ok = (size_t)l.offset[i] + l.size[i] <= l.bytes;
    if (ok) {
        memcpy(q->bytes, bin->via.bin.ptr, l.bytes);
        for (unsigned i = 0; i < l.nparams; i++)
            q->args[i] = q->bytes + l.offset[i];
        q->node = node;
    }
    free(l.offset);
    free(l.size);
    if (!ok) {
        if (q) {
            free(q->bytes);
            free(q->args);
        }
        free(q);
        return NULL;
    }
    pthread_mutex_lock(&queried_lock);
    for (struct queried **p = &queried; *p; p = &(*p)->next)
        if ((*p)->node == node) {
            struct queried *old = *p;
            *p = old->next;
            free(old->bytes);
            free(old->args);
            free(old);
            break;
        }
    q->next = queried;
    queried = q;
    pthread_mutex_unlock(&queried_lock);
    return q->args;
}

#endif
