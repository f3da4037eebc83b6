/* cuBLASLt's own procedures, server side (codegen/cublasLt_own.h): making
 * the descriptors the client keeps by content, and the calls that take a
 * matmul descriptor with its pointer attributes sent along (client side:
 * stubs/cublasLt_desc.c and stubs/cublasLt_hand.c).  Every other cuBLASLt
 * call is generated. */
#include "rgpud.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_lt_pointers.h"
#include "rgpu_proto.h"
#include "cublasLt_serve.h"

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

/* ---- the request: contents parsed and checked whole first ------------------- */

/* One content (codegen/cublasLt_own.h): its kind, create parameters and
 * the offset of its first attribute record. */
struct content {
    const unsigned char *bytes;
    size_t len, records;
    uint64_t kind;
    int64_t params[MAX_PARAMS];
    unsigned nparams;
};

struct record {
    uint32_t id, size;
};

/* Whether bytes[0..len) is a well-formed content: a known kind with its
 * number of create parameters, then records that end exactly at len. */
static int parse_content(const unsigned char *bytes, size_t len, struct content *c)
{
    struct record r;
    if (len < 2 || bytes[0] > RGPU_LT_PREFERENCE || bytes[1] != params_of(bytes[0]) ||
        len < 2 + 8 * (size_t)bytes[1])
        return -1;
    *c = (struct content){ bytes, len, 2 + 8 * (size_t)bytes[1], bytes[0], { 0 }, bytes[1] };
    memcpy(c->params, bytes + 2, 8 * (size_t)c->nparams);
    for (size_t off = c->records; off < len; off += sizeof r + r.size) {
        if (len - off < sizeof r)
            return -1;
        memcpy(&r, bytes + off, sizeof r);
        if (r.size > len - off - sizeof r)
            return -1;
    }
    return 0;
}

/* Create one descriptor and set its attributes in order.  Returns the
 * library's status (*handle set when kept), or -RGPU_E*. */
static int create_one(const struct content *c, int keep, uint64_t *handle)
{
    struct record r;
    void *d = NULL;
    *handle = 0;
    int rc = lt_create(c->kind, c->params, c->nparams, &d);
    for (size_t off = c->records; off < c->len && rc == 0; off += sizeof r + r.size) {
        memcpy(&r, c->bytes + off, sizeof r);
        rc = lt_set(c->kind, d, r.id, c->bytes + off + sizeof r, r.size);
    }
    if (rc == 0 && keep) {
        *handle = (uint64_t)(uintptr_t)d;
        remember_made(*handle, c->kind);
    } else if (d) {
        (void)lt_destroy(c->kind, d);
    }
    return rc;
}

static void destroy_one(const struct rgpu_lt_victim *v)
{
    uint64_t kind;
    /* A handle we did not make could be anything: leave it alone.  The
     * kind is the one it was made as, whatever the request says.  Not
     * while another thread's call uses it. */
    pthread_mutex_t *lock = desc_lock(v->handle);
    pthread_mutex_lock(lock);
    if (forget_made(v->handle, &kind))
        (void)lt_destroy(kind, (void *)(uintptr_t)v->handle);
    pthread_mutex_unlock(lock);
}

/* Every content is parsed before anything is done: a malformed request
 * leaves no trace.  The codec checked each buffer against its length. */
static int parse_all(const uint32_t *lengths, size_t n, const unsigned char *bytes, size_t size,
                     struct content *out)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (lengths[i] > size - off || parse_content(bytes + off, lengths[i], &out[i]) < 0)
            return -1;
        off += lengths[i];
    }
    return off == size ? 0 : -1;
}

cublasStatus_t serve_rgpu_lt_materialize(const struct rgpu_lt_victim *victims, size_t nvictims,
                                         const uint32_t *lengths, size_t ncontents,
                                         const void *contents, size_t contents_size, int keep,
                                         int32_t *status, uint64_t *handles)
{
    if ((nvictims && !victims) || (ncontents && (!lengths || !status || !handles)) ||
        (contents_size && !contents))
        return serve_transport(RGPU_EPROTO);
    for (size_t i = 0; i < nvictims; i++)
        if (victims[i].kind > RGPU_LT_PREFERENCE)
            return serve_transport(RGPU_EPROTO);
    struct content *parsed = calloc(ncontents + 1, sizeof *parsed);
    if (!parsed)
        return serve_transport(RGPU_ENOMEM);
    if (parse_all(lengths, ncontents, contents, contents_size, parsed) < 0) {
        free(parsed);
        return serve_transport(RGPU_EPROTO);
    }
    if (!have_kind_functions()) {
        free(parsed);
        return serve_transport(RGPU_ENOSYM);
    }
    for (size_t i = 0; i < nvictims; i++)
        destroy_one(&victims[i]);
    int transport = 0;
    for (size_t i = 0; i < ncontents; i++) {
        int rc = create_one(&parsed[i], keep, &handles[i]);
        status[i] = rc > 0 ? rc : 0;
        if (rc < 0 && !transport)
            transport = -rc;
    }
    free(parsed);
    if (transport) {
        /* A missing function: undo what was made. */
        uint64_t kind;
        for (size_t i = 0; i < ncontents; i++)
            if (handles[i] && forget_made(handles[i], &kind))
                (void)lt_destroy(kind, (void *)(uintptr_t)handles[i]);
        return serve_transport(transport);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- calls with the pointer attributes sent along ------------------------------ */

/* The attributes set on the running call's descriptor, per serving thread,
 * to be made NULL again after it, and the descriptor it locked. */
struct lt_pointers {
    unsigned n;
    uint32_t attr[RGPU_LT_NPOINTERS];
};
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

/* Before a call that takes a matmul descriptor (argument 1, checked as the
 * session's): take the descriptor's lock, and set the pointers the call
 * carries in its arguments from `pointers` on (rgpu's own procedures; -1
 * for the generated ones, which carry none), each NULL or device memory
 * the session owns (the codec checked them as device pointers). */
static int take_desc(void **argv, int pointers)
{
    uint64_t desc = *(uint64_t *)argv[1];
    call_applied.n = 0;
    call_lock = NULL;
    if (!desc) {
        for (int k = 0; pointers >= 0 && k < RGPU_LT_NPOINTERS; k++)
            if (*(uint64_t *)argv[pointers + k])
                return CUBLAS_STATUS_INVALID_VALUE;
        return 0;
    }
    call_lock = desc_lock(desc);
    pthread_mutex_lock(call_lock);
    call_desc = desc;
    /* Destroyed by another thread since the handle check? */
    if (!handles_contains(H_CUBLASLT_MATMUL_DESC, desc))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int k = 0; pointers >= 0 && k < RGPU_LT_NPOINTERS; k++) {
        uint64_t ptr = *(uint64_t *)argv[pointers + k];
        if (!ptr)
            continue;
        int rc = set_pointer(desc, rgpu_lt_pointer_attr(k), ptr);
        if (rc != CUBLAS_STATUS_SUCCESS)
            return rc;
        call_applied.attr[call_applied.n++] = rgpu_lt_pointer_attr(k);
    }
    return 0;
}

/* After it: the pointers back to NULL, the lock released. */
static void give_desc(void **argv, int status)
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

/* The first pointer's argument in each of rgpu's own procedures: after
 * the generated call's. */
enum { MATMUL_POINTERS = 16, HEURISTIC_POINTERS = 10, ALGO_CHECK_POINTERS = 8 };

static int pre_generated(void **argv) { return take_desc(argv, -1); }
static int pre_matmul(void **argv) { return take_desc(argv, MATMUL_POINTERS); }
static int pre_heuristic(void **argv) { return take_desc(argv, HEURISTIC_POINTERS); }
static int pre_algo_check(void **argv) { return take_desc(argv, ALGO_CHECK_POINTERS); }

static const struct guard lt_guards[] = {
    { "cublasLt", "cublasLtMatmul", pre_generated, give_desc },
    { "cublasLt", "cublasLtMatmulAlgoGetHeuristic", pre_generated, give_desc },
    { "cublasLt", "cublasLtMatmulAlgoCheck", pre_generated, give_desc },
    { "cublasLt", "rgpu_lt_matmul", pre_matmul, give_desc },
    { "cublasLt", "rgpu_lt_heuristic", pre_heuristic, give_desc },
    { "cublasLt", "rgpu_lt_algo_check", pre_algo_check, give_desc },
};

const struct guard *lt_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(lt_guards, lib, name);
}

/* The calls themselves, once the guard set the pointers. */
cublasStatus_t serve_rgpu_lt_matmul(cublasLtHandle_t lightHandle,
                                    cublasLtMatmulDesc_t computeDesc, const void *alpha,
                                    const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                    cublasLtMatrixLayout_t Bdesc, const void *beta,
                                    const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                    cublasLtMatrixLayout_t Ddesc,
                                    const cublasLtMatmulAlgo_t *algo, void *workspace,
                                    size_t workspaceSizeInBytes, cudaStream_t stream,
                                    RGPU_LT_POINTER_PARAMS)
{
    (void)bias, (void)epilogue_aux, (void)a_scale, (void)b_scale, (void)c_scale,
        (void)d_scale, (void)amax_d, (void)epilogue_aux_scale, (void)epilogue_aux_amax,
        (void)d_out_scale;
    if (!REAL(cublasLtMatmul))
        return serve_transport(RGPU_ENOSYM);
    return REAL(cublasLtMatmul)(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C,
                                Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes, stream);
}

cublasStatus_t serve_rgpu_lt_heuristic(cublasLtHandle_t lightHandle,
                                       cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc,
                                       cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc,
                                       cublasLtMatrixLayout_t Ddesc,
                                       cublasLtMatmulPreference_t preference,
                                       int requestedAlgoCount,
                                       cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                       int *returnAlgoCount, RGPU_LT_POINTER_PARAMS)
{
    (void)bias, (void)epilogue_aux, (void)a_scale, (void)b_scale, (void)c_scale,
        (void)d_scale, (void)amax_d, (void)epilogue_aux_scale, (void)epilogue_aux_amax,
        (void)d_out_scale;
    if (!REAL(cublasLtMatmulAlgoGetHeuristic))
        return serve_transport(RGPU_ENOSYM);
    return REAL(cublasLtMatmulAlgoGetHeuristic)(lightHandle, operationDesc, Adesc, Bdesc,
                                                Cdesc, Ddesc, preference, requestedAlgoCount,
                                                heuristicResultsArray, returnAlgoCount);
}

cublasStatus_t serve_rgpu_lt_algo_check(cublasLtHandle_t lightHandle,
                                        cublasLtMatmulDesc_t operationDesc,
                                        cublasLtMatrixLayout_t Adesc,
                                        cublasLtMatrixLayout_t Bdesc,
                                        cublasLtMatrixLayout_t Cdesc,
                                        cublasLtMatrixLayout_t Ddesc,
                                        const cublasLtMatmulAlgo_t *algo,
                                        cublasLtMatmulHeuristicResult_t *result,
                                        RGPU_LT_POINTER_PARAMS)
{
    (void)bias, (void)epilogue_aux, (void)a_scale, (void)b_scale, (void)c_scale,
        (void)d_scale, (void)amax_d, (void)epilogue_aux_scale, (void)epilogue_aux_amax,
        (void)d_out_scale;
    if (!REAL(cublasLtMatmulAlgoCheck))
        return serve_transport(RGPU_ENOSYM);
    return REAL(cublasLtMatmulAlgoCheck)(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc,
                                         algo, result);
}
