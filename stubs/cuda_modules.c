/* Modules, libraries and JIT linking of libcuda.so.1, client side, through
 * rgpu's own procedures (codegen/cuda_own.h; server side:
 * daemon/hand_cuda_modules.c).
 *
 * Images travel as bytes, larger ones in pieces ahead of the call
 * (common/rgpu_image.c).  Files are the client's: cuModuleLoad and
 * cuLinkAddFile read them here and send their bytes.  JIT options travel
 * by value; the library's outputs (log texts, log sizes, wall time,
 * threads per block) come back with each reply and are written where the
 * program asked: its log buffers, bounded by the sizes it gave, and its
 * option values.  A link state keeps the program's option values and log
 * buffers, as the driver does, and each link call writes them again; the
 * linked image is copied here and lives until cuLinkDestroy. */
#include "rgpu_client.h"
#include "rgpu_fatbin.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

/* ---- image sizes ----------------------------------------------------------------- */

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* A cubin's extent as the server checks it (daemon/image_check.c): its
 * header, both header tables, every section's bytes whatever its type
 * (a section without file bytes, SHT_NOBITS: its offset) and every
 * segment's. */
static size_t elf_size(const unsigned char *p)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
    size_t end = max_size(sizeof *eh, eh->e_ehsize);
    end = max_size(end, eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize);
    end = max_size(end, eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *sh = (const void *)(p + eh->e_shoff + (size_t)i * eh->e_shentsize);
        end = max_size(end, sh->sh_offset + (sh->sh_type == SHT_NOBITS ? 0 : sh->sh_size));
    }
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const void *)(p + eh->e_phoff + (size_t)i * eh->e_phentsize);
        end = max_size(end, ph->p_offset + ph->p_filesz);
    }
    return end;
}

/* The size of a module image, read from its own headers: fatbin, cubin
 * (ELF) or PTX text.  0 when it is none of those. */
static size_t image_size(const void **image)
{
    const unsigned char *p = *image;
    uint32_t magic = rgpu_get32(p);
    if (magic == RGPU_FATBIN_WRAPPER_MAGIC) {
        /* The server refuses wrappers (it would follow their pointer into
         * its own memory): send the container the wrapper points at. */
        const unsigned char *inner = ((const struct rgpu_fatbin_wrapper *)p)->data;
        if (!inner || rgpu_get32(inner) != RGPU_FATBIN_MAGIC)
            return 0;
        *image = inner;
        return image_size(image);
    }
    /* One container: others may follow in the caller's memory, but the
     * driver reads the first only. */
    if (magic == RGPU_FATBIN_MAGIC)
        return rgpu_fatbin_size(p);
    if (memcmp(p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64)
        return elf_size(p);
    return strlen((const char *)p) + 1;     /* PTX */
}

/* A client file's bytes, NUL-terminated (PTX is read as a string): 0, or
 * the driver's status. */
static CUresult read_file(const char *path, char **bytes, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    CUresult rc = CUDA_SUCCESS;
    do {
        if (len + 65536 + 1 > cap) {
            cap = (len + 65536 + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, 65536, f);
        len += n;
    } while (n > 0);
    if (rc == CUDA_SUCCESS && ferror(f))
        rc = CUDA_ERROR_FILE_NOT_FOUND;
    fclose(f);
    if (rc != CUDA_SUCCESS) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *bytes = buf;
    *size = len;
    return CUDA_SUCCESS;
}

/* ---- JIT options ------------------------------------------------------------------ */

/* The program's options as their outputs must be written back: the
 * values array is the program's; its log buffers and their sizes as they
 * were when the call began (the driver overwrites a size with what it
 * wrote, so a link state's later calls must not read it again). */
struct jit {
    unsigned n;
    CUjit_option *id;           /* a copy (a link state outlives the caller's) */
    void **val;                 /* the program's */
    char *log_buf[RGPU_JIT_MAX_OPTIONS];
    unsigned log_cap[RGPU_JIT_MAX_OPTIONS];
};

static int jit_find(const struct jit *j, CUjit_option id)
{
    for (unsigned i = 0; i < j->n; i++)
        if (j->id[i] == id)
            return (int)i;
    return -1;
}

static unsigned slot_u32(void *v)
{
    return (unsigned)(uintptr_t)v;
}

/* The count option that says how long a name list is. */
static CUjit_option names_count(CUjit_option names)
{
    return names == CU_JIT_REFERENCED_KERNEL_NAMES ? CU_JIT_REFERENCED_KERNEL_COUNT
                                                   : CU_JIT_REFERENCED_VARIABLE_COUNT;
}

static int is_names(CUjit_option id)
{
    return id == CU_JIT_REFERENCED_KERNEL_NAMES || id == CU_JIT_REFERENCED_VARIABLE_NAMES;
}

static int is_log(CUjit_option id)
{
    return id == CU_JIT_INFO_LOG_BUFFER || id == CU_JIT_ERROR_LOG_BUFFER;
}

static unsigned names_len(const struct jit *j, unsigned i)
{
    int c = jit_find(j, names_count(j->id[i]));
    return c >= 0 ? slot_u32(j->val[c]) : 0;
}

/* Whether a name list can travel (the server's bounds). */
static int names_ok(const struct jit *j, unsigned i)
{
    const char *const *names = j->val[i];
    unsigned n = names_len(j, i);
    if (n > RGPU_JIT_MAX_NAMES || (n && !names))
        return 0;
    for (unsigned k = 0; k < n; k++)
        if (!names[k] || strnlen(names[k], RGPU_JIT_NAME_MAX) >= RGPU_JIT_NAME_MAX)
            return 0;
    return 1;
}

/* Takes the program's options: CUDA_SUCCESS, or the status to return
 * before anything is sent.  j->id is a copy to free (jit_free). */
static CUresult jit_take(struct jit *j, unsigned n, const CUjit_option *id, void **val)
{
    memset(j, 0, sizeof *j);
    if (n && (!id || !val))
        return CUDA_ERROR_INVALID_VALUE;
    if (n > RGPU_JIT_MAX_OPTIONS)
        return CUDA_ERROR_INVALID_VALUE;
    j->id = malloc((n ? n : 1) * sizeof *j->id);
    if (!j->id)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (n)
        memcpy(j->id, id, n * sizeof *id);
    j->n = n;
    j->val = val;
    for (unsigned i = 0; i < n; i++) {
        if (id[i] == CU_JIT_GLOBAL_SYMBOL_NAMES || id[i] == CU_JIT_GLOBAL_SYMBOL_ADDRESSES) {
            static int logged;
            return rgpu_refused(LIB, "CU_JIT_GLOBAL_SYMBOL_ADDRESSES",
                                "symbol relocations to host addresses of the client", &logged);
        }
        if (is_names(id[i]) && !names_ok(j, i))
            return CUDA_ERROR_INVALID_VALUE;
        if (is_log(id[i])) {
            int s = jit_find(j, id[i] == CU_JIT_INFO_LOG_BUFFER
                                    ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                    : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
            j->log_buf[i] = val[i];
            j->log_cap[i] = s >= 0 && val[i] ? slot_u32(val[s]) : 0;
        }
    }
    return CUDA_SUCCESS;
}

static void jit_free(struct jit *j)
{
    free(j->id);
    j->id = NULL;
    j->n = 0;
}

/* The options as they travel (struct rgpu_jit_option): records, the name
 * lists' strings one after another, and room for the logs the library
 * writes (their texts come back one after the other, each cut to the
 * program's buffer). */
struct jit_wire {
    struct rgpu_jit_option opt[RGPU_JIT_MAX_OPTIONS];
    size_t n;
    char *names;
    size_t names_size;
    char *logs;
    size_t logs_size;
};

/* The room a log of option i needs: the program's buffer, as far as the
 * server fills one. */
static size_t log_room(const struct jit *j, unsigned i)
{
    return j->log_cap[i] < RGPU_JIT_LOG_MAX ? j->log_cap[i] : RGPU_JIT_LOG_MAX;
}

/* CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY; jit_wire_free in both cases. */
static CUresult jit_wire(const struct jit *j, struct jit_wire *w)
{
    memset(w, 0, sizeof *w);
    w->n = j->n;
    for (unsigned i = 0; i < j->n; i++) {
        w->opt[i].id = (uint32_t)j->id[i];
        if (is_log(j->id[i])) {
            w->logs_size += log_room(j, i);
        } else if (is_names(j->id[i])) {
            const char *const *names = j->val[i];
            w->opt[i].value = names_len(j, i);
            for (unsigned k = 0; k < w->opt[i].value; k++)
                w->names_size += strlen(names[k]) + 1;
        } else if (j->id[i] != CU_JIT_WALL_TIME) {
            w->opt[i].value = (uint64_t)(uintptr_t)j->val[i];
        }
    }
    if ((w->names_size && !(w->names = malloc(w->names_size))) ||
        (w->logs_size && !(w->logs = malloc(w->logs_size))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t at = 0;
    for (unsigned i = 0; i < j->n; i++) {
        const char *const *names = j->val[i];
        for (unsigned k = 0; is_names(j->id[i]) && k < w->opt[i].value; k++) {
            size_t len = strlen(names[k]) + 1;
            memcpy(w->names + at, names[k], len);
            at += len;
        }
    }
    return CUDA_SUCCESS;
}

static void jit_wire_free(struct jit_wire *w)
{
    free(w->names);
    free(w->logs);
    w->names = w->logs = NULL;
}

/* A log's text into the program's buffer, cut to the size it gave. */
static void copy_log(const struct jit *j, unsigned i, const char *text, size_t len)
{
    if (!j->log_buf[i] || !j->log_cap[i])
        return;
    size_t n = len < j->log_cap[i] - 1 ? len : j->log_cap[i] - 1;
    if (n)
        memcpy(j->log_buf[i], text, n);
    j->log_buf[i][n] = '\0';
}

/* What the library wrote (r, and used bytes of log texts) into every
 * option of the program's that it answers. */
static void jit_apply(const struct jit *j, const struct rgpu_jit_result *r, const char *logs,
                      size_t used)
{
    size_t info = r->info_log_len, error = r->error_log_len;
    if (info > used || error > used - info)
        info = error = 0;           /* not what the server's logs hold */
    for (unsigned i = 0; i < j->n; i++) {
        switch ((int)j->id[i]) {
        case CU_JIT_INFO_LOG_BUFFER:
            copy_log(j, i, logs, info);
            break;
        case CU_JIT_ERROR_LOG_BUFFER:
            copy_log(j, i, logs ? logs + info : NULL, error);
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            j->val[i] = (void *)(uintptr_t)r->info_log_size;
            break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            j->val[i] = (void *)(uintptr_t)r->error_log_size;
            break;
        case CU_JIT_THREADS_PER_BLOCK:
            j->val[i] = (void *)(uintptr_t)r->threads_per_block;
            break;
        case CU_JIT_WALL_TIME:      /* a float, as the driver stores it */
            memcpy(&j->val[i], &r->wall_time, sizeof r->wall_time);
            break;
        default:
            break;
        }
    }
}

/* ---- modules and libraries ----------------------------------------------------------- */

/* The compute capabilities of the server's GPUs (major * 10 + minor): the
 * fatbin entries the driver may load for them are those scanned for
 * printf (common/rgpu_printf_scan.c).  Asked once per device; 0 when they
 * cannot be told (every entry counts then). */
static size_t gpu_archs(unsigned archs[RGPU_MAX_GPU_ARCHS])
{
    int n = 0, major, minor;
    size_t k = 0;
    CUdevice dev;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS || n <= 0 || n > RGPU_MAX_GPU_ARCHS)
        return 0;
    while (k < (size_t)n && cuDeviceGet(&dev, (int)k) == CUDA_SUCCESS &&
           cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ==
               CUDA_SUCCESS &&
           cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) ==
               CUDA_SUCCESS)
        archs[k++] = (unsigned)(major * 10 + minor);
    return k == (size_t)n ? k : 0;
}

enum load_kind { LOAD_MODULE, LOAD_LIBRARY };

/* Loads an image as a module or a library, with the program's options. */
static CUresult load_image(enum load_kind kind, uint64_t *handle, const void *image,
                           struct jit *j)
{
    struct jit_wire w;
    struct rgpu_jit_result r = { 0 };
    const void *bytes;
    size_t used = 0;
    if (!handle || !image)
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = image_size(&image);
    if (!size)
        return CUDA_ERROR_INVALID_IMAGE;
    CUresult rc = jit_wire(j, &w);
    if (rc == CUDA_SUCCESS)
        rc = (CUresult)rgpu_image_stage(LIB, image, size, CUDA_ERROR_OUT_OF_MEMORY, &bytes);
    const struct rgpu_jit_option *opts = w.opt;
    int asked = rc == CUDA_SUCCESS;
    if (asked && kind == LOAD_MODULE)
        rc = rgpu_cu_module_load((CUmodule *)handle, opts, w.n, w.names, w.names_size, &r,
                                 w.logs, w.logs_size, &used, size, bytes);
    else if (asked)
        rc = rgpu_cu_library_load((CUlibrary *)handle, opts, w.n, w.names, w.names_size, &r,
                                  w.logs, w.logs_size, &used, size, bytes);
    if (asked)
        jit_apply(j, &r, w.logs, used);
    jit_wire_free(&w);
    if (rc == CUDA_SUCCESS) {
        unsigned archs[RGPU_MAX_GPU_ARCHS];
        /* Which kernels may printf (common/rgpu_printing.c). */
        rgpu_printing_image_loaded(*handle, image, size, archs, gpu_archs(archs));
    }
    return rc;
}

static CUresult load_with_options(enum load_kind kind, uint64_t *handle, const void *image,
                                  unsigned n, CUjit_option *options, void **values)
{
    struct jit j;
    CUresult rc = jit_take(&j, n, options, values);
    if (rc == CUDA_SUCCESS)
        rc = load_image(kind, handle, image, &j);
    jit_free(&j);
    return rc;
}

/* The file is the client's: read it here, send its bytes. */
#undef cuModuleLoad
RGPU_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    char *bytes;
    size_t len;
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = read_file(fname, &bytes, &len);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = len ? load_with_options(LOAD_MODULE, (uint64_t *)module,
                                 bytes, 0, NULL, NULL)
             : CUDA_ERROR_INVALID_IMAGE;
    free(bytes);
    return rc;
}

RGPU_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return load_with_options(LOAD_MODULE, (uint64_t *)module,
                             image, 0, NULL, NULL);
}

RGPU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                        unsigned int numOptions, CUjit_option *options,
                                        void **optionValues)
{
    return load_with_options(LOAD_MODULE, (uint64_t *)module,
                             image, numOptions, options, optionValues);
}

/* Library options are answered here: the image is copied to the server,
 * so the client keeps nothing and BINARY_IS_PRESERVED changes nothing; a
 * host function table would be the client's memory. */
static CUresult library_options(const CUlibraryOption *options, unsigned n)
{
    if (n && !options)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (options[i] == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE) {
            static int logged;
            return rgpu_refused(LIB, "cuLibraryLoadData(CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_"
                                     "AND_DATA_TABLE)",
                                "host function and data tables are the client's memory",
                                &logged);
        }
        if (options[i] != CU_LIBRARY_BINARY_IS_PRESERVED)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

RGPU_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions)
{
    (void)libraryOptionValues;
    CUresult rc = library_options(libraryOptions, numLibraryOptions);
    if (rc != CUDA_SUCCESS)
        return rc;
    return load_with_options(LOAD_LIBRARY, (uint64_t *)library,
                             code, numJitOptions, jitOptions, jitOptionsValues);
}

/* ---- JIT linking ------------------------------------------------------------------- */

struct image_block {
    void *bytes;
    struct image_block *next;
};

struct link {
    uint64_t handle;            /* the server's */
    struct jit opts;            /* the create's: written after every call */
    struct image_block *images; /* cuLinkComplete's, until cuLinkDestroy */
    struct link *next;
};

/* Held across each link call: one thread's destroy must not free a state
 * another thread is using (the server serialises them too). */
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct link *links;

static struct link *link_find(CUlinkState state)
{
    for (struct link *l = links; l; l = l->next)
        if (state && l->handle == (uint64_t)(uintptr_t)state)
            return l;
    return NULL;
}

/* A call's own options as they travel, and where their outputs land. */
struct jit_call {
    struct jit_wire w;
    struct rgpu_jit_result r;
    size_t used;
};

static CUresult link_create(unsigned n, CUjit_option *options, void **values,
                            CUlinkState *stateOut)
{
    struct jit_call c = { 0 };
    CUlinkState state = NULL;
    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = jit_take(&l->opts, n, options, values);
    if (rc == CUDA_SUCCESS && (rc = jit_wire(&l->opts, &c.w)) == CUDA_SUCCESS) {
        const struct rgpu_jit_option *opts = c.w.opt;
        rc = rgpu_cu_link_create(&state, opts, c.w.n, c.w.names, c.w.names_size, &c.r,
                                 c.w.logs, c.w.logs_size, &c.used);
        jit_apply(&l->opts, &c.r, c.w.logs, c.used);
    }
    jit_wire_free(&c.w);
    if (rc == CUDA_SUCCESS && !state)
        rc = rgpu_transport_status(LIB, "cuLinkCreate", RGPU_EPROTO);
    if (rc != CUDA_SUCCESS) {
        jit_free(&l->opts);
        free(l);
        return rc;
    }
    l->handle = (uint64_t)(uintptr_t)state;
    l->next = links;
    links = l;
    *stateOut = state;
    return CUDA_SUCCESS;
}

/* Room for the state's logs, which every link call brings back. */
static CUresult state_logs(const struct link *l, struct jit_call *c)
{
    return jit_wire(&l->opts, &c->w);
}

static CUresult link_add(struct link *l, CUjitInputType type, const void *data, size_t size,
                         const char *name, struct jit *own)
{
    struct jit_call st = { 0 }, c = { 0 };
    const void *bytes;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (name && strnlen(name, RGPU_JIT_NAME_MAX) >= RGPU_JIT_NAME_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = state_logs(l, &st);
    if (rc == CUDA_SUCCESS)
        rc = jit_wire(own, &c.w);
    if (rc == CUDA_SUCCESS)
        rc = (CUresult)rgpu_image_stage(LIB, data, size, CUDA_ERROR_OUT_OF_MEMORY, &bytes);
    if (rc == CUDA_SUCCESS) {
        const struct rgpu_jit_option *opts = c.w.opt;
        rc = rgpu_cu_link_add((CUlinkState)(uintptr_t)l->handle, type, name, opts, c.w.n,
                              c.w.names, c.w.names_size, &st.r, st.w.logs, st.w.logs_size,
                              &st.used, &c.r, c.w.logs, c.w.logs_size, &c.used, size, bytes);
        jit_apply(&l->opts, &st.r, st.w.logs, st.used);
        jit_apply(own, &c.r, c.w.logs, c.used);
    }
    jit_wire_free(&st.w);
    jit_wire_free(&c.w);
    return rc;
}

/* The linked image, copied into memory of ours that lives as long as the
 * state, in pieces of at most RGPU_IMAGE_PIECE bytes (a large piece
 * straight from the socket into it). */
static CUresult link_complete(struct link *l, void **cubinOut, size_t *sizeOut)
{
    struct jit_call st = { 0 };
    size_t size = 0;
    if (!cubinOut)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = state_logs(l, &st);
    if (rc == CUDA_SUCCESS) {
        rc = rgpu_cu_link_complete((CUlinkState)(uintptr_t)l->handle, &size, &st.r, st.w.logs,
                                   st.w.logs_size, &st.used);
        jit_apply(&l->opts, &st.r, st.w.logs, st.used);
    }
    jit_wire_free(&st.w);
    struct image_block *b = NULL;
    if (rc == CUDA_SUCCESS && (!(b = calloc(1, sizeof *b)) || !(b->bytes = malloc(size ? size : 1))))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t got = 0; rc == CUDA_SUCCESS && got < size;) {
        size_t len = size - got < RGPU_IMAGE_PIECE ? size - got : RGPU_IMAGE_PIECE;
        rc = rgpu_cu_link_read((CUlinkState)(uintptr_t)l->handle, got,
                               (unsigned char *)b->bytes + got, len);
        got += len;
    }
    if (rc != CUDA_SUCCESS) {
        if (b)
            free(b->bytes);
        free(b);
        return rc;
    }
    /* An earlier image stays valid too: the program may still use it. */
    b->next = l->images;
    l->images = b;
    *cubinOut = b->bytes;
    if (sizeOut)
        *sizeOut = size;
    return CUDA_SUCCESS;
}

static CUresult link_destroy(struct link *l)
{
    CUresult rc = rgpu_cu_link_destroy((CUlinkState)(uintptr_t)l->handle);
    for (struct link **p = &links; *p; p = &(*p)->next) {
        if (*p == l) {
            *p = l->next;
            break;
        }
    }
    while (l->images) {
        struct image_block *b = l->images;
        l->images = b->next;
        free(b->bytes);
        free(b);
    }
    jit_free(&l->opts);
    free(l);
    return rc;
}

/* The unversioned entry points have the _v2 signature: the version bump
 * changed what the driver does, not the arguments. */
#undef cuLinkCreate
RGPU_EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
                                     void **optionValues, CUlinkState *stateOut)
{
    pthread_mutex_lock(&links_lock);
    CUresult rc = link_create(numOptions, options, optionValues, stateOut);
    pthread_mutex_unlock(&links_lock);
    return rc;
}

CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                      CUlinkState *stateOut);
RGPU_EXPORT CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options,
                                  void **optionValues, CUlinkState *stateOut)
{
    return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

#undef cuLinkAddData
RGPU_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
                                      size_t size, const char *name, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
    struct jit own;
    CUresult rc = jit_take(&own, numOptions, options, optionValues);
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find(state);
    if (rc == CUDA_SUCCESS)
        rc = l ? link_add(l, type, data, size, name, &own) : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&links_lock);
    jit_free(&own);
    return rc;
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned int numOptions, CUjit_option *options,
                       void **optionValues);
RGPU_EXPORT CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data,
                                   size_t size, const char *name, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    return cuLinkAddData_v2(state, type, data, size, name, numOptions, options, optionValues);
}

/* The file is the client's: its bytes are added as data, named by its path. */
#undef cuLinkAddFile
RGPU_EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                      unsigned int numOptions, CUjit_option *options,
                                      void **optionValues)
{
    char *bytes;
    size_t len;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = read_file(path, &bytes, &len);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = cuLinkAddData_v2(state, type, bytes, len, path, numOptions, options, optionValues);
    free(bytes);
    return rc;
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                       unsigned int numOptions, CUjit_option *options, void **optionValues);
RGPU_EXPORT CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                                   unsigned int numOptions, CUjit_option *options,
                                   void **optionValues)
{
    return cuLinkAddFile_v2(state, type, path, numOptions, options, optionValues);
}

RGPU_EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find(state);
    CUresult rc = l ? link_complete(l, cubinOut, sizeOut) : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&links_lock);
    return rc;
}

RGPU_EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    pthread_mutex_lock(&links_lock);
    struct link *l = link_find(state);
    CUresult rc = l ? link_destroy(l) : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&links_lock);
    return rc;
}
