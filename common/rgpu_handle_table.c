/* The handle set of rgpu_handle_table.h. */
#include "rgpu_handle_table.h"
#include "rgpu_handles.h"

#include <stdlib.h>

static size_t home(uint32_t cls, uint64_t h, size_t mask)
{
    uint64_t x = (h ^ ((uint64_t)cls << 32 | cls)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 17) & mask;
}

/* Index of (cls, h), or of the empty slot where it would go. */
static size_t probe(const struct rgpu_handle_table *t, uint32_t cls, uint64_t h)
{
    size_t mask = t->cap - 1, i = home(cls, h, mask);
    while (t->tab[i].h && !(t->tab[i].h == h && t->tab[i].cls == cls))
        i = (i + 1) & mask;
    return i;
}

static int grow(struct rgpu_handle_table *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 256, ocap = t->cap;
    struct rgpu_handle_slot *old = t->tab, *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    t->tab = n;
    t->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].h)
            t->tab[probe(t, old[i].cls, old[i].h)] = old[i];
    free(old);
    return 0;
}

/* With the lock held: room for one more member.  -1 when out of memory. */
static int reserve(struct rgpu_handle_table *t)
{
    return (t->used + 1) * 2 > t->cap ? grow(t) : 0;
}

int rgpu_htab_add(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t info)
{
    int rc = 0;
    if (!h)
        return 0;
    pthread_mutex_lock(&t->lock);
    if (reserve(t) < 0) {
        rc = -1;
        goto out;
    }
    size_t i = probe(t, cls, h);
    if (!t->tab[i].h) {
        t->tab[i] = (struct rgpu_handle_slot){ .h = h, .cls = cls, .refs = 1, .info = info };
        t->used++;
    } else {
        if (t->shared && t->shared(cls))
            t->tab[i].refs++;
        t->tab[i].info = info;
    }
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* With the lock held: empty slot i.  Backward shift: pull later members of
 * the run into the hole when their home does not lie cyclically in
 * (hole, j]. */
static void unlink_slot(struct rgpu_handle_table *t, size_t i)
{
    size_t mask = t->cap - 1;
    for (size_t j = (i + 1) & mask; t->tab[j].h; j = (j + 1) & mask) {
        size_t k = home(t->tab[j].cls, t->tab[j].h, mask);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            t->tab[i] = t->tab[j];
            i = j;
        }
    }
    t->tab[i] = (struct rgpu_handle_slot){ 0 };
    t->used--;
}

/* With the lock held: the slot holding (cls, h), or NULL. */
static struct rgpu_handle_slot *slot_of(struct rgpu_handle_table *t, uint32_t cls, uint64_t h)
{
    if (!h || !t->cap)
        return NULL;
    struct rgpu_handle_slot *s = &t->tab[probe(t, cls, h)];
    return s->h ? s : NULL;
}

void rgpu_htab_remove(struct rgpu_handle_table *t, uint32_t cls, uint64_t h)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_handle_slot *s = slot_of(t, cls, h);
    if (s && s->refs > 1)
        s->refs--;
    else if (s)
        unlink_slot(t, (size_t)(s - t->tab));
    pthread_mutex_unlock(&t->lock);
}

int rgpu_htab_get(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t *info)
{
    return rgpu_htab_find(t, cls, h, NULL, info);
}

size_t rgpu_htab_count(struct rgpu_handle_table *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->used;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int rgpu_htab_insert(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t value,
                     uint32_t info)
{
    int rc = 0;
    if (!h)
        return -1;
    pthread_mutex_lock(&t->lock);
    if (slot_of(t, cls, h)) {
        rc = 1;
    } else if (reserve(t) < 0) {
        rc = -1;
    } else {
        t->tab[probe(t, cls, h)] =
            (struct rgpu_handle_slot){ .h = h, .value = value, .cls = cls, .refs = 1, .info = info };
        t->used++;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int rgpu_htab_find(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t *value,
                   uint32_t *info)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_handle_slot *s = slot_of(t, cls, h);
    if (s && value)
        *value = s->value;
    if (s && info)
        *info = s->info;
    pthread_mutex_unlock(&t->lock);
    return s != NULL;
}

int rgpu_htab_set_info(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t info)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_handle_slot *s = slot_of(t, cls, h);
    if (s)
        s->info = info;
    pthread_mutex_unlock(&t->lock);
    return s != NULL;
}

int rgpu_htab_take(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint64_t *value,
                   uint32_t *info)
{
    pthread_mutex_lock(&t->lock);
    struct rgpu_handle_slot *s = slot_of(t, cls, h);
    if (s && value)
        *value = s->value;
    if (s && info)
        *info = s->info;
    if (s)
        unlink_slot(t, (size_t)(s - t->tab));
    pthread_mutex_unlock(&t->lock);
    return s != NULL;
}

/* ---- facts of classes ------------------------------------------------------------ */

static uint32_t C_STREAM, C_CUBLAS, C_CUBLASLT, C_FUNCTION, C_KERNEL;

__attribute__((constructor)) static void classes_init(void)
{
    C_STREAM = rgpu_handle_class("CUstream_st");
    C_CUBLAS = rgpu_handle_class("cublasContext");
    C_CUBLASLT = rgpu_handle_class("cublasLtContext");
    C_FUNCTION = rgpu_handle_class("CUfunc_st");
    C_KERNEL = rgpu_handle_class("CUkern_st");
}

/* cuBLASLt's cublasLtCreate returns one handle per device (seen on an H200
 * with cuBLASLt 13: two threads, two creates, one value), and each
 * cublasLtDestroy drops one reference: forgetting the handle at the first
 * destroy would refuse the other creators' calls. */
int rgpu_handle_shared(uint32_t cls)
{
    return cls == C_CUBLASLT;
}

/* cudaStreamLegacy / CU_STREAM_LEGACY (1) and cudaStreamPerThread /
 * CU_STREAM_PER_THREAD (2): the only handle constants the headers define. */
int rgpu_handle_default_stream(uint32_t cls, uint64_t h)
{
    return cls == C_STREAM && h <= 2;
}

/* Another class whose handles a parameter of class cls also takes: a
 * cuBLASLt handle may be a cuBLAS one, and the driver takes a CUkernel
 * wherever it takes a CUfunction (static CUDA runtimes pass their kernels
 * so to cuFuncSetAttribute and the occupancy calls). */
uint32_t rgpu_handle_alias(uint32_t cls)
{
    if (cls == C_CUBLASLT)
        return C_CUBLAS;
    return cls == C_FUNCTION ? C_KERNEL : 0;
}
