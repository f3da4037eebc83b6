/* Driver-API launches and the facts of functions and kernels the client
 * answers itself: cuLaunchKernel, cuLaunchKernelEx with its launch
 * attributes, the cooperative launches, the names of functions and
 * kernels, the potential block size (whose callback runs here), and
 * libraries loaded from the client's files.  Server side:
 * daemon/hand_cuda_launch.c. */
#include "rgpu_client.h"
#include "rgpu_launch_attrs.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

static int transport(const char *what, int rc)
{
    return rgpu_transport_status(LIB, what, rc);
}

/* ---- parameter layouts ------------------------------------------------------------- */

struct layout {
    uint64_t func;
    unsigned generation;        /* rgpu_code_generation() when asked */
    struct rgpu_layout l;
    struct layout *next;
};

static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static struct layout *layouts;

/* A function's parameter layout, asked from the server once per code
 * generation and cached: after a module is unloaded the driver may give
 * its functions' handles to other functions (XLA loads and unloads a
 * module per autotuning candidate).  Layouts of earlier generations stay
 * in the list unused: a launch on another thread may be reading one. */
static CUresult layout_of(CUfunction f, struct layout **out)
{
    uint64_t func = (uint64_t)(uintptr_t)f;
    unsigned generation = rgpu_code_generation();
    struct layout *l;

    pthread_mutex_lock(&layout_lock);
    for (l = layouts; l && (l->func != func || l->generation != generation); l = l->next)
        ;
    pthread_mutex_unlock(&layout_lock);
    if (l) {
        *out = l;
        return CUDA_SUCCESS;
    }
    struct rgpu_param_slot *slots = malloc(RGPU_KERNEL_PARAMS_MAX * sizeof *slots);
    if (!slots || !(l = calloc(1, sizeof *l))) {
        free(slots);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t n = 0;
    CUresult rc = rgpu_cu_param_layout(f, slots, RGPU_KERNEL_PARAMS_MAX, &n);
    if (rc == CUDA_SUCCESS && rgpu_layout_set(&l->l, slots, n) < 0)
        rc = transport("cuLaunchKernel", RGPU_EPROTO);
    free(slots);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    l->func = func;
    l->generation = generation;
    pthread_mutex_lock(&layout_lock);
    l->next = layouts;
    layouts = l;
    pthread_mutex_unlock(&layout_lock);
    *out = l;
    return CUDA_SUCCESS;
}

/* Kernel arguments as one buffer: either packed by the caller (`extra`) or
 * from kernelParams by the layout.  Graph kernel nodes pack theirs here
 * too (stubs/cuda_graphs.c). */
CUresult rgpu_cuda_pack_params(CUfunction f, void **kernelParams, void **extra,
                               const void **buf, size_t *len, unsigned char **owned);
CUresult rgpu_cuda_pack_params(CUfunction f, void **kernelParams, void **extra,
                            const void **buf, size_t *len, unsigned char **owned)
{
    *owned = NULL;
    if (extra) {
        const void *p = NULL;
        size_t n = 0;
        for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                p = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                n = *(const size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
        *buf = p;
        *len = n;
        return p || !n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    struct layout *l = NULL;
    CUresult rc = layout_of(f, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (l->l.nparams && !kernelParams)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *b = malloc(l->l.bytes ? l->l.bytes : 1);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rgpu_layout_pack(&l->l, kernelParams, b);
    *buf = b;
    *len = l->l.bytes;
    *owned = b;
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------------------- */

/* One launch as every entry point describes it. */
struct launch {
    const char *what;               /* the entry point, for logs */
    CUfunction f;
    unsigned grid[3], block[3], shmem;
    CUstream stream;
    void **params, **extra;
    const CUlaunchAttribute *attrs;
    unsigned nattrs;
};

/* What makes two launches alike to the driver (rgpu_launch_key). */
static uint64_t launch_key(const struct launch *L)
{
    return rgpu_launch_key((uint64_t)(uintptr_t)L->f, L->grid, L->block, L->shmem,
                           rgpu_launch_attrs_hash(L->attrs, L->nattrs, 0));
}

/* A launch goes without waiting only when the driver's checks can be made
 * here: a function and a stream this process was handed, the stream of
 * the current device (else the server's answer, the driver's own error,
 * comes back at once), attributes whose every check the client can make
 * (rgpu_launch_attrs_checked: events it created for them, values in
 * range; a cooperative grid or a cluster depends on the kernel and
 * waits), and a configuration the driver took for this function before
 * (what it allows depends on the kernel: common/rgpu_lazy.c). */
static int launch_must_wait(const struct launch *L, uint64_t key)
{
    uint64_t h = (uint64_t)(uintptr_t)L->f;
    uint64_t stream = (uint64_t)(uintptr_t)L->stream;
    return !rgpu_may_skip_reply() || !rgpu_stream_known(stream) ||
           !rgpu_stream_fits_current(stream) ||
           !(rgpu_handle_known(rgpu_handle_class("CUfunc_st"), h) ||
             rgpu_handle_known(rgpu_handle_class("CUkern_st"), h)) ||
           !rgpu_launch_attrs_checked(L->attrs, L->nattrs, rgpu_event_untimed) ||
           !rgpu_launch_known(key);
}

/* An attribute rgpu does not serve: refused, its name logged once. */
static CUresult refuse_attribute(const struct launch *L, unsigned id)
{
    static int logged[RGPU_LAUNCH_ATTR_LOG_SLOTS];
    char what[160];
    return (CUresult)rgpu_refused(LIB, rgpu_launch_attr_refused_what(what, sizeof what, L->what, id),
                                  rgpu_launch_attr_refusal(id),
                                  &logged[rgpu_launch_attr_log_slot(id)]);
}

/* What the driver refuses at once without looking at the kernel: checked
 * here, because the launch may not wait for the server's answer. */
static CUresult shape_valid(const struct launch *L)
{
    const unsigned *g = L->grid, *b = L->block;
    /* 1024 threads per block is the limit of every GPU CUDA 13 supports. */
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2] ||
        (uint64_t)b[0] * b[1] * b[2] > 1024 || b[2] > 64 || g[1] > 65535 || g[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The launch through rgpu's own procedures: rgpu_cu_launch, or with the
 * attributes that travel (IGNORE ones aside) rgpu_cu_launch_ex; unwaited
 * when the policy above let it go without its reply. */
static CUresult send_launch(const struct launch *L, const void *buf, size_t len, int unwaited)
{
    struct rgpu_launch_attr wire[RGPU_LAUNCH_ATTRS_MAX];
    const struct rgpu_launch_attr *attrs = wire;
    int packed = L->extra != NULL;
    size_t nattrs = rgpu_launch_attrs_count(L->attrs, L->nattrs);
    if (nattrs > RGPU_LAUNCH_ATTRS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nattrs) {
        const void *argv[] = { &L->f, &L->grid[0], &L->grid[1], &L->grid[2], &L->block[0],
                               &L->block[1], &L->block[2], &L->shmem, &L->stream, &packed,
                               &len, &buf };
        return (CUresult)rgpu_call_unwaited_when(LIB, RGPU_CUDA_rgpu_cu_launch, argv, unwaited);
    }
    rgpu_launch_attrs_to_wire(L->attrs, L->nattrs, wire);
    const void *argv[] = { &L->f, &L->grid[0], &L->grid[1], &L->grid[2], &L->block[0],
                           &L->block[1], &L->block[2], &L->shmem, &L->stream, &packed,
                           &attrs, &nattrs, &len, &buf };
    return (CUresult)rgpu_call_unwaited_when(LIB, RGPU_CUDA_rgpu_cu_launch_ex, argv, unwaited);
}

static CUresult launch(const struct launch *L)
{
    const void *buf;
    size_t len;
    unsigned char *owned;

    if (!L->f)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((L->params && L->extra) || (L->nattrs && !L->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned refused = rgpu_launch_attrs_first_refused(L->attrs, L->nattrs);
    if (refused < L->nattrs)
        return refuse_attribute(L, L->attrs[refused].id);
    if (rgpu_sticky_error())
        return rgpu_sticky_error();
    CUresult rc = shape_valid(L);
    if (rc == CUDA_SUCCESS)
        rc = rgpu_cuda_pack_params(L->f, L->params, L->extra, &buf, &len, &owned);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t key = launch_key(L);
    int wait = launch_must_wait(L, key);
    rgpu_printing_launched((uint64_t)(uintptr_t)L->stream,
                           rgpu_printing_may((uint64_t)(uintptr_t)L->f));
    rc = send_launch(L, buf, len, !wait);
    free(owned);
    if (wait && rc == CUDA_SUCCESS)
        rgpu_launch_took(key);
    return rc;
}

RGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra)
{
    struct launch L = { "cuLaunchKernel", f, { gridDimX, gridDimY, gridDimZ },
                        { blockDimX, blockDimY, blockDimZ }, sharedMemBytes, hStream,
                        kernelParams, extra, NULL, 0 };
    return launch(&L);
}

RGPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                         unsigned int gridDimY, unsigned int gridDimZ,
                                         unsigned int blockDimX, unsigned int blockDimY,
                                         unsigned int blockDimZ, unsigned int sharedMemBytes,
                                         CUstream hStream, void **kernelParams, void **extra)
{
    struct launch L = { "cuLaunchKernel", f, { gridDimX, gridDimY, gridDimZ },
                        { blockDimX, blockDimY, blockDimZ }, sharedMemBytes,
                        hStream ? hStream : CU_STREAM_PER_THREAD, kernelParams, extra, NULL, 0 };
    return launch(&L);
}

static CUresult launch_ex(const char *what, const CUlaunchConfig *config, CUfunction f,
                          void **kernelParams, void **extra, CUstream default_stream)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    struct launch L = { what, f, { config->gridDimX, config->gridDimY, config->gridDimZ },
                        { config->blockDimX, config->blockDimY, config->blockDimZ },
                        config->sharedMemBytes,
                        config->hStream ? config->hStream : default_stream, kernelParams, extra,
                        config->attrs, config->numAttrs };
    return launch(&L);
}

#undef cuLaunchKernelEx
RGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra)
{
    return launch_ex("cuLaunchKernelEx", config, f, kernelParams, extra, NULL);
}

RGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra)
{
    return launch_ex("cuLaunchKernelEx", config, f, kernelParams, extra, CU_STREAM_PER_THREAD);
}

/* The same launch as cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_COOPERATIVE
 * set, which cuda.h documents as having exactly its semantics. */
static CUresult launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                   CUstream stream, void **kernelParams)
{
    CUlaunchAttribute coop;
    memset(&coop, 0, sizeof coop);
    coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    coop.value.cooperative = 1;
    struct launch L = { "cuLaunchCooperativeKernel", f, { gx, gy, gz }, { bx, by, bz }, shmem,
                        stream, kernelParams, NULL, &coop, 1 };
    return launch(&L);
}

#undef cuLaunchCooperativeKernel
RGPU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ,
                                               unsigned int sharedMemBytes, CUstream hStream,
                                               void **kernelParams)
{
    return launch_cooperative(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                              sharedMemBytes, hStream, kernelParams);
}

RGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                    unsigned int gridDimY, unsigned int gridDimZ,
                                                    unsigned int blockDimX,
                                                    unsigned int blockDimY,
                                                    unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes,
                                                    CUstream hStream, void **kernelParams)
{
    return launch_cooperative(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                              sharedMemBytes, hStream ? hStream : CU_STREAM_PER_THREAD,
                              kernelParams);
}

/* ---- names of functions and kernels ------------------------------------------------ */

/* The driver answers with a pointer into its own memory; the server's is
 * another process's, so the client asks once per handle and answers with
 * its own copy.  Names are interned and never freed: a program may keep
 * the pointer as long as the handle lives, and a handle value reused for
 * another function after an unload (any destroy changes
 * rgpu_answers_epoch) is asked again. */
enum name_kind { NAME_FUNCTION, NAME_KERNEL };

struct name_entry {
    uint64_t handle;
    unsigned kind;              /* NAME_FUNCTION or NAME_KERNEL */
    unsigned epoch;
    const char *name;
    struct name_entry *next;
};

struct interned {
    struct interned *next;
    char s[];
};

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct name_entry *names;
static struct interned *strings;

/* With names_lock held: one copy of each distinct name, or NULL. */
static const char *intern(const char *s, size_t len)
{
    for (struct interned *i = strings; i; i = i->next)
        if (strncmp(i->s, s, len) == 0 && i->s[len] == '\0')
            return i->s;
    struct interned *i = malloc(sizeof *i + len + 1);
    if (!i)
        return NULL;
    memcpy(i->s, s, len);
    i->s[len] = '\0';
    i->next = strings;
    strings = i;
    return i->s;
}

static const char *name_known(unsigned kind, uint64_t h, unsigned epoch)
{
    const char *name = NULL;
    pthread_mutex_lock(&names_lock);
    for (struct name_entry *e = names; e && !name; e = e->next)
        if (e->handle == h && e->kind == kind && e->epoch == epoch)
            name = e->name;
    pthread_mutex_unlock(&names_lock);
    return name;
}

/* One entry per handle and kind, renewed when asked again. */
static const char *name_keep(unsigned kind, uint64_t h, unsigned epoch, const char *s,
                             size_t len)
{
    struct name_entry *e;
    pthread_mutex_lock(&names_lock);
    const char *name = intern(s, len);
    for (e = names; e && (e->handle != h || e->kind != kind); e = e->next)
        ;
    if (!e && name && (e = malloc(sizeof *e)) != NULL) {
        e->next = names;
        names = e;
    }
    if (e && name)
        *e = (struct name_entry){ h, kind, epoch, name, e->next };
    pthread_mutex_unlock(&names_lock);
    return name;
}

/* The name from the server into buf: a first buffer fits nearly every
 * name; one that came back full is asked again in a buffer as large as a
 * frame allows names to be. */
static CUresult ask_name(unsigned kind, uint64_t h, char **out)
{
    for (size_t size = 4096;; size = 64 * 1024) {
        char *buf = malloc(size);
        if (!buf)
            return CUDA_ERROR_OUT_OF_MEMORY;
        buf[0] = '\0';
        CUresult rc = kind == NAME_KERNEL
                          ? rgpu_cu_kernel_name(buf, size, (CUkernel)(uintptr_t)h)
                          : rgpu_cu_func_name(buf, size, (CUfunction)(uintptr_t)h);
        buf[size - 1] = '\0';
        if (rc != CUDA_SUCCESS || strlen(buf) < size - 1 || size == 64 * 1024) {
            *out = buf;
            return rc;
        }
        free(buf);
    }
}

static CUresult name_of(unsigned kind, uint64_t h, const char **name)
{
    char *buf = NULL;
    if (!name || !h)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned epoch = rgpu_answers_epoch();
    if ((*name = name_known(kind, h, epoch)) != NULL)
        return CUDA_SUCCESS;
    CUresult rc = ask_name(kind, h, &buf);
    if (rc == CUDA_SUCCESS && !(*name = name_keep(kind, h, epoch, buf, strlen(buf))))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    free(buf);
    return rc;
}

RGPU_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    return name_of(NAME_FUNCTION, (uint64_t)(uintptr_t)hfunc, name);
}

RGPU_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    return name_of(NAME_KERNEL, (uint64_t)(uintptr_t)hfunc, name);
}

/* ---- the potential block size -------------------------------------------------- */

/* The largest block size the driver may ask the callback about: the limit
 * given, or the most threads a block may have on any device; 0 when no
 * device says. */
static int callback_block_sizes(int limit)
{
    int count = 0, most = 0;
    if (cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return 0;
    for (int d = 0; d < count; d++) {
        int n = 0;
        if (cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d) ==
                CUDA_SUCCESS && n > most)
            most = n;
    }
    return limit > 0 && limit < most ? limit : most;
}

/* The program's callback runs here, for every block size the driver could
 * ask about (it is a function of the block size alone), and the server's
 * driver runs against the answers (rgpu_cu_occupancy_block_size). */
static CUresult potential_block_size(int *minGridSize, int *blockSize, CUfunction func,
                                     CUoccupancyB2DSize smem_of, size_t dynamicSMemSize,
                                     int blockSizeLimit, unsigned int flags)
{
    size_t *table = NULL, n = 0;
    if (smem_of) {
        int most = callback_block_sizes(blockSizeLimit);
        if (most <= 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (!(table = malloc((size_t)most * sizeof *table)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (int b = 1; b <= most; b++)
            table[b - 1] = smem_of(b);
        n = (size_t)most;
    }
    CUresult rc = rgpu_cu_occupancy_block_size(minGridSize, blockSize, func, table, n,
                                               dynamicSMemSize, blockSizeLimit, flags);
    free(table);
    return rc;
}

RGPU_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
                                                      CUfunction func,
                                                      CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                      size_t dynamicSMemSize, int blockSizeLimit)
{
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                dynamicSMemSize, blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

RGPU_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int *minGridSize, int *blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags)
{
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                dynamicSMemSize, blockSizeLimit, flags);
}

/* ---- functions of modules and libraries ------------------------------------------------ */

/* Each handle is recorded with whether it may printf, from the scan of
 * the image it came from (common/rgpu_printing.c): a launch of it then
 * makes the synchronises after it wait, or not. */
static uint64_t u64(const void *handle)
{
    return (uint64_t)(uintptr_t)handle;
}

#undef cuModuleGetFunction
RGPU_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    const void *argv[] = { &hfunc, &hmod, &name };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuModuleGetFunction, argv);
    if (rc == CUDA_SUCCESS && hfunc && name)
        rgpu_printing_function_of(u64(*hfunc), u64(hmod), name);
    return rc;
}

#undef cuLibraryGetKernel
RGPU_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    const void *argv[] = { &pKernel, &library, &name };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuLibraryGetKernel, argv);
    if (rc == CUDA_SUCCESS && pKernel && name)
        rgpu_printing_function_of(u64(*pKernel), u64(library), name);
    return rc;
}

#undef cuKernelGetFunction
RGPU_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    const void *argv[] = { &pFunc, &kernel };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuKernelGetFunction, argv);
    if (rc == CUDA_SUCCESS && pFunc)
        rgpu_printing_function_of(u64(*pFunc), u64(kernel), NULL);
    return rc;
}

#undef cuLibraryGetModule
RGPU_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    const void *argv[] = { &pMod, &library };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuLibraryGetModule, argv);
    if (rc == CUDA_SUCCESS && pMod)
        rgpu_printing_image_alias(u64(*pMod), u64(library));
    return rc;
}

/* Enumerated, the handles come without names: each may print when its
 * image's kernels may. */
#undef cuModuleEnumerateFunctions
RGPU_EXPORT CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                                CUmodule mod)
{
    const void *argv[] = { &functions, &numFunctions, &mod };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuModuleEnumerateFunctions, argv);
    for (unsigned i = 0; rc == CUDA_SUCCESS && functions && i < numFunctions; i++)
        if (functions[i])
            rgpu_printing_function_of(u64(functions[i]), u64(mod), NULL);
    return rc;
}

#undef cuLibraryEnumerateKernels
RGPU_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
                                               CUlibrary lib)
{
    const void *argv[] = { &kernels, &numKernels, &lib };
    CUresult rc = (CUresult)rgpu_call(LIB, RGPU_CUDA_cuLibraryEnumerateKernels, argv);
    for (unsigned i = 0; rc == CUDA_SUCCESS && kernels && i < numKernels; i++)
        if (kernels[i])
            rgpu_printing_function_of(u64(kernels[i]), u64(lib), NULL);
    return rc;
}

/* ---- libraries from files ------------------------------------------------------------- */

/* The whole file, NUL-terminated (PTX is text): NULL when it cannot be read. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n;
    *len = 0;
    if (!f)
        return NULL;
    do {
        if (*len + 65536 + 1 > cap) {
            char *nb = realloc(buf, cap = (*len + 65536 + 1) * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        n = fread(buf + *len, 1, 65536, f);
        *len += n;
    } while (n > 0);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

/* The file is the client's: read here, loaded as cuLibraryLoadData loads
 * bytes (with the same options). */
RGPU_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                           CUjit_option *jitOptions, void **jitOptionsValues,
                                           unsigned int numJitOptions,
                                           CUlibraryOption *libraryOptions,
                                           void **libraryOptionValues,
                                           unsigned int numLibraryOptions)
{
    size_t len;
    if (!library || !fileName || (numLibraryOptions && !libraryOptions))
        return CUDA_ERROR_INVALID_VALUE;
    /* A file's bytes cannot be kept by the caller (cuda.h). */
    for (unsigned i = 0; i < numLibraryOptions; i++)
        if (libraryOptions[i] == CU_LIBRARY_BINARY_IS_PRESERVED)
            return CUDA_ERROR_INVALID_VALUE;
    char *image = read_file(fileName, &len);
    if (!image)
        return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc = len ? cuLibraryLoadData(library, image, jitOptions, jitOptionsValues,
                                          numJitOptions, libraryOptions, libraryOptionValues,
                                          numLibraryOptions)
                      : CUDA_ERROR_INVALID_IMAGE;
    free(image);
    return rc;
}
