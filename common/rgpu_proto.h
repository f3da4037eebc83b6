/* rgpu wire protocol: what travels between the client core and rgpud.
 *
 * A frame is a 4-byte big-endian length followed by that many bytes of one
 * msgpack array.  Lengths above RGPU_FRAME_MAX are a protocol error: the peer
 * is told (where it can be) and the connection is closed.
 *
 *   hello    client -> server  [RGPU_MSG_HELLO, proto_version, client_name,
 *                               {lib: digest}, client_nonce, ...]
 *   (every field, and the challenge and auth where the server wants a
 *   key: common/rgpu_hello.h)
 *   welcome  server -> client  [RGPU_MSG_WELCOME, proto_version, transport_status,
 *                               cuda_runtime_version, cuda_driver_version,
 *                               server_name, message, server_proof]
 *   request  client -> server  [RGPU_MSG_CALL, serial, proc_id, client_thread,
 *                               flags, [args...]]
 *   reply    server -> client  [RGPU_MSG_REPLY, serial, transport_status,
 *                               api_status, deferred_status, [outs...]]
 *   log      server -> client  [RGPU_MSG_LOG, library, level, function, text,
 *                               [details...]]
 *   data     server -> client  [RGPU_MSG_DATA, serial, bin]
 *   output   server -> client  [RGPU_MSG_OUTPUT, fd, bin]
 *   callback server -> client  [RGPU_MSG_CALLBACK, id, status(, token(, bin))]
 *   callback_done client -> server  [RGPU_MSG_CALLBACK_DONE, id(, bin)]
 *
 * transport_status says whether the server could carry out the call at all
 * (RGPU_OK, or an RGPU_E* code); api_status is what the CUDA function itself
 * returned and is meaningful only when transport_status is RGPU_OK.
 *
 * A request with RGPU_CALL_NOREPLY set gets no reply.  If it fails, the
 * server keeps the first such failure per client thread and reports it as
 * deferred_status in the next reply that thread gets (CUDA's sticky-error
 * model: an asynchronous error shows up at the next call that waits).
 *
 * A log frame carries one message a library logged on the server (cuBLAS,
 * cuBLASLt and cuDNN logger callbacks run on the client); it comes before
 * the reply of the call that logged it and is handed to the program once
 * that reply arrives (common/rgpu_liblog.h).
 *
 * A data frame carries the bulk bytes of a device-to-host copy ahead of its
 * reply (whose output bin is then empty), so that the server can send a
 * piece while the GPU copies the next and the client can read them
 * straight into the copy's destination.  Only a request that asked for
 * bytes gets one, of exactly the size it asked for; the reply that follows
 * says whether they are good.
 *
 * An output frame carries bytes the session process wrote to its standard
 * output (fd 1) or standard error (fd 2): what kernels printf, device-side
 * assert messages (the driver writes both at synchronisations) and anything
 * the libraries print.  Bytes written while a call ran come before that
 * call's reply; those of a call that gets no reply come before a later
 * reply.  The client writes them to its own fd 1 or 2, in order
 * (daemon/output.c, common/rgpu_output.c).
 *
 * A callback frame says that a stream reached the host function the client
 * enqueued under id (rgpu_host_func, codegen/cudart_own.h), with the
 * status the driver passed; the stream waits until the client has run the
 * program's function and answered callback_done with that id.  The answer
 * is no request: it gets no reply and is read at once, whatever requests
 * wait (daemon/host_functions.c, common/rgpu_callbacks.c).  A graph's host
 * node sends the token that names the program's function or a copy's host
 * region (common/rgpu_graph_host.c), with id one of rgpud's (bit 63 set);
 * a copy to the host carries the bytes for the program's memory, the
 * answer of a copy to the device the bytes read from it.  A graph
 * launch's marker comes as a host function's frame and is not answered.
 * Clients that make no graph host nodes never see the longer forms, so
 * the protocol version stays.
 *
 * Procedure ids are a hash of "library/function" (rgpu_proc_id()), so they
 * never change across builds or CUDA versions; rgpu's own procedures use
 * the same scheme with names of their own ("cudart/rgpu_htod",
 * "rgpu/rgpu_fence").  A library's procedures are covered by the
 * digest of its table in the hello; those of rgpu's own library "rgpu"
 * (the session's own: codegen/rgpu_own.h) by the protocol version, which
 * changes with them: protocol 8 made them, and the copies, host
 * functions and the rest of the old hand-written calls that moved with
 * them, rgpu's own procedures; protocol 9 the rest: launches, module
 * loads, JIT linking, image pieces, the late library check, the graph
 * requests (kernel, conditional, memory-allocation and host nodes, node and
 * edge lists, the dot description, graph launches) and the shared-memory
 * copies.  No procedure packs its frame by hand any more.
 */
#ifndef RGPU_PROTO_H
#define RGPU_PROTO_H

#include <stdint.h>

#define RGPU_PROTO_VERSION      9
#define RGPU_DEFAULT_PORT       9713
#define RGPU_FRAME_MAX          (72u << 20)   /* 64 MiB payload + headroom */
/* Bulk copies travel in chunks: each a frame, which the server pipelines
 * in pieces (daemon/copy.c), so that a chunk's ends (the first piece's
 * device copy, the last's) are a small part of it. */
#define RGPU_COPY_CHUNK         (16u << 20)
/* A copy's bytes stream (data frames, payloads read piece by piece on the
 * server) from this size up; smaller ones travel inside their frames. */
#define RGPU_STREAM_MIN         (256u << 10)
#define RGPU_MAX_DEPTH          8             /* msgpack nesting we accept */

enum rgpu_msg {
    RGPU_MSG_HELLO   = 1,
    RGPU_MSG_WELCOME = 2,
    RGPU_MSG_CALL    = 3,
    RGPU_MSG_REPLY   = 4,
    RGPU_MSG_LOG     = 5,
    /* Protocol 2 (see docs/security.md): */
    RGPU_MSG_CHALLENGE = 6,     /* server -> client: [CHALLENGE, server_nonce] */
    RGPU_MSG_AUTH      = 7,     /* client -> server: [AUTH, key_id, mac] */
    RGPU_MSG_KEEPALIVE = 8,     /* server -> client: [KEEPALIVE]; a request of
                                   this client is still running */
    /* Protocol 3: */
    RGPU_MSG_DATA      = 9,     /* server -> client: [DATA, serial, bin] */
    /* Protocol 4: */
    RGPU_MSG_OUTPUT    = 10,    /* server -> client: [OUTPUT, fd, bin] */
    /* Protocol 5: */
    RGPU_MSG_CALLBACK  = 11,    /* server -> client: [CALLBACK, id, status] */
    RGPU_MSG_CALLBACK_DONE = 12, /* client -> server: [CALLBACK_DONE, id] */
};

enum rgpu_call_flags {
    RGPU_CALL_NOREPLY = 1u << 0,
};

/* Transport status: did the call reach the library? */
enum rgpu_status {
    RGPU_OK = 0,
    RGPU_EPROTO = 1,        /* malformed frame or wrong types/counts */
    RGPU_ENOPROC = 2,       /* unknown procedure id */
    RGPU_ENOSYM = 3,        /* the server's library lacks this function */
    RGPU_ETOOBIG = 4,       /* a size beyond what the server accepts */
    RGPU_ENOMEM = 5,        /* the server could not allocate a buffer */
    RGPU_EVERSION = 6,      /* protocol versions differ */
    RGPU_EBUSY = 7,         /* session cap reached */
    RGPU_EIO = 8,           /* connection lost (client side only) */
    RGPU_EAUTH = 9,         /* the client is not allowed in */
    RGPU_ETIMEDOUT = 10,    /* the server stayed silent too long (client side) */
    RGPU_EREFUSED = 11,     /* an argument names memory the session does not own */
    RGPU_ENOTPERMITTED = 12, /* a CUDA call from a host function (client side only) */
    RGPU_ENODEV = 13,       /* a GPU the server serves is gone (at hello) */
};

const char *rgpu_status_name(int status);

/* FNV-1a over "lib/name": the stable procedure id. */
uint32_t rgpu_proc_id(const char *lib, const char *name);

#endif
