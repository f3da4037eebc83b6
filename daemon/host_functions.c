/* Host functions (cudaLaunchHostFunc, cudaStreamAddCallback, cuLaunchHostFunc,
 * cuStreamAddCallback and their _ptsz forms): the program's function runs on
 * the client, in stream order.
 *
 * The client keeps its functions to itself: it names each enqueued one by
 * an id of its own (common/rgpu_callbacks.c).  Here rgpu.host_func enqueues
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
 * whose client goes away exits, and with it any waiting driver thread. */
#include "rgpud.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

/* Host functions enqueued and not yet acknowledged, per session: a client
 * that enqueues more waits for the library's out-of-memory answer. */
#define MAX_PENDING 4096

struct pending {
    uint64_t id;                /* the client's name for it */
    int done;                   /* acknowledged */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t acked;
    struct pending *slot[MAX_PENDING];
    int count;
} P = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0 };

int host_functions_pending(void)
{
    return __atomic_load_n(&P.count, __ATOMIC_RELAXED);
}

/* [CALLBACK, id, status] */
static void send_callback(uint64_t id, int status)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_CALLBACK);
    msgpack_pack_uint64(&pk, id);
    msgpack_pack_int(&pk, status);
    session_send(&sb);
    msgpack_sbuffer_destroy(&sb);
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
    send_callback(p->id, status);
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

void host_function_done(uint64_t id)
{
    int found = 0;
    pthread_mutex_lock(&P.lock);
    for (int i = 0; i < MAX_PENDING && !found; i++)
        if (P.slot[i] && P.slot[i]->id == id && !P.slot[i]->done) {
            P.slot[i]->done = 1;
            found = 1;
        }
    if (found)
        pthread_cond_broadcast(&P.acked);
    pthread_mutex_unlock(&P.lock);
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

/* Variants, as common/rgpu_hand_procs.h numbers them. */
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
 * graph would run each time the graph is launched, long after its record
 * here is gone: rgpu does not serve that (yet). */
static int capturing(uint64_t stream, int ptsz)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    __typeof__(&cuStreamIsCapturing) is_capturing =
        (__typeof__(&cuStreamIsCapturing))backend_sym("cuda", "cuStreamIsCapturing");
    CUstream s = stream == 0 && ptsz ? CU_STREAM_PER_THREAD : (CUstream)(uintptr_t)stream;
    return is_capturing && is_capturing(s, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* [variant, stream, id, flags] -> [] */
static int h_host_func(struct hand_call *c)
{
    uint64_t v[4];
    PROTO_IF(args_count(c, 4) || arg_u64s(c, 4, v));
    PROTO_IF(v[0] >= sizeof variants / sizeof variants[0] || v[3] > UINT32_MAX);
    const struct variant *var = &variants[v[0]];
    int runtime = strcmp(var->lib, "cudart") == 0;
    msgpack_pack_array(c->out, 0);
    if (!handles_valid(H_STREAM, v[1])) {
        rgpu_warn("refused a host function on a stream the session never handed out");
        return runtime ? cudaErrorInvalidResourceHandle : CUDA_ERROR_INVALID_HANDLE;
    }
    void *fn = backend_sym(var->lib, var->name);
    if (!fn)
        return -RGPU_ENOSYM;
    if (capturing(v[1], (v[0] & 1) != 0)) {
        static int logged;
        if (!logged++)
            rgpu_warn("%s on a capturing stream refused: rgpu does not serve host functions "
                      "in graphs", var->name);
        /* cudaErrorStreamCaptureUnsupported, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
        return runtime ? cudaErrorStreamCaptureUnsupported : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct pending *p = reserve(v[2]);
    if (!p) {
        rgpu_warn("host function %llu refused: %d are waiting already, or its id is in use",
                  (unsigned long long)v[2], MAX_PENDING);
        return runtime ? cudaErrorMemoryAllocation : CUDA_ERROR_OUT_OF_MEMORY;
    }
    int rc = var->is_callback
                 ? ((add_callback_fn)fn)((void *)(uintptr_t)v[1], stream_callback, p,
                                         (unsigned)v[3])
                 : ((launch_host_fn)fn)((void *)(uintptr_t)v[1], host_fn, p);
    if (rc != 0)
        release(p);         /* never enqueued: the driver will not call it */
    return rc;
}

const struct hand_proc hand_host_function_procs[] = {
    { "rgpu", RGPU_H_HOST_FUNC, h_host_func },
};
const int hand_host_function_nprocs =
    sizeof hand_host_function_procs / sizeof hand_host_function_procs[0];
