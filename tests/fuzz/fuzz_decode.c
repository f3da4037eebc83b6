/* libFuzzer harness: the server-side decoder (common/rgpu_marshal.c) for
 * every generated procedure of every library.  The input is one record
 * (procs.h): a selector, an index and the argument array as msgpack, which
 * goes through the session's frame check first, as on the wire.  Then
 * rgpu_decode_args, rgpu_encode_outs (as if the call wrote nothing) and
 * rgpu_call_frame_release; the real call is fuzz_dispatch's. */
#include "procs.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    msgpack_zone zone;
    msgpack_object args;
    struct rgpu_call_frame frame;
    unsigned lib;

    if (size < 3)
        return 0;
    const struct rgpu_proc *proc = fuzz_pick_generated(data[0], (unsigned)data[1] << 8 | data[2], &lib);
    if (!msgpack_zone_init(&zone, 4096))
        return 0;
    if (rgpu_unpack_frame((const char *)data + 3, size - 3, &zone, &args) == 0) {
        int rc = rgpu_decode_args(&args, proc, &frame);
        if (rc == RGPU_OK) {
            msgpack_sbuffer sb;
            msgpack_packer pk;
            msgpack_sbuffer_init(&sb);
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            rgpu_encode_outs(&pk, proc, &frame);
            msgpack_sbuffer_destroy(&sb);
        } else if (rc != RGPU_EPROTO && rc != RGPU_ETOOBIG && rc != RGPU_ENOMEM) {
            abort();            /* a status the session does not expect */
        }
        rgpu_call_frame_release(&frame);
    }
    msgpack_zone_destroy(&zone);
    return 0;
}
