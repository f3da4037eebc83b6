/* sandbox: a client that takes over its session gains little.
 *
 *   sandbox RGPUD LIB_DIR PROBE_LIB
 *
 * Starts RGPUD (fake GPU backend from LIB_DIR) with PROBE_LIB preloaded:
 * on SIGRTMIN+n the probe makes the session do what an intruder would
 * (probe.h).  For each case a client (a forked child using the cudart stub
 * this test is linked with) makes a call, the session is signalled, and
 * the test checks that the session was killed by the sandbox (the
 * listener's log line says SIGSYS), that the attempt left no trace (no
 * file, no connection, no shell), and that the client's next call fails
 * promptly instead of hanging -- or, for the cases the session survives,
 * that the attempt failed and the client is still served.  The first case
 * also checks /proc/PID/status: Seccomp 2, NoNewPrivs 1.  A control run
 * with --no-sandbox shows the probe's write succeeding, so the checks can
 * fail.  After everything a new client must still be served.
 *
 * Prints "ok CASE" or "FAIL CASE: why"; exits non-zero on any failure. */
#include "probe.h"

#include <cuda_runtime_api.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 10000        /* generous: only a hang reaches it */

static const char *rgpud, *lib_dir, *probe_lib;
static char dir[] = "/tmp/rgpu-sandbox.XXXXXX";
static char log_path[256];
static pid_t daemon_pid;
static char sock_path[64];      /* rgpud listens here: dir/rgpud.sock */
static int attacker_fd = -1;    /* where a connect from the session would land */
static int have_landlock;
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

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void path_in_dir(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static int exists(const char *name)
{
    char path[512];
    path_in_dir(path, sizeof path, name);
    return access(path, F_OK) == 0;
}

/* ---- the daemon and its log ------------------------------------------------ */

static int loopback_socket(int *port_out, int do_listen)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (do_listen && listen(fd, 8) < 0) ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fail("loopback socket: %s", strerror(e));
    }
    *port_out = ntohs(sa.sin_port);
    return fd;
}

static int accepting(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void stop_daemon(void)
{
    if (daemon_pid <= 0)
        return;
    kill(-daemon_pid, SIGTERM);
    for (int i = 0; i < 100 && waitpid(daemon_pid, NULL, WNOHANG) == 0; i++)
        pause_ms(50);
    kill(-daemon_pid, SIGKILL);
    waitpid(daemon_pid, NULL, 0);
    daemon_pid = 0;
}

/* How start_daemon starts rgpud. */
enum { UNCONFINED, SANDBOXED, AUDITED };

static int start_daemon(int sandboxed)
{
    char listen_arg[80], port_env[16];
    int probe_port;
    snprintf(sock_path, sizeof sock_path, "%s/rgpud.sock", dir);
    snprintf(listen_arg, sizeof listen_arg, "unix:%s", sock_path);
    if (attacker_fd < 0 && (attacker_fd = loopback_socket(&probe_port, 1)) < 0)
        return -1;
    if (attacker_fd >= 0) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        getsockname(attacker_fd, (struct sockaddr *)&sa, &len);
        snprintf(port_env, sizeof port_env, "%d", ntohs(sa.sin_port));
    }
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (logfd < 0 || dup2(logfd, STDERR_FILENO) < 0)
            _exit(126);
        /* rgpud must not find the stubs this test runs on. */
        unsetenv("LD_LIBRARY_PATH");
        setenv("LD_PRELOAD", probe_lib, 1);
        /* A sanitized rgpud: the probe comes before the ASan runtime in the
         * preload list, which ASan would otherwise refuse. */
        char asan[512];
        snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0",
                 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
                 getenv("ASAN_OPTIONS") ? ":" : "");
        setenv("ASAN_OPTIONS", asan, 1);
        setenv("RGPU_PROBE_DIR", dir, 1);
        setenv("RGPU_PROBE_PORT", port_env, 1);
        setenv("RGPU_LOG", "info", 1);
        execl(rgpud, rgpud, "--foreground", "--listen", listen_arg, "--lib-dir", lib_dir,
              sandboxed == SANDBOXED ? NULL
              : sandboxed == AUDITED ? "--sandbox-audit" : "--no-sandbox", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    daemon_pid = pid;
    setenv("RGPU_SERVER", listen_arg, 1);     /* for the clients forked next */
    for (int waited = 0; waited < TIMEOUT_MS; waited += 50) {
        if (accepting())
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            daemon_pid = 0;
            return fail("rgpud exited before accepting");
        }
        pause_ms(50);
    }
    return fail("rgpud did not accept within %d ms", TIMEOUT_MS);
}

/* Whether the daemon's log contains s, waiting for it up to TIMEOUT_MS. */
static int log_has(const char *s, int wait)
{
    static char buf[1 << 20];
    for (int waited = 0;; waited += 50) {
        FILE *f = fopen(log_path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        if (strstr(buf, s))
            return 1;
        if (!wait || waited >= TIMEOUT_MS)
            return 0;
        pause_ms(50);
    }
}

/* The live (not zombie) children of the listener: the sessions. */
static int sessions(pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        char path[300], stat[512], state;
        int ppid;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t len = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
        if (f)
            fclose(f);
        stat[len] = '\0';
        char *close_paren = strrchr(stat, ')');
        if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 &&
            ppid == daemon_pid && state != 'Z' && n < max)
            out[n++] = atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return n;
}

/* The one session serving our client (probe connections of accepting()
 * end at once). */
static pid_t the_session(void)
{
    pid_t p[8];
    for (int waited = 0; waited < TIMEOUT_MS; waited += 50) {
        if (sessions(p, 8) == 1)
            return p[0];
        pause_ms(50);
    }
    return fail("not exactly one session of rgpud");
}

static int gone(pid_t pid)
{
    for (int waited = 0; waited < TIMEOUT_MS; waited += 50) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return 1;
        pause_ms(50);
    }
    return 0;
}

/* ---- the client ---------------------------------------------------------------- */

struct client {
    pid_t pid;
    int from;       /* results of its calls, an int each */
    int to;         /* one byte: make the next call */
};

static void client_main(int out, int in)
{
    void *p = NULL;
    char go;
    int rc = (int)cudaMalloc(&p, 16);
    if (write(out, &rc, sizeof rc) != sizeof rc || rc != 0)
        _exit(1);
    if (read(in, &go, 1) != 1)
        _exit(2);
    rc = (int)cudaMalloc(&p, 16);
    _exit(write(out, &rc, sizeof rc) == sizeof rc ? 0 : 3);
}

static int client_start(struct client *c)
{
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0)
        return fail("pipe: %s", strerror(errno));
    if ((c->pid = fork()) < 0)
        return fail("fork: %s", strerror(errno));
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        client_main(up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    c->from = up[0];
    c->to = down[1];
    return 0;
}

/* The result of the client's next call, within TIMEOUT_MS. */
static int client_result(struct client *c, int *rc)
{
    struct pollfd pfd = { c->from, POLLIN, 0 };
    if (poll(&pfd, 1, TIMEOUT_MS) != 1)
        return fail("the client's call did not return within %d ms", TIMEOUT_MS);
    if (read(c->from, rc, sizeof *rc) != sizeof *rc)
        return fail("the client died instead of returning an error");
    return 0;
}

static void client_end(struct client *c)
{
    int status;
    close(c->to);
    close(c->from);
    for (int i = 0; i < TIMEOUT_MS / 50 && waitpid(c->pid, &status, WNOHANG) == 0; i++)
        pause_ms(50);
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &status, 0);
}

/* ---- the cases ------------------------------------------------------------------- */

static int no_connection(void)
{
    int fd = accept4(attacker_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return fail("the session's connect reached the test's port");
    }
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : fail("accept: %s", strerror(errno));
}

static int no_shell(void)
{
    return exists(PROBE_EXEC_MARKER) ? fail("the shell ran: %s exists", PROBE_EXEC_MARKER) : 0;
}

static int no_file(void)
{
    return exists(PROBE_WRITTEN) ? fail("the file %s was written", PROBE_WRITTEN) : 0;
}

/* No file of the probe's other name is left in /dev/shm (any pid). */
static int no_other_shm(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        found |= strncmp(e->d_name, PROBE_OTHER_SHM_NAME, strlen(PROBE_OTHER_SHM_NAME)) == 0;
    if (d)
        closedir(d);
    return found ? fail("a file /dev/shm/%s* was made", PROBE_OTHER_SHM_NAME) : 0;
}

static int confined(pid_t pid)
{
    char path[64], status[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(status, 1, sizeof status - 1, f) : 0;
    if (f)
        fclose(f);
    status[n] = '\0';
    if (!strstr(status, "\nSeccomp:\t2\n"))
        return fail("session %d: no seccomp filter in %s", (int)pid, path);
    if (!strstr(status, "\nNoNewPrivs:\t1\n"))
        return fail("session %d: no_new_privs is not set", (int)pid);
    return 0;
}

struct sb_case {
    const char *name;
    int probe;
    int killed;                 /* the sandbox must kill the session */
    int (*no_trace)(void);      /* the attempt left nothing behind */
    const char *survivor_line;  /* else: the probe's report of the failed attempt */
    const char *log_line;       /* and the sandbox's line about it, if any */
};

static const struct sb_case cases[] = {
    { "execve", PROBE_EXEC, 1, no_shell, NULL, NULL },
    { "connect", PROBE_CONNECT, 1, no_connection, NULL, NULL },
    { "socket", PROBE_SOCKET, 1, no_connection, NULL, NULL },
    { "open-for-write", PROBE_WRITE, 1, no_file, NULL, NULL },
    { "tiocsti", PROBE_TIOCSTI, 1, NULL, NULL, NULL },
    { "unlisted-syscall", PROBE_UNLISTED, 0, NULL, "probe: unlisted rc=-1 errno=1\n",
      "sandbox: refused system call " },
    /* The driver names its threads through /proc: that write alone is let
     * through, to /dev/null. */
    { "thread-name", PROBE_THREAD_NAME, 0, NULL, "probe: thread-name rc=5 errno=0\n", NULL },
    /* The driver's IPC files in /dev/shm are made through the sandbox;
     * any other file there is a write like any other. */
    { "cuda-ipc-file", PROBE_CUDA_SHM, 0, NULL, "probe: cuda-shm rc=5 errno=0\n", NULL },
    { "other-shm-file", PROBE_OTHER_SHM, 1, no_other_shm, NULL, NULL },
    /* EACCES from Landlock; the line is only checked where the kernel has it. */
    { "read-outside", PROBE_READ_OUTSIDE, 0, NULL, "probe: read-outside rc=-1 errno=13\n",
      NULL },
};

static int run_case(const struct sb_case *k, int check_confined)
{
    struct client c;
    int rc;
    pid_t s;
    char line[128];

    if (client_start(&c) < 0)
        return -1;
    if (client_result(&c, &rc) < 0 || rc != 0) {
        client_end(&c);
        return rc ? fail("the client's first call failed (%d)", rc) : -1;
    }
    if ((s = the_session()) < 0 || (check_confined && confined(s) < 0) ||
        kill(s, SIGRTMIN + k->probe) < 0)
        goto out_fail;
    if (k->killed) {
        snprintf(line, sizeof line, "session %d killed by the sandbox", (int)s);
        if (!gone(s) && fail("session %d still runs after the attempt", (int)s))
            goto out_fail;
        if (!log_has(line, 1) && fail("no '%s' in the log", line))
            goto out_fail;
        if (k->no_trace && k->no_trace() < 0)
            goto out_fail;
        if (write(c.to, "g", 1) != 1 || client_result(&c, &rc) < 0)
            goto out_fail;
        if (rc == 0 && fail("the client's call after the kill succeeded"))
            goto out_fail;
    } else {
        int landlock_case = k->probe == PROBE_READ_OUTSIDE;
        if (!log_has("probe: ", 1) || (!(landlock_case && !have_landlock) &&
                                       !log_has(k->survivor_line, 1))) {
            fail("the log lacks '%.*s'", (int)strlen(k->survivor_line) - 1, k->survivor_line);
            goto out_fail;
        }
        if (k->log_line && !log_has(k->log_line, 1) && fail("no '%s' in the log", k->log_line))
            goto out_fail;
        if (kill(s, 0) < 0 && fail("session %d died", (int)s))
            goto out_fail;
        if (write(c.to, "g", 1) != 1 || client_result(&c, &rc) < 0)
            goto out_fail;
        if (rc != 0 && fail("the client's next call failed (%d)", rc))
            goto out_fail;
    }
    client_end(&c);
    return 0;
out_fail:
    client_end(&c);
    return -1;
}

/* Without the sandbox, the probe's write lands: the checks above can fail. */
static int control_unsandboxed(void)
{
    struct client c;
    int rc, ok;
    pid_t s;

    if (start_daemon(UNCONFINED) < 0 || client_start(&c) < 0)
        return -1;
    ok = client_result(&c, &rc) == 0 && rc == 0 && (s = the_session()) > 0 &&
         kill(s, SIGRTMIN + PROBE_WRITE) == 0 && log_has("probe: write rc=6", 1);
    if (!ok && !why[0])
        fail("the unsandboxed session's write did not happen");
    if (ok && !exists(PROBE_WRITTEN))
        ok = 0, fail("the unsandboxed write left no file");
    client_end(&c);
    stop_daemon();
    return ok ? 0 : -1;
}

/* --sandbox-audit: the forbidden write is refused with EPERM and logged
 * as one that would have killed; the session lives on and serves. */
static int audit_refuses_and_logs(void)
{
    struct client c;
    int rc, ok;
    pid_t s;

    char written[512];
    path_in_dir(written, sizeof written, PROBE_WRITTEN);
    unlink(written);        /* the unconfined control run left one */
    if (start_daemon(AUDITED) < 0 || client_start(&c) < 0)
        return -1;
    ok = client_result(&c, &rc) == 0 && rc == 0 && (s = the_session()) > 0 &&
         kill(s, SIGRTMIN + PROBE_WRITE) == 0 && log_has("probe: write rc=-1 errno=1\n", 1) &&
         log_has("it would have killed the session", 1);
    if (!ok && !why[0])
        fail("the audited write was not refused and logged");
    if (ok && exists(PROBE_WRITTEN))
        ok = 0, fail("the audited write left a file");
    if (ok && (write(c.to, "g", 1) != 1 || client_result(&c, &rc) < 0 || rc != 0))
        ok = 0, fail("the audited session stopped serving (%d)", rc);
    client_end(&c);
    stop_daemon();
    return ok ? 0 : -1;
}

static int new_client_served(void)
{
    struct client c;
    int rc = -1, ok;
    if (client_start(&c) < 0)
        return -1;
    ok = client_result(&c, &rc) == 0 && rc == 0 && write(c.to, "g", 1) == 1 &&
         client_result(&c, &rc) == 0 && rc == 0;
    client_end(&c);
    return ok ? 0 : fail("a new client was not served (%d)", rc);
}

static int report(const char *name, int rc)
{
    if (rc == 0)
        printf("ok %s\n", name);
    else
        printf("FAIL %s: %s\n", name, why);
    fflush(stdout);
    why[0] = '\0';
    return rc == 0 ? 0 : 1;
}

static void dump_log(void)
{
    char buf[4096];
    size_t n;
    FILE *f = fopen(log_path, "r");
    fprintf(stderr, "---- rgpud log ----\n");
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stderr);
    if (f)
        fclose(f);
    fprintf(stderr, "---- end of rgpud log ----\n");
}

static void remove_dir(void)
{
    static const char *const names[] = { PROBE_EXEC_MARKER, PROBE_WRITTEN, PROBE_SECRET,
                                         "rgpud.log" };
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        path_in_dir(path, sizeof path, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    char secret[512];
    int failures = 0;
    FILE *f;

    if (argc != 4) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR PROBE_LIB\n", argv[0]);
        return 2;
    }
    /* The test harness puts the fake backend's libcudart on
     * LD_LIBRARY_PATH, ahead of the stub this program is linked with (and
     * finds through its run path): run again without it. */
    if (getenv("LD_LIBRARY_PATH")) {
        unsetenv("LD_LIBRARY_PATH");
        execv("/proc/self/exe", argv);
        perror("re-running without LD_LIBRARY_PATH");
        return 1;
    }
    rgpud = argv[1];
    lib_dir = argv[2];
    probe_lib = argv[3];
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    path_in_dir(log_path, sizeof log_path, "rgpud.log");
    path_in_dir(secret, sizeof secret, PROBE_SECRET);
    if (!(f = fopen(secret, "w")) || fputs("secret\n", f) < 0 || fclose(f) != 0) {
        perror(secret);
        return 1;
    }
    have_landlock = syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL) >= 1;
    if (!have_landlock)
        printf("# no Landlock in this kernel: read-outside only checks the session survives\n");

    if (report("start", start_daemon(SANDBOXED)) != 0) {
        dump_log();
        remove_dir();
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failures += report(cases[i].name, run_case(&cases[i], i == 0));
    failures += report("new-client-served", new_client_served());
    failures += report("listener-alive", waitpid(daemon_pid, NULL, WNOHANG) == 0
                                             ? 0 : fail("rgpud exited"));
    stop_daemon();
    failures += report("control-no-sandbox", control_unsandboxed());
    failures += report("audit-mode", audit_refuses_and_logs());
    if (failures)
        dump_log();
    stop_daemon();
    remove_dir();
    return failures ? 1 : 0;
}
