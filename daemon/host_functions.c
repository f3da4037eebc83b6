/* Host functions (cudaLaunchHostFunc, cudaStreamAddCallback, cuLaunchHostFunc,
 * cuStreamAddCallback and their _ptsz forms): the program's function runs on
 * the client, in stream order.
 *
 * The client keeps its functions to itself: it names each enqueued one by
 * an id of its own (common/rgpu_callbacks.c).  Here rgpu_host_func and
 * rgpu_cu_host_func (codegen/cudart_own.h, cuda_own.h) enqueue
 * a function of ours on the real stream; when the stream reaches it, the
 * driver calls it on one of its threads, and it sends [CALLBACK, id, status]
 * to the client and waits until the client says [CALLBACK_DONE, id]: only
 * then does the stream go on, so work after the host function waits for the
 * program's function, work on other streams does not.
 *
 * The acknowledgement is read by the session's reader, which never blocks
 * on a request while host functions are in use (daemon/session.c retires
 * its inline worker before the first one is enqueued).  Nothing from the
 * client is trusted: its id is a number matched against our own table; an
 * unknown or repeated acknowledgement is logged and ignored.  A session
 * whose client goes away exits, and with it any waiting driver thread.
 *
 * A graph's host node (daemon/graph_host.c) runs on the client the same
 * way, each time its graph runs: [CALLBACK, run, status, token(, bytes)],
 * run an id of ours (bit 63 set, so that it never meets a client's id),
 * answered [CALLBACK_DONE, run(, bytes)]; what waits is on the driver's
 * thread's stack.  A graph launch's marker (a host function after the
 * graph) only tells the client that the graph has passed. */
#include "rgpud.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include "cudart_serve.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Host functions enqueued and not yet acknowledged, per session: a client
 * that enqueues more waits for the library's out-of-memory answer. */
#define MAX_PENDING 4096

struct pending {
    uint64_t id;                /* the client's name for it */
    int done;                   /* acknowledged */
};

/* A graph host node's run, waiting for the client (on the driver's
 * thread's stack). */
struct node_run {
    uint64_t id;
    void *recv;                 /* where the answer's bytes go, recv_len of them */
    size_t recv_len;
    int done;
    struct node_run *next;
};

#define RUN_ID_BIT (1ull << 63)

static struct {
    pthread_mutex_t lock;
    pthread_cond_t acked;
    struct pending *slot[MAX_PENDING];
    int count;
    struct node_run *runs;
    int nruns;
    uint64_t next_run;
} P = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, NULL, 0, 0 };

int host_functions_pending(void)
{
    return __atomic_load_n(&P.count, __ATOMIC_RELAXED) +
           __atomic_load_n(&P.nruns, __ATOMIC_RELAXED);
}

/* [CALLBACK, id, status(, token(, bin))]: token 0 for a host function. */
static void send_callback(uint64_t id, int status, uint64_t token, const void *bytes,
                          size_t len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, !token ? 3 : bytes ? 5 : 4);
    msgpack_pack_int(&pk, RGPU_MSG_CALLBACK);
    msgpack_pack_uint64(&pk, id);
    msgpack_pack_int(&pk, status);
    if (token)
        msgpack_pack_uint64(&pk, token);
    if (token && bytes) {
        msgpack_pack_bin(&pk, len);
        msgpack_pack_bin_body(&pk, bytes, len);
    }
    session_send(&sb);
    msgpack_sbuffer_destroy(&sb);
}

void host_functions_run_node(uint64_t token, int status, const void *send, size_t send_len,
                             void *recv, size_t recv_len)
{
    struct node_run r = { 0, recv, recv_len, 0, NULL };
    pthread_mutex_lock(&P.lock);
    r.id = RUN_ID_BIT | ++P.next_run;
    r.next = P.runs;
    P.runs = &r;
    __atomic_add_fetch(&P.nruns, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&P.lock);
    send_callback(r.id, status, token, send, send_len);
    pthread_mutex_lock(&P.lock);
    while (!r.done)
        pthread_cond_wait(&P.acked, &P.lock);
    for (struct node_run **pp = &P.runs; *pp; pp = &(*pp)->next)
        if (*pp == &r) {
            *pp = r.next;
            break;
        }
    __atomic_sub_fetch(&P.nruns, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&P.lock);
}

/* A graph launch's marker: the client learns that the graph has passed. */
static void CUDA_CB marker_fn(void *data)
{
    send_callback((uint64_t)(uintptr_t)data, 0, 0, NULL, 0);
}

int host_function_marker(int runtime, int ptsz, uint64_t stream, uint64_t id)
{
    typedef int (*launch_fn)(void *stream, void (*fn)(void *), void *data);
    const char *name = runtime ? (ptsz ? "cudaLaunchHostFunc_ptsz" : "cudaLaunchHostFunc")
                               : (ptsz ? "cuLaunchHostFunc_ptsz" : "cuLaunchHostFunc");
    launch_fn launch = (launch_fn)backend_sym(runtime ? "cudart" : "cuda", name);
    return launch ? launch((void *)(uintptr_t)stream, marker_fn, (void *)(uintptr_t)id)
                  : -RGPU_ENOSYM;
}

static void release(struct pending *p)
{
    pthread_mutex_lock(&P.lock);
    for (int i = 0; i < MAX_PENDING; i++)
        if (P.slot[i] == p) {
            P.slot[i] = NULL;
            P.count--;
            break;
        }
    pthread_mutex_unlock(&P.lock);
    free(p);
}

/* On the driver's thread, when the stream reaches the host function. */
static void run_on_client(struct pending *p, int status)
{
    send_callback(p->id, status, 0, NULL, 0);
    pthread_mutex_lock(&P.lock);
    while (!p->done)
        pthread_cond_wait(&P.acked, &P.lock);
    pthread_mutex_unlock(&P.lock);
    release(p);
}

static void CUDA_CB host_fn(void *data)
{
    run_on_client(data, 0);
}

static void CUDA_CB stream_callback(CUstream stream, CUresult status, void *data)
{
    (void)stream;
    run_on_client(data, (int)status);
}

/* The client's answer to a graph node's run: its bytes, when the run
 * takes some, land where it said (the run waits until done is set, and
 * only this thread, the session's reader, sets it). */
static int node_run_done(uint64_t id, const void *bytes, size_t len)
{
    pthread_mutex_lock(&P.lock);
    struct node_run *r = P.runs;
    while (r && (r->id != id || r->done))
        r = r->next;
    pthread_mutex_unlock(&P.lock);
    if (!r)
        return 0;
    if (r->recv && bytes && len == r->recv_len)
        memcpy(r->recv, bytes, len);
    else if (r->recv || bytes)
        rgpu_warn("client answered a graph copy with %zu bytes where it takes %zu: the copy "
                  "keeps the bytes it had", bytes ? len : 0, r->recv ? r->recv_len : 0);
    pthread_mutex_lock(&P.lock);
    r->done = 1;
    pthread_cond_broadcast(&P.acked);
    pthread_mutex_unlock(&P.lock);
    return 1;
}

void host_function_done(uint64_t id, const void *bytes, size_t len)
{
    int found = 0;
    if (id & RUN_ID_BIT)
        found = node_run_done(id, bytes, len);
    pthread_mutex_lock(&P.lock);
    for (int i = 0; i < MAX_PENDING && !found && !(id & RUN_ID_BIT); i++)
        if (P.slot[i] && P.slot[i]->id == id && !P.slot[i]->done) {
            P.slot[i]->done = 1;
            found = 1;
        }
    if (found)
        pthread_cond_broadcast(&P.acked);
    pthread_mutex_unlock(&P.lock);
    if (found && bytes && !(id & RUN_ID_BIT))
        rgpu_debug("client answered host function %llu with bytes: ignored",
                   (unsigned long long)id);
    if (!found) {
        /* A client's mistake or a hostile one's: said once, then in the debug log. */
        static int warned;
        if (!warned++)
            rgpu_warn("client acknowledged host function %llu, which is not waiting: ignored "
                      "(further ones in the debug log)", (unsigned long long)id);
        else
            rgpu_debug("client acknowledged host function %llu, which is not waiting: ignored",
                       (unsigned long long)id);
    }
}

static struct pending *reserve(uint64_t id)
{
    if (id & RUN_ID_BIT)
        return NULL;    /* ids of ours: a client's would meet a graph node's run */
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->id = id;
    pthread_mutex_lock(&P.lock);
    for (int i = 0; i < MAX_PENDING; i++)
        if (P.slot[i] && P.slot[i]->id == id) {
            pthread_mutex_unlock(&P.lock);
            free(p);
            return NULL;        /* an id still in use: refused */
        }
    for (int i = 0; i < MAX_PENDING; i++)
        if (!P.slot[i]) {
            P.slot[i] = p;
            P.count++;
            pthread_mutex_unlock(&P.lock);
            return p;
        }
    pthread_mutex_unlock(&P.lock);
    free(p);
    return NULL;
}

typedef int (*launch_host_fn)(void *stream, void (*fn)(void *), void *data);
typedef int (*add_callback_fn)(void *stream, void (*cb)(CUstream, CUresult, void *), void *data,
                               unsigned flags);

/* Variants: the runtime's calls, then the driver's; each a call and its
 * _ptsz form, the host function's before the stream callback's. */
static const struct variant {
    const char *lib, *name;
    int is_callback;
} variants[] = {
    { "cudart", "cudaLaunchHostFunc", 0 },      { "cudart", "cudaLaunchHostFunc_ptsz", 0 },
    { "cudart", "cudaStreamAddCallback", 1 },   { "cudart", "cudaStreamAddCallback_ptsz", 1 },
    { "cuda", "cuLaunchHostFunc", 0 },          { "cuda", "cuLaunchHostFunc_ptsz", 0 },
    { "cuda", "cuStreamAddCallback", 1 },       { "cuda", "cuStreamAddCallback_ptsz", 1 },
};

/* Whether stream (as the variant names it: 0 is the per-thread stream for
 * the _ptsz ones) is being captured.  A host function captured into a
 * graph runs each time the graph is launched, long after a record here
 * would be gone: it becomes a graph host node naming the client's token
 * (graph_host.c). */
static int capturing(uint64_t stream, int ptsz)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    __typeof__(&cuStreamIsCapturing) is_capturing =
        (__typeof__(&cuStreamIsCapturing))backend_sym("cuda", "cuStreamIsCapturing");
    CUstream s = stream == 0 && ptsz ? CU_STREAM_PER_THREAD : (CUstream)(uintptr_t)stream;
    return is_capturing && is_capturing(s, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* A host function on a capturing stream: a host node of the capture,
 * naming the client's token, or refused when the client sent none. */
static int captured(const struct variant *var, uint64_t stream, uint64_t token,
                    unsigned flags, int runtime)
{
    if (token)
        return graph_host_capture_function(var->lib, var->name, var->is_callback, stream, token,
                                           flags);
    static int logged;
    if (!logged++)
        rgpu_warn("%s on a capturing stream refused: the client named no token for it",
                  var->name);
    /* cudaErrorStreamCaptureUnsupported, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    return runtime ? cudaErrorStreamCaptureUnsupported : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* A host function of ours on stream for the client's function id (the
 * codec checked the stream as the session's): variant numbers the
 * library's call (variants[]). */
static int enqueue(unsigned variant, uint64_t stream, uint64_t id, unsigned flags,
                   uint64_t token, int *in_capture)
{
    const struct variant *var = &variants[variant];
    int runtime = strcmp(var->lib, "cudart") == 0;
    void *fn = backend_sym(var->lib, var->name);
    if (!fn)
        return serve_transport(RGPU_ENOSYM);
    if (!in_capture)
        return runtime ? cudaErrorInvalidValue : CUDA_ERROR_INVALID_VALUE;
    *in_capture = capturing(stream, (variant & 1) != 0);
    if (*in_capture)
        return captured(var, stream, token, flags, runtime);
    struct pending *p = reserve(id);
    if (!p) {
        rgpu_warn("host function %llu refused: %d are waiting already, or its id is in use",
                  (unsigned long long)id, MAX_PENDING);
        return runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    }
    int rc = var->is_callback
                 ? ((add_callback_fn)fn)((void *)(uintptr_t)stream, stream_callback, p, flags)
                 : ((launch_host_fn)fn)((void *)(uintptr_t)stream, host_fn, p);
    if (rc != 0)
        release(p);         /* never enqueued: the driver will not call it */
    return rc;
}

/* ptsz and callback pick the variant: anything but 0 or 1 is a malformed
 * request. */
static int variant_of(int driver, int ptsz, int callback, unsigned *variant)
{
    if ((unsigned)ptsz > 1 || (unsigned)callback > 1)
        return -1;
    *variant = (driver ? 4u : 0u) + 2u * (unsigned)callback + (unsigned)ptsz;
    return 0;
}

cudaError_t serve_rgpu_host_func(cudaStream_t stream, int ptsz, int callback, uint64_t id,
                                 unsigned int flags, uint64_t token, int *captured)
{
    unsigned variant;
    if (variant_of(0, ptsz, callback, &variant) < 0)
        return serve_transport(RGPU_EPROTO);
    return enqueue(variant, (uint64_t)(uintptr_t)stream, id, flags, token, captured);
}

CUresult serve_rgpu_cu_host_func(CUstream stream, int ptsz, int callback, uint64_t id,
                                 unsigned int flags, uint64_t token, int *captured)
{
    unsigned variant;
    if (variant_of(1, ptsz, callback, &variant) < 0)
        return serve_transport(RGPU_EPROTO);
    return enqueue(variant, (uint64_t)(uintptr_t)stream, id, flags, token, captured);
}
