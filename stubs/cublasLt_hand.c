/* Hand-written parts of libcublasLt: the calls that take matmul
 * descriptors, layouts and preferences (client objects, see
 * cublasLt_desc.c), which here become the server's descriptors of the same
 * content before the generated procedure is called; the heuristics' answers,
 * kept by their inputs; the pointer mode and scale type of each matmul and
 * transform descriptor (which decide whether alpha and beta are host values
 * or device pointers, and how large); and what is answered on the client.
 * Everything else is generated from codegen/cublasLt.ann. */
#include "rgpu_client.h"
#include "rgpu_liblog.h"
#include "rgpu_log.h"
#include "content_cache.h"
#include "cublasLt_desc.h"
#include "cublasLt_procs.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cublasLt_lib)

/* ---- descriptors the client knows the scalars of --------------------------------- */

/* Per server-side matmul or transform descriptor: its pointer mode and
 * scale type. */
static struct rgpu_keyed modes = RGPU_KEYED_INIT;        /* cublasLtPointerMode_t */
static struct rgpu_keyed scale_types = RGPU_KEYED_INIT;  /* cudaDataType */

static void remember_desc(const void *d, int32_t scale_type)
{
    rgpu_keyed_set(&modes, d, CUBLASLT_POINTER_MODE_HOST);
    rgpu_keyed_set(&scale_types, d, scale_type);
}

static void forget_desc(const void *d)
{
    rgpu_keyed_remove(&modes, d);
    rgpu_keyed_remove(&scale_types, d);
}

/* The descriptor a scalar follows: annotated type=<descriptor>. */
static const void *desc_of(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int idx = proc->params[param].len_arg;
    return idx < 0 ? NULL : *(const void *const *)argv[idx];
}

/* alpha is on the host only in host mode; beta also when the mode says
 * "alpha device vector, beta host". */
static int scalar_on_host(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int64_t mode;
    if (!rgpu_keyed_get(&modes, desc_of(proc, param, argv), &mode) ||
        mode == CUBLASLT_POINTER_MODE_HOST)
        return 1;
    return strcmp(proc->params[param].name, "beta") == 0 &&
           mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
}

static uint32_t scale_bytes(int type)
{
    switch (type) {
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_8I: case CUDA_R_8U: return 1;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_C_16F: case CUDA_C_16BF: return 4;
    case CUDA_R_64F: case CUDA_C_32F: return 8;
    case CUDA_C_64F: return 16;
    default: return 16;
    }
}

static uint32_t scalar_size(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int64_t type;
    return rgpu_keyed_get(&scale_types, desc_of(proc, param, argv), &type)
               ? scale_bytes((int)type) : 16;
}

static const struct rgpu_scalar_policy lt_scalars = { scalar_on_host, scalar_size, NULL };

__attribute__((constructor)) static void register_policy(void)
{
    rgpu_register_scalar_policy(LIB, &lt_scalars);
}

/* Server-side matmul descriptors, as cublasLt_desc.c makes and destroys them. */
void lt_matmul_desc_made(uint64_t handle, int32_t scale_type, int32_t pointer_mode)
{
    const void *d = (const void *)(uintptr_t)handle;
    rgpu_keyed_set(&scale_types, d, scale_type);
    rgpu_keyed_set(&modes, d, pointer_mode);
}

void lt_matmul_desc_gone(uint64_t handle)
{
    forget_desc((const void *)(uintptr_t)handle);
}

/* A successful SetAttribute of the pointer mode or scale type: record it. */
static void note_attribute(const void *desc, int is_mode, int is_scale, const void *buf,
                           size_t size)
{
    int32_t v;
    if ((is_mode || is_scale) && buf && size == sizeof v) {
        memcpy(&v, buf, sizeof v);
        rgpu_keyed_set(is_mode ? &modes : &scale_types, desc, v);
    }
}

#undef cublasLtMatrixTransformDescCreate
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescCreate(
    cublasLtMatrixTransformDesc_t *transformDesc, cudaDataType scaleType)
{
    const void *argv[] = { &transformDesc, &scaleType };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescCreate, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && transformDesc)
        remember_desc(*transformDesc, scaleType);
    return rc;
}

#undef cublasLtMatrixTransformDescDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescDestroy(
    cublasLtMatrixTransformDesc_t transformDesc)
{
    const void *argv[] = { &transformDesc };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescDestroy, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        forget_desc(transformDesc);
    return rc;
}

#undef cublasLtMatrixTransformDescSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescSetAttribute(
    cublasLtMatrixTransformDesc_t transformDesc, cublasLtMatrixTransformDescAttributes_t attr,
    const void *buf, size_t sizeInBytes)
{
    const void *argv[] = { &transformDesc, &attr, &buf, &sizeInBytes };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescSetAttribute, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        note_attribute(transformDesc, attr == CUBLASLT_MATRIX_TRANSFORM_DESC_POINTER_MODE,
                       attr == CUBLASLT_MATRIX_TRANSFORM_DESC_SCALE_TYPE, buf, sizeInBytes);
    return rc;
}

/* ---- keys: a call's inputs as bytes ---------------------------------------------------- */

static const enum rgpu_lt_kind matmul_kinds[] = {
    RGPU_LT_MATMUL_DESC, RGPU_LT_LAYOUT, RGPU_LT_LAYOUT, RGPU_LT_LAYOUT, RGPU_LT_LAYOUT,
    RGPU_LT_PREFERENCE,
};
static const enum rgpu_lt_kind layout_kinds[] = { RGPU_LT_LAYOUT, RGPU_LT_LAYOUT,
                                                  RGPU_LT_LAYOUT };

struct key_buf {
    unsigned char *p;
    size_t len, cap;
    int failed;
};

static void key_add(struct key_buf *k, const void *bytes, size_t n)
{
    if (k->failed)
        return;
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap : 512;
        while (cap < k->len + n)
            cap *= 2;
        unsigned char *p = realloc(k->p, cap);
        if (!p) {
            k->failed = 1;
            return;
        }
        k->p = p;
        k->cap = cap;
    }
    memcpy(k->p + k->len, bytes, n);
    k->len += n;
}

/* The handle, then each descriptor's content (empty for NULL); the key
 * fails when one is not a live descriptor of its kind. */
static void key_add_descriptors(struct key_buf *k, cublasLtHandle_t handle,
                                const void *const *objs, unsigned n)
{
    uint64_t h = (uint64_t)(uintptr_t)handle;
    key_add(k, &h, sizeof h);
    for (unsigned i = 0; i < n && !k->failed; i++) {
        const unsigned char *content = NULL;
        size_t len = 0;
        if (objs[i] && lt_content(objs[i], matmul_kinds[i], &content, &len) < 0) {
            k->failed = 1;
            break;
        }
        uint32_t len32 = (uint32_t)len;
        key_add(k, &len32, sizeof len32);
        if (len)
            key_add(k, content, len);
    }
}

/* Every key starts with the handle: a destroyed handle's entries go, since
 * a new handle may get its address. */
static int same_handle(const struct cc_entry *e, void *handle)
{
    uint64_t h;
    memcpy(&h, e->key, sizeof h);
    return h == (uint64_t)(uintptr_t)handle;
}

/* Both caches below, under one lock. */
static pthread_mutex_t answers_lock = PTHREAD_MUTEX_INITIALIZER;

static int cache_on(struct content_cache *c, size_t capacity)
{
    return c->buckets || cc_init(c, capacity) == 0;
}

/* Called with answers_lock held: a new entry for key (the caller fills in
 * what it maps to), the oldest beyond capacity dropped; NULL when out of
 * memory. */
static struct cc_entry *cache_put(struct content_cache *c, size_t capacity,
                                  const struct key_buf *k)
{
    struct cc_entry *e = cache_on(c, capacity) ? cc_insert(c, k->p, k->len) : NULL;
    if (e)
        cc_entry_free(cc_evict(c, 0));
    return e;
}

/* ---- calls that take client-side descriptors ------------------------------------------ */

/* The server's descriptor acquired in use slot i, typed for an argv. */
#define SERVER_DESC(use, i) ((void *)(uintptr_t)(use).handle[i])

/* Call proc with argv (whose operation descriptor is already the server's)
 * and the pointer attributes of client object op sent along, through
 * `with`, rgpu's own procedure that takes proc's arguments and one device
 * pointer per slot (codegen/cublasLt_own.h): the server sets them on its
 * descriptor for this call alone (daemon/hand_cublasLt.c), since they are
 * no part of the content it was made from.  Without any, proc itself.
 * wait: wait for the reply even of an asynchronous procedure. */
static int call_with_pointers(const struct rgpu_proc *proc, const struct rgpu_proc *with,
                              const void *op, const void *const *argv, int wait)
{
    uint32_t attrs[RGPU_LT_NPOINTERS];
    uint64_t values[RGPU_LT_NPOINTERS], slots[RGPU_LT_NPOINTERS] = { 0 };
    const void *all[RGPU_MAX_PARAMS];
    unsigned n = lt_pointers(op, attrs, values);
    if (n == 0)
        return wait ? rgpu_call_waiting(LIB, proc, argv) : rgpu_call(LIB, proc, argv);
    for (unsigned i = 0; i < n; i++)
        slots[rgpu_lt_pointer_slot(attrs[i])] = values[i];
    memcpy(all, argv, proc->nparams * sizeof *all);
    for (unsigned k = 0; k < RGPU_LT_NPOINTERS; k++)
        all[proc->nparams + k] = &slots[k];
    return wait ? rgpu_call_waiting(LIB, with, all) : rgpu_call(LIB, with, all);
}

/* The status of a call made with acquired descriptors: its own, else the
 * failure of an earlier asynchronous call that acquiring them learnt of. */
static int call_status(int rc, const struct lt_use *use)
{
    return rc ? rc : use->deferred;
}

/* cublasLtMatmul goes without waiting, its failure reported by the next
 * cuBLASLt call that waits.  With descriptors and heuristics answered here,
 * a steady state may have no such call: so the first matmul of each
 * configuration (handle, descriptors' content, algorithm, workspace size)
 * waits, and only one that succeeded goes without waiting after it.  Data
 * pointers are not part of it, nor are the descriptor's pointer attributes
 * (their alignment is): like A, B, C and D they are checked on the server
 * at every call, and a refusal is reported like any asynchronous failure. */
#define PROVEN_CAPACITY 1024
static struct content_cache proven;

static void matmul_config_key(struct key_buf *k, cublasLtHandle_t handle,
                              const void *const *objs, const cublasLtMatmulAlgo_t *algo,
                              size_t workspace_size)
{
    unsigned char has_algo = algo != NULL;
    memset(k, 0, sizeof *k);
    key_add_descriptors(k, handle, objs, 5);
    key_add(k, &has_algo, 1);
    if (algo)
        key_add(k, algo, sizeof *algo);
    key_add(k, &workspace_size, sizeof workspace_size);
}

static int config_proven(const struct key_buf *k)
{
    pthread_mutex_lock(&answers_lock);
    int known = !k->failed && proven.buckets && cc_find(&proven, k->p, k->len);
    pthread_mutex_unlock(&answers_lock);
    return known;
}

static void config_succeeded(const struct key_buf *k)
{
    if (k->failed)
        return;
    pthread_mutex_lock(&answers_lock);
    if (cache_on(&proven, PROVEN_CAPACITY) && !cc_find(&proven, k->p, k->len))
        cache_put(&proven, PROVEN_CAPACITY, k);
    pthread_mutex_unlock(&answers_lock);
}

#undef cublasLtMatmul
RGPU_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle,
                                          cublasLtMatmulDesc_t computeDesc, const void *alpha,
                                          const void *A, cublasLtMatrixLayout_t Adesc,
                                          const void *B, cublasLtMatrixLayout_t Bdesc,
                                          const void *beta, const void *C,
                                          cublasLtMatrixLayout_t Cdesc, void *D,
                                          cublasLtMatrixLayout_t Ddesc,
                                          const cublasLtMatmulAlgo_t *algo, void *workspace,
                                          size_t workspaceSizeInBytes, cudaStream_t stream)
{
    const void *objs[] = { computeDesc, Adesc, Bdesc, Cdesc, Ddesc };
    struct key_buf config;
    struct lt_use use;
    int rc = lt_acquire(objs, matmul_kinds, 5, &use);
    if (rc)
        return rc;
    matmul_config_key(&config, lightHandle, objs, algo, workspaceSizeInBytes);
    int first = !config_proven(&config);
    void *op = SERVER_DESC(use, 0), *a = SERVER_DESC(use, 1), *b = SERVER_DESC(use, 2),
         *c = SERVER_DESC(use, 3), *d = SERVER_DESC(use, 4);
    const void *argv[] = { &lightHandle, &op, &alpha, &A, &a, &B, &b, &beta, &C, &c, &D, &d,
                           &algo, &workspace, &workspaceSizeInBytes, &stream };
    rc = call_with_pointers(RGPU_CUBLASLT_cublasLtMatmul, RGPU_CUBLASLT_rgpu_lt_matmul,
                            computeDesc, argv, first);
    lt_release(&use);
    rc = call_status(rc, &use);
    if (first && rc == CUBLAS_STATUS_SUCCESS)
        config_succeeded(&config);
    free(config.p);
    return rc;
}

#undef cublasLtMatmulAlgoCheck
RGPU_EXPORT cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle,
                                                   cublasLtMatmulDesc_t operationDesc,
                                                   cublasLtMatrixLayout_t Adesc,
                                                   cublasLtMatrixLayout_t Bdesc,
                                                   cublasLtMatrixLayout_t Cdesc,
                                                   cublasLtMatrixLayout_t Ddesc,
                                                   const cublasLtMatmulAlgo_t *algo,
                                                   cublasLtMatmulHeuristicResult_t *result)
{
    const void *objs[] = { operationDesc, Adesc, Bdesc, Cdesc, Ddesc };
    struct lt_use use;
    int rc = lt_acquire(objs, matmul_kinds, 5, &use);
    if (rc)
        return rc;
    void *op = SERVER_DESC(use, 0), *a = SERVER_DESC(use, 1), *b = SERVER_DESC(use, 2),
         *c = SERVER_DESC(use, 3), *d = SERVER_DESC(use, 4);
    const void *argv[] = { &lightHandle, &op, &a, &b, &c, &d, &algo, &result };
    rc = call_with_pointers(RGPU_CUBLASLT_cublasLtMatmulAlgoCheck,
                            RGPU_CUBLASLT_rgpu_lt_algo_check, operationDesc, argv, 0);
    lt_release(&use);
    return call_status(rc, &use);
}

#undef cublasLtMatrixTransform
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransform(cublasLtHandle_t lightHandle,
                                                   cublasLtMatrixTransformDesc_t transformDesc,
                                                   const void *alpha, const void *A,
                                                   cublasLtMatrixLayout_t Adesc,
                                                   const void *beta, const void *B,
                                                   cublasLtMatrixLayout_t Bdesc, void *C,
                                                   cublasLtMatrixLayout_t Cdesc,
                                                   cudaStream_t stream)
{
    const void *objs[] = { Adesc, Bdesc, Cdesc };
    struct lt_use use;
    int rc = lt_acquire(objs, layout_kinds, 3, &use);
    if (rc)
        return rc;
    void *a = SERVER_DESC(use, 0), *b = SERVER_DESC(use, 1), *c = SERVER_DESC(use, 2);
    const void *argv[] = { &lightHandle, &transformDesc, &alpha, &A, &a, &beta, &B, &b,
                           &C, &c, &stream };
    rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransform, argv);
    lt_release(&use);
    return call_status(rc, &use);
}

/* ---- heuristics, kept by their inputs ----------------------------------------------------- */

/* cuBLASLt's heuristics answer the same for the same handle, descriptors,
 * preference and count on the same device: an answer is kept, keyed by
 * all of those (descriptors by content), and given again without asking.
 * Only successful answers are kept. */
#define HEURISTICS_CAPACITY 1024
#define HEURISTICS_MAX_COUNT 64     /* larger requests are not kept */

static struct content_cache heuristics;    /* key -> returned count, results */

/* The calling thread's current device: as the runtime stub last saw it,
 * else asked through it (which then remembers it).  -1 when unknown. */
static int current_device(void)
{
    static int (*get_device)(int *);
    static int looked;
    int dev;
    if (rgpu_thread_device(&dev))
        return dev;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        get_device = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaGetDevice");
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    return get_device && get_device(&dev) == 0 ? dev : -1;
}

/* The key of a heuristic query; 0 when it cannot be kept (a descriptor
 * that is no live one, an unknown device, a count out of bounds). */
static int heuristic_key(struct key_buf *k, cublasLtHandle_t handle, const void *const *objs,
                         int requested)
{
    int dev = current_device();
    memset(k, 0, sizeof *k);
    if (dev < 0 || requested <= 0 || requested > HEURISTICS_MAX_COUNT)
        return 0;
    key_add_descriptors(k, handle, objs, 6);
    key_add(k, &dev, sizeof dev);
    key_add(k, &requested, sizeof requested);
    return !k->failed;
}

static int heuristic_known(const struct key_buf *k, cublasLtMatmulHeuristicResult_t *results,
                           int *returned)
{
    int found = 0;
    pthread_mutex_lock(&answers_lock);
    struct cc_entry *e = heuristics.buckets ? cc_find(&heuristics, k->p, k->len) : NULL;
    if (e) {
        memcpy(results, e->blob, e->blob_len);
        *returned = (int)e->handle;
        found = 1;
    }
    pthread_mutex_unlock(&answers_lock);
    return found;
}

static void heuristic_learnt(const struct key_buf *k,
                             const cublasLtMatmulHeuristicResult_t *results, int returned)
{
    size_t bytes = (size_t)(returned > 0 ? returned : 0) * sizeof *results;
    void *copy = malloc(bytes ? bytes : 1);
    struct cc_entry *e = NULL;
    if (!copy)
        return;
    memcpy(copy, results, bytes);
    pthread_mutex_lock(&answers_lock);
    e = cache_put(&heuristics, HEURISTICS_CAPACITY, k);
    if (e) {
        e->blob = copy;
        e->blob_len = bytes;
        e->handle = (uint64_t)returned;
    }
    pthread_mutex_unlock(&answers_lock);
    if (!e)
        free(copy);
}

#undef cublasLtMatmulAlgoGetHeuristic
RGPU_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
    cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    const void *objs[] = { operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference };
    struct key_buf key = { NULL, 0, 0, 0 };
    int keep = heuristicResultsArray && returnAlgoCount &&
               heuristic_key(&key, lightHandle, objs, requestedAlgoCount);
    if (keep && heuristic_known(&key, heuristicResultsArray, returnAlgoCount)) {
        free(key.p);
        return CUBLAS_STATUS_SUCCESS;
    }

    struct lt_use use;
    int rc = lt_acquire(objs, matmul_kinds, 6, &use);
    if (rc == 0) {
        void *op = SERVER_DESC(use, 0), *a = SERVER_DESC(use, 1), *b = SERVER_DESC(use, 2),
             *c = SERVER_DESC(use, 3), *d = SERVER_DESC(use, 4), *pref = SERVER_DESC(use, 5);
        const void *argv[] = { &lightHandle, &op, &a, &b, &c, &d, &pref, &requestedAlgoCount,
                               &heuristicResultsArray, &returnAlgoCount };
        rc = call_status(call_with_pointers(RGPU_CUBLASLT_cublasLtMatmulAlgoGetHeuristic,
                                            RGPU_CUBLASLT_rgpu_lt_heuristic, operationDesc,
                                            argv, 0),
                         &use);
        lt_release(&use);
    }
    if (keep && rc == CUBLAS_STATUS_SUCCESS && *returnAlgoCount <= requestedAlgoCount)
        heuristic_learnt(&key, heuristicResultsArray, *returnAlgoCount);
    free(key.p);
    return rc;
}

/* A destroyed handle's answers go: a new handle may get its address. */
#undef cublasLtDestroy
RGPU_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    const void *argv[] = { &lightHandle };
    pthread_mutex_lock(&answers_lock);
    if (heuristics.buckets)
        cc_drop_if(&heuristics, same_handle, lightHandle);
    if (proven.buckets)
        cc_drop_if(&proven, same_handle, lightHandle);
    pthread_mutex_unlock(&answers_lock);
    return rgpu_call(LIB, RGPU_CUBLASLT_cublasLtDestroy, argv);
}

/* ---- answered on the client ---------------------------------------------------------- */

RGPU_EXPORT const char *cublasLtGetStatusName(cublasStatus_t status)
{
    const char *s = rgpu_cublasLt_error_name(status);
    return s ? s : "CUBLAS_STATUS_UNKNOWN";
}

RGPU_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status)
{
    const char *s = rgpu_server_error_string(LIB, status);
    return s ? s : cublasLtGetStatusName(status);
}

/* The version of the API this stub implements (the headers'): a program
 * checks it against what it was built for. */
RGPU_EXPORT size_t cublasLtGetVersion(void)
{
    return CUBLAS_VERSION;     /* cuBLASLt ships with cuBLAS, same version */
}

RGPU_EXPORT size_t cublasLtGetCudartVersion(void)
{
    return CUDART_VERSION;
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cublasLt_lib);
}
