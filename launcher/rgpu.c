/* rgpu: run a program with its CUDA calls going to rgpud.
 *
 *   rgpu run [--server ADDR | --ssh [USER@]HOST[:PORT]] [options] -- CMD ARGS...
 *   rgpu info [--server ADDR | --ssh [USER@]HOST[:PORT]] [options]
 *   rgpu smi [--server ADDR | --ssh [USER@]HOST[:PORT]] [options]
 *
 * `run` puts the stub libraries in front of NVIDIA's for CMD (LD_PRELOAD
 * and LD_LIBRARY_PATH), points the client core at a server (one given, an
 * SSH tunnel it opens, or a private rgpud it starts), runs CMD, cleans up,
 * and exits as CMD did.  See rgpu(1) and docs/launcher.md. */
#include "launcher.h"
#include "rgpu_addr.h"
#include "rgpu_proto.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef RGPU_VERSION
#define RGPU_VERSION "unknown"
#endif
#ifndef RGPU_CUDA_MAJOR
#define RGPU_CUDA_MAJOR 0
#endif

static void usage(FILE *f)
{
    fprintf(f,
        "usage: rgpu run [options] [--] CMD [ARGS...]   run CMD with its CUDA calls on rgpud\n"
        "       rgpu info [options]                     describe the server and its GPUs\n"
        "       rgpu smi [options]                      the server's GPUs as nvidia-smi shows\n"
        "                                               them (through NVML)\n"
        "\n"
        "Where the GPU is (default: $RGPU_SERVER, else a private rgpud on this machine):\n"
        "  -s, --server ADDR           an rgpud at ADDR: unix:/PATH (or /PATH), HOST:PORT,\n"
        "                              [IPV6]:PORT, or HOST (port %d); on TCP the key\n"
        "                              comes from $RGPU_KEY_FILE or ~/.config/rgpu/key\n"
        "  -S, --ssh [USER@]HOST[:PORT]\n"
        "                              rgpud on HOST, its socket forwarded by ssh(1) to\n"
        "                              a private one here; extra ssh options in\n"
        "                              $RGPU_SSH_OPTS\n"
        "  -r, --remote ADDR           rgpud's address on the ssh host\n"
        "                              (default %s)\n"
        "  -P, --remote-port N         the same as --remote 127.0.0.1:N\n"
        "Options:\n"
        "  -L, --lib-dir DIR           the stub libraries (default $RGPU_LIB_DIR, else the\n"
        "                              installed ones, or the build tree's)\n"
        "  -R, --rgpud PATH            the private daemon to start (default $RGPUD, else\n"
        "                              the installed rgpud)\n"
        "  -D, --daemon-lib-dir DIR    the CUDA libraries the private daemon loads\n"
        "                              (default $RGPUD_LIB_DIR, else the system's)\n"
        "  -t, --timeout SECONDS       how long to wait for the server's welcome (%g)\n"
        "  -v, --verbose               say what the launcher does\n"
        "  -h, --help                  this text\n"
        "  -V, --version               rgpu's version\n"
        "\n"
        "rgpu run exits with CMD's status, or dies of CMD's signal; its own failures\n"
        "exit 125, a CMD that cannot run 126, a CMD not found 127.\n",
        RGPU_DEFAULT_PORT, RGPU_DEFAULT_SERVER, DEFAULT_WAIT_S);
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int bad_option(const char *what, const char *value)
{
    say("bad %s '%s' (rgpu --help)", what, value);
    return -1;
}

static int take_option(int c, struct options *o)
{
    long v;
    switch (c) {
    case 's': o->server = optarg; return 0;
    case 'S': o->ssh = optarg; return 0;
    case 'L': o->lib_dir = optarg; return 0;
    case 'R': o->rgpud = optarg; return 0;
    case 'D': o->daemon_lib_dir = optarg; return 0;
    case 'v': verbose++; return 0;
    case 'r': o->remote = optarg; return 0;
    case 'P': {
        static char remote[32];
        if (parse_int(optarg, 1, 65535, &v) < 0)
            return bad_option("--remote-port", optarg);
        snprintf(remote, sizeof remote, "127.0.0.1:%ld", v);
        o->remote = remote;
        return 0;
    }
    case 't': {
        char *end;
        o->wait_s = strtod(optarg, &end);
        if (*end || end == optarg || !(o->wait_s > 0 && o->wait_s <= 3600))
            return bad_option("--timeout", optarg);
        return 0;
    }
    case 'h': usage(stdout); exit(0);
    case 'V':
        printf("rgpu %s\nprotocol %d, built with CUDA %d headers\n", RGPU_VERSION,
               RGPU_PROTO_VERSION, RGPU_CUDA_MAJOR);
        exit(0);
    default:
        fprintf(stderr, "rgpu --help lists the options\n");
        return -1;
    }
}

/* Options of argv[1..]; argv[0] is the command word.  "+": stop at CMD,
 * whose own options are not ours. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "server", required_argument, NULL, 's' },
        { "ssh", required_argument, NULL, 'S' },
        { "remote", required_argument, NULL, 'r' },
        { "remote-port", required_argument, NULL, 'P' },
        { "lib-dir", required_argument, NULL, 'L' },
        { "rgpud", required_argument, NULL, 'R' },
        { "daemon-lib-dir", required_argument, NULL, 'D' },
        { "timeout", required_argument, NULL, 't' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    optind = 0;                 /* glibc: start afresh on this vector */
    while ((c = getopt_long(argc, argv, "+s:S:r:P:L:R:D:t:vhV", longopts, NULL)) != -1)
        if (take_option(c, o) < 0)
            return -1;
    if (o->server && o->ssh) {
        say("--server and --ssh both name the server: give one");
        return -1;
    }
    return optind;
}

/* After a failure, or a signal, during setup: clean up, then leave the
 * way the signal would have made us. */
static int setup_failed(struct server *s, int code)
{
    server_close(s);
    if (signal_pending())
        die_of_signal(signal_pending());
    return code;
}

static int cmd_run(const struct options *o, char **cmd)
{
    struct stubs st;
    struct server s;
    int code;

    if (!cmd[0]) {
        say("run: no command given (rgpu run [options] -- CMD ARGS...)");
        return EXIT_RGPU_FAILED;
    }
    int err = command_lookup(cmd[0]);
    if (err) {
        say("%s: %s", cmd[0], err == ENOENT ? "command not found" : strerror(err));
        return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
    }
    memset(&st, 0, sizeof st);
    if (stubs_find(o->lib_dir, &st) < 0)
        return EXIT_RGPU_FAILED;
    if (server_open(&s, o, &st) < 0 || server_check_versions(&s, &st) < 0 || signal_pending())
        return setup_failed(&s, EXIT_RGPU_FAILED);
    note("running %s with LD_PRELOAD=%s", cmd[0], st.preload);
    int status = command_run(cmd, &st, &s, &code);
    server_close(&s);
    if (status < 0)
        return code;
    if (WIFSIGNALED(status))
        die_of_signal(WTERMSIG(status));
    return WEXITSTATUS(status);
}

static int cmd_info(const struct options *o, char **rest)
{
    struct stubs st;
    struct server s;

    if (rest[0]) {
        say("info takes no arguments (got '%s')", rest[0]);
        return EXIT_RGPU_FAILED;
    }
    memset(&st, 0, sizeof st);
    /* Without stubs the welcome still tells a lot: go on, said why. */
    int have_stubs = stubs_find(o->lib_dir, &st) == 0;
    if (server_open(&s, o, &st) < 0 || signal_pending())
        return setup_failed(&s, 1);
    int rc = info_print(&s, &st, have_stubs);
    server_close(&s);
    return rc == 0 ? 0 : 1;
}

static int cmd_smi(const struct options *o, char **rest)
{
    struct stubs st;
    struct server s;

    if (rest[0]) {
        say("smi takes no arguments (got '%s')", rest[0]);
        return EXIT_RGPU_FAILED;
    }
    memset(&st, 0, sizeof st);
    if (stubs_find(o->lib_dir, &st) < 0)
        return EXIT_RGPU_FAILED;
    if (server_open(&s, o, &st) < 0 || signal_pending())
        return setup_failed(&s, 1);
    int rc = smi_print(&s, &st);
    server_close(&s);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct options o = { .wait_s = DEFAULT_WAIT_S };

    /* Options may come before the command word too: rgpu -v run ... */
    int first = parse_options(argc, argv, &o);
    if (first < 0)
        return EXIT_RGPU_FAILED;
    if (first >= argc) {
        usage(stderr);
        return EXIT_RGPU_FAILED;
    }
    char **sub = argv + first;
    int n = parse_options(argc - first, sub, &o);
    if (n < 0)
        return EXIT_RGPU_FAILED;
    signals_install();
    if (strcmp(sub[0], "run") == 0)
        return cmd_run(&o, sub + n);
    if (strcmp(sub[0], "info") == 0)
        return cmd_info(&o, sub + n);
    if (strcmp(sub[0], "smi") == 0)
        return cmd_smi(&o, sub + n);
    if (strcmp(sub[0], "help") == 0) {
        usage(stdout);
        return 0;
    }
    say("unknown command '%s': rgpu run ..., rgpu info or rgpu smi (rgpu --help)", sub[0]);
    return EXIT_RGPU_FAILED;
}
