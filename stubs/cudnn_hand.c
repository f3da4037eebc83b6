/* Hand-written parts of libcudnn: versions and error texts from the
 * server's cuDNN and the alpha/beta sizes; the callbacks are in
 * cudnn_logger.c.  Everything else is generated from codegen/cudnn.ann. */
#include "rgpu_client.h"
#include "cudnn_own.h"
#include "cudnn_procs.h"

#include <cudnn.h>
#include <pthread.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)

/* The server's cuDNN's versions, asked once (codegen/cudnn_own.h).  Where
 * they cannot be asked, the headers' version and 0: the size_t queries
 * have no error to return. */
static struct {
    pthread_once_t once;
    size_t version, max_device_version;
} versions = { PTHREAD_ONCE_INIT, 0, 0 };

static void ask_versions(void)
{
    size_t v = 0, max = 0;
    if (rgpu_cudnn_versions(&v, &max) != CUDNN_STATUS_SUCCESS || !v)
        v = CUDNN_VERSION, max = 0;
    versions.version = v;
    versions.max_device_version = max;
}

RGPU_EXPORT size_t cudnnGetVersion(void)
{
    pthread_once(&versions.once, ask_versions);
    return versions.version;
}

RGPU_EXPORT size_t cudnnGetMaxDeviceVersion(void)
{
    pthread_once(&versions.once, ask_versions);
    return versions.max_device_version;
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

/* cuDNN keeps its last message per thread, in rgpud: asked of the server
 * thread that serves this one.  Empty when it cannot be asked. */
RGPU_EXPORT void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (!message || !max_size)
        return;
    if (rgpu_cudnn_last_error(message, max_size) != CUDNN_STATUS_SUCCESS)
        message[0] = '\0';
    message[max_size - 1] = '\0';
}

/* ---- alpha and beta: float unless the data is double ------------------------------ */

/* cuDNN reads alpha and beta as double for double data and as float
 * otherwise.  The annotations allow eight bytes; the data type of the
 * call's first tensor descriptor (the server's, which the call's argv
 * holds by the time this runs: stubs/cudnn_tensor.c) narrows that to
 * four, so that a float alpha is never read past its end. */
static struct rgpu_keyed tensor_types = RGPU_KEYED_INIT;    /* descriptor -> cudnnDataType_t */

static uint32_t refine_scalar(const struct rgpu_proc *proc, unsigned param,
                              const void *const *argv, uint32_t bound)
{
    (void)param;
    for (unsigned i = 0; i < proc->nparams; i++) {
        size_t len = strlen(proc->params[i].name);
        int64_t t;
        if (len < 4 || strcmp(proc->params[i].name + len - 4, "Desc") != 0)
            continue;
        if (rgpu_keyed_get(&tensor_types, *(const void *const *)argv[i], &t))
            return t == CUDNN_DATA_DOUBLE ? 8 : 4;
    }
    return bound;       /* no known tensor: eight bytes, as annotated */
}

static const struct rgpu_scalar_policy cudnn_scalars = { NULL, NULL, refine_scalar };

__attribute__((constructor)) static void register_policy(void)
{
    rgpu_register_scalar_policy(LIB, &cudnn_scalars);
}

/* The data types of server descriptors, kept by stubs/cudnn_tensor.c as it
 * makes and destroys them. */
void cudnn_note_tensor_type(uint64_t server, int dtype);
void cudnn_forget_tensor_type(uint64_t server);

void cudnn_note_tensor_type(uint64_t server, int dtype)
{
    rgpu_keyed_set(&tensor_types, (const void *)(uintptr_t)server, dtype);
}

void cudnn_forget_tensor_type(uint64_t server)
{
    rgpu_keyed_remove(&tensor_types, (const void *)(uintptr_t)server);
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cudnn_lib);
}

/* ---- each handle's stream -------------------------------------------------------- */

/* PyTorch asks a handle's stream before every cuDNN call (twelve times a
 * step of a GPT whose attention runs in cuDNN): each question would cost
 * a round trip.  The client sees every stream a handle is given, so it
 * answers from that once known; a handle it never saw set is asked once.
 * Destroying the handle forgets its stream: cuDNN hands the value out
 * again. */
static struct rgpu_keyed handle_streams = RGPU_KEYED_INIT;

#undef cudnnSetStream
RGPU_EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    const void *argv[] = { &handle, &streamId };
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnSetStream, argv);
    if (rc == CUDNN_STATUS_SUCCESS)
        rgpu_keyed_set(&handle_streams, handle, (int64_t)(uintptr_t)streamId);
    return rc;
}

#undef cudnnGetStream
RGPU_EXPORT cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId)
{
    const void *argv[] = { &handle, &streamId };
    int64_t known;
    if (streamId && handle && rgpu_keyed_get(&handle_streams, handle, &known)) {
        *streamId = (cudaStream_t)(uintptr_t)known;
        return CUDNN_STATUS_SUCCESS;
    }
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnGetStream, argv);
    if (rc == CUDNN_STATUS_SUCCESS && streamId && handle)
        rgpu_keyed_set(&handle_streams, handle, (int64_t)(uintptr_t)*streamId);
    return rc;
}

#undef cudnnDestroy
RGPU_EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    const void *argv[] = { &handle };
    rgpu_keyed_remove(&handle_streams, handle);
    return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnDestroy, argv);
}
