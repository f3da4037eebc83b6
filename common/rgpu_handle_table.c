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

int rgpu_htab_add(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t info)
{
    int rc = 0;
    if (!h)
        return 0;
    pthread_mutex_lock(&t->lock);
    if ((t->used + 1) * 2 > t->cap && grow(t) < 0) {
        rc = -1;
        goto out;
    }
    size_t i = probe(t, cls, h);
    if (!t->tab[i].h) {
        t->tab[i] = (struct rgpu_handle_slot){ h, cls, 1, info };
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

void rgpu_htab_remove(struct rgpu_handle_table *t, uint32_t cls, uint64_t h)
{
    if (!h)
        return;
    pthread_mutex_lock(&t->lock);
    if (!t->cap)
        goto out;
    size_t mask = t->cap - 1, i = probe(t, cls, h);
    if (!t->tab[i].h)
        goto out;
    if (t->tab[i].refs > 1) {
        t->tab[i].refs--;
        goto out;
    }
    /* Backward shift: pull later members of the run into the hole when
     * their home does not lie cyclically in (hole, j]. */
    for (size_t j = (i + 1) & mask; t->tab[j].h; j = (j + 1) & mask) {
        size_t k = home(t->tab[j].cls, t->tab[j].h, mask);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            t->tab[i] = t->tab[j];
            i = j;
        }
    }
    t->tab[i] = (struct rgpu_handle_slot){ 0, 0, 0, 0 };
    t->used--;
out:
    pthread_mutex_unlock(&t->lock);
}

int rgpu_htab_get(struct rgpu_handle_table *t, uint32_t cls, uint64_t h, uint32_t *info)
{
    int found = 0;
    if (!h)
        return 0;
    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        size_t i = probe(t, cls, h);
        found = t->tab[i].h != 0;
        if (found && info)
            *info = t->tab[i].info;
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

size_t rgpu_htab_count(struct rgpu_handle_table *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->used;
    pthread_mutex_unlock(&t->lock);
    return n;
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
