/* libFuzzer harness: the dispatch of every procedure on the fake GPU
 * backend, in this process.
 *
 * What daemon/session.c does with a request after reading it, minus the
 * socket and the threads: the generated path is decode -> guard -> thunk ->
 * encode -> release (as session.c's run_generated).  session_send, the one
 * thing the serve_ functions need from session.c, is session_stub.c's.
 *
 * The input is a sequence of records (procs.h), each [selector u8][index
 * u16 BE][length u16 BE][msgpack arguments], run in order, so that a call
 * can use the handles an earlier one made (an allocation, then a copy).  A
 * record that session.c would answer with a protocol error ends the input,
 * as it ends the session.  Each input ends with cudaDeviceReset, so that
 * the next starts from (nearly) fresh device state and a crash replays from
 * its own input; what the reset does not undo (contexts made with
 * cuCtxCreate, library handles, the guards' tables) lives on, as in a
 * session. */
#include "owned_handles.h"
#include "procs.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_FAKEGPU_DIR
#define FUZZ_FAKEGPU_DIR NULL
#endif

/* Resolved functions, per generated library and procedure: (void *)-1 when
 * the backend lacks one. */
static void **resolved[FUZZ_NGEN];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("RGPU_FUZZ_LIB_DIR");
    (void)argc;
    (void)argv;
    if (backend_open(dir && *dir ? dir : FUZZ_FAKEGPU_DIR, NULL, NULL, NULL, 0) < 0) {
        fprintf(stderr, "fuzz_dispatch: cannot load the fake backend from %s\n",
                dir && *dir ? dir : FUZZ_FAKEGPU_DIR);
        exit(1);
    }
    for (unsigned i = 0; i < FUZZ_NGEN; i++)
        resolved[i] = calloc(fuzz_gen[i].lib->nprocs, sizeof(void *));
    return 0;
}

static void *resolve(unsigned lib, size_t index)
{
    void **slot = &resolved[lib][index];
    if (fuzz_gen[lib].server[index].own)
        return fuzz_gen[lib].server[index].own;     /* rgpu's own procedure */
    if (!*slot) {
        void *fn = backend_sym(fuzz_gen[lib].lib->name, fuzz_gen[lib].lib->procs[index].name);
        *slot = fn ? fn : (void *)-1;
    }
    return *slot == (void *)-1 ? NULL : *slot;
}

/* Returns the transport status session.c would act on. */
static int run_generated(unsigned sel, unsigned index, const msgpack_object *args,
                         msgpack_packer *outs)
{
    unsigned lib;
    const struct rgpu_proc *proc = fuzz_pick_generated(sel, index, &lib);
    size_t k = (size_t)(proc - fuzz_gen[lib].lib->procs);
    struct rgpu_call_frame frame;
    void *fn = resolve(lib, k);

    int transport = rgpu_decode_args(args, proc, &frame);
    /* A sink's bytes go as a data frame, whose length session_stub.c
     * checks. */
    struct hand_call c = { .args = args, .out = outs, .serial = 1, .sink_len = frame.sink_len };
    serve_call = &c;
    if (transport == RGPU_OK && !fn)
        transport = RGPU_ENOSYM;
    if (transport == RGPU_OK) {
        const struct rgpu_lib *rl = fuzz_gen[lib].lib;
        const struct guard *g = guard_for(rl->name, proc->name);
        /* The checks session.c makes before any call: rgpu's own
         * procedures count on them as the real libraries do. */
        int api = handles_check_call(rl, proc, &frame);
        if (api == 0)
            api = rgpu_check_args(rl, proc, &frame);
        if (api == 0 && g && g->pre)
            api = g->pre(frame.argv);
        if (api == 0) {
            uint64_t forgotten = handles_before_call(proc, &frame);
            fuzz_serve_status = RGPU_OK;
            api = fuzz_gen[lib].server[k].thunk(fn, frame.argv);
            if (fuzz_serve_status != RGPU_OK)
                transport = fuzz_serve_status;
            handles_after_call(proc, &frame, api, forgotten);
        }
        if (g && g->post)
            g->post(frame.argv, api);
        rgpu_encode_outs(outs, proc, &frame);
    }
    serve_call = NULL;
    if (c.data_left)
        abort();                /* a data frame left open */
    rgpu_call_frame_release(&frame);
    return transport;
}

static int run_record(unsigned sel, unsigned index, const char *buf, size_t len)
{
    msgpack_zone zone;
    msgpack_object args;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int transport = RGPU_EPROTO;

    sel %= FUZZ_NGEN;
    if (!msgpack_zone_init(&zone, 4096))
        return RGPU_ENOMEM;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    /* session.c refuses a request whose arguments are not an array. */
    if (rgpu_unpack_frame(buf, len, &zone, &args) == 0 && args.type == MSGPACK_OBJECT_ARRAY)
        transport = run_generated(sel, index, &args, &pk);
    if (transport == RGPU_OK && sb.size && rgpu_msgpack_check(sb.data, sb.size) != 0) {
        fprintf(stderr, "fuzz_dispatch: malformed outputs\n");
        abort();
    }
    msgpack_sbuffer_destroy(&sb);
    msgpack_zone_destroy(&zone);
    return transport;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size >= 5) {
        unsigned sel = data[0], index = (unsigned)data[1] << 8 | data[2];
        size_t len = (size_t)data[3] << 8 | data[4];
        data += 5;
        size -= 5;
        if (len > size)
            len = size;
        /* Copied so that ASan sees the end of the record as the end of the
         * frame, as the session's malloc'd frame is. */
        char *buf = malloc(len ? len : 1);
        if (!buf)
            return 0;
        memcpy(buf, data, len);
        int transport = run_record(sel, index, buf, len);
        free(buf);
        if (transport == RGPU_EPROTO || transport == RGPU_ETOOBIG)
            break;
        data += len;
        size -= len;
    }
    int (*reset)(void) = (int (*)(void))backend_sym("cudart", "cudaDeviceReset");
    if (reset)
        (void)reset();
    return 0;
}
