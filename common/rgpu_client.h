/* The client core: one per process, shared by every stub library.
 *
 * It lives in librgpu-client.so.0, which each stub (libcuda.so.1,
 * libcudart.so.13, ...) links to, so that a process that loads several stubs
 * still opens one session with rgpud.  Calls are thread-safe; each client
 * thread is a thread of its own on the server too (current device, context,
 * deferred errors). */
#ifndef RGPU_CLIENT_H
#define RGPU_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "rgpu_graph_wire.h"
#include "rgpu_marshal.h"
#include "rgpu_proto.h"

#define RGPU_EXPORT __attribute__((visibility("default")))

/* Make a generated call: argv[i] points at argument i.  Returns the
 * function's status, the deferred status of an earlier asynchronous call,
 * or the library's not-supported / unavailable status when the call could
 * not be carried out. */
int rgpu_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
              const void *const *argv);
/* The same, waiting for the reply even of an asynchronous procedure, so
 * that its own status comes back now. */
int rgpu_call_waiting(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                      const void *const *argv);
/* The same, without waiting when unwaited (the caller checked what the
 * library would refuse at once: a copy between ranges the client knows),
 * else waiting whatever the procedure is. */
int rgpu_call_unwaited_when(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                            const void *const *argv, int unwaited);

/* A generated call in two steps, so that several can be in flight (a
 * copy's chunks): post sends it, and finish collects its reply and copies
 * the outputs through argv.  The caller keeps argv, what it points at and
 * *f until finish, which follows every post that returned 0.  With f NULL
 * the call gets no reply (the caller's policy allowed it: its failure is
 * reported by a later reply) and nothing follows.  For rgpu's own
 * procedures that name no client-side object (rgpu_register_translator)
 * and return no handle.  The library's status. */
struct rgpu_inflight {
    struct rgpu_ticket *ticket;
    struct rgpu_bulk bulk;
};
int rgpu_call_post(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                   const void *const *argv, struct rgpu_inflight *f);
int rgpu_call_finish(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                     const void *const *argv, struct rgpu_inflight *f);

/* The text the server's library gives for an error code (its
 * cudaGetErrorString, cublasGetStatusString...), asked once; NULL when the
 * server has none. */
const char *rgpu_server_error_string(const struct rgpu_lib *lib, int code);

/* A stub's constructor names its library: its procedure table's digest
 * goes in the hello, so that a server of another build refuses us. */
void rgpu_register_lib(const struct rgpu_lib *lib);

/* Register how a library's scalars travel (cuBLAS's pointer mode). */
void rgpu_register_scalar_policy(const struct rgpu_lib *lib,
                                 const struct rgpu_scalar_policy *pol);

/* The version of library lib ("cudart") that the server's session loaded,
 * in the library's own numbering, as its welcome said (connecting first);
 * 0 when unknown or when no server can be reached. */
int rgpu_server_lib_version(const char *lib);

/* The body of every refused stub: log the name once, return not-supported. */
int rgpu_refused(const struct rgpu_lib *lib, const char *name, const char *reason,
                 int *logged);

/* ---- hand-written calls ------------------------------------------------- */

/* A request under construction.  The packer writes the argument array; an
 * optional bulk payload goes last, after a bin header written by
 * rgpu_req_payload(), without being copied. */
struct rgpu_req {
    msgpack_sbuffer buf;
    msgpack_packer pk;
    uint64_t serial;
    const void *payload;
    size_t payload_len;
    void *sink;             /* where the reply's bulk bytes may land (rgpu_req_sink) */
    size_t sink_len;
    unsigned flags;
    uint32_t proc_id;
};

struct rgpu_reply {
    int transport;          /* RGPU_OK or RGPU_E* */
    int api;                /* the function's own status */
    int deferred;           /* first failure of an earlier async call, or 0 */
    msgpack_object outs;    /* array of outputs */
    msgpack_zone zone;
    char *frame;
    size_t sunk;            /* bytes that landed in the request's sink (0 or sink_len) */
};

/* Start a request for procedure id; the caller then packs an array of
 * arguments with req->pk. */
void rgpu_req_begin(struct rgpu_req *req, uint32_t proc_id, unsigned flags);
/* Append a bin of len bytes whose body is sent straight from data. */
void rgpu_req_payload(struct rgpu_req *req, const void *data, size_t len);
/* The reply's bulk bytes, exactly len of them, may come ahead of it in a
 * data frame (common/rgpu_proto.h), read straight into dst; the reply
 * then says so (reply.sunk) and its own bin is empty.  A data frame of
 * another size, or for a request without a sink, ends the session. */
void rgpu_req_sink(struct rgpu_req *req, void *dst, size_t len);
/* Send and, unless RGPU_CALL_NOREPLY, wait for the reply.  Returns RGPU_OK
 * or a transport status; on RGPU_OK the caller frees reply. */
int rgpu_req_send(struct rgpu_req *req, struct rgpu_reply *reply);
void rgpu_reply_free(struct rgpu_reply *reply);

/* The same in two steps, so that several requests can be in flight:
 * post sends and returns a ticket; wait collects that request's reply.
 * Every ticket must be waited for. */
struct rgpu_ticket;
int rgpu_req_post(struct rgpu_req *req, struct rgpu_ticket **ticket);
int rgpu_req_wait(struct rgpu_ticket *ticket, struct rgpu_reply *reply);

/* Send req and wait for its reply.  Returns RGPU_REPLY_READY with *reply
 * to read (and free), or the library's status for a transport failure
 * (nothing to free).  `what` names the call in logs. */
#define RGPU_REPLY_READY (-1)
int rgpu_req_exchange(const struct rgpu_lib *lib, const char *what, struct rgpu_req *req,
                      struct rgpu_reply *reply);
/* Send req, wait, and return the library's status of a call with no
 * outputs to read (transport failures as the library's status). */
int rgpu_req_status(const struct rgpu_lib *lib, const char *what, struct rgpu_req *req);
/* Whether this process is connected to rgpud already (never connects). */
int rgpu_session_started(void);
/* Output i of a reply (NULL when absent), as an unsigned (0 when absent),
 * or as a bin (NULL). */
const msgpack_object *rgpu_reply_out(const struct rgpu_reply *reply, unsigned i);
uint64_t rgpu_reply_u64(const struct rgpu_reply *reply, unsigned i);
const msgpack_object *rgpu_reply_bin(const struct rgpu_reply *reply, unsigned i);

/* A kernel's parameter layout as the server reports it ([[offset, size]...]),
 * and the packing of a launch's arguments by it. */
struct rgpu_layout {
    unsigned nparams;
    uint32_t *offset, *size;
    size_t bytes;               /* the packed buffer's size */
};
/* 0, or -1 when arr is not a layout (nothing then to free). */
int rgpu_layout_parse(const msgpack_object *arr, struct rgpu_layout *l);
/* The layout of n parameter slots as the server reported them (rgpu_kernel_get,
 * rgpu_cu_param_layout): 0, or -1 when they are more than a layout holds or
 * reach past the most argument bytes a launch takes (nothing then to free). */
struct rgpu_param_slot;         /* codegen/rgpu_module_wire.h */
int rgpu_layout_set(struct rgpu_layout *l, const struct rgpu_param_slot *slots, size_t n);
/* Copy args[i] to buf + offset[i]; buf holds l->bytes, zero-filled first. */
void rgpu_layout_pack(const struct rgpu_layout *l, void *const *args, unsigned char *buf);

/* RGPU_STATS=1 prints, at exit, how many calls of each procedure waited
 * for a reply and how many did not; this names a procedure in that table. */
void rgpu_stats_name(uint32_t id, const char *name);
/* How many requests of this process waited for a reply and how many did
 * not, so far (kept whether or not RGPU_STATS is set).  Exported from
 * librgpu-client.so.0 for benchmarks: Python reads it with ctypes between
 * training steps (bench/train_bench.py). */
void rgpu_stats_totals(unsigned long long *waited, unsigned long long *unwaited);
/* One empty request that waits for its reply (rgpu.fence): RGPU_OK or a
 * transport status.  For `rgpu info`'s round trip. */
int rgpu_round_trip(void);

/* Map a transport failure to the library's status (logging it). */
int rgpu_transport_status(const struct rgpu_lib *lib, const char *what, int transport);

/* Fold the reply's statuses into what the CUDA function returns. */
int rgpu_reply_status(const struct rgpu_lib *lib, const struct rgpu_reply *reply);

/* cuGetProcAddress's table (generated from cudaTypedefs.h): the symbol
 * serving driver function `base` since CUDA `version`. */
struct rgpu_procaddr {
    const char *base;
    unsigned version;
    int per_thread;         /* the _ptds/_ptsz flavour */
    const char *symbol;
};

/* ---- facts the stubs keep about handles ---------------------------------- */

/* A thread-safe map from a handle (a cuBLAS handle, a cuDNN descriptor...)
 * to one value the stub must know about it on the client. */
struct rgpu_keyed_entry {
    uint64_t key;
    int64_t value;
};
struct rgpu_keyed {
    pthread_mutex_t lock;
    struct rgpu_keyed_entry *v;
    size_t n, cap;
};
#define RGPU_KEYED_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 }

void rgpu_keyed_set(struct rgpu_keyed *t, const void *key, int64_t value);
/* 1 with *value set when key is known, else 0. */
int rgpu_keyed_get(struct rgpu_keyed *t, const void *key, int64_t *value);
void rgpu_keyed_remove(struct rgpu_keyed *t, const void *key);

/* ---- bulk copies (rgpu_copy.c) ------------------------------------------ */

/* Host to device through proc, a copy procedure of rgpu's own whose
 * arguments are (dst, stream, count, data) (rgpu_htod, rgpu_cu_htod),
 * chunked.  Returns the library status.  wait 0: return once the bytes are
 * sent (the policy's rgpu_lazy_copy_to_device allowed it; a failure is
 * reported at the next call that waits). */
int rgpu_copy_to_device(const struct rgpu_lib *lib, const struct rgpu_proc *proc, uint64_t dst,
                        const void *src, size_t count, uint64_t stream, int wait);
/* Device to host through proc, arguments (data, count, src, stream)
 * (rgpu_dtoh, rgpu_cu_dtoh); chunked, several requests in flight. */
int rgpu_copy_to_host(const struct rgpu_lib *lib, const struct rgpu_proc *proc, void *dst,
                      uint64_t src, size_t count, uint64_t stream);

/* Strided copies: width bytes per row, height rows, through proc with the
 * arguments (dst, dpitch, width, height, stream, rows_size, rows) or
 * (rows, rows_size, src, spitch, width, height, stream): the runtime's
 * rgpu_htod_2d and rgpu_dtoh_2d, cuBLAS's rgpu_cublas_htod_2d and
 * rgpu_cublas_dtoh_2d.  Statuses are proc's library's.  The rows go in
 * requests of about RGPU_COPY_CHUNK bytes (a row at least); to the device
 * the last waits when wait is set (else a failure is reported at the next
 * call that waits, as the policy of common/rgpu_lazy.c allows). */
int rgpu_copy_htod_2d(const struct rgpu_lib *lib, const struct rgpu_proc *proc, uint64_t dst,
                      size_t dpitch, const void *src, size_t spitch, size_t width,
                      size_t height, uint64_t stream, int wait);
int rgpu_copy_dtoh_2d(const struct rgpu_lib *lib, const struct rgpu_proc *proc, void *dst,
                      size_t dpitch, uint64_t src, size_t spitch, size_t width, size_t height,
                      uint64_t stream);

/* ---- module images (rgpu_image.c) ------------------------------------------ */

/* Before the request that loads an image of size bytes (an image parameter
 * of rgpu's own procedures: its size, and its bytes or NULL): one larger
 * than RGPU_IMAGE_INLINE_MAX goes ahead in pieces to the calling thread's
 * staging buffer on the server (rgpu_image_piece; daemon/image_stage.c),
 * and *bytes is NULL; else *bytes is image.  0, or lib's status to return:
 * no_memory where the server's staging limit refused the image, or a
 * transport failure's. */
int rgpu_image_stage(const struct rgpu_lib *lib, const void *image, size_t size, int no_memory,
                     const void **bytes);

/* ---- the waiting policy (rgpu_lazy.c; docs/synchronisation.md) ------------ */

/* RGPU_SYNC: lazy (the default) lets synchronisations and copies to the
 * device go without waiting where nothing the program can observe depends
 * on it; strict makes them wait as before; blocking makes every call wait
 * for its reply, asynchronous ones included (errors at the call that
 * caused them: for debugging). */
enum rgpu_sync_modes { RGPU_SYNC_LAZY, RGPU_SYNC_STRICT, RGPU_SYNC_BLOCKING };
int rgpu_sync_mode(void);
/* Whether an asynchronous call may go without its reply at all (not in
 * blocking mode). */
int rgpu_may_skip_reply(void);

/* The handles this process was handed and has not destroyed, by class
 * (rgpu_handles.h), with one word of facts each.  Generated calls record
 * them by themselves; hand-written code that gets handles some other way
 * notes them.  A call sent without waiting names only known handles. */
void rgpu_handle_note(uint32_t cls, uint64_t h, uint32_t info);
void rgpu_handle_forget(uint32_t cls, uint64_t h);
/* A conditional node's array of body graphs, handed to the program and
 * kept until the graph holding the node is destroyed (rgpu_lazy.c). */
void rgpu_graph_keep_bodies(uint64_t graph, uint64_t *bodies, unsigned n);
/* Known, or a default stream (NULL, legacy, per-thread). */
int rgpu_handle_known(uint32_t cls, uint64_t h);
int rgpu_stream_known(uint64_t stream);
/* How many GPUs the session's CUDA sees (the welcome's; -1: unknown). */
int rgpu_server_devices(void);
/* A kernel, or an event record, cannot go to a stream of another device:
 * natively the call fails at once, so it waits unless the client knows
 * the two are one device (rgpu_lazy.c).  Whether a kernel on stream may go
 * without waiting, and whether a record of event on stream may. */
int rgpu_stream_fits_current(uint64_t stream);
int rgpu_event_fits_stream(uint64_t event, uint64_t stream);
/* The same for a generated call: 0 for an event record that may not go
 * without waiting. */
int rgpu_devices_agree_in(const struct rgpu_proc *proc, const void *const *argv);
/* Whether every handle argument of a generated call is known. */
int rgpu_handles_known_in(const struct rgpu_proc *proc, const void *const *argv);
/* After a generated call: record the handles it returned (waited and
 * succeeded), forget the one it destroyed. */
void rgpu_handles_after_call(const struct rgpu_proc *proc, const void *const *argv,
                             int status, int waited);
/* A count that grows whenever code may have been unloaded (a module,
 * library or context destroyed, a device reset): facts kept by function
 * handle (parameter layouts) hold only within one generation, since the
 * driver reuses the handle values of unloaded functions. */
unsigned rgpu_code_generation(void);
/* Launch configurations the driver took (rgpu_lazy.c): key is what makes
 * two launches alike to the driver (function, grid, block, shared memory,
 * attributes: rgpu_launch_key); a configuration not known yet waits for
 * the driver's verdict, one it took goes without waiting from then on. */
uint64_t rgpu_launch_key(uint64_t func, const unsigned grid[3], const unsigned block[3],
                         unsigned shmem, uint64_t attrs_hash);
int rgpu_launch_known(uint64_t key);
void rgpu_launch_took(uint64_t key);
/* A setting of a function or context changed what its launches may use:
 * every configuration is judged again (the generated setters do it). */
void rgpu_launch_limits_changed(void);
/* An event's creation flags (whether it may be timed). */
void rgpu_event_note_flags(uint64_t event, unsigned flags);

/* Stream captures under way in this process (cudaStreamBeginCapture). */
void rgpu_capture_begin(void);
void rgpu_capture_end(void);
int rgpu_capture_active(void);
/* Room for n dependencies (node_size and edge_size bytes each) that a
 * capture query of stream (ptsz: by a _ptsz entry point) hands back:
 * client memory kept per stream until its next query, as CUDA keeps the
 * arrays it returns (rgpu_capture_arrays.c).  0, or -1 without memory. */
int rgpu_capture_arrays(uint64_t stream, int ptsz, size_t n, size_t node_size,
                        size_t edge_size, void **nodes, void **edges);
/* One capture query with its arrays: query(ctx, nodes, edges, room,
 * &count) asks the server for at most room dependencies (nodes or edges
 * NULL where the caller wants none) and says how many there are; asked
 * again with room for all when they did not fit.  *nodes and *edges are
 * the stream's kept arrays, *count the dependencies; query's status, or
 * -1 without memory. */
typedef int (*rgpu_capture_query)(void *ctx, void *nodes, void *edges, size_t room,
                                  size_t *count);
int rgpu_capture_query_arrays(uint64_t stream, int ptsz, size_t node_size, size_t edge_size,
                              int want_nodes, int want_edges, rgpu_capture_query query,
                              void *ctx, void **nodes, void **edges, size_t *count);

/* Whether a synchronise of this stream, or of this event, may go without
 * waiting: lazy mode, no capture under way, a handle this process holds
 * (an event only when created with timing disabled), and no kernel that
 * may print pending where it would print (rgpu_printing_pending). */
int rgpu_lazy_stream_sync(uint64_t stream);
int rgpu_lazy_event_sync(uint64_t event);
/* Whether this process created the event with timing disabled and not for
 * interprocess use: what the launch attributes that record an event
 * require, so such a launch need not wait for the driver's check. */
int rgpu_event_untimed(uint64_t event);
/* Whether a copy of count bytes into device memory at dst (from host
 * memory, or from device memory at src) may return once its bytes are
 * sent: lazy mode, no capture, a known stream without a kernel that may
 * print pending, and ranges inside device memory this process allocated.
 * Of any size: the bound is how far the client may run ahead
 * (RGPU_AHEAD_MB, rgpu_client.c). */
int rgpu_lazy_copy_to_device(uint64_t dst, size_t count, uint64_t stream);
int rgpu_lazy_copy_on_device(uint64_t dst, uint64_t src, size_t count, uint64_t stream);

/* The device work on stream goes to, where the client knows it; -1 when
 * it cannot say. */
int rgpu_stream_device(uint64_t stream);

/* ---- what kernels may print (rgpu_printing.c; docs/synchronisation.md) ------

 * Kernels' printf output and assert messages reach the program through
 * rgpu_output.c: rgpud sends what its session writes to fds 1 and 2 as
 * output frames, ahead of the reply of the call during which the driver
 * wrote them.  A synchronise or a copy that may deliver a kernel's printf
 * output must therefore wait for its reply: the stubs say which kernels
 * may print and where they were launched.  Streams are as the call named
 * them, NULL or the per-thread stream as the entry point means it. */
#define RGPU_PER_THREAD_STREAM 2    /* cudaStreamPerThread, CU_STREAM_PER_THREAD */
struct rgpu_print_scan;
/* A runtime module's image scanned (rgpu_printf_scan.h) for GPUs of
 * compute capabilities archs (major * 10 + minor; narchs 0: unknown, any
 * GPU), kept by the caller for its kernels' names; NULL when out of memory
 * (every kernel may print). */
#define RGPU_MAX_GPU_ARCHS 64
struct rgpu_print_scan *rgpu_printing_scan(const void *image, size_t size, const unsigned *archs,
                                           size_t narchs);
int rgpu_printing_scan_may_print(const struct rgpu_print_scan *s, const char *name);
/* A module or library loaded as handle from image, scanned so and kept
 * until it is unloaded. */
void rgpu_printing_image_loaded(uint64_t handle, const void *image, size_t size,
                                const unsigned *archs, size_t narchs);
/* A module got from a library (cuLibraryGetModule): the library's. */
void rgpu_printing_image_alias(uint64_t module, uint64_t library);
/* A function or kernel handle got from `from`: a module or library, by
 * name (NULL: enumerated, nameless), or a kernel (cuKernelGetFunction). */
void rgpu_printing_function_of(uint64_t function, uint64_t from, const char *name);
/* A function or kernel handle whose image origin says whether it may
 * print (the runtime's kernels). */
void rgpu_printing_function_is(uint64_t function, uint64_t origin, int may_print);
/* Whether a launch of the function or kernel may print: what its record
 * says, else whether any image loaded may print. */
int rgpu_printing_may(uint64_t function);
/* Code unloaded: a module or library, or everything (a context destroyed,
 * a device reset). */
void rgpu_printing_unloaded(uint64_t handle);
void rgpu_printing_forget_all(void);
/* A graph node was given a function (may_print: rgpu_printing_may's). */
void rgpu_printing_graph_kernel(int may_print);

/* Work and its synchronises.  A launch on stream; a graph launch; a stream
 * made to wait for an event.  A synchronise of the stream, or of the
 * device or context, that waited for its reply and succeeded. */
void rgpu_printing_launched(uint64_t stream, int may_print);
void rgpu_printing_graph_launched(uint64_t stream);
void rgpu_printing_stream_waits(uint64_t stream);
void rgpu_printing_stream_synced(uint64_t stream);
void rgpu_printing_device_synced(void);
/* Whether a synchronise or copy on stream may deliver printf output, and
 * whether any may (an event synchronise). */
int rgpu_printing_pending(uint64_t stream);
int rgpu_printing_pending_any(void);
/* Output of the session's stdout arrived (rgpu_output.c). */
void rgpu_printing_output_arrived(void);

/* ---- host functions (common/rgpu_callbacks.c) ---------------------------------

 * cudaLaunchHostFunc and its kin: the program's function runs on a thread of
 * the core's own, when the server's stream reaches it, and the stream waits
 * for it (daemon/host_functions.c).  kind says how to call fn. */
enum rgpu_callback_kind {
    RGPU_CB_HOST_FN,        /* void fn(void *data) */
    RGPU_CB_STREAM,         /* void fn(stream, status, void *data), runtime or driver */
};
/* cudaErrorNotPermitted and CUDA_ERROR_NOT_PERMITTED: a CUDA call from a
 * host function gets it. */
#define RGPU_NOT_PERMITTED 800
/* A host function's request (rgpu_host_func, rgpu_cu_host_func:
 * codegen/cudart_own.h, cuda_own.h), in the stubs: reserve names fn by an
 * id before it (0: none is free, the caller answers out of memory), with
 * the token that names it for a capture (0 when none is under way); placed
 * says how it went (status 0 and not captured: the stream holds it, the
 * core waits for its frame; else nothing will come for id). */
uint64_t rgpu_host_func_reserve(enum rgpu_callback_kind kind, void *fn, void *data,
                                uint64_t stream, uint64_t *token);
void rgpu_host_func_placed(uint64_t id, int status, int captured);
/* Host functions enqueued whose function has not returned yet: while there
 * are any, every call waits for its reply (rgpu_lazy.c). */
int rgpu_callbacks_outstanding(void);
/* Wait until there are none. */
void rgpu_callbacks_wait_idle(void);
/* Whether this thread is running a host function. */
int rgpu_in_callback(void);
/* A callback frame arrived (the core's reader, S.lock held):
 * [CALLBACK, id, status] for a host function, [CALLBACK, run, status,
 * token(, bin)] for a graph's host node (rgpu_graph_host.c). */
void rgpu_callback_arrived(const msgpack_object *frame);
/* Start the callback thread, if it is not running: before anything that
 * may make the server send callback frames. */
void rgpu_callbacks_start(void);
/* An outstanding entry that runs nothing: it ends when the server's
 * [CALLBACK, id, 0] for it arrives (a graph launch's marker), or when it
 * is cancelled (its request failed, or enqueued no marker).  0: no room. */
uint64_t rgpu_callback_marker(void);
void rgpu_callback_cancel(uint64_t id);
/* Read frames (taking the reader role when it is free) until until() holds
 * or the session breaks (-1). */
int rgpu_core_listen(int (*until)(void));
/* Send a frame that is no request, after whatever is batched. */
int rgpu_core_send_frame(const msgpack_sbuffer *buf);
/* One output frame [RGPU_MSG_OUTPUT, fd, bin], read whole: write its bytes
 * to fd 1 or 2 behind what the program's stream holds.  -1: malformed. */
int rgpu_output_frame(const char *frame, size_t len);

/* ---- graph host nodes and host copies (rgpu_graph_host.c) ------------------

 * What the server's graph names with a token in place of the program's
 * function and data, or of a copy's host region (kept for the process). */
enum rgpu_token_kind {
    RGPU_TOKEN_HOST_FN = 1,     /* fn(data) */
    RGPU_TOKEN_STREAM_CB,       /* fn(stream, status, data): a captured stream callback */
    RGPU_TOKEN_TO_DEVICE,       /* the bytes of host go to the device */
    RGPU_TOKEN_TO_HOST,         /* the device's bytes come into host */
};
/* A copy's host or device side: base address, row pitch and rows per
 * plane (0: the extent's, packed), and the start within it (x in bytes). */
struct rgpu_copy_side {
    uint64_t ptr;
    size_t pitch, height, x, y, z;
};
/* A copy's extent: bytes per row, rows, planes. */
struct rgpu_extent {
    size_t width, height, depth;
};
struct rgpu_token {
    enum rgpu_token_kind kind;
    void *fn, *data;
    uint64_t stream;                /* a stream callback's stream, as the program named it */
    struct rgpu_copy_side host;     /* a copy's region */
    struct rgpu_extent extent;
};
/* The token of what want describes (the same one each time); 0 when no
 * more can be made. */
uint64_t rgpu_token_register(const struct rgpu_token *want);
/* The token id names, or NULL. */
const struct rgpu_token *rgpu_token_find(uint64_t id);
/* Whether any token exists (graphs may then hold host nodes of ours). */
int rgpu_tokens_in_use(void);
/* A copy token's bytes, packed row after row; gathered from and
 * scattered into its host region. */
size_t rgpu_token_bytes(const struct rgpu_token *t);
void rgpu_token_gather(const struct rgpu_token *t, void *packed);
void rgpu_token_scatter(const struct rgpu_token *t, const void *packed);

/* A node operation (common/rgpu_graph_wire.h): op ADD (graph, deps its
 * dependencies), SET (node), EXEC_SET (exec, node); the handles the
 * operation does not name NULL. */
struct rgpu_graph_node_req {
    int op;
    void *graph, *exec, *node;
    void *const *deps;
    size_t ndeps;
};
/* A library's graph procedures of rgpu's own that the client core sends
 * (codegen/cudart_own.h, codegen/cuda_own.h, "graphs": the runtime's or
 * the driver's, which take the same arguments save the driver's copy
 * context), registered by its stub when it loads. */
struct rgpu_graph_procs {
    const struct rgpu_proc *host_node, *host_params, *host_copy, *capture_copy, *launch;
};
void rgpu_graph_procs_register(const struct rgpu_lib *lib, const struct rgpu_graph_procs *procs);
/* A host node running fn(data); *made: the node added (op ADD).  The
 * library's status. */
int rgpu_graph_host_node_call(const struct rgpu_lib *lib, const char *what,
                              const struct rgpu_graph_node_req *r, void *fn, void *data,
                              uint64_t *made);
/* A host node's function and data. */
int rgpu_graph_host_params_call(const struct rgpu_lib *lib, const char *what, uint64_t node,
                                void **fn, void **data);
/* A copy node between host memory (h) and device memory (d) of extent e:
 * dir RGPU_COPY_TO_DEVICE or RGPU_COPY_TO_HOST; ctx the driver's copy
 * context (NULL for the runtime). */
int rgpu_graph_host_copy_call(const struct rgpu_lib *lib, const char *what,
                              const struct rgpu_graph_node_req *r, void *ctx, int dir,
                              const struct rgpu_copy_side *h, const struct rgpu_copy_side *d,
                              const struct rgpu_extent *e, uint64_t *made);
/* While a capture is under way: such a copy on stream becomes a node of
 * the capture (*captured 1) when the stream captures, as natively; else
 * *captured is 0 and the caller copies as usual. */
int rgpu_capture_host_copy_call(const struct rgpu_lib *lib, const char *what, uint64_t stream,
                                int ptsz, int dir, const struct rgpu_copy_side *h,
                                const struct rgpu_copy_side *d, const struct rgpu_extent *e,
                                int *captured);
/* Whether a copy's side at p is device memory as unified addressing sees
 * it (allocated, or mapped and managed memory, whose GPU copy it names:
 * rgpu_mapped.c): 1 with the GPU's address in *dev, else 0 (host memory). */
int rgpu_copy_side_on_device(uint64_t p, uint64_t *dev);
/* A 1D asynchronous copy of count bytes between host and dev on stream,
 * tried as a node of a capture (rgpu_capture_host_copy_call) while one is under
 * way; *captured 0 otherwise. */
int rgpu_capture_copy_1d(const struct rgpu_lib *lib, const char *what, uint64_t stream, int dir,
                         uint64_t host, uint64_t dev, size_t count, int *captured);
/* cudaGraphLaunch and cuGraphLaunch (proc: the generated procedure, which
 * serves graphs that hold no host node of ours). */
int rgpu_graph_launch_call(const struct rgpu_lib *lib, const char *what,
                           const struct rgpu_proc *proc, uint64_t exec, uint64_t stream, int ptsz);
/* The info word rgpu_handle_note recorded: 1 with *info when h is held. */
int rgpu_handle_info(uint32_t cls, uint64_t h, uint32_t *info);

/* A synchronise (a generated call with no outputs): a fault already known
 * poisons it at once, as on a GPU; lazy (the policy above allowed it), it
 * is still sent but not waited for, and its failure comes back with the
 * next call that waits. */
int rgpu_call_synchronise(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                          const void *const *argv, int lazy);

/* ---- mapped and managed memory (rgpu_mapped.c) ---------------------------- */

/* Ranges of memory the program and the GPU share (zero-copy host memory,
 * managed memory): the program's copy at host, the GPU's at dev (the same
 * address where it could be had), size bytes.  Coherent as on a device
 * without concurrent managed access: the program's changes reach the GPU
 * before the next request, the GPU's reach the program after a call that
 * synchronises. */
enum rgpu_mapped_flags {
    RGPU_MAPPED_MANAGED = 1,    /* cudaMallocManaged / cuMemAllocManaged */
    RGPU_MAPPED_OWN_HOST = 2,   /* the client mapped the program's copy (unmapped at free) */
};
/* 0, or -1 (out of memory).  The bytes move by rgpu's own copies
 * (rgpu_shared_htod, rgpu_shared_dtoh), whichever library mapped them.
 * With RGPU_MAPPED_OWN_HOST the program's copy is fresh (zeros) and the
 * caller zeroes the GPU's; else the first request sends the program's. */
int rgpu_mapped_add(uint64_t host, uint64_t dev, size_t size, int flags);
/* Forget the range whose program (by_dev 0) or GPU (1) address is p;
 * 1 with what it was when there was one. */
int rgpu_mapped_remove(uint64_t p, int by_dev, uint64_t *host, uint64_t *dev, size_t *size,
                       int *flags);
/* The range holding p (program address, or GPU address with by_dev): 1
 * with its facts, or 0. */
int rgpu_mapped_find(uint64_t p, int by_dev, uint64_t *host, uint64_t *dev, size_t *size,
                     int *flags);
/* Whether any range exists (one relaxed load: the cost for everyone else). */
int rgpu_mapped_active(void);
/* The GPU copy's address of [p, p+count) when it lies in one shared range
 * by the program's address (mapped, managed or named pinned memory), or 0. */
uint64_t rgpu_mapped_gpu_copy(uint64_t p, size_t count);
/* Hooks of the core: every request but a fence first sends what the
 * program changed; a synchronisation that succeeded (by the generated
 * call's name, or any copy to the host) brings the GPU's bytes back. */
void rgpu_mapped_before_request(uint32_t proc_id);
void rgpu_mapped_after_call(const char *name, int status);
void rgpu_mapped_after_sync(void);
/* A copy from the host wrote count bytes at GPU address dev: the same
 * bytes go into the program's copy and the shadow, as a blocking copy
 * into managed memory is visible to the host when it returns. */
void rgpu_mapped_wrote(uint64_t dev, const void *src, size_t count);
/* The program's copy: size bytes of fresh client memory at addr (0), or
 * -1 when anything is mapped there; anywhere (NULL: none); unmapped. */
int rgpu_mapped_map_at(uint64_t addr, size_t size);
void *rgpu_mapped_map_anywhere(size_t size);
void rgpu_mapped_unmap(uint64_t addr, size_t size);
/* A free: forget the range whose program (by_dev 0) or GPU address is p,
 * with its client ranges, and unmap the program's copy where the client
 * mapped it.  1 with the GPU's address in *dev_out (when not NULL) when
 * p was such a range: the caller frees the GPU's copy. */
/* Where the program's copy of dev's size bytes goes: at dev itself when
 * the client has nothing there (one pointer for both), else anywhere (the
 * address returned, logged with what); 0 when neither can be mapped. */
uint64_t rgpu_mapped_place(uint64_t dev, size_t size, const char *what);
/* Share [host, host+size) with the GPU's copy at dev (rgpu_mapped_add),
 * and tell the client ranges what each address is: host_kind for a host
 * copy apart from the GPU's.  0, or -1 when out of memory. */
int rgpu_mapped_share(uint64_t host, uint64_t dev, size_t size, int flags, int host_kind);
int rgpu_mapped_release(uint64_t p, int by_dev, uint64_t *dev_out);
/* A device attribute as the program is told it (the runtime's and the
 * driver's numbers agree): the managed and pageable memory facts are the
 * client's, those of a device without concurrent managed access. */
int rgpu_mapped_device_attr(int attribute, int value);
/* Pinned memory that a device call names (a memset, a library's matrix):
 * unified addressing makes all pinned memory device memory, so such a
 * range gets a GPU copy on demand, kept coherent like mapped memory.  A
 * stub registers how it makes one (1: p's range has one now). */
typedef int (*rgpu_pinned_mapper)(uint64_t p);
void rgpu_mapped_register_pinned_mapper(const struct rgpu_lib *lib, rgpu_pinned_mapper fn);
/* The GPU copy's address of pinned (or registered) memory at p, made on
 * demand (lib: whose stub makes it, NULL: any), or 0 when p is not such
 * memory or no copy could be made. */
uint64_t rgpu_mapped_pinned_to_device(const struct rgpu_lib *lib, uint64_t p);
/* out[i]: argv[i], or a pointer into values where a device pointer
 * argument named pinned memory and now names its GPU copy; 1 when any did. */
int rgpu_mapped_translate_devptrs(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                                  const void *const *argv, const void **out, uint64_t *values);

/* ---- client objects and kept answers (rgpu_client_objects.c) ------------ */

/* A stub that keeps handles of class cls as its own objects translates
 * them for every generated call: 1 with *server set (0 when the object
 * has no server handle yet: the call then waits), 0 when h is not one of
 * its objects, or minus the library status to return at once. */
typedef int (*rgpu_translate_fn)(const struct rgpu_proc *proc, unsigned param, uint64_t h,
                                 uint64_t *server);
void rgpu_register_translator(const struct rgpu_lib *lib, uint32_t cls, rgpu_translate_fn fn);
int rgpu_lib_translates(const struct rgpu_lib *lib);
/* The GPU copy's address of pinned (or registered) memory at p, made on
 * demand (lib: whose stub makes it, NULL: any), or 0 when p is not such
 * memory or no copy could be made. */
uint64_t rgpu_mapped_pinned_to_device(const struct rgpu_lib *lib, uint64_t p);
/* out[i]: argv[i], or a pointer into values where a translator swapped
 * the handle; *must_wait when an object had no server handle;
 * *by_content when every handle but the first is NULL or a translated
 * object (kept answers of `pure` procedures hold then).  0, or the
 * library status a translator failed with. */
int rgpu_translate_args(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                        const void *const *argv, const void **out, uint64_t *values,
                        int *must_wait, int *by_content);

/* Answers of `pure` procedures, by their encoded arguments: 1 with the
 * outputs written through argv when known. */
int rgpu_answer_known(const struct rgpu_proc *proc, const void *const *argv,
                      const struct rgpu_scalar_policy *pol);
void rgpu_answer_keep(const struct rgpu_proc *proc, const void *const *argv,
                      const struct rgpu_scalar_policy *pol, const msgpack_object *outs,
                      unsigned epoch);
/* The answers' generation (taken before a call, given to keep), and
 * forgetting them all: a handle was destroyed, or a client object's
 * server handle changed. */
unsigned rgpu_answers_epoch(void);
void rgpu_answers_forget(void);

/* ---- per-thread runtime state --------------------------------------------- */

/* Record a runtime result as the thread's last error (cudart semantics:
 * every failing call sets it) and return it. */
int rgpu_runtime_result(int err);
/* A fault that poisoned the context (illegal address...), or 0: calls that
 * do not wait for the server return it, as the GPU would. */
int rgpu_sticky_error(void);
/* cudaGetLastError / cudaPeekAtLastError. */
int rgpu_last_error(int clear);

/* What is current, as the client last saw it set or read (answered
 * locally: PyTorch asks constantly).  Only this process's own calls change
 * it, and those that do tell the core:
 * - this thread's current device (setting it forgets the context);
 * - this thread's current context, when not NULL;
 * - whether a device's primary context is active, and its flags, once seen
 *   active.
 * rgpu_thread_forget_current: this thread's context changed (set, push,
 * pop, create).  rgpu_contexts_changed: contexts may have changed for every
 * thread (reset, release, destroy, new flags); all of the above is
 * forgotten. */
int rgpu_thread_device(int *device);
void rgpu_thread_set_device(int device);
void rgpu_thread_forget_current(void);
int rgpu_thread_context(uint64_t *ctx);
void rgpu_thread_set_context(uint64_t ctx);
int rgpu_primary_active(int dev, unsigned *flags);
void rgpu_primary_set_active(int dev, unsigned flags);
void rgpu_contexts_changed(void);
/* A number that changes whenever any of the above is forgotten, for what a
 * stub keeps per context (function attributes and occupancy, which a
 * reset or another context makes stale). */
unsigned rgpu_contexts_epoch(void);

#endif
