/* sandbox probe: preloaded into rgpud by tests/sandbox/sandbox.c, it plays
 * a client who has taken over its session.  On SIGRTMIN+n the process does
 * what an intruder would (the PROBE_* numbers below), from the signal
 * handler, so that the test can choose the moment: after the session is
 * confined and serving.
 *
 * Environment: RGPU_PROBE_DIR, a folder of the test's (the file to write,
 * the marker a shell would leave, the file to read); RGPU_PROBE_PORT, the
 * loopback port the test listens on (where a connect would land).
 * Outcomes the process survives are written to rgpud's log (its stderr
 * when it started) as "probe: NAME rc=R errno=E". */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static char dir[1024];
/* rgpud's log: a session's own fd 2 goes to its client (daemon/output.c),
 * so reports go to a copy of the fd 2 the daemon started with. */
static int log_fd = STDERR_FILENO;
static struct sockaddr_in target;
static int early_socket = -1;       /* made before the sandbox, connected after */

static void report(const char *name, long rc, int err)
{
    char line[128];
    /* snprintf is not async-signal-safe in general; here no other code of
     * this process formats at the same time, as the test drives it. */
    int n = snprintf(line, sizeof line, "probe: %s rc=%ld errno=%d\n", name, rc, err);
    if (n > 0 && write(log_fd, line, (size_t)n) < 0)
        _exit(99);
}

static void path_in_dir(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static void do_exec(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "echo ran > %s/%s", dir, PROBE_EXEC_MARKER);
    char *argv[] = { "sh", "-c", cmd, NULL };
    execve("/bin/sh", argv, environ);
    report("exec", -1, errno);
}

static void do_connect(void)
{
    long rc = connect(early_socket, (struct sockaddr *)&target, sizeof target);
    report("connect", rc, rc < 0 ? errno : 0);
}

static void do_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    long rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&target, sizeof target);
    report("socket", rc, rc < 0 ? errno : 0);
}

static void do_write(void)
{
    char path[1200];
    path_in_dir(path, sizeof path, PROBE_WRITTEN);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    long rc = fd < 0 ? -1 : write(fd, "owned\n", 6);
    report("write", rc, rc < 0 ? errno : 0);
}

static void do_read_outside(void)
{
    char path[1200], buf[64];
    path_in_dir(path, sizeof path, PROBE_SECRET);
    int fd = open(path, O_RDONLY);
    long rc = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    report("read-outside", rc, rc < 0 ? errno : 0);
    if (fd >= 0)
        close(fd);
}

static void do_unlisted(void)
{
    /* syslog(SYSLOG_ACTION_SIZE_BUFFER): harmless, and in no list. */
    long rc = syscall(SYS_syslog, 10, NULL, 0);
    report("unlisted", rc, rc < 0 ? errno : 0);
}

static void do_tiocsti(void)
{
    char c = '\n';
    long rc = ioctl(log_fd, TIOCSTI, &c);      /* where a terminal would be */
    report("tiocsti", rc, rc < 0 ? errno : 0);
}

static void do_thread_name(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", (long)syscall(SYS_gettid));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    long rc = fd < 0 ? -1 : write(fd, "probe", 5);
    report("thread-name", rc, rc < 0 ? errno : 0);
    if (fd >= 0)
        close(fd);
}

/* A file in /dev/shm named prefix + pid: made, written, unlinked. */
static long make_shm_file(const char *prefix)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/%s%ld", prefix, (long)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    long rc = fd < 0 ? -1 : write(fd, "cuda\n", 5);
    if (fd >= 0) {
        close(fd);
        if (unlink(path) < 0)
            rc = -1;
    }
    return rc;
}

static void do_cuda_shm(void)
{
    long rc = make_shm_file(PROBE_CUDA_SHM_NAME);
    report("cuda-shm", rc, rc < 0 ? errno : 0);
}

static void do_other_shm(void)
{
    long rc = make_shm_file(PROBE_OTHER_SHM_NAME);
    report("other-shm", rc, rc < 0 ? errno : 0);
}

static void on_signal(int sig)
{
    int saved = errno;
    switch (sig - SIGRTMIN) {
    case PROBE_EXEC: do_exec(); break;
    case PROBE_CONNECT: do_connect(); break;
    case PROBE_SOCKET: do_socket(); break;
    case PROBE_WRITE: do_write(); break;
    case PROBE_READ_OUTSIDE: do_read_outside(); break;
    case PROBE_UNLISTED: do_unlisted(); break;
    case PROBE_TIOCSTI: do_tiocsti(); break;
    case PROBE_THREAD_NAME: do_thread_name(); break;
    case PROBE_CUDA_SHM: do_cuda_shm(); break;
    case PROBE_OTHER_SHM: do_other_shm(); break;
    default: break;
    }
    errno = saved;
}

__attribute__((constructor)) static void probe_init(void)
{
    const char *d = getenv("RGPU_PROBE_DIR"), *port = getenv("RGPU_PROBE_PORT");
    struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
    if (!d || !port)
        return;
    snprintf(dir, sizeof dir, "%s", d);
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0)
        log_fd = fd;
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)atoi(port));
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    early_socket = socket(AF_INET, SOCK_STREAM, 0);
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < PROBE_COUNT; i++)
        sigaction(SIGRTMIN + i, &sa, NULL);
}
