/* What the graph procedures of rgpu's own (codegen/cudart_own.h and
 * codegen/cuda_own.h, "graphs") say besides handles and numbers: the node
 * operation, a copy node's host region named by a token and its device
 * side, and the bounds both ends hold a call to.  The runtime's and the
 * driver's procedures take the same arguments in the same order (the
 * driver's with a context where its calls have one), so that the client
 * core sends either library's (common/rgpu_graph_host.c) and rgpud serves
 * both with one implementation (daemon/hand_graphs.c, daemon/graph_host.c,
 * daemon/hand_graph_conditionals.c). */
#ifndef RGPU_GRAPH_WIRE_H
#define RGPU_GRAPH_WIRE_H

#include <stdint.h>

/* A node operation: ADD a node to graph after deps, SET node's parameters,
 * or EXEC_SET them for node in the executable graph exec. */
enum rgpu_graph_node_op { RGPU_GRAPH_NODE_ADD, RGPU_GRAPH_NODE_SET, RGPU_GRAPH_EXEC_SET };

/* Which way a copy node with host memory goes. */
enum rgpu_copy_direction { RGPU_COPY_TO_DEVICE = 1, RGPU_COPY_TO_HOST = 2 };

/* The most bytes a graph copy to or from host memory carries: they travel
 * in one callback frame each time the node runs. */
#define RGPU_GRAPH_COPY_MAX (64u << 20)
/* Dependencies one node call may list. */
#define RGPU_GRAPH_MAX_DEPS 4096
/* Body graphs of one conditional node (a switch's cases). */
#define RGPU_GRAPH_MAX_BODIES 1024
/* Nodes or edges one list query answers (a larger graph's list is refused
 * as out of memory). */
#define RGPU_GRAPH_LIST_MAX (1u << 20)
/* A kernel node's parameters as a query answers them: at most this many
 * parameters, packed into at most this many bytes (the launches' bounds). */
#define RGPU_GRAPH_PARAMS_MAX 512
#define RGPU_GRAPH_PARAM_BYTES_MAX 32768

/* A copy between the host region that token names on the client (width x
 * height x depth bytes, packed as it travels) and device memory at dev:
 * pitch bytes per row and rows per plane there (0: packed), and the start
 * within it, x in bytes.  The server checks the device side over its whole
 * extent as the session's memory. */
struct rgpu_graph_copy {
    uint32_t direction;         /* enum rgpu_copy_direction */
    uint32_t reserved;          /* 0 */
    uint64_t token;
    uint64_t width, height, depth;
    uint64_t dev, pitch, rows, x, y, z;
};

#endif
