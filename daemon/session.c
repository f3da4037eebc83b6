/* One client session, in its own forked process.
 *
 * The main thread reads frames.  Each client thread gets a worker thread
 * here, so that the CUDA state the runtime keeps per thread (current
 * device, context) is the client thread's own.  Requests of one client
 * thread run in order on its worker.  A request sent without waiting for
 * its reply has already "returned" on the client, so every later request,
 * from any thread, must run after it: the reader holds back each request
 * until all earlier no-reply requests have run (once host functions are in
 * use, its worker does: wait_turn).
 *
 * Any malformed frame ends the session after a clear error reply: a client
 * that sends garbage cannot be trusted with a GPU context.  The session
 * process exits, and with it everything the client held. */
#include "rgpud.h"
#include "owned_handles.h"
#include "sandbox.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"
#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"
#include "nvml_procs.h"
#include "rgpu_procs.h"
#include "rgpu_serve.h"

#include <cuda.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENT_THREADS 256
/* Requests read but not yet run, over all worker threads: past either
 * bound the reader stops reading (the client's sends then wait in TCP)
 * until workers catch up.  Cost = frame bytes + 24 per decoded object. */
#define MAX_QUEUED_REQUESTS 1024
#define MAX_QUEUED_BYTES ((size_t)256 << 20)

struct served_lib;

struct request {
    char *frame;
    msgpack_zone zone;
    uint64_t serial;
    uint32_t proc_id;
    uint32_t flags;
    uint32_t tid;               /* the client thread it comes from */
    const msgpack_object *args;
    /* The procedure, found once when the request is read: its library's
     * table and its index there. */
    struct served_lib *lib;
    size_t index;
    size_t cost;                /* counted against MAX_QUEUED_BYTES */
    size_t in_len;              /* a streamed request's payload, still in the socket */
    /* How many no-reply requests, counted from the session's start, must
     * have run before this one (enqueue). */
    uint64_t after;
    struct request *next;
};

struct worker {
    uint32_t tid;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct request *head, *tail;
    /* First failure of a no-reply call, per library: a cuBLAS failure is
     * reported by the next waiting cuBLAS call, never by cudaMemcpy. */
    int deferred[8];
    /* CLOCK_MONOTONIC ms at which the running request started; 0: idle.
     * The keepalive thread reads it. */
    _Atomic long busy_since;
};

/* The deferred-status slot of a library. */
static const char *const slot_names[8] = { "cudart", "cuda", "cublas", "cublasLt", "cudnn",
                                           "nvml", NULL, "rgpu" };

static int lib_slot(const char *lib)
{
    for (int i = 0; i < 6; i++)
        if (strcmp(slot_names[i], lib) == 0)
            return i;
    return 7;
}

static struct {
    int fd;
    pthread_mutex_t write_lock;
    pthread_mutex_t async_lock;
    pthread_cond_t async_done;
    int async_pending;
    /* No-reply requests handed to workers, and those that have run (they
     * run in that order); with async_lock. */
    uint64_t noreply_enqueued, noreply_run;
    pthread_cond_t noreply_ran;
    struct worker *workers[MAX_CLIENT_THREADS];
    int nworkers;
    /* The first client thread is served by the reader itself: no thread
     * hand-off on the common single-threaded path.  Blocking there is safe:
     * a CUDA call never waits for host calls not yet made. */
    struct worker inline_worker;
    int have_inline;
    long spin_ns;
    /* Requests are read through a read-ahead buffer (common/rgpu_wire.h). */
    struct rgpu_reader reader;
    int frame_timeout_ms;
    int keepalive_ms;
    int queued;                 /* requests at workers, not yet run; async_lock */
    size_t queued_bytes;
    pthread_cond_t queue_space;
    /* A streamed request's payload is read by whichever thread runs it:
     * meanwhile the reader waits (async_lock, payload_done). */
    int payload_busy;
    pthread_cond_t payload_done;
    long payload_deadline;
} S = {
    .write_lock = PTHREAD_MUTEX_INITIALIZER,
    .async_lock = PTHREAD_MUTEX_INITIALIZER,
    .async_done = PTHREAD_COND_INITIALIZER,
    .noreply_ran = PTHREAD_COND_INITIALIZER,
    .queue_space = PTHREAD_COND_INITIALIZER,
    .payload_done = PTHREAD_COND_INITIALIZER,
};

/* ---- procedure lookup --------------------------------------------------------- */

struct served_lib {
    const struct rgpu_lib *lib;
    const struct rgpu_server_proc *server;
    void **fn;                  /* resolved lazily; (void *)-1: missing */
    const struct guard **guard; /* per procedure, or NULL */
};

static struct served_lib served[] = {
    { &rgpu_cudart_lib, rgpu_cudart_server_procs, NULL, NULL },
    { &rgpu_cuda_lib, rgpu_cuda_server_procs, NULL, NULL },
    { &rgpu_cublas_lib, rgpu_cublas_server_procs, NULL, NULL },
    { &rgpu_cublasLt_lib, rgpu_cublasLt_server_procs, NULL, NULL },
    { &rgpu_cudnn_lib, rgpu_cudnn_server_procs, NULL, NULL },
    { &rgpu_nvml_lib, rgpu_nvml_server_procs, NULL, NULL },
    { &rgpu_rgpu_lib, rgpu_rgpu_server_procs, NULL, NULL },
};
#define NSERVED (sizeof served / sizeof served[0])

static void init_tables(void)
{
    for (size_t i = 0; i < NSERVED; i++) {
        served[i].fn = calloc(served[i].lib->nprocs + 1, sizeof(void *));
        served[i].guard = calloc(served[i].lib->nprocs + 1, sizeof(struct guard *));
        if (!served[i].fn || !served[i].guard) {
            rgpu_error("out of memory");
            _exit(1);
        }
        for (size_t k = 0; k < served[i].lib->nprocs; k++)
            served[i].guard[k] = guard_for(served[i].lib->name, served[i].lib->procs[k].name);
    }
}

void session_list_procedures(FILE *out)
{
    for (size_t i = 0; i < NSERVED; i++)
        for (size_t k = 0; k < served[i].lib->nprocs; k++)
            fprintf(out, "generated %s %s\n", served[i].lib->name, served[i].server[k].proc->name);
}

static int find_generated(uint32_t id, struct served_lib **lib, size_t *index)
{
    for (size_t i = 0; i < NSERVED; i++) {
        const struct rgpu_proc *p = rgpu_lib_find(served[i].lib, id);
        if (p) {
            *lib = &served[i];
            *index = (size_t)(p - served[i].lib->procs);
            return 0;
        }
    }
    return -1;
}

static void *resolve(struct served_lib *l, size_t index)
{
    if (l->server[index].own)
        return l->server[index].own;    /* rgpu's own procedure: its serve_ function */
    if (!l->fn[index]) {
        void *fn = backend_sym(l->lib->name, l->lib->procs[index].name);
        l->fn[index] = fn ? fn : (void *)-1;
    }
    return l->fn[index] == (void *)-1 ? NULL : l->fn[index];
}

/* ---- replies ------------------------------------------------------------------- */

static void send_parts_or_die(const struct iovec *iov, int n)
{
    pthread_mutex_lock(&S.write_lock);
    int rc = rgpu_write_frame(S.fd, iov, n);
    pthread_mutex_unlock(&S.write_lock);
    if (rc < 0) {
        rgpu_info("client gone (%s): ending the session", strerror(errno));
        _exit(0);
    }
}

void session_send(const msgpack_sbuffer *sb)
{
    struct iovec iov = { sb->data, sb->size };
    send_parts_or_die(&iov, 1);
}

/* ---- bulk bytes outside frame buffers ------------------------------------------- */

static long now_ms(void);

/* The socket failed inside a frame: a stalled client (the frame timeout)
 * or one gone. */
static void end_inside_frame(void)
{
    if (errno == ETIMEDOUT) {
        rgpu_warn("client stalled inside a frame for over %d s (--frame-timeout): "
                  "ending the session", S.frame_timeout_ms / 1000);
        _exit(3);
    }
    rgpu_info("client closed the session inside a frame (%s)", strerror(errno));
    _exit(0);
}

void hand_read_payload(struct hand_call *c, void *buf, size_t len)
{
    if (len > c->in_len) {
        rgpu_error("a handler read past its payload: ending the session");
        _exit(1);
    }
    if (rgpu_reader_read(&S.reader, buf, len, S.payload_deadline) < 0)
        end_inside_frame();
    c->in_len -= len;
}

/* Read and drop what a handler left of its payload (it refused the call). */
static void drain_payload(struct hand_call *c)
{
    static char sink[64 << 10];
    while (c->in_len > 0)
        hand_read_payload(c, sink, c->in_len < sizeof sink ? c->in_len : sizeof sink);
}

static void client_gone(void)
{
    rgpu_info("client gone (%s): ending the session", strerror(errno));
    _exit(0);
}

void hand_data_begin(struct hand_call *c, size_t len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    /* [DATA, serial, bin header]: the bin's bytes follow (hand_data_write). */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_DATA);
    msgpack_pack_uint64(&pk, c->serial);
    msgpack_pack_bin(&pk, len);
    pthread_mutex_lock(&S.write_lock);
    c->data_left = len;
    int rc = rgpu_write_frame_start(S.fd, sb.size + len, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    if (rc < 0)
        client_gone();
}

void hand_data_write(struct hand_call *c, const void *p, size_t n)
{
    if (n > c->data_left) {
        rgpu_error("a handler sent past its data frame: ending the session");
        _exit(1);
    }
    if (rgpu_write_raw(S.fd, p, n) < 0)
        client_gone();
    c->data_left -= n;
}

void hand_data_end(struct hand_call *c)
{
    if (c->data_left != 0) {
        rgpu_error("a handler left its data frame short: ending the session");
        _exit(1);
    }
    pthread_mutex_unlock(&S.write_lock);
}

static void pack_reply_head(msgpack_packer *pk, uint64_t serial, int transport, int api,
                            int deferred)
{
    msgpack_pack_array(pk, 6);
    msgpack_pack_int(pk, RGPU_MSG_REPLY);
    msgpack_pack_uint64(pk, serial);
    msgpack_pack_int(pk, transport);
    msgpack_pack_int(pk, api);
    msgpack_pack_int(pk, deferred);
}

/* A protocol error: tell the client what was wrong, then end the session. */
static _Noreturn void protocol_error(uint64_t serial, int status, const char *why)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rgpu_warn("protocol error from client: %s; closing the session", why);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_reply_head(&pk, serial, status, 0, 0);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_str_with_body(&pk, why, strlen(why));
    struct iovec iov = { sb.data, sb.size };
    pthread_mutex_lock(&S.write_lock);
    (void)rgpu_write_frame(S.fd, &iov, 1);
    pthread_mutex_unlock(&S.write_lock);
    _exit(2);
}

/* ---- executing one request ----------------------------------------------------- */

/* What a serve_ function of rgpu's own procedures said of its call's
 * transport (serve_transport), for run_generated. */
static __thread int serve_status;
/* The frame of the generated call running on this thread, for serve_out_used. */
static __thread struct rgpu_call_frame *serve_frame;

int serve_transport(int status)
{
    serve_status = status;
    return 0;
}

void serve_out_used(const void *out, size_t used)
{
    struct rgpu_call_frame *f = serve_frame;
    for (unsigned i = 0; f && out && i < RGPU_MAX_PARAMS; i++)
        if (f->slot[i] == (uint64_t)(uintptr_t)out && used <= f->outlen[i])
            f->outlen[i] = used;
}

/* c: the request's call (its streamed bytes, where a sink's and a large
 * last output's bytes go). */
static int run_generated(struct served_lib *l, size_t index, const msgpack_object *args,
                         msgpack_packer *outs, int *transport, struct hand_call *c)
{
    const struct rgpu_proc *proc = &l->lib->procs[index];
    struct rgpu_call_frame frame;
    void *fn = resolve(l, index);
    int api = 0;

    *transport = rgpu_decode_streamed_args(args, proc, &frame, c->in_len);
    c->sink_len = frame.sink_len;
    if (*transport == RGPU_OK && !fn)
        *transport = RGPU_ENOSYM;
    if (*transport == RGPU_OK) {
        const struct guard *g = l->guard[index];
        /* Handles, device pointers and scalars first (daemon/owned_handles.c,
         * daemon/memguards.c). */
        api = handles_check_call(l->lib, proc, &frame);
        if (api == 0)
            api = rgpu_check_args(l->lib, proc, &frame);
        if (api == 0 && g && g->pre)
            api = g->pre(frame.argv);
        if (api == 0) {
            uint64_t forgotten = handles_before_call(proc, &frame);
            serve_status = RGPU_OK;
            serve_frame = &frame;
            api = l->server[index].thunk(fn, frame.argv);
            serve_frame = NULL;
            if (serve_status != RGPU_OK) {
                *transport = serve_status;
                api = 0;
            }
            handles_after_call(proc, &frame, api, forgotten);
        }
        if (g && g->post)
            g->post(frame.argv, api);
        rgpu_encode_outs_tail(outs, proc, &frame, &c->payload, &c->payload_len);
    }
    rgpu_call_frame_release(&frame);
    return api;
}

static void execute(struct worker *w, struct request *rq)
{
    msgpack_sbuffer outbuf;
    msgpack_packer outs;
    struct served_lib *l = rq->lib;
    int transport = RGPU_OK, api = 0;
    struct hand_call c = { .args = rq->args, .out = &outs, .in_len = rq->in_len,
                           .serial = rq->serial,
                           .noreply = (rq->flags & RGPU_CALL_NOREPLY) != 0 };

    if (rq->in_len) {
        /* The payload's deadline runs from now: the request may have
         * waited behind others of its thread. */
        S.payload_deadline = S.frame_timeout_ms < 0 ? -1
                                                    : now_ms() + S.frame_timeout_ms +
                                                          (long)(rq->in_len >> 8);
    }
    msgpack_sbuffer_init(&outbuf);
    msgpack_packer_init(&outs, &outbuf, msgpack_sbuffer_write);
    int slot = lib_slot(l->lib->name);
    serve_call = &c;
    api = run_generated(l, rq->index, rq->args, &outs, &transport, &c);
    rgpu_debug("t%u %s -> %d/%d", w->tid, l->lib->procs[rq->index].name, transport, api);
    serve_call = NULL;
    if (c.data_left) {
        rgpu_error("%s left its data frame open: ending the session",
                   l->lib->procs[rq->index].name);
        _exit(1);
    }
    if (transport == RGPU_EPROTO || transport == RGPU_ETOOBIG)
        protocol_error(rq->serial, transport, "arguments do not match the procedure");

    /* The whole payload is read before anything else, whatever the
     * handler did with it; then the reader may go on. */
    if (rq->in_len) {
        drain_payload(&c);
        pthread_mutex_lock(&S.async_lock);
        S.payload_busy = 0;
        pthread_cond_broadcast(&S.payload_done);
        pthread_mutex_unlock(&S.async_lock);
    }
    if (rq->flags & RGPU_CALL_NOREPLY) {
        int none = 0;
        if (transport != RGPU_OK || api != 0)
            __atomic_compare_exchange_n(&w->deferred[slot], &none, api ? api : -transport, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    } else {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        pack_reply_head(&pk, rq->serial, transport, api,
                        __atomic_exchange_n(&w->deferred[slot], 0, __ATOMIC_SEQ_CST));
        /* Head, outputs and bulk bytes go out as one frame, uncopied. */
        struct iovec iov[3] = { { sb.data, sb.size } };
        int n = 1;
        if (transport == RGPU_OK && outbuf.size) {
            iov[n++] = (struct iovec){ outbuf.data, outbuf.size };
            if (c.payload_len)
                iov[n++] = (struct iovec){ c.payload, c.payload_len };
        } else {
            msgpack_pack_array(&pk, 0);
            iov[0] = (struct iovec){ sb.data, sb.size };
        }
        output_before_reply();      /* what the call printed comes first */
        send_parts_or_die(iov, n);
        msgpack_sbuffer_destroy(&sb);
    }
    free(c.payload);
    msgpack_sbuffer_destroy(&outbuf);
}

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L + 1;    /* never 0 */
}

/* ---- where the session's time went, said when it ends --------------------------- */

/* Requests run and the time spent running them (all threads), and the
 * time the reader waited for the client's next frame: whether a slow
 * program was waiting on the server or the server on the program. */
static struct {
    atomic_ulong requests;
    atomic_ullong running_ns, idle_ns;
    long start_ms;
} usage;

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void log_usage(void)
{
    double wall = (double)(now_ms() - usage.start_ms) / 1e3;
    rgpu_info("session: %lu requests in %.1f s; running them %.1f s, waiting for the "
              "client %.1f s", (unsigned long)atomic_load(&usage.requests), wall,
              (double)atomic_load(&usage.running_ns) / 1e9,
              (double)atomic_load(&usage.idle_ns) / 1e9);
}

/* execute, marked busy for the keepalive thread. */
static void execute_busy(struct worker *w, struct request *rq)
{
    uint64_t t0 = mono_ns();
    atomic_store(&w->busy_since, now_ms());
    execute(w, rq);
    atomic_store(&w->busy_since, 0);
    atomic_fetch_add(&usage.running_ns, mono_ns() - t0);
    atomic_fetch_add(&usage.requests, 1);
}

static void request_free(struct request *rq)
{
    msgpack_zone_destroy(&rq->zone);
    free(rq->frame);
    free(rq);
}

/* Whether host functions are in use: the reader then runs no request
 * itself, nor waits for requests to run (below). */
static int inline_retired;

/* Every no-reply request enqueued before rq has run.  Normally the reader
 * waited for that before enqueuing rq; once host functions are in use the
 * worker waits instead, so that the reader goes on reading (an
 * acknowledgement a no-reply synchronise waits for may be behind rq).
 * No-reply requests wait likewise, so they run in the order they came and
 * the count says which have run. */
static void wait_turn(const struct request *rq)
{
    pthread_mutex_lock(&S.async_lock);
    while (S.noreply_run < rq->after)
        pthread_cond_wait(&S.noreply_ran, &S.async_lock);
    pthread_mutex_unlock(&S.async_lock);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (!w->head)
            pthread_cond_wait(&w->cond, &w->lock);
        struct request *rq = w->head;
        w->head = rq->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->lock);

        int noreply = rq->flags & RGPU_CALL_NOREPLY;
        size_t cost = rq->cost;
        wait_turn(rq);
        execute_busy(w, rq);
        request_free(rq);
        pthread_mutex_lock(&S.async_lock);
        if (noreply) {
            if (--S.async_pending == 0)
                pthread_cond_broadcast(&S.async_done);
            S.noreply_run++;
            pthread_cond_broadcast(&S.noreply_ran);
        }
        S.queued--;
        S.queued_bytes -= cost;
        pthread_cond_signal(&S.queue_space);
        pthread_mutex_unlock(&S.async_lock);
    }
    return NULL;
}

static struct worker *worker_for(uint32_t tid, uint64_t serial)
{
    for (int i = 0; i < S.nworkers; i++)
        if (S.workers[i]->tid == tid)
            return S.workers[i];
    if (S.nworkers == MAX_CLIENT_THREADS)
        protocol_error(serial, RGPU_ETOOBIG, "too many client threads");
    struct worker *w = calloc(1, sizeof *w);
    if (!w)
        protocol_error(serial, RGPU_ENOMEM, "out of memory");
    w->tid = tid;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        protocol_error(serial, RGPU_ENOMEM, "cannot start a worker thread");
    S.workers[S.nworkers] = w;
    __atomic_store_n(&S.nworkers, S.nworkers + 1, __ATOMIC_RELEASE);   /* keepalive reads it */
    return w;
}

/* Back-pressure: wait until the workers have room for one more request.
 * This cannot deadlock: the reader waits only while requests are queued,
 * and a worker runs its queue without ever waiting for the reader (a CUDA
 * call never waits for host calls not yet made, the premise the inline
 * worker rests on too; replies are written by the workers themselves).
 * So the queue drains and the reader resumes.  Meanwhile the client's
 * sends wait in the socket buffers, and keepalives tell it we are alive. */
static void wait_queue_space(void)
{
    pthread_mutex_lock(&S.async_lock);
    while (S.queued >= MAX_QUEUED_REQUESTS || S.queued_bytes >= MAX_QUEUED_BYTES)
        pthread_cond_wait(&S.queue_space, &S.async_lock);
    pthread_mutex_unlock(&S.async_lock);
}

/* Every no-reply request received so far has run. */
static void wait_async_done(void)
{
    pthread_mutex_lock(&S.async_lock);
    while (S.async_pending > 0)
        pthread_cond_wait(&S.async_done, &S.async_lock);
    pthread_mutex_unlock(&S.async_lock);
}

static void enqueue(struct worker *w, struct request *rq)
{
    pthread_mutex_lock(&S.async_lock);
    while (S.async_pending > 0 && !inline_retired)
        pthread_cond_wait(&S.async_done, &S.async_lock);
    rq->after = S.noreply_enqueued;
    if (rq->flags & RGPU_CALL_NOREPLY) {
        S.async_pending++;
        S.noreply_enqueued++;
    }
    S.queued++;
    S.queued_bytes += rq->cost;
    pthread_mutex_unlock(&S.async_lock);

    pthread_mutex_lock(&w->lock);
    rq->next = NULL;
    if (w->tail)
        w->tail->next = rq;
    else
        w->head = rq;
    w->tail = rq;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Host functions (daemon/host_functions.c) hold their stream until the
 * client acknowledges them, and the reader reads that acknowledgement: from
 * the first one on, the reader must never run a request itself (a
 * synchronise would wait for an acknowledgement only it could read).  So
 * the roles swap: the thread that served the first client thread inline
 * goes on serving it, as its worker, and a new thread becomes the reader.
 * The client thread keeps its server thread, and with it everything CUDA
 * keeps per thread: its current context, its per-thread default stream,
 * its capture mode, and the captures it began, which CUDA lets end only on
 * the thread that began them (a capture under way when the first host
 * function came, say one whose copy of pageable memory is a host node). */
static void *reader_main(void *first);
static _Noreturn void read_requests(struct request *first);

static _Noreturn void hand_reading_over(struct request *first)
{
    struct worker *w = &S.inline_worker;
    pthread_t reader;
    inline_retired = 1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->thread = pthread_self();
    if (pthread_create(&reader, NULL, reader_main, first) != 0) {
        rgpu_error("cannot start a reader thread for host functions: ending the session");
        _exit(1);
    }
    pthread_detach(reader);
    rgpu_debug("host functions in use: client thread %u keeps this thread, a new one reads",
               w->tid);
    worker_main(w);
    _exit(1);                   /* worker_main never returns */
}

static int is_host_function(const struct request *rq)
{
    return rq->proc_id == RGPU_CUDART_rgpu_host_func->id ||
           rq->proc_id == RGPU_CUDA_rgpu_cu_host_func->id || graph_host_proc(rq->proc_id);
}

/* ---- the session's own procedures ---------------------------------------------- */

/* Nothing to do: that it runs after every earlier no-reply request
 * (enqueue) is the answer. */
rgpu_status serve_rgpu_fence(void)
{
    return RGPU_STATUS_OK;
}

static unsigned take_unreported(struct worker *w, struct rgpu_unreported *out, unsigned n,
                                size_t max)
{
    for (int slot = 0; slot < 8 && n < max; slot++) {
        int d = __atomic_exchange_n(&w->deferred[slot], 0, __ATOMIC_SEQ_CST);
        if (d) {
            out[n].status = d > 0 ? d : -d;
            snprintf(out[n++].lib, sizeof out->lib, "%s",
                     slot_names[slot] ? slot_names[slot] : "rgpu");
        }
    }
    return n;
}

/* The failures of no-reply requests that no reply has carried yet, of
 * every client thread (a transport failure as its RGPU_E* number); each
 * is told once, and as many as entries hold are taken. */
rgpu_status serve_rgpu_unreported(struct rgpu_unreported *entries, size_t capacity,
                                  size_t *count)
{
    unsigned n = 0;
    if (!count || (capacity && !entries))
        return RGPU_STATUS_INVALID;
    if (S.have_inline)
        n = take_unreported(&S.inline_worker, entries, n, capacity);
    int nw = __atomic_load_n(&S.nworkers, __ATOMIC_ACQUIRE);
    for (int i = 0; i < nw; i++)
        n = take_unreported(S.workers[i], entries, n, capacity);
    *count = n;
    return RGPU_STATUS_OK;
}

/* ---- reading requests ------------------------------------------------------------ */

/* How much of a frame of len bytes to read before running it: 0 for all of
 * it, else the length of its head, when it is a request to a procedure
 * proc_streams names that ends in a bin of at least RGPU_STREAM_MIN
 * bytes (common/rgpu_wire.h).  Looks at the first bytes only (nothing is
 * consumed); any other shape is read whole and judged as usual. */
#define STREAM_PEEK 128

/* Whether a request to procedure id may leave its last bin in the socket:
 * one whose last parameter is a stream (rgpu's own procedures). */
static int proc_streams(uint32_t id)
{
    struct served_lib *l;
    size_t index;
    return find_generated(id, &l, &index) == 0 && rgpu_proc_streams(&l->lib->procs[index]);
}

static size_t streamed_head(size_t len, long deadline)
{
    const char *p;
    char copy[STREAM_PEEK];
    size_t head = 0;
    msgpack_zone zone;
    msgpack_object root;
    uint64_t proc;

    if (len < RGPU_STREAM_MIN || rgpu_reader_peek(&S.reader, STREAM_PEEK, deadline, &p) < 0)
        return 0;
    msgpack_zone_init(&zone, 512);
    int streams = 0;
    if (rgpu_unpack_frame_head(p, STREAM_PEEK, len, copy, &head, &zone, &root) == 0 &&
        len - head >= RGPU_STREAM_MIN && root.type == MSGPACK_OBJECT_ARRAY &&
        root.via.array.size == 6 && rgpu_obj_u64(&root.via.array.ptr[2], &proc) == 0 &&
        proc <= UINT32_MAX)
        streams = proc_streams((uint32_t)proc);
    msgpack_zone_destroy(&zone);
    return streams ? head : 0;
}

/* [CALLBACK_DONE, id(, bin)]: the client ran a host function, or a graph's
 * host node with the bytes a copy to the device takes
 * (daemon/host_functions.c).  Handled here and now, never queued behind
 * requests that may wait for it. */
static int acknowledgement(const msgpack_object *root)
{
    uint64_t msg, id;
    const msgpack_object *o = root->via.array.ptr;
    if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size < 2 ||
        root->via.array.size > 3 || rgpu_obj_u64(&o[0], &msg) < 0 ||
        msg != RGPU_MSG_CALLBACK_DONE)
        return 0;
    if (rgpu_obj_u64(&o[1], &id) < 0)
        protocol_error(0, RGPU_EPROTO, "host function acknowledgement without an id");
    if (root->via.array.size == 3 && o[2].type != MSGPACK_OBJECT_BIN)
        protocol_error(0, RGPU_EPROTO, "host function acknowledgement with bytes of no bin");
    if (root->via.array.size == 3)
        host_function_done(id, o[2].via.bin.ptr, o[2].via.bin.size);
    else
        host_function_done(id, NULL, 0);
    return 1;
}

/* Parse [CALL, serial, proc, tid, flags, args]; protocol_error on anything
 * off.  NULL after an acknowledgement, which is no request. */
static struct request *read_request(void)
{
    struct request *rq = calloc(1, sizeof *rq);
    msgpack_object root;
    size_t len;
    uint64_t msg, serial = 0, proc, tid, flags;

    if (!rq)
        protocol_error(0, RGPU_ENOMEM, "out of memory");
    uint64_t idle_from = mono_ns();
    if (!rgpu_reader_pending(&S.reader))
        rgpu_spin_until_readable(S.fd, S.spin_ns);
    /* Idle between frames for as long as the client likes; inside one,
     * within the frame timeout. */
    long deadline;
    if (rgpu_reader_begin(&S.reader, &len, S.frame_timeout_ms, &deadline) < 0) {
        if (errno == EMSGSIZE)
            protocol_error(0, RGPU_ETOOBIG, "frame larger than the protocol allows");
        if (errno == ETIMEDOUT)
            end_inside_frame();
        rgpu_info("client closed the session");
        log_usage();
        _exit(0);
    }
    atomic_fetch_add(&usage.idle_ns, mono_ns() - idle_from);
    size_t head = streamed_head(len, deadline);
    if (head) {
        /* Only the head is read now; the payload waits in the socket for
         * the handler, which reads it while the GPU copies. */
        rq->in_len = len - head;
        len = head;
    }
    rq->frame = malloc(len);
    if (!rq->frame)
        protocol_error(0, RGPU_ENOMEM, "out of memory");
    if (rgpu_reader_read(&S.reader, rq->frame, len, deadline) < 0)
        end_inside_frame();
    if (head) {
        size_t head_len, bin_at;
        if (rgpu_split_trailing_bin(rq->frame, len, len + rq->in_len, &head_len, &bin_at) < 0 ||
            head_len != len)
            protocol_error(0, RGPU_EPROTO, "internal: a streamed head changed");
        rgpu_empty_trailing_bin(rq->frame, bin_at);
    }
    record_frame(rq->frame, len);
    msgpack_zone_init(&rq->zone, 4096);
    uint64_t objects;
    if (rgpu_unpack_frame_counted(rq->frame, len, &rq->zone, &root, &objects) < 0)
        protocol_error(0, RGPU_EPROTO, "frame is not well-formed msgpack or decodes to "
                                       "too many objects");
    rq->cost = len + 24 * (size_t)objects + sizeof *rq;
    if (acknowledgement(&root)) {
        request_free(rq);
        return NULL;
    }
    if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size != 6)
        protocol_error(0, RGPU_EPROTO, "request is not a 6-element array");
    const msgpack_object *o = root.via.array.ptr;
    if (rgpu_obj_u64(&o[0], &msg) < 0 || msg != RGPU_MSG_CALL || rgpu_obj_u64(&o[1], &serial) < 0)
        protocol_error(0, RGPU_EPROTO, "request lacks message type or serial");
    if (rgpu_obj_u64(&o[2], &proc) < 0 || proc > UINT32_MAX || rgpu_obj_u64(&o[3], &tid) < 0 ||
        tid > UINT32_MAX || rgpu_obj_u64(&o[4], &flags) < 0 || o[5].type != MSGPACK_OBJECT_ARRAY)
        protocol_error(serial, RGPU_EPROTO, "request fields have wrong types");
    if (find_generated((uint32_t)proc, &rq->lib, &rq->index) < 0)
        protocol_error(serial, RGPU_ENOPROC, "unknown procedure id");
    if (rq->in_len && !proc_streams((uint32_t)proc))
        protocol_error(serial, RGPU_EPROTO, "internal: a streamed request to another procedure");
    rq->serial = serial;
    rq->proc_id = (uint32_t)proc;
    rq->flags = (uint32_t)flags;
    /* The root lives in the zone; keep a copy of the args object. */
    msgpack_object *args = msgpack_zone_malloc(&rq->zone, sizeof *args);
    if (!args)
        protocol_error(serial, RGPU_ENOMEM, "out of memory");
    *args = o[5];
    rq->args = args;
    rq->tid = (uint32_t)tid;
    return rq;
}

/* ---- keepalive ------------------------------------------------------------------ */

/* The client is gone (closed, crashed, reset) while we compute: nobody
 * will read the result, and the slot is better given back now than after
 * a kernel of an hour. */
static void end_if_client_gone(void)
{
    struct pollfd pfd = { .fd = S.fd, .events = POLLRDHUP };
    if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        rgpu_info("client gone while a request ran: ending the session");
        _exit(0);
    }
}

/* Whether a request has run for at least ms (any worker); *busy: whether
 * one runs at all. */
static int long_request(long now, long ms, int *busy)
{
    int n = __atomic_load_n(&S.nworkers, __ATOMIC_ACQUIRE), due = 0;
    long t = atomic_load(&S.inline_worker.busy_since);
    *busy = t != 0;
    due = t && now - t >= ms;
    for (int i = 0; i < n; i++) {
        t = atomic_load(&S.workers[i]->busy_since);
        *busy |= t != 0;
        due |= t && now - t >= ms;
    }
    return due;
}

/* While a request runs longer than keepalive_ms, send [KEEPALIVE] that
 * often, so that the client's RGPU_TIMEOUT counts the server's silence,
 * not the length of a kernel or a synchronise.  A thread of its own: the
 * first client thread's requests run on the reader. */
static void *keepalive_main(void *arg)
{
    static const char frame[] = { (char)0x91, RGPU_MSG_KEEPALIVE };    /* [KEEPALIVE] */
    struct timespec tick = { S.keepalive_ms / 1000, (S.keepalive_ms % 1000) * 1000000L };
    (void)arg;
    for (;;) {
        int busy;
        nanosleep(&tick, NULL);
        int due = long_request(now_ms(), S.keepalive_ms, &busy);
        /* A host function waiting for the client counts as a request. */
        if (host_functions_pending() > 0)
            busy = due = 1;
        if (!busy)
            continue;
        end_if_client_gone();
        if (due) {
            struct iovec iov = { (void *)frame, sizeof frame };
            send_parts_or_die(&iov, 1);
        }
    }
    return NULL;
}

static void on_hello_timeout(int sig)
{
    static const char m[] = "rgpud: client did not finish its hello in time "
                            "(--hello-timeout): closing\n";
    (void)sig;
    (void)!write(STDERR_FILENO, m, sizeof m - 1);
    _exit(3);
}

/* Socket settings of a session: a client that stops reading our replies
 * for the frame timeout ends the session (a blocked write would hold it
 * for ever), and TCP keepalive notices a client host that vanished. */
static void session_socket(int fd, const struct rgpud_options *opt)
{
    struct timeval tv = { opt->frame_timeout_s, 0 };
    int one = 1, idle = 60, intvl = 10, cnt = 6;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    rgpu_unix_buffers(fd);      /* device-to-host copies write from here */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* The hello must be over within the hello timeout, whatever it holds:
 * SIGALRM ends a session that is still in it. */
static void hello_deadline(int seconds)
{
    struct sigaction sa = { .sa_handler = on_hello_timeout };
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)seconds);
}

static void start_keepalive(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, keepalive_main, NULL) != 0) {
        rgpu_error("cannot start the keepalive thread");
        _exit(1);
    }
    pthread_detach(t);
}

/* The client's GPUs, before its CUDA loads and after (daemon/devices.c):
 * a GPU gone since rgpud started is the client's refusal, not a crash. */
static void choose_devices(int fd, struct rgpu_welcome *w, const struct rgpu_visible *visible,
                           const struct rgpud_options *opt, const struct client_libs *client)
{
    char why[sizeof w->message];
    devices_session_select(visible);
    int opened = backend_open(opt->lib_dir, opt->cuda12_dirs, client, why, sizeof why);
    if (opened == -2)           /* CUDA 12 libraries the configuration requires */
        auth_welcome_refusal(fd, w, RGPU_EVERSION, why);
    if (opened < 0)
        rgpu_error("no CUDA runtime could be loaded%s%s: every call will be refused",
                   opt->lib_dir ? " from " : "", opt->lib_dir ? opt->lib_dir : "");
    backend_init_driver();
    if (devices_session_check(why, sizeof why) < 0)
        auth_welcome_refusal(fd, w, RGPU_ENODEV, why);
}

void session_run(int fd, const struct rgpud_options *opt)
{
    static struct rgpu_visible visible;     /* 4 KiB: not on the stack */
    struct rgpu_welcome w;
    struct client_libs client;
    S.fd = fd;
    S.spin_ns = opt->spin_ns;
    S.frame_timeout_ms = opt->frame_timeout_s * 1000;
    S.keepalive_ms = opt->keepalive_ms;
    rgpu_reader_init(&S.reader, fd);    /* used once the hello is over */
    session_socket(fd, opt);
    /* Who the client is, first: one not let in never makes us load CUDA. */
    hello_deadline(opt->hello_timeout_s);
    auth_session(fd, opt, &w, &visible, &client);
    listener_let_in(fd, opt, &w);   /* a place among --max-sessions, or busy */
    alarm(0);
    output_capture();           /* before a library can print */
    init_tables();
    choose_devices(fd, &w, &visible, opt, &client);
    nvml_allow_settings(opt->nvml_settings);
    if (backend_init_nvml() == 0)
        devices_nvml_map();
    sandbox_session(opt);       /* before anything else the client sends is read */
    w.runtime_version = backend_runtime_version();
    w.driver_version = backend_driver_version();
    w.cuda_devices = devices_session_count();
    backend_lib_versions(&w);
    auth_welcome(fd, &w);
    usage.start_ms = now_ms();
    output_start();             /* output frames only after the welcome */
    start_keepalive();
    read_requests(NULL);
}

/* Run rq: inline on the reader for the first client thread until host
 * functions are in use, else at its client thread's worker. */
static void dispatch(struct request *rq)
{
    int streamed = rq->in_len != 0;
    if (rq->tid == S.inline_worker.tid && !inline_retired) {
        wait_async_done();
        execute_busy(&S.inline_worker, rq);
        request_free(rq);
        return;
    }
    /* A worker reads a streamed request's payload: nothing more is read
     * here until it has. */
    S.payload_busy = streamed;
    enqueue(rq->tid == S.inline_worker.tid ? &S.inline_worker
                                           : worker_for(rq->tid, rq->serial),
            rq);
    pthread_mutex_lock(&S.async_lock);
    while (S.payload_busy)
        pthread_cond_wait(&S.payload_done, &S.async_lock);
    pthread_mutex_unlock(&S.async_lock);
}

/* The reader: the session's first thread, then, once host functions are in
 * use, one of its own, which dispatches first (the request that made the
 * swap) before it reads on. */
static _Noreturn void read_requests(struct request *first)
{
    if (first)
        dispatch(first);
    for (;;) {
        wait_queue_space();
        struct request *rq = read_request();
        if (!rq)
            continue;           /* an acknowledgement, handled */
        if (!S.have_inline) {
            S.have_inline = 1;
            S.inline_worker.tid = rq->tid;
        }
        if (is_host_function(rq) && !inline_retired)
            hand_reading_over(rq);
        dispatch(rq);
    }
}

static void *reader_main(void *first)
{
    read_requests(first);
}
