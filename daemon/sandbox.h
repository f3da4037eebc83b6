/* The sandbox of rgpud's processes (sandbox.c): what a session, and the
 * listener, can still do once a client may have taken it over. */
#ifndef RGPUD_SANDBOX_H
#define RGPUD_SANDBOX_H

#include <stdint.h>
#include <sys/types.h>

struct rgpud_options;

/* The default --session-memory-limit: room for CUDA and a PyTorch
 * workload's host-side buffers, a bound on what one client can take. */
#define SANDBOX_DEFAULT_SESSION_MEMORY (64ULL << 30)

/* "64G", "512M", "1T", "4096" (bytes) into *out: 0, or -1 when malformed. */
int sandbox_parse_size(const char *s, uint64_t *out);

/* The listener's own filter, once it listens: no new privileges, no core
 * dumps, no execve, ptrace or outgoing connections.  With --no-sandbox,
 * only a warning.  Exits when a layer it asked for cannot be set. */
void sandbox_listener(const struct rgpud_options *opt);

/* What a session's confinement is made of: rgpud's options
 * (sandbox_session), or the op server's (opserver_sandbox.c). */
struct sandbox_profile {
    uint64_t memory;            /* RLIMIT_DATA; 0: the default; RLIM_INFINITY: none */
    int confine;                /* 0: the limits only (--no-sandbox) */
    int audit;                  /* --sandbox-audit: forbidden calls refused and logged */
    const char *lib_dir;        /* a folder of libraries to read and map, or NULL */
    const char *lib_dirs;       /* more such folders, ':'-separated (--cuda12-lib-dir), or NULL */
    const char *read_paths;     /* more folders or files to read, ':'-separated, or NULL */
};

/* The session's limits, then (confine) its layers: 0, or -1 when a layer
 * that must hold could not be set (the caller ends the session without
 * serving it).  A kernel without Landlock is logged and tolerated. */
int sandbox_session_profile(const struct sandbox_profile *p);

/* The listener's layers (no new privileges, no core dumps, its filter):
 * 0, or -1 when one could not be set. */
int sandbox_listener_layers(void);

/* Confine this session process: called once the GPU libraries are loaded
 * and before anything from the client is read.  Exits (the session ends)
 * when seccomp cannot be set; a kernel without Landlock is logged and
 * tolerated. */
void sandbox_session(const struct rgpud_options *opt);

/* The CUDA IPC files a session's driver creates in /dev/shm (cuda.shm.*,
 * made by the trap handler) outlive the session unless someone removes
 * them: each one created is told on fd (the session's line to the
 * listener, listener.c) as one message of this layout, and the listener
 * removes those still there when the session has ended. */
#define SANDBOX_LINE_IPC_FILE 'F'
#define SANDBOX_IPC_NAME_MAX 128
struct sandbox_ipc_file {
    char type;                  /* SANDBOX_LINE_IPC_FILE */
    char pad[7];
    uint64_t dev, ino;          /* the file created, as fstat saw it */
    char name[SANDBOX_IPC_NAME_MAX];    /* in /dev/shm, NUL-terminated */
};
void sandbox_report_ipc_files(int fd);
/* Whether name (within /dev/shm) is one of the driver's IPC files. */
int sandbox_ipc_name_ok(const char *name);

#endif
