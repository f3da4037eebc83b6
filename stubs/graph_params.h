/* A graph's kernel node queried (cudaGraphKernelNodeGetParams,
 * cuGraphKernelNodeGetParams_v2): the arguments the server sent, packed by
 * the kernel's layout, kept for the caller as the pointers CUDA hands
 * back.  Each stub library holds its own list. */
#ifndef RGPU_GRAPH_PARAMS_H
#define RGPU_GRAPH_PARAMS_H

#include "rgpu_client.h"
#include "rgpu_graph_wire.h"

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

/* A query's answer as it travels (rgpu_graph_kernel_params,
 * rgpu_cu_graph_kernel_params): the kernel's layout and its arguments
 * packed by it, with room for the most a kernel has. */
struct rgpu_node_args {
    uint32_t offsets[RGPU_GRAPH_PARAMS_MAX], sizes[RGPU_GRAPH_PARAMS_MAX];
    unsigned char bytes[RGPU_GRAPH_PARAM_BYTES_MAX];
    size_t nparams, nbytes;
};

/* The arguments of node as pointers into a copy of the answer's kept for
 * it (NULL for a malformed answer: counts past its room, a parameter
 * outside the bytes). */
static inline void **rgpu_keep_node_args(uint64_t node, const struct rgpu_node_args *a)
{
    size_t n = a->nparams, nbytes = a->nbytes;
    const uint32_t *offsets = a->offsets, *sizes = a->sizes;
    const unsigned char *bytes = a->bytes;
    if (n > RGPU_GRAPH_PARAMS_MAX || nbytes > RGPU_GRAPH_PARAM_BYTES_MAX)
        return NULL;
    struct queried *q = calloc(1, sizeof *q);
    int ok = q && (q->bytes = malloc(nbytes ? nbytes : 1)) &&
             (q->args = calloc(n ? n : 1, sizeof *q->args));
    for (size_t i = 0; ok && i < n; i++)
        ok = (size_t)offsets[i] + sizes[i] <= nbytes;
    if (!ok) {
        if (q) {
            free(q->bytes);
            free(q->args);
        }
        free(q);
        return NULL;
    }
    memcpy(q->bytes, bytes, nbytes);
    for (size_t i = 0; i < n; i++)
        q->args[i] = q->bytes + offsets[i];
    q->node = node;
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
