/* Library logs: cuBLAS, cuBLASLt and cuDNN log from inside the server's
 * process; a program's logger callbacks and log files are on the client.
 * The client stub of a library registers a sink and tells the core the
 * library's log setting; the core sends it to rgpud at once when
 * connected, else before that library's first call (so loading a stub
 * never opens a session); rgpud
 * installs its own callbacks in the real library, and each message comes
 * back as a RGPU_MSG_LOG frame, which the core hands to the sink once the
 * call that waits for it has its reply — on the caller's thread, with no
 * lock held, so a callback may itself call CUDA. */
#ifndef RGPU_LIBLOG_H
#define RGPU_LIBLOG_H

#include <stdint.h>
#include <stdio.h>

#include "rgpu_marshal.h"

/* One forwarded message.  details: library-specific numbers (cuDNN's
 * debug structure), ndetails of them. */
struct rgpu_liblog_msg {
    int level;
    const char *function;
    const char *text;
    const int64_t *details;
    unsigned ndetails;
};

typedef void (*rgpu_liblog_sink)(const struct rgpu_liblog_msg *m);

/* lib's messages go to sink from now on. */
void rgpu_liblog_register(const struct rgpu_lib *lib, rgpu_liblog_sink sink);
/* lib's log setting (a mask, or on and off, whose meaning the library's
 * serve_ function knows: daemon/liblog.c) goes to rgpud through proc, the
 * library's own rgpu_<lib>_log_settings (codegen/<lib>_own.h): at once,
 * waiting for it to be applied, when connected; else before lib's first
 * call. */
void rgpu_liblog_configure(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                           int setting);

/* A log destination named as the libraries' environment variables name
 * them: "stdout", "stderr" or a file path, opened for appending; "%i" in a
 * path becomes the process id (cuBLASLt's convention).  NULL when the file
 * cannot be opened (errno says why). */
FILE *rgpu_liblog_open(const char *spec);

/* For the core (rgpu_client.c): send pending settings of lib; queue a
 * RGPU_MSG_LOG frame (taking it); hand queued messages to their sinks. */
void rgpu_liblog_flush_settings(const struct rgpu_lib *lib);
void rgpu_liblog_queue(char *frame, size_t len);
void rgpu_liblog_deliver(void);

#endif
