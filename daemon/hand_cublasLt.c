/* Hand-written cuBLASLt procedure, server side: making the descriptors the
 * client keeps by content (client side: stubs/cublasLt_desc.c; arguments:
 * common/rgpu_hand_procs.h).  Every other cuBLASLt call is generated. */
#include "rgpud.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdlib.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cublasLt", #name))
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

#define MAX_PARAMS 4

/* ---- descriptors this procedure made: the only ones it destroys ------------ */

struct made_desc {
    uint64_t handle, kind;
};
static pthread_mutex_t made_lock = PTHREAD_MUTEX_INITIALIZER;
static struct made_desc *made;
static size_t nmade, made_cap;

/* The handle class of a kind: generated calls (cublasLtMatmul) check the
 * descriptors they are given against what this procedure made. */
static uint32_t class_of(uint64_t kind)
{
    return kind == RGPU_LT_MATMUL_DESC ? H_CUBLASLT_MATMUL_DESC
           : kind == RGPU_LT_LAYOUT    ? H_CUBLASLT_MATRIX_LAYOUT
                                       : H_CUBLASLT_PREFERENCE;
}

static void remember_made(uint64_t h, uint64_t kind)
{
    handles_add(class_of(kind), h);
    pthread_mutex_lock(&made_lock);
    if (nmade == made_cap) {
        size_t cap = made_cap ? 2 * made_cap : 64;
        struct made_desc *n = realloc(made, cap * sizeof *n);
        if (n) {
            made = n;
            made_cap = cap;
        }
    }
    if (nmade < made_cap)
        made[nmade++] = (struct made_desc){ h, kind };
    pthread_mutex_unlock(&made_lock);
}

/* Forget h; 1 with its kind when it was one of ours. */
static int forget_made(uint64_t h, uint64_t *kind)
{
    int found = 0;
    pthread_mutex_lock(&made_lock);
    for (size_t i = 0; i < nmade && !found; i++) {
        if (made[i].handle == h) {
            *kind = made[i].kind;
            handles_remove(class_of(*kind), h);
            made[i] = made[--nmade];
            found = 1;
        }
    }
    pthread_mutex_unlock(&made_lock);
    return found;
}

/* ---- the three kinds, through the real library ------------------------------ */

/* How many create parameters a kind takes. */
static unsigned params_of(uint64_t kind)
{
    return kind == RGPU_LT_MATMUL_DESC ? 2 : kind == RGPU_LT_LAYOUT ? 4 : 0;
}

static int lt_create(uint64_t kind, const int64_t *p, unsigned np, void **out)
{
    switch (kind) {
    case RGPU_LT_MATMUL_DESC:
        if (np != 2)
            return -RGPU_EPROTO;
        if (!REAL(cublasLtMatmulDescCreate))
            return -RGPU_ENOSYM;
        return REAL(cublasLtMatmulDescCreate)((cublasLtMatmulDesc_t *)out,
                                              (cublasComputeType_t)p[0], (cudaDataType_t)p[1]);
    case RGPU_LT_LAYOUT:
        if (np != 4)
            return -RGPU_EPROTO;
        if (!REAL(cublasLtMatrixLayoutCreate))
            return -RGPU_ENOSYM;
        return REAL(cublasLtMatrixLayoutCreate)((cublasLtMatrixLayout_t *)out,
                                                (cudaDataType)p[0], (uint64_t)p[1],
                                                (uint64_t)p[2], p[3]);
    case RGPU_LT_PREFERENCE:
        if (np != 0)
            return -RGPU_EPROTO;
        if (!REAL(cublasLtMatmulPreferenceCreate))
            return -RGPU_ENOSYM;
        return REAL(cublasLtMatmulPreferenceCreate)((cublasLtMatmulPreference_t *)out);
    default:
        return -RGPU_EPROTO;
    }
}

static int lt_set(uint64_t kind, void *d, uint32_t attr, const void *buf, size_t n)
{
    switch (kind) {
    case RGPU_LT_MATMUL_DESC:
        return REAL(cublasLtMatmulDescSetAttribute)(d, (cublasLtMatmulDescAttributes_t)attr,
                                                    buf, n);
    case RGPU_LT_LAYOUT:
        return REAL(cublasLtMatrixLayoutSetAttribute)(d, (cublasLtMatrixLayoutAttribute_t)attr,
                                                      buf, n);
    default:
        return REAL(cublasLtMatmulPreferenceSetAttribute)(
            d, (cublasLtMatmulPreferenceAttributes_t)attr, buf, n);
    }
}

static int lt_destroy(uint64_t kind, void *d)
{
    switch (kind) {
    case RGPU_LT_MATMUL_DESC: return REAL(cublasLtMatmulDescDestroy)(d);
    case RGPU_LT_LAYOUT: return REAL(cublasLtMatrixLayoutDestroy)(d);
    default: return REAL(cublasLtMatmulPreferenceDestroy)(d);
    }
}

static int have_kind_functions(void)
{
    return REAL(cublasLtMatmulDescSetAttribute) && REAL(cublasLtMatrixLayoutSetAttribute) &&
           REAL(cublasLtMatmulPreferenceSetAttribute) && REAL(cublasLtMatmulDescDestroy) &&
           REAL(cublasLtMatrixLayoutDestroy) && REAL(cublasLtMatmulPreferenceDestroy);
}

/* ---- the request ----------------------------------------------------------- */

static const msgpack_object_array *as_array(const msgpack_object *o, uint32_t n)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || (n && o->via.array.size != n))
        return NULL;
    return &o->via.array;
}

static int is_kind(const msgpack_object *o)
{
    uint64_t k;
    return rgpu_obj_u64(o, &k) == 0 && k <= RGPU_LT_PREFERENCE;
}

/* [kind, handle] */
static int destroy_well_formed(const msgpack_object *o)
{
    const msgpack_object_array *a = as_array(o, 2);
    uint64_t h;
    return a && is_kind(&a->ptr[0]) && rgpu_obj_u64(&a->ptr[1], &h) == 0;
}

/* [kind, [param...], [[attr, bin]...], keep] */
static int create_well_formed(const msgpack_object *o)
{
    const msgpack_object_array *a = as_array(o, 4), *params, *attrs;
    uint64_t keep;
    int64_t v;
    if (!a || !is_kind(&a->ptr[0]) || !(params = as_array(&a->ptr[1], 0)) ||
        params->size != params_of(a->ptr[0].via.u64) || !(attrs = as_array(&a->ptr[2], 0)) ||
        rgpu_obj_u64(&a->ptr[3], &keep) < 0)
        return 0;
    for (uint32_t i = 0; i < params->size; i++)
        if (rgpu_obj_i64(&params->ptr[i], &v) < 0)
            return 0;
    for (uint32_t i = 0; i < attrs->size; i++) {
        const msgpack_object_array *kv = as_array(&attrs->ptr[i], 2);
        uint64_t id;
        if (!kv || rgpu_obj_u64(&kv->ptr[0], &id) < 0 || id > UINT32_MAX ||
            kv->ptr[1].type != MSGPACK_OBJECT_BIN)
            return 0;
    }
    return 1;
}

static void destroy_one(const msgpack_object *o)
{
    const msgpack_object_array *a = &o->via.array;
    uint64_t kind, h;
    rgpu_obj_u64(&a->ptr[1], &h);
    /* A handle we did not make could be anything: leave it alone.  The
     * kind is the one it was made as, whatever the request says. */
    if (forget_made(h, &kind))
        (void)lt_destroy(kind, (void *)(uintptr_t)h);
}

/* Create one descriptor and set its attributes in order.  Returns the
 * library's status (*handle set when kept), or -RGPU_E*. */
static int create_one(const msgpack_object *o, uint64_t *handle)
{
    const msgpack_object_array *a = &o->via.array;
    const msgpack_object_array *params = &a->ptr[1].via.array, *attrs = &a->ptr[2].via.array;
    int64_t p[MAX_PARAMS];
    uint64_t kind, keep;
    void *d = NULL;

    rgpu_obj_u64(&a->ptr[0], &kind);
    rgpu_obj_u64(&a->ptr[3], &keep);
    for (uint32_t i = 0; i < params->size; i++)
        rgpu_obj_i64(&params->ptr[i], &p[i]);
    *handle = 0;
    int rc = lt_create(kind, p, params->size, &d);
    for (uint32_t i = 0; i < attrs->size && rc == 0; i++) {
        const msgpack_object *kv = attrs->ptr[i].via.array.ptr;
        rc = lt_set(kind, d, (uint32_t)kv[0].via.u64, kv[1].via.bin.ptr, kv[1].via.bin.size);
    }
    if (rc == 0 && keep) {
        *handle = (uint64_t)(uintptr_t)d;
        remember_made(*handle, kind);
    } else if (d) {
        (void)lt_destroy(kind, d);
    }
    return rc;
}

/* Everything is checked before anything is done: a malformed request must
 * leave no trace (and packs nothing). */
static int h_lt_materialize(struct hand_call *c)
{
    const msgpack_object_array *destroys, *creates;
    PROTO_IF(args_count(c, 2) || !(destroys = as_array(&c->args->via.array.ptr[0], 0)) ||
             !(creates = as_array(&c->args->via.array.ptr[1], 0)));
    for (uint32_t i = 0; i < destroys->size; i++)
        PROTO_IF(!destroy_well_formed(&destroys->ptr[i]));
    for (uint32_t i = 0; i < creates->size; i++)
        PROTO_IF(!create_well_formed(&creates->ptr[i]));
    if (!have_kind_functions())
        return -RGPU_ENOSYM;

    int *status = calloc(creates->size + 1, sizeof *status);
    uint64_t *handle = calloc(creates->size + 1, sizeof *handle);
    if (!status || !handle) {
        free(status);
        free(handle);
        return -RGPU_ENOMEM;
    }
    for (uint32_t i = 0; i < destroys->size; i++)
        destroy_one(&destroys->ptr[i]);
    int first_failure = 0, transport = 0;
    for (uint32_t i = 0; i < creates->size; i++) {
        status[i] = create_one(&creates->ptr[i], &handle[i]);
        if (status[i] < 0 && !transport)
            transport = status[i];
        else if (status[i] > 0 && !first_failure)
            first_failure = status[i];
    }
    if (!transport) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_array(c->out, creates->size);
        for (uint32_t i = 0; i < creates->size; i++) {
            msgpack_pack_array(c->out, 2);
            msgpack_pack_int(c->out, status[i]);
            msgpack_pack_uint64(c->out, handle[i]);
        }
    } else {
        /* A missing function: undo what was made. */
        uint64_t kind;
        for (uint32_t i = 0; i < creates->size; i++)
            if (handle[i] && forget_made(handle[i], &kind))
                (void)lt_destroy(kind, (void *)(uintptr_t)handle[i]);
    }
    free(status);
    free(handle);
    return transport ? transport : first_failure;
}

const struct hand_proc hand_cublasLt_procs[] = {
    { "cublasLt", RGPU_H_LT_MATERIALIZE, h_lt_materialize },
};
const int hand_cublasLt_nprocs = sizeof hand_cublasLt_procs / sizeof hand_cublasLt_procs[0];
