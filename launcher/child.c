/* Running the command: fork and exec rather than exec, because the
 * launcher has a daemon or a tunnel to stop once the command is done.  To
 * its caller the launcher should look like the command itself: same exit
 * status, same death by signal, and signals sent to the launcher reach the
 * command. */
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static volatile sig_atomic_t command_pid;
static volatile sig_atomic_t pending;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (command_pid <= 0) {
        pending = sig;          /* setting up: the waits notice and unwind */
        return;
    }
    /* A key at the terminal (^C, ^\) or a hangup signals the whole
     * foreground process group, the command included: sending it again
     * would deliver it twice.  Only a signal someone sent to us alone with
     * kill() (si_code SI_USER, SI_QUEUE, SI_TKILL: <= 0) is passed on. */
    if (info->si_code <= 0)
        kill((pid_t)command_pid, sig);
}

void signals_install(void)
{
    struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO }, old;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++) {
        /* A signal we were started with ignored stays ignored, for the
         * command too (exec keeps SIG_IGN): nohup rgpu run ... works, and
         * so does a shell's SIGINT-immune background job. */
        if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(forwarded[i], &sa, NULL);
    }
    /* A daemon that goes away mid-hello must not kill us. */
    signal(SIGPIPE, SIG_IGN);
}

int signal_pending(void)
{
    return pending;
}

void die_of_signal(int sig)
{
    /* No core file from the launcher for a command's SIGSEGV/SIGQUIT: the
     * command already wrote its own where one was due. */
    struct rlimit none = { 0, 0 };
    setrlimit(RLIMIT_CORE, &none);
    fflush(NULL);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig);           /* a signal that does not kill (none of ours) */
}

/* ---- finding the command ----------------------------------------------------- */

static int check_file(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return errno;
    if (S_ISDIR(sb.st_mode))
        return EISDIR;
    return access(path, X_OK) == 0 ? 0 : EACCES;
}

int command_lookup(const char *cmd)
{
    /* Before any daemon or tunnel is started, so that a typo costs
     * nothing and says so at once. */
    if (strchr(cmd, '/'))
        return check_file(cmd);
    const char *path = getenv("PATH");
    int err = ENOENT;
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        char full[PATH_MAX];
        snprintf(full, sizeof full, "%.*s%s%s", (int)(end - p), p, end > p ? "/" : "", cmd);
        int e = check_file(full);
        if (e == 0)
            return 0;
        /* As a shell: a file there but not executable is remembered
         * (126); a directory we cannot search is just not where it is. */
        if (e == EACCES && access(full, F_OK) == 0)
            err = EACCES;
        if (!*end)
            break;
        p = end;
    }
    return err;
}

/* ---- running it ---------------------------------------------------------------- */

static void block_forwarded(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, old);
}

static void exec_command(char **argv, const struct stubs *st, const struct server *s,
                         const sigset_t *mask, int report_fd)
{
    int err;
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (stubs_setenv(st, s->addr) < 0 ||
        (s->op_addr[0] && setenv("RGPU_OP_SERVER", s->op_addr, 1) < 0) ||
        (s->op_pid > 0 && setenv("RGPU_OP_SERVER_WAIT", "60", 1) < 0)) {
        err = errno;
    } else {
        execvp(argv[0], argv);
        err = errno;
    }
    /* Tell the parent why, through the close-on-exec pipe that stays
     * silent when exec succeeds. */
    (void)!write(report_fd, &err, sizeof err);
    _exit(EXIT_NOT_FOUND);
}

/* Did the exec fail?  Returns its errno, or 0 once the pipe closes. */
static int exec_error(int fd)
{
    int err = 0;
    ssize_t n;
    do
        n = read(fd, &err, sizeof err);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof err ? err : 0;
}

static int wait_command(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

int command_run(char **argv, const struct stubs *st, const struct server *s, int *exit_code)
{
    int pipefd[2];
    sigset_t old;

    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        say("pipe: %s", strerror(errno));
        *exit_code = EXIT_RGPU_FAILED;
        return -1;
    }
    /* Blocked across fork so no signal finds the child started but its
     * pid not yet recorded; it arrives, and is forwarded, on unblock. */
    block_forwarded(&old);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        exec_command(argv, st, s, &old, pipefd[1]);
    }
    close(pipefd[1]);
    if (pid > 0)
        command_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        say("cannot start %s: %s", argv[0], strerror(errno));
        close(pipefd[0]);
        *exit_code = EXIT_RGPU_FAILED;
        return -1;
    }
    int err = exec_error(pipefd[0]);
    close(pipefd[0]);
    int status = wait_command(pid);
    command_pid = 0;
    if (err) {
        say("cannot run %s: %s", argv[0], strerror(err));
        *exit_code = err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
        return -1;
    }
    return status;
}
