/* Hello and welcome with rgpud (common/rgpu_hello.h), bounded in time.
 *
 * The launcher says hello itself before running anything: it is how it
 * knows that a private daemon or a tunnel is ready, and it turns "the
 * program failed somewhere inside CUDA" into a message about the server. */
#include "launcher.h"
#include "rgpu_addr.h"
#include "rgpu_hello.h"
#include "rgpu_proto.h"
#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"
#include "nvml_procs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int ms_left(double deadline)
{
    double left = deadline - now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* The digests of every library the stubs serve: a server of another build
 * is found out here, before the command runs.  major 12: with CUDA 12's
 * runtime, as a CUDA 12 process names it, to learn what serves one. */
static void add_libs(struct rgpu_hello *h, int major)
{
    const struct rgpu_lib *libs[] = { &rgpu_cudart_lib, &rgpu_cuda_lib, &rgpu_cublas_lib,
                                      &rgpu_cublasLt_lib, &rgpu_cudnn_lib, &rgpu_nvml_lib };
    const char *const of12[] = { "libcudart.so.12", NULL, NULL, NULL, NULL, NULL };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        rgpu_hello_add_lib(h, libs[i], major == 12 ? of12[i] : NULL);
}

static enum probe_result handshake(int fd, const struct rgpu_addr *a, double deadline,
                                   int major, struct welcome *w, char *why, size_t whylen)
{
    struct timeval tv = { ms_left(deadline) / 1000, (ms_left(deadline) % 1000) * 1000 };
    struct rgpu_hello h;
    struct rgpu_welcome rw;

    if (tv.tv_sec == 0 && tv.tv_usec == 0)
        tv.tv_usec = 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    memset(&h, 0, sizeof h);
    snprintf(h.client_name, sizeof h.client_name, "%s launcher", rgpu_version_string());
    add_libs(&h, major);
    int rc = rgpu_hs_client(fd, a->kind == RGPU_ADDR_TCP, &h, &rw, w->how, sizeof w->how, why,
                            whylen);
    if (rc == -1) {
        int e = errno;
        if (e == EINTR)
            return PROBE_INTERRUPTED;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return PROBE_TIMEOUT;
        return e == EPIPE || e == ECONNRESET ? PROBE_CLOSED : PROBE_GARBLED;
    }
    if (rc < 0)
        return PROBE_GARBLED;
    w->proto = rw.proto;
    w->status = rw.status;
    w->runtime_version = rw.runtime_version;
    w->driver_version = rw.driver_version;
    snprintf(w->name, sizeof w->name, "%s", rw.server_name);
    snprintf(w->message, sizeof w->message, "%s", rw.message);
    w->nlibs = rw.nlibs;
    memcpy(w->libs, rw.libs, sizeof rw.libs);
    return PROBE_OK;
}

enum probe_result probe(const char *spec, double timeout_s, struct welcome *w, char *why,
                        size_t whylen)
{
    return probe_as(spec, timeout_s, 0, w, why, whylen);
}

enum probe_result probe_as(const char *spec, double timeout_s, int major, struct welcome *w,
                           char *why, size_t whylen)
{
    double deadline = now_s() + timeout_s;
    struct rgpu_addr a;

    memset(w, 0, sizeof *w);
    why[0] = '\0';
    if (rgpu_addr_parse(spec, &a, why, whylen) < 0)
        return PROBE_UNREACHABLE;
    int fd = rgpu_addr_dial(&a, ms_left(deadline), why, whylen);
    if (fd < 0) {
        if (errno == EINTR)
            return PROBE_INTERRUPTED;
        if (errno == ETIMEDOUT)
            return PROBE_TIMEOUT;
        /* A socket file that is not there yet: nobody listens, as with a
         * refused TCP port. */
        return errno == ECONNREFUSED || errno == ENOENT ? PROBE_REFUSED : PROBE_UNREACHABLE;
    }
    enum probe_result r = handshake(fd, &a, deadline, major, w, why, whylen);
    close(fd);
    return r;
}
