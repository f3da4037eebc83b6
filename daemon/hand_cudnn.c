/* rgpu's own procedures of cuDNN, server side (codegen/cudnn_own.h; client
 * side stubs/cudnn_hand.c and stubs/cudnn_variant_pack.c). */
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

/* ---- a variant pack made, run and destroyed ------------------------------------- */

uint32_t rgpu_cudnn_type_size(int type);
int rgpu_cudnn_is_pack_attribute(int64_t name);

/* An attribute of a variant pack: a name of a pack's, a type of known
 * size, and count elements lying within the request's nbytes. */
static int attr_ok(const struct rgpu_cudnn_pack_attr *a, size_t nbytes)
{
    uint32_t size = a->type >= 0 && a->type < 64 ? rgpu_cudnn_type_size((int)a->type) : 0;
    return rgpu_cudnn_is_pack_attribute(a->name) && size && a->count >= 0 &&
           a->offset <= nbytes && (uint64_t)a->count <= (nbytes - a->offset) / size;
}

/* Device pointers of the pack (data, workspace, intermediates) must be the
 * session's own memory; NULL is cuDNN's business. */
static int pack_pointers_owned(const struct rgpu_cudnn_pack_attr *a, const char *bytes)
{
    if (a->type != CUDNN_TYPE_VOID_PTR)
        return 1;
    for (int64_t i = 0; i < a->count; i++) {
        uint64_t p;
        memcpy(&p, bytes + a->offset + (uint64_t)i * sizeof p, sizeof p);
        if (!owned_range(p, 0))
            return 0;
    }
    return 1;
}

static int run_pack(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                    const struct rgpu_cudnn_pack_attr *a, size_t n, const char *bytes)
{
    cudnnBackendDescriptor_t vp = NULL;
    int st = REAL(cudnnBackendCreateDescriptor)(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    for (size_t i = 0; st == CUDNN_STATUS_SUCCESS && i < n; i++)
        st = REAL(cudnnBackendSetAttribute)(vp, (cudnnBackendAttributeName_t)a[i].name,
                                            (cudnnBackendAttributeType_t)a[i].type, a[i].count,
                                            bytes + a[i].offset);
    if (st == CUDNN_STATUS_SUCCESS)
        st = REAL(cudnnBackendFinalize)(vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = REAL(cudnnBackendExecute)(handle, plan, vp);
    if (vp)
        REAL(cudnnBackendDestroyDescriptor)(vp);
    return st;
}

/* The handle and the plan are the session's (the codec checked them by
 * their types); every attribute and pointer is checked here. */
cudnnStatus_t serve_rgpu_cudnn_execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                       const struct rgpu_cudnn_pack_attr *attrs, size_t nattrs,
                                       const void *bytes, size_t nbytes)
{
    enum { MAX_ATTRS = 8 };
    if (nattrs > MAX_ATTRS || (nattrs && !attrs))
        return serve_transport(RGPU_EPROTO);
    for (size_t i = 0; i < nattrs; i++)
        if (!attr_ok(&attrs[i], nbytes))
            return serve_transport(RGPU_EPROTO);
    if (!REAL(cudnnBackendCreateDescriptor) || !REAL(cudnnBackendSetAttribute) ||
        !REAL(cudnnBackendFinalize) || !REAL(cudnnBackendExecute) ||
        !REAL(cudnnBackendDestroyDescriptor))
        return serve_transport(RGPU_ENOSYM);
    if (!plan)
        return CUDNN_STATUS_BAD_PARAM;
    for (size_t i = 0; i < nattrs; i++) {
        if (!pack_pointers_owned(&attrs[i], bytes)) {
            rgpu_warn("rgpu_cudnn_execute: refused a variant pack pointer outside the "
                      "session's memory");
            return CUDNN_STATUS_BAD_PARAM;
        }
    }
    return run_pack(handle, plan, attrs, nattrs, bytes);
}
