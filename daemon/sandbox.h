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

/* Confine this session process: called once the GPU libraries are loaded
 * and before anything from the client is read.  Exits (the session ends)
 * when seccomp cannot be set; a kernel without Landlock is logged and
 * tolerated. */
void sandbox_session(const struct rgpud_options *opt);

#endif
