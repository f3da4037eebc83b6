/* Hand-written parts of libcudart: everything codegen/cudart.ann marks
 * `hand`, `client` or `local`.  Server side: daemon/hand_cudart.c. */
#include "rgpu_client.h"
#include "rgpu_fatbin.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cudart_own.h"
#include "cudart_procs.h"
#include "rgpu_launch_attrs.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

/* ---- registration: what nvcc's generated constructors tell us ------------- */

struct module {
    const void *image;
    size_t image_size;
    uint64_t library;           /* server handle once loaded, else 0 */
    struct rgpu_print_scan *printing;   /* its kernels that may printf, once loaded */
    pthread_mutex_t lock;
};

struct kernel_facts;

struct kernel {
    struct module *mod;
    const void *host_fn;        /* the host stub nvcc generated */
    char *name;                 /* mangled device name */
    int may_print;              /* whether it may printf, once resolved */
    uint64_t handle;            /* server cudaKernel_t once resolved */
    struct rgpu_layout layout;
    struct kernel_facts *facts; /* per device; facts_lock */
};

struct var {
    struct module *mod;
    const void *host_var;
    char *name;
    size_t size;
    struct var *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct var *vars;

/* Kernels by host stub, and by their own record (the cudaKernel_t handle
 * __cudaGetKernel hands nvcc's stubs).  Every launch looks its kernel up,
 * and PyTorch registers tens of thousands: an open-addressing table (grown
 * at half load), not a list.  A second table holds kernels by the server's
 * handle, once a program asked for it (cudaGetKernel): that value is what
 * a program may pass where a function is expected, to the runtime or,
 * cast, to the driver.  Apart, so that a server handle that happens to
 * equal a host address here can never shadow a kernel registered there. */
struct kernel_table {
    pthread_rwlock_t lock;
    const void **key;
    struct kernel **val;
    size_t cap, used;
};
static struct kernel_table K = { .lock = PTHREAD_RWLOCK_INITIALIZER };
static struct kernel_table S = { .lock = PTHREAD_RWLOCK_INITIALIZER };

static size_t key_home(const void *key, size_t mask)
{
    return (size_t)(((uintptr_t)key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}

/* With t->lock held for writing. */
static void kernel_table_put(struct kernel_table *t, const void *key, struct kernel *k)
{
    size_t i = key_home(key, t->cap - 1);
    while (t->key[i] && t->key[i] != key)
        i = (i + 1) & (t->cap - 1);
    if (!t->key[i])
        t->used++;
    t->key[i] = key;
    t->val[i] = k;
}

/* With t->lock held for writing: room for two more keys, or -1. */
static int kernel_table_room(struct kernel_table *t)
{
    if ((t->used + 2) * 2 <= t->cap)
        return 0;
    size_t ocap = t->cap, ncap = t->cap ? t->cap * 2 : 4096;
    const void **okey = t->key;
    struct kernel **oval = t->val;
    t->key = calloc(ncap, sizeof *t->key);
    t->val = calloc(ncap, sizeof *t->val);
    if (!t->key || !t->val) {
        free(t->key);
        free(t->val);
        t->key = okey;
        t->val = oval;
        return -1;
    }
    t->cap = ncap;
    t->used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (okey[i])
            kernel_table_put(t, okey[i], oval[i]);
    free(okey);
    free(oval);
    return 0;
}

static struct kernel *kernel_table_get(struct kernel_table *t, const void *key)
{
    struct kernel *k = NULL;
    pthread_rwlock_rdlock(&t->lock);
    if (key && t->cap) {
        size_t i = key_home(key, t->cap - 1);
        while (t->key[i] && t->key[i] != key)
            i = (i + 1) & (t->cap - 1);
        k = t->key[i] ? t->val[i] : NULL;
    }
    pthread_rwlock_unlock(&t->lock);
    return k;
}

RGPU_EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    const struct rgpu_fatbin_wrapper *w = fatCubin;
    struct module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    /* A registered fatbin's size is its own container's.  The containers
     * of all translation units of a library lie back to back in its
     * .nv_fatbin section, so reading on past the first would upload the
     * whole library (hundreds of MiB for PyTorch) with every module. */
    if (w && w->magic == RGPU_FATBIN_WRAPPER_MAGIC) {
        m->image = w->data;
        m->image_size = rgpu_fatbin_size(w->data);
    }
    /* Nothing travels now: a process like PyTorch registers thousands of
     * fatbins and uses few; each is loaded at its first use
     * (docs/architecture.md, "Modules and JIT linking"). */
    return (void **)m;
}

RGPU_EXPORT void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle;
}

RGPU_EXPORT void __cudaUnregisterFatBinary(void **handle)
{
    /* Kernels may still be referenced by function pointers during process
     * exit; the server frees the module when the session ends. */
    (void)handle;
}

RGPU_EXPORT void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                                        const char *deviceName, int thread_limit, void *tid,
                                        void *bid, void *bDim, void *gDim, int *wSize)
{
    (void)deviceName; (void)thread_limit; (void)tid; (void)bid; (void)bDim; (void)gDim;
    (void)wSize;
    struct kernel *k = calloc(1, sizeof *k);
    if (!k)
        return;
    k->mod = (struct module *)handle;
    k->host_fn = hostFun;
    k->name = strdup(deviceFun);
    pthread_rwlock_wrlock(&K.lock);
    if (kernel_table_room(&K) == 0) {
        kernel_table_put(&K, hostFun, k);
        kernel_table_put(&K, k, k);
    }
    pthread_rwlock_unlock(&K.lock);
}

RGPU_EXPORT void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
                                   const char *deviceName, int ext, size_t size, int constant,
                                   int global)
{
    (void)deviceName; (void)ext; (void)constant; (void)global;
    struct var *v = calloc(1, sizeof *v);
    if (!v)
        return;
    v->mod = (struct module *)handle;
    v->host_var = hostVar;
    v->name = strdup(deviceAddress);
    v->size = size;
    pthread_mutex_lock(&reg_lock);
    v->next = vars;
    vars = v;
    pthread_mutex_unlock(&reg_lock);
}

RGPU_EXPORT void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress,
                                          char *deviceAddress, const char *deviceName, int ext,
                                          size_t size, int constant, int global)
{
    (void)handle; (void)hostVarPtrAddress; (void)deviceName; (void)ext; (void)size;
    (void)constant; (void)global;
    rgpu_warn("managed variable %s is not supported by rgpu", deviceAddress);
}

RGPU_EXPORT void __cudaRegisterHostVar(void **handle, const char *deviceName, char *hostVar,
                                       size_t size)
{
    (void)handle; (void)deviceName; (void)hostVar; (void)size;
}

RGPU_EXPORT void __cudaRegisterUnifiedTable(void **handle, void *table)
{
    (void)handle; (void)table;
}

RGPU_EXPORT char __cudaInitModule(void **handle)
{
    (void)handle;
    return 1;
}

/* The kernel a runtime call names: its host stub, the record
 * __cudaGetKernel handed out, or the server's handle cudaGetKernel did. */
static struct kernel *kernel_by_host_fn(const void *fn)
{
    struct kernel *k = kernel_table_get(&K, fn);
    return k ? k : kernel_table_get(&S, fn);
}

static struct var *var_by_host(const void *host)
{
    struct var *v;
    pthread_mutex_lock(&reg_lock);
    for (v = vars; v && v->host_var != host; v = v->next)
        ;
    pthread_mutex_unlock(&reg_lock);
    return v;
}

/* ---- modules reach the server on first use -------------------------------- */

/* The compute capabilities of the server's GPUs (major * 10 + minor): the
 * fatbin entries the driver may load for them are those scanned for
 * printf (common/rgpu_printf_scan.c).  Asked once per device; 0 when they
 * cannot be told (every entry counts then).  The thread's last error stays
 * as it was. */
static size_t gpu_archs(unsigned archs[RGPU_MAX_GPU_ARCHS])
{
    struct cudaDeviceProp p;
    int saved = rgpu_last_error(0), n = 0;
    size_t k = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && n <= RGPU_MAX_GPU_ARCHS)
        while (k < (size_t)n && cudaGetDeviceProperties(&p, (int)k) == cudaSuccess)
            archs[k++] = (unsigned)(p.major * 10 + p.minor);
    rgpu_last_error(1);
    rgpu_runtime_result(saved);
    return n > 0 && k == (size_t)n ? k : 0;
}

static int module_load(struct module *m)
{
    int rc = cudaSuccess;

    pthread_mutex_lock(&m->lock);
    if (m->library)
        goto out;
    if (!m->image || !m->image_size) {
        rc = cudaErrorInvalidKernelImage;
        goto out;
    }
    /* A fatbin larger than a frame goes ahead in pieces (rgpu_image.c). */
    const void *bytes;
    rc = rgpu_image_stage(LIB, m->image, m->image_size, cudaErrorMemoryAllocation, &bytes);
    cudaLibrary_t library = NULL;
    if (rc == cudaSuccess)
        rc = rgpu_lib_load(&library, m->image_size, bytes);
    if (rc != cudaSuccess) {
        rgpu_debug("loading a module of %zu bytes failed: %d", m->image_size, rc);
        goto out;
    }
    m->library = (uint64_t)(uintptr_t)library;
    unsigned archs[RGPU_MAX_GPU_ARCHS];
    m->printing = rgpu_printing_scan(m->image, m->image_size, archs, gpu_archs(archs));
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Load the module, resolve the kernel and learn its parameter layout, once. */
static int kernel_resolve(struct kernel *k)
{
    int rc;

    if (__atomic_load_n(&k->handle, __ATOMIC_ACQUIRE))
        return cudaSuccess;
    rc = module_load(k->mod);
    if (rc != cudaSuccess)
        return rc;
    struct rgpu_param_slot *slots = malloc(RGPU_KERNEL_PARAMS_MAX * sizeof *slots);
    if (!slots)
        return RESULT(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&k->mod->lock);
    if (k->handle) {
        pthread_mutex_unlock(&k->mod->lock);
        free(slots);
        return cudaSuccess;
    }
    cudaKernel_t kernel = NULL;
    size_t n = 0;
    rc = rgpu_kernel_get(&kernel, (cudaLibrary_t)(uintptr_t)k->mod->library, k->name, slots,
                         RGPU_KERNEL_PARAMS_MAX, &n);
    if (rc == cudaSuccess && rgpu_layout_set(&k->layout, slots, n) < 0)
        rc = RESULT(cudaErrorInvalidDeviceFunction);
    if (rc == cudaSuccess) {
        uint64_t h = (uint64_t)(uintptr_t)kernel;
        k->may_print = rgpu_printing_scan_may_print(k->mod->printing, k->name);
        /* The handle may reach the driver's launches (cudaGetKernel). */
        rgpu_printing_function_is(h, k->mod->library, k->may_print);
        __atomic_store_n(&k->handle, h, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&k->mod->lock);
    free(slots);
    if (rc != cudaSuccess)
        rgpu_debug("resolving kernel %s failed: %d", k->name, rc);
    return rc;
}

/* ---- launch ---------------------------------------------------------------- */

struct launch_config {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};

static _Thread_local struct launch_config config_stack[16];
static _Thread_local int config_depth;

RGPU_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                 struct CUstream_st *stream)
{
    if (config_depth == 16)
        return 1;
    config_stack[config_depth++] = (struct launch_config){ gridDim, blockDim, sharedMem, stream };
    return 0;
}

RGPU_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                   size_t *sharedMem, void *stream)
{
    if (config_depth == 0)
        return cudaErrorMissingConfiguration;
    struct launch_config *c = &config_stack[--config_depth];
    *gridDim = c->grid;
    *blockDim = c->block;
    *sharedMem = c->shmem;
    *(cudaStream_t *)stream = c->stream;
    return cudaSuccess;
}

/* The device's launch limits, asked once: a bad configuration must fail at
 * the launch, as on a GPU, even though the launch itself does not wait. */
static struct cudaDeviceProp limits;
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;

static void fetch_limits(void)
{
    int saved = rgpu_last_error(0);
    if (cudaGetDeviceProperties(&limits, 0) != cudaSuccess) {
        limits.maxThreadsPerBlock = 1024;
        limits.maxThreadsDim[0] = limits.maxThreadsDim[1] = 1024;
        limits.maxThreadsDim[2] = 64;
        limits.maxGridSize[0] = 0x7fffffff;
        limits.maxGridSize[1] = limits.maxGridSize[2] = 65535;
    }
    rgpu_last_error(1);
    rgpu_runtime_result(saved);
}

/* CUDA 13 runtimes report an impossible launch configuration as
 * cudaErrorInvalidValue (seen on the H200 with driver 580); CUDA 12 ones
 * said cudaErrorInvalidConfiguration. */
#if CUDART_VERSION >= 13000
#define BAD_CONFIG_ERROR cudaErrorInvalidValue
#else
#define BAD_CONFIG_ERROR cudaErrorInvalidConfiguration
#endif

static int config_valid(dim3 grid, dim3 block)
{
    pthread_once(&limits_once, fetch_limits);
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    return grid.x && grid.y && grid.z && threads &&
           threads <= (uint64_t)limits.maxThreadsPerBlock &&
           block.x <= (unsigned)limits.maxThreadsDim[0] &&
           block.y <= (unsigned)limits.maxThreadsDim[1] &&
           block.z <= (unsigned)limits.maxThreadsDim[2] &&
           grid.x <= (unsigned)limits.maxGridSize[0] && grid.y <= (unsigned)limits.maxGridSize[1] &&
           grid.z <= (unsigned)limits.maxGridSize[2];
}

/* One launch as the runtime's entry points describe it. */
struct launch {
    const char *what;           /* the entry point, for logs */
    struct kernel *k;
    dim3 grid, block;
    void **args;
    size_t shmem;
    cudaStream_t stream;
    const cudaLaunchAttribute *attrs;
    unsigned nattrs;
};

/* The runtime's launch attributes are the driver's, id for id and member
 * for member (daemon/launch_attrs.c asserts each member): they are packed
 * as the driver's (common/rgpu_launch_attrs.h). */
_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "attribute size");
_Static_assert(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value),
               "attribute value");
_Static_assert((int)cudaLaunchAttributeCooperative == CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
               "attribute ids");

static const CUlaunchAttribute *driver_attrs(const cudaLaunchAttribute *attrs)
{
    return (const CUlaunchAttribute *)(const void *)attrs;
}

/* An attribute rgpu does not serve: refused, its name logged once. */
static cudaError_t refuse_attribute(const struct launch *L, unsigned id)
{
    static int logged[RGPU_LAUNCH_ATTR_LOG_SLOTS];
    char what[160];
    return rgpu_refused(LIB, rgpu_launch_attr_refused_what(what, sizeof what, L->what, id),
                        rgpu_launch_attr_refusal(id), &logged[rgpu_launch_attr_log_slot(id)]);
}

/* A launch only enqueues work: it does not wait for the server, unless
 * its stream is one this process does not hold, or may be of another
 * device than the current one, or an attribute needs the runtime's checks
 * (the error must come now; rgpu_launch_attrs_checked), or
 * RGPU_SYNC=blocking. */
static int launch_must_wait(const struct launch *L)
{
    uint64_t stream = (uint64_t)(uintptr_t)L->stream;
    return !rgpu_may_skip_reply() || !rgpu_stream_known(stream) ||
           !rgpu_stream_fits_current(stream) ||
           !rgpu_launch_attrs_checked(driver_attrs(L->attrs), L->nattrs, rgpu_event_untimed);
}

/* The launch through rgpu's own procedures: rgpu_launch, or with the
 * attributes that travel (IGNORE ones aside) rgpu_launch_ex; unwaited
 * when the policy above let it go without its reply. */
static cudaError_t send_launch(const struct launch *L, const void *params, int unwaited)
{
    struct rgpu_launch_attr wire[RGPU_LAUNCH_ATTRS_MAX];
    cudaKernel_t kernel = (cudaKernel_t)(uintptr_t)L->k->handle;
    size_t shmem = L->shmem, size = L->k->layout.bytes;
    size_t nattrs = rgpu_launch_attrs_count(driver_attrs(L->attrs), L->nattrs);
    const struct rgpu_launch_attr *attrs = wire;
    if (nattrs > RGPU_LAUNCH_ATTRS_MAX)
        return RESULT(cudaErrorInvalidValue);
    if (!nattrs) {
        const void *argv[] = { &kernel, &L->grid, &L->block, &shmem, &L->stream, &size,
                               &params };
        return rgpu_call_unwaited_when(LIB, RGPU_CUDART_rgpu_launch, argv, unwaited);
    }
    rgpu_launch_attrs_to_wire(driver_attrs(L->attrs), L->nattrs, wire);
    const void *argv[] = { &kernel, &L->grid, &L->block, &shmem, &L->stream, &attrs, &nattrs,
                           &size, &params };
    return rgpu_call_unwaited_when(LIB, RGPU_CUDART_rgpu_launch_ex, argv, unwaited);
}

static cudaError_t launch(const struct launch *L)
{
    unsigned char small[4096];
    int rc;

    if (!L->k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if (L->nattrs && !L->attrs)
        return RESULT(cudaErrorInvalidValue);
    unsigned refused = rgpu_launch_attrs_first_refused(driver_attrs(L->attrs), L->nattrs);
    if (refused < L->nattrs)
        return refuse_attribute(L, L->attrs[refused].id);
    if (rgpu_sticky_error())
        return RESULT(rgpu_sticky_error());
    if (!config_valid(L->grid, L->block))
        return RESULT(BAD_CONFIG_ERROR);
    rc = kernel_resolve(L->k);
    if (rc != cudaSuccess)
        return rc;
    size_t bytes = L->k->layout.bytes;
    unsigned char *params = bytes <= sizeof small ? small : malloc(bytes);
    if (!params)
        return RESULT(cudaErrorMemoryAllocation);
    rgpu_layout_pack(&L->k->layout, L->args, params);

    /* The first launch of a kernel with a configuration waits for the
     * runtime's verdict, which depends on the kernel (common/rgpu_lazy.c). */
    unsigned grid[3] = { L->grid.x, L->grid.y, L->grid.z };
    unsigned block[3] = { L->block.x, L->block.y, L->block.z };
    uint64_t key = rgpu_launch_key(L->k->handle, grid, block, (unsigned)L->shmem,
                                   rgpu_launch_attrs_hash(driver_attrs(L->attrs), L->nattrs, 0));
    int wait = launch_must_wait(L) || !rgpu_launch_known(key);
    rc = send_launch(L, params, !wait);
    if (wait && rc == cudaSuccess)
        rgpu_launch_took(key);
    rgpu_printing_launched((uint64_t)(uintptr_t)L->stream, L->k->may_print);
    if (params != small)
        free(params);
    return rc;
}

/* A launch without attributes. */
static cudaError_t launch_plain(struct kernel *k, dim3 grid, dim3 block, void **args,
                                size_t shmem, cudaStream_t stream)
{
    struct launch L = { "kernel launch", k, grid, block, args, shmem, stream, NULL, 0 };
    return launch(&L);
}

RGPU_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *entry)
{
    struct kernel *k = kernel_by_host_fn(entry);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    /* nvcc's stubs get our record: no round trip until the first launch. */
    *kernel = (cudaKernel_t)k;
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                           void **args, size_t sharedMem, cudaStream_t stream)
{
    /* Only nvcc's stubs call this, with the record __cudaGetKernel gave. */
    return launch_plain((struct kernel *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

RGPU_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                void **args, size_t sharedMem,
                                                cudaStream_t stream)
{
    if (!stream)
        stream = cudaStreamPerThread;
    return launch_plain((struct kernel *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

#undef cudaLaunchKernel
RGPU_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream)
{
    return launch_plain(kernel_by_host_fn(func), gridDim, blockDim, args, sharedMem, stream);
}

RGPU_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream)
{
    if (!stream)
        stream = cudaStreamPerThread;
    return launch_plain(kernel_by_host_fn(func), gridDim, blockDim, args, sharedMem, stream);
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args,
                             cudaStream_t default_stream)
{
    if (!config)
        return RESULT(cudaErrorInvalidValue);
    struct launch L = { "cudaLaunchKernelExC", kernel_by_host_fn(func), config->gridDim,
                        config->blockDim, args, config->dynamicSmemBytes,
                        config->stream ? config->stream : default_stream, config->attrs,
                        config->numAttrs };
    return launch(&L);
}

#undef cudaLaunchKernelExC
RGPU_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                            void **args)
{
    return launch_ex(config, func, args, NULL);
}

RGPU_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config,
                                                 const void *func, void **args)
{
    return launch_ex(config, func, args, cudaStreamPerThread);
}

/* cudaLaunchKernelExC with cudaLaunchAttributeCooperative set, which the
 * headers document as having exactly its semantics. */
static cudaError_t launch_cooperative(const void *func, dim3 grid, dim3 block, void **args,
                                      size_t shmem, cudaStream_t stream)
{
    cudaLaunchAttribute coop;
    memset(&coop, 0, sizeof coop);
    coop.id = cudaLaunchAttributeCooperative;
    coop.val.cooperative = 1;
    struct launch L = { "cudaLaunchCooperativeKernel", kernel_by_host_fn(func), grid, block,
                        args, shmem, stream, &coop, 1 };
    return launch(&L);
}

#undef cudaLaunchCooperativeKernel
RGPU_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim,
                                                    dim3 blockDim, void **args,
                                                    size_t sharedMem, cudaStream_t stream)
{
    return launch_cooperative(func, gridDim, blockDim, args, sharedMem, stream);
}

RGPU_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim,
                                                         dim3 blockDim, void **args,
                                                         size_t sharedMem, cudaStream_t stream)
{
    return launch_cooperative(func, gridDim, blockDim, args, sharedMem,
                              stream ? stream : cudaStreamPerThread);
}

/* A graph's kernel node (stubs/cudart_graphs.c): the kernel of a host stub
 * (or of a handle cudaGetKernel gave), resolved, and its arguments packed
 * by its layout into a malloc'd buffer, as a launch packs them. */
int rgpu_cudart_kernel_pack(const void *func, void **args, uint64_t *handle,
                            unsigned char **buf, size_t *len);
int rgpu_cudart_kernel_pack(const void *func, void **args, uint64_t *handle,
                            unsigned char **buf, size_t *len)
{
    struct kernel *k = kernel_by_host_fn(func);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    int rc = kernel_resolve(k);
    if (rc != cudaSuccess)
        return rc;
    if (k->layout.nparams && !args)
        return RESULT(cudaErrorInvalidValue);
    *buf = malloc(k->layout.bytes ? k->layout.bytes : 1);
    if (!*buf)
        return RESULT(cudaErrorMemoryAllocation);
    rgpu_layout_pack(&k->layout, args, *buf);
    *handle = k->handle;
    *len = k->layout.bytes;
    rgpu_printing_graph_kernel(k->may_print);
    return cudaSuccess;
}

/* The host stub nvcc registered for the kernel whose server handle is h,
 * NULL when none (a graph's kernel node queried: the runtime answers the
 * stub, as programs compare it with their kernels). */
const void *rgpu_cudart_host_fn(uint64_t h);
const void *rgpu_cudart_host_fn(uint64_t h)
{
    const void *fn = NULL;
    pthread_rwlock_rdlock(&K.lock);
    for (size_t i = 0; h && i < K.cap && !fn; i++)
        if (K.key[i] && K.val[i] && __atomic_load_n(&K.val[i]->handle, __ATOMIC_ACQUIRE) == h)
            fn = K.val[i]->host_fn;
    pthread_rwlock_unlock(&K.lock);
    return fn;
}

/* The server's kernel handle, the value CUDA documents as both a
 * cudaKernel_t and (cast) a CUkernel: from now on the runtime's calls
 * accept it as the kernel, and the driver stub knows it as a kernel this
 * process was handed. */
static void publish_server_handle(struct kernel *k)
{
    pthread_rwlock_wrlock(&S.lock);
    if (kernel_table_room(&S) == 0)
        kernel_table_put(&S, (const void *)(uintptr_t)k->handle, k);
    pthread_rwlock_unlock(&S.lock);
    rgpu_handle_note(rgpu_handle_class("CUkern_st"), k->handle, 0);
}

RGPU_EXPORT cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    struct kernel *k = kernel_by_host_fn(entryFuncAddr);
    int rc;
    if (!kernelPtr)
        return RESULT(cudaErrorInvalidValue);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    publish_server_handle(k);
    *kernelPtr = (cudaKernel_t)(uintptr_t)k->handle;
    return cudaSuccess;
}

/* The name nvcc registered: the mangled name, as the runtime answers. */
#undef cudaFuncGetName
RGPU_EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    struct kernel *k = kernel_by_host_fn(func);
    if (!name)
        return RESULT(cudaErrorInvalidValue);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    *name = k->name;
    return cudaSuccess;
}

RGPU_EXPORT cudaError_t __cudaGetProcAddress(void)
{
    static int logged;
    return rgpu_refused(LIB, "__cudaGetProcAddress", "internal entry point", &logged);
}

/* ---- what the client knows of each kernel, per device ------------------------ */

/* A kernel's attributes and its occupancy answers are facts of the kernel
 * in the device's context: they change only when this process sets an
 * attribute of that kernel (or a reset, or another context, makes them
 * stale: rgpu_contexts_epoch).  PyTorch asks them and sets the same
 * attribute again around launches: every one was a round trip.  So each
 * answer is kept, per kernel and device, a set to the value already set is
 * answered here, and a set that changes something forgets the kernel's
 * occupancy answers (and its attributes, but for the one it updates).  A
 * set to a new value still waits for its status, as cudaFuncSetAttribute's
 * checks depend on the kernel and the GPU; after the first time it is a
 * repeat. */
#define FUNC_ATTRS 32           /* enum cudaFuncAttribute values kept */
#define OCC_SLOTS 16            /* occupancy answers kept per kernel and device */

struct occ_answer {
    unsigned query;             /* enum occupancy_query, 0: none */
    uint64_t a, b, c;           /* its arguments */
    uint64_t result;
};

struct kernel_facts {
    int device;
    unsigned epoch;             /* rgpu_contexts_epoch when learnt */
    int have_attrs;
    struct cudaFuncAttributes attrs;
    uint32_t set_known;         /* bit per attribute set, with its value: */
    int set_value[FUNC_ATTRS];
    struct occ_answer occ[OCC_SLOTS];
    unsigned occ_next;
    uint64_t function;          /* cudaGetFuncBySymbol's answer, once asked (else 0) */
    struct kernel_facts *next;
};

static pthread_mutex_t facts_lock = PTHREAD_MUTEX_INITIALIZER;

/* The calling thread's current device (-1 when it cannot be told). */
static int current_device(void)
{
    int dev;
    if (rgpu_thread_device(&dev))
        return dev;
    return cudaGetDevice(&dev) == cudaSuccess ? dev : -1;
}

/* With facts_lock held: k's facts on dev as of epoch, made or emptied as
 * needed; NULL when out of memory or when epoch is no longer current. */
static struct kernel_facts *facts_of(struct kernel *k, int dev, unsigned epoch)
{
    struct kernel_facts *f;
    if (dev < 0 || epoch != rgpu_contexts_epoch())
        return NULL;
    for (f = k->facts; f && f->device != dev; f = f->next)
        ;
    if (!f) {
        f = calloc(1, sizeof *f);
        if (!f)
            return NULL;
        f->device = dev;
        f->epoch = epoch;
        f->next = k->facts;
        k->facts = f;
    }
    if (f->epoch != epoch) {
        struct kernel_facts *next = f->next;
        memset(f, 0, sizeof *f);
        f->device = dev;
        f->epoch = epoch;
        f->next = next;
    }
    return f;
}

RGPU_EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    struct kernel *k = kernel_by_host_fn(func);
    int rc;

    if (!k || !attr)
        return RESULT(!k ? cudaErrorInvalidDeviceFunction : cudaErrorInvalidValue);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    unsigned epoch = rgpu_contexts_epoch();
    int dev = current_device(), known = 0;
    pthread_mutex_lock(&facts_lock);
    struct kernel_facts *f = facts_of(k, dev, epoch);
    if (f && f->have_attrs) {
        *attr = f->attrs;
        known = 1;
    }
    pthread_mutex_unlock(&facts_lock);
    if (known)
        return cudaSuccess;

    rc = rgpu_func_attrs(attr, (cudaKernel_t)(uintptr_t)k->handle);
    if (rc == cudaSuccess) {
        pthread_mutex_lock(&facts_lock);
        if ((f = facts_of(k, dev, epoch)) != NULL) {
            f->attrs = *attr;
            f->have_attrs = 1;
        }
        pthread_mutex_unlock(&facts_lock);
    }
    return rc;
}

/* Whether the kernel's attribute attr is known to hold value already. */
static int attribute_is(const struct kernel_facts *f, enum cudaFuncAttribute attr, int value)
{
    if ((unsigned)attr < FUNC_ATTRS && (f->set_known & 1u << attr))
        return f->set_value[attr] == value;
    return attr == cudaFuncAttributeMaxDynamicSharedMemorySize && f->have_attrs &&
           f->attrs.maxDynamicSharedSizeBytes == value;
}

RGPU_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr,
                                             int value)
{
    struct kernel *k = kernel_by_host_fn(func);
    int rc;

    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    unsigned epoch = rgpu_contexts_epoch();
    int dev = current_device();
    pthread_mutex_lock(&facts_lock);
    struct kernel_facts *f = facts_of(k, dev, epoch);
    int same = f && attribute_is(f, attr, value);
    pthread_mutex_unlock(&facts_lock);
    if (same)
        return cudaSuccess;

    rc = rgpu_func_set_attr((cudaKernel_t)(uintptr_t)k->handle, attr, value);
    if (rc != cudaSuccess)
        return rc;
    rgpu_launch_limits_changed();
    pthread_mutex_lock(&facts_lock);
    if ((f = facts_of(k, dev, epoch)) != NULL) {
        if ((unsigned)attr < FUNC_ATTRS) {
            f->set_known |= 1u << attr;
            f->set_value[attr] = value;
        }
        if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
            f->attrs.maxDynamicSharedSizeBytes = value;
        else
            f->have_attrs = 0;
        memset(f->occ, 0, sizeof f->occ);
    }
    pthread_mutex_unlock(&facts_lock);
    return rc;
}

RGPU_EXPORT cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
    (void)cacheConfig;
    /* A hint the hardware may ignore; Hopper has no separate L1 split. */
    return kernel_by_host_fn(func) ? cudaSuccess : RESULT(cudaErrorInvalidDeviceFunction);
}

RGPU_EXPORT cudaError_t cudaFuncGetParamInfo(const void *func, size_t paramIndex,
                                             size_t *paramOffset, size_t *paramSize)
{
    struct kernel *k = kernel_by_host_fn(func);
    int rc;
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    if (paramIndex >= k->layout.nparams)
        return RESULT(cudaErrorInvalidValue);
    if (paramOffset)
        *paramOffset = k->layout.offset[paramIndex];
    if (paramSize)
        *paramSize = k->layout.size[paramIndex];
    return cudaSuccess;
}

/* CUDA 13.2: the count the layout above holds.  Answered from the client's
 * copy of it, so a server whose runtime predates the function serves it. */
RGPU_EXPORT cudaError_t cudaFuncGetParamCount(const void *func, size_t *paramCount)
{
    struct kernel *k = kernel_by_host_fn(func);
    int rc;
    if (!paramCount)
        return RESULT(cudaErrorInvalidValue);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    *paramCount = k->layout.nparams;
    return cudaSuccess;
}

/* The kernel's CUfunction in the device's context, as the server's driver
 * has it (cuKernelGetFunction): asked once per kernel and device, kept like
 * the kernel's other facts (a reset or another context forgets it). */
RGPU_EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    struct kernel *k = kernel_by_host_fn(symbolPtr);
    uint64_t function = 0;
    int rc;

    if (!functionPtr)
        return RESULT(cudaErrorInvalidValue);
    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    unsigned epoch = rgpu_contexts_epoch();
    int dev = current_device();
    pthread_mutex_lock(&facts_lock);
    struct kernel_facts *f = facts_of(k, dev, epoch);
    if (f)
        function = f->function;
    pthread_mutex_unlock(&facts_lock);
    if (!function) {
        /* The function handle is noted as this process's by the codec:
         * driver calls on it may go without waiting. */
        cudaFunction_t fn = NULL;
        rc = rgpu_func_by_symbol(&fn, (cudaKernel_t)(uintptr_t)k->handle);
        if (rc != cudaSuccess)
            return rc;
        function = (uint64_t)(uintptr_t)fn;
        rgpu_printing_function_is(function, k->mod->library, k->may_print);
        pthread_mutex_lock(&facts_lock);
        if ((f = facts_of(k, dev, epoch)) != NULL)
            f->function = function;
        pthread_mutex_unlock(&facts_lock);
    }
    *functionPtr = (cudaFunction_t)(uintptr_t)function;
    return cudaSuccess;
}

/* Occupancy is the server's answer for the kernel's real resources, kept
 * per kernel and device by the query's arguments: a pure function of the
 * kernel, the GPU and the attributes set (see above). */
enum occupancy_query { OCC_BLOCKS = 1, OCC_SMEM };

static int occupancy_known(struct kernel_facts *f, unsigned query, uint64_t a, uint64_t b,
                           uint64_t c, uint64_t *result)
{
    for (unsigned i = 0; f && i < OCC_SLOTS; i++) {
        const struct occ_answer *o = &f->occ[i];
        if (o->query == query && o->a == a && o->b == b && o->c == c) {
            *result = o->result;
            return 1;
        }
    }
    return 0;
}

/* The server's answer to query (a, b, c as the query's arguments). */
static cudaError_t occupancy_ask(cudaKernel_t kernel, unsigned query, uint64_t a, uint64_t b,
                                 uint64_t c, uint64_t *result)
{
    if (query == OCC_BLOCKS) {
        int n = 0;
        cudaError_t rc = rgpu_occupancy(&n, kernel, (int)a, (size_t)b, (unsigned)c);
        *result = (uint64_t)n;
        return rc;
    }
    size_t bytes = 0;
    cudaError_t rc = rgpu_occupancy_smem(&bytes, kernel, (int)a, (int)b);
    *result = bytes;
    return rc;
}

static cudaError_t occupancy(const void *func, unsigned query, uint64_t a, uint64_t b, uint64_t c,
                             uint64_t *result)
{
    struct kernel *k = kernel_by_host_fn(func);
    int rc;

    if (!k)
        return RESULT(cudaErrorInvalidDeviceFunction);
    if ((rc = kernel_resolve(k)) != cudaSuccess)
        return rc;
    unsigned epoch = rgpu_contexts_epoch();
    int dev = current_device();
    pthread_mutex_lock(&facts_lock);
    int known = occupancy_known(facts_of(k, dev, epoch), query, a, b, c, result);
    pthread_mutex_unlock(&facts_lock);
    if (known)
        return cudaSuccess;

    rc = occupancy_ask((cudaKernel_t)(uintptr_t)k->handle, query, a, b, c, result);
    if (rc == cudaSuccess) {
        pthread_mutex_lock(&facts_lock);
        struct kernel_facts *f = facts_of(k, dev, epoch);
        if (f) {
            f->occ[f->occ_next++ % OCC_SLOTS] = (struct occ_answer){ query, a, b, c, *result };
        }
        pthread_mutex_unlock(&facts_lock);
    }
    return rc;
}

static cudaError_t max_active_blocks(int *numBlocks, const void *func, int blockSize,
                                     size_t dynamicSMemSize, unsigned int flags)
{
    uint64_t n = 0;
    if (!numBlocks || blockSize <= 0)
        return RESULT(cudaErrorInvalidValue);
    int rc = occupancy(func, OCC_BLOCKS, (uint64_t)blockSize, dynamicSMemSize, flags, &n);
    if (rc == cudaSuccess)
        *numBlocks = (int)n;
    return rc;
}

RGPU_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks,
                                                                      const void *func,
                                                                      int blockSize,
                                                                      size_t dynamicSMemSize)
{
    return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

RGPU_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

RGPU_EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize,
                                                                  const void *func,
                                                                  int numBlocks, int blockSize)
{
    uint64_t n = 0;
    if (!dynamicSmemSize)
        return RESULT(cudaErrorInvalidValue);
    int rc = occupancy(func, OCC_SMEM, (uint64_t)numBlocks, (uint64_t)blockSize, 0, &n);
    if (rc == cudaSuccess)
        *dynamicSmemSize = (size_t)n;
    return rc;
}

/* ---- stream capture ----------------------------------------------------------------- */

struct capture_query {
    cudaStream_t stream;
    int per_thread;
    enum cudaStreamCaptureStatus *status;
    unsigned long long *id;
    cudaGraph_t *graph;
};

static int ask_capture_info(void *ctx, void *nodes, void *edges, size_t room, size_t *count)
{
    const struct capture_query *q = ctx;
    return rgpu_capture_info(q->stream, q->per_thread, q->status, q->id, q->graph,
                             (cudaGraphNode_t *)nodes, (cudaGraphEdgeData *)edges, room, count);
}

/* The dependency arrays the library hands back live in the server's
 * memory: with them, the nodes and edges come back in the reply
 * (rgpu_capture_info) into arrays the client keeps for the stream until
 * its next query (common/rgpu_capture_arrays.c), which outlives what CUDA
 * promises of its own.  Without them, the generated call. */
static cudaError_t capture_info(const struct rgpu_proc *proc, int per_thread,
                                cudaStream_t stream,
                                enum cudaStreamCaptureStatus *captureStatus_out,
                                unsigned long long *id_out, cudaGraph_t *graph_out,
                                const cudaGraphNode_t **dependencies_out,
                                const cudaGraphEdgeData **edgeData_out,
                                size_t *numDependencies_out)
{
    const void *argv[] = { &stream, &captureStatus_out, &id_out, &graph_out,
                           &dependencies_out, &edgeData_out, &numDependencies_out };
    if (!dependencies_out && !edgeData_out)
        return rgpu_call(LIB, proc, argv);
    struct capture_query q = { stream, per_thread, captureStatus_out, id_out, graph_out };
    void *nodes = NULL, *edges = NULL;
    size_t n = 0;
    int rc = rgpu_capture_query_arrays((uint64_t)(uintptr_t)stream, per_thread,
                                       sizeof(cudaGraphNode_t), sizeof(cudaGraphEdgeData),
                                       dependencies_out != NULL, edgeData_out != NULL,
                                       ask_capture_info, &q, &nodes, &edges, &n);
    if (rc < 0)
        return RESULT(cudaErrorMemoryAllocation);
    if (rc != cudaSuccess)
        return rc;
    if (dependencies_out)
        *dependencies_out = n ? (const cudaGraphNode_t *)nodes : NULL;
    if (edgeData_out)
        *edgeData_out = n ? (const cudaGraphEdgeData *)edges : NULL;
    if (numDependencies_out)
        *numDependencies_out = n;
    return cudaSuccess;
}

#undef cudaStreamGetCaptureInfo
RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                                 enum cudaStreamCaptureStatus *captureStatus_out,
                                                 unsigned long long *id_out,
                                                 cudaGraph_t *graph_out,
                                                 const cudaGraphNode_t **dependencies_out,
                                                 const cudaGraphEdgeData **edgeData_out,
                                                 size_t *numDependencies_out)
{
    return capture_info(RGPU_CUDART_cudaStreamGetCaptureInfo, 0, stream, captureStatus_out,
                        id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out);
}

RGPU_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(
    cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
    unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(RGPU_CUDART_cudaStreamGetCaptureInfo_ptsz, 1, stream,
                        captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out);
}

/* ---- graphs ---------------------------------------------------------------------- */

/* Counting a graph's nodes is the generated call; the list comes through
 * the graph procedures (stubs/cudart_graphs.c), which add its nodes to the
 * session's handles. */
int rgpu_cudart_graph_nodes(int which, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);

#undef cudaGraphGetNodes
RGPU_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes,
                                          size_t *numNodes)
{
    const void *argv[] = { &graph, &nodes, &numNodes };
    if (nodes)
        return rgpu_cudart_graph_nodes(0, graph, nodes, numNodes);
    return rgpu_call(LIB, RGPU_CUDART_cudaGraphGetNodes, argv);
}

/* ---- __device__ variables ------------------------------------------------------ */

/* The device address and size of a registered variable (internal to the
 * runtime stub; used by the symbol copies). */
int rgpu_cudart_symbol(const void *symbol, uint64_t *dev, size_t *size);
int rgpu_cudart_symbol(const void *symbol, uint64_t *dev, size_t *size)
{
    struct var *v = var_by_host(symbol);
    int rc;

    if (!v)
        return RESULT(cudaErrorInvalidSymbol);
    if ((rc = module_load(v->mod)) != cudaSuccess)
        return rc;
    /* The variable of the module's library on the server (the generated
     * cudaLibraryGetGlobal; the daemon records it as the session's). */
    void *ptr = NULL;
    size_t *bytes = size;
    cudaLibrary_t library = (cudaLibrary_t)(uintptr_t)v->mod->library;
    const char *name = v->name;
    void **dptr = &ptr;
    const void *argv[] = { &dptr, &bytes, &library, &name };
    rc = rgpu_call(LIB, RGPU_CUDART_cudaLibraryGetGlobal, argv);
    *dev = (uint64_t)(uintptr_t)ptr;
    return rc;
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cudart_lib);
}
