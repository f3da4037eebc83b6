/* cuBLASLt's matmul descriptors, matrix layouts and preferences as client
 * objects (see cublasLt_desc.h), and the server-side descriptors made from
 * them.
 *
 * PyTorch creates, sets and destroys all of them around every matmul, with
 * the same content every step: served on the server, that was ~17 round
 * trips per matmul.  Here an object is its content, kept as bytes:
 *
 *     kind (1 byte), number of create parameters (1), the parameters
 *     (int64 each), then one record per attribute set, in the order last
 *     set: id (u32), size (u32), the value's bytes.
 *
 * Attribute values are plain values in the Lt API: scalars, enums and
 * device pointers (bias, aux, scales), so the bytes are the content, except
 * for the pointers (rgpu_lt_pointer_slot): PyTorch points them at new
 * memory every step (under AMP the bias is a new cast each step), and as
 * content each step would be a new descriptor, a new heuristic query and a
 * first matmul that waits.  A pointer attribute's record holds its
 * alignment class instead (below), its value is kept beside the content,
 * and the calls that take the descriptor send the values along
 * (cublasLt_hand.c).  The alignment class is all of a pointer that can
 * decide anything before the call dereferences it: cuBLASLt's header says
 * that routines which do not dereference these pointers (the heuristics)
 * depend on their value only to determine the expected alignment.
 *
 * Checks the real library makes synchronously still happen synchronously:
 * SetAttribute of an (kind, attribute, size) not seen before is tried once
 * on the server (a descriptor with the object's create parameters and
 * that attribute, destroyed again) and remembered when accepted; cuBLASLt
 * checks the attribute id and size there, so the verdict holds for every
 * later value.  A rejection is not remembered: it is asked again.  Create
 * only fails for lack of memory, so it is answered here; anything the
 * library would only refuse when the descriptor is made (a value it
 * checks) is the status of the call that needed it made.
 *
 * GetAttribute answers what was set from the object, and asks the server's
 * descriptor of the same content otherwise (the library's default).
 *
 * Server-side descriptors are kept by content, at most CACHE_CAPACITY, the
 * least recently used destroyed first (in the request that makes new ones,
 * so that costs nothing extra).  One in use by a call is pinned until the
 * call has been sent (asynchronous) or answered: the server runs every
 * request after the no-reply requests sent before it, so a later destroy
 * never overtakes a use. */
#include "cublasLt_desc.h"
#include "content_cache.h"
#include "rgpu_client.h"
#include "rgpu_lt_pointers.h"
#include "cublasLt_own.h"
#include "cublasLt_procs.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cublasLt_lib)

/* A large model's matmuls each have their own descriptor (a bias pointer
 * per layer) and a few layouts: room for a GPT-2-sized one. */
#define CACHE_CAPACITY 1024
/* No cuBLASLt attribute is larger than 8 bytes; anything beyond this is
 * refused here, as the library refuses a size that is not its own. */
#define ATTR_MAX 256
#define MAX_PARAMS 4

/* ---- objects ---------------------------------------------------------------- */

#define MAGIC_BASE 0x4c54d000u      /* "LT" and the kind below */

struct lt_object {
    uint32_t magic;             /* MAGIC_BASE + kind while alive */
    unsigned char *content;     /* see the top of this file */
    size_t len, cap;
    /* The pointer attributes' values, by rgpu_lt_pointer_slot (matmul
     * descriptors; their records in content hold alignment classes). */
    uint64_t pointer[RGPU_LT_NPOINTERS];
};

struct attr_record {
    uint32_t id, size;
};

static struct lt_object *object_of(const void *p, enum rgpu_lt_kind kind)
{
    struct lt_object *o = (struct lt_object *)p;
    return o && o->magic == MAGIC_BASE + (uint32_t)kind ? o : NULL;
}

static size_t head_len(const unsigned char *content)
{
    return 2 + 8 * (size_t)content[1];
}

static int content_reserve(struct lt_object *o, size_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 64;
    while (cap < o->len + more)
        cap *= 2;
    unsigned char *n = realloc(o->content, cap);
    if (!n)
        return -1;
    o->content = n;
    o->cap = cap;
    return 0;
}

static int object_create(void **out, enum rgpu_lt_kind kind, const int64_t *params,
                         unsigned nparams)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct lt_object *o = calloc(1, sizeof *o);
    if (!o || content_reserve(o, 2 + 8 * (size_t)nparams) < 0) {
        free(o);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    o->content[0] = (unsigned char)kind;
    o->content[1] = (unsigned char)nparams;
    if (nparams)
        memcpy(o->content + 2, params, 8 * (size_t)nparams);
    o->len = head_len(o->content);
    o->magic = MAGIC_BASE + (uint32_t)kind;
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}

static int object_destroy(void *p, enum rgpu_lt_kind kind)
{
    struct lt_object *o = object_of(p, kind);
    if (!p)
        return CUBLAS_STATUS_SUCCESS;      /* destroying NULL is allowed */
    if (!o)
        return CUBLAS_STATUS_INVALID_VALUE;
    o->magic = 0;
    free(o->content);
    free(o);
    return CUBLAS_STATUS_SUCCESS;
}

/* Offset of attribute id's record in content[0..len), or 0 when unset. */
static size_t find_record(const unsigned char *content, size_t len, uint32_t id)
{
    struct attr_record r;
    for (size_t off = head_len(content); off < len; off += sizeof r + r.size) {
        memcpy(&r, content + off, sizeof r);
        if (r.id == id)
            return off;
    }
    return 0;
}

/* Record a value, replacing an earlier one: the record moves to the end,
 * so that replaying the records sets each attribute in the order its
 * current value was set. */
static int record_attribute(struct lt_object *o, uint32_t id, const void *buf, uint32_t size)
{
    struct attr_record r = { id, size }, old;
    if (content_reserve(o, sizeof r + size) < 0)
        return CUBLAS_STATUS_ALLOC_FAILED;
    size_t off = find_record(o->content, o->len, id);
    if (off) {
        memcpy(&old, o->content + off, sizeof old);
        size_t gone = sizeof old + old.size;
        memmove(o->content + off, o->content + off + gone, o->len - off - gone);
        o->len -= gone;
    }
    memcpy(o->content + o->len, &r, sizeof r);
    memcpy(o->content + o->len + sizeof r, buf, size);
    o->len += sizeof r + size;
    return CUBLAS_STATUS_SUCCESS;
}

/* What content keeps of a pointer: its alignment, the lowest set bit,
 * capped at 256 bytes (the largest alignment cuBLASLt's preferences
 * speak of, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and 0 for NULL. */
static uint64_t alignment_class(uint64_t p)
{
    uint64_t low = p & (~p + 1);
    return low > 256 ? 256 : low;
}

/* The slot of a pointer attribute of kind's objects, else -1. */
static int pointer_slot(enum rgpu_lt_kind kind, uint32_t attr, size_t size)
{
    return kind == RGPU_LT_MATMUL_DESC && size == sizeof(uint64_t) ? rgpu_lt_pointer_slot(attr)
                                                                   : -1;
}

unsigned lt_pointers(const void *op, uint32_t *attrs, uint64_t *values)
{
    const struct lt_object *o = object_of(op, RGPU_LT_MATMUL_DESC);
    struct attr_record r;
    unsigned n = 0;
    if (!o)
        return 0;
    for (size_t off = head_len(o->content); off < o->len; off += sizeof r + r.size) {
        memcpy(&r, o->content + off, sizeof r);
        int slot = pointer_slot(RGPU_LT_MATMUL_DESC, r.id, r.size);
        if (slot >= 0 && n < RGPU_LT_NPOINTERS) {
            attrs[n] = r.id;
            values[n++] = o->pointer[slot];
        }
    }
    return n;
}

int lt_content(const void *obj, enum rgpu_lt_kind kind, const unsigned char **bytes,
               size_t *len)
{
    const struct lt_object *o = object_of(obj, kind);
    if (!o)
        return -1;
    *bytes = o->content;
    *len = o->len;
    return 0;
}

/* ---- the materializing request --------------------------------------------- */

struct blob {
    const unsigned char *bytes;
    size_t len;
};

/* One request (rgpu_lt_materialize, codegen/cublasLt_own.h): destroy the
 * server descriptors victims[0..nvictims) and make one per
 * contents[0..n), n at least 1.  status[i] and handle[i] receive each
 * one's outcome, *deferred an earlier call's failure that the reply
 * carried.  Returns 0, or the status of a transport failure (then nothing
 * was made). */
static int materialize(struct cc_entry *const *victims, unsigned nvictims,
                       const struct blob *contents, unsigned n, int keep, int *status,
                       uint64_t *handle, int *deferred)
{
    struct rgpu_lt_victim gone[LT_MAX_USE];
    uint32_t lengths[LT_MAX_USE];
    int32_t made[LT_MAX_USE];
    unsigned char *bytes;
    size_t size = 0;

    if (n == 0 || n > LT_MAX_USE || nvictims > LT_MAX_USE)
        return CUBLAS_STATUS_INTERNAL_ERROR;
    for (unsigned i = 0; i < nvictims; i++)
        gone[i] = (struct rgpu_lt_victim){ victims[i]->key[0], victims[i]->handle };
    for (unsigned i = 0; i < n; i++)
        size += contents[i].len;
    if (!(bytes = malloc(size)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    size = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(bytes + size, contents[i].bytes, contents[i].len);
        size += contents[i].len;
        lengths[i] = (uint32_t)contents[i].len;
        /* An answer the reply did not fill stays out of range. */
        made[i] = -1;
    }
    /* Its own status is success once it ran: what it returns besides is
     * an earlier call's failure, or the transport's. */
    int rc = rgpu_lt_materialize(gone, nvictims, lengths, n, bytes, size, keep, made, handle);
    free(bytes);
    for (unsigned i = 0; i < n; i++) {
        if (made[i] < 0)
            return rc ? rc : CUBLAS_STATUS_INTERNAL_ERROR;
        status[i] = made[i];
    }
    *deferred = rc;
    return 0;
}

/* ---- server-side descriptors by content -------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct content_cache cache;      /* content -> server handle */

static int cache_ready(void)
{
    return cache.buckets || cc_init(&cache, CACHE_CAPACITY) == 0;
}

/* A 4-byte attribute of content, when set. */
static int record_i32(const unsigned char *content, size_t len, uint32_t id, int32_t *v)
{
    struct attr_record r;
    size_t off = find_record(content, len, id);
    if (!off)
        return 0;
    memcpy(&r, content + off, sizeof r);
    if (r.size != sizeof *v)
        return 0;
    memcpy(v, content + off + sizeof r, sizeof *v);
    return 1;
}

/* What decides how alpha and beta travel: the scale type (the create
 * parameter unless set) and the pointer mode (host unless set). */
static void scalar_facts(const unsigned char *content, size_t len, int32_t *scale, int32_t *mode)
{
    int64_t create_scale;
    memcpy(&create_scale, content + 2 + 8, sizeof create_scale);
    if (!record_i32(content, len, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale))
        *scale = (int32_t)create_scale;
    if (!record_i32(content, len, CUBLASLT_MATMUL_DESC_POINTER_MODE, mode))
        *mode = CUBLASLT_POINTER_MODE_HOST;
}

/* The handle class of a server-side descriptor of this kind: calls that
 * name it may go without waiting once the core knows it
 * (rgpu_handle_note). */
static uint32_t class_of(unsigned kind)
{
    return rgpu_handle_class(kind == RGPU_LT_MATMUL_DESC ? "cublasLtMatmulDescOpaque_t"
                             : kind == RGPU_LT_LAYOUT    ? "cublasLtMatrixLayoutOpaque_t"
                                                         : "cublasLtMatmulPreferenceOpaque_t");
}

/* Called with the lock held: keep a new server-side descriptor (unpinned
 * as yet).  0 when out of memory. */
static int remember_made(const struct blob *b, uint64_t handle, struct cc_entry **entry)
{
    struct cc_entry *e = cc_insert(&cache, b->bytes, b->len);
    *entry = e;
    if (!e)
        return 0;       /* the server's descriptor is lost until the session ends */
    e->handle = handle;
    rgpu_handle_note(class_of(b->bytes[0]), handle, 0);
    if (b->bytes[0] == RGPU_LT_MATMUL_DESC) {
        int32_t scale, mode;
        scalar_facts(b->bytes, b->len, &scale, &mode);
        lt_matmul_desc_made(handle, scale, mode);
    }
    return 1;
}

/* Called with the lock held: make room for `room` more; the server-side
 * descriptors of those that had to go are destroyed by the next request. */
static unsigned choose_victims(size_t room, struct cc_entry **victims, unsigned max)
{
    unsigned n = 0;
    struct cc_entry *e;
    while (n < max && (e = cc_evict(&cache, room)) != NULL) {
        if (e->key[0] == RGPU_LT_MATMUL_DESC)
            lt_matmul_desc_gone(e->handle);
        rgpu_handle_forget(class_of(e->key[0]), e->handle);
        victims[n++] = e;
    }
    return n;
}

void lt_release(struct lt_use *use)
{
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < use->n; i++)
        if (use->entry[i])
            use->entry[i]->pins--;
    pthread_mutex_unlock(&lock);
    use->n = 0;
}

/* With the lock held: look each object up, pin what is there, and list
 * the distinct contents still missing (missing_of[i]: index into missing,
 * or -1).  Returns -1 when an object is not a live one of its kind. */
static int look_up(const void *const *objs, const enum rgpu_lt_kind *kinds, unsigned n,
                   struct lt_use *use, struct blob *missing, unsigned *nmissing,
                   int *missing_of)
{
    for (unsigned i = 0; i < n; i++) {
        struct blob b;
        missing_of[i] = -1;
        use->handle[i] = 0;
        use->entry[i] = NULL;
        use->n = i + 1;
        if (!objs[i])
            continue;
        if (lt_content(objs[i], kinds[i], &b.bytes, &b.len) < 0)
            return -1;
        struct cc_entry *e = cc_find(&cache, b.bytes, b.len);
        if (e) {
            e->pins++;
            use->entry[i] = e;
            use->handle[i] = e->handle;
            continue;
        }
        for (unsigned k = 0; k < *nmissing && missing_of[i] < 0; k++)
            if (missing[k].len == b.len && memcmp(missing[k].bytes, b.bytes, b.len) == 0)
                missing_of[i] = (int)k;
        if (missing_of[i] < 0) {
            missing[*nmissing] = b;
            missing_of[i] = (int)(*nmissing)++;
        }
    }
    return 0;
}

int lt_acquire(const void *const *objs, const enum rgpu_lt_kind *kinds, unsigned n,
               struct lt_use *use)
{
    struct blob missing[LT_MAX_USE];
    int missing_of[LT_MAX_USE], status[LT_MAX_USE] = { 0 };
    uint64_t handle[LT_MAX_USE] = { 0 };
    struct cc_entry *victims[LT_MAX_USE], *made[LT_MAX_USE] = { NULL };
    unsigned nmissing = 0, nvictims = 0;

    use->n = 0;
    use->deferred = 0;
    pthread_mutex_lock(&lock);
    if (!cache_ready()) {
        pthread_mutex_unlock(&lock);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    int bad = look_up(objs, kinds, n, use, missing, &nmissing, missing_of);
    if (!bad && nmissing)
        nvictims = choose_victims(nmissing, victims, LT_MAX_USE);
    pthread_mutex_unlock(&lock);
    if (bad) {
        lt_release(use);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!nmissing)
        return 0;

    int rc = materialize(victims, nvictims, missing, nmissing, 1, status, handle,
                         &use->deferred);
    for (unsigned i = 0; i < nvictims; i++)
        cc_entry_free(victims[i]);
    pthread_mutex_lock(&lock);
    for (unsigned k = 0; rc == 0 && k < nmissing; k++) {
        if (status[k] == 0 && !remember_made(&missing[k], handle[k], &made[k]))
            status[k] = CUBLAS_STATUS_ALLOC_FAILED;
    }
    for (unsigned k = 0; rc == 0 && k < nmissing; k++)
        if (status[k] != 0)
            rc = status[k];
    /* Each use of a new content holds a pin of its own. */
    for (unsigned i = 0; i < n; i++) {
        int k = missing_of[i];
        if (k >= 0 && made[k]) {
            made[k]->pins++;
            use->handle[i] = handle[k];
            use->entry[i] = made[k];
        }
    }
    pthread_mutex_unlock(&lock);
    if (rc) {
        lt_release(use);
        return rc;
    }
    return 0;
}

/* ---- attributes -------------------------------------------------------------- */

/* (kind, attribute, size) combinations the server's cuBLASLt accepted. */
struct verdict {
    uint32_t kind, attr, size;
};
static struct verdict *accepted;
static size_t naccepted, accepted_cap;

static int was_accepted(uint32_t kind, uint32_t attr, uint32_t size)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < naccepted && !found; i++)
        found = accepted[i].kind == kind && accepted[i].attr == attr && accepted[i].size == size;
    pthread_mutex_unlock(&lock);
    return found;
}

static void remember_accepted(uint32_t kind, uint32_t attr, uint32_t size)
{
    pthread_mutex_lock(&lock);
    if (naccepted == accepted_cap) {
        size_t cap = accepted_cap ? 2 * accepted_cap : 32;
        struct verdict *n = realloc(accepted, cap * sizeof *n);
        if (n) {
            accepted = n;
            accepted_cap = cap;
        }
    }
    if (naccepted < accepted_cap)
        accepted[naccepted++] = (struct verdict){ kind, attr, size };
    pthread_mutex_unlock(&lock);
}

/* Whether the library takes this attribute at this size: asked once, on a
 * descriptor made with o's create parameters and destroyed again.
 * Returns the library's status; *deferred as in struct lt_use. */
static int check_attribute(const struct lt_object *o, uint32_t attr, const void *buf,
                           uint32_t size, int *deferred)
{
    uint32_t kind = o->content[0];
    struct attr_record r = { attr, size };
    unsigned char probe[2 + 8 * MAX_PARAMS + sizeof r + ATTR_MAX];
    size_t head = head_len(o->content);
    int status = 0;
    uint64_t handle;

    *deferred = 0;
    if (was_accepted(kind, attr, size))
        return 0;
    memcpy(probe, o->content, head);
    memcpy(probe + head, &r, sizeof r);
    memcpy(probe + head + sizeof r, buf, size);
    struct blob b = { probe, head + sizeof r + size };
    int rc = materialize(NULL, 0, &b, 1, 0, &status, &handle, deferred);
    if (rc == 0 && status == 0)
        remember_accepted(kind, attr, size);
    return rc ? rc : status;
}

static int set_attribute(void *p, enum rgpu_lt_kind kind, uint32_t attr, const void *buf,
                         size_t size)
{
    struct lt_object *o = object_of(p, kind);
    int deferred;
    if (!o || !buf || size > ATTR_MAX)
        return CUBLAS_STATUS_INVALID_VALUE;
    int rc = check_attribute(o, attr, buf, (uint32_t)size, &deferred);
    int slot = pointer_slot(kind, attr, size);
    if (rc == 0 && slot >= 0) {
        uint64_t value, align;
        memcpy(&value, buf, sizeof value);
        align = alignment_class(value);
        rc = record_attribute(o, attr, &align, sizeof align);
        if (rc == 0)
            o->pointer[slot] = value;
    } else if (rc == 0) {
        rc = record_attribute(o, attr, buf, (uint32_t)size);
    }
    return rc ? rc : deferred;
}

/* What was set is answered here, with the library's checks of the size;
 * anything else by the server's descriptor of the same content, through
 * the generated procedure `proc` (argv: descriptor, attr, buf, size,
 * written; attr_arg points at the caller's attr argument). */
static int get_attribute(const void *p, enum rgpu_lt_kind kind, uint32_t attr,
                         const void *attr_arg, void *buf, size_t size, size_t *written,
                         const struct rgpu_proc *proc)
{
    const struct lt_object *o = object_of(p, kind);
    struct attr_record r;
    struct lt_use use;

    if (!o)
        return CUBLAS_STATUS_INVALID_VALUE;
    size_t off = find_record(o->content, o->len, attr);
    if (off) {
        memcpy(&r, o->content + off, sizeof r);
        if (size == 0) {
            if (!written)
                return CUBLAS_STATUS_INVALID_VALUE;
            *written = r.size;
            return CUBLAS_STATUS_SUCCESS;
        }
        if (!buf || size != r.size)
            return CUBLAS_STATUS_INVALID_VALUE;
        int slot = pointer_slot(kind, attr, r.size);
        memcpy(buf, slot >= 0 ? (const void *)&o->pointer[slot] : o->content + off + sizeof r,
               r.size);
        if (written)
            *written = r.size;
        return CUBLAS_STATUS_SUCCESS;
    }
    int rc = lt_acquire(&p, &kind, 1, &use);
    if (rc)
        return rc;
    void *server_desc = (void *)(uintptr_t)use.handle[0];
    const void *argv[] = { &server_desc, attr_arg, &buf, &size, &written };
    rc = rgpu_call(LIB, proc, argv);
    lt_release(&use);
    return rc ? rc : use.deferred;
}

/* ---- the exported functions ------------------------------------------------- */

#undef cublasLtMatmulDescCreate
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                                    cublasComputeType_t computeType,
                                                    cudaDataType_t scaleType)
{
    const int64_t params[] = { computeType, scaleType };
    return object_create((void **)matmulDesc, RGPU_LT_MATMUL_DESC, params, 2);
}

#undef cublasLtMatmulDescDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    return object_destroy(matmulDesc, RGPU_LT_MATMUL_DESC);
}

#undef cublasLtMatmulDescSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          const void *buf, size_t sizeInBytes)
{
    return set_attribute(matmulDesc, RGPU_LT_MATMUL_DESC, (uint32_t)attr, buf, sizeInBytes);
}

#undef cublasLtMatmulDescGetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          void *buf, size_t sizeInBytes,
                                                          size_t *sizeWritten)
{
    return get_attribute(matmulDesc, RGPU_LT_MATMUL_DESC, (uint32_t)attr, &attr, buf,
                         sizeInBytes, sizeWritten, RGPU_CUBLASLT_cublasLtMatmulDescGetAttribute);
}

#undef cublasLtMatrixLayoutCreate
RGPU_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                                      cudaDataType type, uint64_t rows,
                                                      uint64_t cols, int64_t ld)
{
    const int64_t params[] = { type, (int64_t)rows, (int64_t)cols, ld };
    return object_create((void **)matLayout, RGPU_LT_LAYOUT, params, 4);
}

#undef cublasLtMatrixLayoutDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    return object_destroy(matLayout, RGPU_LT_LAYOUT);
}

#undef cublasLtMatrixLayoutSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                            cublasLtMatrixLayoutAttribute_t attr,
                                                            const void *buf, size_t sizeInBytes)
{
    return set_attribute(matLayout, RGPU_LT_LAYOUT, (uint32_t)attr, buf, sizeInBytes);
}

#undef cublasLtMatrixLayoutGetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                            cublasLtMatrixLayoutAttribute_t attr,
                                                            void *buf, size_t sizeInBytes,
                                                            size_t *sizeWritten)
{
    return get_attribute(matLayout, RGPU_LT_LAYOUT, (uint32_t)attr, &attr, buf, sizeInBytes,
                         sizeWritten, RGPU_CUBLASLT_cublasLtMatrixLayoutGetAttribute);
}

#undef cublasLtMatmulPreferenceCreate
RGPU_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    return object_create((void **)pref, RGPU_LT_PREFERENCE, NULL, 0);
}

#undef cublasLtMatmulPreferenceDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return object_destroy(pref, RGPU_LT_PREFERENCE);
}

#undef cublasLtMatmulPreferenceSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t sizeInBytes)
{
    return set_attribute(pref, RGPU_LT_PREFERENCE, (uint32_t)attr, buf, sizeInBytes);
}

#undef cublasLtMatmulPreferenceGetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void *buf,
    size_t sizeInBytes, size_t *sizeWritten)
{
    return get_attribute(pref, RGPU_LT_PREFERENCE, (uint32_t)attr, &attr, buf, sizeInBytes,
                         sizeWritten, RGPU_CUBLASLT_cublasLtMatmulPreferenceGetAttribute);
}
