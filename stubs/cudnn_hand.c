/* Hand-written parts of libcudnn: versions and error texts from the
 * server's cuDNN, and the callbacks, which run here.  Everything else is
 * generated from codegen/cudnn.ann. */
#include "rgpu_client.h"
#include "cudnn_procs.h"

#include <cudnn.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)

/* size_t-returning queries are answered by the server's cuDNN, once: a
 * program compares the runtime version with the one it was built for,
 * and must see the library that actually runs its work. */
static size_t server_size(const char *fn, size_t fallback)
{
    size_t v = rgpu_server_size_query(LIB, fn);
    return v ? v : fallback;
}

RGPU_EXPORT size_t cudnnGetVersion(void)
{
    static size_t v;
    if (!v)
        v = server_size("cudnnGetVersion", CUDNN_VERSION);
    return v;
}

RGPU_EXPORT size_t cudnnGetMaxDeviceVersion(void)
{
    static size_t v;
    if (!v)
        v = server_size("cudnnGetMaxDeviceVersion", 0);
    return v;
}

RGPU_EXPORT size_t cudnnGetCudartVersion(void)
{
    return CUDART_VERSION;
}

RGPU_EXPORT const char *cudnnGetErrorString(cudnnStatus_t status)
{
    const char *s = rgpu_server_error_string(LIB, status);
    if (!s)
        s = rgpu_cudnn_error_name(status);
    return s ? s : "CUDNN_STATUS_UNKNOWN";
}

/* cuDNN keeps its last message in the server process, per thread; it does
 * not travel, so the message is empty. */
RGPU_EXPORT void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (message && max_size)
        message[0] = '\0';
}

/* Callbacks run here and would receive the server's messages; those stay
 * on the server, so a callback is stored and handed back, never called. */
static unsigned callback_mask;
static void *callback_data;
static cudnnCallback_t callback_fn;

RGPU_EXPORT cudnnStatus_t cudnnSetCallback(unsigned mask, void *udata, cudnnCallback_t fptr)
{
    callback_mask = mask;
    callback_data = udata;
    callback_fn = fptr;
    return CUDNN_STATUS_SUCCESS;
}

RGPU_EXPORT cudnnStatus_t cudnnGetCallback(unsigned *mask, void **udata, cudnnCallback_t *fptr)
{
    if (mask)
        *mask = callback_mask;
    if (udata)
        *udata = callback_data;
    if (fptr)
        *fptr = callback_fn;
    return CUDNN_STATUS_SUCCESS;
}
