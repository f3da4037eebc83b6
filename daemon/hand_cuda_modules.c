/* Modules, libraries and JIT linking of the driver API, server side
 * (client side: stubs/cuda_modules.c; arguments: common/rgpu_hand_procs.h).
 *
 * Images come checked (image_check.c) and, when larger than a frame,
 * assembled from pieces (image_stage.c).  JIT options come by value: a
 * log buffer of the client is a buffer of ours of the size it asked for
 * (at most JIT_LOG_MAX), whose text goes back with the reply, as do the
 * other values the library writes (log sizes, wall time, threads per
 * block).  A link state lives here with the options it was created with,
 * since the driver keeps writing its logs into them until it is
 * destroyed; the client names it by the driver's handle, which must be one
 * of ours. */
#include "rgpud.h"
#include "image_check.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <driver_types.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

#define JIT_MAX_OPTIONS RGPU_JIT_MAX_OPTIONS
#define JIT_MAX_NAMES   RGPU_JIT_MAX_NAMES
#define JIT_NAME_MAX    RGPU_JIT_NAME_MAX   /* also a link input's name */
#define JIT_LOG_MAX     (1u << 20)  /* per log buffer */
#define MAX_LINKS       256         /* live link states of a session */

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

/* [str...] as a NULL-terminated array of our own strings in *out (to be
 * freed by jit_free, filled or not): 0 or -RGPU_E*. */
static int decode_names(const msgpack_object *arr, char ***out)
{
    *out = NULL;
    PROTO_IF(arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size > JIT_MAX_NAMES);
    uint32_t n = arr->via.array.size;
    char **names = calloc((size_t)n + 1, sizeof *names);
    if (!names)
        return -RGPU_ENOMEM;
    *out = names;
    for (uint32_t k = 0; k < n; k++) {
        const msgpack_object *s = &arr->via.array.ptr[k];
        PROTO_IF(s->type != MSGPACK_OBJECT_STR || s->via.str.size >= JIT_NAME_MAX);
        names[k] = strndup(s->via.str.size ? s->via.str.ptr : "", s->via.str.size);
        if (!names[k])
            return -RGPU_ENOMEM;
    }
    return 0;
}

/* Option i's value from the wire [id, value]: 0, a CUresult, or -RGPU_E*. */
static int decode_option(struct jit_opts *o, unsigned i, const msgpack_object *pair)
{
    PROTO_IF(pair->type != MSGPACK_OBJECT_ARRAY || pair->via.array.size != 2 ||
             pair->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER);
    uint64_t id = pair->via.array.ptr[0].via.u64;
    const msgpack_object *v = &pair->via.array.ptr[1];
    o->id[i] = (CUjit_option)(id < CU_JIT_NUM_OPTIONS ? id : 0);
    switch (jit_kind(id)) {
    case JIT_UNKNOWN:
        rgpu_warn("refusing JIT option %llu: unknown to this rgpud", (unsigned long long)id);
        return CUDA_ERROR_INVALID_VALUE;
    case JIT_REFUSED:
        rgpu_warn("refusing JIT option %llu: its values point into the client's memory",
                  (unsigned long long)id);
        return CUDA_ERROR_NOT_SUPPORTED;
    case JIT_NUMBER:
        /* Passed on as the client's slot held it: never dereferenced. */
        PROTO_IF(v->type != MSGPACK_OBJECT_POSITIVE_INTEGER);
        o->val[i] = (void *)(uintptr_t)v->via.u64;
        return 0;
    case JIT_OUTPUT:
    case JIT_LOG:
        PROTO_IF(v->type != MSGPACK_OBJECT_NIL);
        o->val[i] = NULL;
        return 0;
    case JIT_NAMES: {
        char **names;
        int rc = decode_names(v, &names);
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

/* The [[id, value]...] at args[i]: 0, a CUresult (nothing called), or
 * -RGPU_E*.  o is to be freed whatever it returns. */
static int jit_decode(const struct hand_call *c, unsigned arg, struct jit_opts *o)
{
    memset(o, 0, sizeof *o);
    const msgpack_object *arr = &c->args->via.array.ptr[arg];
    PROTO_IF(arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size > JIT_MAX_OPTIONS);
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < arr->via.array.size; i++, o->n++)
        rc = decode_option(o, i, &arr->via.array.ptr[i]);
    for (unsigned i = 0; rc == 0 && i < o->n; i++)
        rc = bind_option(o, i);
    return rc;
}

/* What the library wrote into the options: [[id, value]...]. */
static void jit_pack_outputs(msgpack_packer *pk, const struct jit_opts *o)
{
    unsigned n = 0;
    for (unsigned i = 0; o && i < o->n; i++)
        n += o->id[i] == CU_JIT_THREADS_PER_BLOCK || o->id[i] == CU_JIT_WALL_TIME ||
             o->id[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
             o->id[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES || jit_kind(o->id[i]) == JIT_LOG;
    msgpack_pack_array(pk, n);
    for (unsigned i = 0; o && i < o->n; i++) {
        CUjit_option id = o->id[i];
        if (jit_kind(id) == JIT_LOG) {
            /* No buffer when the options were refused before the call. */
            const char *text = o->val[i] ? o->val[i] : "";
            msgpack_pack_array(pk, 2);
            msgpack_pack_uint32(pk, id);
            msgpack_pack_bin_with_body(pk, text, strnlen(text, o->log_size[i]));
        } else if (id == CU_JIT_WALL_TIME) {
            uint32_t bits;      /* a float in the slot's first bytes */
            memcpy(&bits, &o->val[i], sizeof bits);
            msgpack_pack_array(pk, 2);
            msgpack_pack_uint32(pk, id);
            msgpack_pack_uint32(pk, bits);
        } else if (id == CU_JIT_THREADS_PER_BLOCK || id == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
                   id == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            msgpack_pack_array(pk, 2);
            msgpack_pack_uint32(pk, id);
            msgpack_pack_uint32(pk, (uint32_t)(uintptr_t)o->val[i]);
        }
    }
}

/* ---- loading modules and libraries -------------------------------------------- */

static unsigned nargs(const struct hand_call *c)
{
    return c->args->type == MSGPACK_OBJECT_ARRAY ? c->args->via.array.size : 0;
}

/* A module or library handle and the JIT outputs, after a load. */
static int load_reply(struct hand_call *c, uint64_t handle, const struct jit_opts *o, int rc)
{
    msgpack_pack_array(c->out, 2);
    msgpack_pack_uint64(c->out, handle);
    jit_pack_outputs(c->out, o);
    return rc;
}

/* [image] or [[jit options], image]: the image and the options, decoded;
 * status as jit_decode's. */
static int load_args(struct hand_call *c, struct image_arg *img, struct jit_opts *o)
{
    unsigned n = nargs(c);
    memset(o, 0, sizeof *o);
    PROTO_IF(n != 1 && n != 2);
    PROTO_IF(image_arg(c, n - 1, img) < 0);
    return n == 2 ? jit_decode(c, 0, o) : 0;
}

typedef int (*load_fn)(uint64_t *handle, const void *image, struct jit_opts *o);

/* The steps every load shares: arguments, image checks, a copy with zeros
 * after it, the library's call, the handle recorded as class cls. */
static int load(struct hand_call *c, load_fn fn, uint32_t cls)
{
    struct image_arg img = { 0 };
    struct jit_opts o;
    uint64_t handle = 0;
    void *copy = NULL;
    int rc = load_args(c, &img, &o);
    if (rc == 0 && !image_acceptable(img.p, img.n))
        rc = CUDA_ERROR_INVALID_IMAGE;
    if (rc == 0) {
        copy = image_for_library(&img);
        rc = copy ? fn(&handle, copy, &o) : -RGPU_ENOMEM;
    }
    image_done(&img, copy);
    if (rc == CUDA_SUCCESS)
        handles_add(cls, handle);
    if (rc >= 0)
        load_reply(c, handle, &o, rc);
    jit_free(&o);
    return rc;
}

static int module_load(uint64_t *handle, const void *image, struct jit_opts *o)
{
    CUmodule mod = NULL;
    NEED(REAL(cuModuleLoadData));
    NEED(REAL(cuModuleLoadDataEx));
    int rc = o->n ? REAL(cuModuleLoadDataEx)(&mod, image, o->n, o->id, o->val)
                  : REAL(cuModuleLoadData)(&mod, image);
    *handle = (uint64_t)(uintptr_t)mod;
    return rc;
}

/* The library options are the client's business (stubs/cuda_modules.c):
 * none reaches the library, CU_LIBRARY_BINARY_IS_PRESERVED least of all,
 * since the image is freed once the call returns. */
static int library_load(uint64_t *handle, const void *image, struct jit_opts *o)
{
    CUlibrary lib = NULL;
    NEED(REAL(cuLibraryLoadData));
    int rc = REAL(cuLibraryLoadData)(&lib, image, o->n ? o->id : NULL, o->n ? o->val : NULL,
                                     o->n, NULL, NULL, 0);
    *handle = (uint64_t)(uintptr_t)lib;
    return rc;
}

/* [image] or [[jit options], image] -> [module, [jit outputs]] */
static int h_module_load(struct hand_call *c)
{
    return load(c, module_load, H_MODULE);
}

/* [image] or [[jit options], image] -> [library, [jit outputs]] */
static int h_library_load(struct hand_call *c)
{
    return load(c, library_load, H_LIBRARY);
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

/* [[jit options]] -> [link, [jit outputs]] */
static int link_create(struct hand_call *c)
{
    NEED(REAL(cuLinkCreate_v2));
    PROTO_IF(args_count(c, 1));
    if (nlinks >= MAX_LINKS) {
        rgpu_warn("refusing a link state: the session holds %u", nlinks);
        return load_reply(c, 0, NULL, CUDA_ERROR_OUT_OF_MEMORY);
    }
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return -RGPU_ENOMEM;
    int rc = jit_decode(c, 0, &l->opts);
    if (rc == 0)
        rc = REAL(cuLinkCreate_v2)(l->opts.n, l->opts.id, l->opts.val, &l->state);
    if (rc >= 0)
        load_reply(c, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)l->state : 0, &l->opts, rc);
    if (rc == CUDA_SUCCESS) {
        l->next = links;
        links = l;
        nlinks++;
    } else {
        jit_free(&l->opts);
        free(l);
    }
    return rc;
}

/* [link, type, name, [jit options], image] -> [[create's outputs], [own]] */
static int link_add(struct hand_call *c)
{
    uint64_t h, type;
    char name[JIT_NAME_MAX];
    struct image_arg img = { 0 };
    struct jit_opts o = { 0 };
    NEED(REAL(cuLinkAddData_v2));
    PROTO_IF(args_count(c, 5) || arg_u64(c, 0, &h) || arg_u64(c, 1, &type) || type > UINT32_MAX);
    int named = c->args->via.array.ptr[2].type != MSGPACK_OBJECT_NIL;
    PROTO_IF(named && arg_str(c, 2, name, sizeof name));
    PROTO_IF(image_arg(c, 4, &img) < 0);
    struct link *l = link_find(h);
    int rc = l ? jit_decode(c, 3, &o) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == 0 && !image_acceptable_sized(img.p, img.n))
        rc = CUDA_ERROR_INVALID_IMAGE;
    void *copy = NULL;
    if (rc == 0) {
        copy = image_for_library(&img);
        rc = copy ? (int)REAL(cuLinkAddData_v2)(l->state, (CUjitInputType)type, copy, img.n,
                                                named ? name : NULL, o.n, o.id, o.val)
                  : -RGPU_ENOMEM;
    }
    image_done(&img, copy);
    if (rc >= 0) {
        msgpack_pack_array(c->out, 2);
        jit_pack_outputs(c->out, l ? &l->opts : NULL);
        jit_pack_outputs(c->out, &o);
    }
    jit_free(&o);
    return rc;
}

/* [link] -> [size, [create's outputs], bin first bytes] */
static int link_complete(struct hand_call *c)
{
    uint64_t h;
    void *image = NULL;
    size_t size = 0;
    NEED(REAL(cuLinkComplete));
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &h));
    struct link *l = link_find(h);
    int rc = l ? REAL(cuLinkComplete)(l->state, &image, &size) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && !image && size)
        rc = CUDA_ERROR_UNKNOWN;
    size_t first = rc == CUDA_SUCCESS && size < RGPU_IMAGE_PIECE ? size
                   : rc == CUDA_SUCCESS                          ? RGPU_IMAGE_PIECE
                                                                 : 0;
    void *bytes = malloc(first ? first : 1);
    if (!bytes)
        return -RGPU_ENOMEM;
    if (rc == CUDA_SUCCESS) {
        l->image = image;
        l->size = size;
        memcpy(bytes, image, first);
    }
    msgpack_pack_array(c->out, 3);
    msgpack_pack_uint64(c->out, rc == CUDA_SUCCESS ? size : 0);
    jit_pack_outputs(c->out, l ? &l->opts : NULL);
    hand_payload(c, bytes, first);
    return rc;
}

/* [link, offset, length] -> [bin] */
static int link_read(struct hand_call *c)
{
    uint64_t h, off, len;
    PROTO_IF(args_count(c, 3) || arg_u64(c, 0, &h) || arg_u64(c, 1, &off) ||
             arg_u64(c, 2, &len));
    struct link *l = link_find(h);
    if (!l || !l->image || off > l->size || len > l->size - off || len > RGPU_IMAGE_PIECE) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_bin(c->out, 0);
        return l ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    }
    void *bytes = malloc(len ? len : 1);
    if (!bytes)
        return -RGPU_ENOMEM;
    memcpy(bytes, (const char *)l->image + off, len);
    msgpack_pack_array(c->out, 1);
    hand_payload(c, bytes, len);
    return CUDA_SUCCESS;
}

/* [link] -> [] */
static int link_destroy(struct hand_call *c)
{
    uint64_t h;
    NEED(REAL(cuLinkDestroy));
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &h));
    struct link *l = link_find(h);
    msgpack_pack_array(c->out, 0);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    int rc = REAL(cuLinkDestroy)(l->state);
    link_forget(l);
    jit_free(&l->opts);
    free(l);
    return rc;
}

/* Each link procedure under the lock. */
static int locked(int (*fn)(struct hand_call *), struct hand_call *c)
{
    pthread_mutex_lock(&links_lock);
    int rc = fn(c);
    pthread_mutex_unlock(&links_lock);
    return rc;
}

static int h_link_create(struct hand_call *c) { return locked(link_create, c); }
static int h_link_add(struct hand_call *c) { return locked(link_add, c); }
static int h_link_complete(struct hand_call *c) { return locked(link_complete, c); }
static int h_link_read(struct hand_call *c) { return locked(link_read, c); }
static int h_link_destroy(struct hand_call *c) { return locked(link_destroy, c); }

/* ---- pieces of large images ------------------------------------------------------- */

static int h_cuda_piece(struct hand_call *c)
{
    return image_piece(c, CUDA_ERROR_OUT_OF_MEMORY);
}

/* The runtime's fatbins (rgpu.lib_load, daemon/hand_cudart.c). */
static int h_cudart_piece(struct hand_call *c)
{
    return image_piece(c, cudaErrorMemoryAllocation);
}

const struct hand_proc hand_module_procs[] = {
    { "cuda", RGPU_H_CU_MODULE_LOAD, h_module_load },
    { "cuda", RGPU_H_CU_LIBRARY_LOAD, h_library_load },
    { "cuda", RGPU_H_CU_LINK_CREATE, h_link_create },
    { "cuda", RGPU_H_CU_LINK_ADD, h_link_add },
    { "cuda", RGPU_H_CU_LINK_COMPLETE, h_link_complete },
    { "cuda", RGPU_H_CU_LINK_READ, h_link_read },
    { "cuda", RGPU_H_CU_LINK_DESTROY, h_link_destroy },
    { "cuda", RGPU_H_IMAGE_PIECE, h_cuda_piece },
    { "cudart", RGPU_H_IMAGE_PIECE, h_cudart_piece },
};
const int hand_module_nprocs = sizeof hand_module_procs / sizeof hand_module_procs[0];
