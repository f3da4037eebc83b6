/* cuBLASXt on the client, made of rgpu's cuBLAS (docs/architecture.md,
 * "cuBLASXt").
 *
 * cuBLASXt takes matrices in host memory (or any device's) and spreads the
 * work over the GPUs a handle selected, tile by tile.  Here a handle is a
 * client object: per selected device, that device's primary context, a
 * cuBLAS handle and a stream of its own, and three tile buffers of device
 * memory.  A gemm's C is cut into tiles of the handle's block dimension,
 * dealt to the devices in turn; each tile moves in, is multiplied along K
 * a block at a time (cuBLAS gemm on the tiles, beta on the first block,
 * one after), and moves back.  Host tiles travel as cublasSetMatrixAsync /
 * cublasGetMatrixAsync do; tiles of device memory by the driver's 2D copies.
 * The driver comes from rgpu's libcuda.so.1 (as NVIDIA's cuBLAS reaches
 * the driver through its runtime).  Everything else of cuBLASXt is refused
 * by the generated stubs (codegen/cublas.ann). */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "client_ranges.h"
#include "cublas_procs.h"

#include <cublasXt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cublas_lib)
#define XT_MAX_DEVICES 16
#define XT_DEFAULT_BLOCK 1024

/* ---- the driver, from rgpu's libcuda.so.1 -------------------------------------- */

static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_count)(int *);
    CUresult (*device_attr)(int *, CUdevice_attribute, CUdevice);
    CUresult (*ctx_device)(CUdevice *);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*push)(CUcontext);
    CUresult (*pop)(CUcontext *);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*copy_2d)(const CUDA_MEMCPY2D *, CUstream);
    CUresult (*pointer_attr)(void *, CUpointer_attribute, CUdeviceptr);
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static int drv_ok;

static void drv_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    struct { void **fn; const char *name; } syms[] = {
        { (void **)&drv.init, "cuInit" },
        { (void **)&drv.device_get, "cuDeviceGet" },
        { (void **)&drv.device_count, "cuDeviceGetCount" },
        { (void **)&drv.device_attr, "cuDeviceGetAttribute" },
        { (void **)&drv.ctx_device, "cuCtxGetDevice" },
        { (void **)&drv.retain, "cuDevicePrimaryCtxRetain" },
        { (void **)&drv.release, "cuDevicePrimaryCtxRelease_v2" },
        { (void **)&drv.push, "cuCtxPushCurrent_v2" },
        { (void **)&drv.pop, "cuCtxPopCurrent_v2" },
        { (void **)&drv.mem_alloc, "cuMemAlloc_v2" },
        { (void **)&drv.mem_free, "cuMemFree_v2" },
        { (void **)&drv.stream_create, "cuStreamCreate" },
        { (void **)&drv.stream_destroy, "cuStreamDestroy_v2" },
        { (void **)&drv.stream_sync, "cuStreamSynchronize" },
        { (void **)&drv.copy_2d, "cuMemcpy2DAsync_v2" },
        { (void **)&drv.pointer_attr, "cuPointerGetAttribute" },
    };
    if (!h) {
        rgpu_warn("cuBLASXt: cannot load libcuda.so.1: %s", dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
            rgpu_warn("cuBLASXt: libcuda.so.1 lacks %s", syms[i].name);
            return;
        }
    drv_ok = drv.init(0) == CUDA_SUCCESS;
}

static int driver(void)
{
    pthread_once(&drv_once, drv_load);
    return drv_ok;
}

/* ---- handles -------------------------------------------------------------------- */

struct xt_device {
    int id;
    CUcontext ctx;              /* its primary context, retained; NULL until first used */
    cublasHandle_t blas;
    CUstream stream;
    CUdeviceptr tile[3];        /* A, B and C tiles */
    size_t tile_bytes;
};

struct cublasXtContext {
    int ndev;
    struct xt_device dev[XT_MAX_DEVICES];
    int block_dim;
    cublasXtPinnedMemMode_t pinning;
};

/* Make d ready: its context current (pushed), and its cuBLAS handle and
 * stream, made the first time. */
static cublasStatus_t device_enter(struct xt_device *d)
{
    CUdevice dev;
    if (!d->ctx && (drv.device_get(&dev, d->id) != CUDA_SUCCESS ||
                    drv.retain(&d->ctx, dev) != CUDA_SUCCESS)) {
        d->ctx = NULL;
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (drv.push(d->ctx) != CUDA_SUCCESS)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (d->blas)
        return CUBLAS_STATUS_SUCCESS;
    cublasStatus_t st = cublasCreate_v2(&d->blas);
    if (st == CUBLAS_STATUS_SUCCESS &&
        drv.stream_create(&d->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        st = CUBLAS_STATUS_ALLOC_FAILED;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasSetStream_v2(d->blas, (cudaStream_t)d->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        CUcontext popped;
        drv.pop(&popped);
    }
    return st;
}

static void device_leave(void)
{
    CUcontext popped;
    drv.pop(&popped);
}

/* Tile buffers of at least bytes each (d's context current). */
static cublasStatus_t tiles_fit(struct xt_device *d, size_t bytes)
{
    if (d->tile_bytes >= bytes)
        return CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < 3; i++) {
        if (d->tile[i])
            drv.mem_free(d->tile[i]);
        d->tile[i] = 0;
    }
    d->tile_bytes = 0;
    for (int i = 0; i < 3; i++)
        if (drv.mem_alloc(&d->tile[i], bytes) != CUDA_SUCCESS)
            return CUBLAS_STATUS_ALLOC_FAILED;
    d->tile_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

static void device_release(struct xt_device *d)
{
    CUdevice dev;
    if (!d->ctx || drv.push(d->ctx) != CUDA_SUCCESS)
        return;
    for (int i = 0; i < 3; i++)
        if (d->tile[i])
            drv.mem_free(d->tile[i]);
    if (d->stream)
        drv.stream_destroy(d->stream);
    if (d->blas)
        cublasDestroy_v2(d->blas);
    device_leave();
    if (drv.device_get(&dev, d->id) == CUDA_SUCCESS)
        drv.release(dev);
    memset(d, 0, sizeof *d);
}

RGPU_EXPORT cublasStatus_t cublasXtCreate(cublasXtHandle_t *handle)
{
    CUdevice current = 0;
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!driver())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    struct cublasXtContext *h = calloc(1, sizeof *h);
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    /* Until cublasXtDeviceSelect: the thread's current device. */
    if (drv.ctx_device(&current) != CUDA_SUCCESS)
        current = 0;
    h->ndev = 1;
    h->dev[0].id = (int)current;
    h->block_dim = XT_DEFAULT_BLOCK;
    h->pinning = CUBLASXT_PINNING_DISABLED;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasXtDestroy(cublasXtHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    for (int i = 0; i < handle->ndev; i++)
        device_release(&handle->dev[i]);
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasXtDeviceSelect(cublasXtHandle_t handle, int nbDevices,
                                                int deviceId[])
{
    int count = 0;
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (nbDevices <= 0 || nbDevices > XT_MAX_DEVICES || !deviceId)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (drv.device_count(&count) != CUDA_SUCCESS)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    for (int i = 0; i < nbDevices; i++) {
        if (deviceId[i] < 0 || deviceId[i] >= count)
            return CUBLAS_STATUS_INVALID_VALUE;
        for (int j = 0; j < i; j++)
            if (deviceId[j] == deviceId[i])
                return CUBLAS_STATUS_INVALID_VALUE;
    }
    for (int i = 0; i < handle->ndev; i++)
        device_release(&handle->dev[i]);
    handle->ndev = nbDevices;
    for (int i = 0; i < nbDevices; i++)
        handle->dev[i].id = deviceId[i];
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasXtSetBlockDim(cublasXtHandle_t handle, int blockDim)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (blockDim <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->block_dim = blockDim;
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasXtGetBlockDim(cublasXtHandle_t handle, int *blockDim)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!blockDim)
        return CUBLAS_STATUS_INVALID_VALUE;
    *blockDim = handle->block_dim;
    return CUBLAS_STATUS_SUCCESS;
}

/* Pinning is how cuBLASXt makes its copies of host memory fast; here host
 * tiles travel over the network either way, and the program's memory
 * stays as it is.  The mode is kept and answered. */
RGPU_EXPORT cublasStatus_t cublasXtSetPinningMemMode(cublasXtHandle_t handle,
                                                     cublasXtPinnedMemMode_t mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLASXT_PINNING_DISABLED && mode != CUBLASXT_PINNING_ENABLED)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->pinning = mode;
    return CUBLAS_STATUS_SUCCESS;
}

RGPU_EXPORT cublasStatus_t cublasXtGetPinningMemMode(cublasXtHandle_t handle,
                                                     cublasXtPinnedMemMode_t *mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pinning;
    return CUBLAS_STATUS_SUCCESS;
}

/* The boards the devices sit on: one per multi-GPU board group. */
RGPU_EXPORT cublasStatus_t cublasXtGetNumBoards(int nbDevices, int deviceId[], int *nbBoards)
{
    int groups[XT_MAX_DEVICES], n = 0;
    if (!nbBoards || !deviceId || nbDevices <= 0 || nbDevices > XT_MAX_DEVICES)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!driver())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    for (int i = 0; i < nbDevices; i++) {
        CUdevice dev;
        int g = 0, seen = 0;
        if (drv.device_get(&dev, deviceId[i]) != CUDA_SUCCESS ||
            drv.device_attr(&g, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, dev) !=
                CUDA_SUCCESS)
            return CUBLAS_STATUS_INVALID_VALUE;
        for (int j = 0; j < n && !seen; j++)
            seen = groups[j] == g;
        if (!seen)
            groups[n++] = g;
    }
    *nbBoards = n;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- gemm, tile by tile --------------------------------------------------------- */

enum xt_type { XT_S, XT_D, XT_C, XT_Z };

static size_t type_size(enum xt_type t)
{
    static const size_t sizes[] = { 4, 8, 8, 16 };
    return sizes[t];
}

/* One in each type, for beta after the first block of K. */
static const void *type_one(enum xt_type t)
{
    static const float s = 1.0f;
    static const double d = 1.0;
    static const cuComplex c = { 1.0f, 0.0f };
    static const cuDoubleComplex z = { 1.0, 0.0 };
    static const void *const ones[] = { &s, &d, &c, &z };
    return ones[t];
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* A matrix of the call: column-major at ptr with leading dimension ld. */
struct xt_matrix {
    const char *ptr;
    size_t ld;
    int on_device;              /* device memory this process was handed */
    int device;                 /* whose, where the client knows it; else -1 */
};

/* The device of device memory at p: as the client recorded it, else asked
 * of the driver once and recorded. */
static int device_of(uint64_t p)
{
    uint64_t base;
    int dev = rgpu_ranges_device(p);
    if (dev >= 0 || rgpu_ranges_find(p, &base, NULL) != RGPU_RANGE_DEVICE)
        return dev;
    if (drv.pointer_attr(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p) !=
        CUDA_SUCCESS)
        return -1;
    rgpu_ranges_set_device(base, dev);
    return dev;
}

static struct xt_matrix matrix_of(const void *p, size_t ld)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    int device = rgpu_ranges_find(a, NULL, NULL) == RGPU_RANGE_DEVICE;
    return (struct xt_matrix){ p, ld, device, device ? device_of(a) : -1 };
}

/* A block of a matrix as a gemm takes it: where it is and its leading
 * dimension. */
struct xt_block {
    const void *ptr;
    int ld;
};

/* The host rows of a block to the tile at dev (packed there: leading
 * dimension rows): sent without waiting where the waiting policy lets a
 * copy to the device go so (common/rgpu_lazy.c), its failure then
 * reported by the tile's last copy back, which waits. */
static cublasStatus_t host_to_tile(struct xt_device *d, const char *at, size_t ld, size_t rows,
                                   size_t cols, size_t elem, CUdeviceptr dev)
{
    size_t width = rows * elem;
    uint64_t stream = (uint64_t)(uintptr_t)d->stream;
    int rc = rgpu_copy_htod_2d(LIB, RGPU_CUBLAS_rgpu_cublas_htod_2d, dev, width, at, ld * elem,
                               width, cols, stream,
                               !rgpu_lazy_copy_to_device(dev, width * cols, stream));
    return rc == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_MAPPING_ERROR;
}

/* rows x cols of m from (row, col) into the tile at dev (leading
 * dimension rows), on d's stream; or back (to_tile 0).  Device memory of
 * another device, or of one the client does not know, moves by the
 * driver's 2D copies. */
static cublasStatus_t move_tile(struct xt_device *d, const struct xt_matrix *m, size_t row,
                                size_t col, size_t rows, size_t cols, size_t elem,
                                CUdeviceptr dev, int to_tile)
{
    const char *at = m->ptr + (row + col * m->ld) * elem;
    if (!rows || !cols)
        return CUBLAS_STATUS_SUCCESS;
    if (!m->on_device)
        return to_tile ? host_to_tile(d, at, m->ld, rows, cols, elem, dev)
                       : cublasGetMatrixAsync_64((int64_t)rows, (int64_t)cols, (int64_t)elem,
                                                 (const void *)(uintptr_t)dev, (int64_t)rows,
                                                 (void *)at, (int64_t)m->ld,
                                                 (cudaStream_t)d->stream);
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = to_tile ? (CUdeviceptr)(uintptr_t)at : dev;
    c.srcPitch = to_tile ? m->ld * elem : rows * elem;
    c.dstDevice = to_tile ? dev : (CUdeviceptr)(uintptr_t)at;
    c.dstPitch = to_tile ? rows * elem : m->ld * elem;
    c.WidthInBytes = rows * elem;
    c.Height = cols;
    return drv.copy_2d(&c, d->stream) == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                                                      : CUBLAS_STATUS_MAPPING_ERROR;
}

/* Whether m's blocks are used where they are on d: device memory of d's. */
static int in_place(const struct xt_matrix *m, const struct xt_device *d)
{
    return m->on_device && m->device == d->id;
}

/* The block of rows x cols at (row, col) of m for a gemm on d: in place,
 * or moved into tile i. */
static cublasStatus_t block_in(struct xt_device *d, const struct xt_matrix *m, size_t row,
                               size_t col, size_t rows, size_t cols, size_t elem, int i,
                               struct xt_block *b)
{
    if (in_place(m, d)) {
        *b = (struct xt_block){ m->ptr + (row + col * m->ld) * elem, (int)m->ld };
        return CUBLAS_STATUS_SUCCESS;
    }
    *b = (struct xt_block){ (const void *)(uintptr_t)d->tile[i], rows ? (int)rows : 1 };
    return move_tile(d, m, row, col, rows, cols, elem, d->tile[i], 1);
}

struct xt_gemm {
    enum xt_type type;
    cublasOperation_t ta, tb;
    size_t m, n, k;
    const void *alpha, *beta;
    struct xt_matrix a, b, c;
};

static int stored_transposed(cublasOperation_t op)
{
    return op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* The gemm of one block of K.  The last of a tile waits for its status:
 * cuBLAS calls that went without waiting report their errors at the next
 * cuBLAS call that waits, which must be this Xt call. */
static cublasStatus_t block_gemm(const struct xt_gemm *g, struct xt_device *d, size_t mi,
                                 size_t nj, size_t kp, const struct xt_block *a,
                                 const struct xt_block *b, const struct xt_block *c,
                                 const void *beta, int wait)
{
    static const struct rgpu_proc *const procs[] = {
        RGPU_CUBLAS_cublasSgemm_v2, RGPU_CUBLAS_cublasDgemm_v2, RGPU_CUBLAS_cublasCgemm_v2,
        RGPU_CUBLAS_cublasZgemm_v2,
    };
    int m = (int)mi, n = (int)nj, k = (int)kp;
    void *C = (void *)(uintptr_t)c->ptr;
    const void *argv[] = { &d->blas, &g->ta, &g->tb, &m, &n, &k, &g->alpha, &a->ptr, &a->ld,
                           &b->ptr, &b->ld, &beta, &C, &c->ld };
    const struct rgpu_proc *proc = procs[g->type];
    return (cublasStatus_t)(wait ? rgpu_call_waiting(LIB, proc, argv)
                                 : rgpu_call(LIB, proc, argv));
}

/* C's tile of mi x nj at (i0, j0) on device d: in (where beta reads it),
 * multiplied along K a block at a time, out. */
static cublasStatus_t gemm_tile(const struct xt_gemm *g, struct xt_device *d, size_t bd,
                                size_t i0, size_t j0, size_t mi, size_t nj)
{
    size_t elem = type_size(g->type);
    struct xt_block a, b, c;
    int place_c = in_place(&g->c, d);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (place_c || !all_zero(g->beta, elem))
        st = block_in(d, &g->c, i0, j0, mi, nj, elem, 2, &c);
    else
        c = (struct xt_block){ (const void *)(uintptr_t)d->tile[2], (int)mi };
    size_t p0 = 0;
    do {            /* K of 0 still scales C by beta */
        size_t kp = g->k - p0 < bd ? g->k - p0 : bd;
        int ta = stored_transposed(g->ta), tb = stored_transposed(g->tb);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = block_in(d, &g->a, ta ? p0 : i0, ta ? i0 : p0, ta ? kp : mi, ta ? mi : kp, elem,
                          0, &a);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = block_in(d, &g->b, tb ? j0 : p0, tb ? p0 : j0, tb ? nj : kp, tb ? kp : nj, elem,
                          1, &b);
        p0 += kp;
        if (st == CUBLAS_STATUS_SUCCESS)
            st = block_gemm(g, d, mi, nj, kp, &a, &b, &c, p0 == kp ? g->beta : type_one(g->type),
                            p0 >= g->k);
    } while (st == CUBLAS_STATUS_SUCCESS && p0 < g->k);
    if (st == CUBLAS_STATUS_SUCCESS && !place_c)
        st = move_tile(d, &g->c, i0, j0, mi, nj, elem, d->tile[2], 0);
    return st;
}

/* Room for any tile of the call: a block dimension squared, or less where
 * the matrices are smaller. */
static size_t tile_bytes(const struct xt_gemm *g, size_t bd)
{
    size_t most = g->m > g->n ? g->m : g->n;
    most = most > g->k ? most : g->k;
    most = most < bd ? most : bd;
    return most * most * type_size(g->type);
}

/* The tiles of C dealt to the devices in turn, each device's in a row
 * under its context. */
static cublasStatus_t gemm_tiles(cublasXtHandle_t h, const struct xt_gemm *g)
{
    size_t bd = (size_t)h->block_dim, ndev = (size_t)h->ndev;
    size_t tiles_m = (g->m + bd - 1) / bd, tiles = tiles_m * ((g->n + bd - 1) / bd);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (size_t i = 0; i < ndev && i < tiles && st == CUBLAS_STATUS_SUCCESS; i++) {
        struct xt_device *d = &h->dev[i];
        if ((st = device_enter(d)) != CUBLAS_STATUS_SUCCESS)
            break;
        st = tiles_fit(d, tile_bytes(g, bd));
        for (size_t t = i; t < tiles && st == CUBLAS_STATUS_SUCCESS; t += ndev) {
            size_t i0 = t % tiles_m * bd, j0 = t / tiles_m * bd;
            size_t mi = g->m - i0 < bd ? g->m - i0 : bd, nj = g->n - j0 < bd ? g->n - j0 : bd;
            st = gemm_tile(g, d, bd, i0, j0, mi, nj);
        }
        /* What went to device memory went on the device's stream. */
        if (drv.stream_sync(d->stream) != CUDA_SUCCESS && st == CUBLAS_STATUS_SUCCESS)
            st = CUBLAS_STATUS_EXECUTION_FAILED;
        device_leave();
    }
    return st;
}

static cublasStatus_t xt_gemm(cublasXtHandle_t handle, enum xt_type type,
                              cublasOperation_t transa, cublasOperation_t transb, size_t m,
                              size_t n, size_t k, const void *alpha, const void *A, size_t lda,
                              const void *B, size_t ldb, const void *beta, void *C, size_t ldc)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    size_t arows = stored_transposed(transa) ? k : m, brows = stored_transposed(transb) ? n : k;
    if (!alpha || !beta || lda < (arows ? arows : 1) || ldb < (brows ? brows : 1) ||
        ldc < (m ? m : 1) || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* With k of 0 no tile has a block of k to compute, and C stays as it
     * was.  BLAS would scale it by beta; NVIDIA's cuBLASXt (CUDA 13.0, on
     * an H200) returned success and left C as it was in one run, changed
     * some of it in another: no defined result to copy. */
    if (!m || !n || !k)
        return CUBLAS_STATUS_SUCCESS;
    struct xt_gemm g = { type, transa, transb, m, n, k, alpha, beta,
                         matrix_of(A, lda), matrix_of(B, ldb), matrix_of(C, ldc) };
    return gemm_tiles(handle, &g);
}

RGPU_EXPORT cublasStatus_t cublasXtSgemm(cublasXtHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, size_t m, size_t n, size_t k,
                                         const float *alpha, const float *A, size_t lda,
                                         const float *B, size_t ldb, const float *beta,
                                         float *C, size_t ldc)
{
    return xt_gemm(handle, XT_S, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

RGPU_EXPORT cublasStatus_t cublasXtDgemm(cublasXtHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, size_t m, size_t n, size_t k,
                                         const double *alpha, const double *A, size_t lda,
                                         const double *B, size_t ldb, const double *beta,
                                         double *C, size_t ldc)
{
    return xt_gemm(handle, XT_D, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

RGPU_EXPORT cublasStatus_t cublasXtCgemm(cublasXtHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, size_t m, size_t n, size_t k,
                                         const cuComplex *alpha, const cuComplex *A, size_t lda,
                                         const cuComplex *B, size_t ldb, const cuComplex *beta,
                                         cuComplex *C, size_t ldc)
{
    return xt_gemm(handle, XT_C, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

RGPU_EXPORT cublasStatus_t cublasXtZgemm(cublasXtHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, size_t m, size_t n, size_t k,
                                         const cuDoubleComplex *alpha, const cuDoubleComplex *A,
                                         size_t lda, const cuDoubleComplex *B, size_t ldb,
                                         const cuDoubleComplex *beta, cuDoubleComplex *C,
                                         size_t ldc)
{
    return xt_gemm(handle, XT_Z, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
