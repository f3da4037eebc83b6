/* rgpu, the launcher: shared declarations.
 *
 *   rgpu.c    command line, the `run` and `info` commands
 *   stubs.c   finding the stub libraries; the environment a command gets
 *   server.c  the server: given, a private rgpud, or an SSH tunnel
 *   probe.c   hello/welcome with rgpud, with timeouts
 *   child.c   running the command, forwarding signals, passing its status on
 *   info.c    `rgpu info`: GPUs and round trip through the stub libcuda
 *   smi.c     `rgpu smi`: an nvidia-smi table through the stub libnvidia-ml
 *   util.c    messages, clocks, helper processes' logs, paths
 */
#ifndef RGPU_LAUNCHER_H
#define RGPU_LAUNCHER_H

#include "rgpu_hello.h"

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* Exit statuses of the launcher's own failures, as env(1) and timeout(1)
 * use them, so a caller can tell them from the command's. */
#define EXIT_RGPU_FAILED    125
#define EXIT_CANNOT_EXEC    126
#define EXIT_NOT_FOUND      127

#define DEFAULT_WAIT_S      15.0

struct options {
    const char *server;         /* --server, else $RGPU_SERVER */
    const char *ssh;            /* --ssh [USER@]HOST[:PORT] */
    const char *remote;         /* --remote: rgpud's address on the ssh host */
    const char *lib_dir;        /* --lib-dir: the stub libraries */
    const char *rgpud;          /* --rgpud: the private daemon's binary */
    const char *daemon_lib_dir; /* --daemon-lib-dir: its CUDA libraries */
    double wait_s;              /* --timeout: how long to wait for a welcome */
};

/* ---- util.c ------------------------------------------------------------- */

extern int verbose;

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* -v only */
double now_s(void);
void sleep_s(double s);
/* An unlinked temporary file, for a helper's stderr. */
int log_open(void);
/* Its text, NUL-terminated (at most size - 1 bytes, the last ones). */
void log_read(int fd, char *buf, size_t size);
/* Print a helper's log indented under an error message. */
void log_show(int fd, const char *who);
int log_contains(int fd, const char *needle);
/* The directory holding this executable. */
int self_dir(char *buf, size_t size);
/* True when this executable runs from its meson build tree. */
int in_build_tree(const char *dir);
int is_executable(const char *path);
/* Split an ssh destination's HOST:PORT, [V6]:PORT or HOST (port
 * def_port); rgpud's addresses go through common/rgpu_addr.h instead. */
int split_host_port(const char *spec, char *host, size_t hlen, char *port, size_t plen,
                    int def_port);
/* A new private (0700) directory under $TMPDIR or /tmp, for a socket. */
int private_dir(char *buf, size_t size);

/* ---- signals (child.c) -------------------------------------------------- */

/* Install the handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT. */
void signals_install(void);
/* A terminating signal that arrived while no command ran, or 0. */
int signal_pending(void);
/* Die of sig after cleanup, as the command did, so the caller sees it. */
void die_of_signal(int sig) __attribute__((noreturn));

/* ---- stubs.c ------------------------------------------------------------ */

struct stubs {
    char dir[PATH_MAX];
    char preload[8 * PATH_MAX];     /* the stub sonames, colon-separated */
    int cuda_major;                 /* N of libcudart.so.N; 0 when absent */
};

/* Find the stub directory; prints why not and returns -1. */
int stubs_find(const char *opt_dir, struct stubs *st);
/* In a command's process: LD_LIBRARY_PATH, LD_PRELOAD, RGPU_SERVER. */
int stubs_setenv(const struct stubs *st, const char *server);
/* In a helper's process (rgpud, ssh): keep the stubs out of it, since a
 * stub libcuda would send the daemon's own calls back to itself. */
void stubs_scrub_env(const char *stub_dir);

/* ---- probe.c ------------------------------------------------------------ */

struct welcome {
    int status;             /* RGPU_OK, or why the server refused */
    int proto;
    int runtime_version;    /* CUDA runtime on the server, 0 when none loaded */
    int driver_version;
    char name[128];
    char message[512];
    char how[256];          /* how we were let in (rgpu_hs_client) */
    int nlibs;              /* the session's libraries and their versions */
    struct rgpu_lib_version libs[RGPU_HELLO_MAX_LIBS];
};

enum probe_result {
    PROBE_OK,               /* a welcome came (its status may still refuse) */
    PROBE_REFUSED,          /* nothing listens there */
    PROBE_UNREACHABLE,      /* resolve or connect failed otherwise */
    PROBE_CLOSED,           /* connected, closed without a welcome */
    PROBE_TIMEOUT,
    PROBE_GARBLED,          /* answered, but not with a welcome */
    PROBE_INTERRUPTED,
};

/* Say hello to spec (any rgpu_addr.h address) within timeout_s.  why gets a reason for
 * anything but PROBE_OK. */
enum probe_result probe(const char *spec, double timeout_s, struct welcome *w, char *why,
                        size_t whylen);
/* The same as a process whose runtime is of that major (12: CUDA 12's
 * soname in the hello; 0: the stubs' own), for `rgpu info`. */
enum probe_result probe_as(const char *spec, double timeout_s, int major, struct welcome *w,
                           char *why, size_t whylen);

/* ---- server.c ----------------------------------------------------------- */

enum server_kind { SERVER_GIVEN, SERVER_PRIVATE, SERVER_TUNNEL };

struct server {
    enum server_kind kind;
    char addr[300];         /* what RGPU_SERVER gets */
    char dir[80];           /* our private socket directory, or "" */
    char desc[1024];         /* for messages: what the address leads to */
    pid_t pid;              /* rgpud or ssh, 0 when none */
    int log_fd;             /* its stderr, -1 when inherited */
    struct welcome w;
    double hello_s;         /* connect + hello + welcome, once */
    /* The op server of rgpu's PyTorch device (docs/rgpu-device.md): what
     * RGPU_OP_SERVER gets ("" for none), and the private one we started. */
    char op_addr[300];
    pid_t op_pid;
    int op_log_fd;
};

/* Reach the server the options name (or start one) and check that it
 * welcomes us.  Prints what went wrong and returns -1. */
int server_open(struct server *s, const struct options *o, const struct stubs *st);
/* Stop what server_open started. */
void server_close(struct server *s);
/* Refuse versions that cannot work: returns -1 after saying why. */
int server_check_versions(const struct server *s, const struct stubs *st);

/* ---- child.c ------------------------------------------------------------ */

/* Resolve cmd as execvp would; 0, or the errno of the failure. */
int command_lookup(const char *cmd);
/* Run argv with the stubs in front; returns its wait status, or -1 (with
 * *exit_code set) when it could not be started. */
int command_run(char **argv, const struct stubs *st, const struct server *s, int *exit_code);

/* ---- info.c ------------------------------------------------------------- */

int info_print(const struct server *s, const struct stubs *st, int have_stubs);
/* ---- smi.c -------------------------------------------------------------- */
/* `rgpu smi`: the GPUs as nvidia-smi shows them, through the stub
 * libnvidia-ml.so.1.  -1 after saying why it cannot. */
int smi_print(const struct server *s, const struct stubs *st);

#endif
