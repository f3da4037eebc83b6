/* cuBLASLt's logger on the client: the settings (level or mask, from
 * cublasLtLoggerSet* or CUBLASLT_LOG_LEVEL / CUBLASLT_LOG_MASK) go to the
 * server's cuBLASLt; its messages come back (common/rgpu_liblog.h) and, as
 * cuBLASLt does (seen on an H200 with cuBLASLt 13.1), are written to the log
 * file (cublasLtLoggerSetFile, cublasLtLoggerOpenFile, CUBLASLT_LOG_FILE;
 * standard output by default) and handed to the program's callback too. */
#include "rgpu_client.h"
#include "rgpu_liblog.h"
#include "rgpu_log.h"
#include "cublasLt_procs.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LIB (&rgpu_cublasLt_lib)
#define MAX_LEVEL 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cublasLtLoggerCallback_t callback;
static FILE *file;              /* NULL: standard output */
static int file_owned;          /* opened here: closed when replaced */
static int disabled;            /* cublasLtLoggerForceDisable: for good */

/* The names cuBLASLt's own log lines give the levels. */
static const char *level_name(int level)
{
    static const char *const names[] = { "Off", "Error", "Trace", "Hints", "Info", "Api" };
    return level >= 0 && level <= MAX_LEVEL ? names[level] : "?";
}

static void sink(const struct rgpu_liblog_msg *m)
{
    pthread_mutex_lock(&lock);
    cublasLtLoggerCallback_t cb = disabled ? NULL : callback;
    FILE *f = disabled ? NULL : file ? file : stdout;
    if (f) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        fprintf(f, "[%s][cublasLt][%ld][%s][%s] %s\n", when, (long)getpid(),
                level_name(m->level), m->function, m->text);
        fflush(f);
    }
    pthread_mutex_unlock(&lock);
    if (cb)
        cb(m->level, m->function, m->text);     /* unlocked: it may call us */
}

static void send_mask(int mask)
{
    rgpu_liblog_configure(LIB, RGPU_CUBLASLT_rgpu_cublasLt_log_settings, mask);
}

/* Called with lock held. */
static void replace_file(FILE *f, int owned)
{
    if (file_owned && file)
        fclose(file);
    file = f;
    file_owned = owned;
}

RGPU_EXPORT cublasStatus_t cublasLtLoggerSetCallback(cublasLtLoggerCallback_t cb)
{
    pthread_mutex_lock(&lock);
    callback = cb;
    pthread_mutex_unlock(&lock);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasLtLoggerSetFile(FILE *f)
{
    pthread_mutex_lock(&lock);
    replace_file(f, 0);
    pthread_mutex_unlock(&lock);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasLtLoggerOpenFile(const char *logFile)
{
    if (!logFile)
        return CUBLAS_STATUS_INVALID_VALUE;
    FILE *f = fopen(logFile, "a");
    if (!f) {
        rgpu_warn("cublasLtLoggerOpenFile: cannot open %s", logFile);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    pthread_mutex_lock(&lock);
    replace_file(f, 1);
    pthread_mutex_unlock(&lock);
    return CUBLAS_STATUS_SUCCESS;
}

/* Level n logs the categories 1..n: the mask of the n lowest bits.
 * cuBLASLt 13.1 accepts levels above 5 although its header says otherwise:
 * so do we, as 5. */
RGPU_EXPORT cublasStatus_t cublasLtLoggerSetLevel(int level)
{
    if (level < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    send_mask((1 << (level < MAX_LEVEL ? level : MAX_LEVEL)) - 1);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasLtLoggerSetMask(int mask)
{
    send_mask(mask);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasLtLoggerForceDisable(void)
{
    pthread_mutex_lock(&lock);
    disabled = 1;
    pthread_mutex_unlock(&lock);
    send_mask(0);
    return CUBLAS_STATUS_SUCCESS;
}

/* The environment cuBLASLt reads at load time, read here instead: the
 * server's environment is not the program's. */
__attribute__((constructor)) static void logger_from_environment(void)
{
    const char *level = getenv("CUBLASLT_LOG_LEVEL");
    const char *mask = getenv("CUBLASLT_LOG_MASK");
    const char *path = getenv("CUBLASLT_LOG_FILE");

    rgpu_liblog_register(LIB, sink);
    if (path && *path) {
        FILE *f = rgpu_liblog_open(path);
        if (f)
            replace_file(f, f != stdout && f != stderr);
        else
            rgpu_warn("CUBLASLT_LOG_FILE=%s: cannot open it; logging to standard output", path);
    }
    if (mask && *mask)
        send_mask(atoi(mask));
    else if (level && *level && cublasLtLoggerSetLevel(atoi(level)) != CUBLAS_STATUS_SUCCESS)
        rgpu_warn("CUBLASLT_LOG_LEVEL=%s: not a level from 0 to %d", level, MAX_LEVEL);
}
