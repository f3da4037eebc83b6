/* rgpu's own procedures of cuDNN, server side (codegen/cudnn_own.h; client
 * side stubs/cudnn_hand.c): versions and error texts.  The backend API's are
 * in cudnn_backend.c. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "cudnn_serve.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <cudnn_graph.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudnn", #name))

cudnnStatus_t serve_rgpu_cudnn_versions(size_t *version, size_t *max_device_version)
{
    if (!REAL(cudnnGetVersion))
        return serve_transport(RGPU_ENOSYM);
    if (!version || !max_device_version)        /* a client that asked for no output */
        return CUDNN_STATUS_BAD_PARAM;
    *version = REAL(cudnnGetVersion)();
    *max_device_version = REAL(cudnnGetMaxDeviceVersion) ? REAL(cudnnGetMaxDeviceVersion)() : 0;
    return CUDNN_STATUS_SUCCESS;
}

/* cuDNN's last message is per thread, and this runs on the thread that
 * served the client thread's earlier calls. */
cudnnStatus_t serve_rgpu_cudnn_last_error(char *message, size_t max_size)
{
    if (!REAL(cudnnGetLastErrorString))
        return serve_transport(RGPU_ENOSYM);
    if (message && max_size)
        REAL(cudnnGetLastErrorString)(message, max_size);
    return CUDNN_STATUS_SUCCESS;
}
