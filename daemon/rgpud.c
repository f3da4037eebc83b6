/* rgpud: the GPU-side daemon: its options, then the listener (listener.c),
 * which forks one session process per client (session.c). */
#include "rgpud.h"
#include "image_check.h"
#include "sandbox.h"
#include "rgpu_log.h"
#include "rgpu_wire.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define RGPUD_KEY_DIR "/etc/rgpu/clients"

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
            "  -m, --max-sessions N     refuse clients beyond N concurrent sessions (64):\n"
            "                           clients let in; those still on their hello and key\n"
            "                           have the bounds below\n"
            "      --max-startups N     connections not let in yet, from all sources\n"
            "                           together (64); beyond, a busy answer\n"
            "      --per-source-startups N\n"
            "                           such connections from one source (an IPv4 address,\n"
            "                           an IPv6 /64, a uid) at once (8); as many more wait\n"
            "                           for their turn, the rest are closed\n"
            "      --max-auth-failures N\n"
            "                           on TCP, connections of one source that end without\n"
            "                           being let in, per minute (10); beyond, its\n"
            "                           connections are closed at once until it may fail\n"
            "                           again\n"
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
            "      --procedures         print the procedures a session serves, one\n"
            "                           \"generated|hand LIBRARY NAME\" a line, and exit\n"
            "  -f, --foreground         stay in the foreground (default)\n"
            "  -v, --verbose            more logging (repeat for debug; env RGPU_LOG)\n"
            "  -h, --help               this text\n",
            RGPU_DEFAULT_SERVER, RGPUD_KEY_DIR);
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
        { "max-startups", required_argument, NULL, 'U' },
        { "per-source-startups", required_argument, NULL, 'u' },
        { "max-auth-failures", required_argument, NULL, 'F' },
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
        { "procedures", no_argument, NULL, 'R' },
        { NULL, 0, NULL, 0 },
    };
    struct rgpud_options opt = { .listen = RGPU_DEFAULT_SERVER, .key_dir = RGPUD_KEY_DIR,
                                 .lib_dir = getenv("RGPUD_LIB_DIR"), .foreground = 1,
                                 .cuda12_dirs = getenv("RGPUD_CUDA12_LIB_DIR"),
                                 .max_sessions = 64, .max_startups = 64,
                                 .per_source_startups = 8, .max_auth_failures = 10,
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
        case 'U': opt.max_startups = positive(optarg); break;
        case 'u': opt.per_source_startups = positive(optarg); break;
        case 'F': opt.max_auth_failures = positive(optarg); break;
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
        case 'R': session_list_procedures(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!opt.staging_limit && getenv("RGPUD_MODULE_STAGING_LIMIT") &&
        staging_limit(getenv("RGPUD_MODULE_STAGING_LIMIT"), &opt) < 0)
        return 2;
    if (opt.staging_limit)
        image_staging_limit(opt.staging_limit);     /* sessions inherit it */
    if (optind != argc || opt.max_sessions < 1 || opt.max_startups < 1 ||
        opt.per_source_startups < 1 || opt.max_auth_failures < 1 || opt.hello_timeout_s < 1 ||
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
    if (sfd < 0 || listener_init(&opt) < 0) {
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
    listener_serve(lfd, sfd, &opt);
    rgpu_info("stopping");
    close(lfd);
    if (opt.addr.kind == RGPU_ADDR_UNIX)
        unlink(opt.addr.path);      /* ours: it answered until now */
    return 0;
}
