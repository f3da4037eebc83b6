/* Modules, libraries and JIT linking of the driver API, server side: the
 * serve_ functions of rgpu's own procedures (codegen/cuda_own.h; client
 * side: stubs/cuda_modules.c).
 *
 * Images come checked (image_check.c) and, when larger than a frame,
 * assembled from pieces (image_stage.c).  JIT options come by value
 * (struct rgpu_jit_option, codegen/rgpu_module_wire.h): a log buffer of
 * the client is a buffer of ours of the size it asked for (at most
 * RGPU_JIT_LOG_MAX), whose text goes back with the reply, as do the other
 * values the library writes (log sizes, wall time, threads per block).  A
 * link state lives here with the options it was created with, since the
 * driver keeps writing its logs into them until it is destroyed; the
 * client names it by the driver's handle, which must be one of ours. */
#include "rgpud.h"
#include "image_check.h"
#include "owned_handles.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cuda_serve.h"

#include <cuda.h>
#include <driver_types.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))

#define JIT_MAX_OPTIONS RGPU_JIT_MAX_OPTIONS
#define JIT_MAX_NAMES   RGPU_JIT_MAX_NAMES
#define JIT_NAME_MAX    RGPU_JIT_NAME_MAX   /* also a link input's name */
#define JIT_LOG_MAX     RGPU_JIT_LOG_MAX    /* per log buffer */
#define MAX_LINKS       256                 /* live link states of a session */

/* ---- JIT options ----------------------------------------------------------- */

enum jit_kind {
    JIT_UNKNOWN,        /* an id this build does not know: invalid value */
    JIT_NUMBER,         /* a value (sizes, levels, flags, enums) */
    JIT_OUTPUT,         /* CU_JIT_WALL_TIME: written by the library */
    JIT_LOG,            /* a log buffer: ours */
    JIT_NAMES,          /* an array of strings */
    JIT_REFUSED,        /* pointers into the client's memory */
};

static enum jit_kind jit_kind(uint64_t id)
{
    switch (id) {
    case CU_JIT_WALL_TIME:
        return JIT_OUTPUT;
    case CU_JIT_INFO_LOG_BUFFER:
    case CU_JIT_ERROR_LOG_BUFFER:
        return JIT_LOG;
    case CU_JIT_REFERENCED_KERNEL_NAMES:
    case CU_JIT_REFERENCED_VARIABLE_NAMES:
        return JIT_NAMES;
    case CU_JIT_GLOBAL_SYMBOL_NAMES:
    case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
        return JIT_REFUSED;
    default:
        return id < CU_JIT_NUM_OPTIONS ? JIT_NUMBER : JIT_UNKNOWN;
    }
}

/* A name list's count option. */
static CUjit_option names_count(CUjit_option names)
{
    return names == CU_JIT_REFERENCED_KERNEL_NAMES ? CU_JIT_REFERENCED_KERNEL_COUNT
                                                   : CU_JIT_REFERENCED_VARIABLE_COUNT;
}

/* A log buffer's size option. */
static CUjit_option log_size_option(CUjit_option log)
{
    return log == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                         : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
}

struct jit_opts {
    unsigned n;
    CUjit_option id[JIT_MAX_OPTIONS];
    void *val[JIT_MAX_OPTIONS];
    void *owned[JIT_MAX_OPTIONS];   /* what we allocated for option i */
    unsigned log_size[JIT_MAX_OPTIONS];
};

static void jit_free(struct jit_opts *o)
{
    for (unsigned i = 0; i < o->n; i++) {
        if (o->id[i] == CU_JIT_REFERENCED_KERNEL_NAMES ||
            o->id[i] == CU_JIT_REFERENCED_VARIABLE_NAMES) {
            char **names = o->owned[i];
            for (size_t k = 0; names && names[k]; k++)
                free(names[k]);
        }
        free(o->owned[i]);
    }
    memset(o, 0, sizeof *o);
}

static int jit_find(const struct jit_opts *o, CUjit_option id)
{
    for (unsigned i = 0; i < o->n; i++)
        if (o->id[i] == id)
            return (int)i;
    return -1;
}

/* The options' bytes as the client sent them: records, and the name
 * lists' strings one after another. */
struct jit_wire {
    const struct rgpu_jit_option *options;
    size_t n;
    const char *names;
    size_t names_size;
};

/* count strings from the names bytes at *at, as a NULL-terminated array of
 * our own in *out (to be freed by jit_free, filled or not): 0 or -RGPU_E*. */
static int take_names(const struct jit_wire *w, size_t *at, uint64_t count, char ***out)
{
    *out = NULL;
    if (count > JIT_MAX_NAMES)
        return -RGPU_EPROTO;
    char **names = calloc((size_t)count + 1, sizeof *names);
    if (!names)
        return -RGPU_ENOMEM;
    *out = names;
    for (uint64_t k = 0; k < count; k++) {
        size_t left = w->names_size - *at;
        size_t len = w->names ? strnlen(w->names + *at, left) : left;
        if (len >= left || len >= JIT_NAME_MAX)
            return -RGPU_EPROTO;    /* no NUL inside the bytes, or too long a name */
        if (!(names[k] = strndup(w->names + *at, len)))
            return -RGPU_ENOMEM;
        *at += len + 1;
    }
    return 0;
}

/* Option i's value from its record: 0, a CUresult, or -RGPU_E*.  A name
 * list takes its strings from the names bytes at *at. */
static int decode_option(struct jit_opts *o, unsigned i, const struct jit_wire *w, size_t *at)
{
    const struct rgpu_jit_option *r = &w->options[i];
    if (r->zero)
        return -RGPU_EPROTO;
    o->id[i] = (CUjit_option)(r->id < CU_JIT_NUM_OPTIONS ? r->id : 0);
    switch (jit_kind(r->id)) {
    case JIT_UNKNOWN:
        rgpu_warn("refusing JIT option %u: unknown to this rgpud", r->id);
        return CUDA_ERROR_INVALID_VALUE;
    case JIT_REFUSED:
        rgpu_warn("refusing JIT option %u: its values point into the client's memory", r->id);
        return CUDA_ERROR_NOT_SUPPORTED;
    case JIT_NUMBER:
        /* Passed on as the client's slot held it: never dereferenced. */
        o->val[i] = (void *)(uintptr_t)r->value;
        return 0;
    case JIT_OUTPUT:
    case JIT_LOG:
        o->val[i] = NULL;
        return r->value ? -RGPU_EPROTO : 0;
    case JIT_NAMES: {
        char **names;
        int rc = take_names(w, at, r->value, &names);
        o->owned[i] = o->val[i] = names;
        return rc;
    }
    }
    return -RGPU_EPROTO;
}

/* A name list must be as long as its count option says (the library reads
 * that many); a log buffer is ours, of the size asked (bounded), which
 * then is the size the library is told. */
static int bind_option(struct jit_opts *o, unsigned i)
{
    if (o->id[i] == CU_JIT_REFERENCED_KERNEL_NAMES ||
        o->id[i] == CU_JIT_REFERENCED_VARIABLE_NAMES) {
        int c = jit_find(o, names_count(o->id[i]));
        size_t n = 0;
        for (char **names = o->val[i]; names[n]; n++)
            ;
        if (c >= 0 && (uint32_t)(uintptr_t)o->val[c] != n)
            return CUDA_ERROR_INVALID_VALUE;
        return 0;
    }
    if (jit_kind(o->id[i]) != JIT_LOG)
        return 0;
    int s = jit_find(o, log_size_option(o->id[i]));
    /* The library reads an unsigned int out of the slot. */
    uint32_t asked = s >= 0 ? (uint32_t)(uintptr_t)o->val[s] : 0;
    unsigned size = asked < JIT_LOG_MAX ? (unsigned)asked : JIT_LOG_MAX;
    o->owned[i] = o->val[i] = calloc(1, (size_t)size + 1);
    if (!o->val[i])
        return -RGPU_ENOMEM;
    o->log_size[i] = size;
    if (s >= 0)
        o->val[s] = (void *)(uintptr_t)size;
    return 0;
}

/* The options of a call into o: 0, a CUresult (nothing called), or
 * -RGPU_E*.  Every name list's strings must be found in the names bytes,
 * and those bytes hold nothing else.  o is to be freed whatever it
 * returns. */
static int jit_decode(const struct jit_wire *w, struct jit_opts *o)
{
    size_t at = 0;
    memset(o, 0, sizeof *o);
    if (w->n > JIT_MAX_OPTIONS || (w->n && !w->options))
        return -RGPU_EPROTO;
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < w->n; i++, o->n++)
        rc = decode_option(o, i, w, &at);
    if (rc == 0 && at != w->names_size)
        return -RGPU_EPROTO;
    for (unsigned i = 0; rc == 0 && i < o->n; i++)
        rc = bind_option(o, i);
    return rc;
}

/* What the library wrote into the options (o NULL: none), into result,
 * and the logs' texts one after the other into logs (room logs_size; the
 * codec sends *logs_used of them). */
static void jit_outputs(const struct jit_opts *o, struct rgpu_jit_result *result, char *logs,
                        size_t logs_size, size_t *logs_used)
{
    struct rgpu_jit_result r = { 0 };
    size_t used = 0;
    for (unsigned i = 0; o && i < o->n; i++) {
        uint32_t v = (uint32_t)(uintptr_t)o->val[i];
        switch ((int)o->id[i]) {
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            r.info_log_size = v;
            break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            r.error_log_size = v;
            break;
        case CU_JIT_THREADS_PER_BLOCK:
            r.threads_per_block = v;
            break;
        case CU_JIT_WALL_TIME:      /* a float in the slot's first bytes */
            memcpy(&r.wall_time, &o->val[i], sizeof r.wall_time);
            break;
        default:
            break;
        }
    }
    /* The info log's text first, then the error log's, each cut to the room
     * left (no buffer when the options were refused before the call). */
    for (int pass = 0; pass < 2; pass++) {
        int at = o ? jit_find(o, pass ? CU_JIT_ERROR_LOG_BUFFER : CU_JIT_INFO_LOG_BUFFER) : -1;
        const char *text = at >= 0 && o->val[at] ? o->val[at] : "";
        size_t n = at >= 0 ? strnlen(text, o->log_size[at]) : 0;
        n = logs && n < logs_size - used ? n : logs ? logs_size - used : 0;
        if (n)
            memcpy(logs + used, text, n);
        used += n;
        *(pass ? &r.error_log_len : &r.info_log_len) = (uint32_t)n;
    }
    if (result)
        *result = r;
    if (logs_used)
        *logs_used = used;
}

/* ---- loading modules and libraries -------------------------------------------- */

typedef int (*load_fn)(void *handle, const void *image, struct jit_opts *o);

/* The steps every load shares: the image, the options, the image's checks,
 * a copy with zeros after it, the library's call.  The codec records the
 * handle as the session's. */
static CUresult load(load_fn fn, void *handle, const struct jit_wire *w,
                     struct rgpu_jit_result *result, char *logs, size_t logs_size,
                     size_t *logs_used, size_t image_size, const void *image)
{
    struct image_arg img;
    struct jit_opts o;
    void *copy = NULL;
    int rc = image_take(image, image_size, &img);
    if (rc < 0)
        return serve_transport(-rc);
    rc = jit_decode(w, &o);
    if (rc == 0 && !handle)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == 0 && !image_acceptable(img.p, img.n))
        rc = CUDA_ERROR_INVALID_IMAGE;
    if (rc == 0)
        rc = (copy = image_for_library(&img)) ? fn(handle, copy, &o) : -RGPU_ENOMEM;
    image_done(&img, copy);
    jit_outputs(rc >= 0 ? &o : NULL, result, logs, logs_size, logs_used);
    jit_free(&o);
    return rc < 0 ? (CUresult)serve_transport(-rc) : (CUresult)rc;
}

static int module_load(void *handle, const void *image, struct jit_opts *o)
{
    if (!REAL(cuModuleLoadData) || !REAL(cuModuleLoadDataEx))
        return -RGPU_ENOSYM;
    return o->n ? REAL(cuModuleLoadDataEx)(handle, image, o->n, o->id, o->val)
                : REAL(cuModuleLoadData)(handle, image);
}

/* The library options are the client's business (stubs/cuda_modules.c):
 * none reaches the library, CU_LIBRARY_BINARY_IS_PRESERVED least of all,
 * since the image is freed once the call returns. */
static int library_load(void *handle, const void *image, struct jit_opts *o)
{
    if (!REAL(cuLibraryLoadData))
        return -RGPU_ENOSYM;
    return REAL(cuLibraryLoadData)(handle, image, o->n ? o->id : NULL, o->n ? o->val : NULL,
                                   o->n, NULL, NULL, 0);
}

CUresult serve_rgpu_cu_module_load(CUmodule *module, const struct rgpu_jit_option *options,
                                   size_t noptions, const char *names, size_t names_size,
                                   struct rgpu_jit_result *result, char *logs, size_t logs_size,
                                   size_t *logs_used, size_t image_size, const void *image)
{
    struct jit_wire w = { options, noptions, names, names_size };
    return load(module_load, module, &w, result, logs, logs_size, logs_used, image_size, image);
}

CUresult serve_rgpu_cu_library_load(CUlibrary *library, const struct rgpu_jit_option *options,
                                    size_t noptions, const char *names, size_t names_size,
                                    struct rgpu_jit_result *result, char *logs,
                                    size_t logs_size, size_t *logs_used, size_t image_size,
                                    const void *image)
{
    struct jit_wire w = { options, noptions, names, names_size };
    return load(library_load, library, &w, result, logs, logs_size, logs_used, image_size,
                image);
}

/* ---- JIT linking ---------------------------------------------------------------- */

struct link {
    CUlinkState state;
    struct jit_opts opts;       /* the create's: the driver writes into them */
    void *image;                /* cuLinkComplete's, owned by the state */
    size_t size;
    struct link *next;
};

/* Every link call runs under this lock: a destroy from one client thread
 * must not pull a state from under another's call (linking is rare). */
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct link *links;
static unsigned nlinks;

static struct link *link_find(uint64_t h)
{
    for (struct link *l = links; l; l = l->next)
        if (h && (uint64_t)(uintptr_t)l->state == h)
            return l;
    return NULL;
}

static void link_forget(struct link *gone)
{
    for (struct link **p = &links; *p; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            nlinks--;
            return;
        }
    }
}

/* With links_lock held. */
static CUresult link_create(CUlinkState *link, const struct jit_wire *w,
                            struct rgpu_jit_result *result, char *logs, size_t logs_size,
                            size_t *logs_used)
{
    if (!REAL(cuLinkCreate_v2))
        return serve_transport(RGPU_ENOSYM);
    if (!link)
        return CUDA_ERROR_INVALID_VALUE;
    if (nlinks >= MAX_LINKS) {
        rgpu_warn("refusing a link state: the session holds %u", nlinks);
        jit_outputs(NULL, result, logs, logs_size, logs_used);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return serve_transport(RGPU_ENOMEM);
    int rc = jit_decode(w, &l->opts);
    if (rc == 0)
        rc = REAL(cuLinkCreate_v2)(l->opts.n, l->opts.id, l->opts.val, &l->state);
    jit_outputs(rc >= 0 ? &l->opts : NULL, result, logs, logs_size, logs_used);
    if (rc == CUDA_SUCCESS) {
        *link = l->state;
        l->next = links;
        links = l;
        nlinks++;
    } else {
        jit_free(&l->opts);
        free(l);
    }
    return rc < 0 ? (CUresult)serve_transport(-rc) : (CUresult)rc;
}

CUresult serve_rgpu_cu_link_create(CUlinkState *link, const struct rgpu_jit_option *options,
                                   size_t noptions, const char *names, size_t names_size,
                                   struct rgpu_jit_result *result, char *logs, size_t logs_size,
                                   size_t *logs_used)
{
    struct jit_wire w = { options, noptions, names, names_size };
    pthread_mutex_lock(&links_lock);
    CUresult rc = link_create(link, &w, result, logs, logs_size, logs_used);
    pthread_mutex_unlock(&links_lock);
    return rc;
}

/* The outputs of a link call: the state's options as they stand, and the
 * call's own. */
struct link_outputs {
    struct rgpu_jit_result *result;
    char *logs;
    size_t logs_size, *logs_used;
};

/* With links_lock held. */
static CUresult link_add(CUlinkState link, CUjitInputType type, const char *name,
                         const struct jit_wire *w, const struct link_outputs *state,
                         const struct link_outputs *own, struct image_arg *img)
{
    struct jit_opts o = { 0 };
    void *copy = NULL;
    struct link *l = link_find((uint64_t)(uintptr_t)link);
    int rc = l ? jit_decode(w, &o) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == 0 && !image_acceptable_sized(img->p, img->n))
        rc = CUDA_ERROR_INVALID_IMAGE;
    if (rc == 0)
        rc = (copy = image_for_library(img))
                 ? (int)REAL(cuLinkAddData_v2)(l->state, type, copy, img->n, name, o.n,
                                               o.id, o.val)
                 : -RGPU_ENOMEM;
    image_done(img, copy);
    jit_outputs(l ? &l->opts : NULL, state->result, state->logs, state->logs_size,
                state->logs_used);
    jit_outputs(rc >= 0 ? &o : NULL, own->result, own->logs, own->logs_size, own->logs_used);
    jit_free(&o);
    return rc < 0 ? (CUresult)serve_transport(-rc) : (CUresult)rc;
}

CUresult serve_rgpu_cu_link_add(CUlinkState link, CUjitInputType type, const char *name,
                                const struct rgpu_jit_option *options, size_t noptions,
                                const char *names, size_t names_size,
                                struct rgpu_jit_result *state_result, char *state_logs,
                                size_t state_logs_size, size_t *state_logs_used,
                                struct rgpu_jit_result *result, char *logs, size_t logs_size,
                                size_t *logs_used, size_t image_size, const void *image)
{
    struct jit_wire w = { options, noptions, names, names_size };
    struct link_outputs state = { state_result, state_logs, state_logs_size, state_logs_used };
    struct link_outputs own = { result, logs, logs_size, logs_used };
    struct image_arg img;
    if (!REAL(cuLinkAddData_v2))
        return serve_transport(RGPU_ENOSYM);
    if (name && strnlen(name, JIT_NAME_MAX) >= JIT_NAME_MAX)
        return serve_transport(RGPU_EPROTO);
    int rc = image_take(image, image_size, &img);
    if (rc < 0)
        return serve_transport(-rc);
    pthread_mutex_lock(&links_lock);
    CUresult r = link_add(link, type, name, &w, &state, &own, &img);
    pthread_mutex_unlock(&links_lock);
    return r;
}

CUresult serve_rgpu_cu_link_complete(CUlinkState link, size_t *size,
                                     struct rgpu_jit_result *state_result, char *state_logs,
                                     size_t state_logs_size, size_t *state_logs_used)
{
    void *image = NULL;
    size_t n = 0;
    if (!REAL(cuLinkComplete))
        return serve_transport(RGPU_ENOSYM);
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find((uint64_t)(uintptr_t)link);
    int rc = !l ? CUDA_ERROR_INVALID_HANDLE
             : !size ? CUDA_ERROR_INVALID_VALUE
                     : REAL(cuLinkComplete)(l->state, &image, &n);
    if (rc == CUDA_SUCCESS && !image && n)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        l->image = image;
        l->size = n;
        *size = n;
    }
    jit_outputs(l ? &l->opts : NULL, state_result, state_logs, state_logs_size,
                state_logs_used);
    pthread_mutex_unlock(&links_lock);
    return (CUresult)rc;
}

/* size bytes of the completed image from offset: into bytes, or, for a
 * large piece (the codec's sink), ahead of the reply. */
CUresult serve_rgpu_cu_link_read(CUlinkState link, size_t offset, void *bytes, size_t size)
{
    size_t sink = serve_sink_len();
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find((uint64_t)(uintptr_t)link);
    CUresult rc = !l ? CUDA_ERROR_INVALID_HANDLE
                  : !l->image || offset > l->size || size > l->size - offset ||
                          size > RGPU_IMAGE_PIECE || (!bytes && !sink && size)
                      ? CUDA_ERROR_INVALID_VALUE
                      : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS && sink) {
        serve_data_begin(sink);
        serve_data_write((const char *)l->image + offset, sink);
        serve_data_end();
    } else if (rc == CUDA_SUCCESS && size) {
        memcpy(bytes, (const char *)l->image + offset, size);
    }
    pthread_mutex_unlock(&links_lock);
    return rc;
}

/* The codec forgets the handle once destroyed. */
CUresult serve_rgpu_cu_link_destroy(CUlinkState link)
{
    if (!REAL(cuLinkDestroy))
        return serve_transport(RGPU_ENOSYM);
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find((uint64_t)(uintptr_t)link);
    CUresult rc = l ? REAL(cuLinkDestroy)(l->state) : CUDA_ERROR_INVALID_HANDLE;
    if (l) {
        link_forget(l);
        jit_free(&l->opts);
        free(l);
    }
    pthread_mutex_unlock(&links_lock);
    return rc;
}
