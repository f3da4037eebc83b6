/* cuDNN tensor descriptors as client objects.
 *
 * PyTorch creates, sets and destroys tensor descriptors around every
 * batch norm, pooling or softmax call: three round trips each when they
 * lived on the server.  Here a descriptor is the program's object; what
 * it was set to (the setter and its arguments) is its content, and the
 * server keeps one descriptor per content, made the first time that
 * content is set (which also returns cuDNN's own verdict on it) and shared
 * by every object of that content.  Generated calls swap the object for
 * that server descriptor (rgpu_register_translator), so every cuDNN
 * function that takes tensor descriptors works unchanged, and one whose
 * handles are all known may go without waiting.
 *
 * A call that writes into a descriptor (cudnnDeriveBNTensorDescriptor and
 * the like) gets a server descriptor of the object's own, which it then
 * keeps until destroyed: its content is the server's business from then
 * on.  At most CACHE_MAX contents are kept; beyond, an object owns its
 * server descriptor as well (slower, never wrong). */
#include "rgpu_client.h"
#include "rgpu_handle_table.h"
#include "rgpu_log.h"
#include "content_cache.h"
#include "cudnn_procs.h"

#include <cudnn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)
#define CACHE_MAX 4096
#define KEY_MAX (4 + 4 * (4 + 2 * CUDNN_DIM_MAX))

/* Kept in stubs/cudnn_hand.c: the data type a server descriptor holds
 * (alpha and beta are double only for double data). */
void cudnn_note_tensor_type(uint64_t server, int dtype);
void cudnn_forget_tensor_type(uint64_t server);

struct tensor {
    struct cc_entry *shared;    /* the content's server descriptor, or NULL */
    uint64_t own;               /* a server descriptor of this object alone, or 0 */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct content_cache contents;   /* content -> server descriptor */
static struct rgpu_handle_table objects = RGPU_HANDLE_TABLE_INIT(NULL);
static uint32_t tensor_class;

static struct tensor *object_of(uint64_t h)
{
    return rgpu_htab_get(&objects, tensor_class, h, NULL) ? (struct tensor *)(uintptr_t)h : NULL;
}

/* ---- server descriptors ---------------------------------------------------------- */

static int server_create(uint64_t *server)
{
    cudnnTensorDescriptor_t d = NULL, *out = &d;
    const void *argv[] = { &out };
    int rc = rgpu_call(LIB, RGPU_CUDNN_cudnnCreateTensorDescriptor, argv);
    *server = rc == CUDNN_STATUS_SUCCESS ? (uint64_t)(uintptr_t)d : 0;
    return rc;
}

static void server_destroy(uint64_t server)
{
    cudnnTensorDescriptor_t d = (cudnnTensorDescriptor_t)(uintptr_t)server;
    const void *argv[] = { &d };
    if (!server)
        return;
    cudnn_forget_tensor_type(server);
    (void)rgpu_call(LIB, RGPU_CUDNN_cudnnDestroyTensorDescriptor, argv);
}

/* Set server descriptor `server` with setter proc, whose argv[0] is the
 * descriptor (the rest as the program gave them). */
static int server_set(const struct rgpu_proc *proc, const void **argv, uint64_t server)
{
    cudnnTensorDescriptor_t d = (cudnnTensorDescriptor_t)(uintptr_t)server;
    argv[0] = &d;
    return rgpu_call_waiting(LIB, proc, (const void *const *)argv);
}

/* With the lock held: drop the object's hold on its server descriptor. */
static void release(struct tensor *t)
{
    if (t->shared)
        t->shared->pins--;
    t->shared = NULL;
    if (t->own)
        server_destroy(t->own);
    t->own = 0;
}

/* With the lock held: unpinned contents beyond the bound go, their server
 * descriptors destroyed (forgetting kept answers that named them). */
static void trim(void)
{
    struct cc_entry *e;
    while ((e = cc_evict(&contents, 0)) != NULL) {
        server_destroy(e->handle);
        cc_entry_free(e);
    }
    rgpu_answers_forget();
}

/* ---- setting: content first ------------------------------------------------------ */

/* Set object t to content key (setter proc, argv as the program's, argv[0]
 * to be replaced), dtype for the scalar policy. */
static int set_tensor(cudnnTensorDescriptor_t desc, const struct rgpu_proc *proc,
                      const void **argv, const unsigned char *key, size_t key_len, int dtype)
{
    struct tensor *t = object_of((uint64_t)(uintptr_t)desc);
    int rc = CUDNN_STATUS_SUCCESS;
    if (!t)         /* not ours (NULL, garbage): the library's answer */
        return server_set(proc, argv, (uint64_t)(uintptr_t)desc);
    pthread_mutex_lock(&lock);
    if (t->own) {   /* its own server descriptor: set that one */
        rc = server_set(proc, argv, t->own);
        rgpu_answers_forget();
        goto out;
    }
    if (!contents.buckets && cc_init(&contents, CACHE_MAX) < 0) {
        rc = CUDNN_STATUS_ALLOC_FAILED;
        goto out;
    }
    struct cc_entry *e = cc_find(&contents, key, key_len);
    if (!e) {
        uint64_t server;
        if ((rc = server_create(&server)) != CUDNN_STATUS_SUCCESS)
            goto out;
        if ((rc = server_set(proc, argv, server)) != CUDNN_STATUS_SUCCESS) {
            server_destroy(server);     /* cuDNN refused the content */
            goto out;
        }
        cudnn_note_tensor_type(server, dtype);
        if (!(e = cc_insert(&contents, key, key_len))) {
            server_destroy(server);
            rc = CUDNN_STATUS_ALLOC_FAILED;
            goto out;
        }
        e->handle = server;
    }
    e->pins++;          /* before releasing the old one: it may be the same */
    release(t);
    t->shared = e;
    if (contents.count > contents.capacity)
        trim();
out:
    pthread_mutex_unlock(&lock);
    return rc;
}

/* A content key: the setter's id and its arguments' values. */
struct key {
    unsigned char b[KEY_MAX];
    size_t n;
};

static void key_put(struct key *k, const void *p, size_t n)
{
    if (k->n + n <= sizeof k->b)
        memcpy(k->b + k->n, p, n);
    k->n += n;
}

static void key_begin(struct key *k, const struct rgpu_proc *proc)
{
    k->n = 0;
    key_put(k, &proc->id, sizeof proc->id);
}

#undef cudnnSetTensor4dDescriptor
RGPU_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int n, int c,
                                                     int h, int w)
{
    const void *argv[] = { &tensorDesc, &format, &dataType, &n, &c, &h, &w };
    const struct rgpu_proc *proc = RGPU_CUDNN_cudnnSetTensor4dDescriptor;
    int v[] = { (int)format, (int)dataType, n, c, h, w };
    struct key k;
    key_begin(&k, proc);
    key_put(&k, v, sizeof v);
    return set_tensor(tensorDesc, proc, argv, k.b, k.n, dataType);
}

#undef cudnnSetTensor4dDescriptorEx
RGPU_EXPORT cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc,
                                                       cudnnDataType_t dataType, int n, int c,
                                                       int h, int w, int nStride, int cStride,
                                                       int hStride, int wStride)
{
    const void *argv[] = { &tensorDesc, &dataType, &n, &c, &h, &w,
                           &nStride, &cStride, &hStride, &wStride };
    const struct rgpu_proc *proc = RGPU_CUDNN_cudnnSetTensor4dDescriptorEx;
    int v[] = { (int)dataType, n, c, h, w, nStride, cStride, hStride, wStride };
    struct key k;
    key_begin(&k, proc);
    key_put(&k, v, sizeof v);
    return set_tensor(tensorDesc, proc, argv, k.b, k.n, dataType);
}

/* The dimension arrays of an Nd setter join the key only when cuDNN could
 * accept their count; otherwise the server answers (and nothing is kept). */
static int nd_key(struct key *k, const struct rgpu_proc *proc, const int *head, size_t nhead,
                  int nbDims, const int *a, const int *b)
{
    key_begin(k, proc);
    key_put(k, head, nhead * sizeof *head);
    if (nbDims < 0 || nbDims > CUDNN_DIM_MAX || (nbDims && !a))
        return -1;
    if (nbDims)
        key_put(k, a, (size_t)nbDims * sizeof *a);
    if (b && nbDims)
        key_put(k, b, (size_t)nbDims * sizeof *b);
    return k->n <= sizeof k->b ? 0 : -1;
}

#undef cudnnSetTensorNdDescriptor
RGPU_EXPORT cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnDataType_t dataType, int nbDims,
                                                     const int dimA[], const int strideA[])
{
    const void *argv[] = { &tensorDesc, &dataType, &nbDims, &dimA, &strideA };
    const struct rgpu_proc *proc = RGPU_CUDNN_cudnnSetTensorNdDescriptor;
    int head[] = { (int)dataType, nbDims };
    struct key k;
    if (nd_key(&k, proc, head, 2, nbDims, dimA, strideA) < 0 || (nbDims && !strideA))
        return (cudnnStatus_t)server_set(proc, argv, (uint64_t)(uintptr_t)tensorDesc);
    return set_tensor(tensorDesc, proc, argv, k.b, k.n, dataType);
}

#undef cudnnSetTensorNdDescriptorEx
RGPU_EXPORT cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t tensorDesc,
                                                       cudnnTensorFormat_t format,
                                                       cudnnDataType_t dataType, int nbDims,
                                                       const int dimA[])
{
    const void *argv[] = { &tensorDesc, &format, &dataType, &nbDims, &dimA };
    const struct rgpu_proc *proc = RGPU_CUDNN_cudnnSetTensorNdDescriptorEx;
    int head[] = { (int)format, (int)dataType, nbDims };
    struct key k;
    if (nd_key(&k, proc, head, 3, nbDims, dimA, NULL) < 0)
        return (cudnnStatus_t)server_set(proc, argv, (uint64_t)(uintptr_t)tensorDesc);
    return set_tensor(tensorDesc, proc, argv, k.b, k.n, dataType);
}

/* ---- create and destroy: on the client ------------------------------------------- */

#undef cudnnCreateTensorDescriptor
RGPU_EXPORT cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc)
{
    if (!tensorDesc)
        return CUDNN_STATUS_BAD_PARAM;
    struct tensor *t = calloc(1, sizeof *t);
    if (!t || rgpu_htab_add(&objects, tensor_class, (uint64_t)(uintptr_t)t, 0) < 0) {
        free(t);
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    *tensorDesc = (cudnnTensorDescriptor_t)t;
    return CUDNN_STATUS_SUCCESS;
}

#undef cudnnDestroyTensorDescriptor
RGPU_EXPORT cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc)
{
    const void *argv[] = { &tensorDesc };
    struct tensor *t = object_of((uint64_t)(uintptr_t)tensorDesc);
    if (!t)     /* NULL or not ours: the library's answer */
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnDestroyTensorDescriptor, argv);
    rgpu_htab_remove(&objects, tensor_class, (uint64_t)(uintptr_t)t);
    pthread_mutex_lock(&lock);
    release(t);
    pthread_mutex_unlock(&lock);
    free(t);
    return CUDNN_STATUS_SUCCESS;
}

/* ---- every other call: the server's descriptor ------------------------------------ */

/* Calls that write into a tensor descriptor parameter (the headers leave
 * it non-const): the object gets a server descriptor of its own first. */
static int writes_descriptor(const struct rgpu_proc *proc, unsigned param)
{
    static const struct { const char *fn, *param; } writers[] = {
        { "cudnnDeriveBNTensorDescriptor", "derivedBnDesc" },
        { "cudnnDeriveNormTensorDescriptor", "derivedNormScaleBiasDesc" },
        { "cudnnDeriveNormTensorDescriptor", "derivedNormMeanVarDesc" },
        { "cudnnInitTransformDest", "destDesc" },
        { "cudnnGetFoldedConvBackwardDataDescriptors", "paddedDiffDesc" },
        { "cudnnGetFoldedConvBackwardDataDescriptors", "foldedGradDesc" },
        { "cudnnGetRNNWeightParams", "mDesc" },
        { "cudnnGetRNNWeightParams", "bDesc" },
    };
    for (size_t i = 0; i < sizeof writers / sizeof writers[0]; i++)
        if (strcmp(proc->name, writers[i].fn) == 0 &&
            strcmp(proc->params[param].name, writers[i].param) == 0)
            return 1;
    return 0;
}

static int translate(const struct rgpu_proc *proc, unsigned param, uint64_t h, uint64_t *server)
{
    struct tensor *t = object_of(h);
    int rc = 1;
    if (!t)
        return 0;
    pthread_mutex_lock(&lock);
    if (writes_descriptor(proc, param) && !t->own) {
        uint64_t own;
        int st = server_create(&own);
        if (st != CUDNN_STATUS_SUCCESS) {
            rc = -st;
            goto out;
        }
        release(t);
        t->own = own;
        rgpu_answers_forget();
    }
    *server = t->own ? t->own : t->shared ? t->shared->handle : 0;
out:
    pthread_mutex_unlock(&lock);
    return rc;
}

__attribute__((constructor)) static void register_translator(void)
{
    tensor_class = rgpu_handle_class("cudnnTensorStruct");
    rgpu_register_translator(LIB, tensor_class, translate);
}
