/* rgpu-delay: a TCP (or Unix-socket) proxy that behaves like a slower link,
 * to measure rgpu as it would run across a network while rgpud and the
 * program share one machine.  `rgpu-delay --help` is its manual.
 *
 * Model of the link, per direction: a chunk read at time t leaves the
 * link at  max(t, when the link is free) + its size / rate  and arrives one
 * fixed delay later; bytes arrive in order, the end of the stream (FIN) is
 * delayed like data.  Each direction of each connection is one thread that
 * reads its source, stamps each chunk, and writes it out when its time
 * comes (ppoll with a nanosecond timeout and 1 µs timer slack), so small
 * messages keep their delay to within scheduling noise.  With no delay and
 * no rate a chunk is written straight from the read buffer (no copy, no
 * queue) and loopback speed is kept.  A direction stops reading while it
 * holds more than --queue-mb of delayed bytes: the sender then feels
 * back-pressure, and memory stays bounded.
 */
#include "rgpu_addr.h"
#include "rgpu_log.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_MAX (256u << 10)   /* bytes per read without a rate cap */
#define STOP_GRACE_S 3          /* how long SIGTERM waits for connections */

static const char usage_text[] =
"NAME\n"
"    rgpu-delay - a delaying proxy that emulates a network link\n"
"\n"
"SYNOPSIS\n"
"    rgpu-delay --listen ADDR --to ADDR [--delay-ms MS]\n"
"               [--up-delay-ms MS] [--down-delay-ms MS]\n"
"               [--rate MBIT] [--up-rate MBIT] [--down-rate MBIT]\n"
"               [--queue-mb N] [-v]\n"
"\n"
"DESCRIPTION\n"
"    Accepts connections on --listen and connects each one to --to, then\n"
"    copies bytes both ways, holding each chunk back by a fixed one-way\n"
"    delay and, optionally, a bandwidth cap.  Put it between a client and\n"
"    rgpud to see how a program runs over a link with a given round trip:\n"
"\n"
"        rgpud --listen 127.0.0.1:9713 ...\n"
"        rgpu-delay --listen 127.0.0.1:9714 --to 127.0.0.1:9713 --delay-ms 0.5\n"
"        rgpu run --server 127.0.0.1:9714 -- python3 train.py   # 1 ms RTT\n"
"\n"
"    'up' is from the connecting client towards --to, 'down' the way back;\n"
"    the round trip the link adds is up + down.  Bytes arrive in order and\n"
"    intact; a peer's end of stream reaches the other side after the same\n"
"    delay; a peer that dies closes the other side.  Connections are proxied\n"
"    independently, any number at once.  On TCP both sides use TCP_NODELAY.\n"
"    Once listening it prints one line, 'rgpu-delay: listening on ADDR ...',\n"
"    on standard output.\n"
"\n"
"    ADDR is the form rgpu uses everywhere: HOST:PORT, [IPV6]:PORT, HOST\n"
"    (port 9713), or unix:/PATH (a Unix socket; one to listen on is made\n"
"    mode 0600 and removed at exit).\n"
"\n"
"OPTIONS\n"
"    --listen ADDR        where clients connect\n"
"    --to ADDR            where each connection is forwarded (rgpud)\n"
"    --delay-ms MS        one-way delay in each direction (default 0);\n"
"                         fractions allowed: 0.5 gives a 1 ms round trip\n"
"    --up-delay-ms MS     one-way delay client -> target (overrides --delay-ms)\n"
"    --down-delay-ms MS   one-way delay target -> client (overrides --delay-ms)\n"
"    --rate MBIT          bandwidth cap per direction, in 10^6 bits/s\n"
"                         (default: none); a chunk occupies the link for\n"
"                         size / rate before its delay starts\n"
"    --up-rate MBIT       cap client -> target (overrides --rate)\n"
"    --down-rate MBIT     cap target -> client (overrides --rate)\n"
"    --queue-mb N         at most N MiB of delayed bytes per direction and\n"
"                         connection before reading stops (default 64)\n"
"    -v, --verbose        log each connection and its byte counts\n"
"    -h, --help           this text\n"
"\n"
"SIGNALS\n"
"    SIGTERM, SIGINT: stop accepting, close every connection (both sides\n"
"    see the end of stream), wait up to 3 s for them, exit 0.\n"
"\n"
"EXIT STATUS\n"
"    0 after SIGTERM or SIGINT; 1 when it cannot listen; 2 for bad usage.\n";

/* ---- settings and time ----------------------------------------------------------- */

struct link {
    uint64_t delay_ns;
    double ns_per_byte;     /* 0: no cap */
};

static struct {
    struct rgpu_addr listen, to;
    char listen_text[300], to_text[300];
    struct link up, down;
    size_t max_queue;
} cfg;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- connections ------------------------------------------------------------------ */

/* A chunk of one direction's stream, waiting for its time; len 0 with eof
 * set is the end of the stream. */
struct chunk {
    struct chunk *next;
    uint64_t due;
    size_t len, off;
    int eof;
    char data[];
};

struct conn;

struct dir {
    struct conn *conn;
    const char *name;               /* "up" or "down", for the log */
    const struct link *link;
    int src, dst;
    uint64_t link_free;             /* when the capped link is free again */
    struct chunk *head, *tail;
    size_t queued;                  /* bytes held, chunk headers included */
    unsigned long long bytes;       /* delivered */
};

struct conn {
    struct conn *prev, *next;       /* the registry, under reg.lock */
    unsigned id;
    int cfd, sfd;                   /* client side, target side (-1: not yet) */
    int refs;                       /* threads still using it */
    struct dir up, down;
};

/* Every open connection, so that SIGTERM can end them. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t gone;
    struct conn *list;
    int count;
    int stopping;
    unsigned next_id;
} reg = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0 };

static void drop_queue(struct dir *d)
{
    while (d->head) {
        struct chunk *c = d->head;
        d->head = c->next;
        free(c);
    }
    d->tail = NULL;
    d->queued = 0;
}

/* When a chunk of n bytes read at t arrives on the other side. */
static uint64_t due_time(struct dir *d, uint64_t t, size_t n)
{
    uint64_t start = t > d->link_free ? t : d->link_free;
    d->link_free = start + (uint64_t)llround((double)n * d->link->ns_per_byte);
    return d->link_free + d->link->delay_ns;
}

/* Queue n bytes (n 0: the end of the stream) read at t.  -1: no memory. */
static int enqueue(struct dir *d, const char *data, size_t n, uint64_t t, int eof)
{
    struct chunk *c = malloc(sizeof *c + n);
    if (!c)
        return -1;
    c->next = NULL;
    c->due = due_time(d, t, n);
    c->len = n;
    c->off = 0;
    c->eof = eof;
    memcpy(c->data, data, n);
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->queued += sizeof *c + n;
    return 0;
}

/* Write out every chunk whose time has come.  0: done for now (*blocked
 * when the destination's buffer is full); 1: the end of the stream was
 * passed on; -1: the destination is gone. */
static int flush_due(struct dir *d, uint64_t now, int *blocked)
{
    *blocked = 0;
    while (d->head && d->head->due <= now) {
        struct chunk *c = d->head;
        if (c->eof) {
            shutdown(d->dst, SHUT_WR);
            return 1;
        }
        while (c->off < c->len) {
            ssize_t w = send(d->dst, c->data + c->off, c->len - c->off,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                *blocked = 1;
                return 0;
            }
            if (w < 0)
                return -1;
            c->off += (size_t)w;
            d->bytes += (unsigned long long)w;
        }
        d->head = c->next;
        if (!d->head)
            d->tail = NULL;
        d->queued -= sizeof *c + c->len;
        free(c);
    }
    return 0;
}

/* Data just read: with no delay, no cap and nothing queued it goes
 * straight out; what the destination does not take at once is queued. */
static int take(struct dir *d, const char *buf, size_t n, uint64_t t)
{
    if (!d->head && d->link->delay_ns == 0 && d->link->ns_per_byte == 0) {
        while (n > 0) {
            ssize_t w = send(d->dst, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (w < 0)
                return -1;
            buf += w;
            n -= (size_t)w;
            d->bytes += (unsigned long long)w;
        }
        if (n == 0)
            return 0;
    }
    return enqueue(d, buf, n, t, 0);
}

/* The size of one read: about 1 ms of link time under a cap, so that a
 * capped stream goes out smoothly rather than in large bursts. */
static size_t read_size(const struct link *l)
{
    if (l->ns_per_byte == 0)
        return READ_MAX;
    double per_ms = 1e6 / l->ns_per_byte;
    return per_ms < 1024 ? 1024 : per_ms > READ_MAX ? READ_MAX : (size_t)per_ms;
}

/* One direction of one connection, until its end of stream has been passed
 * on or either side is gone. */
static void run_dir(struct dir *d)
{
    size_t cap = read_size(d->link);
    char *buf = malloc(cap);
    int src_done = 0, blocked = 0, oom = 0, failed = 0;

    if (!buf) {
        rgpu_error("connection %u %s: out of memory", d->conn->id, d->name);
        shutdown(d->src, SHUT_RDWR);
        shutdown(d->dst, SHUT_RDWR);
        return;
    }
    for (;;) {
        uint64_t now = now_ns();
        int r = flush_due(d, now, &blocked);
        if (r < 0) {
            if (errno != EPIPE && errno != ECONNRESET)
                rgpu_warn("connection %u %s: write: %s", d->conn->id, d->name,
                          strerror(errno));
            break;
        }
        if (r > 0)
            break;

        struct pollfd p[2];
        int n = 0, want_read = !src_done && d->queued < cfg.max_queue;
        if (want_read)
            p[n++] = (struct pollfd){ d->src, POLLIN, 0 };
        if (blocked)
            p[n++] = (struct pollfd){ d->dst, POLLOUT, 0 };
        struct timespec ts, *tp = NULL;
        if (d->head && !blocked) {       /* flush_due left it: not due yet */
            uint64_t wait = d->head->due - now;
            ts.tv_sec = (time_t)(wait / 1000000000u);
            ts.tv_nsec = (long)(wait % 1000000000u);
            tp = &ts;
        }
        if (ppoll(p, (nfds_t)n, tp, NULL) < 0) {
            if (errno == EINTR)
                continue;
            rgpu_error("connection %u %s: poll: %s", d->conn->id, d->name, strerror(errno));
            failed = 1;
            break;
        }
        if (!want_read || !p[0].revents)
            continue;
        ssize_t got = recv(d->src, buf, cap, MSG_DONTWAIT);
        uint64_t t = now_ns();
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got <= 0) {
            /* The end of the stream, or the source is gone (reset): what
             * is queued still arrives, then the destination sees the end. */
            if (got < 0 && errno != ECONNRESET)
                rgpu_warn("connection %u %s: read: %s", d->conn->id, d->name,
                          strerror(errno));
            src_done = 1;
            if (enqueue(d, "", 0, t, 1) < 0) {
                oom = 1;
                break;
            }
            continue;
        }
        if (take(d, buf, (size_t)got, t) < 0) {
            oom = errno == ENOMEM;
            break;
        }
    }
    if (oom || failed) {
        /* Our own failure, not a peer's: end both ways, so that neither
         * side waits for a stream this direction no longer carries. */
        if (oom)
            rgpu_error("connection %u %s: out of memory", d->conn->id, d->name);
        shutdown(d->src, SHUT_RDWR);
        shutdown(d->dst, SHUT_RDWR);
    }
    drop_queue(d);
    free(buf);
}

/* A thread is done with c: the last one closes both sides and frees it. */
static void release(struct conn *c)
{
    pthread_mutex_lock(&reg.lock);
    if (--c->refs > 0) {
        /* The other direction goes on: after a half-close its side still
         * talks, and when a side is gone it reads that itself. */
        pthread_mutex_unlock(&reg.lock);
        return;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        reg.list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    reg.count--;
    pthread_cond_broadcast(&reg.gone);
    pthread_mutex_unlock(&reg.lock);
    rgpu_info("connection %u closed: %llu bytes up, %llu down", c->id, c->up.bytes,
              c->down.bytes);
    close(c->cfd);
    if (c->sfd >= 0)
        close(c->sfd);
    free(c);
}

static void *down_main(void *arg)
{
    struct conn *c = arg;
    run_dir(&c->down);
    release(c);
    return NULL;
}

/* A connection's first thread: connect to the target (here, so that a slow
 * target never holds up the accept loop), start the way down, run the way
 * up. */
static void *up_main(void *arg)
{
    struct conn *c = arg;
    char err[300];
    pthread_t t;
    pthread_attr_t attr;

    int fd = rgpu_addr_dial(&cfg.to, 10000, err, sizeof err);
    if (fd < 0) {
        rgpu_error("connection %u: cannot reach %s: %s", c->id, cfg.to_text, err);
        c->refs = 1;
        release(c);
        return NULL;
    }
    pthread_mutex_lock(&reg.lock);
    c->sfd = fd;
    int stopping = reg.stopping;
    pthread_mutex_unlock(&reg.lock);
    c->up = (struct dir){ .conn = c, .name = "up", .link = &cfg.up, .src = c->cfd, .dst = fd };
    c->down = (struct dir){ .conn = c, .name = "down", .link = &cfg.down, .src = fd,
                            .dst = c->cfd };
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (stopping || pthread_create(&t, &attr, down_main, c) != 0) {
        if (!stopping)
            rgpu_error("connection %u: cannot start a thread", c->id);
        pthread_attr_destroy(&attr);
        c->refs = 1;
        release(c);
        return NULL;
    }
    pthread_attr_destroy(&attr);
    run_dir(&c->up);
    release(c);
    return NULL;
}

static void start_conn(int cfd)
{
    int one = 1;
    pthread_t t;
    pthread_attr_t attr;
    struct conn *c = calloc(1, sizeof *c);

    if (!c) {
        rgpu_error("out of memory: refusing a connection");
        close(cfd);
        return;
    }
    if (cfg.listen.kind == RGPU_ADDR_TCP)
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->cfd = cfd;
    c->sfd = -1;
    c->refs = 2;
    pthread_mutex_lock(&reg.lock);
    c->id = ++reg.next_id;
    c->next = reg.list;
    if (reg.list)
        reg.list->prev = c;
    reg.list = c;
    reg.count++;
    pthread_mutex_unlock(&reg.lock);
    rgpu_info("connection %u opened", c->id);

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, up_main, c) != 0) {
        rgpu_error("cannot start a thread: refusing a connection");
        c->refs = 1;
        release(c);
    }
    pthread_attr_destroy(&attr);
}

/* ---- the listener ----------------------------------------------------------------- */

/* SIGTERM: end every connection (both sides see the end of stream) and
 * wait a little for their threads. */
static void stop_all(void)
{
    struct timespec until;
    pthread_mutex_lock(&reg.lock);
    reg.stopping = 1;
    for (struct conn *c = reg.list; c; c = c->next) {
        shutdown(c->cfd, SHUT_RDWR);
        if (c->sfd >= 0)
            shutdown(c->sfd, SHUT_RDWR);
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STOP_GRACE_S;
    while (reg.count > 0 && pthread_cond_timedwait(&reg.gone, &reg.lock, &until) == 0)
        ;
    if (reg.count > 0)
        rgpu_warn("%d connections still closing at exit", reg.count);
    pthread_mutex_unlock(&reg.lock);
}

static int serve(int lfd, int sigfd)
{
    for (;;) {
        struct pollfd p[2] = { { lfd, POLLIN, 0 }, { sigfd, POLLIN, 0 } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rgpu_error("poll: %s", strerror(errno));
            return 1;
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
                rgpu_info("signal %u: stopping", si.ssi_signo);
            return 0;
        }
        if (!p[0].revents)
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd >= 0) {
            start_conn(cfd);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            rgpu_warn("accept: %s (waiting 100 ms)", strerror(errno));
            usleep(100000);
        } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED &&
                   errno != EPROTO) {
            rgpu_error("accept: %s", strerror(errno));
            return 1;
        }
    }
}

/* ---- the command line ------------------------------------------------------------- */

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "rgpu-delay: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(rgpu-delay --help for usage)\n");
    exit(2);
}

/* A number >= 0 and <= max, or exit 2 naming the option. */
static double number(const char *opt, const char *s, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0 || v > max) {
        fprintf(stderr, "rgpu-delay: %s '%s': want a number from 0 to %g\n", opt, s, max);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv, int *verbose)
{
    enum { O_LISTEN = 256, O_TO, O_DELAY, O_UPD, O_DOWND, O_RATE, O_UPR, O_DOWNR, O_QUEUE };
    static const struct option opts[] = {
        { "listen", required_argument, NULL, O_LISTEN },
        { "to", required_argument, NULL, O_TO },
        { "delay-ms", required_argument, NULL, O_DELAY },
        { "up-delay-ms", required_argument, NULL, O_UPD },
        { "down-delay-ms", required_argument, NULL, O_DOWND },
        { "rate", required_argument, NULL, O_RATE },
        { "up-rate", required_argument, NULL, O_UPR },
        { "down-rate", required_argument, NULL, O_DOWNR },
        { "queue-mb", required_argument, NULL, O_QUEUE },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *listen = NULL, *to = NULL;
    double delay = 0, up_delay = -1, down_delay = -1, rate = 0, up_rate = -1, down_rate = -1;
    double queue_mb = 64;
    char err[300];
    int o;

    while ((o = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        switch (o) {
        case O_LISTEN: listen = optarg; break;
        case O_TO: to = optarg; break;
        case O_DELAY: delay = number("--delay-ms", optarg, 60000); break;
        case O_UPD: up_delay = number("--up-delay-ms", optarg, 60000); break;
        case O_DOWND: down_delay = number("--down-delay-ms", optarg, 60000); break;
        case O_RATE: rate = number("--rate", optarg, 1e7); break;
        case O_UPR: up_rate = number("--up-rate", optarg, 1e7); break;
        case O_DOWNR: down_rate = number("--down-rate", optarg, 1e7); break;
        case O_QUEUE: queue_mb = number("--queue-mb", optarg, 65536); break;
        case 'v': *verbose = 1; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        default: usage_error("%s", "unknown option");
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!listen || !to)
        usage_error("%s", "--listen ADDR and --to ADDR are both needed");
    if (rgpu_addr_parse(listen, &cfg.listen, err, sizeof err) < 0)
        usage_error("--listen: %s", err);
    if (rgpu_addr_parse(to, &cfg.to, err, sizeof err) < 0)
        usage_error("--to: %s", err);
    if (queue_mb <= 0)
        usage_error("%s", "--queue-mb must be more than 0");
    rgpu_addr_format(&cfg.listen, cfg.listen_text, sizeof cfg.listen_text);
    rgpu_addr_format(&cfg.to, cfg.to_text, sizeof cfg.to_text);

    up_delay = up_delay >= 0 ? up_delay : delay;
    down_delay = down_delay >= 0 ? down_delay : delay;
    up_rate = up_rate >= 0 ? up_rate : rate;
    down_rate = down_rate >= 0 ? down_rate : rate;
    cfg.up.delay_ns = (uint64_t)llround(up_delay * 1e6);
    cfg.down.delay_ns = (uint64_t)llround(down_delay * 1e6);
    /* MBIT = 10^6 bits/s: 8000 / MBIT ns per byte. */
    cfg.up.ns_per_byte = up_rate > 0 ? 8000.0 / up_rate : 0;
    cfg.down.ns_per_byte = down_rate > 0 ? 8000.0 / down_rate : 0;
    cfg.max_queue = (size_t)(queue_mb * 1048576.0);
}

static void describe_rate(char *buf, size_t len, const struct link *l)
{
    if (l->ns_per_byte == 0)
        snprintf(buf, len, "no cap");
    else
        snprintf(buf, len, "%g Mbit/s", 8000.0 / l->ns_per_byte);
}

int main(int argc, char **argv)
{
    int verbose = 0;
    char err[400], up_rate[32], down_rate[32];
    sigset_t sigs;

    parse_args(argc, argv, &verbose);
    rgpu_log_init("rgpu-delay", verbose ? "info" : "warn");

    /* SIGTERM and SIGINT arrive through a descriptor the accept loop
     * watches; every thread inherits the blocked mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    int sigfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);
    /* Wake-ups within a microsecond of the due time (the default slack is
     * 50 µs); threads inherit it. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (sigfd < 0) {
        fprintf(stderr, "rgpu-delay: signalfd: %s\n", strerror(errno));
        return 1;
    }

    int lfd = rgpu_addr_listen(&cfg.listen, 0600, (gid_t)-1, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, "rgpu-delay: %s\n", err);
        return 1;
    }
    describe_rate(up_rate, sizeof up_rate, &cfg.up);
    describe_rate(down_rate, sizeof down_rate, &cfg.down);
    printf("rgpu-delay: listening on %s, forwarding to %s; up %g ms (%s), down %g ms (%s)\n",
           cfg.listen_text, cfg.to_text, (double)cfg.up.delay_ns / 1e6, up_rate,
           (double)cfg.down.delay_ns / 1e6, down_rate);
    fflush(stdout);

    int rc = serve(lfd, sigfd);
    close(lfd);
    if (cfg.listen.kind == RGPU_ADDR_UNIX)
        unlink(cfg.listen.path);
    stop_all();
    return rc;
}
