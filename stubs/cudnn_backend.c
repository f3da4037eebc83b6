/* cuDNN's backend (graph) API: descriptors as client objects.
 *
 * cudnn-frontend, and PyTorch through it, builds a graph for every new
 * convolution or attention shape: tensors, operations, the operation graph,
 * heuristics, dozens of engine configs and engines, forty-four knob choices
 * per plan, the plan; then destroys most of it.  Each call waited for the
 * server when descriptors lived there: thousands of round trips before a
 * ResNet's first training step.
 *
 * Here every descriptor is an object of the client, and its address is its
 * name on the wire (codegen/cudnn_own.h): rgpud maps the name to the real
 * descriptor it makes (daemon/cudnn_backend.c), so a create needs no reply.
 * Nor does a destroy of a descriptor this process holds, nor a set on one
 * not finalized yet whose arguments the client can check: a set that cuDNN
 * refuses anyway is reported by the next call that waits and names the
 * descriptor -- its finalize, a get, an execution of it -- which then
 * returns the set's status instead of running (docs/synchronisation.md).
 * Whatever the client cannot vouch for waits, so that cuDNN's own answer
 * comes back from the call that caused it: a descriptor it never made, a
 * set after finalize, a NULL or oversized array, a handle or descriptor
 * inside the array it does not hold.
 *
 * Gets must answer, but most need no round trip: a finalized descriptor
 * never changes, so rgpud describes one when it finalizes it (or at its
 * first get): cuDNN's answers to the gets cudnn-frontend makes of it and of
 * the descriptors cuDNN fills from it -- a heuristics' engine configs, their
 * engines and knob choices -- all in one reply (codegen/cudnn_own.h,
 * "description").  A get the description answers exactly is answered
 * here; one that fills descriptors of the program's (an engine config's
 * engine) still reaches rgpud, without waiting, and those descriptors take
 * their share of the description.  Anything else -- another attribute
 * type, fewer elements than there are, an answer that was a failure --
 * asks cuDNN and waits.
 *
 * Variant packs never leave the client: cudnnBackendExecute sends the plan
 * and the pack's record in one request (rgpu_cudnn_execute), which builds
 * the pack on the server, runs it and destroys it.  A tensor passed by
 * value (CUDNN_ATTR_TENSOR_IS_BY_VALUE: attention's scale) has a host
 * address in the pack; its bytes travel with the execution and rgpud points
 * the pack at its own copy.  Which unique ids are by value the client
 * learns from the tensors' attributes as they are set, and carries along
 * every descriptor that takes them in (an operation, its graph, heuristics,
 * the engine configs cuDNN fills from them, a plan). */
#include "rgpu_client.h"
#include "rgpu_handle_table.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cudnn_own.h"
#include "cudnn_procs.h"

#include <cudnn_graph.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)
#define MAX_PACK_ATTRS 8
#define MAX_BYVAL RGPU_CUDNN_VALUES_MAX
/* The largest attribute array a request carries. */
#define MAX_ARRAY_BYTES RGPU_COPY_CHUNK

uint32_t rgpu_cudnn_type_size(int type);
int rgpu_cudnn_is_pack_attribute(int64_t name);
uint32_t rgpu_cudnn_value_size(int dtype);
const struct rgpu_cudnn_described *rgpu_cudnn_described_attr(size_t i);
int rgpu_cudnn_is_described(int desc_type, int64_t attr);

struct pack_attr {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t count;
    void *bytes;
};

struct variant_pack {
    unsigned n;
    struct pack_attr attr[MAX_PACK_ATTRS];
};

/* Tensors passed by value that a descriptor's graph holds: unique id and
 * bytes of the value (0: a size the client cannot tell). */
struct byval {
    unsigned n;
    int overflow;               /* more than MAX_BYVAL: some are missing */
    struct {
        int64_t uid;
        uint32_t size;
    } e[MAX_BYVAL];
};

/* What a tensor's attributes said, as far as by-value tensors need. */
struct tensor_facts {
    int64_t uid, elements;
    int32_t dtype;
    uint8_t by_value, has_uid, has_dtype;
};

/* What rgpud read of a finalized descriptor and of those cuDNN fills from
 * it, shared by the program's descriptors that hold that content, each at
 * its node. */
struct description {
    unsigned refs;
    size_t n, nbytes;
    struct rgpu_cudnn_answer *a;
    unsigned char *bytes;
};

struct desc {
    cudnnBackendDescriptorType_t type;
    int finalized;              /* a finalize succeeded, or cuDNN filled it */
    struct variant_pack pack;   /* variant packs: their attributes */
    struct tensor_facts tensor; /* tensors */
    struct byval byval;         /* every other kind */
    struct description *descr;  /* its content's answers, or NULL */
    int32_t node;
};

/* The objects alive in this process; their fields are guarded by `lock`
 * (network calls are made without it: they need only the name). */
static struct rgpu_handle_table objects = RGPU_HANDLE_TABLE_INIT(NULL);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t object_class, cudnn_handle_class;

__attribute__((constructor)) static void classes_init(void)
{
    object_class = rgpu_handle_class("cudnn backend descriptor object");
    cudnn_handle_class = rgpu_handle_class("cudnnContext");
}

static uint64_t name_of(cudnnBackendDescriptor_t d)
{
    return (uint64_t)(uintptr_t)d;
}

/* The object d names, or NULL (NULL, garbage, destroyed). */
static struct desc *held(cudnnBackendDescriptor_t d)
{
    return rgpu_htab_get(&objects, object_class, name_of(d), NULL) ? (struct desc *)d : NULL;
}

static int is_pack(const struct desc *o)
{
    return o->type == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR;
}

static void pack_free(struct variant_pack *p)
{
    for (unsigned i = 0; i < p->n; i++)
        free(p->attr[i].bytes);
}

/* The calls that may go without waiting go without it when the mode allows
 * (RGPU_SYNC=blocking and outstanding host functions do not). */
static int may_defer(void)
{
    return rgpu_may_skip_reply();
}

/* ---- by-value tensors ------------------------------------------------------------ */

static void byval_add(struct byval *b, int64_t uid, uint32_t size)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->e[i].uid == uid) {
            b->e[i].size = size;
            return;
        }
    if (b->n == MAX_BYVAL) {
        b->overflow = 1;
        return;
    }
    b->e[b->n].uid = uid;
    b->e[b->n++].size = size;
}

static void byval_merge(struct byval *into, const struct byval *from)
{
    for (unsigned i = 0; i < from->n; i++)
        byval_add(into, from->e[i].uid, from->e[i].size);
    into->overflow |= from->overflow;
}

/* The by-value tensors a descriptor brings into another one that takes it
 * as an attribute: a tensor itself, when it is one. */
static void byval_of(const struct desc *o, struct byval *out)
{
    memset(out, 0, sizeof *out);
    if (o->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
        *out = o->byval;
        return;
    }
    const struct tensor_facts *t = &o->tensor;
    if (!t->by_value || !t->has_uid)
        return;
    uint32_t esize = t->has_dtype ? rgpu_cudnn_value_size(t->dtype) : 0;
    uint64_t size = (uint64_t)esize * (uint64_t)t->elements;
    byval_add(out, t->uid, esize && size <= RGPU_CUDNN_VALUE_MAX ? (uint32_t)size : 0);
}

/* The size of uid's value among plan's by-value tensors: 1 with *size, or 0. */
static int byval_find(const struct byval *b, int64_t uid, uint32_t *size)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->e[i].uid == uid) {
            *size = b->e[i].size;
            return 1;
        }
    return 0;
}

static int64_t elements_of(const int64_t *dims, int64_t n)
{
    int64_t total = 1;
    for (int64_t i = 0; i < n; i++) {
        if (dims[i] <= 0 || total > INT64_MAX / dims[i])
            return INT64_MAX;       /* no value of that size is passed by value */
        total *= dims[i];
    }
    return total;
}

/* With the lock held: what a set that went through tells about o.  A
 * tensor's facts; for descriptor attributes, the by-value tensors the
 * elements bring (a union: setting an attribute twice keeps both, which
 * only ever names more candidates, each still checked at execution). */
static void note_set(struct desc *o, cudnnBackendAttributeName_t attr,
                     cudnnBackendAttributeType_t type, int64_t count, const void *values)
{
    struct tensor_facts *t = &o->tensor;
    if (o->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
        if (attr == CUDNN_ATTR_TENSOR_UNIQUE_ID && type == CUDNN_TYPE_INT64 && count == 1) {
            memcpy(&t->uid, values, sizeof t->uid);
            t->has_uid = 1;
        } else if (attr == CUDNN_ATTR_TENSOR_IS_BY_VALUE && type == CUDNN_TYPE_BOOLEAN &&
                   count == 1) {
            t->by_value = *(const uint8_t *)values != 0;
        } else if (attr == CUDNN_ATTR_TENSOR_DATA_TYPE && type == CUDNN_TYPE_DATA_TYPE &&
                   count == 1) {
            memcpy(&t->dtype, values, sizeof t->dtype);
            t->has_dtype = 1;
        } else if (attr == CUDNN_ATTR_TENSOR_DIMENSIONS && type == CUDNN_TYPE_INT64) {
            t->elements = elements_of(values, count);
        }
        return;
    }
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
        return;
    const cudnnBackendDescriptor_t *elems = values;
    for (int64_t i = 0; i < count; i++) {
        const struct desc *e = held(elems[i]);
        struct byval b;
        if (!e)
            continue;
        byval_of(e, &b);
        byval_merge(&o->byval, &b);
    }
}

/* With the lock held (or before o is shared). */
static void reset_facts(struct desc *o)
{
    o->finalized = 0;
    memset(&o->tensor, 0, sizeof o->tensor);
    o->tensor.elements = 1;
    memset(&o->byval, 0, sizeof o->byval);
}

/* ---- descriptions ------------------------------------------------------------------ */

static void descr_release(struct description *d)
{
    if (d && --d->refs == 0) {
        free(d->a);
        free(d->bytes);
        free(d);
    }
}

/* With the lock held: o's content is d's node (NULL: unknown). */
static void descr_set(struct desc *o, struct description *d, int32_t node)
{
    if (d)
        d->refs++;
    descr_release(o->descr);
    o->descr = d;
    o->node = node;
}

/* The room offered for a description of a descriptor of this type (only
 * what it takes comes back): a heuristics' holds up to 128 engine configs
 * with their engines and knob choices, a few thousand answers; any other
 * one a config at most (its engine and up to 44 knob choices). */
static void descr_room(cudnnBackendDescriptorType_t type, size_t *answers, size_t *bytes)
{
    *answers = *bytes = 0;
    if (type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR) {
        *answers = 8192;
        *bytes = 65536;
        return;
    }
    for (size_t i = 0; rgpu_cudnn_described_attr(i); i++)
        if (rgpu_cudnn_described_attr(i)->desc_type == (int32_t)type) {
            *answers = 256;
            *bytes = 4096;
        }
}

/* The bytes the answers of a description use (those the client reads). */
static size_t bytes_used(const struct rgpu_cudnn_answer *a, size_t n, size_t nbytes)
{
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t esize = rgpu_cudnn_type_size(a[i].type);
        int values = esize && a[i].type != CUDNN_TYPE_BACKEND_DESCRIPTOR &&
                     a[i].status == CUDNN_STATUS_SUCCESS && a[i].count > 0;
        if (!values || a[i].at > nbytes || (uint64_t)a[i].count > (nbytes - a[i].at) / esize)
            continue;
        uint64_t end = a[i].at + (uint64_t)a[i].count * esize;
        used = end > used ? (size_t)end : used;
    }
    return used;
}

/* A description of n answers from buffers the call filled (taken over and
 * cut to what they hold), with one reference, the caller's. */
static struct description *descr_new(struct rgpu_cudnn_answer *a, size_t n, unsigned char *bytes,
                                      size_t nbytes)
{
    struct description *d = n ? calloc(1, sizeof *d) : NULL;
    if (!d) {
        free(a);
        free(bytes);
        return NULL;
    }
    size_t used = bytes_used(a, n, nbytes);
    struct rgpu_cudnn_answer *cut = realloc(a, n * sizeof *a);
    unsigned char *kept = used ? realloc(bytes, used) : NULL;
    if (!used)
        free(bytes);
    else if (!kept)
        kept = bytes;       /* not cut: still holds them */
    *d = (struct description){ 1, n, used, cut ? cut : a, kept };
    return d;
}

static const struct rgpu_cudnn_answer *descr_find(const struct desc *o, int64_t attr)
{
    const struct description *d = o->descr;
    for (size_t i = 0; d && i < d->n; i++)
        if (d->a[i].node == o->node && d->a[i].attr == attr)
            return &d->a[i];
    return NULL;
}

static const struct rgpu_cudnn_described *described(cudnnBackendDescriptorType_t type,
                                                     int64_t attr)
{
    const struct rgpu_cudnn_described *e;
    for (size_t i = 0; (e = rgpu_cudnn_described_attr(i)) != NULL; i++)
        if (e->desc_type == (int32_t)type && e->attr == attr)
            return e;
    return NULL;
}

static int32_t child_type(cudnnBackendDescriptorType_t type, int64_t attr)
{
    const struct rgpu_cudnn_described *e = described(type, attr);
    return e ? e->child : -1;
}

/* Whether rgpud's read saw every element of the attribute: it asked for
 * more than came, the count query said as many, or the attribute holds one
 * value (read as one, whatever a count query says). */
static int read_whole(const struct desc *o, const struct rgpu_cudnn_answer *a)
{
    const struct rgpu_cudnn_described *e = described(o->type, a->attr);
    return a->count < a->requested ||
           (a->null_status == CUDNN_STATUS_SUCCESS && a->null_count == a->count) ||
           (e && e->max == 1 && a->requested == 1);
}

enum { NOT_HERE, ANSWERED, FILLED };

/* With the lock held: the elements of a descriptor attribute the program
 * gave are descriptors of the child's type it holds (cuDNN then fills the
 * first a->count): each takes its node of the description. */
static int fill_here(struct desc *o, const struct rgpu_cudnn_answer *a, int64_t requested,
                     const cudnnBackendDescriptor_t *elems)
{
    int32_t child = child_type(o->type, a->attr);
    if (a->at == RGPU_CUDNN_UNDESCRIBED || a->at + (uint64_t)a->count > INT32_MAX)
        return NOT_HERE;
    for (int64_t i = 0; i < requested; i++) {
        const struct desc *c = held(elems[i]);
        if (!c || is_pack(c) || (int32_t)c->type != child)
            return NOT_HERE;
    }
    for (int64_t i = 0; i < a->count; i++) {
        struct desc *c = held(elems[i]);
        descr_set(c, o->descr, (int32_t)(a->at + (uint64_t)i));
        c->finalized = 1;
        c->byval = o->byval;
    }
    return FILLED;
}

/* With the lock held: answer a get of o from its description when the
 * description holds cuDNN's exact answer -- same attribute type, no fewer
 * elements asked than there are, an answer that succeeded.  FILLED: the
 * program's descriptors must still be filled by rgpud (may_fill: that can
 * go without waiting). */
static int answer_here(struct desc *o, int64_t attr, int64_t type, int64_t requested,
                       int64_t *count, void *array, int may_fill)
{
    const struct rgpu_cudnn_answer *a = descr_find(o, attr);
    uint32_t esize = rgpu_cudnn_type_size((int)type);
    if (!a || a->type != type || requested < 0 || !esize)
        return NOT_HERE;
    if (!array) {
        if (a->null_status != CUDNN_STATUS_SUCCESS)
            return NOT_HERE;
        if (count)
            *count = a->null_count;
        return ANSWERED;
    }
    if (a->status != CUDNN_STATUS_SUCCESS || a->count < 0 || requested < a->count ||
        !read_whole(o, a))
        return NOT_HERE;
    int rc = ANSWERED;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        rc = may_fill ? fill_here(o, a, requested, array) : NOT_HERE;
    else if (a->at > o->descr->nbytes || (uint64_t)a->count > (o->descr->nbytes - a->at) / esize)
        rc = NOT_HERE;
    else if (a->count)
        memcpy(array, o->descr->bytes + a->at, (size_t)a->count * esize);
    if (rc != NOT_HERE && count)
        *count = a->count;
    return rc;
}

/* ---- create, destroy, initialize ------------------------------------------------- */

/* Types this stub's headers name: any other waits for cuDNN's verdict. */
static int known_type(cudnnBackendDescriptorType_t type)
{
    return (int)type >= CUDNN_BACKEND_POINTWISE_DESCRIPTOR &&
           (int)type <= CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR;
}

static cudnnStatus_t server_create(uint64_t name, cudnnBackendDescriptorType_t type,
                                   int deferred)
{
    int64_t t = (int64_t)type;
    const void *argv[] = { &name, &t, &deferred };
    return (cudnnStatus_t)rgpu_call_unwaited_when(LIB, RGPU_CUDNN_rgpu_cudnn_backend_create,
                                                  argv, deferred);
}

static cudnnStatus_t server_destroy(uint64_t name, int deferred)
{
    const void *argv[] = { &name };
    return (cudnnStatus_t)rgpu_call_unwaited_when(LIB, RGPU_CUDNN_rgpu_cudnn_backend_destroy,
                                                  argv, deferred);
}

#undef cudnnBackendCreateDescriptor
RGPU_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                       cudnnBackendDescriptor_t *descriptor)
{
    if (!descriptor)        /* cuDNN's answer to no output */
        return server_create(0, descriptorType, 0);
    struct desc *o = calloc(1, sizeof *o);
    if (!o)
        return CUDNN_STATUS_ALLOC_FAILED;
    o->type = descriptorType;
    reset_facts(o);
    if (rgpu_htab_add(&objects, object_class, name_of(o), 0) < 0) {
        free(o);
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    cudnnStatus_t rc = CUDNN_STATUS_SUCCESS;
    if (!is_pack(o))
        rc = server_create(name_of(o), descriptorType, known_type(descriptorType) && may_defer());
    if (rc != CUDNN_STATUS_SUCCESS) {
        rgpu_htab_remove(&objects, object_class, name_of(o));
        free(o);
        return rc;
    }
    *descriptor = (cudnnBackendDescriptor_t)o;
    return CUDNN_STATUS_SUCCESS;
}

/* Sent before the object is freed: its address, reused by a later create,
 * reaches rgpud after this destroy (rgpud runs every request after those
 * sent without waiting before it). */
#undef cudnnBackendDestroyDescriptor
RGPU_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    pthread_mutex_lock(&lock);
    struct desc *o = held(descriptor);
    if (o)
        rgpu_htab_remove(&objects, object_class, name_of(o));
    pthread_mutex_unlock(&lock);
    if (!o)     /* NULL or not ours: cuDNN's or rgpud's answer, at once */
        return server_destroy(name_of(descriptor), 0);
    cudnnStatus_t rc = CUDNN_STATUS_SUCCESS;
    if (is_pack(o))
        pack_free(&o->pack);
    else
        rc = server_destroy(name_of(o), may_defer());
    pthread_mutex_lock(&lock);
    descr_set(o, NULL, 0);
    pthread_mutex_unlock(&lock);
    free(o);
    return rc;
}

#undef cudnnBackendInitialize
RGPU_EXPORT cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor)
{
    uint64_t name = name_of(descriptor);
    const void *argv[] = { &name };
    pthread_mutex_lock(&lock);
    struct desc *o = held(descriptor);
    if (o && is_pack(o)) {
        pack_free(&o->pack);
        memset(&o->pack, 0, sizeof o->pack);
        o->finalized = 0;
    }
    pthread_mutex_unlock(&lock);
    if (o && is_pack(o))
        return CUDNN_STATUS_SUCCESS;
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call_waiting(
        LIB, RGPU_CUDNN_rgpu_cudnn_backend_initialize, argv);
    pthread_mutex_lock(&lock);
    if (rc == CUDNN_STATUS_SUCCESS && (o = held(descriptor)) != NULL) {
        reset_facts(o);
        descr_set(o, NULL, 0);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- set ----------------------------------------------------------------------------- */

static cudnnStatus_t pack_set(struct variant_pack *p, int finalized,
                              cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t count,
                              const void *elements)
{
    uint32_t size = rgpu_cudnn_type_size((int)type);
    if (finalized)
        return CUDNN_STATUS_NOT_INITIALIZED;    /* cuDNN: set after finalize */
    if (!rgpu_cudnn_is_pack_attribute(name) || !size || count < 0 || (count && !elements) ||
        (uint64_t)count > RGPU_COPY_CHUNK / size)
        return CUDNN_STATUS_BAD_PARAM;
    unsigned i = 0;
    while (i < p->n && p->attr[i].name != name)
        i++;
    if (i == MAX_PACK_ATTRS)
        return CUDNN_STATUS_BAD_PARAM;
    void *copy = malloc(count ? (size_t)count * size : 1);
    if (!copy)
        return CUDNN_STATUS_ALLOC_FAILED;
    if (count)
        memcpy(copy, elements, (size_t)count * size);
    if (i == p->n)
        p->n++;
    else
        free(p->attr[i].bytes);
    p->attr[i] = (struct pack_attr){ name, type, count, copy };
    return CUDNN_STATUS_SUCCESS;
}

/* With the lock held: whether every element of the array is one the client
 * can vouch for -- descriptors it holds (not variant packs, which rgpud
 * never sees), cuDNN handles it was handed.  Pointers are left to rgpud. */
static int elements_known(cudnnBackendAttributeType_t type, int64_t count, const void *values)
{
    const uint64_t *v = values;
    for (int64_t i = 0; i < count; i++) {
        const struct desc *e;
        if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
            (!(e = held((cudnnBackendDescriptor_t)(uintptr_t)v[i])) || is_pack(e)))
            return 0;
        if (type == CUDNN_TYPE_HANDLE && !rgpu_handle_known(cudnn_handle_class, v[i]))
            return 0;
        if (type == CUDNN_TYPE_VOID_PTR)
            return 0;
    }
    return 1;
}

#undef cudnnBackendSetAttribute
RGPU_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t elementCount,
                                                   const void *arrayOfElements)
{
    static int logged;
    uint32_t esize = rgpu_cudnn_type_size((int)attributeType);
    int sized = esize && elementCount > 0 && arrayOfElements;
    if (sized && (uint64_t)elementCount > MAX_ARRAY_BYTES / esize)
        return (cudnnStatus_t)rgpu_refused(LIB, "cudnnBackendSetAttribute",
                                           "an attribute array larger than a request carries",
                                           &logged);
    uint64_t name = name_of(descriptor);
    int64_t attr = attributeName, type = attributeType;
    size_t size = sized ? (size_t)elementCount * esize : 0;
    const void *values = sized ? arrayOfElements : NULL;

    pthread_mutex_lock(&lock);
    struct desc *o = held(descriptor);
    if (o && is_pack(o)) {
        cudnnStatus_t rc = pack_set(&o->pack, o->finalized, attributeName, attributeType,
                                    elementCount, arrayOfElements);
        pthread_mutex_unlock(&lock);
        return rc;
    }
    /* cuDNN refuses a set after finalize, and checks the array at once:
     * those wait for its answer.  Whatever it says, the content may be new:
     * the description goes. */
    int deferred = o && !o->finalized && sized && may_defer() &&
                   elements_known(attributeType, elementCount, arrayOfElements);
    if (o)
        descr_set(o, NULL, 0);
    pthread_mutex_unlock(&lock);

    const void *argv[] = { &name, &attr, &type, &elementCount, &values, &size, &deferred };
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call_unwaited_when(
        LIB, RGPU_CUDNN_rgpu_cudnn_backend_set, argv, deferred);
    if (rc == CUDNN_STATUS_SUCCESS && o) {
        pthread_mutex_lock(&lock);
        if (held(descriptor) == o)
            note_set(o, attributeName, attributeType, elementCount, arrayOfElements);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

/* ---- finalize, get ------------------------------------------------------------------- */

/* The checks cuDNN makes when a pack is finalized: as many pointers as
 * unique ids. */
static int64_t attr_count(const struct variant_pack *p, cudnnBackendAttributeName_t name)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->attr[i].name == name)
            return p->attr[i].count;
    return 0;
}

#undef cudnnBackendFinalize
RGPU_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    uint64_t name = name_of(descriptor);
    pthread_mutex_lock(&lock);
    struct desc *o = held(descriptor);
    if (o && is_pack(o)) {
        cudnnStatus_t rc = attr_count(&o->pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) ==
                                   attr_count(&o->pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)
                               ? CUDNN_STATUS_SUCCESS
                               : CUDNN_STATUS_BAD_PARAM;
        if (rc == CUDNN_STATUS_SUCCESS)
            o->finalized = 1;
        pthread_mutex_unlock(&lock);
        return rc;
    }
    cudnnBackendDescriptorType_t type = o ? o->type : CUDNN_BACKEND_POINTWISE_DESCRIPTOR;
    pthread_mutex_unlock(&lock);
    /* With the description of what it finalized, for the gets to come. */
    size_t max_answers = 0, max_bytes = 0, n = 0;
    if (o)
        descr_room(type, &max_answers, &max_bytes);
    struct rgpu_cudnn_answer *answers = max_answers ? calloc(max_answers, sizeof *answers) : NULL;
    unsigned char *bytes = answers ? calloc(max_bytes ? max_bytes : 1, 1) : NULL;
    if (!bytes) {
        free(answers);
        answers = NULL;
        max_answers = max_bytes = 0;
    }
    size_t *nanswers = &n;
    const void *argv[] = { &name, &answers, &max_answers, &nanswers, &bytes, &max_bytes };
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call_waiting(
        LIB, RGPU_CUDNN_rgpu_cudnn_backend_finalize, argv);
    struct description *d = rc == CUDNN_STATUS_SUCCESS && n <= max_answers
                                ? descr_new(answers, n, bytes, max_bytes)
                                : (free(answers), free(bytes), NULL);
    pthread_mutex_lock(&lock);
    if (rc == CUDNN_STATUS_SUCCESS && o && held(descriptor) == o) {
        o->finalized = 1;
        descr_set(o, d, 0);
    }
    descr_release(d);       /* o holds its own reference */
    pthread_mutex_unlock(&lock);
    return rc;
}

static cudnnStatus_t pack_get(const struct variant_pack *p, cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t requested,
                              int64_t *count, void *array)
{
    for (unsigned i = 0; i < p->n; i++) {
        const struct pack_attr *a = &p->attr[i];
        if (a->name != name)
            continue;
        if (a->type != type || requested < 0)
            return CUDNN_STATUS_BAD_PARAM;
        int64_t n = requested < a->count ? requested : a->count;
        if (count)
            *count = a->count;
        if (n && array)
            memcpy(array, a->bytes, (size_t)n * rgpu_cudnn_type_size((int)a->type));
        return CUDNN_STATUS_SUCCESS;
    }
    if (count)
        *count = 0;
    return rgpu_cudnn_is_pack_attribute(name) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

/* With the lock held: descriptors cuDNN filled from parent (an engine config
 * of heuristics, an engine of a config) are finalized, and belong to the
 * same graph: its by-value tensors. */
static void note_filled(const struct desc *parent, const cudnnBackendDescriptor_t *filled,
                        int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        struct desc *c = held(filled[i]);
        if (!c || is_pack(c))
            continue;
        c->finalized = 1;
        c->byval = parent ? parent->byval : (struct byval){ 0 };
    }
}

/* The description of descriptor d, which this process holds and knows
 * finalized, asked of rgpud for a get it cannot answer yet. */
static void describe_held(cudnnBackendDescriptor_t d, cudnnBackendDescriptorType_t type)
{
    uint64_t name = name_of(d);
    size_t max_answers, max_bytes, n = 0, *nanswers = &n;
    descr_room(type, &max_answers, &max_bytes);
    struct rgpu_cudnn_answer *answers = calloc(max_answers ? max_answers : 1, sizeof *answers);
    unsigned char *bytes = calloc(max_bytes ? max_bytes : 1, 1);
    const void *argv[] = { &name, &answers, &max_answers, &nanswers, &bytes, &max_bytes };
    struct description *descr = NULL;
    if (answers && bytes &&
        rgpu_call_waiting(LIB, RGPU_CUDNN_rgpu_cudnn_describe, argv) == CUDNN_STATUS_SUCCESS &&
        n <= max_answers) {
        descr = descr_new(answers, n, bytes, max_bytes);
        answers = NULL;
        bytes = NULL;
    }
    free(answers);
    free(bytes);
    pthread_mutex_lock(&lock);
    struct desc *o = held(d);
    if (o && !o->descr)
        descr_set(o, descr, 0);
    descr_release(descr);
    pthread_mutex_unlock(&lock);
}

/* cuDNN fills the descriptors the description answered for: rgpud runs the
 * get without a reply (the program already has its answer). */
static cudnnStatus_t fill_unwaited(uint64_t name, int64_t attr, int64_t requested,
                                   const void *fill)
{
    int64_t type = CUDNN_TYPE_BACKEND_DESCRIPTOR, *count = NULL;
    int array = 1;
    size_t nfill = (size_t)requested, size = 0;
    void *values = NULL;
    const void *argv[] = { &name, &attr, &type, &requested, &count, &array,
                           &fill, &nfill, &values, &size };
    return (cudnnStatus_t)rgpu_call_unwaited_when(LIB, RGPU_CUDNN_rgpu_cudnn_backend_get, argv, 1);
}

/* A get of a descriptor this process holds, answered here when its
 * description can: NOT_HERE, ANSWERED, or FILLED (the fill to send). */
static int get_here(cudnnBackendDescriptor_t descriptor, int64_t attr, int64_t type,
                    int64_t requested, int64_t *count, void *array)
{
    int rc = NOT_HERE, ask = 0;
    cudnnBackendDescriptorType_t dtype = CUDNN_BACKEND_POINTWISE_DESCRIPTOR;
    for (int tries = 0; tries < 2 && rc == NOT_HERE; tries++) {
        if (tries && ask)
            describe_held(descriptor, dtype);
        else if (tries)
            break;
        pthread_mutex_lock(&lock);
        struct desc *o = held(descriptor);
        if (o && !is_pack(o)) {
            rc = answer_here(o, attr, type, requested, count, array, may_defer());
            /* No answer yet for what a description holds: ask for one. */
            ask = rc == NOT_HERE && !o->descr && o->finalized &&
                  rgpu_cudnn_is_described((int)o->type, attr);
            dtype = o->type;
        }
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

#undef cudnnBackendGetAttribute
RGPU_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t requestedElementCount,
                                                   int64_t *elementCount, void *arrayOfElements)
{
    static int logged;
    uint32_t esize = rgpu_cudnn_type_size((int)attributeType);
    int descriptors = attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR;
    int sized = esize && arrayOfElements && requestedElementCount > 0;
    if (sized && (uint64_t)requestedElementCount > MAX_ARRAY_BYTES / esize)
        return (cudnnStatus_t)rgpu_refused(LIB, "cudnnBackendGetAttribute",
                                           "an attribute array larger than a request carries",
                                           &logged);
    pthread_mutex_lock(&lock);
    struct desc *o = held(descriptor);
    if (o && is_pack(o)) {
        cudnnStatus_t rc = pack_get(&o->pack, attributeName, attributeType,
                                    requestedElementCount, elementCount, arrayOfElements);
        pthread_mutex_unlock(&lock);
        return rc;
    }
    pthread_mutex_unlock(&lock);

    uint64_t name = name_of(descriptor);
    int64_t attr = attributeName, type = attributeType;
    switch (o ? get_here(descriptor, attr, type, requestedElementCount, elementCount,
                         arrayOfElements)
              : NOT_HERE) {
    case ANSWERED:
        return CUDNN_STATUS_SUCCESS;
    case FILLED:
        return fill_unwaited(name, attr, requestedElementCount, arrayOfElements);
    }

    /* The count is always asked for (cuDNN takes NULL or not alike): the
     * descriptors it filled are known by it. */
    int64_t n = elementCount ? *elementCount : 0, *count = &n;
    int array = arrayOfElements != NULL;
    /* Descriptors to fill travel as names, in; other values both ways, so
     * that elements cuDNN does not write keep the program's. */
    const void *fill = sized && descriptors ? arrayOfElements : NULL;
    size_t nfill = fill ? (size_t)requestedElementCount : 0;
    void *values = sized && !descriptors ? arrayOfElements : NULL;
    size_t size = values ? (size_t)requestedElementCount * esize : 0;
    const void *argv[] = { &name, &attr, &type, &requestedElementCount, &count, &array,
                           &fill, &nfill, &values, &size };
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call_waiting(
        LIB, RGPU_CUDNN_rgpu_cudnn_backend_get, argv);
    if (elementCount)
        *elementCount = n;
    if (rc == CUDNN_STATUS_SUCCESS && fill) {
        pthread_mutex_lock(&lock);
        note_filled(held(descriptor), fill, n < requestedElementCount ? n : requestedElementCount);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

/* ---- execute: the plan and the pack's record in one request ------------------------ */

/* Whether p is memory on the GPU as the client knows it (allocated,
 * mapped or managed): a by-value tensor's address never is. */
static int device_memory(uint64_t p)
{
    int kind = rgpu_ranges_find(p, NULL, NULL);
    return kind == RGPU_RANGE_DEVICE || kind == RGPU_RANGE_MAPPED || kind == RGPU_RANGE_MANAGED;
}

static const struct pack_attr *pack_attr(const struct variant_pack *p,
                                         cudnnBackendAttributeName_t name,
                                         cudnnBackendAttributeType_t type)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->attr[i].name == name && p->attr[i].type == type)
            return &p->attr[i];
    return NULL;
}

/* The values of the pack's by-value tensors, read from the host addresses
 * the program gave (cuDNN reads them there natively), into values (room
 * for max); returns how many.  A host address whose unique id is no
 * by-value tensor of the plan goes as it is, and rgpud refuses it. */
static size_t by_value_values(const struct variant_pack *p, const struct byval *plan,
                              struct rgpu_cudnn_value *values, size_t max)
{
    static int logged;
    const struct pack_attr *uids = pack_attr(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                             CUDNN_TYPE_INT64);
    const struct pack_attr *ptrs = pack_attr(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                             CUDNN_TYPE_VOID_PTR);
    size_t n = 0;
    if (!uids || !ptrs)
        return 0;
    for (int64_t i = 0; i < uids->count && i < ptrs->count && n < max; i++) {
        int64_t uid;
        uint64_t ptr;
        uint32_t size = 0;
        memcpy(&uid, (const char *)uids->bytes + i * 8, 8);
        memcpy(&ptr, (const char *)ptrs->bytes + i * 8, 8);
        if (!ptr || device_memory(ptr))
            continue;
        if (!byval_find(plan, uid, &size) || !size) {
            if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
                rgpu_warn("cudnnBackendExecute: the variant pack's pointer for unique id %lld "
                          "is no device memory, and the plan has no by-value tensor of that "
                          "id whose size rgpu knows%s: rgpud will refuse it (logged once)",
                          (long long)uid, plan->overflow ? " (it has too many to track)" : "");
            continue;
        }
        values[n] = (struct rgpu_cudnn_value){ .index = (uint64_t)i, .size = size };
        memcpy(values[n].bytes, (const void *)(uintptr_t)ptr, size);
        n++;
    }
    return n;
}

/* The pack's attributes as a table and one run of their bytes
 * (rgpu_cudnn_execute, codegen/cudnn_own.h), with the by-value tensors'
 * values; without waiting when the handle is one this process holds. */
static cudnnStatus_t execute_pack(cudnnHandle_t handle, uint64_t plan, const struct byval *bv,
                                  int plan_held, const struct variant_pack *p)
{
    struct rgpu_cudnn_pack_attr attrs[MAX_PACK_ATTRS];
    struct rgpu_cudnn_value values[MAX_BYVAL];
    size_t size[MAX_PACK_ATTRS], total = 0;
    for (unsigned i = 0; i < p->n; i++) {
        const struct pack_attr *a = &p->attr[i];
        size[i] = (size_t)a->count * rgpu_cudnn_type_size((int)a->type);
        attrs[i] = (struct rgpu_cudnn_pack_attr){ a->name, a->type, a->count, total };
        total += size[i];
    }
    char *bytes = malloc(total ? total : 1);
    if (!bytes)
        return CUDNN_STATUS_ALLOC_FAILED;
    for (unsigned i = 0; i < p->n; i++)
        if (size[i])
            memcpy(bytes + attrs[i].offset, p->attr[i].bytes, size[i]);
    size_t nvalues = by_value_values(p, bv, values, MAX_BYVAL);
    const struct rgpu_cudnn_pack_attr *pa = attrs;
    const struct rgpu_cudnn_value *pv = values;
    size_t nattrs = p->n;
    const void *pb = bytes;
    const void *argv[] = { &handle, &plan, &pa, &nattrs, &pb, &total, &pv, &nvalues };
    int deferred = plan_held && may_defer() &&
                   rgpu_handle_known(cudnn_handle_class, (uint64_t)(uintptr_t)handle);
    cudnnStatus_t rc = (cudnnStatus_t)rgpu_call_unwaited_when(
        LIB, RGPU_CUDNN_rgpu_cudnn_execute, argv, deferred);
    free(bytes);
    return rc;
}

#undef cudnnBackendExecute
RGPU_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                              cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack)
{
    pthread_mutex_lock(&lock);
    const struct desc *pack = held(variantPack), *plan = held(executionPlan);
    struct byval bv = plan ? plan->byval : (struct byval){ 0 };
    int plan_held = plan && !is_pack(plan);
    /* Every variant pack is the client's: anything else, or one not
     * finalized, cannot run. */
    cudnnStatus_t rc = pack && is_pack(pack) && pack->finalized ? CUDNN_STATUS_SUCCESS
                                                                : CUDNN_STATUS_BAD_PARAM;
    struct variant_pack copy = { 0 };
    if (rc == CUDNN_STATUS_SUCCESS) {
        /* The record travels after the lock is let go: its arrays are
         * the pack's own, which only this pack's calls change. */
        copy = pack->pack;
    }
    pthread_mutex_unlock(&lock);
    if (rc != CUDNN_STATUS_SUCCESS)
        return rc;
    return execute_pack(handle, name_of(executionPlan), &bv, plan_held, &copy);
}
