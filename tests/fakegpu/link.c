// Fake libcuda.so.1: JIT options and logs, and the cuLink* calls.
//
// The fake has no compiler: PTX and LTO-IR inputs fail with
// CUDA_ERROR_NOT_SUPPORTED (as PTX does in cuModuleLoadData), host objects
// and libraries too.  What it can read it "links": a cubin, or the entry
// for this GPU of a fatbin.  The result of one input is that input's cubin;
// of several, a fatbin container holding their cubins, those that define
// kernels first, since the fake's module loader takes the first cubin of a
// container that runs here (the fake runs kernels as CPU twins looked up
// by name, so nothing needs resolving between inputs).  The logs are real:
// one info line per input added and one for the result, an error line for
// what it refuses, in the caller's buffers, cut to the sizes given, with
// the sizes used written back.
#include "fakegpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FATBIN_MAGIC        0xBA55ED50u
#define FATBIN_KIND_ELF     2
#define FATBIN_ENTRY_FLAGS  0x11        // as nvcc writes them (README.md)
#define FATBIN_ELF_UNKNOWN1 0x10008

enum { LOG_INFO, LOG_ERROR };

// ---- JIT options -----------------------------------------------------------------------

static int find(const struct fg_jit *j, CUjit_option id)
{
    for (unsigned i = 0; i < j->n; i++)
        if (j->opt[i] == id)
            return (int)i;
    return -1;
}

// Options cuLinkAddData does not take: they belong to the link state.
static int state_only(CUjit_option id)
{
    return id == CU_JIT_WALL_TIME || id == CU_JIT_INFO_LOG_BUFFER ||
           id == CU_JIT_ERROR_LOG_BUFFER || id == CU_JIT_TARGET_FROM_CUCONTEXT ||
           id == CU_JIT_TARGET;
}

CUresult fg_jit_open(struct fg_jit *j, unsigned n, CUjit_option *opt, void **val,
                     int input)
{
    memset(j, 0, sizeof *j);
    if (n && (!opt || !val))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if ((unsigned)opt[i] >= CU_JIT_NUM_OPTIONS || (input && state_only(opt[i])))
            return CUDA_ERROR_INVALID_VALUE;
    // The ids are copied (only the values must outlive a link state's
    // create); the values array is the caller's, written into later.
    j->opt = malloc((n ? n : 1) * sizeof *opt);
    if (!j->opt)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (n)
        memcpy(j->opt, opt, n * sizeof *opt);
    j->n = n;
    j->val = val;
    static const CUjit_option logs[2][2] = {
        { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES },
        { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES },
    };
    for (int k = 0; k < 2; k++) {
        int b = find(j, logs[k][0]), s = find(j, logs[k][1]);
        if (b >= 0 && s >= 0 && val[b]) {
            j->buf[k] = val[b];
            j->cap[k] = (unsigned)(uintptr_t)val[s];
        }
    }
    return CUDA_SUCCESS;
}

static void append(struct fg_jit *j, int k, const char *fmt, va_list ap)
{
    char line[512];
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    char *grown = realloc(j->log[k], j->len[k] + (size_t)n + 1);
    if (!grown)
        return;
    memcpy(grown + j->len[k], line, (size_t)n);
    j->len[k] += (size_t)n;
    grown[j->len[k]] = '\0';
    j->log[k] = grown;
}

void fg_jit_info(struct fg_jit *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(j, LOG_INFO, fmt, ap);
    va_end(ap);
}

void fg_jit_error(struct fg_jit *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(j, LOG_ERROR, fmt, ap);
    va_end(ap);
}

void fg_jit_flush(struct fg_jit *j)
{
    static const CUjit_option size_opt[2] = { CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    for (int k = 0; k < 2; k++) {
        if (!j->buf[k] || !j->cap[k])
            continue;
        // Capped at the size given, the terminating NUL included.
        size_t n = j->len[k] < j->cap[k] - 1 ? j->len[k] : j->cap[k] - 1;
        if (n)
            memcpy(j->buf[k], j->log[k], n);
        j->buf[k][n] = '\0';
        j->val[find(j, size_opt[k])] = (void *)(uintptr_t)(n + 1);
    }
    int w = find(j, CU_JIT_WALL_TIME);
    if (w >= 0) {
        float ms = (float)j->ms;        // a float in the value's slot
        memcpy(&j->val[w], &ms, sizeof ms);
    }
}

void fg_jit_close(struct fg_jit *j)
{
    free(j->opt);
    free(j->log[LOG_INFO]);
    free(j->log[LOG_ERROR]);
    memset(j, 0, sizeof *j);
}

// ---- Link states ------------------------------------------------------------------------

struct input {
    unsigned char *elf;
    size_t size;
    unsigned kernels;
};

struct fg_link {
    CUlinkState handle;
    struct fg_jit jit;          // the create's options: logs kept till destroy
    struct input *in;
    unsigned nin;
    unsigned char *out;         // cuLinkComplete's image
    size_t out_size;
};

static struct fg_link *link_get(CUlinkState h)
{
    return fg_handle_get((uint64_t)(uintptr_t)h, FG_LINK);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option *options, void **values,
                                 CUlinkState *state)
{
    struct fg_ctx *c;
    struct fg_link *l;
    CUresult r;

    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    r = fg_enter(0, &c, NULL);
    l = r == CUDA_SUCCESS ? calloc(1, sizeof *l) : NULL;
    if (r == CUDA_SUCCESS && !l)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        r = fg_jit_open(&l->jit, n, options, values, 0);
    if (r == CUDA_SUCCESS) {
        l->handle = (CUlinkState)(uintptr_t)fg_handle_new(FG_LINK, l, NULL);
        if (!l->handle)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        fg_jit_flush(&l->jit);
        *state = l->handle;
    } else if (l) {
        fg_jit_close(&l->jit);
        free(l);
    }
    fg_unlock();
    return r;
}

#undef cuLinkCreate
CUresult CUDAAPI cuLinkCreate(unsigned int n, CUjit_option *options, void **values,
                              CUlinkState *state);
CUresult CUDAAPI cuLinkCreate(unsigned int n, CUjit_option *options, void **values,
                              CUlinkState *state)
{
    return cuLinkCreate_v2(n, options, values, state);
}

static const char *shown(const char *name)
{
    return name ? name : "(unnamed)";
}

// A cubin or fatbin input: its cubin joins the link, or the error log says
// why not.
static CUresult add_image(struct fg_link *l, const void *data, size_t size,
                          const char *name)
{
    struct input in;
    uint32_t magic = 0;
    const char *kind;

    if (size >= 4)
        memcpy(&magic, data, 4);
    kind = magic == FATBIN_MAGIC ? "fatbin" : "cubin";
    CUresult r = fg_image_elf(data, size, &in.elf, &in.size, &in.kernels);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        fg_jit_error(&l->jit, "fakegpu link: cannot compile the PTX of '%s': the fake GPU has "
                     "no JIT compiler", shown(name));
    else if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
        fg_jit_error(&l->jit, "fakegpu link: '%s' holds no code for sm_%d", shown(name),
                     FG_SM_ARCH);
    else if (r != CUDA_SUCCESS)
        fg_jit_error(&l->jit, "fakegpu link: '%s' is not a %s the fake GPU can read",
                     shown(name), kind);
    if (r != CUDA_SUCCESS)
        return r;
    struct input *grown = realloc(l->in, (l->nin + 1) * sizeof *grown);
    if (!grown) {
        free(in.elf);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    l->in = grown;
    l->in[l->nin++] = in;
    fg_jit_info(&l->jit, "fakegpu link: added %s '%s' (%zu bytes)", kind, shown(name), size);
    return CUDA_SUCCESS;
}

static CUresult add_input(struct fg_link *l, CUjitInputType type, const void *data,
                          size_t size, const char *name)
{
    if (!data || !size) {
        fg_jit_error(&l->jit, "fakegpu link: input '%s' is empty", shown(name));
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (type) {
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_FATBINARY:
        return add_image(l, data, size, name);
    case CU_JIT_INPUT_PTX:
        fg_jit_error(&l->jit, "fakegpu link: cannot compile PTX '%s': the fake GPU has no JIT "
                     "compiler", shown(name));
        return CUDA_ERROR_NOT_SUPPORTED;
    case CU_JIT_INPUT_NVVM:
        fg_jit_error(&l->jit, "fakegpu link: cannot compile LTO-IR '%s': the fake GPU has no "
                     "JIT compiler", shown(name));
        return CUDA_ERROR_NOT_SUPPORTED;
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
        fg_jit_error(&l->jit, "fakegpu link: cannot read host object or library '%s'",
                     shown(name));
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data,
                                  size_t size, const char *name, unsigned int n,
                                  CUjit_option *options, void **values)
{
    struct fg_ctx *c;
    struct fg_link *l;
    struct fg_jit own;
    double t0 = now_ms();

    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    l = link_get(state);
    if (r == CUDA_SUCCESS && !l)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS) {
        // Options of one input: compiler options, which the fake ignores.
        r = fg_jit_open(&own, n, options, values, 1);
        fg_jit_close(&own);
        if (r != CUDA_SUCCESS)
            fg_jit_error(&l->jit, "fakegpu link: options of '%s' the linker does not take "
                         "for one input", shown(name));
    }
    if (r == CUDA_SUCCESS)
        r = add_input(l, type, data, size, name);
    if (l) {
        l->jit.ms += now_ms() - t0;
        fg_jit_flush(&l->jit);
    }
    fg_unlock();
    return r;
}

#undef cuLinkAddData
CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data,
                               size_t size, const char *name, unsigned int n,
                               CUjit_option *options, void **values);
CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data,
                               size_t size, const char *name, unsigned int n,
                               CUjit_option *options, void **values)
{
    return cuLinkAddData_v2(state, type, data, size, name, n, options, values);
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                  unsigned int n, CUjit_option *options, void **values)
{
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    unsigned char *data = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *grown = realloc(data, cap + 1);
            if (!grown) {
                free(data);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            data = grown;
        }
        got = fread(data + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    data[len] = '\0';                   // PTX is a string
    CUresult r = cuLinkAddData_v2(state, type, data, len, path, n, options, values);
    free(data);
    return r;
}

#undef cuLinkAddFile
CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                               unsigned int n, CUjit_option *options, void **values);
CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                               unsigned int n, CUjit_option *options, void **values)
{
    return cuLinkAddFile_v2(state, type, path, n, options, values);
}

// Several cubins as one fatbin container: kernel-defining cubins first.
static CUresult container_of(const struct fg_link *l, unsigned char **out, size_t *size)
{
    size_t total = 16;
    for (unsigned i = 0; i < l->nin; i++)
        total += 64 + ((l->in[i].size + 7) & ~(size_t)7);
    unsigned char *c = calloc(1, total);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint32_t magic = FATBIN_MAGIC;
    uint16_t version = 1, header_size = 16;
    uint64_t fat = total - 16;
    memcpy(c, &magic, 4);
    memcpy(c + 4, &version, 2);
    memcpy(c + 6, &header_size, 2);
    memcpy(c + 8, &fat, 8);
    size_t off = 16;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < l->nin; i++) {
            const struct input *in = &l->in[i];
            if ((in->kernels > 0) != (pass == 0))
                continue;
            uint16_t kind = FATBIN_KIND_ELF, ever = 0x101;
            uint32_t hsize = 64, unknown1 = FATBIN_ELF_UNKNOWN1, arch = FG_SM_ARCH;
            uint64_t payload = (in->size + 7) & ~(size_t)7, flags = FATBIN_ENTRY_FLAGS;
            memcpy(c + off, &kind, 2);
            memcpy(c + off + 2, &ever, 2);
            memcpy(c + off + 4, &hsize, 4);
            memcpy(c + off + 8, &payload, 8);
            memcpy(c + off + 24, &unknown1, 4);
            memcpy(c + off + 28, &arch, 4);
            memcpy(c + off + 40, &flags, 8);
            memcpy(c + off + 64, in->elf, in->size);
            off += 64 + payload;
        }
    }
    *out = c;
    *size = total;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
    struct fg_ctx *c;
    struct fg_link *l;
    unsigned char *out = NULL;
    size_t out_size = 0;
    double t0 = now_ms();

    if (!cubin)
        return CUDA_ERROR_INVALID_VALUE;
    fg_lock();
    CUresult r = fg_enter(0, &c, NULL);
    l = link_get(state);
    if (r == CUDA_SUCCESS && !l)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && l->nin == 0) {
        fg_jit_error(&l->jit, "fakegpu link: no input to link");
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS && l->nin == 1) {
        out_size = l->in[0].size;
        out = malloc(out_size);
        if (out)
            memcpy(out, l->in[0].elf, out_size);
        else
            r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (r == CUDA_SUCCESS) {
        r = container_of(l, &out, &out_size);
    }
    if (r == CUDA_SUCCESS) {
        free(l->out);               // a second complete replaces the image
        l->out = out;
        l->out_size = out_size;
        *cubin = out;
        if (size)
            *size = out_size;
        fg_jit_info(&l->jit, "fakegpu link: linked %u input%s into %s of %zu bytes", l->nin,
                    l->nin == 1 ? "" : "s", l->nin == 1 ? "a cubin" : "a fatbin", out_size);
    }
    if (l) {
        l->jit.ms += now_ms() - t0;
        fg_jit_flush(&l->jit);
    }
    fg_unlock();
    return r;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
    struct fg_link *l;

    fg_lock();
    l = link_get(state);
    if (l) {
        fg_handle_drop((uint64_t)(uintptr_t)l->handle);
        for (unsigned i = 0; i < l->nin; i++)
            free(l->in[i].elf);
        free(l->in);
        free(l->out);
        fg_jit_close(&l->jit);
        free(l);
    }
    fg_unlock();
    return l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
