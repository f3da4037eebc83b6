/* The client core (see rgpu_client.h). */
#include "rgpu_client.h"
#include "client_ranges.h"
#include "rgpu_addr.h"
#include "rgpu_hello.h"
#include "rgpu_liblog.h"
#include "rgpu_log.h"
#include "rgpu_wire.h"
#include "rgpu_procs.h"
#include "rgpu_own.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Server facts learnt at hello (logged with the connection banner). */
struct rgpu_server_info {
    int runtime_version;
    int driver_version;
    char name[128];
    int nlibs;
    struct rgpu_lib_version libs[RGPU_HELLO_MAX_LIBS];
    int cuda_devices;           /* -1: the server cannot say */
};

/* ---- the session ---------------------------------------------------------- */

struct waiter {
    uint64_t serial;
    int done;
    char *frame;
    size_t len;
    char *sink;                 /* bulk bytes of the reply may land here (a data frame) */
    size_t sink_len;
    int sunk;                   /* they did */
    int filling;                /* a reader is writing into sink: do not leave */
    struct waiter *next;
};

static struct {
    pthread_once_t once;
    int fd;                         /* -1 when no session */
    int broken;                     /* the connection died: fail fast */
    int forked;                     /* a child of a process with a session */
    pthread_mutex_t send_lock;      /* one frame at a time on the socket */
    pthread_mutex_t lock;           /* waiters and the reader role */
    pthread_cond_t cond;
    int reader_active;
    atomic_int connected;           /* connect_once succeeded */
    long spin_ns;                   /* RGPU_SPIN_US: how long a reader polls */
    int timeout_ms;                 /* RGPU_TIMEOUT: silence before giving up; -1: never */
    char spec[256];                 /* the server, for messages */
    struct waiter *waiters;
    /* Frames are read through a read-ahead buffer, by whichever thread
     * holds the reader role. */
    struct rgpu_reader rd;
    atomic_uint_fast64_t next_serial;
    atomic_uint next_tid;
    atomic_ulong frames_heard;      /* frames read from the server, keepalives included */
    struct rgpu_server_info info;
} S = {
    .once = PTHREAD_ONCE_INIT,
    .fd = -1,
    .send_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
};

struct thread_state {
    uint32_t tid;       /* our name for this thread on the server */
    int last_error;     /* cudart's per-thread last error */
    int device_known;   /* device: this thread's current device, as last set */
    int device;
    uint64_t ctx;       /* this thread's current context as last seen, if not 0 */
    unsigned ctx_generation;    /* ... valid while contexts_generation is this */
};
static _Thread_local struct thread_state T;

static uint32_t thread_id(void)
{
    if (!T.tid)
        T.tid = atomic_fetch_add(&S.next_tid, 1) + 1;
    return T.tid;
}

/* ---- sending: small requests that do not wait go out in batches --------------- */

/* A launch is a frame of about a hundred bytes; one write per launch costs
 * more than the launch (and, behind a proxy or a real network, a packet
 * each).  So a small request that does not wait joins a batch, which is
 * written when a request that waits (or a large one) is sent, when it
 * reaches BATCH_FLUSH bytes, or BATCH_US after its first request by a
 * flusher thread, so that work reaches the GPU even while the program
 * computes on the CPU.  The batch lives under S.send_lock, so frames keep
 * their order whoever writes them.  RGPU_BATCH_US=0 writes each at once. */
#define BATCH_FRAME_MAX 4096
#define BATCH_FLUSH (64u << 10)

static struct {
    char *buf;
    size_t len, cap;
    long delay_ns;              /* -1: not read yet; 0: no batching */
    int flusher;                /* the flusher thread runs */
    pthread_cond_t filled;      /* the batch became non-empty; with S.send_lock */
} B = { .delay_ns = -1, .filled = PTHREAD_COND_INITIALIZER };

static void connection_lost(int err);

/* What a sender last saw of the server (with S.send_lock held). */
static struct {
    int fd;
    unsigned long heard;
    int unread;
} life;

/* Whether rgpud showed life since the last call: a frame read by any
 * thread, or bytes waiting that no thread reads yet (the keepalives a
 * session sends while it runs a long request and reads nothing of ours). */
static int server_alive(void *arg)
{
    unsigned long heard = atomic_load(&S.frames_heard);
    int unread = 0;
    (void)arg;
    ioctl(life.fd, FIONREAD, &unread);
    int alive = heard != life.heard || unread != life.unread;
    life.heard = heard;
    life.unread = unread;
    return alive;
}

/* Sends wait for room in the socket as long as the server shows life, and
 * give up after RGPU_TIMEOUT of silence with no room, as replies do: a
 * frozen session takes nothing and says nothing. */
static struct rgpu_send_limit send_limit(int fd)
{
    life.fd = fd;
    return (struct rgpu_send_limit){ .idle_ms = S.timeout_ms, .alive = server_alive };
}

/* With S.send_lock held: write the batch; -1 on a write error. */
static int flush_batch(int fd)
{
    struct rgpu_send_limit lim = send_limit(fd);
    if (B.len && rgpu_write_raw_limited(fd, B.buf, B.len, &lim) < 0)
        return -1;
    B.len = 0;
    return 0;
}

static void *flusher_main(void *arg)
{
    struct timespec delay = { 0, B.delay_ns };
    (void)arg;
    pthread_mutex_lock(&S.send_lock);
    for (;;) {
        while (!B.len)
            pthread_cond_wait(&B.filled, &S.send_lock);
        pthread_mutex_unlock(&S.send_lock);
        nanosleep(&delay, NULL);
        pthread_mutex_lock(&S.send_lock);
        if (S.fd >= 0 && !S.broken && flush_batch(S.fd) < 0) {
            int err = errno;
            pthread_mutex_unlock(&S.send_lock);
            connection_lost(err);
            pthread_mutex_lock(&S.send_lock);
            B.len = 0;
        }
    }
    return NULL;
}

/* An environment variable holding a whole number from min to max; dflt
 * when unset, and (with a warning) when it holds anything else. */
static unsigned long env_number(const char *name, unsigned long dflt, unsigned long min,
                                unsigned long max)
{
    const char *e = getenv(name);
    char *end;
    if (!e || !*e)
        return dflt;
    unsigned long v = strtoul(e, &end, 10);
    if (*end || *e == '-' || v < min || v > max) {
        rgpu_warn("%s=%s: expected a number from %lu to %lu; using %lu", name, e, min, max,
                  dflt);
        return dflt;
    }
    return v;
}

static long batch_delay_ns(void)
{
    if (B.delay_ns < 0)
        B.delay_ns = (long)env_number("RGPU_BATCH_US", 200, 0, 1000000) * 1000;
    return B.delay_ns;
}

/* With S.send_lock held: add one frame to the batch.  -1 when it cannot
 * (no memory, no flusher): the caller sends it at once. */
static int batch_add(const msgpack_sbuffer *buf, const void *payload, size_t plen)
{
    size_t need = 4 + buf->size + plen;
    if (B.len + need > B.cap) {
        size_t cap = B.cap ? B.cap : BATCH_FLUSH + BATCH_FRAME_MAX;
        while (cap < B.len + need)
            cap *= 2;
        char *n = realloc(B.buf, cap);
        if (!n)
            return -1;
        B.buf = n;
        B.cap = cap;
    }
    if (!B.flusher) {
        pthread_t t;
        if (pthread_create(&t, NULL, flusher_main, NULL) != 0)
            return -1;
        pthread_detach(t);
        B.flusher = 1;
    }
    uint32_t be = htonl((uint32_t)(buf->size + plen));
    memcpy(B.buf + B.len, &be, 4);
    memcpy(B.buf + B.len + 4, buf->data, buf->size);
    if (plen)
        memcpy(B.buf + B.len + 4 + buf->size, payload, plen);
    if (!B.len)
        pthread_cond_signal(&B.filled);
    B.len += need;
    return 0;
}

/* Send one request's frame: batched when it is small and waits for
 * nothing, else after whatever is batched, in one write. */
static int send_packed(int fd, const msgpack_sbuffer *buf, const void *payload, size_t plen,
                       int noreply)
{
    struct iovec iov[2] = { { buf->data, buf->size }, { (void *)payload, plen } };
    int rc;
    pthread_mutex_lock(&S.send_lock);
    struct rgpu_send_limit lim = send_limit(fd);
    if (noreply && 4 + buf->size + plen <= BATCH_FRAME_MAX && batch_delay_ns() > 0 &&
        batch_add(buf, payload, plen) == 0) {
        rc = B.len >= BATCH_FLUSH ? flush_batch(fd) : 0;
    } else {
        rc = rgpu_write_frame_after_limited(fd, B.buf, B.len, iov, payload && plen ? 2 : 1,
                                            &lim);
        if (rc == 0)
            B.len = 0;
    }
    pthread_mutex_unlock(&S.send_lock);
    return rc;
}

/* ---- libraries and their digests ------------------------------------------- */

/* The libraries of this process, registered by their stubs' constructors:
 * their procedure-table digests go in the hello.  One loaded after the
 * session started is checked with the server then (rgpu_late_lib). */
static struct {
    pthread_mutex_t lock;
    const struct rgpu_lib *libs[RGPU_HELLO_MAX_LIBS];
    int n;
} L = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void check_late_lib(const struct rgpu_lib *lib);

void rgpu_register_lib(const struct rgpu_lib *lib)
{
    int late = 0;
    pthread_mutex_lock(&L.lock);
    int known = 0;
    for (int i = 0; i < L.n; i++)
        known |= L.libs[i] == lib;
    if (!known && L.n < RGPU_HELLO_MAX_LIBS) {
        L.libs[L.n++] = lib;
        late = atomic_load(&S.connected);
    }
    pthread_mutex_unlock(&L.lock);
    if (late)
        check_late_lib(lib);
}

/* The soname of the stub holding lib: the file it was loaded from
 * (libcudart.so.12 and .13 hold the same table, rgpu_cudart_lib), or the
 * table's own soname when that file is named otherwise. */
static const char *stub_soname(const struct rgpu_lib *lib)
{
    Dl_info info;
    if (!dladdr(lib, &info) || !info.dli_fname)
        return lib->soname;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return rgpu_soname_major(base) >= 0 && strncmp(base, "lib", 3) == 0 ? base : lib->soname;
}

/* The server's library of this name, as its welcome listed it, or NULL. */
static const struct rgpu_lib_version *server_lib(const char *name)
{
    for (int i = 0; i < S.info.nlibs; i++)
        if (strcmp(S.info.libs[i].name, name) == 0)
            return &S.info.libs[i];
    return NULL;
}

static int session(void);

int rgpu_server_lib_version(const char *lib)
{
    if (session() < 0)
        return 0;
    const struct rgpu_lib_version *theirs = server_lib(lib);
    return theirs && theirs->version > 0 ? theirs->version : 0;
}

/* A library of another major than the server's is served by the
 * server's, and one newer than the server's of its major by that: say
 * so once, at connection (docs/cuda12.md). */
static void note_other_versions(void)
{
    pthread_mutex_lock(&L.lock);
    for (int i = 0; i < L.n; i++) {
        const struct rgpu_lib *lib = L.libs[i];
        const char *mine = stub_soname(lib);
        const struct rgpu_lib_version *theirs = server_lib(lib->name);
        if (!theirs)
            continue;
        if (rgpu_soname_major(mine) != rgpu_soname_major(theirs->soname))
            rgpu_info("%s is served by the server's %s (version %d): functions whose "
                      "prototypes differ between the two are refused", mine, theirs->soname,
                      theirs->version);
        else if (lib->version && theirs->version > 0 && lib->version > theirs->version)
            rgpu_info("%s (version %d) is served by the server's %s, version %d: what came "
                      "after it is refused at the call", mine, lib->version, theirs->soname,
                      theirs->version);
    }
    pthread_mutex_unlock(&L.lock);
}

/* CUDA_VISIBLE_DEVICES narrows the server's GPUs as natively it narrows a
 * host's: the session applies it before its driver starts, so it travels
 * in the hello, read when the process first needs the server, as the
 * driver reads it at cuInit. */
static void hello_visible(struct rgpu_visible *v)
{
    const char *e = getenv("CUDA_VISIBLE_DEVICES");
    v->set = e != NULL;
    if (!e)
        return;
    if (strlen(e) >= sizeof v->list)
        rgpu_warn("CUDA_VISIBLE_DEVICES is longer than %zu characters: the rest is left out",
                  sizeof v->list - 1);
    if (strstr(e, "MIG-"))
        rgpu_warn("CUDA_VISIBLE_DEVICES names a MIG instance: rgpud serves whole GPUs, so "
                  "that entry names none and ends the list (name the GPU: GPU-..., or its "
                  "index)");
    snprintf(v->list, sizeof v->list, "%s", e);
}

/* Hello / welcome: who we are, what our tables are, and a key if the
 * server asks for one (common/rgpu_hello.h); learn the server's CUDA. */
static int handshake(int fd, const struct rgpu_addr *addr, const char *spec)
{
    struct rgpu_hello h;
    struct rgpu_welcome w;
    char why[512], how[256];

    memset(&h, 0, sizeof h);
    pthread_mutex_lock(&L.lock);
    /* The client core's own procedures (the fence, unreported errors)
     * first: every session uses them. */
    rgpu_hello_add_lib(&h, &rgpu_rgpu_lib, NULL);
    for (int i = 0; i < L.n; i++)
        rgpu_hello_add_lib(&h, L.libs[i], stub_soname(L.libs[i]));
    pthread_mutex_unlock(&L.lock);
    hello_visible(&h.visible);
    int rc = rgpu_hs_client(fd, addr->kind == RGPU_ADDR_TCP, &h, &w, how, sizeof how, why,
                            sizeof why);
    if (rc < 0) {
        rgpu_error("rgpud at %s: %s", spec, why);
        return -1;
    }
    if (w.status != RGPU_OK) {
        rgpu_error("rgpud at %s refused the session: %s%s%s", spec,
                   rgpu_status_name(w.status), w.message[0] ? ": " : "", w.message);
        return -1;
    }
    S.info.runtime_version = w.runtime_version;
    S.info.driver_version = w.driver_version;
    snprintf(S.info.name, sizeof S.info.name, "%s", w.server_name);
    S.info.nlibs = w.nlibs;
    memcpy(S.info.libs, w.libs, sizeof w.libs);
    S.info.cuda_devices = w.cuda_devices;
    rgpu_debug("authenticated by %s (server: %s)", how, w.message);
    return 0;
}

/* RGPU_TIMEOUT: seconds of silence from the server (not a single frame,
 * keepalives included) after which a waiting call gives up; 0 waits for
 * ever.  The server sends a keepalive every second while a request of
 * ours runs, so only a dead, frozen or unreachable server stays silent. */
static int timeout_ms_from_env(void)
{
    unsigned long s = env_number("RGPU_TIMEOUT", 60, 0, 86400 * 365);
    return s == 0 ? -1 : (int)(s * 1000);
}

/* Bounds on waiting for the server: a read that gets nothing for
 * RGPU_TIMEOUT (SO_RCVTIMEO: the hello and every reply wait), and TCP
 * keepalive, so that a server host that vanished (no FIN, no RST) is
 * noticed on an idle connection too (fails harmlessly on a Unix socket). */
static void bound_waits(int fd)
{
    struct timeval tv = { S.timeout_ms / 1000, (S.timeout_ms % 1000) * 1000 };
    int one = 1, idle = 60, intvl = 10, cnt = 6;
    if (S.timeout_ms > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    rgpu_unix_buffers(fd);      /* host-to-device copies write from here */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static void report_unreported(void);

static void connect_once(void)
{
    const char *spec = getenv("RGPU_SERVER");
    struct rgpu_addr addr;
    char err[512];

    if (!spec || !*spec)
        spec = RGPU_DEFAULT_SERVER;
    rgpu_log_init("rgpu", getenv("RGPU_LOG"));
    S.spin_ns = rgpu_spin_ns(getenv("RGPU_SPIN_US"));
    S.timeout_ms = timeout_ms_from_env();
    snprintf(S.spec, sizeof S.spec, "%s", spec);
    if (rgpu_addr_parse(spec, &addr, err, sizeof err) < 0) {
        rgpu_error("RGPU_SERVER: %s", err);
        S.broken = 1;
        return;
    }
    int fd = rgpu_addr_dial(&addr, -1, err, sizeof err);
    if (fd < 0) {
        rgpu_error("cannot reach rgpud at %s: %s (is rgpud running? set RGPU_SERVER to its "
                   "address: unix:/PATH, HOST:PORT or [IPV6]:PORT)", spec, err);
        S.broken = 1;
        return;
    }
    bound_waits(fd);
    if (handshake(fd, &addr, spec) < 0) {
        close(fd);
        S.broken = 1;
        return;
    }
    rgpu_reader_init(&S.rd, fd);
    S.fd = fd;
    atomic_store(&S.connected, 1);
    atexit(report_unreported);
    rgpu_info("connected to %s (server %s, CUDA runtime %d, driver %d)", spec, S.info.name,
              S.info.runtime_version, S.info.driver_version);
    note_other_versions();
}

static int session(void)
{
    pthread_once(&S.once, connect_once);
    if (S.forked == 1) {
        S.forked = 2;
        rgpu_error("this process was forked from one connected to rgpud: CUDA cannot be used "
                   "here, as with a local GPU (start children with spawn, or fork before the "
                   "first CUDA call)");
    }
    return S.broken ? -1 : S.fd;
}

/* A forked child shares its parent's connection: a byte written here would
 * corrupt the parent's session.  Like CUDA, which refuses a context
 * inherited through fork, the child gets none; it never touches the
 * socket, only closes its copy.  The locks may have been held by parent
 * threads that do not exist here: made anew. */
static void forget_session_in_child(void)
{
    if (!atomic_load(&S.connected))
        return;             /* nothing inherited: the child may connect itself */
    if (S.fd >= 0)
        close(S.fd);
    S.fd = -1;
    S.broken = 1;
    S.forked = 1;
    S.waiters = NULL;
    S.reader_active = 0;
    B.len = 0;              /* the parent's batch: its to send, not ours */
    B.flusher = 0;
    pthread_mutex_init(&S.send_lock, NULL);
    pthread_mutex_init(&S.lock, NULL);
    pthread_cond_init(&S.cond, NULL);
}

__attribute__((constructor)) static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_session_in_child);
}

int rgpu_session_started(void)
{
    return atomic_load(&S.connected) && !S.broken;
}

int rgpu_server_devices(void)
{
    return atomic_load(&S.connected) ? S.info.cuda_devices : -1;
}

/* ---- replies: whoever waits, reads ----------------------------------------- */

/* Called with S.lock held and the reader role taken: deliver a frame. */
static void deliver(char *frame, size_t len)
{
    msgpack_zone zone;
    msgpack_object root;
    uint64_t serial = 0;

    msgpack_zone_init(&zone, 256);
    int unpacked = rgpu_unpack_frame(frame, len, &zone, &root) == 0 &&
                   root.type == MSGPACK_OBJECT_ARRAY && root.via.array.size >= 1;
    if (unpacked && root.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        root.via.array.ptr[0].via.u64 == RGPU_MSG_KEEPALIVE) {
        free(frame);                        /* it did its work by arriving */
        frame = NULL;
    } else if (unpacked && root.via.array.size < 2) {
        ;                                   /* nothing we know: refused below */
    } else if (unpacked && root.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
               root.via.array.ptr[0].via.u64 == RGPU_MSG_CALLBACK) {
        /* A stream reached a host function: the callback thread runs it. */
        rgpu_callback_arrived(&root);
        free(frame);
        frame = NULL;
    } else if (unpacked && root.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        root.via.array.ptr[0].via.u64 == RGPU_MSG_LOG) {
        rgpu_liblog_queue(frame, len);      /* delivered once a reply is in */
        frame = NULL;
    } else if (unpacked && rgpu_obj_u64(&root.via.array.ptr[1], &serial) == 0) {
        /* Only the serial is needed here; the waiter decodes the rest. */
        for (struct waiter *w = S.waiters; w; w = w->next) {
            if (w->serial == serial) {
                w->frame = frame;
                w->len = len;
                w->done = 1;
                frame = NULL;
                break;
            }
        }
    }
    msgpack_zone_destroy(&zone);
    if (frame) {
        rgpu_error("reply for no pending call (serial %llu): closing the session",
                   (unsigned long long)serial);
        free(frame);
        S.broken = 1;
    }
}

static void fail_all_waiters(void)
{
    for (struct waiter *w = S.waiters; w; w = w->next)
        w->done = 1;
}

/* A write failed: part of a frame may have gone, so nothing more can be
 * sent on this connection.  It is shut down (a session that reads again
 * sees its end, the reader of another thread wakes), every waiter is
 * woken, and every later call fails at once with the library's
 * "unavailable" error. */
static void connection_lost(int err)
{
    if (err == ETIMEDOUT)
        rgpu_error("rgpud at %s took nothing of a request and sent nothing for %d s: giving "
                   "up (RGPU_TIMEOUT)", S.spec, S.timeout_ms / 1000);
    else
        rgpu_error("cannot send to rgpud at %s: %s", S.spec, strerror(err));
    pthread_mutex_lock(&S.lock);
    S.broken = 1;
    fail_all_waiters();
    pthread_cond_broadcast(&S.cond);
    pthread_mutex_unlock(&S.lock);
    if (S.fd >= 0)
        shutdown(S.fd, SHUT_RDWR);
}

/* A data frame's head as the server writes it: [DATA, serial, bin32]. */
#define DATA_HEAD_MAX 32

/* An output frame, read whole: written out here (*frame NULL), by the
 * reader, before any later frame (the reply of the synchronise that made
 * it) is looked at.  -1 with errno EPROTO, logged, when it is malformed. */
static int output_frame(char *buf, size_t n, char **frame)
{
    int rc = rgpu_output_frame(buf, n);
    free(buf);
    *frame = NULL;
    if (rc < 0) {
        rgpu_error("rgpud sent a malformed output frame: closing the session");
        errno = EPROTO;
    }
    return rc;
}

/* Read the next frame: a data frame lands in its waiter's sink and an
 * output frame is written out (*frame NULL both), any other comes back
 * malloc'd.  Called with the reader role and without S.lock.  -1 with
 * errno (EPROTO: a data frame nobody asked for, or a bad output frame,
 * logged). */
static int read_frame(char **frame, size_t *len)
{
    size_t n, head = 0;
    long deadline;
    const char *p;
    char copy[DATA_HEAD_MAX];
    msgpack_zone zone;
    msgpack_object root;
    int unpacked = -1;

    *frame = NULL;
    if (rgpu_reader_begin(&S.rd, &n, S.timeout_ms, &deadline) < 0)
        return -1;
    size_t peek = n < DATA_HEAD_MAX ? n : DATA_HEAD_MAX;
    if (rgpu_reader_peek(&S.rd, peek, deadline, &p) < 0)
        return -1;
    if (peek >= 2 && (unsigned char)p[0] == 0x93 && p[1] == RGPU_MSG_DATA) {
        msgpack_zone_init(&zone, 256);
        unpacked = rgpu_unpack_frame_head(p, peek, n, copy, &head, &zone, &root);
        if (!head)
            msgpack_zone_destroy(&zone);
    }
    if (!head) {        /* any frame but a data frame: read whole */
        int output = peek >= 2 && (unsigned char)p[0] == 0x93 && p[1] == RGPU_MSG_OUTPUT;
        char *buf = malloc(n);
        if (!buf)
            return -1;
        if (rgpu_reader_read(&S.rd, buf, n, deadline) < 0) {
            free(buf);
            return -1;
        }
        if (output)
            return output_frame(buf, n, frame);
        *frame = buf;
        *len = n;
        return 0;
    }
    /* [DATA, serial, bin]: whose copy, and is it of the size asked for? */
    uint64_t serial = 0;
    size_t body = n - head;
    struct waiter *w = NULL;
    int ok = unpacked == 0 && root.type == MSGPACK_OBJECT_ARRAY && root.via.array.size == 3 &&
             rgpu_obj_u64(&root.via.array.ptr[1], &serial) == 0;
    msgpack_zone_destroy(&zone);
    pthread_mutex_lock(&S.lock);
    for (w = S.waiters; ok && w && w->serial != serial; w = w->next)
        ;
    ok = ok && w && w->sink && !w->sunk && !w->done && w->sink_len == body;
    if (ok)
        w->filling = 1;
    pthread_mutex_unlock(&S.lock);
    if (!ok) {
        rgpu_error("rgpud sent %zu bytes (serial %llu) that no waiting copy asked for: "
                   "closing the session", body, (unsigned long long)serial);
        errno = EPROTO;
        return -1;
    }
    int rc = rgpu_reader_read(&S.rd, copy, head, deadline) < 0 ||
                     rgpu_reader_read(&S.rd, w->sink, body, deadline) < 0
                 ? -1
                 : 0;
    int err = errno;
    pthread_mutex_lock(&S.lock);
    w->filling = 0;
    w->sunk = rc == 0;
    pthread_mutex_unlock(&S.lock);
    errno = err;
    return rc;
}

/* With S.lock held and the reader role free: take it, read one frame and
 * deliver it; S.lock is held again on return, the role given back. */
static void read_one(void)
{
    S.reader_active = 1;
    pthread_mutex_unlock(&S.lock);
    char *frame = NULL;
    size_t len = 0;
    if (!rgpu_reader_pending(&S.rd))
        rgpu_spin_until_readable(S.fd, S.spin_ns);
    int rc = read_frame(&frame, &len);
    int err = errno;
    if (rc == 0)
        atomic_fetch_add(&S.frames_heard, 1);
    pthread_mutex_lock(&S.lock);
    S.reader_active = 0;
    if (rc < 0 && err == ETIMEDOUT) {
        rgpu_error("rgpud at %s sent nothing for %d s: giving up (RGPU_TIMEOUT)", S.spec,
                   S.timeout_ms / 1000);
        S.broken = 1;
        fail_all_waiters();
    } else if (rc < 0) {
        if (err != EPROTO && !S.broken)     /* not a send's failure, already said */
            rgpu_error("connection to rgpud lost: %s", strerror(err));
        S.broken = 1;
        fail_all_waiters();
    } else if (frame) {
        deliver(frame, len);
    }
    pthread_cond_broadcast(&S.cond);
}

/* Whether the session's socket has bytes to read within ms. */
static int readable_within(int ms)
{
    struct pollfd pfd = { .fd = S.fd, .events = POLLIN };
    return rgpu_reader_pending(&S.rd) || poll(&pfd, 1, ms) > 0;
}

int rgpu_core_listen(int (*until)(void))
{
    const struct timespec tick = { 0, 100 * 1000000L };
    pthread_mutex_lock(&S.lock);
    while (!until() && !S.broken) {
        if (S.fd < 0) {
            /* The session is being set up by the call that enqueued. */
            pthread_mutex_unlock(&S.lock);
            nanosleep(&tick, NULL);
            pthread_mutex_lock(&S.lock);
            continue;
        }
        if (S.reader_active) {
            /* The reader broadcasts after each frame; the tick covers a
             * condition that changed without a frame. */
            struct timespec at;
            clock_gettime(CLOCK_REALTIME, &at);
            at.tv_nsec += tick.tv_nsec;
            if (at.tv_nsec >= 1000000000L) {
                at.tv_sec++;
                at.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&S.cond, &S.lock, &at);
            continue;
        }
        /* Read only what is there: between frames this thread waits for
         * nothing in particular, so the server's silence is no timeout. */
        pthread_mutex_unlock(&S.lock);
        int ready = readable_within(100);
        pthread_mutex_lock(&S.lock);
        if (ready && !S.reader_active && !S.broken)
            read_one();
    }
    int rc = S.broken ? -1 : 0;
    pthread_mutex_unlock(&S.lock);
    return rc;
}

int rgpu_core_send_frame(const msgpack_sbuffer *buf)
{
    int fd = session();
    if (fd < 0)
        return -1;
    if (send_packed(fd, buf, NULL, 0, 0) < 0) {
        connection_lost(errno);
        return -1;
    }
    return 0;
}

static int wait_reply(struct waiter *me)
{
    pthread_mutex_lock(&S.lock);
    while (!me->done && !S.broken) {
        if (S.reader_active) {
            pthread_cond_wait(&S.cond, &S.lock);
            continue;
        }
        read_one();
    }
    /* A reader may still be writing into this waiter's sink (the session
     * broke meanwhile): the caller's buffer is not to be left to it. */
    while (me->filling)
        pthread_cond_wait(&S.cond, &S.lock);
    /* unlink */
    for (struct waiter **pp = &S.waiters; *pp; pp = &(*pp)->next) {
        if (*pp == me) {
            *pp = me->next;
            break;
        }
    }
    pthread_mutex_unlock(&S.lock);
    return me->frame ? 0 : -1;
}

/* ---- requests --------------------------------------------------------------- */

void rgpu_req_begin(struct rgpu_req *req, uint32_t proc_id, unsigned flags)
{
    /* What the program wrote into shared memory goes ahead of this
     * request (rgpu_mapped.c), before its serial is taken. */
    if (rgpu_mapped_active())
        rgpu_mapped_before_request(proc_id);
    msgpack_sbuffer_init(&req->buf);
    msgpack_packer_init(&req->pk, &req->buf, msgpack_sbuffer_write);
    req->serial = atomic_fetch_add(&S.next_serial, 1) + 1;
    req->payload = NULL;
    req->payload_len = 0;
    req->sink = NULL;
    req->sink_len = 0;
    req->flags = flags;
    req->proc_id = proc_id;
    msgpack_pack_array(&req->pk, 6);
    msgpack_pack_int(&req->pk, RGPU_MSG_CALL);
    msgpack_pack_uint64(&req->pk, req->serial);
    msgpack_pack_uint32(&req->pk, proc_id);
    msgpack_pack_uint32(&req->pk, thread_id());
    msgpack_pack_uint32(&req->pk, flags);
}

void rgpu_req_payload(struct rgpu_req *req, const void *data, size_t len)
{
    msgpack_pack_bin(&req->pk, len);
    req->payload = data;
    req->payload_len = len;
}

void rgpu_req_sink(struct rgpu_req *req, void *dst, size_t len)
{
    req->sink = dst;
    req->sink_len = len;
}

static int parse_reply(struct rgpu_reply *r, size_t len)
{
    msgpack_object root;
    int64_t t, a, d;
    if (rgpu_unpack_frame(r->frame, len, &r->zone, &root) < 0)
        return RGPU_EPROTO;
    if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size != 6)
        return RGPU_EPROTO;
    const msgpack_object *o = root.via.array.ptr;
    if (rgpu_obj_i64(&o[2], &t) < 0 || rgpu_obj_i64(&o[3], &a) < 0 || rgpu_obj_i64(&o[4], &d) < 0)
        return RGPU_EPROTO;
    r->transport = (int)t;
    r->api = (int)a;
    r->deferred = (int)d;
    r->outs = o[5];
    return RGPU_OK;
}

struct rgpu_ticket {
    struct waiter w;
};

/* ---- call statistics (RGPU_STATS=1): what a program costs in round trips -------- */

#define STATS_SLOTS 1024

static struct stat_slot {
    uint32_t id;
    const char *name;
    unsigned long long waited, unwaited;
} stats[STATS_SLOTS];
static int stats_on = -1;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

static int by_calls(const void *a, const void *b)
{
    const struct stat_slot *x = a, *y = b;
    unsigned long long nx = x->waited * 1000 + x->unwaited, ny = y->waited * 1000 + y->unwaited;
    return nx < ny ? 1 : nx > ny ? -1 : 0;      /* waiting calls weigh most */
}

static void print_stats(void)
{
    unsigned long long waited = 0, unwaited = 0;
    pthread_mutex_lock(&stats_lock);
    qsort(stats, STATS_SLOTS, sizeof stats[0], by_calls);
    for (int i = 0; i < STATS_SLOTS; i++) {
        waited += stats[i].waited;
        unwaited += stats[i].unwaited;
    }
    fprintf(stderr, "rgpu: %llu calls waited for a reply, %llu did not\n", waited, unwaited);
    fprintf(stderr, "rgpu: %10s %10s  procedure\n", "waited", "unwaited");
    for (int i = 0; i < STATS_SLOTS && i < 40 && (stats[i].waited || stats[i].unwaited); i++)
        fprintf(stderr, "rgpu: %10llu %10llu  %s\n", stats[i].waited, stats[i].unwaited,
                stats[i].name ? stats[i].name : "?");
    pthread_mutex_unlock(&stats_lock);
}

/* Procedures are named for RGPU_STATS=1 and for RGPU_LOG=trace. */
static int stats_enabled(void)
{
    if (stats_on < 0) {
        const char *e = getenv("RGPU_STATS");
        int table = e && *e && strcmp(e, "0") != 0;
        rgpu_log_init("rgpu", getenv("RGPU_LOG"));
        pthread_mutex_lock(&stats_lock);
        if (stats_on < 0) {
            stats_on = table || rgpu_log_enabled(RGPU_LOG_TRACE);
            if (table)
                atexit(print_stats);
        }
        pthread_mutex_unlock(&stats_lock);
    }
    return stats_on;
}

/* The slot of a procedure id (open addressing), made on first use; called
 * with stats_lock held. */
static struct stat_slot *slot_of(uint32_t id)
{
    for (uint32_t i = 0; i < STATS_SLOTS; i++) {
        struct stat_slot *s = &stats[(id + i) % STATS_SLOTS];
        if (s->id == id)
            return s;
        if (!s->id) {
            s->id = id;
            return s;
        }
    }
    return NULL;
}

/* Totals, always kept (two atomic adds): a benchmark reads them between
 * steps through rgpu_stats_totals. */
static atomic_ullong total_waited, total_unwaited;

RGPU_EXPORT void rgpu_stats_totals(unsigned long long *waited, unsigned long long *unwaited)
{
    if (waited)
        *waited = atomic_load(&total_waited);
    if (unwaited)
        *unwaited = atomic_load(&total_unwaited);
}

static void count_call(uint32_t id, int waits)
{
    atomic_fetch_add_explicit(waits ? &total_waited : &total_unwaited, 1, memory_order_relaxed);
    if (!stats_enabled())
        return;
    pthread_mutex_lock(&stats_lock);
    struct stat_slot *s = slot_of(id);
    if (s && waits)
        s->waited++;
    else if (s)
        s->unwaited++;
    const char *name = s && s->name ? s->name : "?";
    pthread_mutex_unlock(&stats_lock);
    rgpu_trace("%s %s", waits ? "waits:" : "sent: ", name);
}

void rgpu_stats_name(uint32_t id, const char *name)
{
    if (!stats_enabled())
        return;
    pthread_mutex_lock(&stats_lock);
    struct stat_slot *s = slot_of(id);
    if (s && !s->name)
        s->name = name;
    pthread_mutex_unlock(&stats_lock);
}

static void after_unwaited_send(size_t bytes);

/* Send a request; for one that wants a reply, register its waiter first
 * (the reply may arrive at once) and hand back a ticket.  counted: whether
 * RGPU_STATS counts it (fences are not calls of the program). */
static int post(struct rgpu_req *req, struct rgpu_ticket **ticket, int counted)
{
    int fd = session(), rc;
    struct rgpu_ticket *t = NULL;
    size_t bytes = req->buf.size + req->payload_len;
    int noreply = req->flags & RGPU_CALL_NOREPLY;

    *ticket = NULL;
    if (rgpu_in_callback()) {
        /* CUDA forbids CUDA calls in host functions: answered at once, as
         * the library may (the server's stream waits for this thread). */
        msgpack_sbuffer_destroy(&req->buf);
        return RGPU_ENOTPERMITTED;
    }
    if (fd < 0) {
        msgpack_sbuffer_destroy(&req->buf);
        return RGPU_EIO;
    }
    /* A payload that streams is read on the server after the stream's
     * earlier work is done, and holds the socket meanwhile: no host
     * function may be waiting for an acknowledgement behind it. */
    if (req->payload_len >= RGPU_STREAM_MIN)
        rgpu_callbacks_wait_idle();
    /* Too large for one frame: refuse this call, keep the session. */
    if (counted)
        count_call(req->proc_id, !noreply);
    if (req->buf.size + req->payload_len > RGPU_FRAME_MAX) {
        rgpu_error("a request of %zu bytes exceeds the protocol's frame limit of %u",
                   req->buf.size + req->payload_len, RGPU_FRAME_MAX);
        msgpack_sbuffer_destroy(&req->buf);
        return RGPU_ETOOBIG;
    }
    if (!(req->flags & RGPU_CALL_NOREPLY)) {
        t = calloc(1, sizeof *t);
        if (!t) {
            msgpack_sbuffer_destroy(&req->buf);
            return RGPU_ENOMEM;
        }
        t->w.serial = req->serial;
        t->w.sink = req->sink;
        t->w.sink_len = req->sink_len;
        pthread_mutex_lock(&S.lock);
        t->w.next = S.waiters;
        S.waiters = &t->w;
        pthread_mutex_unlock(&S.lock);
    }
    rc = send_packed(fd, &req->buf, req->payload, req->payload_len, noreply);
    msgpack_sbuffer_destroy(&req->buf);
    if (rc < 0)
        connection_lost(errno);
    *ticket = t;
    if (rc == 0 && noreply)
        after_unwaited_send(bytes);
    return rc < 0 && !t ? RGPU_EIO : RGPU_OK;
}

int rgpu_req_post(struct rgpu_req *req, struct rgpu_ticket **ticket)
{
    return post(req, ticket, 1);
}

/* ---- how far the client runs ahead ------------------------------------------ */

/* Requests sent without waiting have returned to the program before the
 * server ran them.  Every window/2 of them (or of their bytes) a fence
 * request goes out, and the previous fence's reply is collected: the
 * client is then never more than about a window ahead of the server,
 * and waits (back-pressure) only when it would be.  The server's own
 * queue and the socket buffers bound memory on both sides besides
 * (daemon/session.c).  RGPU_AHEAD_CALLS and RGPU_AHEAD_MB set the window. */
static struct {
    pthread_mutex_t lock;
    unsigned long calls, window_calls;
    size_t bytes, window_bytes;
    struct rgpu_ticket *fence;
    int ever;                   /* any request went without waiting */
} A = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void window_init(void)
{
    A.window_calls = env_number("RGPU_AHEAD_CALLS", 8192, 1, 1ul << 24);
    A.window_bytes = (size_t)env_number("RGPU_AHEAD_MB", 256, 1, 1ul << 16) << 20;
}

/* A fence: rgpu_fence of rgpu's own library (codegen/rgpu_own.h), a
 * waiting request whose deferred status no program call reads; its reply
 * says every request before it has run.  Sent apart from the generated
 * call: no call of the program, it is not counted. */
static void fence_begin(struct rgpu_req *req)
{
    rgpu_req_begin(req, RGPU_RGPU_rgpu_fence->id, 0);
    (void)rgpu_encode_args(&req->pk, RGPU_RGPU_rgpu_fence, NULL, NULL);
}

/* A fence posted without waiting (and not counted as a call). */
static struct rgpu_ticket *post_fence(void)
{
    struct rgpu_req req;
    struct rgpu_ticket *t = NULL;
    fence_begin(&req);
    return post(&req, &t, 0) == RGPU_OK ? t : NULL;
}

RGPU_EXPORT int rgpu_round_trip(void)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    fence_begin(&req);
    rgpu_stats_name(req.proc_id, RGPU_RGPU_rgpu_fence->name);
    int rc = rgpu_req_send(&req, &reply);
    if (rc != RGPU_OK)
        return rc;
    rc = reply.transport;
    rgpu_reply_free(&reply);
    return rc;
}

static void after_unwaited_send(size_t bytes)
{
    struct rgpu_ticket *old = NULL;
    pthread_mutex_lock(&A.lock);
    if (!A.window_calls)
        window_init();
    A.ever = 1;
    A.calls++;
    A.bytes += bytes;
    if (A.calls >= A.window_calls / 2 || A.bytes >= A.window_bytes / 2) {
        old = A.fence;
        A.fence = post_fence();
        A.calls = 0;
        A.bytes = 0;
    }
    pthread_mutex_unlock(&A.lock);
    if (old) {
        struct rgpu_reply reply;
        if (rgpu_req_wait(old, &reply) == RGPU_OK)
            rgpu_reply_free(&reply);
    }
}

int rgpu_req_wait(struct rgpu_ticket *t, struct rgpu_reply *reply)
{
    int rc = RGPU_OK;
    int got = wait_reply(&t->w);
    rgpu_liblog_deliver();      /* what the call logged came before its reply */
    if (got < 0) {
        rc = RGPU_EIO;
    } else {
        memset(reply, 0, sizeof *reply);
        reply->frame = t->w.frame;
        reply->sunk = t->w.sunk ? t->w.sink_len : 0;
        msgpack_zone_init(&reply->zone, 1024);
        if (parse_reply(reply, t->w.len) != RGPU_OK) {
            rgpu_reply_free(reply);
            rc = RGPU_EPROTO;
        }
    }
    free(t);
    return rc;
}

int rgpu_req_send(struct rgpu_req *req, struct rgpu_reply *reply)
{
    struct rgpu_ticket *t;
    int rc = rgpu_req_post(req, &t);
    if (rc != RGPU_OK || !t)
        return rc;
    return rgpu_req_wait(t, reply);
}

void rgpu_reply_free(struct rgpu_reply *reply)
{
    msgpack_zone_destroy(&reply->zone);
    free(reply->frame);
    reply->frame = NULL;
}

/* ---- statuses ----------------------------------------------------------------- */

/* Whether this is the first time a function is named in a log line about
 * the server's libraries (one line per function, as for refused ones). */
static int first_mention(const char *lib, const char *what)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint32_t seen[512];
    static unsigned nseen;
    uint32_t id = rgpu_proc_id(lib, what);
    int first = 1;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < nseen && first; i++)
        first = seen[i] != id;
    if (first && nseen < sizeof seen / sizeof seen[0])
        seen[nseen++] = id;
    pthread_mutex_unlock(&lock);
    return first;
}

/* The server's session has no such function: its library is older, or
 * none was loaded. */
static void say_server_lacks(const struct rgpu_lib *lib, const char *what)
{
    const struct rgpu_lib_version *theirs = server_lib(lib->name);
    if (theirs)
        rgpu_warn("%s: the server's %s (version %d) lacks it (this client's %s is version %d; "
                  "logged once)", what, theirs->soname, theirs->version, stub_soname(lib),
                  lib->version);
    else
        rgpu_warn("%s: the server has no %s (logged once)", what, lib->soname);
}

int rgpu_transport_status(const struct rgpu_lib *lib, const char *what, int transport)
{
    if (transport == RGPU_ENOTPERMITTED) {
        static int logged;
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
            rgpu_warn("%s called from a host function: CUDA forbids it, and rgpu answers "
                      "'not permitted' (logged once)", what);
        int st = strcmp(lib->name, "cudart") == 0 || strcmp(lib->name, "cuda") == 0
                     ? RGPU_NOT_PERMITTED
                     : lib->not_supported;
        return lib->is_runtime ? rgpu_runtime_result(st) : st;
    }
    if (transport == RGPU_ENOSYM) {
        if (first_mention(lib->name, what))
            say_server_lacks(lib, what);
    }
    else if (transport != RGPU_EIO)     /* already reported once */
        rgpu_error("%s: %s", what, rgpu_status_name(transport));
    int status = transport == RGPU_EIO ? lib->unavailable : lib->not_supported;
    return lib->is_runtime ? rgpu_runtime_result(status) : status;
}

/* Errors after which the context is unusable: every later call fails with
 * them (the same numbers in the runtime and the driver): an illegal
 * address (700), a device-side assert (710) and 714-719, from a hardware
 * stack error to a launch failure.  720, a cooperative grid too large,
 * refuses one launch only. */
static int sticky_error;

static int is_sticky(int status)
{
    return status == 700 || status == 710 || (status >= 714 && status <= 719);
}

int rgpu_sticky_error(void)
{
    return __atomic_load_n(&sticky_error, __ATOMIC_RELAXED);
}

int rgpu_reply_status(const struct rgpu_lib *lib, const struct rgpu_reply *reply)
{
    int status = reply->api;
    if (is_sticky(status) || is_sticky(reply->deferred))
        __atomic_store_n(&sticky_error, is_sticky(status) ? status : reply->deferred,
                         __ATOMIC_RELAXED);
    /* An earlier asynchronous call failed: report it now, as CUDA reports
     * an asynchronous error at the next call that waits. */
    if (status == 0 && reply->deferred != 0)
        status = reply->deferred > 0 ? reply->deferred : lib->not_supported;
    return lib->is_runtime ? rgpu_runtime_result(status) : status;
}

/* Scalar policies of the libraries that have them (cuBLAS). */
static struct {
    const struct rgpu_lib *lib;
    const struct rgpu_scalar_policy *pol;
} policies[8];

void rgpu_register_scalar_policy(const struct rgpu_lib *lib, const struct rgpu_scalar_policy *pol)
{
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        if (!policies[i].lib || policies[i].lib == lib) {
            policies[i].pol = pol;
            policies[i].lib = lib;
            return;
        }
    }
}

static const struct rgpu_scalar_policy *policy_of(const struct rgpu_lib *lib)
{
    for (size_t i = 0; i < sizeof policies / sizeof policies[0] && policies[i].lib; i++)
        if (policies[i].lib == lib)
            return policies[i].pol;
    return NULL;
}

/* How a generated call treats its reply. */
enum call_mode {
    AS_DECLARED,    /* an asynchronous procedure may go without waiting */
    WAITING,        /* wait whatever the procedure is */
    UNWAITED,       /* go without waiting (the caller's policy allowed it) */
};

/* Whether this call may go without waiting: an asynchronous procedure
 * that fills no host memory and names only handles this process holds
 * (one it never had must fail at once, as the library would), none of
 * them of another device than the call allows. */
static int goes_unwaited(const struct rgpu_proc *proc, const void *const *argv,
                         const struct rgpu_scalar_policy *pol, enum call_mode mode)
{
    if (mode == UNWAITED)
        return 1;
    return mode == AS_DECLARED && (proc->flags & RGPU_PROC_ASYNC) && rgpu_may_skip_reply() &&
           !rgpu_has_host_outputs(proc, argv, pol) && rgpu_handles_known_in(proc, argv) &&
           rgpu_devices_agree_in(proc, argv);
}

/* The library's status for a failure found on the client. */
static int client_status(const struct rgpu_lib *lib, int status)
{
    return lib->is_runtime ? rgpu_runtime_result(status) : status;
}

/* A function that came with a newer version of its library than the
 * server's (codegen's `since`: a CUDA 13.1 function on a 13.0 host) is
 * refused here, before it is sent, naming both versions once.  A server
 * that cannot say its version decides itself (RGPU_ENOSYM). */
static int newer_than_server(const struct rgpu_lib *lib, const struct rgpu_proc *proc)
{
    if (!proc->since || session() < 0)
        return 0;
    const struct rgpu_lib_version *theirs = server_lib(lib->name);
    if (!theirs || theirs->version <= 0 || (uint32_t)theirs->version >= proc->since)
        return 0;
    if (first_mention(lib->name, proc->name))
        rgpu_warn("%s: the server's %s is version %d, and %s came with version %u: refused "
                  "(run against a server whose %s is %u or newer; logged once)", proc->name,
                  theirs->soname, theirs->version, proc->name, proc->since, lib->name,
                  proc->since);
    return 1;
}

/* Encode a generated call and send it (flags: RGPU_CALL_NOREPLY or 0),
 * its bulk bytes outside the frame buffer: a stream parameter's written
 * from the caller's memory, a sink's read into it (bulk).  RGPU_OK with
 * *ticket (NULL for a call that gets no reply), or a transport status. */
static int send_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                     const void *const *argv, const struct rgpu_scalar_policy *pol,
                     unsigned flags, struct rgpu_bulk *bulk, struct rgpu_ticket **ticket)
{
    struct rgpu_req req;
    *ticket = NULL;
    rgpu_liblog_flush_settings(lib);
    rgpu_req_begin(&req, proc->id, flags);
    rgpu_stats_name(proc->id, proc->name);
    if (rgpu_encode_call(&req.pk, proc, argv, pol, bulk) != RGPU_OK) {
        msgpack_sbuffer_destroy(&req.buf);
        return RGPU_EPROTO;
    }
    if (bulk->payload)
        rgpu_req_payload(&req, bulk->payload, bulk->payload_len);
    if (bulk->sink)
        rgpu_req_sink(&req, bulk->sink, bulk->sink_len);
    return rgpu_req_post(&req, ticket);
}

/* Wait for a sent call's reply and copy its outputs through argv:
 * RGPU_REPLY_READY with *reply to read (and free), or the library's
 * status of a transport failure. */
static int collect_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                        const void *const *argv, const struct rgpu_scalar_policy *pol,
                        const struct rgpu_bulk *bulk, struct rgpu_ticket *ticket,
                        struct rgpu_reply *reply)
{
    int rc = rgpu_req_wait(ticket, reply);
    if (rc != RGPU_OK)
        return rgpu_transport_status(lib, proc->name, rc);
    if (reply->transport != RGPU_OK) {
        rc = reply->transport;
        rgpu_reply_free(reply);
        return rgpu_transport_status(lib, proc->name, rc);
    }
    if (rgpu_decode_call_outs(&reply->outs, proc, argv, pol, bulk, reply->sunk, reply->api) !=
        RGPU_OK) {
        rgpu_reply_free(reply);
        return rgpu_transport_status(lib, proc->name, RGPU_EPROTO);
    }
    return RGPU_REPLY_READY;
}

int rgpu_call_post(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                   const void *const *argv, struct rgpu_inflight *f)
{
    struct rgpu_bulk bulk;
    struct rgpu_ticket *none;
    if (newer_than_server(lib, proc))
        return client_status(lib, lib->not_supported);
    int rc = f ? send_call(lib, proc, argv, policy_of(lib), 0, &f->bulk, &f->ticket)
               : send_call(lib, proc, argv, policy_of(lib), RGPU_CALL_NOREPLY, &bulk, &none);
    if (rc == RGPU_OK && f && !f->ticket)
        rc = RGPU_EIO;
    return rc == RGPU_OK ? 0 : rgpu_transport_status(lib, proc->name, rc);
}

int rgpu_call_finish(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                     const void *const *argv, struct rgpu_inflight *f)
{
    struct rgpu_reply reply;
    int rc = collect_call(lib, proc, argv, policy_of(lib), &f->bulk, f->ticket, &reply);
    f->ticket = NULL;
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(lib, &reply);
    rgpu_reply_free(&reply);
    return rc;
}

static int call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                const void *const *argv_in, enum call_mode mode)
{
    struct rgpu_reply reply;
    struct rgpu_bulk bulk;
    struct rgpu_ticket *ticket;
    const struct rgpu_scalar_policy *pol = policy_of(lib);
    const void *translated[RGPU_MAX_PARAMS];
    uint64_t values[RGPU_MAX_PARAMS];
    const void *const *argv = argv_in;
    int must_wait = 0, by_content = 0;
    unsigned epoch = rgpu_answers_epoch();

    if (newer_than_server(lib, proc))
        return client_status(lib, lib->not_supported);
    if (rgpu_lib_translates(lib) && proc->nparams <= RGPU_MAX_PARAMS) {
        int st = rgpu_translate_args(lib, proc, argv_in, translated, values, &must_wait,
                                     &by_content);
        if (st)
            return client_status(lib, st);
        argv = translated;
    }
    /* Pinned memory named as device memory gets its GPU copy (rgpu_mapped.c). */
    const void *pinned_argv[RGPU_MAX_PARAMS];
    uint64_t pinned_values[RGPU_MAX_PARAMS];
    if (rgpu_ranges_any_pinned() && proc->nparams <= RGPU_MAX_PARAMS &&
        rgpu_mapped_translate_devptrs(lib, proc, argv, pinned_argv, pinned_values))
        argv = pinned_argv;
    int pure = (proc->flags & RGPU_PROC_PURE) && by_content;
    if (pure && rgpu_answer_known(proc, argv, pol))
        return 0;
    unsigned flags = !must_wait && goes_unwaited(proc, argv, pol, mode) ? RGPU_CALL_NOREPLY : 0;

    int rc = send_call(lib, proc, argv, pol, flags, &bulk, &ticket);
    if (rc != RGPU_OK)
        return rgpu_transport_status(lib, proc->name, rc);
    if (flags & RGPU_CALL_NOREPLY) {
        rgpu_handles_after_call(proc, argv, 0, 0);
        return 0;
    }
    if (!ticket)
        return rgpu_transport_status(lib, proc->name, RGPU_EIO);
    if ((rc = collect_call(lib, proc, argv, pol, &bulk, ticket, &reply)) != RGPU_REPLY_READY)
        return rc;
    rgpu_handles_after_call(proc, argv, reply.api, 1);
    if (rgpu_mapped_active())
        rgpu_mapped_after_call(proc->name, reply.api);
    if (pure && reply.api == 0 && reply.deferred == 0)
        rgpu_answer_keep(proc, argv, pol, &reply.outs, epoch);
    int status = rgpu_reply_status(lib, &reply);
    rgpu_reply_free(&reply);
    if (status != 0)
        rgpu_debug("%s returned %d%s", proc->name, status,
                   reply.deferred && !reply.api ? " (an earlier call's deferred error)" : "");
    return status;
}

int rgpu_call(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
              const void *const *argv)
{
    return call(lib, proc, argv, AS_DECLARED);
}

int rgpu_call_waiting(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                      const void *const *argv)
{
    return call(lib, proc, argv, WAITING);
}

int rgpu_call_unwaited_when(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                            const void *const *argv, int unwaited)
{
    return call(lib, proc, argv, unwaited ? UNWAITED : WAITING);
}

int rgpu_call_synchronise(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                          const void *const *argv, int lazy)
{
    if (rgpu_sticky_error())
        return client_status(lib, rgpu_sticky_error());
    /* With shared memory the program may read what the GPU wrote once
     * this returns: it waits, and the bytes come back (rgpu_mapped.c). */
    if (rgpu_mapped_active())
        return call(lib, proc, argv, WAITING);
    return call(lib, proc, argv, lazy ? UNWAITED : AS_DECLARED);
}

int rgpu_refused(const struct rgpu_lib *lib, const char *name, const char *reason, int *logged)
{
    if (!__atomic_exchange_n(logged, 1, __ATOMIC_RELAXED)) {
        rgpu_log_init("rgpu", getenv("RGPU_LOG"));
        rgpu_warn("%s is not supported by rgpu: %s", name, reason);
    }
    return lib->is_runtime ? rgpu_runtime_result(lib->not_supported) : lib->not_supported;
}

/* ---- runtime per-thread state ------------------------------------------------- */

int rgpu_runtime_result(int err)
{
    if (err != 0)
        T.last_error = err;
    return err;
}

int rgpu_last_error(int clear)
{
    int e = T.last_error;
    if (clear)
        T.last_error = 0;
    return e;
}

/* ---- error texts of the server's libraries -------------------------------------- */

#define MAX_ERROR_CODE 1024
#define MAX_ERROR_TEXT 512

/* Per library, each code's text once asked: NULL not yet, NO_TEXT none. */
static char no_text[1];
#define NO_TEXT no_text

struct error_texts {
    const struct rgpu_lib *lib;
    char *text[MAX_ERROR_CODE];
};

static struct error_texts texts[8];
static pthread_mutex_t texts_lock = PTHREAD_MUTEX_INITIALIZER;

/* Called with texts_lock held: one round trip per code and library. */
static char *fetch_error_text(const struct rgpu_lib *lib, int code)
{
    char buf[MAX_ERROR_TEXT];
    if (rgpu_error_string(lib->name, code, buf, sizeof buf) != RGPU_STATUS_OK)
        return NO_TEXT;
    buf[sizeof buf - 1] = '\0';
    char *copy = strdup(buf);
    return copy ? copy : NO_TEXT;
}

const char *rgpu_server_error_string(const struct rgpu_lib *lib, int code)
{
    struct error_texts *t = NULL;
    if (code < 0 || code >= MAX_ERROR_CODE)
        return NULL;
    pthread_mutex_lock(&texts_lock);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0] && !t; i++) {
        if (texts[i].lib == lib || !texts[i].lib) {
            t = &texts[i];
            t->lib = lib;
        }
    }
    if (t && !t->text[code])
        t->text[code] = fetch_error_text(lib, code);
    const char *s = t && t->text[code] != NO_TEXT ? t->text[code] : NULL;
    pthread_mutex_unlock(&texts_lock);
    return s;
}

/* ---- what is current, known without asking ------------------------------------- */

/* Bumped by every call that may change contexts behind other threads' backs
 * (a reset, a release, new flags): all cached contexts and primary-context
 * states are then stale. */
static atomic_uint contexts_generation = 1;
/* Bumped by those and by every change of some thread's current context:
 * what a stub keeps per context (function attributes) is stale then. */
static atomic_uint contexts_epoch = 1;

#define MAX_PRIMARY 64
static struct {
    unsigned generation;        /* known active while contexts_generation is this */
    unsigned flags;
} primary[MAX_PRIMARY];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;

int rgpu_thread_device(int *device)
{
    if (!T.device_known)
        return 0;
    *device = T.device;
    return 1;
}

void rgpu_thread_set_device(int device)
{
    T.device = device;
    T.device_known = 1;
    T.ctx = 0;          /* the device's primary context is current now */
}

void rgpu_thread_forget_current(void)
{
    T.device_known = 0;
    T.ctx = 0;
    atomic_fetch_add(&contexts_epoch, 1);
}

unsigned rgpu_contexts_epoch(void)
{
    return atomic_load(&contexts_epoch);
}

int rgpu_thread_context(uint64_t *ctx)
{
    if (!T.ctx || T.ctx_generation != atomic_load(&contexts_generation))
        return 0;
    *ctx = T.ctx;
    return 1;
}

void rgpu_thread_set_context(uint64_t ctx)
{
    T.ctx = ctx;
    T.ctx_generation = atomic_load(&contexts_generation);
}

void rgpu_contexts_changed(void)
{
    atomic_fetch_add(&contexts_generation, 1);
    rgpu_thread_forget_current();
}

int rgpu_primary_active(int dev, unsigned *flags)
{
    int known = 0;
    if (dev < 0 || dev >= MAX_PRIMARY)
        return 0;
    pthread_mutex_lock(&primary_lock);
    if (primary[dev].generation == atomic_load(&contexts_generation)) {
        *flags = primary[dev].flags;
        known = 1;
    }
    pthread_mutex_unlock(&primary_lock);
    return known;
}

void rgpu_primary_set_active(int dev, unsigned flags)
{
    if (dev < 0 || dev >= MAX_PRIMARY)
        return;
    pthread_mutex_lock(&primary_lock);
    primary[dev].generation = atomic_load(&contexts_generation);
    primary[dev].flags = flags;
    pthread_mutex_unlock(&primary_lock);
}

/* ---- reading replies of hand-written calls ---------------------------------------- */

int rgpu_req_status(const struct rgpu_lib *lib, const char *what, struct rgpu_req *req)
{
    struct rgpu_reply reply;
    int rc = rgpu_req_exchange(lib, what, req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = rgpu_reply_status(lib, &reply);
    rgpu_reply_free(&reply);
    return rc;
}

int rgpu_req_exchange(const struct rgpu_lib *lib, const char *what, struct rgpu_req *req,
                      struct rgpu_reply *reply)
{
    rgpu_stats_name(req->proc_id, what);
    rgpu_liblog_flush_settings(lib);
    int rc = rgpu_req_send(req, reply);
    if (rc != RGPU_OK)
        return rgpu_transport_status(lib, what, rc);
    if (reply->transport != RGPU_OK) {
        rc = reply->transport;
        rgpu_reply_free(reply);
        return rgpu_transport_status(lib, what, rc);
    }
    return RGPU_REPLY_READY;
}

const msgpack_object *rgpu_reply_out(const struct rgpu_reply *r, unsigned i)
{
    if (r->outs.type != MSGPACK_OBJECT_ARRAY || i >= r->outs.via.array.size)
        return NULL;
    return &r->outs.via.array.ptr[i];
}

uint64_t rgpu_reply_u64(const struct rgpu_reply *r, unsigned i)
{
    const msgpack_object *o = rgpu_reply_out(r, i);
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

const msgpack_object *rgpu_reply_bin(const struct rgpu_reply *r, unsigned i)
{
    const msgpack_object *o = rgpu_reply_out(r, i);
    return o && o->type == MSGPACK_OBJECT_BIN ? o : NULL;
}

/* ---- kernel parameter layouts ---------------------------------------------------- */

int rgpu_layout_parse(const msgpack_object *arr, struct rgpu_layout *l)
{
    memset(l, 0, sizeof *l);
    if (!arr || arr->type != MSGPACK_OBJECT_ARRAY)
        return -1;
    unsigned n = arr->via.array.size;
    l->offset = calloc(n + 1, sizeof *l->offset);
    l->size = calloc(n + 1, sizeof *l->size);
    for (unsigned i = 0; l->offset && l->size && i < n; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2 ||
            e->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            e->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            break;
        l->offset[i] = (uint32_t)e->via.array.ptr[0].via.u64;
        l->size[i] = (uint32_t)e->via.array.ptr[1].via.u64;
        if (l->offset[i] + l->size[i] > l->bytes)
            l->bytes = l->offset[i] + l->size[i];
        l->nparams = i + 1;
    }
    if (!l->offset || !l->size || l->nparams != n) {
        free(l->offset);
        free(l->size);
        memset(l, 0, sizeof *l);
        return -1;
    }
    return 0;
}

int rgpu_layout_set(struct rgpu_layout *l, const struct rgpu_param_slot *slots, size_t n)
{
    uint64_t bytes = 0;
    memset(l, 0, sizeof *l);
    if (n > RGPU_KERNEL_PARAMS_MAX || (n && !slots))
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((uint64_t)slots[i].offset + slots[i].size > bytes)
            bytes = (uint64_t)slots[i].offset + slots[i].size;
    /* No launch carries more argument bytes (rgpud refuses them too). */
    if (bytes > RGPU_KERNEL_PARAM_BYTES_MAX)
        return -1;
    l->offset = calloc(n + 1, sizeof *l->offset);
    l->size = calloc(n + 1, sizeof *l->size);
    if (!l->offset || !l->size) {
        free(l->offset);
        free(l->size);
        memset(l, 0, sizeof *l);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        l->offset[i] = slots[i].offset;
        l->size[i] = slots[i].size;
    }
    l->nparams = (unsigned)n;
    l->bytes = (size_t)bytes;
    return 0;
}

void rgpu_layout_pack(const struct rgpu_layout *l, void *const *args, unsigned char *buf)
{
    memset(buf, 0, l->bytes);
    for (unsigned i = 0; i < l->nparams; i++)
        memcpy(buf + l->offset[i], args[i], l->size[i]);
    /* A pointer argument into pinned memory: unified addressing lets a
     * kernel use it, so it names the range's GPU copy (rgpu_mapped.c).
     * Pointers inside larger parameters (structs) are not looked at. */
    if (!rgpu_ranges_any_pinned())
        return;
    for (unsigned i = 0; i < l->nparams; i++) {
        uint64_t v, dev;
        if (l->size[i] != sizeof v || l->offset[i] % sizeof v)
            continue;
        memcpy(&v, buf + l->offset[i], sizeof v);
        if ((dev = rgpu_mapped_pinned_to_device(NULL, v)) != 0)
            memcpy(buf + l->offset[i], &dev, sizeof dev);
    }
}

/* ---- handle -> value maps of the stubs ------------------------------------------ */

static struct rgpu_keyed_entry *keyed_find(struct rgpu_keyed *t, uint64_t key)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].key == key)
            return &t->v[i];
    return NULL;
}

void rgpu_keyed_set(struct rgpu_keyed *t, const void *key, int64_t value)
{
    uint64_t k = (uint64_t)(uintptr_t)key;
    pthread_mutex_lock(&t->lock);
    struct rgpu_keyed_entry *e = keyed_find(t, k);
    if (!e && t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        struct rgpu_keyed_entry *n = realloc(t->v, ncap * sizeof *n);
        if (n) {
            t->v = n;
            t->cap = ncap;
        }
    }
    if (!e && t->n < t->cap)
        e = &t->v[t->n++];
    if (e)
        *e = (struct rgpu_keyed_entry){ k, value };
    pthread_mutex_unlock(&t->lock);
}

int rgpu_keyed_get(struct rgpu_keyed *t, const void *key, int64_t *value)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_keyed_entry *e = keyed_find(t, (uint64_t)(uintptr_t)key);
    if (e)
        *value = e->value;
    pthread_mutex_unlock(&t->lock);
    return e != NULL;
}

void rgpu_keyed_remove(struct rgpu_keyed *t, const void *key)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_keyed_entry *e = keyed_find(t, (uint64_t)(uintptr_t)key);
    if (e)
        *e = t->v[--t->n];
    pthread_mutex_unlock(&t->lock);
}

/* ---- errors no call reported ------------------------------------------------ */

static const struct rgpu_lib *lib_named(const char *name, size_t len)
{
    const struct rgpu_lib *found = NULL;
    pthread_mutex_lock(&L.lock);
    for (int i = 0; i < L.n && !found; i++)
        if (strlen(L.libs[i]->name) == len && memcmp(L.libs[i]->name, name, len) == 0)
            found = L.libs[i];
    pthread_mutex_unlock(&L.lock);
    return found;
}

static void log_unreported(const struct rgpu_unreported *e)
{
    char name[sizeof e->lib + 1];
    snprintf(name, sizeof name, "%.*s", (int)sizeof e->lib, e->lib);
    const struct rgpu_lib *lib = lib_named(name, strlen(name));
    const char *text = lib && e->status > 0 ? rgpu_server_error_string(lib, e->status) : NULL;
    rgpu_error("work sent without waiting failed and no later call of this thread reported "
               "it: %s status %d%s%s%s (RGPU_SYNC=strict reports it where it happens)", name,
               (int)e->status, text ? " (" : "", text ? text : "", text ? ")" : "");
}

/* At exit: failures of requests sent without waiting that no reply has
 * reported (a lazy synchronise's error, when the program made no waiting
 * call after it) are logged, never lost.  rgpu_unreported (rgpu's own
 * library), sent apart from the generated call: not counted. */
#define MAX_UNREPORTED (8 * 257)    /* every library of every server thread */

static void report_unreported(void)
{
    static struct rgpu_unreported entries[MAX_UNREPORTED];
    const struct rgpu_proc *proc = RGPU_RGPU_rgpu_unreported;
    size_t capacity = MAX_UNREPORTED, count = 0;
    void *out = entries;
    size_t *out_count = &count;
    const void *argv[] = { &out, &capacity, &out_count };
    struct rgpu_req req;
    struct rgpu_reply reply;
    struct rgpu_ticket *t = NULL;

    if (!__atomic_load_n(&A.ever, __ATOMIC_RELAXED) || S.broken || S.forked)
        return;
    rgpu_req_begin(&req, proc->id, 0);
    if (rgpu_encode_args(&req.pk, proc, argv, NULL) != RGPU_OK) {
        msgpack_sbuffer_destroy(&req.buf);
        return;
    }
    if (post(&req, &t, 0) != RGPU_OK || !t || rgpu_req_wait(t, &reply) != RGPU_OK)
        return;
    if (reply.transport == RGPU_OK && reply.api == RGPU_STATUS_OK &&
        rgpu_decode_outs(&reply.outs, proc, argv, NULL) == RGPU_OK)
        for (size_t i = 0; i < count && i < capacity; i++)
            log_unreported(&entries[i]);
    rgpu_reply_free(&reply);
}

/* ---- a library loaded after the hello ---------------------------------------- */

static void check_late_lib(const struct rgpu_lib *lib)
{
    unsigned char digest[RGPU_DIGEST_LEN];
    const struct rgpu_proc *proc = RGPU_RGPU_rgpu_late_lib;
    const char *name = lib->name;
    const void *bytes = digest;
    size_t size = sizeof digest;
    const void *argv[] = { &name, &bytes, &size };
    struct rgpu_req req;
    struct rgpu_reply reply;

    /* Sent as the generated call would be, but its transport status read
     * here: RGPU_EVERSION says the tables differ. */
    rgpu_lib_digest(lib, digest);
    rgpu_req_begin(&req, proc->id, 0);
    rgpu_stats_name(proc->id, proc->name);
    int rc = rgpu_encode_args(&req.pk, proc, argv, NULL);
    if (rc != RGPU_OK)
        msgpack_sbuffer_destroy(&req.buf);
    else if ((rc = rgpu_req_send(&req, &reply)) == RGPU_OK) {
        rc = reply.transport;
        rgpu_reply_free(&reply);
    }
    if (rc == RGPU_OK)
        return;
    /* Its frames would be misread: no call of this session may go on. */
    rgpu_error("library %s (loaded after the session began) %s: closing the session (this "
               "client is %s, protocol %d; install the same rgpu build on both machines)",
               lib->name, rc == RGPU_EVERSION ? "differs from the server's build"
                                              : "could not be checked with the server",
               rgpu_version_string(), RGPU_PROTO_VERSION);
    S.broken = 1;
}
