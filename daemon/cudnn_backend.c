/* cuDNN's backend (graph) API, server side: descriptors named by the client
 * (codegen/cudnn_own.h; client side stubs/cudnn_backend.c).
 *
 * The client names every descriptor it makes; the session keeps the name
 * with the real descriptor (the named handles of owned_handles.h) and one
 * word of facts: the descriptor's type and a failure kept for it.  A name
 * is only ever looked up: one the session does not hold is refused, and no
 * client value reaches cuDNN as a descriptor, a handle or a pointer without
 * a check -- descriptors inside attribute arrays are names too, cuDNN
 * handles there must be the session's, pointers its device memory.
 *
 * Requests the client sent without waiting (deferred) cannot answer: a
 * failure of cuDNN's is kept with the descriptor, and the next request
 * that waits and names it returns that failure instead of running (a set
 * refused before a finalize fails that finalize with the set's status, as
 * cudnn-frontend would have failed at the set).  A failure still kept when
 * the descriptor is destroyed is that destroy's status (reported by the
 * thread's next waiting cuDNN call when the destroy did not wait). */
#include "rgpud.h"
#include "owned.h"
#include "owned_handles.h"
#include "cudnn_serve.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cudnn_graph.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cudnn", #name))

uint32_t rgpu_cudnn_type_size(int type);
int rgpu_cudnn_is_pack_attribute(int64_t name);
const struct rgpu_cudnn_described *rgpu_cudnn_described_attr(size_t i);

static uint32_t C_NAMED;

__attribute__((constructor)) static void classes_init(void)
{
    C_NAMED = rgpu_handle_class("cudnnBackendDescriptor_t");
}

/* The facts word: the descriptor's type, and a failure kept for it. */
static uint32_t facts(int64_t type, int kept)
{
    return ((uint32_t)type & 0xffu) | (uint32_t)kept << 8;
}

static int kept_of(uint32_t info)
{
    return (int)(info >> 8);
}

static int backend_present(void)
{
    return REAL(cudnnBackendCreateDescriptor) && REAL(cudnnBackendDestroyDescriptor) &&
           REAL(cudnnBackendSetAttribute) && REAL(cudnnBackendGetAttribute) &&
           REAL(cudnnBackendFinalize) && REAL(cudnnBackendExecute);
}

static int refuse_name(const char *what)
{
    rgpu_warn("%s: refused a backend descriptor the session never handed out", what);
    return CUDNN_STATUS_BAD_PARAM;
}

/* The descriptor a request names as its subject, in *real (NULL for name
 * 0, which goes to cuDNN as NULL).  Returns 0, or the status to answer
 * instead of running: for a name the session does not hold; for a request
 * that waits, a failure kept for the descriptor (forgotten once reported),
 * and for one whose making failed, CUDNN_STATUS_BAD_PARAM after that. */
static int subject(const char *what, uint64_t name, int waits, cudnnBackendDescriptor_t *real)
{
    uint64_t r = 0;
    uint32_t info = 0;
    *real = NULL;
    if (!name)
        return 0;
    if (!named_find(C_NAMED, name, &r, &info))
        return refuse_name(what);
    if (waits && kept_of(info)) {
        named_set_info(C_NAMED, name, facts(info & 0xffu, 0));
        return kept_of(info);
    }
    if (waits && !r)
        return CUDNN_STATUS_BAD_PARAM;
    *real = (cudnnBackendDescriptor_t)(uintptr_t)r;
    return 0;
}

/* The status of a request: a failure of one that did not wait is kept for
 * its descriptor (the first one only) and the request answers success. */
static int settle(uint64_t name, int deferred, int status)
{
    uint32_t info;
    if (!deferred || !name || status == CUDNN_STATUS_SUCCESS ||
        !named_find(C_NAMED, name, NULL, &info))
        return status;
    if (!kept_of(info))
        named_set_info(C_NAMED, name, facts(info & 0xffu, status));
    return CUDNN_STATUS_SUCCESS;
}

/* Names inside an attribute array, as the real descriptors (NULL stays
 * NULL, for cuDNN to refuse).  0, or the status to answer. */
static int translate_names(const char *what, const uint64_t *names, size_t n,
                           cudnnBackendDescriptor_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = 0;
        out[i] = NULL;
        if (!names[i])
            continue;
        if (!named_find(C_NAMED, names[i], &r, NULL))
            return refuse_name(what);
        if (!r)
            return CUDNN_STATUS_BAD_PARAM;      /* one cuDNN did not make */
        out[i] = (cudnnBackendDescriptor_t)(uintptr_t)r;
    }
    return 0;
}

/* ---- create, destroy, initialize ------------------------------------------------- */

cudnnStatus_t serve_rgpu_cudnn_backend_create(uint64_t name, int64_t type, int deferred)
{
    cudnnBackendDescriptor_t real = NULL;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    if (!name)      /* no output: cuDNN's own answer */
        return REAL(cudnnBackendCreateDescriptor)((cudnnBackendDescriptorType_t)type, NULL);
    if (named_find(C_NAMED, name, NULL, NULL)) {
        rgpu_warn("rgpu_cudnn_backend_create: refused a name the session holds already");
        return CUDNN_STATUS_BAD_PARAM;
    }
    int st = REAL(cudnnBackendCreateDescriptor)((cudnnBackendDescriptorType_t)type, &real);
    if (st != CUDNN_STATUS_SUCCESS) {
        /* Kept for the name's first waiting request when none waits now. */
        if (deferred && named_add(C_NAMED, name, 0, facts(type, st)) == 0)
            return CUDNN_STATUS_SUCCESS;
        return st;
    }
    if (named_add(C_NAMED, name, (uint64_t)(uintptr_t)real, facts(type, 0)) != 0) {
        REAL(cudnnBackendDestroyDescriptor)(real);
        rgpu_warn("rgpu_cudnn_backend_create: the session holds %u backend descriptors, "
                  "the most it keeps", NAMED_MAX);
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t serve_rgpu_cudnn_backend_destroy(uint64_t name)
{
    uint64_t r = 0;
    uint32_t info = 0;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    if (!name)
        return REAL(cudnnBackendDestroyDescriptor)(NULL);
    if (!named_take(C_NAMED, name, &r, &info))
        return refuse_name("rgpu_cudnn_backend_destroy");
    int st = r ? REAL(cudnnBackendDestroyDescriptor)((cudnnBackendDescriptor_t)(uintptr_t)r)
               : CUDNN_STATUS_SUCCESS;
    return st != CUDNN_STATUS_SUCCESS ? st : kept_of(info);
}

cudnnStatus_t serve_rgpu_cudnn_backend_initialize(uint64_t name)
{
    cudnnBackendDescriptor_t real;
    if (!backend_present() || !REAL(cudnnBackendInitialize))
        return serve_transport(RGPU_ENOSYM);
    int st = subject("rgpu_cudnn_backend_initialize", name, 1, &real);
    return st ? (cudnnStatus_t)st : REAL(cudnnBackendInitialize)(real);
}

/* ---- set, finalize, get ---------------------------------------------------------- */

/* The elements of an attribute array cuDNN follows, checked: handles must
 * be the session's cuDNN handles, pointers its device memory (NULL is
 * cuDNN's business).  0, or the status to answer. */
static int values_allowed(const char *what, int64_t type, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i])
            continue;
        if (type == CUDNN_TYPE_HANDLE && !handles_contains(H_CUDNN, v[i])) {
            rgpu_warn("%s: refused a cuDNN handle the session never handed out", what);
            return CUDNN_STATUS_BAD_PARAM;
        }
        if (type == CUDNN_TYPE_VOID_PTR && !owned_range(v[i], 0)) {
            rgpu_warn("%s: refused a pointer outside the session's memory", what);
            return CUDNN_STATUS_BAD_PARAM;
        }
    }
    return 0;
}

static uint32_t type_size(int64_t type)
{
    return type >= 0 && type < 64 ? rgpu_cudnn_type_size((int)type) : 0;
}

cudnnStatus_t serve_rgpu_cudnn_backend_set(uint64_t name, int64_t attr, int64_t type,
                                           int64_t count, const void *values, size_t size,
                                           int deferred)
{
    static const char what[] = "rgpu_cudnn_backend_set";
    cudnnBackendDescriptor_t real, *reals = NULL;
    uint32_t esize = type_size(type);
    const void *arg = values;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    int st = subject(what, name, !deferred, &real);
    if (st)
        return st;
    if (name && !real)      /* cuDNN did not make it: that failure is kept */
        return CUDNN_STATUS_SUCCESS;
    /* Values of a positive count must be exactly as many as it says; a
     * NULL array (no values) and non-positive counts are cuDNN's to
     * refuse, which reads nothing then. */
    if (count > 0 && values) {
        if (!esize || size % esize || size / esize != (uint64_t)count)
            return settle(name, deferred, CUDNN_STATUS_BAD_PARAM);
        if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
            if (!(reals = calloc((size_t)count, sizeof *reals)))
                return settle(name, deferred, CUDNN_STATUS_ALLOC_FAILED);
            st = translate_names(what, values, (size_t)count, reals);
            arg = reals;
        } else if (type == CUDNN_TYPE_HANDLE || type == CUDNN_TYPE_VOID_PTR) {
            st = values_allowed(what, type, values, (size_t)count);
        }
    } else if (count > 0) {
        arg = NULL;
    }
    if (st == 0)
        st = REAL(cudnnBackendSetAttribute)(real, (cudnnBackendAttributeName_t)attr,
                                            (cudnnBackendAttributeType_t)type, count, arg);
    free(reals);
    return settle(name, deferred, st);
}

/* ---- descriptions: what cuDNN answers about a finalized descriptor ---------------------- */

/* Descriptors cuDNN fills from another are described to this depth (a
 * heuristics' engine configs' engines and knob choices). */
#define DESCRIBE_DEPTH 3

struct description {
    struct rgpu_cudnn_answer *a;
    size_t max, n;
    unsigned char *bytes;
    size_t max_bytes, used;
    int32_t nodes;              /* node numbers handed out */
};

static void describe(struct description *w, cudnnBackendDescriptor_t d, int32_t type,
                     int32_t node, int depth);

/* Elements of descriptor attribute e read into descriptors made for them,
 * each described as a node of its own: a->at is the first's node. */
static void describe_elements(struct description *w, cudnnBackendDescriptor_t d,
                              const struct rgpu_cudnn_described *e, struct rgpu_cudnn_answer *a,
                              int depth)
{
    cudnnBackendDescriptor_t *temps = calloc(a->requested ? (size_t)a->requested : 1,
                                             sizeof *temps);
    int64_t made = 0;
    a->at = RGPU_CUDNN_UNDESCRIBED;
    a->status = CUDNN_STATUS_ALLOC_FAILED;
    while (temps && made < a->requested &&
           REAL(cudnnBackendCreateDescriptor)((cudnnBackendDescriptorType_t)e->child,
                                              &temps[made]) == CUDNN_STATUS_SUCCESS)
        made++;
    if (temps && made == a->requested)
        a->status = REAL(cudnnBackendGetAttribute)(d, (cudnnBackendAttributeName_t)e->attr,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, a->requested,
                                                   &a->count, temps);
    if (a->status == CUDNN_STATUS_SUCCESS && a->count >= 0 && a->count <= a->requested &&
        depth < DESCRIBE_DEPTH) {
        a->at = (uint64_t)w->nodes;
        w->nodes += (int32_t)a->count;
        for (int64_t i = 0; i < a->count; i++)
            describe(w, temps[i], e->child, (int32_t)a->at + (int32_t)i, depth + 1);
    }
    for (int64_t i = 0; i < made; i++)
        REAL(cudnnBackendDestroyDescriptor)(temps[i]);
    free(temps);
}

/* Values of attribute e read into the description's bytes; a->at is where. */
static void describe_values(struct description *w, cudnnBackendDescriptor_t d,
                            const struct rgpu_cudnn_described *e, struct rgpu_cudnn_answer *a)
{
    uint32_t esize = type_size(e->type);
    size_t at = (w->used + 7) & ~(size_t)7;     /* cuDNN writes int64s there */
    a->at = at;
    a->status = CUDNN_STATUS_NOT_SUPPORTED;
    if (!esize || at > w->max_bytes || (uint64_t)a->requested > (w->max_bytes - at) / esize)
        return;     /* no room: not answered (the program's get asks cuDNN) */
    w->used = at;
    a->status = REAL(cudnnBackendGetAttribute)(d, (cudnnBackendAttributeName_t)e->attr,
                                               (cudnnBackendAttributeType_t)e->type, a->requested,
                                               &a->count, w->bytes + w->used);
    if (a->status == CUDNN_STATUS_SUCCESS && a->count >= 0 && a->count <= a->requested)
        w->used += (size_t)a->count * esize;
    else if (a->status == CUDNN_STATUS_SUCCESS)
        a->status = CUDNN_STATUS_INTERNAL_ERROR;    /* more than asked: never answered */
}

/* Descriptor d, of type `type`, as node `node`: for each attribute the
 * table names, the answers to a count query and to a read.  Stops where
 * the answers run out of room. */
static void describe(struct description *w, cudnnBackendDescriptor_t d, int32_t type,
                     int32_t node, int depth)
{
    const struct rgpu_cudnn_described *e;
    for (size_t i = 0; (e = rgpu_cudnn_described_attr(i)) != NULL && w->n < w->max; i++) {
        if (e->desc_type != type)
            continue;
        struct rgpu_cudnn_answer *a = &w->a[w->n++];
        *a = (struct rgpu_cudnn_answer){ .node = node, .attr = e->attr, .type = e->type,
                                         .requested = e->max };
        a->null_status = REAL(cudnnBackendGetAttribute)(
            d, (cudnnBackendAttributeName_t)e->attr, (cudnnBackendAttributeType_t)e->type, 0,
            &a->null_count, NULL);
        /* Elements are read as many as there are, up to the table's bound. */
        if (a->null_status == CUDNN_STATUS_SUCCESS && a->null_count >= 0 &&
            a->null_count < e->max)
            a->requested = a->null_count;
        if (e->type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
            describe_elements(w, d, e, a, depth);
        else
            describe_values(w, d, e, a);
    }
}

/* The description of the finalized descriptor real, of the type kept with
 * its name, into the request's buffers. */
static void describe_named(uint64_t name, cudnnBackendDescriptor_t real,
                           struct rgpu_cudnn_answer *answers, size_t max_answers,
                           size_t *nanswers, void *bytes, size_t max_bytes)
{
    uint32_t info = 0;
    struct description w = { answers, answers ? max_answers : 0, 0, bytes,
                             bytes ? max_bytes : 0, 0, 1 };
    if (real && named_find(C_NAMED, name, NULL, &info))
        describe(&w, real, (int32_t)(info & 0xffu), 0, 1);
    if (nanswers)
        *nanswers = w.n;
    /* Only what was written travels back. */
    serve_out_used(answers, w.n * sizeof *answers);
    serve_out_used(bytes, w.used);
}

cudnnStatus_t serve_rgpu_cudnn_backend_finalize(uint64_t name, struct rgpu_cudnn_answer *answers,
                                                size_t max_answers, size_t *nanswers,
                                                void *bytes, size_t max_bytes)
{
    cudnnBackendDescriptor_t real;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    if (nanswers)
        *nanswers = 0;
    int st = subject("rgpu_cudnn_backend_finalize", name, 1, &real);
    if (st)
        return st;
    st = REAL(cudnnBackendFinalize)(real);
    if (st == CUDNN_STATUS_SUCCESS && max_answers)
        describe_named(name, real, answers, max_answers, nanswers, bytes, max_bytes);
    return st;
}

cudnnStatus_t serve_rgpu_cudnn_describe(uint64_t name, struct rgpu_cudnn_answer *answers,
                                        size_t max_answers, size_t *nanswers, void *bytes,
                                        size_t max_bytes)
{
    cudnnBackendDescriptor_t real;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    if (nanswers)
        *nanswers = 0;
    int st = subject("rgpu_cudnn_describe", name, 1, &real);
    if (st)
        return st;
    describe_named(name, real, answers, max_answers, nanswers, bytes, max_bytes);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t serve_rgpu_cudnn_backend_get(uint64_t name, int64_t attr, int64_t type,
                                           int64_t requested, int64_t *count, int array,
                                           const uint64_t *fill, size_t nfill, void *values,
                                           size_t size)
{
    static const char what[] = "rgpu_cudnn_backend_get";
    cudnnBackendDescriptor_t real, *reals = NULL;
    uint32_t esize = type_size(type);
    uint64_t none = 0;          /* an array of no elements: cuDNN writes none */
    void *arg = NULL;
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    int st = subject(what, name, 1, &real);
    if (st)
        return st;
    if (array && requested <= 0) {
        arg = &none;
    } else if (array && type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        if (nfill != (uint64_t)requested || !fill)
            return CUDNN_STATUS_BAD_PARAM;
        if (!(reals = calloc(nfill, sizeof *reals)))
            return CUDNN_STATUS_ALLOC_FAILED;
        st = translate_names(what, fill, nfill, reals);
        arg = reals;
    } else if (array) {
        /* cuDNN writes at most requested elements: exactly what came. */
        if (!esize || !values || size % esize || size / esize != (uint64_t)requested)
            return CUDNN_STATUS_BAD_PARAM;
        arg = values;
    }
    if (st == 0)
        st = REAL(cudnnBackendGetAttribute)(real, (cudnnBackendAttributeName_t)attr,
                                            (cudnnBackendAttributeType_t)type, requested,
                                            count, arg);
    free(reals);
    return st;
}

/* ---- a variant pack made, run and destroyed ------------------------------------- */

/* An attribute of a variant pack: a name of a pack's, a type of known
 * size, and count elements lying within the request's nbytes. */
static int attr_ok(const struct rgpu_cudnn_pack_attr *a, size_t nbytes)
{
    uint32_t size = type_size(a->type);
    return rgpu_cudnn_is_pack_attribute(a->name) && size && a->count >= 0 &&
           a->offset <= nbytes && (uint64_t)a->count <= (nbytes - a->offset) / size;
}

/* Values of by-value tensors: each for an element of the data pointers,
 * of a size that fits its slot. */
static int values_ok(const struct rgpu_cudnn_value *v, size_t n, int64_t npointers)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].index >= (uint64_t)(npointers > 0 ? npointers : 0) || !v[i].size ||
            v[i].size > RGPU_CUDNN_VALUE_MAX)
            return 0;
    return 1;
}

static const struct rgpu_cudnn_pack_attr *data_pointers(const struct rgpu_cudnn_pack_attr *a,
                                                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
            a[i].type == CUDNN_TYPE_VOID_PTR)
            return &a[i];
    return NULL;
}

/* Whether data pointer element k stands for a by-value tensor. */
static int by_value_index(const struct rgpu_cudnn_value *v, size_t n, uint64_t k)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].index == k)
            return 1;
    return 0;
}

/* Device pointers of the pack (data, workspace, intermediates) must be the
 * session's own memory; NULL is cuDNN's business.  Data pointers of
 * by-value tensors are rgpud's own slots, set after this check. */
static int pack_pointers_owned(const struct rgpu_cudnn_pack_attr *a, const char *bytes,
                               const struct rgpu_cudnn_value *values, size_t nvalues)
{
    if (a->type != CUDNN_TYPE_VOID_PTR)
        return 1;
    int data = a->name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS;
    for (int64_t i = 0; i < a->count; i++) {
        uint64_t p;
        memcpy(&p, bytes + a->offset + (uint64_t)i * sizeof p, sizeof p);
        if (data && by_value_index(values, nvalues, (uint64_t)i))
            continue;
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

/* The handle is the session's (the codec checked it by its type); the plan
 * is looked up by name; every attribute, value and pointer is checked
 * here.  The pack's bytes are copied so that the by-value tensors' data
 * pointers can name rgpud's slots holding their values: cuDNN reads a
 * scalar there, at most RGPU_CUDNN_VALUE_MAX bytes whatever the client
 * claimed its size to be. */
cudnnStatus_t serve_rgpu_cudnn_execute(cudnnHandle_t handle, uint64_t plan,
                                       const struct rgpu_cudnn_pack_attr *attrs, size_t nattrs,
                                       const void *bytes, size_t nbytes,
                                       const struct rgpu_cudnn_value *values, size_t nvalues)
{
    enum { MAX_ATTRS = 8 };
    cudnnBackendDescriptor_t real;
    if (nattrs > MAX_ATTRS || (nattrs && !attrs) || nvalues > RGPU_CUDNN_VALUES_MAX ||
        (nvalues && !values))
        return serve_transport(RGPU_EPROTO);
    for (size_t i = 0; i < nattrs; i++)
        if (!attr_ok(&attrs[i], nbytes))
            return serve_transport(RGPU_EPROTO);
    const struct rgpu_cudnn_pack_attr *ptrs = data_pointers(attrs, nattrs);
    if (!values_ok(values, nvalues, ptrs ? ptrs->count : 0))
        return serve_transport(RGPU_EPROTO);
    if (!backend_present())
        return serve_transport(RGPU_ENOSYM);
    int st = subject("rgpu_cudnn_execute", plan, 1, &real);
    if (st)
        return st;
    if (!real)
        return CUDNN_STATUS_BAD_PARAM;
    for (size_t i = 0; i < nattrs; i++) {
        if (!pack_pointers_owned(&attrs[i], bytes, values, nvalues)) {
            rgpu_warn("rgpu_cudnn_execute: refused a variant pack pointer outside the "
                      "session's memory");
            return CUDNN_STATUS_BAD_PARAM;
        }
    }
    char *copy = malloc(nbytes ? nbytes : 1);
    unsigned char(*slots)[RGPU_CUDNN_VALUE_MAX] = calloc(nvalues ? nvalues : 1, sizeof *slots);
    if (!copy || !slots) {
        free(copy);
        free(slots);
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    if (nbytes)
        memcpy(copy, bytes, nbytes);
    for (size_t i = 0; i < nvalues; i++) {
        uint64_t p = (uint64_t)(uintptr_t)slots[i];
        memcpy(slots[i], values[i].bytes, values[i].size);
        memcpy(copy + ptrs->offset + values[i].index * sizeof p, &p, sizeof p);
    }
    st = run_pack(handle, real, attrs, nattrs, copy);
    free(slots);
    free(copy);
    return st;
}
