/* rgpud: the GPU-side daemon.
 *
 * The listener accepts connections and forks one session process per
 * client (session.c); it never loads or calls CUDA itself, since CUDA is
 * undefined in the child of a process that initialised it. */
#include "rgpud.h"
#include "image_check.h"
#include "rgpu_hello.h"
#include "sandbox.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RGPUD_KEY_DIR "/etc/rgpu/clients"

/* The children of the listener, by pid: sessions, and the short-lived
 * processes that tell a client the cap is reached.  Only the main loop
 * touches them, from waitpid: no signal handler races the accept loop. */
struct children {
    pid_t *pid;
    int n, cap;
};
static struct children sessions, refusers;

/* At most this many busy answers in flight: a flood of connections at the
 * cap costs a bounded number of processes, the rest are closed at once. */
#define MAX_REFUSERS 8
/* A refused client has this long to send its hello. */
#define REFUSE_HELLO_MS 2000

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
            "      --cuda12-lib-dir DIR[:DIR...]\n"
            "                           serve CUDA 12 clients with the libcudart.so.12,\n"
            "                           libcublas.so.12 and libcublasLt.so.12 of these\n"
            "                           folders (env RGPUD_CUDA12_LIB_DIR); a client's\n"
            "                           CUDA 12 library missing there is refused at\n"
            "                           connection.  Without: CUDA 13's serve them\n"
            "  -m, --max-sessions N     refuse clients beyond N concurrent sessions (64)\n"
            "      --hello-timeout S    drop a client that has not said hello within S\n"
            "                           seconds (10)\n"
            "      --frame-timeout S    end a session whose client stops inside a frame\n"
            "                           for S seconds (30, plus 1 s per 256 KiB)\n"
            "      --keepalive-ms MS    while a request runs, tell the client every MS\n"
            "                           milliseconds that it still does (1000)\n"
            "  -s, --spin-us N          poll N microseconds for a client's next request\n"
            "                           before sleeping (env RGPUD_SPIN_US; default 50\n"
            "                           with 4 or more CPUs, else 0)\n"
            "      --session-memory-limit SIZE\n"
            "                           private memory of one session, as RLIMIT_DATA\n"
            "                           (K, M, G, T suffixes, or unlimited; default 64G)\n"
            "      --module-staging-limit SIZE\n"
            "                           module images larger than a frame that one\n"
            "                           session may hold while they arrive in pieces\n"
            "                           (env RGPUD_MODULE_STAGING_LIMIT; default 2G)\n"
            "      --no-sandbox         run sessions unconfined (debugging only)\n"
            "      --sandbox-audit      sandbox on, but a forbidden system call fails with\n"
            "                           EPERM and is logged instead of killing the session\n"
            "                           (to find what a driver needs)\n"
            "  -d, --devices LIST       serve only these GPUs, renumbered from 0 in this\n"
            "                           order: indices or UUIDs (GPU-..., or enough of one\n"
            "                           to name it), comma-separated, as CUDA_VISIBLE_DEVICES\n"
            "                           takes them (env RGPUD_DEVICES; default: all)\n"
            "      --nvml-settings      let clients change GPU settings through NVML (power\n"
            "                           limits, clocks, persistence and compute modes);\n"
            "                           refused by default\n"
            "  -f, --foreground         stay in the foreground (default)\n"
            "  -v, --verbose            more logging (repeat for debug; env RGPU_LOG)\n"
            "  -h, --help               this text\n",
            RGPU_DEFAULT_SERVER, RGPUD_KEY_DIR);
}

static int children_add(struct children *c, pid_t pid)
{
    if (c->n == c->cap)
        return -1;
    c->pid[c->n++] = pid;
    return 0;
}

static int children_remove(struct children *c, pid_t pid)
{
    for (int i = 0; i < c->n; i++) {
        if (c->pid[i] == pid) {
            c->pid[i] = c->pid[--c->n];
            return 0;
        }
    }
    return -1;
}

static void log_session_end(pid_t pid, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        rgpu_info("session %d ended (%d active)", (int)pid, sessions.n);
    else if (WIFEXITED(status))
        rgpu_warn("session %d ended with exit code %d (%d active)", (int)pid,
                  WEXITSTATUS(status), sessions.n);
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        rgpu_warn("session %d killed by the sandbox (SIGSYS: a forbidden system call, "
                  "named in the kernel's audit log, type=1326; %d active)", (int)pid,
                  sessions.n);
    else if (WIFSIGNALED(status))
        rgpu_warn("session %d killed by signal %d (%s; %d active)", (int)pid,
                  WTERMSIG(status), strsignal(WTERMSIG(status)), sessions.n);
}

/* Every child that has ended: the only place the session count drops. */
static void reap_children(void)
{
    pid_t pid;
    int status;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (children_remove(&sessions, pid) == 0)
            log_session_end(pid, status);
        else
            children_remove(&refusers, pid);
    }
}

/* The busy answer, in the welcome layout of this protocol version (one
 * function, so that a new hello codec replaces it in one place). */
static void send_busy_welcome(int fd, int max_sessions)
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_WELCOME };
    struct rgpu_welcome *w = &m.u.welcome;
    w->proto = RGPU_PROTO_VERSION;
    w->status = RGPU_EBUSY;
    gethostname(w->server_name, sizeof w->server_name - 1);
    snprintf(w->message, sizeof w->message,
             "rgpud serves at most %d sessions (--max-sessions); try again later",
             max_sessions);
    (void)rgpu_hs_send(fd, &m);
}

/* At the cap: a short-lived child reads the client's hello (the client
 * sends it first and reads nothing before; closing on unread bytes would
 * reset the connection under the answer), answers busy and leaves.  The
 * listener itself never waits on a client. */
static void refuse_busy(int fd, int lfd, int sfd, const struct rgpud_options *opt)
{
    pid_t pid = refusers.n < refusers.cap ? fork() : -1;
    if (pid == 0) {
        struct timeval tv = { REFUSE_HELLO_MS / 1000, 0 };
        char *hello = NULL;
        size_t len;
        sigset_t all;
        close(lfd);
        close(sfd);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (rgpu_read_frame_timed(fd, &hello, &len, REFUSE_HELLO_MS) == 0)
            send_busy_welcome(fd, opt->max_sessions);
        _exit(0);
    }
    if (pid > 0)
        children_add(&refusers, pid);
    rgpu_warn("%d sessions active, the cap (--max-sessions): %s a client", sessions.n,
              pid > 0 ? "refusing" : "closing at once on");
    close(fd);
}

static void start_session(int fd, int lfd, int sfd, const struct rgpud_options *opt)
{
    pid_t pid = fork();
    if (pid < 0) {
        rgpu_error("fork: %s", strerror(errno));
        close(fd);
        return;
    }
    if (pid == 0) {
        int one = 1;
        sigset_t all;
        close(lfd);
        close(sfd);
        /* Replies are small and awaited: never hold them back. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        signal(SIGCHLD, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        session_run(fd, opt);
    }
    children_add(&sessions, pid);       /* room: checked against the cap */
    rgpu_info("session %d started (%d active)", (int)pid, sessions.n);
    close(fd);
}

/* The accept loop.  SIGCHLD, SIGTERM and SIGINT are blocked and read from
 * a signalfd next to the listening socket, so an ending child or a stop
 * request is handled here, between accepts, never inside one. */
static void serve(int lfd, int sfd, const struct rgpud_options *opt)
{
    int stopping = 0;
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    while (!stopping) {
        struct pollfd pfd[2] = { { .fd = lfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        if (poll(pfd, 2, -1) < 0) {
            if (errno != EINTR)
                rgpu_warn("poll: %s", strerror(errno));
            continue;
        }
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                    stopping = 1;
            reap_children();
        }
        if (stopping || !(pfd[0].revents & POLLIN))
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                rgpu_warn("accept: %s", strerror(errno));
            continue;
        }
        if (sessions.n >= opt->max_sessions)
            refuse_busy(fd, lfd, sfd, opt);
        else
            start_session(fd, lfd, sfd, opt);
    }
}

static int children_init(struct children *c, int cap)
{
    c->pid = calloc((size_t)cap, sizeof *c->pid);
    c->cap = cap;
    c->n = 0;
    return c->pid ? 0 : -1;
}

static int positive(const char *arg)
{
    char *end;
    long v = strtol(arg, &end, 10);
    return *end || v < 1 || v > 1000000 ? -1 : (int)v;
}

/* --module-staging-limit: a size (sandbox_parse_size's forms; "unlimited"
 * is refused: the limit is what keeps a client from growing the session). */
static int staging_limit(const char *arg, struct rgpud_options *opt)
{
    if (strcmp(arg, "unlimited") == 0 || sandbox_parse_size(arg, &opt->staging_limit) < 0) {
        rgpu_error("--module-staging-limit wants a size such as 2G, got '%s'", arg);
        return -1;
    }
    return 0;
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
        { "cuda12-lib-dir", required_argument, NULL, 'C' },
        { "max-sessions", required_argument, NULL, 'm' },
        { "hello-timeout", required_argument, NULL, 'H' },
        { "frame-timeout", required_argument, NULL, 'T' },
        { "keepalive-ms", required_argument, NULL, 'K' },
        { "spin-us", required_argument, NULL, 's' },
        { "foreground", no_argument, NULL, 'f' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "session-memory-limit", required_argument, NULL, 'M' },
        { "module-staging-limit", required_argument, NULL, 'G' },
        { "no-sandbox", no_argument, NULL, 'S' },
        { "sandbox-audit", no_argument, NULL, 'A' },
        { "nvml-settings", no_argument, NULL, 'P' },
        { "devices", required_argument, NULL, 'd' },
        { NULL, 0, NULL, 0 },
    };
    struct rgpud_options opt = { .listen = RGPU_DEFAULT_SERVER, .key_dir = RGPUD_KEY_DIR,
                                 .lib_dir = getenv("RGPUD_LIB_DIR"), .foreground = 1,
                                 .cuda12_dirs = getenv("RGPUD_CUDA12_LIB_DIR"),
                                 .max_sessions = 64,
                                 .spin_ns = rgpu_spin_ns(getenv("RGPUD_SPIN_US")),
                                 .hello_timeout_s = 10, .frame_timeout_s = 30,
                                 .keepalive_ms = 1000 };
    const char *new_key = NULL;
    int verbose = 0, c;

    rgpu_log_init("rgpud", getenv("RGPU_LOG"));
    while ((c = getopt_long(argc, argv, "l:g:k:L:m:s:d:fvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': opt.listen = optarg; break;
        case 'g': opt.group = optarg; break;
        case 'k': opt.key_dir = optarg; break;
        case 'N': new_key = optarg; break;
        case 'I': opt.insecure_tcp = 1; break;
        case 'L': opt.lib_dir = optarg; break;
        case 'C': opt.cuda12_dirs = optarg; break;
        case 'm': opt.max_sessions = atoi(optarg); break;
        case 'H': opt.hello_timeout_s = positive(optarg); break;
        case 'T': opt.frame_timeout_s = positive(optarg); break;
        case 'K': opt.keepalive_ms = positive(optarg); break;
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
        case 'G':
            if (staging_limit(optarg, &opt) < 0)
                return 2;
            break;
        case 'S': opt.no_sandbox = 1; break;
        case 'A': opt.sandbox_audit = 1; break;
        case 'P': opt.nvml_settings = 1; break;
        case 'd': opt.devices = optarg; break;
        default: usage(stderr); return 2;
        }
    }
    if (!opt.staging_limit && getenv("RGPUD_MODULE_STAGING_LIMIT") &&
        staging_limit(getenv("RGPUD_MODULE_STAGING_LIMIT"), &opt) < 0)
        return 2;
    if (opt.staging_limit)
        image_staging_limit(opt.staging_limit);     /* sessions inherit it */
    if (optind != argc || opt.max_sessions < 1 || opt.hello_timeout_s < 1 ||
        opt.frame_timeout_s < 1 || opt.keepalive_ms < 1) {
        usage(stderr);
        return 2;
    }
    if (verbose)
        rgpu_log_set_level(verbose > 1 ? RGPU_LOG_DEBUG : RGPU_LOG_INFO);
    if (new_key)
        return auth_new_client_key(opt.key_dir, new_key) < 0 ? 1 : 0;
    /* The configuration file's RGPUD_DEVICES= may be left empty: all. */
    const char *devices_name = "--devices";
    if (!opt.devices && getenv("RGPUD_DEVICES") && *getenv("RGPUD_DEVICES")) {
        opt.devices = getenv("RGPUD_DEVICES");
        devices_name = "RGPUD_DEVICES";
    }
    if (devices_start(opt.devices, devices_name, opt.lib_dir) < 0)
        return 1;

    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGCHLD);
    sigaddset(&handled, SIGTERM);
    sigaddset(&handled, SIGINT);
    sigprocmask(SIG_BLOCK, &handled, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0 || children_init(&sessions, opt.max_sessions) < 0 ||
        children_init(&refusers, MAX_REFUSERS) < 0) {
        rgpu_error("cannot set up the listener: %s", strerror(errno));
        return 1;
    }

    if (opt.cuda12_dirs && !*opt.cuda12_dirs)
        opt.cuda12_dirs = NULL;
    if (opt.cuda12_dirs && !backend12_available()) {
        rgpu_error("this rgpud was built without CUDA 12 stubs (-Dcuda12=) and cannot serve "
                   "CUDA 12 clients with CUDA 12's libraries: leave --cuda12-lib-dir (and "
                   "RGPUD_CUDA12_LIB_DIR) out");
        return 2;
    }
    if (ipc_daemon_secret() < 0)         /* before any fork: sessions inherit it */
        rgpu_warn("no random bytes for the IPC handles' key: CUDA IPC is refused");
    int lfd = auth_prepare(&opt) < 0 ? -1 : auth_listen(&opt);
    if (lfd < 0)
        return 1;
    sandbox_listener(&opt);
    rgpu_log(RGPU_LOG_INFO, "listening on %s%s%s%s%s", opt.listen,
             opt.lib_dir ? ", CUDA libraries from " : "", opt.lib_dir ? opt.lib_dir : "",
             opt.cuda12_dirs ? ", CUDA 12's from " : "", opt.cuda12_dirs ? opt.cuda12_dirs : "");
    serve(lfd, sfd, &opt);
    rgpu_info("stopping");
    close(lfd);
    if (opt.addr.kind == RGPU_ADDR_UNIX)
        unlink(opt.addr.path);      /* ours: it answered until now */
    return 0;
}
