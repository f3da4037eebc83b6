/* hang: no hangs, no exhaustion, no races (docs/security.md).
 *
 *   hang RGPUD LIB_DIR
 *
 * Each case starts its own rgpud on a Unix socket in a private temporary
 * directory (rgpud's default kind of address: peer credentials let us in)
 * with the fake GPU backend of LIB_DIR and short configured timeouts, acts
 * as a client (the hello through the one codec of rgpu_hello.h, then raw
 * frames; or the real client core through the cudart stub in a forked
 * child) and checks that every wait ends with a clear error within the
 * configured time, bounded generously.  Prints "ok CASE" or "FAIL CASE:
 * why" per case; exits non-zero on any failure.  Every wait is bounded. */
#include "rgpu_hello.h"
#include "rgpu_proto.h"

#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#define IO_TIMEOUT_S 8
#define REPLY_MAX (1u << 20)

static const char *rgpud_exe, *lib_dir;
static char sock_dir[64];          /* ours, 0700 */
static char sock_path[96];
static pid_t daemon_pid;
static char why[512];

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return -1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- sockets and frames -------------------------------------------------------- */

static int dial(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct timeval tv = { IO_TIMEOUT_S, 0 };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd < 0)
        return fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return fail("connect: %s", strerror(e));
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fail("send: %s", strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_frame(int fd, const void *body, size_t n)
{
    uint32_t be = htonl((uint32_t)n);
    return send_all(fd, &be, sizeof be) < 0 ? -1 : send_all(fd, body, n);
}

static int send_msg(int fd, msgpack_sbuffer *sb)
{
    int rc = send_frame(fd, sb->data, sb->size);
    msgpack_sbuffer_clear(sb);
    return rc;
}

static int recv_exact(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail("recv: %s", errno == EAGAIN ? "no answer in time" : strerror(errno));
        if (r == 0)
            return fail("connection closed");
        got += (size_t)r;
    }
    return 0;
}

/* The server ends the connection within IO_TIMEOUT_S; data before is fine. */
static int expect_close(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail("connection still open after %d s", IO_TIMEOUT_S);
    }
}

struct answer {
    char *frame;
    msgpack_zone zone;
    const msgpack_object *f;
    uint32_t n;
};

static void answer_free(struct answer *a)
{
    msgpack_zone_destroy(&a->zone);
    free(a->frame);
}

/* One frame holding one array; keepalives are skipped. */
static int read_answer(int fd, struct answer *a)
{
    for (;;) {
        uint32_t be;
        msgpack_object root;
        size_t off = 0;
        if (recv_exact(fd, &be, sizeof be) < 0)
            return -1;
        uint32_t n = ntohl(be);
        if (n == 0 || n > REPLY_MAX)
            return fail("answer frame of %u bytes", n);
        a->frame = malloc(n);
        if (!a->frame || recv_exact(fd, a->frame, n) < 0) {
            free(a->frame);
            return -1;
        }
        msgpack_zone_init(&a->zone, 1024);
        if (msgpack_unpack(a->frame, n, &off, &a->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
            root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size < 1) {
            answer_free(a);
            return fail("answer is not a msgpack array");
        }
        a->f = root.via.array.ptr;
        a->n = root.via.array.size;
        if (a->f[0].via.u64 != RGPU_MSG_KEEPALIVE)
            return 0;
        answer_free(a);
    }
}

static uint64_t field(const struct answer *a, uint32_t i)
{
    if (i >= a->n || a->f[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return UINT64_MAX;
    return a->f[i].via.u64;
}

/* Connect and say hello with the codec every client uses (no library
 * digests: the raw frames below name procedures by id); the welcome's
 * status in *status and its message in msg.  Returns the socket, or -1. */
static int hello(int *status, char *msg, size_t msglen)
{
    struct rgpu_hello h = { .client_name = "hang" };
    struct rgpu_welcome w;
    char how[128], reason[512];
    int fd = dial();
    if (fd < 0)
        return -1;
    int rc = rgpu_hs_client(fd, 0, &h, &w, how, sizeof how, reason, sizeof reason);
    if (rc < 0) {
        close(fd);
        return fail("hello: %s", reason);
    }
    /* The codec also reads a protocol-1 welcome (7 elements): this one
     * must be in this protocol's layout, the busy answer included. */
    if (w.proto != RGPU_PROTO_VERSION) {
        close(fd);
        return fail("a welcome of protocol %d, wanted %d", w.proto, RGPU_PROTO_VERSION);
    }
    *status = w.status;
    if (msg)
        snprintf(msg, msglen, "%s", w.message);
    return fd;
}

static int open_session(void)
{
    int status;
    int fd = hello(&status, NULL, 0);
    if (fd >= 0 && status != RGPU_OK) {
        close(fd);
        return fail("welcome status %d (%s)", status, rgpu_status_name(status));
    }
    return fd;
}

/* A session, retrying while the server is busy, for up to seconds. */
static int open_session_within(double seconds)
{
    double t0 = now_s();
    for (;;) {
        int fd = open_session();
        if (fd >= 0 || now_s() - t0 > seconds)
            return fd;
        pause_ms(5);
    }
}

/* [CALL, serial, proc, thread 1, flags, args]: the caller packs the args. */
static void pack_call(msgpack_packer *pk, uint64_t serial, uint32_t proc)
{
    msgpack_pack_array(pk, 6);
    msgpack_pack_int(pk, RGPU_MSG_CALL);
    msgpack_pack_uint64(pk, serial);
    msgpack_pack_uint32(pk, proc);
    msgpack_pack_uint32(pk, 1);
    msgpack_pack_uint32(pk, 0);
}

/* Send one call, read its reply: transport and api status. */
static int call(int fd, msgpack_sbuffer *sb, int *transport, int *api)
{
    struct answer a;
    if (send_msg(fd, sb) < 0 || read_answer(fd, &a) < 0)
        return -1;
    if (a.n != 6 || field(&a, 0) != RGPU_MSG_REPLY) {
        answer_free(&a);
        return fail("not a reply");
    }
    *transport = (int)field(&a, 2);
    *api = (int)field(&a, 3);
    answer_free(&a);
    return 0;
}

/* cudaGetDeviceCount through raw frames: the session serves. */
static int good_call(int fd)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int t, a;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_call(&pk, 1, rgpu_proc_id("cudart", "cudaGetDeviceCount"));
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint32(&pk, sizeof(int));
    int rc = call(fd, &sb, &t, &a);
    msgpack_sbuffer_destroy(&sb);
    if (rc == 0 && (t != RGPU_OK || a != 0))
        rc = fail("cudaGetDeviceCount: transport %d, api %d", t, a);
    return rc;
}

/* ---- rgpud ------------------------------------------------------------------ */

/* The pids of rgpud's children (sessions) into pids; their count. */
static int sessions_of_daemon(pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) && n < max) {
        char path[64], buf[512];
        int pid = atoi(e->d_name), ppid;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == daemon_pid)
            pids[n++] = pid;
    }
    if (d)
        closedir(d);
    return n;
}

/* Until rgpud has no child (the start-up probe's session has ended and been
 * reaped, so the listener counts no session): 0, or -1 after seconds. */
static int wait_no_children(double seconds)
{
    pid_t s[4];
    double t0 = now_s();
    while (sessions_of_daemon(s, 4) > 0) {
        if (now_s() - t0 > seconds)
            return fail("rgpud still has children after %.0f s", seconds);
        pause_ms(20);
    }
    return 0;
}

/* rgpud with these options (NULL-terminated) and, if given, one NAME=VALUE
 * in its environment, listening on sock_path. */
static int start_daemon(const char *env, ...)
{
    const char *argv[24] = { rgpud_exe, "--foreground", "--listen", NULL, "--lib-dir", lib_dir };
    char listen[128];
    int argc = 6;
    va_list ap;
    va_start(ap, env);
    for (const char *a; argc < 22 && (a = va_arg(ap, const char *));)
        argv[argc++] = a;
    va_end(ap);
    snprintf(listen, sizeof listen, "unix:%s", sock_path);
    argv[3] = listen;
    unlink(sock_path);                  /* the last case's rgpud was killed */
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (env)
            putenv((char *)env);
        execv(rgpud_exe, (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);
    daemon_pid = pid;
    for (int waited = 0; waited < IO_TIMEOUT_S * 1000; waited += 20) {
        int fd = dial();
        if (fd >= 0) {
            /* The probe's session ends at our end of stream; once it is
             * reaped, each case begins with no session counted. */
            shutdown(fd, SHUT_WR);
            int rc = expect_close(fd);
            close(fd);
            return rc < 0 ? rc : wait_no_children(5);
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            daemon_pid = 0;
            return fail("rgpud exited before accepting");
        }
        pause_ms(20);
    }
    return fail("rgpud did not accept within %d s", IO_TIMEOUT_S);
}

static void stop_daemon(void)
{
    if (!daemon_pid)
        return;
    kill(-daemon_pid, SIGCONT);
    kill(-daemon_pid, SIGKILL);
    waitpid(daemon_pid, NULL, 0);
    daemon_pid = 0;
    unlink(sock_path);
}

/* ---- clients through the real client core (a forked child each) ---------------- */

/* Run fn in a child with RGPU_SERVER and RGPU_TIMEOUT set; its exit code
 * (0: fn's checks passed); why is written to the pipe.  ready/go let the
 * parent act between the child's steps. */
struct child {
    pid_t pid;
    int to_parent, to_child;
};

static int child_start(struct child *c, const char *timeout, int (*fn)(int in, int out))
{
    int up[2], down[2];
    if (pipe(up) < 0 || pipe(down) < 0)
        return fail("pipe: %s", strerror(errno));
    c->pid = fork();
    if (c->pid < 0)
        return fail("fork: %s", strerror(errno));
    if (c->pid == 0) {
        char server[128];
        close(up[0]);
        close(down[1]);
        snprintf(server, sizeof server, "unix:%s", sock_path);
        setenv("RGPU_SERVER", server, 1);
        setenv("RGPU_TIMEOUT", timeout, 1);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int rc = fn(down[0], up[1]);
        if (rc < 0)
            (void)!write(up[1], why, strlen(why));
        _exit(rc < 0 ? 1 : 0);
    }
    close(up[1]);
    close(down[0]);
    c->to_parent = up[0];
    c->to_child = down[1];
    return 0;
}

/* The child's result within seconds: 0, or -1 with its reason. */
static int child_end(struct child *c, double seconds)
{
    int status = 0;
    double t0 = now_s();
    while (waitpid(c->pid, &status, WNOHANG) != c->pid) {
        if (now_s() - t0 > seconds) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            close(c->to_parent);
            close(c->to_child);
            return fail("client still waiting after %.0f s", seconds);
        }
        pause_ms(20);
    }
    char buf[sizeof why] = "";
    ssize_t n = read(c->to_parent, buf, sizeof buf - 1);
    close(c->to_parent);
    close(c->to_child);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    return fail("client: %s", n > 0 ? buf : "died");
}

static int wait_byte(int fd)
{
    char b;
    return read(fd, &b, 1) == 1 ? 0 : -1;
}

static void send_byte(int fd)
{
    (void)!write(fd, "x", 1);
}

/* Connects, tells the parent, waits for it, then a call must fail within
 * RGPU_TIMEOUT (2 s) and a bound. */
static int c_frozen(int in, int out)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return fail("first call failed");
    send_byte(out);
    if (wait_byte(in) < 0)
        return fail("parent gone");
    /* Not cudaGetDeviceCount again: the stub may answer it from memory. */
    double t0 = now_s();
    cudaError_t e = cudaDeviceSynchronize();
    double took = now_s() - t0;
    if (e == cudaSuccess)
        return fail("a call to a frozen session succeeded");
    if (took < 1.5 || took > 10)
        return fail("gave up after %.1f s, wanted about 2", took);
    if (cudaDeviceSynchronize() == cudaSuccess)
        return fail("a later call succeeded on the broken connection");
    return 0;
}

/* Allocates 64 MiB, tells the parent, waits for it; then a 64 MiB copy to
 * the (frozen) session, which takes nothing once the socket buffers are
 * full, must fail within RGPU_TIMEOUT (2 s) and a bound, and a later call
 * too. */
static int c_frozen_send(int in, int out)
{
    size_t n = 64u << 20;
    void *d = NULL;
    char *h = malloc(n);
    if (!h || cudaMalloc(&d, n) != cudaSuccess)
        return fail("could not allocate 64 MiB");
    memset(h, 0x5a, n);
    send_byte(out);
    if (wait_byte(in) < 0)
        return fail("parent gone");
    double t0 = now_s();
    cudaError_t e = cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
    double took = now_s() - t0;
    free(h);
    if (e == cudaSuccess)
        return fail("a 64 MiB copy to a frozen session succeeded");
    if (took < 1.5 || took > 10)
        return fail("gave up after %.1f s, wanted about 2", took);
    if (cudaDeviceSynchronize() == cudaSuccess)
        return fail("a later call succeeded on the broken connection");
    return 0;
}

struct copy_job {
    void *d;
    char *h;
    size_t n;
    cudaError_t err;
    double took;
};

static void *copy_later(void *arg)
{
    struct copy_job *j = arg;
    pause_ms(500);
    double t0 = now_s();
    j->err = cudaMemcpy(j->d, j->h, j->n, cudaMemcpyHostToDevice);
    j->took = now_s() - t0;
    return NULL;
}

/* While this thread (the session runs its requests on its reader, which
 * then reads nothing) synchronises for 4 s, another copies 64 MiB with
 * RGPU_TIMEOUT=2: the copy's send waits for room about 3.5 s, but the
 * keepalives this thread reads show the session alive, and both succeed. */
static int c_busy_send(int in, int out)
{
    struct copy_job j = { .n = 64u << 20, .err = cudaErrorUnknown };
    pthread_t t;
    (void)in;
    (void)out;
    j.h = malloc(j.n);
    if (!j.h || cudaMalloc(&j.d, j.n) != cudaSuccess)
        return fail("could not allocate 64 MiB");
    memset(j.h, 0x5a, j.n);
    if (pthread_create(&t, NULL, copy_later, &j) != 0)
        return fail("pthread_create");
    cudaError_t e = cudaDeviceSynchronize();
    pthread_join(t, NULL);
    free(j.h);
    if (e != cudaSuccess || j.err != cudaSuccess)
        return fail("synchronise %d, copy %d after %.1f s", (int)e, (int)j.err, j.took);
    if (j.took < 2.5)
        return fail("the copy took %.1f s: it never waited longer than RGPU_TIMEOUT", j.took);
    return 0;
}

/* A synchronise of 4 s with RGPU_TIMEOUT=2: keepalives keep it alive. */
static int c_slow(int in, int out)
{
    (void)in;
    (void)out;
    double t0 = now_s();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return fail("a 4 s synchronise failed (%d) after %.1f s", (int)e, now_s() - t0);
    if (now_s() - t0 < 3.5)
        return fail("the synchronise did not take the 4 s asked");
    return 0;
}

/* ---- cases ------------------------------------------------------------------- */

/* The client fn connects and says so; its session is then stopped
 * (SIGSTOP) and fn's next call must fail in time. */
static int frozen(int (*fn)(int in, int out))
{
    struct child c;
    pid_t s[4];
    int rc = -1;
    if (start_daemon(NULL, NULL) < 0 || child_start(&c, "2", fn) < 0)
        return -1;
    if (wait_byte(c.to_parent) < 0)
        return child_end(&c, 5) < 0 ? -1 : fail("the client did not connect");
    /* The client's session, and only it (start_daemon reaped the probe's). */
    for (int waited = 0; waited < 5000 && sessions_of_daemon(s, 4) != 1; waited += 20)
        pause_ms(20);
    if (sessions_of_daemon(s, 4) != 1) {
        kill(c.pid, SIGKILL);
        child_end(&c, 5);
        return fail("not exactly one session");
    }
    kill(s[0], SIGSTOP);
    send_byte(c.to_child);
    rc = child_end(&c, 20);
    kill(s[0], SIGKILL);
    kill(s[0], SIGCONT);
    return rc;
}

static int t_frozen_session(void)
{
    return frozen(c_frozen);
}

/* A client blocked sending (socket buffers full) honours RGPU_TIMEOUT. */
static int t_frozen_send(void)
{
    return frozen(c_frozen_send);
}

static int t_slow_request(void)
{
    struct child c;
    if (start_daemon("FAKEGPU_SYNC_SLEEP_MS=4000", "--keepalive-ms", "200", NULL) < 0 ||
        child_start(&c, "2", c_slow) < 0)
        return -1;
    return child_end(&c, 20);
}

/* A live session that reads nothing for a while: sends keep waiting. */
static int t_busy_send(void)
{
    struct child c;
    if (start_daemon("FAKEGPU_SYNC_SLEEP_MS=4000", "--keepalive-ms", "200", NULL) < 0 ||
        child_start(&c, "2", c_busy_send) < 0)
        return -1;
    return child_end(&c, 30);
}

/* Half a frame, then nothing: the slot is free after --frame-timeout. */
static int t_stalled_client(void)
{
    if (start_daemon(NULL, "--max-sessions", "1", "--frame-timeout", "1", NULL) < 0)
        return -1;
    int fd = open_session_within(5);
    if (fd < 0)
        return -1;
    static const char half[] = "\0\0\0\x64\x96\x03\x01";    /* 100 bytes announced, 3 sent */
    double t0 = now_s();
    if (send_all(fd, half, sizeof half - 1) < 0 || expect_close(fd) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    if (now_s() - t0 > 6)
        return fail("closed after %.1f s, wanted about 1", now_s() - t0);
    int g = open_session_within(5);
    if (g < 0)
        return -1;
    int rc = good_call(g);
    close(g);
    return rc;
}

/* A large copy whose payload stops: the session reads it from the socket
 * piece by piece (daemon/copy.c) under the same bound, --frame-timeout
 * plus 1 ms per 256 bytes of the payload (here 1 s + 1 s). */
static int t_stalled_copy(void)
{
    if (start_daemon(NULL, "--max-sessions", "1", "--frame-timeout", "1", NULL) < 0)
        return -1;
    int fd = open_session_within(5);
    if (fd < 0)
        return -1;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    size_t payload = RGPU_STREAM_MIN;
    unsigned char be[4], part[1000] = { 0 };
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_call(&pk, 1, rgpu_proc_id("cudart", "rgpu_htod"));
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint64(&pk, 0x1000);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_uint64(&pk, payload);
    msgpack_pack_bin(&pk, payload);
    uint32_t n = htonl((uint32_t)(sb.size + payload));
    memcpy(be, &n, 4);
    double t0 = now_s();
    int rc = send_all(fd, be, 4) < 0 || send_all(fd, sb.data, sb.size) < 0 ||
                     send_all(fd, part, sizeof part) < 0 || expect_close(fd) < 0
                 ? -1
                 : 0;
    msgpack_sbuffer_destroy(&sb);
    close(fd);
    if (rc < 0)
        return -1;
    if (now_s() - t0 > 6)
        return fail("closed after %.1f s, wanted about 2", now_s() - t0);
    int g = open_session_within(5);
    if (g < 0)
        return -1;
    rc = good_call(g);
    close(g);
    return rc;
}

/* Connected, never a hello: dropped after --hello-timeout. */
static int t_silent_client(void)
{
    if (start_daemon(NULL, "--max-sessions", "1", "--hello-timeout", "1", NULL) < 0)
        return -1;
    /* No session is counted (start_daemon), so this one gets the slot and
     * meets --hello-timeout (the default, 10 s, is beyond IO_TIMEOUT_S),
     * not the busy answer's own 2 s wait for a hello. */
    int fd = dial();
    if (fd < 0)
        return -1;
    double t0 = now_s();
    if (expect_close(fd) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    if (now_s() - t0 > 6)
        return fail("dropped after %.1f s, wanted about 1", now_s() - t0);
    int g = open_session_within(5);
    if (g < 0)
        return -1;
    int rc = good_call(g);
    close(g);
    return rc;
}

/* At the cap: a welcome with RGPU_EBUSY naming the cap; room once a
 * session ends. */
static int t_cap_reached(void)
{
    char msg[512];              /* a welcome message's size */
    int status;
    if (start_daemon(NULL, "--max-sessions", "1", NULL) < 0)
        return -1;
    int a = open_session_within(5);
    if (a < 0)
        return -1;
    int b = hello(&status, msg, sizeof msg);
    if (b < 0) {
        close(a);
        return -1;
    }
    close(b);
    if (status != RGPU_EBUSY || !strstr(msg, "at most 1 sessions (--max-sessions)")) {
        close(a);
        return fail("welcome status %d, message '%s'", status, msg);
    }
    close(a);
    int c = open_session_within(5);
    if (c < 0)
        return -1;
    int rc = good_call(c);
    close(c);
    return rc;
}

/* Many short sessions, then the cap still admits its number at once. */
static int t_many_sessions(void)
{
    int fds[2];
    if (start_daemon(NULL, "--max-sessions", "2", NULL) < 0)
        return -1;
    /* Each one a real session: a busy answer (the last one not reaped
     * yet) is retried. */
    for (int i = 0; i < 2000; i++) {
        int fd = open_session_within(5);
        if (fd < 0)
            return -1;
        close(fd);
    }
    double t0 = now_s();
    for (;;) {
        fds[0] = open_session_within(5);
        fds[1] = fds[0] >= 0 ? open_session() : -1;
        if (fds[1] >= 0)
            break;
        if (fds[0] >= 0)
            close(fds[0]);
        if (now_s() - t0 > 10)
            return fail("the cap of 2 no longer admits 2 sessions");
        pause_ms(200);
    }
    int rc = good_call(fds[0]) < 0 || good_call(fds[1]) < 0 ? -1 : 0;
    close(fds[0]);
    close(fds[1]);
    return rc;
}

/* A call whose argument array holds a million one-byte elements: refused
 * by the pre-check before msgpack-c allocates 24 MB for it. */
static int t_million_elements(void)
{
    enum { N = 1000000 };
    if (start_daemon(NULL, NULL) < 0)
        return -1;
    int fd = open_session();
    if (fd < 0)
        return -1;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct answer a;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_call(&pk, 5, rgpu_proc_id("cudart", "cudaGetDeviceCount"));
    msgpack_pack_array(&pk, N);
    for (int i = 0; i < N; i++)
        msgpack_pack_fix_uint8(&pk, 0);
    int rc = send_msg(fd, &sb) < 0 || read_answer(fd, &a) < 0 ? -1 : 0;
    msgpack_sbuffer_destroy(&sb);
    if (rc == 0) {
        const msgpack_object *outs = a.n == 6 ? &a.f[5] : NULL;
        if (field(&a, 2) != RGPU_EPROTO || !outs || outs->type != MSGPACK_OBJECT_ARRAY ||
            outs->via.array.size != 1 || outs->via.array.ptr[0].type != MSGPACK_OBJECT_STR ||
            !memmem(outs->via.array.ptr[0].via.str.ptr, outs->via.array.ptr[0].via.str.size,
                    "too many objects", 16))
            rc = fail("not refused by the object bound (transport %lld)",
                      (long long)field(&a, 2));
        answer_free(&a);
    }
    close(fd);
    return rc;
}

/* ---- module images ---------------------------------------------------------- */

/* A module-load procedure given image: the api status, or -1. */
static int load_image(int fd, const char *lib, const char *proc, const void *image, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int t, a;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_call(&pk, 9, rgpu_proc_id(lib, proc));
    /* The runtime's: [library, image_size, image]; the driver's: [handle,
     * options, noptions, names, names_size, result, logs, logs_size,
     * logs_used, image_size, image] without options or logs. */
    int driver = strcmp(lib, "cuda") == 0;
    msgpack_pack_array(&pk, driver ? 11 : 3);
    msgpack_pack_uint64(&pk, 8);
    if (driver) {
        msgpack_pack_nil(&pk);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_nil(&pk);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, 24);       /* struct rgpu_jit_result */
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, 8);
    }
    msgpack_pack_uint64(&pk, n);
    msgpack_pack_bin(&pk, n);
    msgpack_pack_bin_body(&pk, image, n);
    int rc = call(fd, &sb, &t, &a);
    msgpack_sbuffer_destroy(&sb);
    if (rc < 0)
        return -1;
    if (t != RGPU_OK)
        return fail("transport status %d", t);
    return a;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static int t_module_images(void)
{
    static const struct { const char *lib, *proc; } loaders[] = {
        { "cudart", "rgpu_lib_load" },
        { "cuda", "rgpu_cu_module_load" },
        { "cuda", "rgpu_cu_library_load" },
    };
    unsigned char img[4][256];
    size_t len[4] = { 96, 24, 64, 32 };
    const char *what[4] = { "fatbin with a lying fat_size", "fatbin wrapper",
                            "cubin whose section table is beyond it", "PTX without its NUL" };
    memset(img, 0, sizeof img);
    /* A container of 16 + 80 bytes claiming 1 MiB. */
    put32(img[0], 0xba55ed50u);
    img[0][4] = 1;
    img[0][6] = 16;
    put64(img[0] + 8, 1u << 20);
    /* A wrapper pointing anywhere. */
    put32(img[1], 0x466243b1u);
    put32(img[1] + 4, 1);
    put64(img[1] + 8, 0x4141414141414141ull);
    /* An ELF64 header only, its section table far away. */
    memcpy(img[2], "\x7f" "ELF\x02\x01\x01", 7);
    img[2][52] = 64;                                /* e_ehsize */
    put64(img[2] + 40, 1u << 30);                   /* e_shoff */
    img[2][58] = 64;                                /* e_shentsize */
    img[2][60] = 8;                                 /* e_shnum */
    memset(img[3], 'A', sizeof img[3]);             /* ".version" without end */

    if (start_daemon(NULL, NULL) < 0)
        return -1;
    int fd = open_session();
    if (fd < 0)
        return -1;
    for (size_t l = 0; l < sizeof loaders / sizeof loaders[0]; l++) {
        for (int i = 0; i < 4; i++) {
            int api = load_image(fd, loaders[l].lib, loaders[l].proc, img[i], len[i]);
            if (api != 200) {           /* invalid image, runtime and driver alike */
                close(fd);
                return api < 0 ? -1 : fail("%s %s: status %d, wanted 200", loaders[l].proc,
                                           what[i], api);
            }
        }
    }
    int rc = good_call(fd);
    close(fd);
    return rc;
}

/* The client leaves while its 30 s synchronise runs: the slot is free
 * long before the synchronise would end. */
static int t_client_gone(void)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    if (start_daemon("FAKEGPU_SYNC_SLEEP_MS=30000", "--max-sessions", "1", "--keepalive-ms",
                     "200", NULL) < 0)
        return -1;
    int fd = open_session_within(5);
    if (fd < 0)
        return -1;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_call(&pk, 4, rgpu_proc_id("cudart", "cudaDeviceSynchronize"));
    msgpack_pack_array(&pk, 0);
    int rc = send_msg(fd, &sb);
    msgpack_sbuffer_destroy(&sb);
    pause_ms(300);
    close(fd);
    if (rc < 0)
        return -1;
    int g = open_session_within(8);
    if (g < 0)
        return -1;
    rc = good_call(g);
    close(g);
    return rc;
}

static const struct {
    const char *name;
    int (*run)(void);
} cases[] = {
    { "frozen-session", t_frozen_session },
    { "frozen-session-send", t_frozen_send },
    { "slow-request-kept-alive", t_slow_request },
    { "busy-session-send", t_busy_send },
    { "stalled-client", t_stalled_client },
    { "stalled-inside-a-copy", t_stalled_copy },
    { "silent-client", t_silent_client },
    { "cap-reached", t_cap_reached },
    { "many-short-sessions", t_many_sessions },
    { "million-elements", t_million_elements },
    { "module-images", t_module_images },
    { "client-gone-while-computing", t_client_gone },
};

int main(int argc, char **argv)
{
    int failures = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR [CASE...]\n", argv[0]);
        return 2;
    }
    /* meson's LD_LIBRARY_PATH names the fake libcudart.so.13 too, which
     * would come before the stub our RUNPATH names: start again without. */
    if (getenv("LD_LIBRARY_PATH")) {
        unsetenv("LD_LIBRARY_PATH");
        execv("/proc/self/exe", argv);
        fprintf(stderr, "hang: cannot run itself again: %s\n", strerror(errno));
        return 2;
    }
    rgpud_exe = argv[1];
    lib_dir = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_dir, sizeof sock_dir, "%s", "/tmp/rgpu-hang-XXXXXX");
    if (!mkdtemp(sock_dir)) {
        fprintf(stderr, "hang: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    snprintf(sock_path, sizeof sock_path, "%s/rgpud.sock", sock_dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int chosen = argc == 3;
        for (int k = 3; k < argc; k++)
            chosen |= strcmp(argv[k], cases[i].name) == 0;
        if (!chosen)
            continue;
        double t0 = now_s();
        why[0] = '\0';
        int rc = cases[i].run();
        stop_daemon();
        if (rc < 0) {
            printf("FAIL %s: %s\n", cases[i].name, why);
            failures++;
        } else {
            printf("ok %s (%.1f s)\n", cases[i].name, now_s() - t0);
        }
    }
    rmdir(sock_dir);
    return failures ? 1 : 0;
}
