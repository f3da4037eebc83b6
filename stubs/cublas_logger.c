/* cuBLAS's logger on the client: whether logging is on (cublasLoggerConfigure
 * or CUBLAS_LOGINFO_DBG=1) goes to the server's cuBLAS; its messages come
 * back (common/rgpu_liblog.h) and are written where the program asked
 * (standard output, standard error, a file: cublasLoggerConfigure or
 * CUBLAS_LOGDEST_DBG) and handed to its callback (cublasSetLoggerCallback). */
#include "rgpu_client.h"
#include "rgpu_liblog.h"
#include "rgpu_log.h"
#include "cublas_procs.h"

#include <cublas_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cublas_lib)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cublasLogCallback callback;
static int to_stdout, to_stderr;
static FILE *file;              /* a log file opened here, or NULL */

static void sink(const struct rgpu_liblog_msg *m)
{
    size_t len = strlen(m->text);
    const char *nl = len && m->text[len - 1] == '\n' ? "" : "\n";
    pthread_mutex_lock(&lock);
    cublasLogCallback cb = callback;
    if (to_stdout)
        fprintf(stdout, "%s%s", m->text, nl);
    if (to_stderr)
        fprintf(stderr, "%s%s", m->text, nl);
    if (file) {
        fprintf(file, "%s%s", m->text, nl);
        fflush(file);
    }
    pthread_mutex_unlock(&lock);
    if (cb)
        cb(m->text);        /* unlocked: it may call cuBLAS */
}

static void send_on(int on)
{
    rgpu_liblog_configure(LIB, RGPU_CUBLAS_rgpu_cublas_log_settings, on != 0);
}

/* Called with lock held.  spec: "stdout", "stderr" or a path. */
static int set_destination(const char *spec)
{
    FILE *f = rgpu_liblog_open(spec);
    if (!f)
        return -1;
    if (f == stdout) {
        to_stdout = 1;
    } else if (f == stderr) {
        to_stderr = 1;
    } else {
        if (file)
            fclose(file);
        file = f;
    }
    return 0;
}

RGPU_EXPORT cublasStatus_t cublasLoggerConfigure(int logIsOn, int logToStdOut, int logToStdErr,
                                                 const char *logFileName)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    to_stdout = logToStdOut;
    to_stderr = logToStdErr;
    if (file) {
        fclose(file);
        file = NULL;
    }
    if (logFileName && *logFileName)
        rc = set_destination(logFileName);
    pthread_mutex_unlock(&lock);
    if (rc < 0) {
        rgpu_warn("cublasLoggerConfigure: cannot open %s", logFileName);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    send_on(logIsOn);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasSetLoggerCallback(cublasLogCallback userCallback)
{
    pthread_mutex_lock(&lock);
    callback = userCallback;
    pthread_mutex_unlock(&lock);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasGetLoggerCallback(cublasLogCallback *userCallback)
{
    if (!userCallback)
        return CUBLAS_STATUS_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *userCallback = callback;
    pthread_mutex_unlock(&lock);
    return CUBLAS_STATUS_SUCCESS;
}

/* The environment cuBLAS reads at load time, read here instead: the
 * server's environment is not the program's. */
__attribute__((constructor)) static void logger_from_environment(void)
{
    const char *on = getenv("CUBLAS_LOGINFO_DBG");
    const char *dest = getenv("CUBLAS_LOGDEST_DBG");

    rgpu_liblog_register(LIB, sink);
    if (!on || strcmp(on, "1") != 0)
        return;
    if (dest && *dest && set_destination(dest) < 0)
        rgpu_warn("CUBLAS_LOGDEST_DBG=%s: cannot open it; logging to standard error", dest);
    if (!to_stdout && !file)
        to_stderr = 1;
    send_on(1);
}
