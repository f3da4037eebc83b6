/* The sandbox of rgpud's processes.
 *
 * A session replays a client's calls, and kernels the client sends can
 * reach any address of the session (with HMM the GPU reads pageable host
 * memory), so a hostile client must be assumed able to run code in its
 * session.  What that gains it is decided here, once the GPU libraries are
 * loaded and before the first byte from the client is read:
 *
 *   - no new privileges, no core dumps, not dumpable (no ptrace or
 *     /proc/PID/mem by other processes of the rgpu user);
 *   - resource limits: open files, and private writable memory
 *     (RLIMIT_DATA; not RLIMIT_AS, since the CUDA driver reserves terabytes
 *     of address space it never fills);
 *   - Landlock, where the kernel has it: the filesystem shrinks to reading
 *     the libraries, /proc and /sys, and reading and writing the NVIDIA
 *     device nodes; no TCP, no signals or abstract sockets beyond itself;
 *   - seccomp: the system calls CUDA needs at run time are allowed, the
 *     ones an intruder needs (execve, ptrace, new sockets, connect, opening
 *     for writing, changing files) kill the process, and everything else
 *     fails with EPERM and a log line naming it, so that a call of the real
 *     driver missing from the list shows up in the log rather than killing
 *     a real workload.
 *
 * The listener gets a small filter of its own: it only accepts and forks.
 * docs/security.md describes the layers for administrators. */
#include "sandbox.h"
#include "rgpud.h"
#include "rgpu_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

/* A sanitized rgpud (the test suite's sanitizer build) differs in two
 * ways: AddressSanitizer maps terabytes of shadow memory as private
 * writable mappings, which RLIMIT_DATA counts, so its sessions run without
 * the memory limit; and LeakSanitizer stops the process's threads with
 * ptrace at exit, so its listener may ptrace. */
#if defined(__SANITIZE_ADDRESS__)
#define RGPUD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RGPUD_ASAN 1
#endif
#endif

/* ---- sizes ------------------------------------------------------------------ */

int sandbox_parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (strcmp(s, "unlimited") == 0) {
        *out = RLIM_INFINITY;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (errno || *end || v == 0 || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* ---- async-signal-safe log lines ------------------------------------------- */

/* The SIGSYS handler and the listener's reaping cannot use stdio: lines
 * are built by hand, in rgpu_log's format. */
struct line {
    char buf[512];
    size_t len;
};

static void put_str(struct line *l, const char *s)
{
    while (*s && l->len < sizeof l->buf - 1)
        l->buf[l->len++] = *s++;
}

static void put_num(struct line *l, long v)
{
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    if (v < 0)
        put_str(l, "-");
    do
        digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < (int)sizeof digits);
    while (n > 0 && l->len < sizeof l->buf - 1)
        l->buf[l->len++] = digits[--n];
}

static void line_start(struct line *l, const char *level)
{
    l->len = 0;
    put_str(l, rgpu_log_prefix());
    put_str(l, "[");
    put_num(l, (long)getpid());
    put_str(l, "]: ");
    put_str(l, level);
    put_str(l, ": ");
}

static void line_write(struct line *l)
{
    l->buf[l->len++] = '\n';
    ssize_t rc = write(rgpu_log_fd(), l->buf, l->len);
    (void)rc;       /* nowhere to report a failed log write */
}

/* ---- common layers ------------------------------------------------------------- */

/* No core files: a session's memory holds other data of its client, and
 * the listener's too.  Not dumpable: processes of the same user can no
 * longer ptrace this one or open its /proc/PID/mem, environ or pagemap
 * (the process itself keeps reading its own maps, status, fd and exe, which
 * is what the CUDA driver reads). */
static int no_privs_no_dumps(void)
{
    struct rlimit zero = { 0, 0 };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        rgpu_error("sandbox: cannot set no_new_privs: %s", strerror(errno));
        return -1;
    }
    if (setrlimit(RLIMIT_CORE, &zero) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        rgpu_error("sandbox: cannot turn core dumps off: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Lower (never raise) a limit to at most max. */
static void cap_limit(int resource, const char *name, rlim_t max)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0)
        return;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > max)
        rl.rlim_max = max;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max)
        rl.rlim_cur = rl.rlim_max;
    if (setrlimit(resource, &rl) < 0)
        rgpu_warn("sandbox: cannot limit %s: %s", name, strerror(errno));
}

/* The driver holds a few descriptors per device and context; thousands is
 * plenty, and bounds what a session can pin in the kernel. */
#define SESSION_MAX_FILES 4096

static void session_limits(const struct sandbox_profile *p)
{
    uint64_t mem = p->memory ? p->memory : SANDBOX_DEFAULT_SESSION_MEMORY;
    cap_limit(RLIMIT_NOFILE, "open files", SESSION_MAX_FILES);
#ifdef RGPUD_ASAN
    (void)mem;
#else
    if (mem != RLIM_INFINITY)
        cap_limit(RLIMIT_DATA, "session memory", (rlim_t)mem);
#endif
}

/* ---- seccomp -------------------------------------------------------------------- */


/* System calls CUDA, cuBLAS, cuDNN, glibc and the session need once the
 * libraries are loaded: memory and device management (ioctl and mmap on
 * the device nodes), I/O on descriptors already open, threads, futexes,
 * clocks, signals, and looking at files (opens are ruled below). */
static const char *const session_allowed[] = {
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
    "preadv2", "pwritev2", "sendmsg", "recvmsg", "sendto", "recvfrom", "sendmmsg",
    "recvmmsg", "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername",
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "close", "close_range", "fstat", "newfstatat", "stat", "lstat", "statx", "statfs",
    "fstatfs", "lseek", "getdents64", "readlink", "readlinkat", "access", "faccessat",
    "faccessat2", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "eventfd", "eventfd2",
    "memfd_create", "ftruncate", "flock", "fsync", "fdatasync", "fadvise64", "readahead",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "getcwd", "chdir", "fchdir", "umask", "timerfd_create", "timerfd_settime",
    "timerfd_gettime",
    "ioctl", "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync", "mincore",
    "mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier",
    "get_mempolicy", "set_mempolicy", "mbind", "pkey_alloc", "pkey_free", "pkey_mprotect",
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq",
    "set_tid_address", "arch_prctl",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
    "alarm", "setitimer", "getitimer",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getattr", "getpriority", "getcpu",
    "exit", "exit_group", "wait4", "waitid",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "rt_sigpending",
    "rt_sigsuspend", "sigaltstack", "restart_syscall", "pause",
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
    "getresuid", "getresgid", "getpgrp", "getpgid", "getsid", "capget",
    "getrandom", "uname", "sysinfo", "getrlimit", "setrlimit", "getrusage", "times",
};

/* What an intruder needs, and CUDA does not: the process is killed. */
static const char *const session_killed[] = {
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
    "socket", "connect", "bind", "listen", "accept", "accept4",
    "creat", "fork", "vfork",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir",
    "symlink", "symlinkat", "link", "linkat", "mknod", "mknodat",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "truncate", "fallocate", "utime", "utimes", "utimensat", "futimesat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    /* io_uring performs opens and connects that seccomp never sees. */
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "bpf", "perf_event_open", "userfaultfd", "unshare", "setns", "mount", "umount2",
    "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
    "move_mount", "mount_setattr", "keyctl", "add_key", "request_key",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp",
    "name_to_handle_at", "open_by_handle_at", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "uselib", "swapon", "swapoff",
    "reboot", "acct",
};

/* The listener's: it accepts and forks, and nothing it does needs these. */
static const char *const listener_killed[] = {
    "execve", "execveat",
#ifndef RGPUD_ASAN
    "ptrace", "process_vm_readv", "process_vm_writev",
#endif
    "io_uring_setup", "io_uring_enter", "io_uring_register",
};

/* Opening for writing, creating, truncating or appending (O_RDWR stays:
 * the driver opens /dev/nvidia* so at cuInit and at every context; Landlock
 * decides where). */
static const unsigned long open_write_flags[] = {
    /* O_TMPFILE by its own bit: glibc's __O_TMPFILE includes O_DIRECTORY,
     * which every directory listing sets. */
    O_WRONLY, O_CREAT, O_TRUNC, O_APPEND, 020000000,
};

/* --sandbox-audit: a forbidden call is refused with EPERM and logged like
 * an unlisted one instead of killing the session (to find what a driver
 * needs without losing the session). */
static int audit_only;

/* A rule on a system call named as the kernel does; one unknown to this
 * libseccomp or absent from this architecture is skipped (it then falls to
 * the filter's default). */
static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr < 0)
        return 0;

    int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
    if (rc < 0)
        rgpu_error("sandbox: seccomp rule for %s: %s", name, strerror(-rc));
    return rc;
}

static int rules(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = rule(ctx, action, names[i], 0, NULL);
    return rc;
}

#define RULES(ctx, action, list) rules(ctx, action, list, sizeof list / sizeof list[0])

/* /dev/shm, opened before the filter (cuda_shm_call), or -1. */
static int shm_dir_fd = -1;

/* open and openat: allowed without any writing flag.  With one they fall to
 * the filter's default, the trap, where on_sigsys kills the session (but
 * for thread names and a graph's dot description into memory). */
static int open_rules(scmp_filter_ctx ctx, const char *name, unsigned flags_arg)
{
    unsigned long all = 0;
    for (size_t i = 0; i < sizeof open_write_flags / sizeof open_write_flags[0]; i++)
        all |= open_write_flags[i];
    struct scmp_arg_cmp none = { flags_arg, SCMP_CMP_MASKED_EQ, all, 0 };
    return rule(ctx, SCMP_ACT_ALLOW, name, 1, &none);
}

/* Calls allowed with some arguments only. */
static int conditional_rules(scmp_filter_ctx ctx)
{
    const uint64_t self = (uint64_t)getpid();
    /* Threads only: a new process is what an intruder wants for a shell
     * (other clones fall to the trap, which kills). */
    struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
    /* Signals, and resource limits, to this process only; kill(0) would
     * reach the listener's whole process group. */
    /* (The second datum, unused by these comparisons, is given: clang's
     * -Wextra wants every field of the macros' compound literals.) */
    struct scmp_arg_cmp to_self = SCMP_A0(SCMP_CMP_EQ, self, 0);
    struct scmp_arg_cmp pid_zero = SCMP_A0(SCMP_CMP_EQ, 0, 0);
    /* Everything prctl does but making the process dumpable again. */
    struct scmp_arg_cmp not_dumpable = SCMP_A0(SCMP_CMP_NE, PR_SET_DUMPABLE, 0);
    int rc = 0;

    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &thread);
    /* clone3 passes its flags in memory, out of the filter's sight: glibc
     * falls back to clone on ENOSYS.  openat2 likewise. */
    if (!rc) rc = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
    if (!rc) rc = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", 0, NULL);
    if (!rc) rc = open_rules(ctx, "open", 1);
    if (!rc) rc = open_rules(ctx, "openat", 2);
    if (!rc && shm_dir_fd >= 0) {
        struct scmp_arg_cmp on_shm = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu,
                                             (uint64_t)shm_dir_fd);
        rc = rule(ctx, SCMP_ACT_ALLOW, "openat", 1, &on_shm);
        if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "unlinkat", 1, &on_shm);
    }
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "kill", 1, &to_self);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &to_self);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "rt_sigqueueinfo", 1, &to_self);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "rt_tgsigqueueinfo", 1, &to_self);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &pid_zero);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &to_self);
    if (!rc) rc = rule(ctx, SCMP_ACT_ALLOW, "prctl", 1, &not_dumpable);
    return rc;
}

/* One line per system call number, the first time: numbers are bounded by
 * the architecture's table, larger ones share the last slot. */
#define TRAP_SLOTS 1024
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1           /* si_code of a seccomp SIGSYS; older glibc lacks it */
#endif
static unsigned char trap_seen[TRAP_SLOTS];
/* The calls that kill, by number (their names, for the log line). */
static const char *killing[TRAP_SLOTS];

static void note_killed(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name(names[i]);
        if (nr >= 0 && nr < TRAP_SLOTS)
            killing[nr] = names[i];
    }
}
/* What a thread's name is written to (opened before the filter). */
static int devnull_fd = -1;

/* A system call outside every list: make it fail with EPERM, and say which
 * one, so that a call of the real driver we did not foresee shows up in the
 * log instead of killing the workload. */
/* The trapped call's arguments and its result, in the interrupted
 * thread's registers. */
static void trapped_args(const void *ctx, long a[4])
{
#if defined(__x86_64__)
    const greg_t *r = ((const ucontext_t *)ctx)->uc_mcontext.gregs;
    a[0] = r[REG_RDI], a[1] = r[REG_RSI], a[2] = r[REG_RDX], a[3] = r[REG_R10];
#elif defined(__aarch64__)
    const unsigned long long *r = ((const ucontext_t *)ctx)->uc_mcontext.regs;
    a[0] = (long)r[0], a[1] = (long)r[1], a[2] = (long)r[2], a[3] = (long)r[3];
#else
    (void)ctx;
    a[0] = a[1] = a[2] = a[3] = 0;
#endif
}

static void trapped_result(void *ctx, long v)
{
#if defined(__x86_64__)
    ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RAX] = v;
#elif defined(__aarch64__)
    ((ucontext_t *)ctx)->uc_mcontext.regs[0] = (unsigned long long)v;
#else
    (void)ctx;
    (void)v;
#endif
}

/* The path a trapped call names, for the log and for the thread-name
 * exception: an open's, a connect's or bind's socket (an abstract name
 * starts with a NUL: shown from the next byte), an unlink's, a symlink's
 * new name.  NULL for other calls. */
static const char *trapped_path(int nr, const long a[4])
{
    if (nr == SYS_connect || nr == SYS_bind) {
        const struct sockaddr_un *sun = (const struct sockaddr_un *)a[1];
        if (!sun || sun->sun_family != AF_UNIX)
            return NULL;
        return sun->sun_path[0] ? sun->sun_path : sun->sun_path + 1;
    }
    switch (nr) {
#ifdef SYS_open
    case SYS_open:
    case SYS_unlink:
    case SYS_mkdir:
#endif
        return (const char *)a[0];
#ifdef SYS_symlink
    case SYS_symlink:
#endif
    case SYS_openat:
    case SYS_unlinkat:
    case SYS_mkdirat:
        return (const char *)a[1];
    case SYS_symlinkat:
        return (const char *)a[2];
    default:
        return NULL;
    }
}

/* Whether a trapped call is an open (for writing: the only opens trapped). */
static int is_open(int nr)
{
#ifdef SYS_open
    if (nr == SYS_open)
        return 1;
#endif
    return nr == SYS_openat;
}

/* Whether path names one of this process's thread names:
 * /proc/self/task/TID/comm or /proc/thread-self/comm (the driver names its
 * threads by writing there). */
static int is_thread_name(const char *path)
{
    static const char task[] = "/proc/self/task/", own[] = "/proc/thread-self/comm";
    if (strcmp(path, own) == 0)
        return 1;
    if (strncmp(path, task, sizeof task - 1) != 0)
        return 0;
    const char *p = path + sizeof task - 1;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    return strcmp(p, "/comm") == 0;
}

static void log_trapped(const char *what, int nr, const long a[4], const char *path,
                        const char *after)
{
    struct line l;
    line_start(&l, "warn");
    put_str(&l, what);
    put_num(&l, nr);
    put_str(&l, " (");
    for (int i = 0; i < 3; i++) {
        put_num(&l, a[i]);
        put_str(&l, ", ");
    }
    put_str(&l, "...)");
    if (path) {
        put_str(&l, " path \"");
        for (int i = 0; i < 160 && path[i] && l.len < sizeof l.buf - 8; i++)
            l.buf[l.len++] = path[i];
        put_str(&l, "\"");
    }
    put_str(&l, after);
    line_write(&l);
}

/* ---- the driver's IPC files -------------------------------------------------------- */

/* CUDA IPC (interprocess events and memory handles) keeps its state in
 * files the driver creates in /dev/shm, named cuda.shm.*, which the
 * exporting and the importing sessions open and the last one unlinks.
 * The session opens /dev/shm before its filter; these opens and unlinks
 * are trapped, and the handler makes them through that descriptor, the
 * only one on which the filter lets openat and unlinkat through (Landlock
 * keeps its reach to /dev/shm).  Every other name is refused as before. */
#define CUDA_SHM_DIR "/dev/shm/"
#define CUDA_SHM_PREFIX "cuda.shm."

/* The name within /dev/shm of a CUDA IPC file, or NULL. */
static const char *cuda_shm_name(const char *path)
{
    if (!path || strncmp(path, CUDA_SHM_DIR, sizeof CUDA_SHM_DIR - 1) != 0)
        return NULL;
    const char *name = path + sizeof CUDA_SHM_DIR - 1;
    return sandbox_ipc_name_ok(name) ? name : NULL;
}

int sandbox_ipc_name_ok(const char *name)
{
    return strncmp(name, CUDA_SHM_PREFIX, sizeof CUDA_SHM_PREFIX - 1) == 0 &&
           !strchr(name, '/');
}

/* Where the session names the IPC files it creates (its line to the
 * listener, which removes them once the session has ended), or -1. */
static int ipc_report_fd = -1;

void sandbox_report_ipc_files(int fd)
{
    ipc_report_fd = fd;
}

/* Tell the listener that this session created the file open at fd.  In
 * the trap handler: async-signal-safe calls only.  A name too long to
 * travel is not told (and not removed). */
static void report_created(int fd, const char *name)
{
    struct sandbox_ipc_file m = { .type = SANDBOX_LINE_IPC_FILE };
    struct stat st;
    size_t len = strlen(name);
    if (ipc_report_fd < 0 || len >= sizeof m.name || fstat(fd, &st) < 0)
        return;
    m.dev = (uint64_t)st.st_dev;
    m.ino = (uint64_t)st.st_ino;
    memcpy(m.name, name, len);
    (void)!send(ipc_report_fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* openat(/dev/shm, name, flags): a descriptor, or -1 with errno.  When the
 * flags may create the file, it is created exclusively first, so that
 * what this call created is known and told; O_CREAT without O_EXCL still
 * opens a file that exists. */
static long shm_openat(const char *name, int flags, mode_t mode)
{
    flags |= O_NOFOLLOW | O_CLOEXEC;
    if (!(flags & O_CREAT))
        return syscall(SYS_openat, shm_dir_fd, name, flags, mode);
    for (int tries = 0; tries < 4; tries++) {
        long fd = syscall(SYS_openat, shm_dir_fd, name, flags | O_EXCL, mode);
        if (fd >= 0) {
            report_created((int)fd, name);
            return fd;
        }
        if (errno != EEXIST || (flags & O_EXCL))
            return -1;
        fd = syscall(SYS_openat, shm_dir_fd, name, flags & ~O_CREAT, mode);
        if (fd >= 0 || errno != ENOENT)
            return fd;
        /* Removed between the two: create it after all. */
    }
    return -1;
}

/* 1 when the trapped call is an open or unlink of a CUDA IPC file, made
 * here with its result (a descriptor, 0, or minus errno) in *result. */
static int cuda_shm_call(int nr, const long a[4], const char *path, long *result)
{
    const char *name = shm_dir_fd >= 0 ? cuda_shm_name(path) : NULL;
    long rc;
    if (!name)
        return 0;
    if (nr == SYS_openat)
        rc = shm_openat(name, (int)a[2], (mode_t)a[3]);
#ifdef SYS_open
    else if (nr == SYS_open)
        rc = shm_openat(name, (int)a[1], (mode_t)a[2]);
    else if (nr == SYS_unlink)
        rc = syscall(SYS_unlinkat, shm_dir_fd, name, 0);
#endif
    else if (nr == SYS_unlinkat && a[2] == 0)
        rc = syscall(SYS_unlinkat, shm_dir_fd, name, 0);
    else
        return 0;
    *result = rc < 0 ? -errno : rc;
    return 1;
}

/* NVIDIA's libraries (NVML, in a session's first queries) remove and
 * remake the /dev/char/MAJOR:MINOR links of the GPU's device nodes.  A
 * session may change no file, but refusing that is harmless: such an
 * unlink, symlink or mkdir fails with EPERM (logged once) instead of
 * killing the session. */
static int is_device_link_change(int nr, const char *path)
{
    static const char dir[] = "/dev/char";
    int changes = nr == SYS_unlinkat || nr == SYS_symlinkat || nr == SYS_mkdirat;
#ifdef SYS_unlink
    changes = changes || nr == SYS_unlink || nr == SYS_symlink || nr == SYS_mkdir;
#endif
    return changes && path && strncmp(path, dir, sizeof dir - 1) == 0 &&
           (path[sizeof dir - 1] == '/' || path[sizeof dir - 1] == '\0');
}

/* A trapped call.  An open for writing: a thread naming itself gets
 * /dev/null (the name is lost, nothing is written), anything else kills
 * the session -- SIGSYS with its default action once this handler returns;
 * the call itself never runs, whatever a compromised session does to this
 * handler.  Any other call is outside every list: it fails with EPERM and
 * is logged once, so that a call of the real driver we did not foresee
 * shows up in the log instead of killing the workload.  --sandbox-audit
 * refuses and logs instead of killing. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    int saved = errno, nr = si->si_syscall;
    unsigned slot = nr >= 0 && nr < TRAP_SLOTS ? (unsigned)nr : TRAP_SLOTS - 1;
    long a[4], shm_result;
    (void)sig;
    if (si->si_code != SYS_SECCOMP)
        return;         /* sent by someone: nothing to answer */
    trapped_args(ctx, a);
    trapped_result(ctx, -EPERM);
    const char *path = trapped_path(nr, a);
    /* Trapped, these were forbidden outright: a clone that is no thread,
     * the ioctls of the second filter, an open for writing. */
    int kills = (killing[slot] || nr == SYS_clone || nr == SYS_ioctl || is_open(nr)) &&
                !is_device_link_change(nr, path);
    int dot_fd = __atomic_load_n(&graph_dot_fd, __ATOMIC_SEQ_CST);
    if (is_open(nr) && path && is_thread_name(path)) {
        int fd = devnull_fd >= 0 ? fcntl(devnull_fd, F_DUPFD_CLOEXEC, 0) : -1;
        trapped_result(ctx, fd >= 0 ? fd : -EPERM);
    } else if (cuda_shm_call(nr, a, path, &shm_result)) {
        trapped_result(ctx, shm_result);
    } else if (is_open(nr) && path && dot_fd >= 0 && strcmp(path, graph_dot_path) == 0) {
        /* A graph's dot description, into the session's own memory file
         * (daemon/hand_graphs.c): the file itself, already empty. */
        int fd = fcntl(dot_fd, F_DUPFD_CLOEXEC, 0);
        trapped_result(ctx, fd >= 0 ? fd : -EPERM);
    } else if (kills && !audit_only) {
        log_trapped("sandbox: killing the session for a forbidden system call: ", nr, a, path,
                    killing[slot] ? killing[slot] : "");
        signal(SIGSYS, SIG_DFL);
        syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGSYS);
    } else if (!__atomic_exchange_n(&trap_seen[slot], 1, __ATOMIC_RELAXED)) {
        log_trapped("sandbox: refused system call ", nr, a, path,
                    kills ? " with EPERM (--sandbox-audit: it would have killed the session)"
                          : " with EPERM (not in the session's list; if a CUDA program fails "
                            "because of it, report it)");
    }
    errno = saved;
}

static int load_filter(scmp_filter_ctx ctx, const char *who)
{
    /* TSYNC: threads the GPU libraries already started get the filter
     * too; a thread that cannot is an error, never silently left out. */
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    /* The kernel would otherwise turn on its speculative-store-bypass
     * mitigation for a filtered process, which slows all of its code (the
     * launch rate by a third on an H200 host).  It guards data within one
     * process, and a session holds only its own client's: the sandbox
     * exists to keep that client out of everything else. */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_SSB, 1);
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc == 0)
        rc = seccomp_load(ctx);
    if (rc != 0)
        rgpu_error("sandbox: cannot load the %s's seccomp filter: %s", who, strerror(-rc));
    return rc;
}

/* Kills that depend on the arguments of a call the main filter allows
 * outright: libseccomp lets an unconditional rule win over conditional
 * ones of the same call, so they go in a second filter, allowing all else.
 * The kernel runs both and takes the stricter action. */
static int session_arg_kills(void)
{
    /* The kernel reads ioctl's request as 32 bits: compare those only.
     * TIOCSTI and TIOCLINUX would type into a terminal on stderr. */
    struct scmp_arg_cmp sti = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
    struct scmp_arg_cmp linux_console = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx ? 0 : -ENOMEM;

    /* Trapped: on_sigsys kills for an ioctl it sees (the main filter
     * allows every other ioctl outright). */
    if (!rc) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(ioctl), 1, sti);
    if (!rc) rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(ioctl), 1, linux_console);
    if (!rc) rc = load_filter(ctx, "session");
    if (ctx)
        seccomp_release(ctx);
    return rc;
}

static int session_seccomp(void)
{
    struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO | SA_RESTART };
    scmp_filter_ctx ctx;
    int rc;

    sigemptyset(&sa.sa_mask);
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (sigaction(SIGSYS, &sa, NULL) < 0) {
        rgpu_error("sandbox: cannot catch SIGSYS: %s", strerror(errno));
        return -1;
    }
    note_killed(session_killed, sizeof session_killed / sizeof session_killed[0]);
    /* First the small filter: the main one forbids seccomp() itself. */
    if (session_arg_kills() != 0)
        return -1;
    if (!(ctx = seccomp_init(SCMP_ACT_TRAP))) {
        rgpu_error("sandbox: seccomp_init failed");
        return -1;
    }
    /* A binary tree of the ~250 rules: every system call of every thread
     * passes through this filter, so it must be quick (optimisation level
     * 2; older libseccomp without it keeps the linear list). */
    (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    rc = RULES(ctx, SCMP_ACT_ALLOW, session_allowed);
    if (rc == 0)
        rc = conditional_rules(ctx);
    if (rc == 0)
        rc = load_filter(ctx, "session");
    seccomp_release(ctx);
    return rc == 0 ? 0 : -1;
}

/* ---- Landlock ------------------------------------------------------------------- */

/* Rights of later ABIs, where the installed headers predate them. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

#define LL_FS_ABI1 ((1ULL << 13) - 1)   /* EXECUTE .. MAKE_SYM */
#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_READ_EXEC (LL_READ | LANDLOCK_ACCESS_FS_EXECUTE)
#define LL_DEVICE (LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* The rights a rule on a file (not a directory) may carry. */
#define LL_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                        LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
                        LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The ruleset attribute of the newest ABI; older kernels are given the
 * prefix they know. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;    /* ABI 4 */
    uint64_t scoped;                /* ABI 6 */
};

struct ll {
    int fd;
    uint64_t handled;
};

/* Grant access beneath path (or to the file path); a path this host lacks
 * is skipped. */
static void ll_allow(const struct ll *ll, const char *path, uint64_t access)
{
    struct landlock_path_beneath_attr pb = { 0 };
    struct stat st;
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= LL_FILE_RIGHTS;
    pb.allowed_access = access & ll->handled;
    pb.parent_fd = fd;
    if (pb.allowed_access &&
        syscall(SYS_landlock_add_rule, ll->fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        rgpu_warn("sandbox: Landlock rule for %s: %s", path, strerror(errno));
    close(fd);
}

/* The folder of a path ("/a/b/libx.so" -> "/a/b"), into buf. */
static const char *dir_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= size)
        return NULL;
    memcpy(buf, path, (size_t)(slash - path));
    buf[slash - path] = '\0';
    return buf;
}

/* Every library loaded so far: the backend, its dependencies, and the
 * folders the driver and cuDNN load their parts from later. */
static int allow_loaded_lib(struct dl_phdr_info *info, size_t size, void *data)
{
    char dir[4096];
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0] == '/' &&
        dir_of(info->dlpi_name, dir, sizeof dir))
        ll_allow(data, dir, LL_READ_EXEC);
    return 0;
}

static void allow_path_list(const struct ll *ll, const char *list, uint64_t access)
{
    char dir[4096];
    while (list && *list) {
        size_t n = strcspn(list, ":");
        if (n > 0 && n < sizeof dir && list[0] == '/') {
            memcpy(dir, list, n);
            dir[n] = '\0';
            ll_allow(ll, dir, access);
        }
        list += n + (list[n] == ':');
    }
}

/* Entries of dir whose name begins with prefix. */
static void allow_prefixed(const struct ll *ll, const char *dir, const char *prefix,
                           uint64_t access)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    if (!d)
        return;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            ll_allow(ll, path, access);
    closedir(d);
}

/* What a session may touch.  /etc is named file by file: /etc/rgpu holds
 * the daemon's keys, which a session must not read. */
static void ll_rules(const struct ll *ll, const struct sandbox_profile *p)
{
    static const char *const lib_dirs[] = {
        "/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32",
        "/usr/local/nvidia", "/opt", "/usr/share/nvidia",
    };
    static const char *const etc_files[] = {
        "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
        "/etc/nvidia", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
        "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/ssl", "/etc/OpenCL",
    };
    static const char *const devices[] = {
        "/dev/urandom", "/dev/random", "/dev/zero",
    };

    for (size_t i = 0; i < sizeof lib_dirs / sizeof lib_dirs[0]; i++)
        ll_allow(ll, lib_dirs[i], LL_READ_EXEC);
    allow_prefixed(ll, "/usr/local", "cuda", LL_READ_EXEC);
    if (p->lib_dir)
        ll_allow(ll, p->lib_dir, LL_READ_EXEC);
    allow_path_list(ll, p->lib_dirs, LL_READ_EXEC);
    allow_path_list(ll, getenv("LD_LIBRARY_PATH"), LL_READ_EXEC);
    allow_path_list(ll, p->read_paths, LL_READ);
    dl_iterate_phdr(allow_loaded_lib, (void *)ll);
    for (size_t i = 0; i < sizeof etc_files / sizeof etc_files[0]; i++)
        ll_allow(ll, etc_files[i], LL_READ);
    ll_allow(ll, "/proc", LL_READ);
    ll_allow(ll, "/sys", LL_READ);
    /* The device nodes: /dev/nvidia0.., nvidiactl, nvidia-uvm, nvidia-modeset,
     * the nvidia-caps folder (MIG).  Nodes made after this point are not
     * reachable: the driver makes them before, at boot or when the first
     * session of the host starts. */
    ll_allow(ll, "/dev", LANDLOCK_ACCESS_FS_READ_DIR);
    allow_prefixed(ll, "/dev", "nvidia", LL_DEVICE);
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
        ll_allow(ll, devices[i], LANDLOCK_ACCESS_FS_READ_FILE);
    /* The driver's IPC files (cuda_shm_call). */
    ll_allow(ll, "/dev/shm", LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                                 LANDLOCK_ACCESS_FS_TRUNCATE);
    /* cuBLASLt's log file is /dev/null, opened for writing (liblog.c). */
    ll_allow(ll, "/dev/null", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE);
}

/* Threads started before Landlock (by the GPU libraries' constructors)
 * keep the unrestricted filesystem: say so when there are any. */
/* Expected on every session of a real GPU (cuInit starts a thread) and on
 * kernels whose Landlock cannot sync threads: said at -v, not warned. */
static void note_early_threads(void)
{
    char line[128];
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0 && atoi(line + 8) > 1)
            rgpu_info("sandbox: %d threads, started by the driver before the sandbox, "
                      "are outside Landlock (seccomp covers them)", atoi(line + 8) - 1);
    fclose(f);
}

/* Landlock where the kernel has it; its absence (old kernels, gVisor and
 * the like) is logged and tolerated: seccomp and the unit still hold. */
static void session_landlock(const struct sandbox_profile *p)
{
    struct ll_ruleset_attr attr = { 0 };
    struct ll ll;
    size_t size = sizeof attr.handled_access_fs;
    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
                           LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) {
        rgpu_warn("sandbox: this kernel has no Landlock (%s): the session's filesystem is "
                  "limited by seccomp and the service's own sandbox only", strerror(errno));
        return;
    }
    attr.handled_access_fs = LL_FS_ABI1;
    if (abi >= 2)
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    if (abi >= 4) {
        /* Handled with no rule: no TCP bind or connect at all. */
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size = offsetof(struct ll_ruleset_attr, scoped);
    }
    if (abi >= 6) {
        /* No signals to, nor abstract sockets of, processes outside. */
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        size = sizeof attr;
    }
    ll.handled = attr.handled_access_fs;
    ll.fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ll.fd < 0) {
        rgpu_warn("sandbox: cannot create a Landlock ruleset (ABI %d): %s", abi,
                  strerror(errno));
        return;
    }
    ll_rules(&ll, p);
    note_early_threads();
    if (syscall(SYS_landlock_restrict_self, ll.fd, 0) < 0)
        rgpu_warn("sandbox: cannot apply Landlock (ABI %d): %s", abi, strerror(errno));
    else
        rgpu_debug("sandbox: Landlock ABI %d applied", abi);
    close(ll.fd);
}

/* ---- entry points ----------------------------------------------------------------- */

/* The driver's JIT cache would be shared by every client of the rgpu user,
 * letting one plant compiled code for another's PTX; a cache per session
 * would need files created after the sandbox forbids it.  So: none. */
static void no_jit_cache(void)
{
    setenv("CUDA_CACHE_DISABLE", "1", 1);
}

/* RGPUD_SANDBOX_OFF=LAYER,...: leave out layers one by one (limits,
 * nodump, landlock, seccomp), to find which one a driver trips over. */
static int layer_off(const char *layer)
{
    const char *off = getenv("RGPUD_SANDBOX_OFF");
    size_t n = strlen(layer);
    for (const char *p = off; p && (p = strstr(p, layer)); p += n)
        if ((p == off || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int sandbox_session_profile(const struct sandbox_profile *p)
{
    no_jit_cache();
    if (!layer_off("limits"))
        session_limits(p);
    if (!p->confine)
        return 0;
    audit_only = p->audit;
    if (!layer_off("nodump") && no_privs_no_dumps() < 0)
        return -1;
    shm_dir_fd = open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (!layer_off("landlock"))
        session_landlock(p);
    if (!layer_off("seccomp") && session_seccomp() < 0) {
        rgpu_error("sandbox: refusing to serve this client unconfined (--no-sandbox turns "
                   "the sandbox off)");
        return -1;
    }
    return 0;
}

void sandbox_session(const struct rgpud_options *opt)
{
    const struct sandbox_profile p = {
        .memory = opt->session_memory, .confine = !opt->no_sandbox,
        .audit = opt->sandbox_audit, .lib_dir = opt->lib_dir, .lib_dirs = opt->cuda12_dirs,
    };
    if (sandbox_session_profile(&p) < 0)
        _exit(3);
}

int sandbox_listener_layers(void)
{
    scmp_filter_ctx ctx;
    int rc;

    if (no_privs_no_dumps() < 0)
        return -1;
    if (!(ctx = seccomp_init(SCMP_ACT_ALLOW))) {
        rgpu_error("sandbox: seccomp_init failed");
        return -1;
    }
    rc = RULES(ctx, SCMP_ACT_KILL_PROCESS, listener_killed);
    if (rc == 0)
        rc = load_filter(ctx, "listener");
    seccomp_release(ctx);
    return rc == 0 ? 0 : -1;
}

void sandbox_listener(const struct rgpud_options *opt)
{
    no_jit_cache();
    if (opt->no_sandbox) {
        rgpu_warn("--no-sandbox: sessions run unconfined; a client that takes over its "
                  "session can do anything this user can");
        return;
    }
    if (sandbox_listener_layers() < 0)
        exit(1);
}
