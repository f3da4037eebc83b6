/* What the sandbox probe (probe.c) does on SIGRTMIN + n, shared with the
 * test that signals it (sandbox.c). */
#ifndef RGPU_TEST_PROBE_H
#define RGPU_TEST_PROBE_H

enum {
    PROBE_EXEC,             /* execve a shell that leaves PROBE_EXEC_MARKER */
    PROBE_CONNECT,          /* connect a socket made before the sandbox */
    PROBE_SOCKET,           /* make a socket and connect it */
    PROBE_WRITE,            /* open PROBE_WRITTEN with O_WRONLY|O_CREAT, write */
    PROBE_READ_OUTSIDE,     /* read PROBE_SECRET, outside Landlock's paths */
    PROBE_UNLISTED,         /* a system call in no list: EPERM and a log line */
    PROBE_TIOCSTI,          /* type into the terminal on stderr */
    PROBE_THREAD_NAME,      /* name a thread as the CUDA driver does: write
                               /proc/self/task/TID/comm (answered with /dev/null) */
    PROBE_CUDA_SHM,         /* make, write and unlink a CUDA IPC file
                               (/dev/shm/cuda.shm.*), as the driver does */
    PROBE_OTHER_SHM,        /* make another file in /dev/shm */
    PROBE_COUNT
};

#define PROBE_EXEC_MARKER "exec-marker"
#define PROBE_WRITTEN "written"
#define PROBE_SECRET "secret"
/* Under /dev/shm, with the probe's pid after them. */
#define PROBE_CUDA_SHM_NAME "cuda.shm.rgpu-probe-"
#define PROBE_OTHER_SHM_NAME "rgpu-probe-other-"

#endif
