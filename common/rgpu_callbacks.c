/* Host functions on the client: cudaLaunchHostFunc, cudaStreamAddCallback,
 * cuLaunchHostFunc, cuStreamAddCallback (and their _ptsz forms).
 *
 * The program's function stays here.  Enqueuing one gives it an id (ours,
 * never a pointer) and asks rgpud to put a host function of its own on the
 * real stream (rgpu_host_func, rgpu_cu_host_func: codegen/cudart_own.h,
 * cuda_own.h, called by the stubs); when the stream reaches it, rgpud sends
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
 * in front of our acknowledgement behind a synchronise that waits for it.
 *
 * Graph host nodes come the same way, named by a token instead of an id of
 * ours (common/rgpu_graph_host.c): [CALLBACK, run, status, token(, bytes)],
 * answered [CALLBACK_DONE, run(, bytes)] once the token's function ran or
 * its copy's bytes were written or read.  A graph launch counts as
 * outstanding through a marker: an entry that runs nothing and ends when
 * the server's frame for it says the graph has passed. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "rgpu_wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* As many as rgpud keeps waiting per session (daemon/host_functions.c). */
#define MAX_CALLBACKS 4096

/* A marker runs nothing (a graph launch's end, rgpu_graph_host.c). */
#define RGPU_CB_MARKER ((enum rgpu_callback_kind)-1)

struct callback {
    uint64_t id;                /* 0: free */
    enum rgpu_callback_kind kind;
    void *fn, *data;
    uint64_t stream;            /* the program's stream handle, as it passed it */
    int arrived;                /* its frame came; queued */
};

/* What a frame asks the callback thread to do, queued in arrival order. */
struct run {
    uint64_t id;                /* what to acknowledge: the entry's id, or the server's run */
    struct callback *slot;      /* a host function's or marker's entry; NULL for a graph's */
    const struct rgpu_token *token;     /* a graph node's (NULL: unknown) */
    int status;
    void *bytes;                /* a copy to the host: the bytes, malloc'd */
    size_t len;
    struct run *next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;     /* something arrived, or one finished */
    struct callback table[MAX_CALLBACKS];
    uint64_t next_id;
    int outstanding;            /* enqueued (or a graph's arrived) and not finished */
    struct run *head, **tail;   /* arrived and not run yet */
    unsigned len;
    int thread_started;
} C = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER,
        .tail = &C.head };

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

/* With C.lock held: one fewer outstanding (a graph node's run answered). */
static void one_fewer(void)
{
    __atomic_sub_fetch(&C.outstanding, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&C.changed);
}

/* With C.lock held: one fewer outstanding; its slot freed. */
static void finish(struct callback *cb)
{
    memset(cb, 0, sizeof *cb);
    one_fewer();
}

/* With C.lock held: r joins the queue. */
static void queue(struct run *r)
{
    r->next = NULL;
    *C.tail = r;
    C.tail = &r->next;
    __atomic_add_fetch(&C.len, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&C.changed);
}

/* [CALLBACK, id, status]: a host function of ours (or a marker) reached. */
static void host_function_arrived(struct run *r)
{
    pthread_mutex_lock(&C.lock);
    struct callback *cb = r->id ? find(r->id) : NULL;
    if (!cb || cb->arrived) {
        rgpu_error("rgpud reached host function %llu, which is not waiting: ignored",
                   (unsigned long long)r->id);
        free(r);
    } else {
        cb->arrived = 1;
        r->slot = cb;
        queue(r);
    }
    pthread_mutex_unlock(&C.lock);
}

/* [CALLBACK, run, status, token(, bin)]: a graph's host node reached.  An
 * unknown token, or bytes that do not fit its copy, run nothing, but are
 * still answered: the server's graph waits for the answer. */
static void graph_node_arrived(struct run *r, const msgpack_object *o, uint32_t n)
{
    uint64_t token = 0;
    if (rgpu_obj_u64(&o[3], &token) == 0)
        r->token = rgpu_token_find(token);
    if (!r->token)
        rgpu_error("rgpud ran a graph host node of token %llu, which this process never made: "
                   "answered without running anything", (unsigned long long)token);
    int takes_bytes = r->token && r->token->kind == RGPU_TOKEN_TO_HOST;
    if (takes_bytes && (n != 5 || o[4].type != MSGPACK_OBJECT_BIN ||
                        o[4].via.bin.size != rgpu_token_bytes(r->token))) {
        rgpu_error("rgpud sent a graph copy to the host without its bytes: nothing written");
        r->token = NULL;
    } else if (takes_bytes && (r->bytes = malloc(o[4].via.bin.size ? o[4].via.bin.size : 1))) {
        memcpy(r->bytes, o[4].via.bin.ptr, o[4].via.bin.size);
        r->len = o[4].via.bin.size;
    } else if (takes_bytes) {
        rgpu_error("out of memory for a graph copy to the host: nothing written");
        r->token = NULL;
    }
    pthread_mutex_lock(&C.lock);
    __atomic_add_fetch(&C.outstanding, 1, __ATOMIC_RELEASE);
    queue(r);
    pthread_mutex_unlock(&C.lock);
}

void rgpu_callback_arrived(const msgpack_object *root)
{
    int64_t status = 0;
    const msgpack_object *o = root->via.array.ptr;
    uint32_t n = root->via.array.size;
    struct run *r = calloc(1, sizeof *r);
    if (!r || n < 3 || n > 5 || rgpu_obj_u64(&o[1], &r->id) < 0 ||
        rgpu_obj_i64(&o[2], &status) < 0) {
        rgpu_error("rgpud sent a malformed host function frame: ignored");
        free(r);
        return;
    }
    r->status = (int)status;
    if (n == 3)
        host_function_arrived(r);
    else
        graph_node_arrived(r, o, n);
}

/* The callback thread reads frames until one of ours arrived, or none is
 * outstanding any more (its request failed). */
static int stop_listening(void)
{
    return __atomic_load_n(&C.len, __ATOMIC_ACQUIRE) > 0 || !rgpu_callbacks_outstanding();
}

/* With C.lock held: the first queued run, unlinked (the queue is not empty). */
static struct run *dequeue(void)
{
    struct run *r = C.head;
    C.head = r->next;
    if (!C.head)
        C.tail = &C.head;
    __atomic_sub_fetch(&C.len, 1, __ATOMIC_RELEASE);
    return r;
}

/* The session broke: no frame will come for what is outstanding. */
static void forget_all(void)
{
    pthread_mutex_lock(&C.lock);
    while (C.len) {
        struct run *r = dequeue();
        if (!r->slot)
            one_fewer();
        free(r->bytes);
        free(r);
    }
    for (int i = 0; i < MAX_CALLBACKS; i++)
        if (C.table[i].id)
            finish(&C.table[i]);
    pthread_mutex_unlock(&C.lock);
}

/* [CALLBACK_DONE, id(, bin)] */
static void acknowledge(uint64_t id, const void *bytes, size_t len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, bytes ? 3 : 2);
    msgpack_pack_int(&pk, RGPU_MSG_CALLBACK_DONE);
    msgpack_pack_uint64(&pk, id);
    if (bytes) {
        msgpack_pack_bin(&pk, len);
        msgpack_pack_bin_body(&pk, bytes, len);
    }
    (void)rgpu_core_send_frame(&sb);    /* a failure broke the session: logged there */
    msgpack_sbuffer_destroy(&sb);
}

static void call(enum rgpu_callback_kind kind, void *fn, void *data, uint64_t stream,
                 int status)
{
    in_callback = 1;
    if (kind == RGPU_CB_HOST_FN)
        ((void (*)(void *))fn)(data);
    else    /* cudaStreamCallback_t and CUstreamCallback: one ABI */
        ((void (*)(void *, int, void *))fn)((void *)(uintptr_t)stream, status, data);
    in_callback = 0;
}

/* A graph node's token: its function called, or its copy's bytes moved;
 * then the answer, with the bytes a copy to the device takes. */
static void run_graph_node(const struct run *r)
{
    const struct rgpu_token *t = r->token;
    void *bytes = NULL;
    size_t len = 0;
    if (t && t->kind == RGPU_TOKEN_HOST_FN)
        call(RGPU_CB_HOST_FN, t->fn, t->data, 0, r->status);
    else if (t && t->kind == RGPU_TOKEN_STREAM_CB)
        call(RGPU_CB_STREAM, t->fn, t->data, t->stream, r->status);
    else if (t && t->kind == RGPU_TOKEN_TO_HOST && r->bytes)
        rgpu_token_scatter(t, r->bytes);
    else if (t && t->kind == RGPU_TOKEN_TO_DEVICE) {
        len = rgpu_token_bytes(t);
        if ((bytes = malloc(len ? len : 1)))
            rgpu_token_gather(t, bytes);
        else
            rgpu_error("out of memory for a graph copy to the device: its bytes stay as they "
                       "were");
    }
    acknowledge(r->id, bytes, bytes ? len : 0);
    free(bytes);
}

/* What a frame asked for; a host function's or marker's entry is left to
 * finish. */
static void run(const struct run *r)
{
    const struct callback *cb = r->slot;
    if (!cb) {
        run_graph_node(r);
        return;
    }
    if (cb->kind == RGPU_CB_MARKER)
        return;             /* the graph has passed: nothing to run or answer */
    call(cb->kind, cb->fn, cb->data, cb->stream, r->status);
    acknowledge(r->id, NULL, 0);
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
        struct run *r = dequeue();
        struct callback cb;
        if (r->slot) {
            cb = *r->slot;      /* its entry stays taken until finished */
            r->slot = &cb;
        }
        pthread_mutex_unlock(&C.lock);
        /* The stream's earlier work is done: what it wrote into shared
         * memory is the function's to read, as natively (rgpu_mapped.c;
         * those copies use a stream of their own, which the host
         * function's does not hold). */
        if (rgpu_mapped_active())
            rgpu_mapped_after_sync();
        run(r);
        pthread_mutex_lock(&C.lock);
        if (r->slot)
            finish(find(r->id));
        else
            one_fewer();
        free(r->bytes);
        free(r);
    }
    return NULL;
}

/* A child of fork has no callback thread and no session of its parent's:
 * what the parent had outstanding is not the child's (its queue's memory
 * is left behind). */
static void forget_in_child(void)
{
    pthread_mutex_init(&C.lock, NULL);
    pthread_cond_init(&C.changed, NULL);
    memset(C.table, 0, sizeof C.table);
    C.outstanding = 0;
    C.head = NULL;
    C.tail = &C.head;
    C.len = 0;
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

/* With C.lock held: the callback thread runs; 0, or -1 when it cannot. */
static int start_thread(void)
{
    pthread_t t;
    if (C.thread_started)
        return 0;
    if (pthread_create(&t, NULL, callback_thread, NULL) != 0) {
        rgpu_error("cannot start the host function thread");
        return -1;
    }
    pthread_detach(t);
    C.thread_started = 1;
    return 0;
}

void rgpu_callbacks_start(void)
{
    pthread_mutex_lock(&C.lock);
    (void)start_thread();
    pthread_mutex_unlock(&C.lock);
}

/* With C.lock held: a slot and an id for fn; NULL when all are taken. */
static struct callback *reserve(enum rgpu_callback_kind kind, void *fn, void *data,
                                uint64_t stream)
{
    if (start_thread() < 0)
        return NULL;
    struct callback *cb = find(0);
    if (!cb)
        return NULL;
    *cb = (struct callback){ ++C.next_id, kind, fn, data, stream, 0 };
    __atomic_add_fetch(&C.outstanding, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&C.changed);
    return cb;
}

/* The request failed: the server never enqueued it. */
void rgpu_callback_cancel(uint64_t id)
{
    pthread_mutex_lock(&C.lock);
    struct callback *cb = id ? find(id) : NULL;
    if (cb && !cb->arrived)
        finish(cb);
    pthread_mutex_unlock(&C.lock);
}

uint64_t rgpu_callback_marker(void)
{
    pthread_mutex_lock(&C.lock);
    struct callback *cb = reserve(RGPU_CB_MARKER, NULL, NULL, 0);
    uint64_t id = cb ? cb->id : 0;
    pthread_mutex_unlock(&C.lock);
    if (!id)
        rgpu_warn("graph launch: %d host functions are waiting already", MAX_CALLBACKS);
    return id;
}

uint64_t rgpu_host_func_reserve(enum rgpu_callback_kind kind, void *fn, void *data,
                                uint64_t stream, uint64_t *token)
{
    *token = 0;
    pthread_mutex_lock(&C.lock);
    struct callback *cb = reserve(kind, fn, data, stream);
    uint64_t id = cb ? cb->id : 0;
    pthread_mutex_unlock(&C.lock);
    if (!cb) {
        rgpu_warn("host function: %d are waiting already", MAX_CALLBACKS);
        return 0;
    }
    /* While a capture is under way the stream may be captured: then the
     * function becomes a host node of the capture, which names it by a
     * token (rgpu_graph_host.c), and runs each time the graph does. */
    if (rgpu_capture_active()) {
        struct rgpu_token t = { .kind = kind == RGPU_CB_HOST_FN ? RGPU_TOKEN_HOST_FN
                                                                : RGPU_TOKEN_STREAM_CB,
                                .fn = fn, .data = data, .stream = stream };
        *token = rgpu_token_register(&t);
    }
    return id;
}

void rgpu_host_func_placed(uint64_t id, int status, int captured)
{
    /* Not on the stream (refused, or a node of the capture): nothing will
     * come for id. */
    if (status != 0 || captured)
        rgpu_callback_cancel(id);
}
