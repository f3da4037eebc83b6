/* Which work of this process may print, and on which streams it is still
 * pending (docs/synchronisation.md, "What kernels print").
 *
 * The driver writes what kernels printed where the host synchronises, and
 * rgpud sends it ahead of that call's reply: a synchronise or a copy that
 * goes without waiting would bring it late.  So such a call waits while a
 * kernel that may print was launched on its stream since the stream's last
 * synchronise that waited, and only then.  What the client keeps for that:
 *
 * - images: each module or library image loaded is scanned
 *   (rgpu_printf_scan.c) for the kernels that may print on the server's
 *   GPUs, and kept by its handle until it is unloaded;
 * - functions: each function or kernel handle the program learns from an
 *   image (by name: cuModuleGetFunction, cuLibraryGetKernel; a runtime
 *   kernel) is recorded with whether it may print, until its image is
 *   unloaded, since the driver hands unloaded functions' handles to others.
 *   Records go at the unloads, context destructions and device resets that
 *   move the code generation (rgpu_lazy.c), each with what it unloads, so
 *   that one module's unload leaves the others' records standing.  A
 *   handle the client holds no record of may print when any image loaded
 *   may (the rule before per-kernel knowledge);
 * - marks: a stream holds one from the launch of a kernel that may print
 *   until a synchronise of that stream waited; a device or context
 *   synchronise clears its device's.  The legacy default stream waits for
 *   every blocking stream and they for it: its synchronise waits while any
 *   stream holds a mark, and every synchronise waits while it holds one.  A
 *   stream that waits for an event while any mark is held takes one (the
 *   event may follow work that prints), and an event synchronise waits
 *   while any mark is held.  A graph launch marks its stream once any graph
 *   may hold a kernel that may print (added as a node, or captured).
 *
 * Output of a kernel's printf that arrives while no mark is held was not
 * foreseen: a kernel the client took for silent printed.  From then on
 * every synchronise and copy waits, as before per-kernel knowledge. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "rgpu_printf_scan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LEGACY_STREAM 1         /* cudaStreamLegacy, CU_STREAM_LEGACY; NULL too */
#define PER_THREAD_STREAM 2     /* cudaStreamPerThread, CU_STREAM_PER_THREAD */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int images_may_print;    /* some image loaded may print */
static int graphs_may_print;    /* some graph may hold a kernel that may */
static int all_wait;            /* output came unforeseen (or a mark was lost) */

static int flag(const int *f)
{
    return __atomic_load_n(f, __ATOMIC_ACQUIRE);
}

static void raise_flag(int *f)
{
    __atomic_store_n(f, 1, __ATOMIC_RELEASE);
}

/* ---- images ------------------------------------------------------------------------- */

struct image {
    uint64_t handle;                /* a module or a library */
    uint64_t origin;                /* what unloads it: itself, or its library */
    struct rgpu_print_scan *scan;   /* the origin's, freed with the origin's record */
    struct image *next;
};
static struct image *images;        /* lock */

struct rgpu_print_scan *rgpu_printing_scan(const void *image, size_t size, const unsigned *archs,
                                           size_t narchs)
{
    struct rgpu_print_scan *s = calloc(1, sizeof *s);
    if (s)
        (void)rgpu_print_scan(image, size, archs, narchs, s);  /* out of memory: unknown */
    if (!s || s->any_prints)
        raise_flag(&images_may_print);
    return s;
}

int rgpu_printing_scan_may_print(const struct rgpu_print_scan *s, const char *name)
{
    return !s || rgpu_print_scan_may_print(s, name);
}

static void scan_free(struct rgpu_print_scan *s)
{
    if (s)
        rgpu_print_scan_free(s);
    free(s);
}

/* With lock held. */
static struct image *image_find(uint64_t handle)
{
    struct image *i = images;
    while (i && i->handle != handle)
        i = i->next;
    return i;
}

/* With lock held: 0, or -1 when out of memory. */
static int image_add(uint64_t handle, uint64_t origin, struct rgpu_print_scan *scan)
{
    struct image *i = malloc(sizeof *i);
    if (!i)
        return -1;
    *i = (struct image){ handle, origin, scan, images };
    images = i;
    return 0;
}

/* ---- functions ---------------------------------------------------------------------- */

/* By handle: open addressing, linear probing, grown at half load. */
struct function {
    uint64_t handle;        /* 0: a free slot */
    uint64_t origin;        /* the module or library whose unload ends it */
    int may_print;
};
static struct function *functions;  /* lock */
static size_t functions_cap, functions_used;

static size_t slot_of(const struct function *t, size_t cap, uint64_t handle)
{
    size_t i = (size_t)((handle * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
    while (t[i].handle && t[i].handle != handle)
        i = (i + 1) & (cap - 1);
    return i;
}

/* With lock held: the table holding every record but those keep refuses,
 * in cap slots; -1 when out of memory (the table is then unchanged). */
static int functions_rebuild(size_t cap, int (*keep)(const struct function *, uint64_t),
                             uint64_t arg)
{
    struct function *t = calloc(cap, sizeof *t);
    size_t used = 0;
    if (!t)
        return -1;
    for (size_t i = 0; i < functions_cap; i++) {
        if (functions[i].handle && keep(&functions[i], arg)) {
            t[slot_of(t, cap, functions[i].handle)] = functions[i];
            used++;
        }
    }
    free(functions);
    functions = t;
    functions_cap = cap;
    functions_used = used;
    return 0;
}

static int keep_all(const struct function *f, uint64_t arg)
{
    (void)f;
    (void)arg;
    return 1;
}

static int keep_unless_from(const struct function *f, uint64_t origin)
{
    return f->origin != origin;
}

static int keep_unless_is(const struct function *f, uint64_t handle)
{
    return f->handle != handle;
}

/* With lock held: the record, or NULL. */
static struct function *function_find(uint64_t handle)
{
    if (!functions_cap || !handle)
        return NULL;
    size_t i = slot_of(functions, functions_cap, handle);
    return functions[i].handle ? &functions[i] : NULL;
}

/* With lock held: the record of handle made or replaced. */
static void function_set(uint64_t handle, uint64_t origin, int may_print)
{
    struct function *f = function_find(handle);
    if (!handle)
        return;
    if (!f && (functions_used + 1) * 2 > functions_cap &&
        functions_rebuild(functions_cap ? functions_cap * 2 : 256, keep_all, 0) < 0)
        return;             /* unrecorded: it falls under the rule for unknown handles */
    if (!f) {
        f = &functions[slot_of(functions, functions_cap, handle)];
        functions_used++;
    }
    *f = (struct function){ handle, origin, may_print };
}

/* ---- what the stubs tell ------------------------------------------------------------ */

void rgpu_printing_image_loaded(uint64_t handle, const void *image, size_t size,
                                const unsigned *archs, size_t narchs)
{
    rgpu_printing_unloaded(handle);     /* the value of unloaded code, handed out again */
    struct rgpu_print_scan *scan = rgpu_printing_scan(image, size, archs, narchs);
    if (!scan)
        return;                         /* its functions count as unknown */
    pthread_mutex_lock(&lock);
    int rc = image_add(handle, handle, scan);
    pthread_mutex_unlock(&lock);
    if (rc < 0)
        scan_free(scan);
}

void rgpu_printing_image_alias(uint64_t module, uint64_t library)
{
    pthread_mutex_lock(&lock);
    const struct image *lib = image_find(library);
    if (lib && !image_find(module))
        (void)image_add(module, lib->origin, lib->scan);
    pthread_mutex_unlock(&lock);
}

void rgpu_printing_function_of(uint64_t function, uint64_t from, const char *name)
{
    pthread_mutex_lock(&lock);
    const struct image *img = image_find(from);
    const struct function *kernel = img ? NULL : function_find(from);
    if (img)
        function_set(function, img->origin,
                     name ? rgpu_print_scan_may_print(img->scan, name) : img->scan->any_prints);
    else if (kernel)
        function_set(function, kernel->origin, kernel->may_print);
    else if (function_find(function) &&  /* from code the client does not know */
             functions_rebuild(functions_cap, keep_unless_is, function) < 0)
        raise_flag(&all_wait);          /* the old record would stand */
    pthread_mutex_unlock(&lock);
}

void rgpu_printing_function_is(uint64_t function, uint64_t origin, int may_print)
{
    pthread_mutex_lock(&lock);
    function_set(function, origin, may_print);
    pthread_mutex_unlock(&lock);
}

int rgpu_printing_may(uint64_t function)
{
    pthread_mutex_lock(&lock);
    const struct function *f = function_find(function);
    int may = f ? f->may_print : flag(&images_may_print);
    pthread_mutex_unlock(&lock);
    return may;
}

/* With lock held: the images of origin and their functions forgotten. */
static void forget_origin(uint64_t origin)
{
    struct image **at = &images, *owned = NULL;
    while (*at) {
        struct image *i = *at;
        if (i->origin == origin || i->handle == origin) {
            *at = i->next;
            if (i->handle == i->origin) {
                i->next = owned;
                owned = i;          /* freed last: the others borrow its scan */
            } else {
                free(i);
            }
        } else {
            at = &i->next;
        }
    }
    while (owned) {
        struct image *i = owned;
        owned = i->next;
        scan_free(i->scan);
        free(i);
    }
    if (functions_cap && functions_rebuild(functions_cap, keep_unless_from, origin) < 0)
        raise_flag(&all_wait);      /* records of unloaded code would stand */
}

void rgpu_printing_unloaded(uint64_t handle)
{
    pthread_mutex_lock(&lock);
    forget_origin(handle);
    pthread_mutex_unlock(&lock);
}

void rgpu_printing_forget_all(void)
{
    pthread_mutex_lock(&lock);
    while (images)
        forget_origin(images->origin);
    free(functions);
    functions = NULL;
    functions_cap = functions_used = 0;
    pthread_mutex_unlock(&lock);
}

void rgpu_printing_graph_kernel(int may_print)
{
    if (may_print)
        raise_flag(&graphs_may_print);
}

/* ---- marks -------------------------------------------------------------------------- */

struct mark {
    uint64_t stream;        /* a created stream, LEGACY_STREAM or PER_THREAD_STREAM */
    const void *thread;     /* whose per-thread stream, else NULL */
    int device;             /* the device the work went to, -1: unknown */
};
static struct mark *marks;  /* lock */
static size_t nmarks, marks_cap;
static size_t marks_held;   /* nmarks, read without the lock */

static _Thread_local char this_thread;

static uint64_t canonical(uint64_t stream)
{
    return stream == 0 ? LEGACY_STREAM : stream;
}

static const void *owner(uint64_t stream)
{
    return stream == PER_THREAD_STREAM ? &this_thread : NULL;
}

/* The device of work on stream: with one GPU, that one. */
static int device_of(uint64_t stream)
{
    int n = rgpu_server_devices();
    return n >= 0 && n <= 1 ? 0 : rgpu_stream_device(stream);
}

static int same_mark(const struct mark *a, const struct mark *b)
{
    return a->stream == b->stream && a->thread == b->thread && a->device == b->device;
}

static void mark_stream(uint64_t stream)
{
    uint64_t s = canonical(stream);
    struct mark m = { s, owner(s), device_of(s) };
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nmarks && !same_mark(&marks[i], &m))
        i++;
    if (i == nmarks && nmarks == marks_cap) {
        size_t cap = marks_cap ? marks_cap * 2 : 16;
        struct mark *grown = realloc(marks, cap * sizeof *grown);
        if (grown) {
            marks = grown;
            marks_cap = cap;
        }
    }
    if (i == nmarks && nmarks < marks_cap)
        marks[nmarks++] = m;
    else if (i == nmarks)
        raise_flag(&all_wait);      /* out of memory: nothing may go unwaited */
    __atomic_store_n(&marks_held, nmarks, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

static size_t held(void)
{
    return __atomic_load_n(&marks_held, __ATOMIC_ACQUIRE);
}

/* With lock held: every mark clear says goes. */
static void clear_marks(int (*clear)(const struct mark *, const struct mark *),
                        const struct mark *arg)
{
    size_t kept = 0;
    for (size_t i = 0; i < nmarks; i++)
        if (!clear(&marks[i], arg))
            marks[kept++] = marks[i];
    nmarks = kept;
    __atomic_store_n(&marks_held, nmarks, __ATOMIC_RELEASE);
}

void rgpu_printing_launched(uint64_t stream, int may_print)
{
    if (!may_print)
        return;
    if (rgpu_capture_active())
        raise_flag(&graphs_may_print);  /* the stream may be capturing it */
    mark_stream(stream);
}

void rgpu_printing_graph_launched(uint64_t stream)
{
    if (flag(&graphs_may_print))
        mark_stream(stream);
}

void rgpu_printing_stream_waits(uint64_t stream)
{
    if (held())
        mark_stream(stream);
}

int rgpu_printing_pending_any(void)
{
    return flag(&all_wait) || held();
}

int rgpu_printing_pending(uint64_t stream)
{
    if (flag(&all_wait))
        return 1;
    if (!held())
        return 0;
    uint64_t s = canonical(stream);
    const void *me = owner(s);
    int pending = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmarks && !pending; i++)
        pending = s == LEGACY_STREAM || marks[i].stream == LEGACY_STREAM ||
                  (marks[i].stream == s && marks[i].thread == me);
    pthread_mutex_unlock(&lock);
    return pending;
}

/* A synchronise of the stream of arg clears its marks: a created stream's
 * wherever they went, a default stream's of the same device only. */
static int synced_by(const struct mark *m, const struct mark *arg)
{
    if (m->stream != arg->stream || m->thread != arg->thread)
        return 0;
    return m->stream > PER_THREAD_STREAM || (arg->device >= 0 && m->device == arg->device);
}

void rgpu_printing_stream_synced(uint64_t stream)
{
    if (!held())
        return;
    uint64_t s = canonical(stream);
    struct mark arg = { s, owner(s), device_of(s) };
    pthread_mutex_lock(&lock);
    clear_marks(synced_by, &arg);
    pthread_mutex_unlock(&lock);
}

static int on_device(const struct mark *m, const struct mark *arg)
{
    return arg->device >= 0 && m->device == arg->device;
}

void rgpu_printing_device_synced(void)
{
    if (!held())
        return;
    struct mark arg = { LEGACY_STREAM, NULL, device_of(LEGACY_STREAM) };
    pthread_mutex_lock(&lock);
    clear_marks(on_device, &arg);
    pthread_mutex_unlock(&lock);
}

/* ---- output ------------------------------------------------------------------------- */

void rgpu_printing_output_arrived(void)
{
    if (held() || flag(&all_wait))
        return;
    raise_flag(&all_wait);
    rgpu_info("a kernel printed where no kernel that may print was pending: synchronises and "
              "copies wait from now on, so that what kernels print arrives where CUDA prints it");
}
