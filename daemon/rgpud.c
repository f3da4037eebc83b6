/* rgpud: the GPU-side daemon.
 *
 * The listener accepts connections and forks one session process per
 * client (session.c); it never loads or calls CUDA itself, since CUDA is
 * undefined in the child of a process that initialised it. */
#include "rgpud.h"
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

#define RGPUD_KEY_DIR "/etc/rgpu/clients"

static volatile sig_atomic_t nsessions;
static volatile sig_atomic_t stopping;
static volatile sig_atomic_t listen_fd = -1;    /* on_stop shuts it down */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rgpud [options]\n"
            "       rgpud [--key-dir DIR] --new-client-key NAME\n"
            "  -l, --listen ADDR        unix:PATH (or /PATH), HOST:PORT or [IPV6]:PORT to\n"
            "                           listen on (default %s)\n"
            "  -g, --group NAME         on a Unix socket, also let in this group's members\n"
            "                           (default rgpu where it exists; none: nobody but\n"
            "                           rgpud's own user and root)\n"
            "  -k, --key-dir DIR        on TCP, the clients' keys, one file per key name\n"
            "                           (default %s)\n"
            "      --new-client-key NAME\n"
            "                           make a key: write DIR/NAME, print the client's copy\n"
            "      --insecure-tcp-no-auth\n"
            "                           on TCP, let anyone in without a key (trusted\n"
            "                           networks only: anyone who connects runs code as\n"
            "                           rgpud's user)\n"
            "  -L, --lib-dir DIR        load the CUDA libraries from DIR instead of the\n"
            "                           system's (env RGPUD_LIB_DIR; the tests use it)\n"
            "  -m, --max-sessions N     refuse clients beyond N concurrent sessions (64)\n"
            "  -s, --spin-us N          poll N microseconds for a client's next request\n"
            "                           before sleeping (env RGPUD_SPIN_US; default 50\n"
            "                           with 4 or more CPUs, else 0)\n"
            "  -f, --foreground         stay in the foreground (default)\n"
            "  -v, --verbose            more logging (repeat for debug; env RGPU_LOG)\n"
            "  -h, --help               this text\n",
            RGPU_DEFAULT_SERVER, RGPUD_KEY_DIR);
}

static void on_child(int sig)
{
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        nsessions--;
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
        { "group", required_argument, NULL, 'g' },
        { "key-dir", required_argument, NULL, 'k' },
        { "new-client-key", required_argument, NULL, 'N' },
        { "insecure-tcp-no-auth", no_argument, NULL, 'I' },
        { "lib-dir", required_argument, NULL, 'L' },
        { "max-sessions", required_argument, NULL, 'm' },
        { "spin-us", required_argument, NULL, 's' },
        { "foreground", no_argument, NULL, 'f' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct rgpud_options opt = { .listen = RGPU_DEFAULT_SERVER,
                                 .lib_dir = getenv("RGPUD_LIB_DIR"), .foreground = 1,
                                 .max_sessions = 64,
                                 .spin_ns = rgpu_spin_ns(getenv("RGPUD_SPIN_US")) };
    const char *new_key = NULL;
    int verbose = 0, c;

    opt.key_dir = RGPUD_KEY_DIR;

    rgpu_log_init("rgpud", getenv("RGPU_LOG"));
    while ((c = getopt_long(argc, argv, "l:g:k:L:m:s:fvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': opt.listen = optarg; break;
        case 'g': opt.group = optarg; break;
        case 'k': opt.key_dir = optarg; break;
        case 'N': new_key = optarg; break;
        case 'I': opt.insecure_tcp = 1; break;
        case 'L': opt.lib_dir = optarg; break;
        case 'm': opt.max_sessions = atoi(optarg); break;
        case 's': opt.spin_ns = rgpu_spin_ns(optarg); break;
        case 'f': opt.foreground = 1; break;
        case 'v': verbose++; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || opt.max_sessions < 1) {
        usage(stderr);
        return 2;
    }
    if (verbose)
        rgpu_log_set_level(verbose > 1 ? RGPU_LOG_DEBUG : RGPU_LOG_INFO);
    if (new_key)
        return auth_new_client_key(opt.key_dir, new_key) < 0 ? 1 : 0;

    struct sigaction sa = { .sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP };
    sigaction(SIGCHLD, &sa, NULL);
    struct sigaction st = { .sa_handler = on_stop };
    sigaction(SIGTERM, &st, NULL);
    sigaction(SIGINT, &st, NULL);
    signal(SIGPIPE, SIG_IGN);

    int lfd = auth_prepare(&opt) < 0 ? -1 : auth_listen(&opt);
    if (lfd < 0)
        return 1;
    listen_fd = lfd;
    rgpu_log(RGPU_LOG_INFO, "listening on %s%s%s", opt.listen,
             opt.lib_dir ? ", CUDA libraries from " : "", opt.lib_dir ? opt.lib_dir : "");
    serve(lfd, &opt);
    rgpu_info("stopping");
    close(lfd);
    if (opt.addr.kind == RGPU_ADDR_UNIX)
        unlink(opt.addr.path);      /* ours: it answered until now */
    return 0;
}
