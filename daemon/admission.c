/* The listener's bounds on connections that are not let in yet.
 *
 * Every connection costs a session process until its client is let in
 * (hello, then peer credentials or the key challenge), which may take the
 * hello timeout.  Without bounds of their own, such connections shared
 * the session cap with the clients let in, and a peer without any key
 * that kept reconnecting held the slots that legitimate clients needed.
 * So, per source (an IPv4 address, an IPv6 /64, a Unix-socket uid):
 *
 *  - at most per_source "startups" (connections not yet let in) at once,
 *    and max_startups from all sources together; the clients let in have
 *    their own cap (--max-sessions, rgpud.c);
 *  - a connection beyond its source's bound waits in the listener (an
 *    open descriptor, no process) until one of that source's startups
 *    ends, up to the hello timeout; beyond as many waiting again, it is
 *    closed at once;
 *  - on TCP, a connection that ends before it was let in is a failed
 *    attempt: each source may fail max_failures times a minute (a token
 *    bucket refilling that many per minute); beyond, its connections are
 *    closed at accept, before any process is made, until it may fail
 *    again.  On the Unix socket the kernel names the peer: nothing to
 *    guess, no such limit.
 *
 * Only the listener's main loop calls these; nothing here waits. */
#include "rgpud.h"
#include "rgpu_log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FAILURE_WINDOW_MS 60000L
/* Refusals of one source are logged at most this often. */
#define WARN_EVERY_MS 10000L

struct source {
    unsigned char key[20];      /* family tag, then address (IPv6: /64) or uid */
    char text[64];              /* for the log */
    int used;
    int tcp;
    int startups;               /* started, not yet let in or gone */
    int waiting;                /* queued here */
    double failures_left;       /* TCP: failed attempts allowed now */
    long refilled_ms;
    long warned_ms;
};

struct waiter {
    int fd;
    int source;
    long since_ms;
};

static struct {
    struct source *src;
    int nsrc;
    struct waiter *queue;
    int nqueue, queue_cap;
    int startups;               /* all sources */
    int max_startups, per_source, max_failures;
    long wait_ms;
} A;

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int admission_init(const struct rgpud_options *opt)
{
    A.max_startups = opt->max_startups;
    A.per_source = opt->per_source_startups;
    A.max_failures = opt->max_auth_failures;
    A.wait_ms = opt->hello_timeout_s * 1000L;
    A.queue_cap = opt->max_startups;
    /* Entries with connections are at most startups plus waiting; the
     * rest remember failures, and are reused oldest-forgiven first. */
    A.nsrc = 2 * (A.max_startups + A.queue_cap) + 1024;
    A.src = calloc((size_t)A.nsrc, sizeof *A.src);
    A.queue = calloc((size_t)A.queue_cap, sizeof *A.queue);
    return A.src && A.queue ? 0 : -1;
}

/* The source's key and text: an IPv4 address (IPv4-mapped IPv6 too), an
 * IPv6 /64 (one host usually has the whole prefix), or the uid of a
 * Unix-socket peer.  -1 when the kernel does not say. */
static int source_key(int fd, const struct sockaddr_storage *ss, unsigned char key[20],
                      char *text, size_t textlen, int *tcp)
{
    char addr[INET6_ADDRSTRLEN];
    memset(key, 0, 20);
    *tcp = 1;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        key[0] = 4;
        memcpy(key + 1, &in->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            key[0] = 4;
            memcpy(key + 1, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, in6->sin6_addr.s6_addr, 8);
        }
    } else if (ss->ss_family == AF_UNIX) {
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
            return -1;
        key[0] = 1;
        memcpy(key + 1, &cr.uid, sizeof cr.uid);
        snprintf(text, textlen, "uid %ld", (long)cr.uid);
        *tcp = 0;
        return 0;
    } else {
        return -1;
    }
    if (key[0] == 4) {
        inet_ntop(AF_INET, key + 1, addr, sizeof addr);
        snprintf(text, textlen, "%s", addr);
    } else {
        struct in6_addr net = { 0 };
        memcpy(net.s6_addr, key + 1, 8);
        inet_ntop(AF_INET6, &net, addr, sizeof addr);
        snprintf(text, textlen, "%s/64", addr);
    }
    return 0;
}

/* Bring a source's allowance of failures up to date. */
static void refill(struct source *s, long now)
{
    if (!s->tcp)
        return;
    s->failures_left += (double)(now - s->refilled_ms) * A.max_failures / FAILURE_WINDOW_MS;
    if (s->failures_left > A.max_failures)
        s->failures_left = A.max_failures;
    s->refilled_ms = now;
}

/* An entry to reuse: an unused one, else the idle one closest to having
 * forgiven its failures.  -1 when every entry has connections (cannot
 * happen: the table is larger than startups and waiting together). */
static int free_entry(long now)
{
    int best = -1;
    for (int i = 0; i < A.nsrc; i++) {
        struct source *s = &A.src[i];
        if (!s->used)
            return i;
        if (s->startups || s->waiting)
            continue;
        refill(s, now);
        if (best < 0 || s->failures_left > A.src[best].failures_left)
            best = i;
    }
    return best;
}

int admission_source(int fd, const struct sockaddr_storage *ss)
{
    unsigned char key[20];
    char text[64];
    int tcp, i;
    long now = now_ms();
    if (source_key(fd, ss, key, text, sizeof text, &tcp) < 0)
        return -1;
    for (i = 0; i < A.nsrc; i++)
        if (A.src[i].used && memcmp(A.src[i].key, key, sizeof key) == 0)
            return i;
    if ((i = free_entry(now)) < 0)
        return -1;
    struct source *s = &A.src[i];
    memset(s, 0, sizeof *s);
    memcpy(s->key, key, sizeof key);
    snprintf(s->text, sizeof s->text, "%s", text);
    s->used = 1;
    s->tcp = tcp;
    s->failures_left = A.max_failures;
    s->refilled_ms = now;
    s->warned_ms = now - WARN_EVERY_MS;
    return i;
}

const char *admission_source_text(int source)
{
    return source >= 0 && source < A.nsrc ? A.src[source].text : "an unknown source";
}

/* A refusal of this source, logged at most every WARN_EVERY_MS. */
__attribute__((format(printf, 2, 3)))
static void warn_source(struct source *s, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    long now = now_ms();
    if (now - s->warned_ms < WARN_EVERY_MS)
        return;
    s->warned_ms = now;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rgpu_warn("%s: %s (logged once per %ld s)", s->text, msg, WARN_EVERY_MS / 1000);
}

static int penalised(struct source *s)
{
    refill(s, now_ms());
    if (!s->tcp || s->failures_left >= 1)
        return 0;
    warn_source(s, "more than %d failed attempts to get in within a minute "
                "(--max-auth-failures): its connections are closed for now", A.max_failures);
    return 1;
}

static int may_start(const struct source *s)
{
    return s->startups < A.per_source && A.startups < A.max_startups;
}

enum admit admission_decide(int source)
{
    if (source < 0)
        return ADMIT_DROP;
    struct source *s = &A.src[source];
    if (penalised(s))
        return ADMIT_DROP;
    if (may_start(s))
        return ADMIT_START;
    if (s->waiting < A.per_source && A.nqueue < A.queue_cap)
        return ADMIT_WAIT;
    if (s->startups >= A.per_source) {
        warn_source(s, "%d connections not let in yet, and as many waiting "
                    "(--per-source-startups): closing more", A.per_source);
        return ADMIT_DROP;
    }
    return ADMIT_BUSY;
}

void admission_started(int source)
{
    A.src[source].startups++;
    A.startups++;
}

void admission_ended(int source, int failed)
{
    struct source *s = &A.src[source];
    if (s->startups > 0)
        s->startups--;
    if (A.startups > 0)
        A.startups--;
    if (failed && s->tcp) {
        refill(s, now_ms());
        s->failures_left -= 1;
    }
}

void admission_wait(int fd, int source)
{
    A.queue[A.nqueue++] = (struct waiter){ fd, source, now_ms() };
    A.src[source].waiting++;
}

static void unqueue(int i)
{
    A.src[A.queue[i].source].waiting--;
    memmove(&A.queue[i], &A.queue[i + 1], (size_t)(A.nqueue - i - 1) * sizeof A.queue[0]);
    A.nqueue--;
}

int admission_next(int *source)
{
    for (int i = 0; i < A.nqueue; i++) {
        struct source *s = &A.src[A.queue[i].source];
        int fd = A.queue[i].fd;
        if (penalised(s)) {
            unqueue(i--);
            close(fd);
        } else if (may_start(s)) {
            *source = A.queue[i].source;
            unqueue(i);
            return fd;
        }
    }
    return -1;
}

int admission_expire(void)
{
    long now = now_ms(), next = -1;
    for (int i = 0; i < A.nqueue; i++) {
        long left = A.queue[i].since_ms + A.wait_ms - now;
        if (left <= 0) {
            warn_source(&A.src[A.queue[i].source], "a connection waited %ld s for a startup "
                        "slot: closed", A.wait_ms / 1000);
            close(A.queue[i].fd);
            unqueue(i--);
        } else if (next < 0 || left < next) {
            next = left;
        }
    }
    return next < 0 ? -1 : next > 60000 ? 60000 : (int)next;
}

void admission_close_in_child(void)
{
    for (int i = 0; i < A.nqueue; i++)
        close(A.queue[i].fd);
}
