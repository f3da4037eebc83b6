/* What the hand-written procedures need from daemon/session.c, for the
 * harnesses that run them without it. */
#include "rgpud.h"
#include "owned_handles.h"
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

/* What session.c's run_generated does for a hand-written procedure that
 * wraps a generated one (hand_cublasLt.c): decode, the handle and pointer
 * checks, the guard, the call, the outputs. */
int session_run_generated(const char *lib, const char *name, const msgpack_object *args,
                          msgpack_packer *outs)
{
    unsigned sel, index, l;
    struct rgpu_call_frame frame;
    if (fuzz_locate(rgpu_proc_id(lib, name), &sel, &index) < 0 || sel >= FUZZ_NGEN)
        return -RGPU_ENOPROC;
    const struct rgpu_proc *proc = fuzz_pick_generated(sel, index, &l);
    const struct rgpu_lib *rl = fuzz_gen[l].lib;
    void *fn = fuzz_gen[l].server[index].own ? fuzz_gen[l].server[index].own
                                              : backend_sym(rl->name, proc->name);
    int transport = rgpu_decode_args(args, proc, &frame), api = 0;
    if (transport == RGPU_OK && !fn)
        transport = RGPU_ENOSYM;
    if (transport == RGPU_OK) {
        const struct guard *g = guard_for(rl->name, proc->name);
        api = handles_check_call(rl, proc, &frame);
        if (api == 0)
            api = rgpu_check_args(rl, proc, &frame);
        if (api == 0 && g && g->pre)
            api = g->pre(frame.argv);
        if (api == 0) {
            uint64_t forgotten = handles_before_call(proc, &frame);
            fuzz_serve_status = RGPU_OK;
            api = fuzz_gen[l].server[index].thunk(fn, frame.argv);
            if (fuzz_serve_status != RGPU_OK)
                transport = fuzz_serve_status;
            handles_after_call(proc, &frame, api, forgotten);
        }
        if (g && g->post)
            g->post(frame.argv, api);
        rgpu_encode_outs(outs, proc, &frame);
    }
    rgpu_call_frame_release(&frame);
    return transport != RGPU_OK ? -transport : api;
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
