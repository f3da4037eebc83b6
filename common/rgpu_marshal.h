/* The table-driven marshaller.
 *
 * The generator describes every remoted function as a struct rgpu_proc: a
 * list of parameters, each with a wire kind.  One hand-written marshaller
 * walks that list on both ends (rgpu_marshal.c): the client encodes the
 * arguments of a call, the server decodes them into storage, calls the real
 * function through a generated thunk, and encodes what the function wrote.
 */
#ifndef RGPU_MARSHAL_H
#define RGPU_MARSHAL_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "rgpu_handles.h"

enum rgpu_kind {
    RGPU_VAL,       /* scalar, enum, handle or device pointer by value (<= 8 bytes) */
    RGPU_BYVAL,     /* a pointer-free struct passed by value (dim3, CUuuid) */
    RGPU_IN,        /* const T *: size bytes read by the callee, NULL allowed */
    RGPU_OUT,       /* T *: size bytes written by the callee, NULL allowed */
    RGPU_INOUT,     /* T *: read and written */
    RGPU_STR,       /* const char *: NUL-terminated, NULL allowed */
    RGPU_IN_BUF,    /* const void *: count(len_arg) * size bytes */
    RGPU_OUT_BUF,   /* void *: up to count(len_arg) * size bytes written */
    /* A scalar that is a host value or a device pointer, as the call's
     * handle says (cuBLAS's pointer mode); size 0: from the type params. */
    RGPU_SCALAR_IN,
    RGPU_SCALAR_OUT,
    RGPU_SCALAR_INOUT,
    RGPU_INOUT_BUF, /* void *: count(len_arg) * size bytes read and written */
    /* A device pointer by value, like RGPU_VAL (8 bytes), that the server
     * checks against the memory its session owns before the call runs:
     * [ptr, ptr + count(len_arg) * size), or ptr alone without len_arg.
     * NULL passes (the library checks it). */
    RGPU_DEVPTR,
    /* An opaque library handle by value (8 bytes, travels as RGPU_VAL): the
     * server refuses one it never handed out (param.handle_class). */
    RGPU_HANDLE,
};

/* Buffers whose bytes travel outside the frame buffer (rgpu's own
 * procedures, whose serve_ function takes part: daemon/rgpud.h). */
enum rgpu_param_flags {
    /* IN_BUF, the last parameter: the client writes its bytes from the
     * caller's memory after the rest of the frame (rgpu_bulk.payload); the
     * server leaves one of RGPU_STREAM_MIN bytes or more in the socket,
     * for the serve_ function to read while it works (a copy's pieces),
     * and hands a smaller one over where the frame holds it, uncopied
     * (the serve_ function only reads it, during the call). */
    RGPU_PARAM_STREAM = 1u << 0,
    /* OUT_BUF: of RGPU_STREAM_MIN bytes or more, the server sends its bytes
     * ahead of the reply as a data frame (common/rgpu_proto.h) that the
     * client reads straight into the caller's buffer (rgpu_bulk.sink). */
    RGPU_PARAM_SINK = 1u << 1,
};

/* Largest scalar (cuDoubleComplex) plus room: what the server allocates. */
#define RGPU_SCALAR_MAX 64

struct rgpu_param {
    const char *name;
    uint8_t kind;           /* enum rgpu_kind */
    uint32_t size;          /* value or element size in bytes */
    int8_t len_arg;         /* *_BUF: index of the parameter holding the count;
                               SCALAR_*: of the type parameter, or -1 */
    int8_t aux_arg;         /* SCALAR_*: a second type parameter, or -1;
                               *_BUF with elem: the element-type parameter */
    uint32_t (*elem)(int type);     /* *_BUF: element size by type, or NULL */
    /* RGPU_HANDLE: the handle's class (rgpu_handles.h); IN, OUT and the buffers: the
     * class of the 8-byte handles the buffer holds (checked going in,
     * recorded coming out); 0: none. */
    uint32_t handle_class;
    uint8_t handle_flags;           /* enum rgpu_handle_flags */
    int32_t handle_status;          /* refusal status, 0: the library's */
    uint8_t flags;                  /* enum rgpu_param_flags */
    /* OUT_BUF: the output parameter (at most 8 bytes) holding how many
     * elements the callee filled: only those travel back; -1: all. */
    int8_t used_arg;
};

struct rgpu_proc;

/* How a library's scalars travel (client side, registered by its stub). */
struct rgpu_scalar_policy {
    /* Whether scalar parameter `param` of this call lives on the host (else
     * it is a device pointer). */
    int (*host)(const struct rgpu_proc *proc, unsigned param, const void *const *argv);
    /* Bytes of an untyped scalar parameter, from its type parameters. */
    uint32_t (*size)(const struct rgpu_proc *proc, unsigned param, const void *const *argv);
    /* Optional: a smaller size than the annotated upper bound, when the
     * call's arguments tell (cuDNN: float unless the data is double). */
    uint32_t (*refine)(const struct rgpu_proc *proc, unsigned param, const void *const *argv,
                       uint32_t bound);
};

enum rgpu_proc_flags {
    RGPU_PROC_ASYNC = 1u << 0,  /* may go without waiting for its reply */
    RGPU_PROC_PURE = 1u << 1,   /* its outputs are a function of its arguments */
};

struct rgpu_proc {
    const char *name;
    uint32_t id;
    uint32_t flags;
    uint8_t nparams;
    const struct rgpu_param *params;
    /* The library version that brought it (codegen's `since`), in the
     * library's own numbering; 0: older than any the build knows.  The
     * client refuses the call when the server's library is older. */
    uint32_t since;
};

/* A library as both ends see it: its procedures, sorted by id. */
struct rgpu_lib {
    const char *name;           /* "cudart" */
    const char *soname;         /* "libcudart.so.13" */
    int not_supported;          /* the library's not-supported status */
    int unavailable;            /* its status when no server can be reached */
    int invalid_value;          /* its invalid-argument status (a refused pointer) */
    int is_runtime;             /* keeps cudart's per-thread last error */
    size_t nprocs;
    const struct rgpu_proc *procs;
    int invalid_handle;         /* its status for a handle never handed out */
    int version;                /* the headers' version of the library, in its own
                                   numbering (13050: CUDA 13.5's runtime); 0: unknown */
};

/* Generated by codegen for each library. */
typedef int (*rgpu_thunk)(void *fn, void **argv);
struct rgpu_server_proc {
    const struct rgpu_proc *proc;
    rgpu_thunk thunk;
    /* rgpu's own procedures: the server function the thunk calls (daemon/),
     * in place of the library's (NULL: looked up in the library). */
    void *own;
};

/* Largest number of parameters a remoted function may have. */
#define RGPU_MAX_PARAMS 40

/* Client side: append the arguments of a call (argv[i] points at argument
 * i) to pk as one msgpack array; a stream parameter's bytes inline. */
int rgpu_encode_args(msgpack_packer *pk, const struct rgpu_proc *proc,
                     const void *const *argv, const struct rgpu_scalar_policy *pol);

/* The bytes of a call that travel outside its frame buffer, client side:
 * a stream parameter's, written from the caller's memory after the rest
 * (the frame ends in their bin, whose header the sender packs), and the
 * caller's buffer a sink output may land in (sink_param its index). */
struct rgpu_bulk {
    const void *payload;
    size_t payload_len;
    void *sink;
    size_t sink_len;
    unsigned sink_param;
};

/* rgpu_encode_args, with a stream parameter left out for the sender (the
 * array's last element) and its bytes and any sink described in bulk. */
int rgpu_encode_call(msgpack_packer *pk, const struct rgpu_proc *proc, const void *const *argv,
                     const struct rgpu_scalar_policy *pol, struct rgpu_bulk *bulk);

/* Whether the call must wait for a reply to fill host outputs. */
int rgpu_has_host_outputs(const struct rgpu_proc *proc, const void *const *argv,
                          const struct rgpu_scalar_policy *pol);

/* Client side: copy the outputs in reply array outs back through argv.
 * Returns RGPU_OK or RGPU_EPROTO when the reply does not fit the call. */
int rgpu_decode_outs(const msgpack_object *outs, const struct rgpu_proc *proc,
                     const void *const *argv, const struct rgpu_scalar_policy *pol);

/* The same for a call encoded with rgpu_encode_call whose status was api:
 * sunk bytes (0, or all of bulk->sink_len) landed in the sink already, and
 * the reply's bin for it is then empty; otherwise a sink output comes
 * whole, or (nil) not at all when the call failed. */
int rgpu_decode_call_outs(const msgpack_object *outs, const struct rgpu_proc *proc,
                          const void *const *argv, const struct rgpu_scalar_policy *pol,
                          const struct rgpu_bulk *bulk, size_t sunk, int api);

/* Client side: the bytes host buffer parameter i of a call points at (IN,
 * OUT, INOUT, *_BUF), 0 for any other kind. */
size_t rgpu_param_bytes_client(const struct rgpu_proc *proc, unsigned i, const void *const *argv);

/* Server side: storage for one call's decoded arguments. */
struct rgpu_call_frame {
    uint64_t slot[RGPU_MAX_PARAMS];     /* values and pointers */
    void *argv[RGPU_MAX_PARAMS];        /* what the thunk dereferences */
    void *owned[RGPU_MAX_PARAMS];       /* buffers to free afterwards */
    size_t outlen[RGPU_MAX_PARAMS];     /* bytes of each output */
    /* A stream parameter whose bytes are still in the socket (the serve_
     * function reads them; its pointer is NULL), and a sink output the
     * serve_ function sends ahead of the reply (not allocated: NULL). */
    size_t stream_len, sink_len;
};

/* Server side: decode args into frame.  Returns RGPU_OK, RGPU_EPROTO,
 * RGPU_ETOOBIG or RGPU_ENOMEM. */
int rgpu_decode_args(const msgpack_object *args, const struct rgpu_proc *proc,
                     struct rgpu_call_frame *frame);
/* The same for a request whose last bin arrived empty, its stream_len
 * bytes left in the socket (a stream parameter's, else RGPU_EPROTO). */
int rgpu_decode_streamed_args(const msgpack_object *args, const struct rgpu_proc *proc,
                              struct rgpu_call_frame *frame, size_t stream_len);
/* Whether proc's last parameter is a stream (a request to it may leave
 * its bytes in the socket). */
int rgpu_proc_streams(const struct rgpu_proc *proc);

/* Server side: append the outputs (one entry per OUT/INOUT/OUT_BUF param,
 * nil where the caller passed NULL) to pk as one array. */
void rgpu_encode_outs(msgpack_packer *pk, const struct rgpu_proc *proc,
                      const struct rgpu_call_frame *frame);
/* The same, except that the last output, when it is a buffer of at least
 * RGPU_TAIL_MIN bytes, is only its bin header: its bytes are handed over
 * in *tail (tail_len of them, to send after pk's and free), so that a
 * large output is never copied into the reply's buffer. */
#define RGPU_TAIL_MIN 4096
void rgpu_encode_outs_tail(msgpack_packer *pk, const struct rgpu_proc *proc,
                           struct rgpu_call_frame *frame, void **tail, size_t *tail_len);

void rgpu_call_frame_release(struct rgpu_call_frame *frame);

/* Server side: the checks a call's pointers pass before the real function
 * runs (registered by the daemon, daemon/owned.c). */
struct rgpu_server_checks {
    /* Whether [ptr, ptr+len) lies in device memory the session owns (len
     * 0: ptr itself). */
    int (*devptr)(uint64_t ptr, uint64_t len);
    /* Where scalar parameter `param` of this call lives as the server-side
     * library sees it: 1 host (its bytes travel in the frame), 0 device
     * (a device pointer travels), -1 when that cannot be told. */
    int (*scalar_host)(const struct rgpu_lib *lib, const struct rgpu_proc *proc, unsigned param,
                       void *const *argv);
};

void rgpu_set_server_checks(const struct rgpu_server_checks *checks);

/* Server side, after rgpu_decode_args and before the call: 0 when the call
 * may run, else the status it answers without running, when a device
 * pointer is not the session's or a scalar does not travel the way the
 * server-side handle says: lib->invalid_value, or, where a handle of the
 * call is NULL (not a stream, not nullable), that handle's invalid-handle
 * status, as the libraries check their handle first.  Without registered
 * checks every non-NULL device pointer is refused. */
int rgpu_check_args(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                    const struct rgpu_call_frame *frame);
/* Server side: the bytes host buffer parameter i of a decoded frame holds
 * (IN, OUT, INOUT, *_BUF), 0 for NULL or any other kind. */
size_t rgpu_frame_bytes(const struct rgpu_proc *proc, const struct rgpu_call_frame *frame,
                        unsigned i);

/* Binary search in a library's sorted procedure table. */
const struct rgpu_proc *rgpu_lib_find(const struct rgpu_lib *lib, uint32_t id);

#endif
