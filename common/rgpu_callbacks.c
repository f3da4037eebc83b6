/* Host functions on the client: cudaLaunchHostFunc, cudaStreamAddCallback,
 * cuLaunchHostFunc, cuStreamAddCallback (and their _ptsz forms).
 *
 * The program's function stays here.  Enqueuing one gives it an id (ours,
 * never a pointer) and asks rgpud to put a host function of its own on the
 * real stream (rgpu.host_func); when the stream reaches it, rgpud sends
 * [CALLBACK, id, status] and holds the stream until we answer
 * [CALLBACK_DONE, id] (daemon/host_functions.c, common/rgpu_proto.h).  So
 * later work on that stream waits for the function, as on a local GPU, and
 * a synchronise of the stream returns only after it ran: the reply of the
 * synchronise comes after the callback frame, and the stream went on only
 * once the function had returned.
 *
 * The functions run on a thread of the core's own, one at a time in the
 * order their streams reached them, never inside a caller's stack.  While
 * any is outstanding that thread also reads the session's frames when no
 * caller does, so a program that waits for its callback without calling
 * CUDA sees it run.  A CUDA call from that thread is answered at once with
 * cudaErrorNotPermitted / CUDA_ERROR_NOT_PERMITTED (the server's stream
 * waits for the thread: a call that waited for the server could deadlock;
 * CUDA documents that host functions must not call CUDA and may get that
 * error).
 *
 * While host functions are outstanding every call waits for its reply
 * (rgpu_lazy.c): a request sent without waiting could sit, on the server,
 * in front of our acknowledgement behind a synchronise that waits for it. */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* As many as rgpud keeps waiting per session (daemon/host_functions.c). */
#define MAX_CALLBACKS 4096

struct callback {
    uint64_t id;                /* 0: free */
    enum rgpu_callback_kind kind;
    void *fn, *data;
    uint64_t stream;            /* the program's stream handle, as it passed it */
    int arrived;                /* its frame came; queued */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;     /* something arrived, or one finished */
    struct callback table[MAX_CALLBACKS];
    uint64_t next_id;
    int outstanding;            /* enqueued and not finished */
    /* Arrived and not run yet, in arrival order. */
    uint64_t queue[MAX_CALLBACKS];
    int status[MAX_CALLBACKS];
    unsigned head, len;
    int thread_started;
} C = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };

static _Thread_local int in_callback;

int rgpu_in_callback(void)
{
    return in_callback;
}

int rgpu_callbacks_outstanding(void)
{
    return __atomic_load_n(&C.outstanding, __ATOMIC_ACQUIRE);
}

static struct callback *find(uint64_t id)
{
    for (int i = 0; i < MAX_CALLBACKS; i++)
        if (C.table[i].id == id)
            return &C.table[i];
    return NULL;
}

/* With C.lock held: one fewer outstanding; its slot freed. */
static void finish(struct callback *cb)
{
    memset(cb, 0, sizeof *cb);
    __atomic_sub_fetch(&C.outstanding, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&C.changed);
}

void rgpu_callback_arrived(const msgpack_object *root)
{
    uint64_t id = 0;
    int64_t status = 0;
    const msgpack_object *o = root->via.array.ptr;
    if (root->via.array.size != 3 || rgpu_obj_u64(&o[1], &id) < 0 ||
        (o[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
         o[2].type != MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
        rgpu_error("rgpud sent a malformed host function frame: ignored");
        return;
    }
    status = o[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)o[2].via.u64 : o[2].via.i64;
    pthread_mutex_lock(&C.lock);
    struct callback *cb = id ? find(id) : NULL;
    if (!cb || cb->arrived) {
        rgpu_error("rgpud reached host function %llu, which is not waiting: ignored",
                   (unsigned long long)id);
    } else {
        cb->arrived = 1;
        unsigned at = (C.head + C.len) % MAX_CALLBACKS;
        C.queue[at] = id;
        C.status[at] = (int)status;
        __atomic_add_fetch(&C.len, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&C.changed);
    }
    pthread_mutex_unlock(&C.lock);
}

/* The callback thread reads frames until one of ours arrived, or none is
 * outstanding any more (its request failed). */
static int stop_listening(void)
{
    return __atomic_load_n(&C.len, __ATOMIC_ACQUIRE) > 0 || !rgpu_callbacks_outstanding();
}

/* The session broke: no frame will come for what is outstanding. */
static void forget_all(void)
{
    pthread_mutex_lock(&C.lock);
    for (int i = 0; i < MAX_CALLBACKS; i++)
        if (C.table[i].id)
            finish(&C.table[i]);
    C.len = 0;
    pthread_mutex_unlock(&C.lock);
}

/* [CALLBACK_DONE, id] */
static void acknowledge(uint64_t id)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, RGPU_MSG_CALLBACK_DONE);
    msgpack_pack_uint64(&pk, id);
    (void)rgpu_core_send_frame(&sb);    /* a failure broke the session: logged there */
    msgpack_sbuffer_destroy(&sb);
}

static void run(const struct callback *cb, int status)
{
    in_callback = 1;
    if (cb->kind == RGPU_CB_HOST_FN)
        ((void (*)(void *))cb->fn)(cb->data);
    else    /* cudaStreamCallback_t and CUstreamCallback: one ABI */
        ((void (*)(void *, int, void *))cb->fn)((void *)(uintptr_t)cb->stream, status, cb->data);
    in_callback = 0;
}

/* With C.lock held: wait until a callback has arrived; 0 when one has. */
static int wait_arrival(void)
{
    while (!C.len) {
        if (!C.outstanding) {
            pthread_cond_wait(&C.changed, &C.lock);
            continue;
        }
        /* Read frames ourselves while no caller does. */
        pthread_mutex_unlock(&C.lock);
        int rc = rgpu_core_listen(stop_listening);
        if (rc < 0) {
            forget_all();
            pthread_mutex_lock(&C.lock);
            return -1;
        }
        pthread_mutex_lock(&C.lock);
    }
    return 0;
}

static void *callback_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&C.lock);
    for (;;) {
        if (wait_arrival() < 0) {
            /* The session broke: nothing more arrives.  Sleep until
             * something is enqueued again (it fails, and is forgotten). */
            pthread_cond_wait(&C.changed, &C.lock);
            continue;
        }
        uint64_t id = C.queue[C.head];
        int status = C.status[C.head];
        C.head = (C.head + 1) % MAX_CALLBACKS;
        __atomic_sub_fetch(&C.len, 1, __ATOMIC_RELEASE);
        struct callback *slot = find(id), cb = *slot;
        pthread_mutex_unlock(&C.lock);
        /* The stream's earlier work is done: what it wrote into shared
         * memory is the function's to read, as natively (rgpu_mapped.c;
         * those copies use a stream of their own, which the host
         * function's does not hold). */
        if (rgpu_mapped_active())
            rgpu_mapped_after_sync();
        run(&cb, status);
        acknowledge(id);
        pthread_mutex_lock(&C.lock);
        finish(slot);
    }
    return NULL;
}

/* A child of fork has no callback thread and no session of its parent's:
 * what the parent had outstanding is not the child's. */
static void forget_in_child(void)
{
    pthread_mutex_init(&C.lock, NULL);
    pthread_cond_init(&C.changed, NULL);
    memset(C.table, 0, sizeof C.table);
    C.outstanding = 0;
    C.head = C.len = 0;
    C.thread_started = 0;
    in_callback = 0;
}

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

/* A host function after a fault may never be called (the driver drops
 * work after one): once the context has failed, nothing is waited for;
 * the copy that asked fails anyway. */
void rgpu_callbacks_wait_idle(void)
{
    if (!rgpu_callbacks_outstanding() || in_callback)
        return;
    pthread_mutex_lock(&C.lock);
    while (C.outstanding && !rgpu_sticky_error()) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_sec += 1;
        pthread_cond_timedwait(&C.changed, &C.lock, &at);
    }
    pthread_mutex_unlock(&C.lock);
}

/* With C.lock held: a slot and an id for fn; NULL when all are taken. */
static struct callback *reserve(enum rgpu_callback_kind kind, void *fn, void *data,
                                uint64_t stream)
{
    if (!C.thread_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, callback_thread, NULL) != 0) {
            rgpu_error("cannot start the host function thread");
            return NULL;
        }
        pthread_detach(t);
        C.thread_started = 1;
    }
    struct callback *cb = find(0);
    if (!cb)
        return NULL;
    *cb = (struct callback){ ++C.next_id, kind, fn, data, stream, 0 };
    __atomic_add_fetch(&C.outstanding, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&C.changed);
    return cb;
}

/* The request failed: the server never enqueued it. */
static void cancel(uint64_t id)
{
    pthread_mutex_lock(&C.lock);
    struct callback *cb = find(id);
    if (cb && !cb->arrived)
        finish(cb);
    pthread_mutex_unlock(&C.lock);
}

int rgpu_host_func_enqueue(const struct rgpu_lib *lib, const char *what, unsigned variant,
                           uint64_t stream, enum rgpu_callback_kind kind, void *fn, void *data,
                           unsigned flags)
{
    struct rgpu_req req;
    if (in_callback)
        return rgpu_transport_status(lib, what, RGPU_ENOTPERMITTED);
    if (!fn)
        return lib->is_runtime ? rgpu_runtime_result(lib->invalid_value) : lib->invalid_value;
    pthread_mutex_lock(&C.lock);
    struct callback *cb = reserve(kind, fn, data, stream);
    uint64_t id = cb ? cb->id : 0;
    pthread_mutex_unlock(&C.lock);
    if (!cb) {
        rgpu_warn("%s: %d host functions are waiting already", what, MAX_CALLBACKS);
        /* cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY */
        return lib->is_runtime ? rgpu_runtime_result(2) : 2;
    }
    /* It waits for its reply: the stream's error (one this process does
     * not hold, or destroyed) comes now, and nothing runs ahead of it. */
    rgpu_req_begin(&req, rgpu_proc_id("rgpu", RGPU_H_HOST_FUNC), 0);
    msgpack_pack_array(&req.pk, 4);
    msgpack_pack_uint32(&req.pk, variant);
    msgpack_pack_uint64(&req.pk, stream);
    msgpack_pack_uint64(&req.pk, id);
    msgpack_pack_uint32(&req.pk, flags);
    int rc = rgpu_req_status(lib, what, &req);
    if (rc != 0)
        cancel(id);
    return rc;
}
