/* rgpud: the GPU-side daemon.
 *
 * The listener accepts connections and forks one session process per
 * client (session.c); it never loads or calls CUDA itself, since CUDA is
 * undefined in the child of a process that initialised it. */
#include "rgpud.h"
#include "sandbox.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t nsessions;
static volatile sig_atomic_t stopping;
static volatile sig_atomic_t listen_fd = -1;    /* on_stop shuts it down */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rgpud [options]\n"
            "  -l, --listen ADDR:PORT   address to listen on (default 127.0.0.1:%d)\n"
            "  -L, --lib-dir DIR        load the CUDA libraries from DIR instead of the\n"
            "                           system's (env RGPUD_LIB_DIR; the tests use it)\n"
            "  -m, --max-sessions N     refuse clients beyond N concurrent sessions (64)\n"
            "  -s, --spin-us N          poll N microseconds for a client's next request\n"
            "                           before sleeping (env RGPUD_SPIN_US; default 50\n"
            "                           with 4 or more CPUs, else 0)\n"
            "      --session-memory-limit SIZE\n"
            "                           private memory of one session, as RLIMIT_DATA\n"
            "                           (K, M, G, T suffixes, or unlimited; default 64G)\n"
            "      --no-sandbox         run sessions unconfined (debugging only)\n"
            "  -f, --foreground         stay in the foreground (default)\n"
            "  -v, --verbose            more logging (repeat for debug; env RGPU_LOG)\n"
            "  -h, --help               this text\n",
            RGPU_DEFAULT_PORT);
}

static void on_child(int sig)
{
    int saved = errno, status;
    pid_t pid;
    (void)sig;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        nsessions--;
        sandbox_note_exit(pid, status);
    }
    errno = saved;
}

/* Setting the flag is not enough: a SIGTERM that lands while on_child runs
 * (whose SA_RESTART then restarts accept) or just before accept() is
 * entered would leave the listener blocked for good.  Shutting the
 * listening socket down makes the pending and every later accept() fail
 * at once. */
static void on_stop(int sig)
{
    int saved = errno;
    (void)sig;
    stopping = 1;
    if (listen_fd >= 0)
        shutdown(listen_fd, SHUT_RDWR);
    errno = saved;
}

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return 0;
}

static int listen_on(const char *spec)
{
    char host[256], port[32];
    const char *colon = strrchr(spec, ':');
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
    int fd = -1, one = 1, rc;

    if (!colon) {
        rgpu_error("--listen wants ADDR:PORT, got '%s'", spec);
        return -1;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        rgpu_error("cannot resolve %s: %s", spec, gai_strerror(rc));
        return -1;
    }
    if (!is_loopback(res->ai_addr))
        rgpu_warn("listening on %s, beyond loopback: the protocol has no authentication "
                  "yet; anyone who reaches this port can use the GPU (use an SSH tunnel or "
                  "stunnel instead)", spec);
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        rgpu_error("cannot listen on %s: %s", spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static void refuse_busy(int fd)
{
    /* A welcome frame saying EBUSY would need the hello first; closing
     * at once is clearer to a client than a hang. */
    rgpu_warn("session limit reached: refusing a client");
    close(fd);
}

static void serve(int lfd, const struct rgpud_options *opt)
{
    while (!stopping) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && !stopping)
                rgpu_warn("accept: %s", strerror(errno));
            continue;
        }
        if (nsessions >= opt->max_sessions) {
            refuse_busy(fd);
            continue;
        }
        pid_t pid = fork();
        if (pid < 0) {
            rgpu_error("fork: %s", strerror(errno));
            close(fd);
            continue;
        }
        if (pid == 0) {
            int one = 1;
            close(lfd);
            /* Replies are small and awaited: never hold them back. */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            signal(SIGCHLD, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            session_run(fd, opt);
        }
        nsessions++;
        rgpu_info("session %d started (%d active)", (int)pid, (int)nsessions);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "listen", required_argument, NULL, 'l' },
        { "lib-dir", required_argument, NULL, 'L' },
        { "max-sessions", required_argument, NULL, 'm' },
        { "spin-us", required_argument, NULL, 's' },
        { "foreground", no_argument, NULL, 'f' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "session-memory-limit", required_argument, NULL, 'M' },
        { "no-sandbox", no_argument, NULL, 'S' },
        { NULL, 0, NULL, 0 },
    };
    struct rgpud_options opt = { "127.0.0.1:9713", getenv("RGPUD_LIB_DIR"), 1, 64,
                                 rgpu_spin_ns(getenv("RGPUD_SPIN_US")), 0, 0 };
    int verbose = 0, c;

    rgpu_log_init("rgpud", getenv("RGPU_LOG"));
    while ((c = getopt_long(argc, argv, "l:L:m:s:fvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': opt.listen = optarg; break;
        case 'L': opt.lib_dir = optarg; break;
        case 'm': opt.max_sessions = atoi(optarg); break;
        case 's': opt.spin_ns = rgpu_spin_ns(optarg); break;
        case 'f': opt.foreground = 1; break;
        case 'v': verbose++; break;
        case 'h': usage(stdout); return 0;
        case 'M':
            if (sandbox_parse_size(optarg, &opt.session_memory) < 0) {
                rgpu_error("--session-memory-limit wants a size such as 64G, got '%s'", optarg);
                return 2;
            }
            break;
        case 'S': opt.no_sandbox = 1; break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || opt.max_sessions < 1) {
        usage(stderr);
        return 2;
    }
    if (verbose)
        rgpu_log_set_level(verbose > 1 ? RGPU_LOG_DEBUG : RGPU_LOG_INFO);

    struct sigaction sa = { .sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP };
    sigaction(SIGCHLD, &sa, NULL);
    struct sigaction st = { .sa_handler = on_stop };
    sigaction(SIGTERM, &st, NULL);
    sigaction(SIGINT, &st, NULL);
    signal(SIGPIPE, SIG_IGN);

    int lfd = listen_on(opt.listen);
    if (lfd < 0)
        return 1;
    listen_fd = lfd;
    sandbox_listener(&opt);
    rgpu_log(RGPU_LOG_INFO, "listening on %s%s%s", opt.listen,
             opt.lib_dir ? ", CUDA libraries from " : "", opt.lib_dir ? opt.lib_dir : "");
    serve(lfd, &opt);
    rgpu_info("stopping");
    close(lfd);
    return 0;
}
