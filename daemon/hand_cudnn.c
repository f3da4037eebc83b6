/* Hand-written cuDNN procedures, server side (client side:
 * stubs/cudnn_hand.c; argument lists: common/rgpu_hand_procs.h). */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <cudnn_graph.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudnn", #name))

/* [max_size] -> [message]: cuDNN's last message is per thread, and this
 * runs on the thread that served the client thread's earlier calls. */
static int h_last_error_string(struct hand_call *c)
{
    uint64_t max;
    if (args_count(c, 1) || arg_u64(c, 0, &max))
        return -RGPU_EPROTO;
    if (!REAL(cudnnGetLastErrorString))
        return -RGPU_ENOSYM;
    if (max > 65536)
        max = 65536;        /* cuDNN's messages are short; a frame is not */
    char *buf = calloc(1, max ? max : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    if (max)
        REAL(cudnnGetLastErrorString)(buf, max);
    msgpack_pack_array(c->out, 1);
    msgpack_pack_str_with_body(c->out, buf, strnlen(buf, max));
    free(buf);
    return 0;
}

/* ---- rgpu.cudnn_execute: a variant pack made, run and destroyed ------------------ */

uint32_t rgpu_cudnn_type_size(int type);

struct pack_attr {
    int64_t name, type, count;
    const void *bytes;
};

int rgpu_cudnn_is_pack_attribute(int64_t name);

/* [name, type, count, bin] with the bin exactly count elements of type:
 * 0, or -1 when malformed. */
static int decode_pack_attr(const msgpack_object *o, struct pack_attr *a)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4)
        return -1;
    const msgpack_object *e = o->via.array.ptr;
    if (rgpu_obj_i64(&e[0], &a->name) < 0 || rgpu_obj_i64(&e[1], &a->type) < 0 ||
        rgpu_obj_i64(&e[2], &a->count) < 0 || e[3].type != MSGPACK_OBJECT_BIN)
        return -1;
    uint32_t size = a->type >= 0 && a->type < 64 ? rgpu_cudnn_type_size((int)a->type) : 0;
    if (!rgpu_cudnn_is_pack_attribute(a->name) || !size || a->count < 0 ||
        (uint64_t)a->count > (uint64_t)e[3].via.bin.size / size ||
        (uint64_t)a->count * size != e[3].via.bin.size)
        return -1;
    a->bytes = e[3].via.bin.ptr;
    return 0;
}

/* Device pointers of the pack (data, workspace, intermediates) must be the
 * session's own memory; NULL is cuDNN's business. */
static int pack_pointers_owned(const struct pack_attr *a)
{
    if (a->type != CUDNN_TYPE_VOID_PTR)
        return 1;
    for (int64_t i = 0; i < a->count; i++) {
        uint64_t p;
        memcpy(&p, (const char *)a->bytes + i * sizeof p, sizeof p);
        if (!owned_range(p, 0))
            return 0;
    }
    return 1;
}

static int run_pack(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                    const struct pack_attr *a, unsigned n)
{
    cudnnBackendDescriptor_t vp = NULL;
    int st = REAL(cudnnBackendCreateDescriptor)(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    for (unsigned i = 0; st == CUDNN_STATUS_SUCCESS && i < n; i++)
        st = REAL(cudnnBackendSetAttribute)(vp, (cudnnBackendAttributeName_t)a[i].name,
                                            (cudnnBackendAttributeType_t)a[i].type, a[i].count,
                                            a[i].bytes);
    if (st == CUDNN_STATUS_SUCCESS)
        st = REAL(cudnnBackendFinalize)(vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = REAL(cudnnBackendExecute)(handle, plan, vp);
    if (vp)
        REAL(cudnnBackendDestroyDescriptor)(vp);
    return st;
}

/* [handle, plan, [[name, type, count, bin]...]] -> [] */
static int h_cudnn_execute(struct hand_call *c)
{
    enum { MAX_ATTRS = 8 };
    struct pack_attr a[MAX_ATTRS];
    uint64_t handle, plan;
    const msgpack_object *list;

    if (args_count(c, 3) || arg_u64(c, 0, &handle) || arg_u64(c, 1, &plan))
        return -RGPU_EPROTO;
    list = &c->args->via.array.ptr[2];
    if (list->type != MSGPACK_OBJECT_ARRAY || list->via.array.size > MAX_ATTRS)
        return -RGPU_EPROTO;
    for (uint32_t i = 0; i < list->via.array.size; i++)
        if (decode_pack_attr(&list->via.array.ptr[i], &a[i]) < 0)
            return -RGPU_EPROTO;
    if (!REAL(cudnnBackendCreateDescriptor) || !REAL(cudnnBackendSetAttribute) ||
        !REAL(cudnnBackendFinalize) || !REAL(cudnnBackendExecute) ||
        !REAL(cudnnBackendDestroyDescriptor))
        return -RGPU_ENOSYM;
    msgpack_pack_array(c->out, 0);
    if (!handles_valid(H_CUDNN, handle) ||
        !handles_contains(rgpu_handle_class("cudnnBackendDescriptor_t"), plan))
        return CUDNN_STATUS_BAD_PARAM;
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        if (!pack_pointers_owned(&a[i])) {
            rgpu_warn("rgpu.cudnn_execute: refused a variant pack pointer outside the "
                      "session's memory");
            return CUDNN_STATUS_BAD_PARAM;
        }
    }
    return run_pack((cudnnHandle_t)handle, (cudnnBackendDescriptor_t)plan, a,
                    list->via.array.size);
}

const struct hand_proc hand_cudnn_procs[] = {
    { "cudnn", RGPU_H_CUDNN_LAST_ERROR, h_last_error_string },
    { "cudnn", RGPU_H_CUDNN_EXECUTE, h_cudnn_execute },
};
const int hand_cudnn_nprocs = sizeof hand_cudnn_procs / sizeof hand_cudnn_procs[0];
