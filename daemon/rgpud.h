/* rgpud internals shared by its files. */
#ifndef RGPUD_H
#define RGPUD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <msgpack.h>

#include "rgpu_addr.h"
#include "rgpu_hello.h"
#include "rgpu_marshal.h"

struct rgpud_options {
    const char *listen;         /* RGPU_DEFAULT_SERVER, or --listen */
    const char *lib_dir;        /* NULL: the system's NVIDIA libraries */
    const char *cuda12_dirs;    /* --cuda12-lib-dir: folders of CUDA 12's libcudart.so.12,
                                   libcublas.so.12, libcublasLt.so.12 (':' between);
                                   NULL: CUDA 12 clients are served by CUDA 13's */
    int foreground;
    int max_sessions;           /* clients let in, at once */
    int max_startups;           /* connections not let in yet, all sources (admission.c) */
    int per_source_startups;    /* ... from one source */
    int max_auth_failures;      /* TCP: connections of one source ending unlet per minute */
    long spin_ns;               /* poll for the next request this long */
    /* Who may connect (auth.c). */
    struct rgpu_addr addr;      /* listen, parsed */
    const char *group;          /* --group; NULL: "rgpu" where it exists */
    const char *key_dir;        /* --key-dir: one key file per TCP client */
    int insecure_tcp;           /* --insecure-tcp-no-auth */
    int have_gid;               /* the Unix socket's allowed group: */
    gid_t gid;
    char group_name[64];
    int hello_timeout_s;        /* a client must finish its hello within this */
    int frame_timeout_s;        /* the rest of a frame, once its first byte came */
    int keepalive_ms;           /* while a request runs, a keepalive this often */
    int no_sandbox;             /* --no-sandbox: sessions unconfined (sandbox.c) */
    int sandbox_audit;          /* --sandbox-audit: log forbidden calls, do not kill */
    int nvml_settings;          /* --nvml-settings: NVML's setting calls reach the GPU */
    uint64_t session_memory;    /* RLIMIT_DATA of a session; 0: the default */
    uint64_t staging_limit;     /* module images in pieces (image_stage.c); 0: default */
    const char *devices;        /* --devices / RGPUD_DEVICES; NULL: every GPU */
};

/* ---- listener.c: the accept loop, its sessions and their lines --------------- */

/* Before listening: the tables (0, or -1). */
int listener_init(const struct rgpud_options *opt);
/* Accept and fork sessions until SIGTERM or SIGINT arrives on sfd. */
void listener_serve(int lfd, int sfd, const struct rgpud_options *opt);
/* In a session whose client was just let in: ask the listener for a place
 * among the --max-sessions; at the cap the client is answered busy with w
 * and the session ends. */
void listener_let_in(int fd, const struct rgpud_options *opt, struct rgpu_welcome *w);

/* ---- admission.c: connections not let in yet ------------------------------------ */

enum admit {
    ADMIT_START,                /* a session may start now */
    ADMIT_WAIT,                 /* its source is at its bound: wait here */
    ADMIT_BUSY,                 /* every startup slot and the queue taken: a busy answer */
    ADMIT_DROP,                 /* closed at once (its source is over its bounds) */
};
int admission_init(const struct rgpud_options *opt);
/* The accepted connection's source (an entry of admission.c's table), or
 * -1 when the kernel cannot say. */
int admission_source(int fd, const struct sockaddr_storage *ss);
const char *admission_source_text(int source);
enum admit admission_decide(int source);
/* A session started for source; it ended before being let in (failed:
 * it was refused or went away, not answered busy) or was let in. */
void admission_started(int source);
void admission_ended(int source, int failed);
/* Keep fd waiting for source's turn; the next connection that may start
 * now, or -1 (*source set); close those that waited the hello timeout and
 * give the milliseconds until the next such end (-1: none). */
void admission_wait(int fd, int source);
int admission_next(int *source);
int admission_expire(void);
/* In a child of the listener: close what waits. */
void admission_close_in_child(void);

/* ---- auth.c: who may connect ------------------------------------------------ */

/* Parse the listen address, find the allowed group, check the key
 * directory (TCP): before listening.  -1 after logging why. */
int auth_prepare(struct rgpud_options *opt);
/* The listening socket, or -1 after logging why. */
int auth_listen(const struct rgpud_options *opt);
/* rgpud --new-client-key ID: write DIR/ID and print the client's copy. */
int auth_new_client_key(const char *dir, const char *id);
/* The major of each library the client's hello named: 12 for its
 * libcudart.so.12 (docs/cuda12.md). */
struct client_libs {
    int n;
    char name[RGPU_HELLO_MAX_LIBS][32];
    int major[RGPU_HELLO_MAX_LIBS];
};

/* In the session, before any CUDA library is loaded: read the hello and
 * let the client in (peer credentials, or the key challenge on TCP), or
 * answer it with a refusing welcome and end the session.  w gets the
 * message and server proof for the welcome, visible the client's
 * CUDA_VISIBLE_DEVICES, client the libraries the hello named. */
void auth_session(int fd, const struct rgpud_options *opt, struct rgpu_welcome *w,
                  struct rgpu_visible *visible, struct client_libs *client);
/* Send the welcome auth_session prepared (the caller has filled in the
 * CUDA versions), then forget its proof. */
void auth_welcome(int fd, struct rgpu_welcome *w);
/* Or refuse the client after all, with status and why in the welcome, and
 * end the session. */
void auth_welcome_refusal(int fd, struct rgpu_welcome *w, int status, const char *why)
    __attribute__((noreturn));

/* ---- backend.c: the real (or fake) CUDA libraries, loaded per session ---- */

/* dlopen dir/soname, or soname by the loader's search where dir is NULL. */
void *backend_dlopen(const char *dir, const char *soname);

/* Load every library we serve; missing ones are logged and their calls
 * answered RGPU_ENOSYM.  A client whose hello names CUDA 12 libraries gets
 * them from the folders of --cuda12-lib-dir where set (client may be
 * NULL: the defaults).  Returns 0 when at least the runtime loaded, -1
 * when it did not, -2 when the client's CUDA 12 libraries are required
 * (the configuration names their folders) and one cannot be loaded: why
 * says which, for the welcome. */
int backend_open(const char *lib_dir, const char *cuda12_dirs, const struct client_libs *client,
                 char *why, size_t whylen);
/* A function of library lib ("cudart", "cuda"), or NULL. */
void *backend_sym(const char *lib, const char *name);
int backend_runtime_version(void);
/* The soname the session opens for lib ("cudart": libcudart.so.13, or
 * .12 once a CUDA 12 client got CUDA 12's). */
const char *backend_soname(const char *lib);

/* ---- backend12.c: a session served by CUDA 12's own libraries ---------------- */

/* The function of CUDA 12's library lib that a CUDA 13 procedure `name`
 * reaches in it (the same bytes: rgpu-gen --compat's tables), found in
 * handle; or rgpud's own for one that needs it (cudaGetDeviceProperties,
 * whose CUDA 12 layout differs); NULL when none takes those bytes. */
void *backend12_sym(void *handle, const char *lib, const char *name);
/* Whether this rgpud can serve CUDA 12's libraries (built with -Dcuda12):
 * checked at start, before --cuda12-lib-dir is taken. */
int backend12_available(void);
/* The welcome's list of the session's libraries and their versions. */
struct rgpu_welcome;
void backend_lib_versions(struct rgpu_welcome *w);
/* cuInit, before the session is sandboxed (backend.c says why). */
void backend_init_driver(void);
/* nvmlInit, before the sandbox too, where the host has NVML (hand_nvml.c):
 * 0 when NVML is up. */
int backend_init_nvml(void);
int backend_driver_version(void);

/* ---- devices.c: the GPUs rgpud serves ---------------------------------------- */

/* At start, before listening: list the host's GPUs (in a child process)
 * and pick those spec names (NULL or "all": every GPU); name is the
 * setting's, for messages (--devices, RGPUD_DEVICES).  -1 after logging
 * why rgpud must not start. */
int devices_start(const char *spec, const char *name, const char *lib_dir);
/* In a session, before CUDA is loaded: its driver's CUDA_VISIBLE_DEVICES,
 * the served GPUs narrowed by the client's own variable. */
void devices_session_select(const struct rgpu_visible *client);
/* After cuInit: 0 when the driver sees exactly the GPUs chosen, else -1
 * with why (for the welcome). */
int devices_session_check(char *why, size_t len);
/* How many GPUs the session's CUDA sees (-1: it cannot say), for the
 * welcome. */
int devices_session_count(void);
/* After nvmlInit: NVML's handles of the served GPUs. */
void devices_nvml_map(void);
/* The NVML view (hand_nvml.c): how many served GPUs NVML shows (-1: no
 * list, NVML's own answers stand), NVML's index of the one at a position,
 * and the position of a handle (-1: not a served GPU). */
int devices_nvml_count(void);
int devices_nvml_index(unsigned position, unsigned *index);
int devices_nvml_position(const void *handle);

/* ---- session.c -------------------------------------------------------------- */

/* Every procedure a session serves, one "generated|hand LIBRARY NAME" a
 * line (rgpud --procedures; tests/procedures.sh). */
void session_list_procedures(FILE *out);
/* Serve one client on fd until it leaves; never returns. */
void session_run(int fd, const struct rgpud_options *opt) __attribute__((noreturn));
/* Send one frame to the client from any thread; a dead client ends the
 * session. */
void session_send(const msgpack_sbuffer *sb);

/* ---- output.c: the session's fds 1 and 2, forwarded to the client ---------- */

/* After the hello, before any CUDA library is loaded: fds 1 and 2 become
 * pipes, logging goes on to a copy of the old fd 2. */
void output_capture(void);
/* After the welcome: a thread sends what arrives in the pipes. */
void output_start(void);
/* Before a reply: send everything written so far (a synchronise's printf
 * output comes before its reply). */
void output_before_reply(void);

/* ---- record.c: request frames to RGPU_RECORD_DIR, for the fuzz corpus ---- */

void record_frame(const char *frame, size_t len);

/* ---- guards.c: checks around generated procedures ---------------------------- */

/* ---- session.c: rgpu's own procedures ----------------------------------------- */

/* A serve_ function (daemon/, for rgpu's own procedures: codegen/<lib>_own.h)
 * that cannot carry out its call at all says why with an RGPU_E* status,
 * which the reply carries as its transport status: returns 0, the API
 * status to return with it.  RGPU_EPROTO ends the session, as any request
 * that does not match its procedure. */
int serve_transport(int status);
/* A serve_ function that wrote only the first `used` bytes of the output
 * buffer `out` it was given (a description of variable size): the reply
 * carries those alone, and the client takes the shorter output as it is. */
void serve_out_used(const void *out, size_t used);

/* The request a serving thread runs, set by the session around each one
 * (and by the fuzz harnesses): where a serve_ function's bulk bytes come
 * from and go (args.c). */
extern _Thread_local struct hand_call *serve_call;
/* The bytes of the call's stream parameter still in the socket (its
 * pointer is then NULL; 0: none, its bytes came in the frame), read in
 * order with serve_stream_read; what serve_ leaves is read and dropped
 * after it returns.  A client that stalls inside them, or leaves, ends
 * the session. */
size_t serve_stream_left(void);
void serve_stream_read(void *buf, size_t len);
/* Whether the client waits for the call's reply: a call sent without
 * waiting (RGPU_CALL_NOREPLY) need not finish its GPU work before it
 * returns, as long as its stream's order keeps it (daemon/copy.c). */
int serve_waited(void);
/* The bytes the call's sink output is to send ahead of the reply (its
 * pointer is then NULL; 0: none), as one data frame of exactly that many:
 * serve_data_begin(len), serve_data_write, serve_data_end.  A call that
 * fails before begin sends none and returns its failure. */
size_t serve_sink_len(void);
void serve_data_begin(size_t len);
void serve_data_write(const void *p, size_t n);
void serve_data_end(void);

struct guard {
    const char *lib, *name;
    int (*pre)(void **argv);                /* nonzero: return this instead */
    void (*post)(void **argv, int status);  /* after the real call */
};

const struct guard *guard_for(const char *lib, const char *name);
/* The guard of lib/name in a table of n, or NULL (each file's *_guard_for). */
const struct guard *guard_in(const struct guard *table, size_t n, const char *lib,
                             const char *name);
#define GUARD_IN(table, lib, name) guard_in(table, sizeof table / sizeof table[0], lib, name)
/* hand_cublasLt.c: the guards of the calls that take a matmul descriptor. */
const struct guard *lt_guard_for(const char *lib, const char *name);
/* hand_arrays.c: the texture and surface object calls' guards. */
const struct guard *array_guard_for(const char *lib, const char *name);
/* memguards.c: the guards that keep the table of owned device memory. */
const struct guard *memguard_for(const char *lib, const char *name);
/* hand_graphs.c: the graph calls' guards (node handles a destroyed graph
 * takes with it, memset nodes' extent). */
const struct guard *graph_guard_for(const char *lib, const char *name);
/* hand_graphs.c: whether a node call's n dependencies are what no client
 * sends (past RGPU_GRAPH_MAX_DEPS, or counted but missing); whether each
 * is a node of the session's (NULL is none); a graph's nodes forgotten. */
struct CUgraphNode_st;
int graph_deps_malformed(const void *deps, size_t n);
int graph_deps_known(struct CUgraphNode_st *const *deps, size_t n);
void graph_forget_nodes(uint64_t graph, int runtime);
/* hand_graph_conditionals.c: whether graph is a conditional node's body;
 * the bodies and conditional handles that go with a graph or a node. */
int graph_cond_is_body(uint64_t graph);
void graph_cond_forget_graph(uint64_t graph, int runtime);
void graph_cond_forget_node(uint64_t node, int runtime);
/* hand_nvml.c: NVML's setting calls, refused unless --nvml-settings. */
const struct guard *nvml_guard_for(const char *lib, const char *name);
void nvml_allow_settings(int allow);
/* ipc.c: memory opened by CUDA IPC joins and leaves the owned table. */
const struct guard *ipc_guard_for(const char *lib, const char *name);
/* The daemon's secret for IPC handles, made once by the listener (0, or
 * -1).  Only the listener keeps it: before each fork it derives what the
 * session needs (ipc_listener_seed: on a Unix socket the key of the
 * peer's uid, under --insecure-tcp-no-auth the shared unauthenticated
 * one, on TCP with keys a salt that the client's own key completes), and
 * the session keeps that alone (ipc_session_start wipes the inherited
 * secret and the caller's seed); other children of the listener only
 * wipe the secret (ipc_forget_secret).  Once the client is let in, the
 * session takes its key: ipc_identity("uid 1000") when it matches the
 * seed, ipc_identity_key(name, client secret) on TCP.  Handles are
 * enciphered with it (docs/security.md, "CUDA IPC"). */
enum { IPC_SEED_NONE, IPC_SEED_KEY, IPC_SEED_SALT };
struct ipc_seed {
    int kind;
    char who[40];               /* IPC_SEED_KEY: the identity it is for */
    unsigned char bytes[32];
};
int ipc_daemon_secret(void);
void ipc_listener_seed(int fd, const struct rgpud_options *opt, struct ipc_seed *out);
void ipc_session_start(struct ipc_seed *from_listener);
void ipc_forget_secret(void);
void ipc_identity(const char *who);
void ipc_identity_key(const char *name, const unsigned char *secret, size_t len);
/* While a graph's dot description is printed, the memory file the library
 * writes it to and its /proc/self/fd path (else -1): the one open for
 * writing the sandbox grants a session (sandbox.c). */
extern int graph_dot_fd;
extern char graph_dot_path[64];
/* A kernel's (hand_cudart.c) or function's (hand_cuda_launch.c) argument
 * vector for a graph's kernel node: 1 unknown, -1 not its layout, 0 ok. */
int hand_cudart_kernel_argv(uint64_t kern, const void *params, size_t n, void **argv,
                            unsigned max);
int hand_cuda_function_argv(uint64_t func, const void *params, size_t n, void **argv,
                            unsigned max);
/* Their layouts (offsets and sizes of n parameters): 0, or -1 unknown. */
int hand_cudart_kernel_layout(uint64_t kern, const uint32_t **offset, const uint32_t **size,
                              unsigned *n);
/* A module or library went, or a context was reset: the driver may hand
 * out the same function handles for other functions from now on. */
void hand_cuda_layouts_retire(void);
int hand_cuda_function_layout(uint64_t func, const uint32_t **offset, const uint32_t **size,
                              unsigned *n);
/* Whether the driver handed out this CUfunction or CUkernel to the session. */
int guard_function_known(uint64_t func);
/* A capture query's n dependencies (nodes and, where not NULL, edges: 8
 * bytes each) into the client's arrays of max (hand_cudart.c). */
void capture_arrays_out(const void *nodes, const void *edges, size_t n, void *deps_out,
                        void *edges_out, size_t max);

/* ---- the running call of a serve_ function (hand_*.c, session.c) --------------- */

struct hand_call {
    const msgpack_object *args;     /* the argument array */
    msgpack_packer *out;            /* the outputs, packed by the codec */
    /* A trailing output bin's bytes, sent straight from this buffer after
     * the packed outputs (rgpu_encode_outs_tail) and freed after sending. */
    void *payload;
    size_t payload_len;
    /* A streamed request (to a procedure whose last parameter is a stream,
     * whose frame ended in a bin of at least RGPU_STREAM_MIN bytes): that
     * bin arrived empty in args, and its in_len bytes are still in the
     * socket, to be read with hand_read_payload (serve_stream_read).  The
     * session reads and drops whatever the serve_ function leaves. */
    size_t in_len;
    uint64_t serial;                /* the request's, which a data frame names */
    size_t data_left;               /* bytes of an open data frame still due */
    size_t sink_len;                /* rgpu's own procedures: a sink's bytes to send */
    int noreply;                    /* the client waits for no reply (RGPU_CALL_NOREPLY) */
};

/* The next len bytes (at most c->in_len) of a streamed request's payload.
 * A client that stalls inside it (the frame timeout) or leaves ends the
 * session. */
void hand_read_payload(struct hand_call *c, void *buf, size_t len);

/* Bulk bytes of a reply sent ahead of it, in pieces, as a data frame
 * [RGPU_MSG_DATA, serial, bin of len bytes] (common/rgpu_proto.h): begin
 * takes the session's write lock and sends the frame's head, write sends
 * the next bytes of the bin, end checks that all len went and lets other
 * frames out.  Between begin and end the handler sends nothing else, and
 * ends what it began.  A client gone ends the session. */
void hand_data_begin(struct hand_call *c, size_t len);
void hand_data_write(struct hand_call *c, const void *p, size_t n);
void hand_data_end(struct hand_call *c);

/* Host functions (host_functions.c): how many wait for the client, and the
 * client's acknowledgement of one (with the bytes it carried, or NULL),
 * read by the session's reader. */
int host_functions_pending(void);
void host_function_done(uint64_t id, const void *bytes, size_t len);
/* A graph host node's run on the client, on the driver's thread: sends
 * [CALLBACK, run, status, token(, send)] and waits for the answer, whose
 * bytes land in recv when they are exactly recv_len (else recv keeps what
 * it had).  A session whose client goes away exits meanwhile. */
void host_functions_run_node(uint64_t token, int status, const void *send, size_t send_len,
                             void *recv, size_t recv_len);
/* After a graph launch: a host function on stream that sends [CALLBACK,
 * id, 0] once the stream reaches it (runtime or driver, the _ptsz form or
 * not).  The library's status. */
int host_function_marker(int runtime, int ptsz, uint64_t stream, uint64_t id);

/* Graph host nodes and host copies (graph_host.c). */
const struct guard *graph_host_guard_for(const char *lib, const char *name);
/* A host function (lib's name, a stream callback or not) on a capturing
 * stream, captured as a host node naming the client's token.  The
 * library's status. */
int graph_host_capture_function(const char *lib, const char *name, int is_callback,
                                uint64_t stream, uint64_t token, unsigned flags);
/* Whether a session procedure may make graph host nodes run: from the first
 * such request on, the session's reader must stay free (session.c). */
int graph_host_proc(uint32_t proc_id);
/* After a successful instantiation (argv: the generated call's, the
 * executable graph's out pointer first, the graph second): whether it
 * holds host nodes, whose launches the client then waits for. */
void graph_host_instantiated(void **argv, int status, int runtime);
/* Whether node is a copy node of ours (a child graph node standing for a
 * copy to or from host memory); the status that refuses new device-only
 * parameters for one (exec: in an executable graph), else 0. */
int graph_host_is_copy_node(uint64_t node, int runtime);
int graph_host_refuse_copy_node(uint64_t node, int runtime, int exec, const char *what);
/* hand_graphs.c: whether the device side of a copy (base, start x in bytes,
 * y, z, pitch and rows per plane, 0 for the extent's) is the session's
 * memory over the whole w x h x d extent. */
int graph_copy_side_owned(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch,
                          uint64_t rows, uint64_t w, uint64_t h, uint64_t d);

/* The argument vector of a launch: argv[i] = params + offset[i], each
 * parameter inside the len bytes of params.  -1 when one is not, or when
 * there are more than max parameters. */
/* The launch's argument bytes copied where the driver may read them
 * aligned as in the program's memory (NULL: more than CUDA allows). */
const void *params_aligned(const void *params, size_t len);
int layout_argv(const uint32_t *offset, const uint32_t *size, unsigned n, const void *params,
                size_t len, void **argv, unsigned max);

#endif
