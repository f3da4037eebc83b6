/* The op server's session sandbox: rgpud's layers (sandbox.c) for the
 * forked Python process that serves one client of rgpu's PyTorch device.
 *
 * rgpu_opserver.py loads this module with ctypes.  The listener calls
 * rgpu_opserver_sandbox_listener once it listens; each session calls
 * rgpu_opserver_sandbox_session once it has let its client in and PyTorch
 * and the device are initialised, before it reads the client's first
 * operation.  The session gets rgpud's session layers unchanged -- no new
 * privileges, not dumpable, limits, Landlock, the seccomp filter that kills
 * execve, new processes, sockets and opens for writing -- with the
 * folders its Python reads modules from added to what Landlock lets it
 * read.  docs/rgpu-device.md describes it for administrators. */
#include "rgpud.h"
#include "rgpu_log.h"
#include "sandbox.h"

#include <dlfcn.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/* rgpud's trap handler lets one open for writing through: a graph's dot
 * description into a memory file (hand_graphs.c).  The op server prints no
 * graphs: its descriptor stays -1, so the exception never applies. */
int graph_dot_fd = -1;
char graph_dot_path[64];

/* AddressSanitizer in the process (the sanitizer build's tests preload
 * its runtime into every program, Python too) maps terabytes of shadow
 * memory, which RLIMIT_DATA counts: as rgpud's sanitized build, no memory
 * limit then.  This module itself is never sanitized, so it asks at run
 * time. */
static int asan_in_process(void)
{
    return dlsym(RTLD_DEFAULT, "__asan_init") != NULL;
}

static void log_as_opserver(void)
{
    rgpu_log_init("rgpu-opserver", getenv("RGPU_LOG"));
}

/* memory: RLIMIT_DATA in bytes (0: rgpud's default, UINT64_MAX: none);
 * confine 0 applies the limits only (--no-sandbox); audit: forbidden calls
 * fail and are logged instead of killing (--sandbox-audit); read_paths:
 * ':'-separated folders or files the session may read (its Python's
 * module folders).  0, or -1: the session must end unserved. */
EXPORT int rgpu_opserver_sandbox_session(uint64_t memory, int confine, int audit,
                                         const char *read_paths)
{
    const struct sandbox_profile p = {
        .memory = asan_in_process() ? UINT64_MAX : memory,
        .confine = confine, .audit = audit, .read_paths = read_paths,
    };
    log_as_opserver();
    return sandbox_session_profile(&p);
}

/* 0, or -1: the listener must not serve. */
EXPORT int rgpu_opserver_sandbox_listener(void)
{
    log_as_opserver();
    return sandbox_listener_layers();
}

/* --session-memory-limit's forms ("64G", "unlimited"): 0, or -1. */
EXPORT int rgpu_opserver_parse_size(const char *s, uint64_t *out)
{
    return sandbox_parse_size(s, out);
}
