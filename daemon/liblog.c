/* Library logs, server side: the settings a client's cuBLAS, cuBLASLt and
 * cuDNN stubs send (rgpu_<lib>_log_settings, codegen/<lib>_own.h), applied
 * to the real libraries
 * with rgpud's own logger callbacks, which send each message to the client
 * as a RGPU_MSG_LOG frame (client side: common/rgpu_liblog.c).  The server
 * never writes these logs itself: where they go is the program's choice. */
#include "rgpud.h"
#include "rgpu_proto.h"
#include "cublas_serve.h"
#include "cublasLt_serve.h"
#include "cudnn_serve.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cudnn_graph.h>
#include <stdio.h>
#include <string.h>

#define REAL(lib, name) ((__typeof__(&name))backend_sym(lib, #name))
#define NEED(fn) do { if (!(fn)) return serve_transport(RGPU_ENOSYM); } while (0)

static void pack_str(msgpack_packer *pk, const char *s)
{
    s = s ? s : "";
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* [RGPU_MSG_LOG, lib, level, function, text, [details...]] */
static void send_log(const char *lib, int level, const char *function, const char *text,
                     const int64_t *details, unsigned ndetails)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_int(&pk, RGPU_MSG_LOG);
    pack_str(&pk, lib);
    msgpack_pack_int(&pk, level);
    pack_str(&pk, function);
    pack_str(&pk, text);
    msgpack_pack_array(&pk, ndetails);
    for (unsigned i = 0; i < ndetails; i++)
        msgpack_pack_int64(&pk, details[i]);
    session_send(&sb);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- cuBLASLt: a mask ---------------------------------------------------------------- */

static void forward_cublasLt(int level, const char *function, const char *message)
{
    send_log("cublasLt", level, function, message, NULL, 0);
}

/* cuBLASLt writes its log file as well as calling the callback: the
 * server's is /dev/null, the client writes its own.  Opened "r+" (O_RDWR):
 * the sandbox kills a session that opens anything with O_WRONLY or O_CREAT. */
cublasStatus_t serve_rgpu_cublasLt_log_settings(int mask)
{
    static FILE *devnull;
    NEED(REAL("cublasLt", cublasLtLoggerSetCallback));
    NEED(REAL("cublasLt", cublasLtLoggerSetFile));
    NEED(REAL("cublasLt", cublasLtLoggerSetMask));
    if (!devnull && !(devnull = fopen("/dev/null", "r+")))
        return serve_transport(RGPU_ENOMEM);
    cublasStatus_t rc = REAL("cublasLt", cublasLtLoggerSetCallback)(forward_cublasLt);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublasLt", cublasLtLoggerSetFile)(devnull);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublasLt", cublasLtLoggerSetMask)(mask);
    return rc;
}

/* ---- cuBLAS: on or off -------------------------------------------------------------- */

static void forward_cublas(const char *message)
{
    send_log("cublas", 0, "", message, NULL, 0);
}

cublasStatus_t serve_rgpu_cublas_log_settings(int on)
{
    NEED(REAL("cublas", cublasLoggerConfigure));
    NEED(REAL("cublas", cublasSetLoggerCallback));
    cublasStatus_t rc = REAL("cublas", cublasSetLoggerCallback)(on ? forward_cublas : NULL);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublas", cublasLoggerConfigure)(on != 0, 0, 0, NULL);
    return rc;
}

/* ---- cuDNN: a mask -------------------------------------------------------------------- */

/* The debug structure's fields the client rebuilds; pid and tid are the
 * client's own there. */
static void forward_cudnn(cudnnSeverity_t sev, void *udata, const cudnnDebug_t *dbg,
                          const char *msg)
{
    (void)udata;
    int64_t d[7] = { 0 };
    if (dbg) {
        d[0] = dbg->cudnn_version;
        d[1] = dbg->cudnnStatus;
        d[2] = dbg->time_sec;
        d[3] = dbg->time_usec;
        d[4] = dbg->time_delta;
        d[5] = (int64_t)(uintptr_t)dbg->handle;
        d[6] = (int64_t)(uintptr_t)dbg->stream;
    }
    send_log("cudnn", sev, "", msg, d, dbg ? 7 : 0);
}

cudnnStatus_t serve_rgpu_cudnn_log_settings(unsigned int mask)
{
    NEED(REAL("cudnn", cudnnSetCallback));
    return REAL("cudnn", cudnnSetCallback)(mask, NULL, mask ? forward_cudnn : NULL);
}
