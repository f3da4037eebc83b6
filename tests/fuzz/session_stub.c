/* What the hand-written procedures need from daemon/session.c, for the
 * harnesses that run them without it. */
#include "rgpud.h"
#include "owned_handles.h"
#include "cudart_serve.h"
#include "cuda_serve.h"
#include "rgpu_serve.h"
#include "procs.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The session would write sb to the client (liblog.c's log frames): it
 * must at least be one well-formed msgpack object. */
void session_send(const msgpack_sbuffer *sb)
{
    if (rgpu_msgpack_check(sb->data, sb->size) != 0) {
        fprintf(stderr, "fuzz: the server would send malformed msgpack\n");
        abort();
    }
}

int fuzz_serve_status;

/* host_functions.c's, for graph_host.c: no client is here to run a graph
 * host node, which counts as run at once with nothing to send back (recv
 * keeps what it had, as when an answer does not fit), and a marker after
 * a launch as placed. */
void host_functions_run_node(uint64_t token, int status, const void *send, size_t send_len,
                             void *recv, size_t recv_len)
{
    (void)token, (void)status, (void)send, (void)send_len, (void)recv, (void)recv_len;
}

int host_function_marker(int runtime, int ptsz, uint64_t stream, uint64_t id)
{
    (void)runtime, (void)ptsz, (void)stream, (void)id;
    return 0;
}

/* host_functions.c's serve_ functions: a host function on a stream would
 * wait for a client that is not here (the session's reader answers them),
 * so they are refused, as a server without the function would. */
cudaError_t serve_rgpu_host_func(cudaStream_t stream, int ptsz, int callback, uint64_t id,
                                 unsigned int flags, uint64_t token, int *captured)
{
    (void)stream, (void)ptsz, (void)callback, (void)id, (void)flags, (void)token;
    if (captured)
        *captured = 0;
    return serve_transport(RGPU_ENOSYM);
}

CUresult serve_rgpu_cu_host_func(CUstream stream, int ptsz, int callback, uint64_t id,
                                 unsigned int flags, uint64_t token, int *captured)
{
    (void)stream, (void)ptsz, (void)callback, (void)id, (void)flags, (void)token;
    if (captured)
        *captured = 0;
    return serve_transport(RGPU_ENOSYM);
}

/* session.c's own procedures: no queue here to fence, no workers whose
 * failures went unreported. */
rgpu_status serve_rgpu_fence(void)
{
    return RGPU_STATUS_OK;
}

rgpu_status serve_rgpu_unreported(struct rgpu_unreported *entries, size_t capacity,
                                  size_t *count)
{
    (void)entries, (void)capacity;
    if (!count)
        return RGPU_STATUS_INVALID;
    *count = 0;
    return RGPU_STATUS_OK;
}

/* auth.c's (not linked here): a late library's digest matches none. */
rgpu_status serve_rgpu_late_lib(const char *lib, const void *digest, size_t digest_size)
{
    (void)lib, (void)digest, (void)digest_size;
    return serve_transport(RGPU_EVERSION);
}

/* session.c's: what a serve_ function says of its call's transport. */
int serve_transport(int status)
{
    fuzz_serve_status = status;
    return 0;
}

/* session.c's: the reply would carry fewer bytes of that output. */
void serve_out_used(const void *out, size_t used)
{
    (void)out, (void)used;
}

/* No socket here: a streamed payload (never made by the harnesses, which
 * hand procedures their arguments whole) reads as zeros, and a data frame
 * goes nowhere, its length still checked. */
void hand_read_payload(struct hand_call *c, void *buf, size_t len)
{
    if (len > c->in_len) {
        fprintf(stderr, "fuzz: a handler read past its payload\n");
        abort();
    }
    memset(buf, 0, len);
    c->in_len -= len;
}

void hand_data_begin(struct hand_call *c, size_t len)
{
    c->data_left = len;
}

void hand_data_write(struct hand_call *c, const void *p, size_t n)
{
    (void)p;
    if (n > c->data_left) {
        fprintf(stderr, "fuzz: a handler sent past its data frame\n");
        abort();
    }
    c->data_left -= n;
}

void hand_data_end(struct hand_call *c)
{
    if (c->data_left) {
        fprintf(stderr, "fuzz: a handler left its data frame short\n");
        abort();
    }
}
