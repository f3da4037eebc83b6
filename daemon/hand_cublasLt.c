/* Hand-written cuBLASLt procedures, server side: making the descriptors
 * the client keeps by content, and the calls that take a matmul descriptor
 * with its pointer attributes sent along (client side:
 * stubs/cublasLt_desc.c and stubs/cublasLt_hand.c; arguments:
 * common/rgpu_hand_procs.h).  Every other cuBLASLt call is generated. */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cublasLt", #name))
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

#define MAX_PARAMS 4
/* No cuBLASLt attribute is larger (cublasLt_desc.c refuses more). */
#define ATTR_MAX 256

/* The pointer attributes the client keeps out of a descriptor's content. */
_Static_assert(CUBLASLT_MATMUL_DESC_BIAS_POINTER == 8 &&
                   CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER == 11 &&
                   CUBLASLT_MATMUL_DESC_A_SCALE_POINTER == 17 &&
                   CUBLASLT_MATMUL_DESC_B_SCALE_POINTER == 18 &&
                   CUBLASLT_MATMUL_DESC_C_SCALE_POINTER == 19 &&
                   CUBLASLT_MATMUL_DESC_D_SCALE_POINTER == 20 &&
                   CUBLASLT_MATMUL_DESC_AMAX_D_POINTER == 21 &&
                   CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER == 23 &&
                   CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER == 24 &&
                   CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER == 36,
               "rgpu_lt_pointer_slot's attribute numbers are cublasLt.h's");

/* ---- one call at a time per matmul descriptor ------------------------------- */

/* A server descriptor stands for every client descriptor of its content, so
 * client threads share it, and a call's pointer attributes are set on it
 * for that call alone.  A lock (one of a fixed set, by the descriptor's
 * address, so that none has to live and die with a descriptor) is held
 * from setting them until they are NULL again, by every call that takes
 * the descriptor, and by its destroy. */
#define DESC_LOCKS 64
static pthread_mutex_t desc_locks[DESC_LOCKS];

__attribute__((constructor)) static void desc_locks_init(void)
{
    for (int i = 0; i < DESC_LOCKS; i++)
        pthread_mutex_init(&desc_locks[i], NULL);
}

static pthread_mutex_t *desc_lock(uint64_t desc)
{
    return &desc_locks[(desc >> 4 ^ desc >> 12) % DESC_LOCKS];
}

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
    static const unsigned char nulls[ATTR_MAX];
    switch (kind) {
    case RGPU_LT_MATMUL_DESC:
        /* A pointer attribute is NULL on the descriptor at rest: calls set
         * it, checked, for themselves.  (Its bytes here are the client's
         * alignment class; a size cuBLASLt refuses is still refused.) */
        if (rgpu_lt_pointer_slot(attr) >= 0) {
            if (n > ATTR_MAX)
                return CUBLAS_STATUS_INVALID_VALUE;
            buf = nulls;
        }
        /* A descriptor inside a descriptor: only one the session holds. */
        if (attr == CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR && n == sizeof(uint64_t)) {
            uint64_t h;
            memcpy(&h, buf, sizeof h);
            if (!handles_valid(rgpu_handle_class("cublasLtEmulationDescOpaque_t"), h)) {
                rgpu_warn("cublasLt: refused an emulation descriptor the session never "
                          "handed out");
                return CUBLAS_STATUS_INVALID_VALUE;
            }
        }
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
     * kind is the one it was made as, whatever the request says.  Not
     * while another thread's call uses it. */
    pthread_mutex_t *lock = desc_lock(h);
    pthread_mutex_lock(lock);
    if (forget_made(h, &kind))
        (void)lt_destroy(kind, (void *)(uintptr_t)h);
    pthread_mutex_unlock(lock);
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

/* ---- calls with the pointer attributes sent along ------------------------------ */

/* What the guard of the running call does, per serving thread: the
 * pointers the request carried (set by the procedure around the generated
 * call), the descriptor it locked, the attributes it set. */
struct lt_pointers {
    unsigned n;
    uint32_t attr[RGPU_LT_NPOINTERS];
    uint64_t ptr[RGPU_LT_NPOINTERS];
};
static __thread const struct lt_pointers *call_pointers;
static __thread pthread_mutex_t *call_lock;
static __thread uint64_t call_desc;
static __thread struct lt_pointers call_applied;

/* Looked up once: it runs twice per pointer per call. */
static int set_pointer(uint64_t desc, uint32_t attr, uint64_t ptr)
{
    static __typeof__(&cublasLtMatmulDescSetAttribute) set;
    __typeof__(&cublasLtMatmulDescSetAttribute) fn = __atomic_load_n(&set, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = REAL(cublasLtMatmulDescSetAttribute);
        if (!fn)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        __atomic_store_n(&set, fn, __ATOMIC_RELEASE);
    }
    return fn((cublasLtMatmulDesc_t)(uintptr_t)desc, (cublasLtMatmulDescAttributes_t)attr, &ptr,
              sizeof ptr);
}

/* Before cublasLtMatmul, ...AlgoGetHeuristic, ...AlgoCheck (argument 1:
 * the matmul descriptor, already checked as the session's): take the
 * descriptor's lock, and set the request's pointers, each NULL or device
 * memory the session owns, as the pointers of any other argument. */
static int pre_matmul_desc(void **argv)
{
    uint64_t desc = *(uint64_t *)argv[1];
    const struct lt_pointers *p = call_pointers;
    call_applied.n = 0;
    call_lock = NULL;
    if (!desc)
        return p && p->n ? CUBLAS_STATUS_INVALID_VALUE : 0;
    call_lock = desc_lock(desc);
    pthread_mutex_lock(call_lock);
    call_desc = desc;
    /* Destroyed by another thread since the handle check? */
    if (!handles_contains(H_CUBLASLT_MATMUL_DESC, desc))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (unsigned i = 0; p && i < p->n; i++) {
        if (!owned_range(p->ptr[i], 0)) {
            rgpu_warn("cublasLt: refused a pointer attribute (%u) that is no device memory of "
                      "the session", p->attr[i]);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        int rc = set_pointer(desc, p->attr[i], p->ptr[i]);
        if (rc != CUBLAS_STATUS_SUCCESS)
            return rc;
        call_applied.attr[call_applied.n++] = p->attr[i];
    }
    return 0;
}

/* After it: the pointers back to NULL, the lock released. */
static void post_matmul_desc(void **argv, int status)
{
    (void)argv;
    (void)status;
    for (unsigned i = 0; i < call_applied.n; i++)
        (void)set_pointer(call_desc, call_applied.attr[i], 0);
    call_applied.n = 0;
    if (call_lock)
        pthread_mutex_unlock(call_lock);
    call_lock = NULL;
}

static const struct guard lt_guards[] = {
    { "cublasLt", "cublasLtMatmul", pre_matmul_desc, post_matmul_desc },
    { "cublasLt", "cublasLtMatmulAlgoGetHeuristic", pre_matmul_desc, post_matmul_desc },
    { "cublasLt", "cublasLtMatmulAlgoCheck", pre_matmul_desc, post_matmul_desc },
};

const struct guard *lt_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(lt_guards, lib, name);
}

/* [[[attr, ptr]...], [the generated procedure's arguments]]: each attr a
 * pointer attribute, once. */
static int with_pointers(struct hand_call *c, const char *generated)
{
    const msgpack_object_array *list;
    struct lt_pointers p = { 0 };
    PROTO_IF(args_count(c, 2) || !(list = as_array(&c->args->via.array.ptr[0], 0)) ||
             list->size > RGPU_LT_NPOINTERS);
    for (uint32_t i = 0; i < list->size; i++) {
        const msgpack_object_array *kv = as_array(&list->ptr[i], 2);
        uint64_t attr, ptr;
        PROTO_IF(!kv || rgpu_obj_u64(&kv->ptr[0], &attr) < 0 || attr > UINT32_MAX ||
                 rgpu_lt_pointer_slot((uint32_t)attr) < 0 ||
                 rgpu_obj_u64(&kv->ptr[1], &ptr) < 0);
        for (unsigned k = 0; k < p.n; k++)
            PROTO_IF(p.attr[k] == attr);
        p.attr[p.n] = (uint32_t)attr;
        p.ptr[p.n++] = ptr;
    }
    call_pointers = &p;
    int rc = session_run_generated("cublasLt", generated, &c->args->via.array.ptr[1], c->out);
    call_pointers = NULL;
    return rc;
}

static int h_lt_matmul(struct hand_call *c)
{
    return with_pointers(c, "cublasLtMatmul");
}

static int h_lt_heuristic(struct hand_call *c)
{
    return with_pointers(c, "cublasLtMatmulAlgoGetHeuristic");
}

static int h_lt_algo_check(struct hand_call *c)
{
    return with_pointers(c, "cublasLtMatmulAlgoCheck");
}

const struct hand_proc hand_cublasLt_procs[] = {
    { "cublasLt", RGPU_H_LT_MATERIALIZE, h_lt_materialize },
    { "cublasLt", RGPU_H_LT_MATMUL, h_lt_matmul },
    { "cublasLt", RGPU_H_LT_HEURISTIC, h_lt_heuristic },
    { "cublasLt", RGPU_H_LT_ALGO_CHECK, h_lt_algo_check },
};
const int hand_cublasLt_nprocs = sizeof hand_cublasLt_procs / sizeof hand_cublasLt_procs[0];
