/* cuDNN's logger on the client: the severity mask (cudnnSetCallback, or
 * CUDNN_LOGLEVEL_DBG and the older CUDNN_LOG{ERR,WARN,INFO}_DBG) goes to the
 * server's cuDNN; its messages come back (common/rgpu_liblog.h) to the
 * program's callback with a debug structure of this process, or, with no
 * callback, to CUDNN_LOGDEST_DBG (stdout, stderr or a file; nothing when
 * unset, as cuDNN does). */
#include "rgpu_client.h"
#include "rgpu_liblog.h"
#include "rgpu_log.h"
#include "cudnn_procs.h"

#include <cudnn_graph.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LIB (&rgpu_cudnn_lib)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned callback_mask;
static void *callback_data;
static cudnnCallback_t callback_fn;
static FILE *destination;       /* for messages without a callback */

/* details: what daemon/liblog.c sends, in its order. */
static void fill_debug(cudnnDebug_t *dbg, const struct rgpu_liblog_msg *m)
{
    int64_t d[7] = { 0 };
    memcpy(d, m->details, (m->ndetails < 7 ? m->ndetails : 7) * sizeof d[0]);
    memset(dbg, 0, sizeof *dbg);
    dbg->cudnn_version = (unsigned)d[0];
    dbg->cudnnStatus = (cudnnStatus_t)d[1];
    dbg->time_sec = (unsigned)d[2];
    dbg->time_usec = (unsigned)d[3];
    dbg->time_delta = (unsigned)d[4];
    dbg->handle = (cudnnHandle_t)(uintptr_t)d[5];
    dbg->stream = (cudaStream_t)(uintptr_t)d[6];
    dbg->pid = (unsigned long long)getpid();
    dbg->tid = (unsigned long long)syscall(SYS_gettid);
    int device = 0;
    dbg->cudaDeviceId = rgpu_thread_device(&device) ? device : 0;
}

static void sink(const struct rgpu_liblog_msg *m)
{
    static const char sev_letter[] = "FEWI";
    cudnnDebug_t dbg;
    fill_debug(&dbg, m);
    pthread_mutex_lock(&lock);
    cudnnCallback_t fn = callback_fn;
    void *data = callback_data;
    if (!fn && destination) {
        fprintf(destination, "%c! cuDNN (v%u) [pid %llu] %s\n",
                m->level >= 0 && m->level < 4 ? sev_letter[m->level] : '?',
                dbg.cudnn_version, dbg.pid, m->text);
        fflush(destination);
    }
    pthread_mutex_unlock(&lock);
    if (fn)
        fn((cudnnSeverity_t)m->level, data, &dbg, m->text);    /* unlocked */
}

static void send_mask(unsigned mask)
{
    rgpu_liblog_configure(LIB, RGPU_CUDNN_rgpu_cudnn_log_settings, (int)mask);
}

RGPU_EXPORT cudnnStatus_t cudnnSetCallback(unsigned mask, void *udata, cudnnCallback_t fptr)
{
    pthread_mutex_lock(&lock);
    callback_mask = mask;
    callback_data = udata;
    callback_fn = fptr;
    pthread_mutex_unlock(&lock);
    send_mask(mask);
    return CUDNN_STATUS_SUCCESS;
}

RGPU_EXPORT cudnnStatus_t cudnnGetCallback(unsigned *mask, void **udata, cudnnCallback_t *fptr)
{
    pthread_mutex_lock(&lock);
    if (mask)
        *mask = callback_mask;
    if (udata)
        *udata = callback_data;
    if (fptr)
        *fptr = callback_fn;
    pthread_mutex_unlock(&lock);
    return CUDNN_STATUS_SUCCESS;
}

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

/* CUDNN_LOGLEVEL_DBG: 0 off, 1 errors, 2 and warnings, 3 and information. */
static unsigned mask_from_environment(void)
{
    const char *level = getenv("CUDNN_LOGLEVEL_DBG");
    unsigned mask = 0;
    if (level && *level) {
        int n = atoi(level);
        if (n >= 1)
            mask |= CUDNN_SEV_ERROR_EN;
        if (n >= 2)
            mask |= CUDNN_SEV_WARNING_EN;
        if (n >= 3)
            mask |= CUDNN_SEV_INFO_EN;
        return mask;
    }
    if (env_on("CUDNN_LOGERR_DBG"))
        mask |= CUDNN_SEV_ERROR_EN;
    if (env_on("CUDNN_LOGWARN_DBG"))
        mask |= CUDNN_SEV_WARNING_EN;
    if (env_on("CUDNN_LOGINFO_DBG"))
        mask |= CUDNN_SEV_INFO_EN;
    return mask;
}

/* The environment cuDNN reads at load time, read here instead: the
 * server's environment is not the program's. */
__attribute__((constructor)) static void logger_from_environment(void)
{
    const char *dest = getenv("CUDNN_LOGDEST_DBG");

    rgpu_liblog_register(LIB, sink);
    if (dest && *dest) {
        destination = rgpu_liblog_open(dest);
        if (!destination)
            rgpu_warn("CUDNN_LOGDEST_DBG=%s: cannot open it; cuDNN logs are dropped", dest);
    }
    callback_mask = mask_from_environment();
    if (callback_mask)
        send_mask(callback_mask);
}
