/* The server a command talks to: one given by address, a private rgpud
 * started here, or rgpud on another host through an SSH tunnel.  Private
 * daemons and tunnels are ours: started before the command, stopped after
 * it, and never left behind. */
#include "launcher.h"
#include "rgpu_addr.h"
#include "rgpu_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RGPU_SBINDIR
#define RGPU_SBINDIR "/usr/sbin"
#endif
#ifndef RGPU_VERSION
#define RGPU_VERSION "unknown"
#endif

#define STOP_GRACE_S    5.0     /* SIGTERM, then SIGKILL */
#define MAX_ARGS        64

enum ready {
    READY,
    READY_INTERRUPTED,      /* a signal: the caller dies of it, quietly */
    READY_EXITED,           /* the helper exited */
    READY_TIMEOUT,
    READY_REMOTE_DOWN,      /* tunnel up, nothing listening behind it */
    READY_GARBLED,
};

/* ---- helper processes ------------------------------------------------------ */

static void child_setup(int log_fd, const char *stub_dir, pid_t parent)
{
    /* A session of its own: ^C at the terminal reaches the command, while
     * the daemon and tunnel wait for us to stop them once it is done. */
    setsid();
    /* If we are killed outright, they follow instead of lingering. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(log_fd >= 0 ? log_fd : null, STDOUT_FILENO);
    }
    if (log_fd >= 0)
        dup2(log_fd, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    stubs_scrub_env(stub_dir);
}

static pid_t spawn(char **argv, int log_fd, const char *stub_dir)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_setup(log_fd, stub_dir, parent);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(EXIT_NOT_FOUND);
}

/* Has the helper exited?  Reaps it and describes how. */
static int helper_exited(struct server *s, char *how, size_t howlen)
{
    int st;
    if (s->pid <= 0 || waitpid(s->pid, &st, WNOHANG) != s->pid)
        return 0;
    s->pid = 0;
    if (WIFEXITED(st))
        snprintf(how, howlen, "exit status %d", WEXITSTATUS(st));
    else
        snprintf(how, howlen, "killed by signal %d", WTERMSIG(st));
    return 1;
}

static void stop_group(pid_t *helper)
{
    pid_t pid = *helper, leader = *helper;
    if (pid <= 0)
        return;
    /* The whole group: a server's sessions are its children and share it. */
    kill(-pid, SIGTERM);
    for (double end = now_s() + STOP_GRACE_S; now_s() < end;) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            pid = 0;
            break;
        }
        sleep_s(0.02);
    }
    kill(-leader, SIGKILL);         /* what ignored SIGTERM, and stragglers */
    if (pid)
        waitpid(pid, NULL, 0);
    *helper = 0;
}

static void stop_helper(struct server *s)
{
    stop_group(&s->pid);
}

/* ---- waiting for a welcome ------------------------------------------------------ */

static enum ready wait_ready(struct server *s, double wait_s, char *why, size_t whylen)
{
    double deadline = now_s() + wait_s;
    int closed = 0;

    for (;;) {
        if (signal_pending())
            return READY_INTERRUPTED;
        if (helper_exited(s, why, whylen))
            return READY_EXITED;
        double t0 = now_s(), left = deadline - t0;
        enum probe_result r = probe(s->addr, left < 5 ? (left > 0.1 ? left : 0.1) : 5, &s->w,
                                    why, whylen);
        if (r == PROBE_OK) {
            s->hello_s = now_s() - t0;
            return READY;
        }
        if (r == PROBE_INTERRUPTED)
            return READY_INTERRUPTED;
        if (r == PROBE_GARBLED)
            return READY_GARBLED;
        /* Through a tunnel, ssh accepts the connection and closes it when
         * the far end refuses: ssh's log says so, or it keeps happening. */
        if (r == PROBE_CLOSED && s->kind == SERVER_TUNNEL &&
            (log_contains(s->log_fd, "open failed") || ++closed >= 5))
            return READY_REMOTE_DOWN;
        if (now_s() >= deadline)
            return READY_TIMEOUT;
        sleep_s(0.05);
    }
}

/* ---- a server given by address ----------------------------------------------------- */

static const char *const reach_hint =
    "start rgpud on that host (it listens on " RGPU_DEFAULT_SERVER "), reach another host's "
    "rgpud with --ssh [USER@]HOST (rgpu forwards its socket through ssh), or give no server "
    "at all to run a private rgpud on this machine";

static int open_given(struct server *s, const struct options *o, const char *spec,
                      const char *from)
{
    char why[512];
    double t0 = now_s();
    struct rgpu_addr a;

    s->kind = SERVER_GIVEN;
    if (rgpu_addr_parse(spec, &a, why, sizeof why) < 0) {
        say("bad server address%s: %s", from, why);
        return -1;
    }
    snprintf(s->addr, sizeof s->addr, "%s", spec);
    snprintf(s->desc, sizeof s->desc, "%s%s", spec, from);
    switch (probe(spec, o->wait_s, &s->w, why, sizeof why)) {
    case PROBE_OK:
        s->hello_s = now_s() - t0;
        return 0;
    case PROBE_INTERRUPTED:
        return -1;
    case PROBE_TIMEOUT:
        say("rgpud at %s did not answer within %g s: %s", s->desc, o->wait_s, why);
        say("%s", reach_hint);
        return -1;
    case PROBE_CLOSED:
        say("%s closed the connection without a welcome: rgpud's session limit (-m) is "
            "reached, or what listens there is not rgpud", s->desc);
        return -1;
    case PROBE_GARBLED:
        say("%s did not answer as the rgpud we may trust: %s", s->desc, why);
        return -1;
    default:
        say("cannot reach rgpud at %s: %s", s->desc, why);
        say("%s", reach_hint);
        return -1;
    }
}

/* ---- the op server of the rgpu PyTorch device --------------------------------------------- */

#define OP_SOCK         "opserver.sock"
#define REMOTE_OP_SOCK  "/run/rgpu/opserver.sock"

static int find_opserver(char *path, size_t size)
{
    const char *env = getenv("RGPU_OPSERVER");
    char here[PATH_MAX] = "";

    if (env && *env) {
        snprintf(path, size, "%s", env);
        return is_executable(path) ? 0 : -1;
    }
    self_dir(here, sizeof here);
    const char *fmt[] = { "%s/../python/rgpu-opserver", "%s/rgpu-opserver",
                          "%s/../sbin/rgpu-opserver" };
    for (size_t i = in_build_tree(here) ? 0 : 1; here[0] && i < 3; i++) {
        snprintf(path, size, fmt[i], here);
        if (is_executable(path))
            return 0;
    }
    snprintf(path, size, "%s", RGPU_SBINDIR "/rgpu-opserver");
    return is_executable(path) ? 0 : -1;
}

/* Beside a private rgpud, a private op server for programs that use the
 * rgpu device, in the same private directory.  It is optional and starts
 * in the background: importing PyTorch takes seconds, which a CUDA program
 * should not wait for, so the command gets RGPU_OP_SERVER at once and
 * RGPU_OP_SERVER_WAIT, the seconds the rgpu client may wait for the socket
 * to appear.  Without PyTorch for it, the op server exits saying so; `rgpu
 * run -v` shows that. */
static void open_private_opserver(struct server *s, const struct stubs *st)
{
    char opserver[PATH_MAX], listen[100];

    if (find_opserver(opserver, sizeof opserver) < 0) {
        note("no rgpu-opserver here: programs cannot use device \"rgpu\" in this run");
        return;
    }
    snprintf(listen, sizeof listen, "unix:%s/" OP_SOCK, s->dir);
    char *argv[] = { opserver, "--listen", listen, "--group", "none", "--device", "cuda", NULL };
    s->op_log_fd = log_open();
    s->op_pid = spawn(argv, s->op_log_fd, st->dir);
    if (s->op_pid < 0) {
        s->op_pid = 0;
        note("cannot start rgpu-opserver: %s", strerror(errno));
        return;
    }
    snprintf(s->op_addr, sizeof s->op_addr, "%s", listen);
    note("started rgpu-opserver (pid %d) on %s: %s", (int)s->op_pid, listen, opserver);
}

/* ---- a private rgpud ------------------------------------------------------------------ */

static int find_rgpud(const struct options *o, char *path, size_t size)
{
    const char *env = getenv("RGPUD");
    char here[PATH_MAX] = "";
    const char *given = o->rgpud ? o->rgpud : (env && *env ? env : NULL);

    if (given) {
        snprintf(path, size, "%s", given);
        if (is_executable(path))
            return 0;
        say("rgpud %s (%s) is not an executable file", given, o->rgpud ? "--rgpud" : "RGPUD");
        return -1;
    }
    self_dir(here, sizeof here);
    /* The build tree's daemon first when we run from one, as for the
     * stubs; then beside us as installed (bin/ and sbin/ of one prefix). */
    const char *fmt[] = { "%s/../daemon/rgpud", "%s/rgpud", "%s/../sbin/rgpud" };
    for (size_t i = in_build_tree(here) ? 0 : 1; here[0] && i < 3; i++) {
        snprintf(path, size, fmt[i], here);
        if (is_executable(path))
            return 0;
    }
    const char *fixed[] = { RGPU_SBINDIR "/rgpud", "/usr/sbin/rgpud", "/usr/local/sbin/rgpud" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, size, "%s", fixed[i]);
        if (is_executable(path))
            return 0;
    }
    say("no server given and no rgpud on this machine to start (looked beside this launcher "
        "and in %s): connect to a GPU host with --ssh [USER@]HOST or --server HOST:PORT, "
        "install rgpu-server here, or name the daemon with --rgpud PATH", RGPU_SBINDIR);
    return -1;
}

static void private_failed(struct server *s, enum ready r, const char *rgpud, const char *why,
                           double wait_s)
{
    if (r == READY_EXITED)
        say("rgpud (%s) exited before it answered (%s)", rgpud, why);
    else if (r == READY_TIMEOUT)
        say("rgpud (%s) did not answer a hello within %g s: %s", rgpud, wait_s, why);
    else if (r == READY_GARBLED)
        say("rgpud (%s) did not answer with a welcome: %s", rgpud, why);
    log_show(s->log_fd, "rgpud");
}

/* The private daemon listens on a socket in a directory of our own (0700):
 * no port is open to the machine's other users, and rgpud lets in only
 * its own user (--group none), which is ours. */
static int open_private(struct server *s, const struct options *o, const struct stubs *st)
{
    char rgpud[PATH_MAX], listen[100], why[512];
    enum ready r;

    if (find_rgpud(o, rgpud, sizeof rgpud) < 0)
        return -1;
    s->kind = SERVER_PRIVATE;
    if (private_dir(s->dir, sizeof s->dir) < 0) {
        say("cannot make a private directory for rgpud's socket: %s", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    char *argv[] = { rgpud, "--listen", listen, "--group", "none", NULL, NULL, NULL, NULL };
    int n = 5;
    snprintf(listen, sizeof listen, "unix:%s/rgpud.sock", s->dir);
    snprintf(s->addr, sizeof s->addr, "%s", listen);
    if (o->daemon_lib_dir) {
        argv[n++] = "--lib-dir";
        argv[n++] = (char *)o->daemon_lib_dir;
    }
    if (verbose)
        argv[n++] = "-v";
    s->log_fd = verbose ? -1 : log_open();
    s->pid = spawn(argv, s->log_fd, st->dir);
    if (s->pid < 0) {
        say("cannot start rgpud: %s", strerror(errno));
        return -1;
    }
    snprintf(s->desc, sizeof s->desc, "%s (private rgpud, pid %d)", listen, (int)s->pid);
    note("started rgpud (pid %d) on %s: %s", (int)s->pid, listen, rgpud);
    r = wait_ready(s, o->wait_s, why, sizeof why);
    if (r == READY)
        open_private_opserver(s, st);
    if (r == READY || r == READY_INTERRUPTED)
        return r == READY ? 0 : -1;
    private_failed(s, r, rgpud, why, o->wait_s);
    return -1;
}

/* ---- an SSH tunnel ------------------------------------------------------------------------- */

/* [USER@]HOST[:PORT] -> destination "[USER@]HOST" and port ("" for ssh's). */
static int parse_ssh(const char *spec, char *dest, size_t dlen, char *port, size_t plen)
{
    const char *at = strrchr(spec, '@');
    const char *hostpart = at ? at + 1 : spec;
    char host[256];

    if (spec[0] == '-' || split_host_port(hostpart, host, sizeof host, port, plen, 0) < 0) {
        say("--ssh wants [USER@]HOST[:PORT], got '%s'", spec);
        return -1;
    }
    if (strcmp(port, "0") == 0)
        port[0] = '\0';
    snprintf(dest, dlen, "%.*s%s", at ? (int)(at - spec + 1) : 0, spec, host);
    return 0;
}

/* ssh [RGPU_SSH_OPTS] -N -o ... -L DIR/rgpud.sock:REMOTE -L DIR/opserver.sock:OPSERVER
 * [-p PORT] -- DEST.  The second forward reaches the op server of the rgpu
 * PyTorch device; ssh connects it only when a program uses it, so a host
 * without one costs nothing.
 * The user's options come first because ssh keeps the first value it is
 * given for an option. */
static int ssh_argv(char **argv, char *opts, char *forward, char *op_forward, char *port,
                    char *dest)
{
    int n = 0;
    argv[n++] = "ssh";
    for (char *t = strtok(opts, " \t"); t && n < MAX_ARGS - 28; t = strtok(NULL, " \t"))
        argv[n++] = t;
    /* A connection of our own, not a multiplexed one: a mux client may hand
     * the forward to a master that outlives us, and exit at once. */
    char *fixed[] = { "-N", "-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes",
                      "-o", "ConnectTimeout=10", "-o", "ControlMaster=no",
                      "-o", "ControlPath=none", "-o", "StreamLocalBindUnlink=yes",
                      "-o", "StreamLocalBindMask=0177", "-L", forward, "-L", op_forward };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[n++] = fixed[i];
    if (port[0]) {
        argv[n++] = "-p";
        argv[n++] = port;
    }
    argv[n++] = "--";
    argv[n++] = dest;
    argv[n] = NULL;
    return n;
}

/* What ssh's own words most likely mean for the user. */
static const char *ssh_hint(int log_fd)
{
    static const struct { const char *said, *hint; } hints[] = {
        { "Permission denied", "the server did not accept any key ssh offered" },
        { "Host key verification failed",
          "ssh does not know this host's key yet: connect once with ssh to check and "
          "accept it" },
        { "Could not resolve hostname", "the host name does not resolve: a typo?" },
        { "Connection refused", "no SSH server listens there (wrong host or port?)" },
        { "timed out", "the host does not answer (down, or a firewall in the way)" },
        { "cannot run", "the OpenSSH client is not installed (Debian: openssh-client)" },
        { "in use", "the local socket could not be made: try again" },
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++)
        if (log_contains(log_fd, hints[i].said))
            return hints[i].hint;
    return "ssh could not set up the tunnel";
}

static void tunnel_failed(struct server *s, enum ready r, const char *dest, const char *port,
                          const char *remote, const char *why, double wait_s)
{
    char cmd[600], host[400];
    snprintf(cmd, sizeof cmd, "ssh%s%s %s true", port[0] ? " -p " : "", port, dest);
    snprintf(host, sizeof host, "%s%s%s", dest, port[0] ? " port " : "", port);
    if (r == READY_EXITED) {
        say("ssh to %s failed (%s)", host, why);
        log_show(s->log_fd, "ssh");
        say("%s", ssh_hint(s->log_fd));
        say("check that `%s` works without a prompt: rgpu runs ssh with BatchMode=yes; "
            "give it a key or other options in RGPU_SSH_OPTS (e.g. RGPU_SSH_OPTS='-i "
            "~/.ssh/gpu_key')", cmd);
    } else if (r == READY_REMOTE_DOWN) {
        say("the SSH tunnel to %s is up, but nothing answers at %s there", host, remote);
        log_show(s->log_fd, "ssh");
        say("start rgpud on %s (systemctl start rgpud), check that your user there may use "
            "its socket (group rgpu), or name its address with --remote ADDR", dest);
    } else if (r == READY_TIMEOUT) {
        say("no welcome from rgpud through the SSH tunnel to %s within %g s (%s)", host,
            wait_s, why);
        log_show(s->log_fd, "ssh");
        say("check that `%s` works quickly, or allow longer with --timeout SECONDS", cmd);
    } else if (r == READY_GARBLED) {
        say("%s on %s did not answer as the rgpud we may trust (%s): is it rgpud's? "
            "(--remote)", remote, dest, why);
    }
}

/* rgpud's address on the ssh host as ssh -L wants it: a socket path, or
 * HOST:PORT. */
static int remote_target(const char *remote, char *buf, size_t size)
{
    struct rgpu_addr a;
    char why[512];
    if (rgpu_addr_parse(remote, &a, why, sizeof why) < 0) {
        say("--remote: %s", why);
        return -1;
    }
    if (a.kind == RGPU_ADDR_UNIX)
        snprintf(buf, size, "%s", a.path);
    else
        rgpu_addr_format(&a, buf, size);
    return 0;
}

/* ssh forwards a local socket in our private directory to rgpud's on the
 * host: no local TCP port for other users to reach, and ssh's own
 * authentication decides who gets to the far side. */
static int open_tunnel(struct server *s, const struct options *o, const struct stubs *st)
{
    char dest[300], port[32], forward[500], op_forward[500], target[300], why[512];
    const char *remote = o->remote ? o->remote : RGPU_DEFAULT_SERVER;
    const char *remote_op = getenv("RGPU_REMOTE_OPSERVER");
    const char *env = getenv("RGPU_SSH_OPTS");
    char opts[2048], *argv[MAX_ARGS];
    enum ready r;

    if (parse_ssh(o->ssh, dest, sizeof dest, port, sizeof port) < 0 ||
        remote_target(remote, target, sizeof target) < 0)
        return -1;
    s->kind = SERVER_TUNNEL;
    if (private_dir(s->dir, sizeof s->dir) < 0) {
        say("cannot make a private directory for the tunnel's socket: %s", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    snprintf(opts, sizeof opts, "%s", env ? env : "");
    snprintf(forward, sizeof forward, "%s/rgpud.sock:%s", s->dir, target);
    snprintf(s->addr, sizeof s->addr, "unix:%s/rgpud.sock", s->dir);
    if (!remote_op || !*remote_op)
        remote_op = REMOTE_OP_SOCK;
    if (strncmp(remote_op, "unix:", 5) == 0)
        remote_op += 5;
    snprintf(op_forward, sizeof op_forward, "%s/" OP_SOCK ":%s", s->dir, remote_op);
    snprintf(s->op_addr, sizeof s->op_addr, "unix:%s/" OP_SOCK, s->dir);
    ssh_argv(argv, opts, forward, op_forward, port, dest);
    s->log_fd = log_open();
    s->pid = spawn(argv, s->log_fd, st->dir);
    if (s->pid < 0) {
        say("cannot start ssh: %s", strerror(errno));
        return -1;
    }
    snprintf(s->desc, sizeof s->desc, "%s, an SSH tunnel to %s%s%s, %s there (ssh pid %d)",
             s->addr, dest, port[0] ? ":" : "", port, remote, (int)s->pid);
    note("started ssh (pid %d): %s -> %s, %s there", (int)s->pid, s->addr, dest, remote);
    r = wait_ready(s, o->wait_s, why, sizeof why);
    if (r == READY || r == READY_INTERRUPTED)
        return r == READY ? 0 : -1;
    tunnel_failed(s, r, dest, port, remote, why, o->wait_s);
    return -1;
}

/* ---- the server as a whole --------------------------------------------------------------------- */

static int check_welcome(const struct server *s)
{
    if (s->w.status == RGPU_OK)
        return 0;
    say("rgpud at %s refused the session: %s%s%s", s->desc, rgpu_status_name(s->w.status),
        s->w.message[0] ? ": " : "", s->w.message);
    if (s->w.status == RGPU_EVERSION)
        say("run the same rgpu version on both machines (this launcher is rgpu %s, "
            "protocol %d)", RGPU_VERSION, RGPU_PROTO_VERSION);
    if (s->w.status == RGPU_EAUTH)
        say("who may connect: rgpud's user, root and its group (rgpu) on its Unix socket; "
            "on TCP, holders of a key it knows (RGPU_KEY_FILE); see docs/security.md");
    return -1;
}

int server_open(struct server *s, const struct options *o, const struct stubs *st)
{
    const char *env = getenv("RGPU_SERVER");
    int rc;

    memset(s, 0, sizeof *s);
    s->log_fd = -1;
    s->op_log_fd = -1;
    if (o->ssh)
        rc = open_tunnel(s, o, st);
    else if (o->server)
        rc = open_given(s, o, o->server, "");
    else if (env && *env)
        rc = open_given(s, o, env, " (from RGPU_SERVER)");
    else
        rc = open_private(s, o, st);
    if (rc == 0)
        rc = check_welcome(s);
    if (rc == 0)
        note("connected to %s: server %s, CUDA runtime %d, driver %d", s->desc, s->w.name,
             s->w.runtime_version, s->w.driver_version);
    return rc;
}

void server_close(struct server *s)
{
    char how[64];
    const char *what = s->kind == SERVER_TUNNEL ? "the SSH tunnel" : "rgpud";
    if (s->pid > 0 && helper_exited(s, how, sizeof how)) {
        /* It was meant to outlive the command: whatever the command saw
         * (lost connections) is explained here. */
        say("%s ended before the command did (%s)", what, how);
        log_show(s->log_fd, s->kind == SERVER_TUNNEL ? "ssh" : "rgpud");
    }
    if (s->pid > 0) {
        note("stopping %s (pid %d)", what, (int)s->pid);
        stop_helper(s);
    }
    if (s->log_fd >= 0) {
        if (verbose && s->kind == SERVER_TUNNEL)
            log_show(s->log_fd, "ssh");
        close(s->log_fd);
    }
    s->log_fd = -1;
    if (s->op_pid > 0) {
        note("stopping rgpu-opserver (pid %d)", (int)s->op_pid);
        stop_group(&s->op_pid);
    }
    if (s->op_log_fd >= 0) {
        if (verbose)
            log_show(s->op_log_fd, "rgpu-opserver");
        close(s->op_log_fd);
    }
    s->op_log_fd = -1;
    if (s->dir[0]) {
        /* Only what we put there: the sockets of our rgpud, op server or ssh. */
        char sock[100];
        snprintf(sock, sizeof sock, "%s/rgpud.sock", s->dir);
        unlink(sock);
        snprintf(sock, sizeof sock, "%s/" OP_SOCK, s->dir);
        unlink(sock);
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}

static void version_text(int v, char *buf, size_t size)
{
    snprintf(buf, size, "%d.%d", v / 1000, v % 1000 / 10);
}

/* What a server that cannot run CUDA lacks, or NULL when it has both. */
static const char *missing_cuda(const struct welcome *w)
{
    if (w->runtime_version == 0)
        return "CUDA runtime (it could not load libcudart)";
    if (w->driver_version == 0)
        return "NVIDIA driver (its CUDA runtime reports driver version 0)";
    return NULL;
}

int server_check_versions(const struct server *s, const struct stubs *st)
{
    char have[16];
    const char *missing = missing_cuda(&s->w);
    if (missing) {
        say("rgpud at %s has no GPU to offer: no %s", s->desc, missing);
        if (s->kind == SERVER_PRIVATE)
            say("this machine cannot run CUDA itself: to use a GPU elsewhere give --ssh "
                "[USER@]GPUHOST (or --server ADDR)");
        else
            say("on that host, check nvidia-smi and rgpud's log (rgpud -v)");
        return -1;
    }
    if (st->cuda_major && s->w.runtime_version / 1000 != st->cuda_major) {
        version_text(s->w.runtime_version, have, sizeof have);
        say("the stubs in %s are for CUDA %d (libcudart.so.%d), but rgpud at %s runs CUDA "
            "runtime %s: use an rgpu built for CUDA %d on this machine, or give rgpud a CUDA "
            "%d runtime", st->dir, st->cuda_major, st->cuda_major, s->desc, have,
            s->w.runtime_version / 1000, st->cuda_major);
        return -1;
    }
    return 0;
}
