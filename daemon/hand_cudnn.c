/* Hand-written cuDNN procedures, server side (client side:
 * stubs/cudnn_hand.c; argument lists: common/rgpu_hand_procs.h). */
#include "rgpud.h"
#include "rgpu_hand_procs.h"
#include "rgpu_proto.h"

#include <cudnn_graph.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudnn", #name))

/* [max_size] -> [message]: cuDNN's last message is per thread, and this
 * runs on the thread that served the client thread's earlier calls. */
static int h_last_error_string(struct hand_call *c)
{
    uint64_t max;
    if (args_count(c, 1) || arg_u64(c, 0, &max))
        return -RGPU_EPROTO;
    if (!REAL(cudnnGetLastErrorString))
        return -RGPU_ENOSYM;
    if (max > 65536)
        max = 65536;        /* cuDNN's messages are short; a frame is not */
    char *buf = calloc(1, max ? max : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    if (max)
        REAL(cudnnGetLastErrorString)(buf, max);
    msgpack_pack_array(c->out, 1);
    msgpack_pack_str_with_body(c->out, buf, strnlen(buf, max));
    free(buf);
    return 0;
}

const struct hand_proc hand_cudnn_procs[] = {
    { "cudnn", RGPU_H_CUDNN_LAST_ERROR, h_last_error_string },
};
const int hand_cudnn_nprocs = sizeof hand_cudnn_procs / sizeof hand_cudnn_procs[0];
