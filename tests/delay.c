/* delay: the link emulator bench/rgpu-delay, from outside.
 *
 *   delay PATH-TO-rgpu-delay
 *
 * Runs the proxy in front of a server of this process's own (threads on
 * TCP and on a Unix socket) and checks: bytes arrive intact and in order
 * both ways, with and without delay, over TCP and Unix sockets; a ping
 * takes at least the configured round trip (each one: the proxy must never
 * release a byte early) and not much more; the delay is per direction (one
 * way measured on each); a rate cap slows a transfer down; a peer that
 * closes or dies closes the other side; connections run at once without
 * holding each other up; a side that does not read makes the proxy stop
 * reading (bounded memory) without losing bytes; bad usage exits 2; SIGTERM
 * exits 0.  Lower bounds are strict, upper bounds generous (a loaded
 * machine is slow, never fast).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *proxy_exe;
static int failures;
static char tmpdir[64];

#define MS 1000000LL

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (cond) {                                                                             \
            printf("ok   ");                                                                    \
        } else {                                                                                \
            printf("FAIL ");                                                                    \
            failures++;                                                                         \
        }                                                                                       \
        printf(__VA_ARGS__);                                                                    \
        printf("\n");                                                                           \
        fflush(stdout);                                                                         \
    } while (0)

static void die(const char *what)
{
    printf("FAIL %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The byte stream a seed stands for (xorshift64*), from any offset that
 * is a multiple of 8. */
static void fill(unsigned char *buf, size_t n, uint64_t seed, uint64_t offset)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t x = seed ^ ((offset + i) / 8 + 1) * 0x9e3779b97f4a7c15ULL;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        buf[i] = (unsigned char)((x * 0x2545f4914f6cdd1dULL) >> (8 * ((offset + i) % 8)));
    }
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* read with a deadline: bytes, 0 at the end of stream, -1 on error or
 * timeout (errno ETIMEDOUT). */
static ssize_t recv_within(int fd, void *buf, size_t n, int timeout_ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    int rc;
    while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (rc == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    return read(fd, buf, n);
}

/* ---- the server: one thread per connection; the first byte is the mode -------- */

static struct {
    int tcp_fd, unix_fd;
    int tcp_port;
    char unix_path[108];
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int eofs;              /* 'w' connections that saw their end of stream */
    int released;          /* 'h' connections may start reading */
    int64_t arrivals[64];  /* 't': when each byte came in */
    int narrivals;
} srv = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };

static void echo(int fd)
{
    static __thread char buf[1 << 16];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
        if (write_all(fd, buf, (size_t)n) < 0)
            return;
    shutdown(fd, SHUT_WR);
}

static void *serve_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char mode, b;
    if (recv(fd, &mode, 1, 0) != 1) {
        close(fd);
        return NULL;
    }
    switch (mode) {
    case 'e':                           /* echo until the end of stream */
        echo(fd);
        break;
    case 'c':                           /* close at once */
        break;
    case 'w': {                         /* read until the end, count it */
        char buf[4096];
        while (recv(fd, buf, sizeof buf, 0) > 0)
            ;
        pthread_mutex_lock(&srv.lock);
        srv.eofs++;
        pthread_cond_broadcast(&srv.changed);
        pthread_mutex_unlock(&srv.lock);
        break;
    }
    case 'h':                           /* read nothing until released, then echo */
        pthread_mutex_lock(&srv.lock);
        while (!srv.released)
            pthread_cond_wait(&srv.changed, &srv.lock);
        pthread_mutex_unlock(&srv.lock);
        echo(fd);
        break;
    case 't':                           /* echo byte by byte, noting arrivals */
        while (recv(fd, &b, 1, 0) == 1) {
            pthread_mutex_lock(&srv.lock);
            if (srv.narrivals < 64)
                srv.arrivals[srv.narrivals++] = now_ns();
            pthread_mutex_unlock(&srv.lock);
            if (write_all(fd, &b, 1) < 0)
                break;
        }
        break;
    }
    close(fd);
    return NULL;
}

static void *accept_loop(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(t);
    }
}

static int tcp_listen_any(int *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        die("server socket");
    *port = ntohs(sa.sin_port);
    return fd;
}

static void start_server(void)
{
    pthread_t t;
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    srv.tcp_fd = tcp_listen_any(&srv.tcp_port);
    snprintf(srv.unix_path, sizeof srv.unix_path, "%s/server.sock", tmpdir);
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", srv.unix_path);
    srv.unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (srv.unix_fd < 0 || bind(srv.unix_fd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
        listen(srv.unix_fd, 64) < 0)
        die("unix server socket");
    if (pthread_create(&t, NULL, accept_loop, (void *)(intptr_t)srv.tcp_fd) != 0 ||
        pthread_create(&t, NULL, accept_loop, (void *)(intptr_t)srv.unix_fd) != 0)
        die("server thread");
}

/* ---- the proxy ------------------------------------------------------------------ */

struct proxy {
    pid_t pid;
    char addr[128];        /* where clients connect */
};

/* A port nobody listens on right now. */
static int free_port(void)
{
    int port, fd = tcp_listen_any(&port);
    close(fd);
    return port;
}

/* Run rgpu-delay with args (NULL-terminated) plus --listen; wait for its
 * "listening" line.  listen_unix: on a Unix socket instead of TCP.  A TCP
 * port taken meanwhile by someone else: try another. */
static int start_proxy(struct proxy *p, int listen_unix, const char *const *args)
{
    static int n_unix;
    for (int attempt = 0; attempt < 5; attempt++) {
        const char *argv[32];
        int argc = 0, pfd[2];
        if (listen_unix)
            snprintf(p->addr, sizeof p->addr, "unix:%s/proxy%d.sock", tmpdir, n_unix++);
        else
            snprintf(p->addr, sizeof p->addr, "127.0.0.1:%d", free_port());
        argv[argc++] = proxy_exe;
        argv[argc++] = "--listen";
        argv[argc++] = p->addr;
        for (int i = 0; args[i] && argc < 30; i++)
            argv[argc++] = args[i];
        argv[argc] = NULL;
        if (pipe(pfd) < 0)
            die("pipe");
        p->pid = fork();
        if (p->pid < 0)
            die("fork");
        if (p->pid == 0) {
            dup2(pfd[1], STDOUT_FILENO);
            close(pfd[0]);
            close(pfd[1]);
            execv(proxy_exe, (char *const *)argv);
            _exit(127);
        }
        close(pfd[1]);
        char line[512];
        size_t got = 0;
        while (got < sizeof line - 1 && !memchr(line, '\n', got)) {
            ssize_t n = recv_within(pfd[0], line + got, sizeof line - 1 - got, 5000);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(pfd[0]);
        line[got] = '\0';
        if (strstr(line, "rgpu-delay: listening on"))
            return 0;
        int st;
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
    }
    printf("FAIL rgpu-delay did not start\n");
    failures++;
    return -1;
}

/* SIGTERM: the proxy must exit 0 within 5 s. */
static void stop_proxy(struct proxy *p, const char *what)
{
    int st = -1;
    pid_t r = 0;
    kill(p->pid, SIGTERM);
    for (int i = 0; i < 500 && (r = waitpid(p->pid, &st, WNOHANG)) == 0; i++)
        usleep(10000);
    if (r == 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
    }
    CHECK(r == p->pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "%s: SIGTERM ends rgpu-delay with status 0 (%s %d)", what,
          r == 0 ? "hung, killed;" : WIFEXITED(st) ? "exit" : "signal",
          r == 0 ? 0 : WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Connect to the proxy and send the mode byte. */
static int dial(const struct proxy *p, char mode)
{
    int fd, one = 1;
    if (strncmp(p->addr, "unix:", 5) == 0) {
        struct sockaddr_un sun = { .sun_family = AF_UNIX };
        snprintf(sun.sun_path, sizeof sun.sun_path, "%s", p->addr + 5);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
            die("connect to the proxy");
    } else {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)atoi(strchr(p->addr, ':') + 1)) };
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect to the proxy");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (write_all(fd, &mode, 1) < 0)
        die("send the mode");
    return fd;
}

/* ---- transfers ------------------------------------------------------------------ */

struct sender {
    int fd;
    size_t size;
    uint64_t seed;
};

static void *send_stream(void *arg)
{
    struct sender *s = arg;
    unsigned char *buf = malloc(1 << 16);
    for (size_t off = 0; buf && off < s->size; off += 1 << 16) {
        size_t n = s->size - off < (1 << 16) ? s->size - off : (1 << 16);
        fill(buf, n, s->seed, off);
        if (write_all(s->fd, buf, n) < 0)
            break;
    }
    shutdown(s->fd, SHUT_WR);
    free(buf);
    return NULL;
}

/* Read the stream of seed from fd until its end: the number of bytes that
 * matched before the first difference or the end (-1: an error). */
static long long read_stream(int fd, uint64_t seed)
{
    unsigned char got[1 << 16], want[1 << 16];
    long long off = 0;
    for (;;) {
        ssize_t n = recv_within(fd, got, sizeof got, 10000);
        if (n == 0)
            return off;
        if (n < 0)
            return -1;
        /* fill() works from offsets that are multiples of 8. */
        size_t head = (size_t)(off % 8);
        unsigned char tmp[(1 << 16) + 8];
        fill(tmp, head + (size_t)n, seed, (uint64_t)(off - (long long)head));
        memcpy(want, tmp + head, (size_t)n);
        for (ssize_t i = 0; i < n; i++)
            if (got[i] != want[i])
                return off + i;
        off += n;
    }
}

/* Send size bytes through an echo connection while reading them back:
 * whether all came back intact and in order; *secs the time it took. */
static int echo_transfer(const struct proxy *p, size_t size, uint64_t seed, double *secs)
{
    int fd = dial(p, 'e');
    struct sender s = { fd, size, seed };
    pthread_t t;
    int64_t t0 = now_ns();
    if (pthread_create(&t, NULL, send_stream, &s) != 0)
        die("thread");
    long long got = read_stream(fd, seed);
    pthread_join(t, NULL);
    *secs = (double)(now_ns() - t0) / 1e9;
    close(fd);
    if (got != (long long)size)
        printf("     (%lld of %zu bytes came back intact)\n", got, size);
    return got == (long long)size;
}

/* n one-byte pings on an echo or 't' connection; rtt[] in ns.  0 or -1. */
static int pings(int fd, int n, int64_t *rtt)
{
    for (int i = 0; i < n; i++) {
        char b = (char)i, r;
        int64_t t0 = now_ns();
        if (write_all(fd, &b, 1) < 0 || recv_within(fd, &r, 1, 5000) != 1 || r != b)
            return -1;
        rtt[i] = now_ns() - t0;
    }
    return 0;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t min_of(const int64_t *v, int n)
{
    int64_t m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static int64_t median_of(const int64_t *v, int n)
{
    int64_t s[64];
    memcpy(s, v, sizeof *v * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp64);
    return s[n / 2];
}

/* ---- the checks ----------------------------------------------------------------- */

static void test_integrity(void)
{
    char tcp[64], unix_to[200];
    struct proxy p;
    double secs;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);
    snprintf(unix_to, sizeof unix_to, "unix:%s", srv.unix_path);

    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, NULL }) == 0) {
        int ok = echo_transfer(&p, 16u << 20, 1, &secs);
        CHECK(ok, "no delay: 16 MiB echoed intact and in order (%.0f MB/s both ways at once)",
              2 * 16.777216 / secs);
        stop_proxy(&p, "no delay");
    }
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "2", NULL }) == 0) {
        int ok = echo_transfer(&p, 6u << 20, 2, &secs);
        CHECK(ok, "2 ms each way: 6 MiB echoed intact and in order (%.2f s)", secs);
        stop_proxy(&p, "2 ms");
    }
    if (start_proxy(&p, 1, (const char *[]){ "--to", unix_to, "--up-delay-ms", "1", NULL }) == 0) {
        int ok = echo_transfer(&p, 3u << 20, 3, &secs);
        CHECK(ok, "Unix socket to Unix socket, 1 ms up: 3 MiB echoed intact (%.2f s)", secs);
        stop_proxy(&p, "unix");
    }
}

static void test_pings(void)
{
    char tcp[64];
    struct proxy p;
    int64_t rtt[20];
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);

    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "5", NULL }) == 0) {
        int fd = dial(&p, 'e');
        int rc = pings(fd, 10, rtt);
        close(fd);
        CHECK(rc == 0 && min_of(rtt, 10) >= 10 * MS && median_of(rtt, 10) < 60 * MS,
              "5 ms each way: every ping >= 10 ms, median < 60 (min %.2f, median %.2f ms)",
              rc ? -1.0 : (double)min_of(rtt, 10) / MS,
              rc ? -1.0 : (double)median_of(rtt, 10) / MS);
        stop_proxy(&p, "5 ms");
    }
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "0.5", NULL }) == 0) {
        int fd = dial(&p, 'e');
        int rc = pings(fd, 20, rtt);
        close(fd);
        CHECK(rc == 0 && min_of(rtt, 20) >= 1 * MS && median_of(rtt, 20) < 40 * MS,
              "0.5 ms each way: every ping >= 1 ms, median < 40 (min %.3f, median %.3f ms)",
              rc ? -1.0 : (double)min_of(rtt, 20) / MS,
              rc ? -1.0 : (double)median_of(rtt, 20) / MS);
        stop_proxy(&p, "0.5 ms");
    }
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, NULL }) == 0) {
        int fd = dial(&p, 'e');
        int rc = pings(fd, 20, rtt);
        close(fd);
        CHECK(rc == 0 && median_of(rtt, 20) < 5 * MS,
              "no delay: median ping < 5 ms (%.3f ms)",
              rc ? -1.0 : (double)median_of(rtt, 20) / MS);
        stop_proxy(&p, "no delay pings");
    }
    /* One way each: the server notes when each byte arrives. */
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--up-delay-ms", "2",
                                              "--down-delay-ms", "12", NULL }) == 0) {
        int64_t sent[10], up[10], down[10];
        int fd = dial(&p, 't'), rc = 0;
        pthread_mutex_lock(&srv.lock);
        srv.narrivals = 0;
        pthread_mutex_unlock(&srv.lock);
        for (int i = 0; i < 10 && rc == 0; i++) {
            char b = (char)i, r;
            sent[i] = now_ns();
            if (write_all(fd, &b, 1) < 0 || recv_within(fd, &r, 1, 5000) != 1)
                rc = -1;
            down[i] = now_ns();
        }
        close(fd);
        pthread_mutex_lock(&srv.lock);
        if (srv.narrivals != 10)
            rc = -1;
        for (int i = 0; i < 10 && rc == 0; i++) {
            up[i] = srv.arrivals[i] - sent[i];
            down[i] -= srv.arrivals[i];
        }
        pthread_mutex_unlock(&srv.lock);
        CHECK(rc == 0 && min_of(up, 10) >= 2 * MS && median_of(up, 10) < 12 * MS &&
                  min_of(down, 10) >= 12 * MS && median_of(down, 10) < 60 * MS,
              "2 ms up, 12 ms down: up >= 2 (median %.2f), down >= 12 (median %.2f ms)",
              rc ? -1.0 : (double)median_of(up, 10) / MS,
              rc ? -1.0 : (double)median_of(down, 10) / MS);
        stop_proxy(&p, "asymmetric");
    }
}

static void test_rate(void)
{
    char tcp[64];
    struct proxy p;
    double secs;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);
    /* 80 Mbit/s is 10 MB/s: 2 MB take 0.2 s on each way (pipelined). */
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--rate", "80", NULL }) == 0) {
        int ok = echo_transfer(&p, 2000000, 4, &secs);
        CHECK(ok && secs >= 0.18 && secs < 5, "80 Mbit/s: 2 MB echoed intact in %.3f s (>= 0.18)",
              secs);
        stop_proxy(&p, "rate");
    }
}

static int wait_eofs(int want, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&srv.lock);
    while (srv.eofs < want && pthread_cond_timedwait(&srv.changed, &srv.lock, &until) == 0)
        ;
    int got = srv.eofs;
    pthread_mutex_unlock(&srv.lock);
    return got >= want;
}

static void test_dead_peers(void)
{
    char tcp[64], dead[64];
    struct proxy p;
    char b;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);

    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "3", NULL }) == 0) {
        /* The server closes: the client sees the end of stream. */
        int fd = dial(&p, 'c');
        int64_t t0 = now_ns();
        ssize_t n = recv_within(fd, &b, 1, 3000);
        double ms = (double)(now_ns() - t0) / MS;
        CHECK(n == 0 || (n < 0 && errno == ECONNRESET),
              "server closes: the client sees the end of stream (%.1f ms)", ms);
        close(fd);

        /* The client closes, then resets: the server sees the end each time. */
        pthread_mutex_lock(&srv.lock);
        int before = srv.eofs;
        pthread_mutex_unlock(&srv.lock);
        fd = dial(&p, 'w');
        write_all(fd, "abc", 3);
        close(fd);
        CHECK(wait_eofs(before + 1, 3000), "client closes: the server sees the end of stream");
        fd = dial(&p, 'w');
        write_all(fd, "abc", 3);
        usleep(20000);
        struct linger lg = { 1, 0 };
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);                          /* RST */
        CHECK(wait_eofs(before + 2, 3000), "client resets: the server's side is closed");

        /* SIGTERM with a connection open: the client sees the end too. */
        fd = dial(&p, 'e');
        write_all(fd, "x", 1);
        n = recv_within(fd, &b, 1, 3000);
        stop_proxy(&p, "with a connection open");
        n = n == 1 ? recv_within(fd, &b, 1, 3000) : -2;
        CHECK(n == 0 || (n < 0 && errno == ECONNRESET),
              "SIGTERM: an open connection's client sees the end of stream");
        close(fd);
    }

    /* Nobody at --to: the client is closed, the proxy goes on serving. */
    snprintf(dead, sizeof dead, "127.0.0.1:%d", free_port());
    if (start_proxy(&p, 0, (const char *[]){ "--to", dead, NULL }) == 0) {
        int fd = dial(&p, 'e');
        ssize_t n = recv_within(fd, &b, 1, 3000);
        CHECK(n == 0 || (n < 0 && errno == ECONNRESET),
              "unreachable target: the client is closed");
        close(fd);
        fd = dial(&p, 'e');
        n = recv_within(fd, &b, 1, 3000);
        CHECK(n == 0 || (n < 0 && errno == ECONNRESET),
              "unreachable target: the proxy still accepts (and closes) the next one");
        close(fd);
        stop_proxy(&p, "unreachable target");
    }
}

struct client {
    const struct proxy *p;
    pthread_barrier_t *go;
    int ok;
    int64_t min_rtt;
    uint64_t seed;
};

static void *concurrent_client(void *arg)
{
    struct client *c = arg;
    int64_t rtt[10];
    int fd = dial(c->p, 'e');
    pthread_barrier_wait(c->go);
    c->ok = pings(fd, 10, rtt) == 0;
    c->min_rtt = c->ok ? min_of(rtt, 10) : 0;
    close(fd);
    double secs;
    c->ok = c->ok && echo_transfer(c->p, 256u << 10, c->seed, &secs);
    return NULL;
}

static void test_concurrent(void)
{
    enum { N = 8 };
    char tcp[64];
    struct proxy p;
    struct client c[N];
    pthread_t t[N];
    pthread_barrier_t go;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "5", NULL }) != 0)
        return;
    pthread_barrier_init(&go, NULL, N + 1);
    for (int i = 0; i < N; i++) {
        c[i] = (struct client){ &p, &go, 0, 0, 100 + (uint64_t)i };
        if (pthread_create(&t[i], NULL, concurrent_client, &c[i]) != 0)
            die("thread");
    }
    pthread_barrier_wait(&go);
    int64_t t0 = now_ns();
    int ok = 1;
    int64_t min_rtt = INT64_MAX;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok &= c[i].ok;
        min_rtt = c[i].min_rtt < min_rtt ? c[i].min_rtt : min_rtt;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    pthread_barrier_destroy(&go);
    /* One after another, 8 x 10 pings of 10 ms would take 0.8 s. */
    CHECK(ok && min_rtt >= 10 * MS && secs < 0.6,
          "%d connections at once, 10 pings and 256 KiB each: intact, pings >= 10 ms, "
          "%.2f s in all (< 0.6; one after another >= 0.8)", N, secs);
    stop_proxy(&p, "concurrent");
}

static long proc_max(const char *path)
{
    long a, b, c = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld %ld %ld", &a, &b, &c) != 3)
            c = 0;
        fclose(f);
    }
    return c > 0 ? c : 32L << 20;
}

/* A server that does not read: the client's writes must stall after the
 * socket buffers and the proxy's 1 MiB queue fill, and nothing is lost. */
static void test_backpressure(void)
{
    char tcp[64];
    struct proxy p;
    snprintf(tcp, sizeof tcp, "127.0.0.1:%d", srv.tcp_port);
    if (start_proxy(&p, 0, (const char *[]){ "--to", tcp, "--delay-ms", "1", "--queue-mb", "1",
                                              NULL }) != 0)
        return;
    /* Socket buffers on the way: client send, proxy receive, proxy send,
     * server receive; each at most the kernel's maximum. */
    long buffers = 2 * (proc_max("/proc/sys/net/ipv4/tcp_rmem") +
                        proc_max("/proc/sys/net/ipv4/tcp_wmem"));
    long bound = buffers + (2L << 20), limit = bound + (64L << 20);
    pthread_mutex_lock(&srv.lock);
    srv.released = 0;
    pthread_mutex_unlock(&srv.lock);
    int fd = dial(&p, 'h');
    unsigned char buf[1 << 16];
    long sent = 0;                          /* bytes the socket took */
    while (sent < limit) {
        struct pollfd pf = { fd, POLLOUT, 0 };
        size_t at = (size_t)sent % sizeof buf;
        if (poll(&pf, 1, 300) <= 0)
            break;                          /* stalled for 300 ms */
        if (at == 0)
            fill(buf, sizeof buf, 7, (uint64_t)sent);
        ssize_t w = send(fd, buf + at, sizeof buf - at, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            break;
        if (w > 0)
            sent += (long)w;
    }
    CHECK(sent < bound, "a server that does not read stalls the client after %.1f MiB "
          "(bound %.0f MiB: buffers + 1 MiB queue)", (double)sent / 1048576,
          (double)bound / 1048576);
    pthread_mutex_lock(&srv.lock);
    srv.released = 1;
    pthread_cond_broadcast(&srv.changed);
    pthread_mutex_unlock(&srv.lock);
    shutdown(fd, SHUT_WR);
    long long got = read_stream(fd, 7);
    CHECK(got == sent, "then all %ld bytes come back intact (%lld)", sent, got);
    close(fd);
    stop_proxy(&p, "back-pressure");
}

static void test_usage(void)
{
    static const char *const bad[][8] = {
        { "--listen", "127.0.0.1:1", "--to", "127.0.0.1:2", "--delay-ms", "-1", NULL },
        { "--listen", "127.0.0.1:1", "--to", "127.0.0.1:2", "--rate", "fast", NULL },
        { "--listen", "127.0.0.1:1", NULL },
        { "--listen", "127.0.0.1:1", "--to", "host:0", NULL },
        { "--listen", "127.0.0.1:1", "--to", "127.0.0.1:2", "extra", NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[10] = { proxy_exe };
        for (int j = 0; bad[i][j]; j++)
            argv[j + 1] = bad[i][j];
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, STDERR_FILENO);
            execv(proxy_exe, (char *const *)argv);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad usage %zu exits 2", i + 1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-rgpu-delay\n", argv[0]);
        return 2;
    }
    proxy_exe = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/rgpu-delay-test.XXXXXX");
    if (!mkdtemp(tmpdir))
        die("mkdtemp");
    start_server();

    int64_t t0 = now_ns();
    test_usage();
    test_integrity();
    test_pings();
    test_rate();
    test_dead_peers();
    test_concurrent();
    test_backpressure();

    unlink(srv.unix_path);
    rmdir(tmpdir);
    printf("%s in %.1f s\n", failures ? "FAILED" : "passed", (double)(now_ns() - t0) / 1e9);
    return failures ? 1 : 0;
}
