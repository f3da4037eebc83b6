/* Library logs, server side: the settings a client's cuBLAS, cuBLASLt and
 * cuDNN stubs send (RGPU_H_LOG_SETTINGS), applied to the real libraries
 * with rgpud's own logger callbacks, which send each message to the client
 * as a RGPU_MSG_LOG frame (client side: common/rgpu_liblog.c).  The server
 * never writes these logs itself: where they go is the program's choice. */
#include "rgpud.h"
#include "rgpu_hand_procs.h"
#include "rgpu_proto.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cudnn_graph.h>
#include <stdio.h>
#include <string.h>

#define REAL(lib, name) ((__typeof__(&name))backend_sym(lib, #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

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

/* ---- cuBLASLt: [mask] ---------------------------------------------------------------- */

static void forward_cublasLt(int level, const char *function, const char *message)
{
    send_log("cublasLt", level, function, message, NULL, 0);
}

/* cuBLASLt writes its log file as well as calling the callback: the
 * server's is /dev/null, the client writes its own.  Opened "r+" (O_RDWR):
 * the sandbox kills a session that opens anything with O_WRONLY or O_CREAT. */
static int h_cublasLt_settings(struct hand_call *c)
{
    static FILE *devnull;
    uint64_t mask;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &mask));
    NEED(REAL("cublasLt", cublasLtLoggerSetCallback));
    NEED(REAL("cublasLt", cublasLtLoggerSetFile));
    NEED(REAL("cublasLt", cublasLtLoggerSetMask));
    if (!devnull && !(devnull = fopen("/dev/null", "r+")))
        return -RGPU_ENOMEM;
    msgpack_pack_array(c->out, 0);
    cublasStatus_t rc = REAL("cublasLt", cublasLtLoggerSetCallback)(forward_cublasLt);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublasLt", cublasLtLoggerSetFile)(devnull);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublasLt", cublasLtLoggerSetMask)((int)mask);
    return (int)rc;
}

/* ---- cuBLAS: [on] ----------------------------------------------------------------------- */

static void forward_cublas(const char *message)
{
    send_log("cublas", 0, "", message, NULL, 0);
}

static int h_cublas_settings(struct hand_call *c)
{
    uint64_t on;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &on));
    NEED(REAL("cublas", cublasLoggerConfigure));
    NEED(REAL("cublas", cublasSetLoggerCallback));
    msgpack_pack_array(c->out, 0);
    cublasStatus_t rc = REAL("cublas", cublasSetLoggerCallback)(on ? forward_cublas : NULL);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = REAL("cublas", cublasLoggerConfigure)(on != 0, 0, 0, NULL);
    return (int)rc;
}

/* ---- cuDNN: [mask] -------------------------------------------------------------------- */

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

static int h_cudnn_settings(struct hand_call *c)
{
    uint64_t mask;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &mask));
    NEED(REAL("cudnn", cudnnSetCallback));
    msgpack_pack_array(c->out, 0);
    return (int)REAL("cudnn", cudnnSetCallback)((unsigned)mask, NULL,
                                                mask ? forward_cudnn : NULL);
}

const struct hand_proc hand_liblog_procs[] = {
    { "cublasLt", RGPU_H_LOG_SETTINGS, h_cublasLt_settings },
    { "cublas", RGPU_H_LOG_SETTINGS, h_cublas_settings },
    { "cudnn", RGPU_H_LOG_SETTINGS, h_cudnn_settings },
};
const int hand_liblog_nprocs = sizeof hand_liblog_procs / sizeof hand_liblog_procs[0];
