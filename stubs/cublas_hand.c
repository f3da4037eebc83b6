/* Hand-written parts of libcublas: the state of each handle the client
 * set (its pointer mode decides whether alpha, beta and results are host
 * values or device pointers), host<->device vector and matrix copies, and
 * what is answered on the client.  Everything else is generated from
 * codegen/cublas.ann. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "cublas_procs.h"

#include <cublas_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cublas_lib)

/* ---- what the client knows of each handle --------------------------------------- */

/* PyTorch sets the stream, the workspace and the math mode of its handle
 * around every gemm and asks the math mode once more inside: the sets went
 * without waiting already, each question was a round trip.  A handle's
 * state changes only through this process's own calls, so what the client
 * set or once asked is the answer: the pointer mode (cuBLAS documents host
 * mode after cublasCreate, and the scalars' encoding relies on it), the
 * math mode, the atomics mode and the stream (asked the first time, then
 * known).  A set of a known handle to a value cuBLAS takes goes without
 * waiting (it can only fail for the handle), and one to the value already
 * known is not sent at all; anything else waits, so that a bad handle or
 * value fails at once, as with a local cuBLAS. */
enum { K_POINTER = 1, K_MATH = 2, K_ATOMICS = 4, K_STREAM = 8 };

struct handle_state {
    uint64_t handle;
    unsigned known;             /* K_* */
    int32_t pointer_mode, math_mode, atomics_mode;
    uint64_t stream;
};

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle_state *handles;
static size_t nhandles, handles_cap;

/* With handles_lock held: h's state, or NULL when h is no handle this
 * process created (and did not destroy). */
static struct handle_state *state_of(const void *h)
{
    for (size_t i = 0; i < nhandles; i++)
        if (handles[i].handle == (uint64_t)(uintptr_t)h)
            return &handles[i];
    return NULL;
}

static void handle_created(const void *h)
{
    pthread_mutex_lock(&handles_lock);
    struct handle_state *st = state_of(h);
    if (!st && nhandles == handles_cap) {
        size_t cap = handles_cap ? 2 * handles_cap : 16;
        struct handle_state *n = realloc(handles, cap * sizeof *n);
        if (n) {
            handles = n;
            handles_cap = cap;
        }
    }
    if (!st && nhandles < handles_cap)
        st = &handles[nhandles++];
    if (st)
        *st = (struct handle_state){ .handle = (uint64_t)(uintptr_t)h, .known = K_POINTER,
                                     .pointer_mode = CUBLAS_POINTER_MODE_HOST };
    pthread_mutex_unlock(&handles_lock);
}

static void handle_destroyed(const void *h)
{
    pthread_mutex_lock(&handles_lock);
    struct handle_state *st = state_of(h);
    if (st)
        *st = handles[--nhandles];
    pthread_mutex_unlock(&handles_lock);
}

static int handle_known(const void *h)
{
    pthread_mutex_lock(&handles_lock);
    int known = state_of(h) != NULL;
    pthread_mutex_unlock(&handles_lock);
    return known;
}

/* The 32-bit field of a handle's state that `what` (one K_*) names. */
static int32_t *field_of(struct handle_state *st, unsigned what)
{
    return what == K_POINTER ? &st->pointer_mode
           : what == K_MATH  ? &st->math_mode
                             : &st->atomics_mode;
}

/* 1 with *value when `what` of h is known. */
static int state_get(const void *h, unsigned what, int64_t *value)
{
    pthread_mutex_lock(&handles_lock);
    struct handle_state *st = state_of(h);
    int known = st && (st->known & what);
    if (known)
        *value = what == K_STREAM ? (int64_t)st->stream : *field_of(st, what);
    pthread_mutex_unlock(&handles_lock);
    return known;
}

static void state_set(const void *h, unsigned what, int64_t value)
{
    pthread_mutex_lock(&handles_lock);
    struct handle_state *st = state_of(h);
    if (st) {
        st->known |= what;
        if (what == K_STREAM)
            st->stream = (uint64_t)value;
        else
            *field_of(st, what) = (int32_t)value;
    }
    pthread_mutex_unlock(&handles_lock);
}

/* A mode setter: the value already known is not sent; a value cuBLAS takes
 * (`valid`) goes without waiting on a handle the core knows (rgpu_call
 * waits for any other); anything else waits.  argv: handle, value. */
static cublasStatus_t set_mode(const struct rgpu_proc *proc, const void *const *argv,
                               unsigned what, int valid)
{
    const void *h = *(const cublasHandle_t *)argv[0];
    int32_t value = *(const int32_t *)argv[1];
    int64_t known;
    if (state_get(h, what, &known) && known == value)
        return CUBLAS_STATUS_SUCCESS;
    int rc = valid ? rgpu_call(LIB, proc, argv) : rgpu_call_waiting(LIB, proc, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        state_set(h, what, value);
    return rc;
}

/* A mode getter: known, or asked once.  argv: handle, out. */
static cublasStatus_t get_mode(const struct rgpu_proc *proc, const void *const *argv,
                               unsigned what)
{
    const void *h = *(const cublasHandle_t *)argv[0];
    int32_t *out = *(int32_t *const *)argv[1];
    int64_t known;
    if (out && state_get(h, what, &known)) {
        *out = (int32_t)known;
        return CUBLAS_STATUS_SUCCESS;
    }
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && out)
        state_set(h, what, *out);
    return rc;
}

/* Every cuBLAS call with scalars takes the handle first. */
static int scalars_on_host(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    (void)param;
    if (proc->nparams == 0 || strcmp(proc->params[0].name, "handle") != 0)
        return 1;
    int64_t mode;
    return !state_get(*(const cublasHandle_t *)argv[0], K_POINTER, &mode) ||
           mode == CUBLAS_POINTER_MODE_HOST;
}

static int is_complex_type(int t)
{
    switch (t) {
    case CUDA_C_16F: case CUDA_C_16BF: case CUDA_C_32F: case CUDA_C_64F:
    case CUDA_C_8I: case CUDA_C_8U: case CUDA_C_32I: case CUDA_C_32U:
        return 1;
    default:
        return 0;
    }
}

/* Bytes of an untyped scalar: its type is a cudaDataType (axpy, dot...) or
 * a cublasComputeType_t (gemm), whose scalars are real or complex as the
 * output matrix is (ctype). */
static uint32_t scalar_bytes(int type, int ctype)
{
    int cplx = is_complex_type(ctype);
    switch (type) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC:
        return cplx ? 4 : 2;
    case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_PEDANTIC: case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF: case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        return cplx ? 8 : 4;
    case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        return cplx ? 16 : 8;
    case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC:
        return 4;
    case CUDA_R_16F: case CUDA_R_16BF: case CUDA_C_8I: case CUDA_C_8U:
        return 2;
    case CUDA_R_8I: case CUDA_R_8U:
        return 1;
    case CUDA_R_32F: case CUDA_C_16F: case CUDA_C_16BF: case CUDA_R_32I: case CUDA_R_32U:
        return 4;
    case CUDA_R_64F: case CUDA_C_32F: case CUDA_C_32I: case CUDA_C_32U:
        return 8;
    case CUDA_C_64F:
        return 16;
    default:
        return 16;      /* unknown: the largest; the server ignores the rest */
    }
}

static int int_arg(const struct rgpu_proc *proc, int index, const void *const *argv)
{
    if (index < 0 || index >= proc->nparams)
        return -1;
    return *(const int *)argv[index];
}

static uint32_t untyped_scalar_size(const struct rgpu_proc *proc, unsigned param,
                                    const void *const *argv)
{
    const struct rgpu_param *p = &proc->params[param];
    return scalar_bytes(int_arg(proc, p->len_arg, argv), int_arg(proc, p->aux_arg, argv));
}

static const struct rgpu_scalar_policy cublas_scalars = { scalars_on_host, untyped_scalar_size,
                                                          NULL };

__attribute__((constructor)) static void register_policy(void)
{
    rgpu_register_scalar_policy(LIB, &cublas_scalars);
}

/* ---- handles -------------------------------------------------------------------- */

#undef cublasCreate_v2
RGPU_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    const void *argv[] = { &handle };
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasCreate_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && handle)
        handle_created(*handle);
    return rc;
}

/* Only a known handle is destroyed without waiting. */
#undef cublasDestroy_v2
RGPU_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    const void *argv[] = { &handle };
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasDestroy_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        handle_destroyed(handle);
    return rc;
}

#undef cublasSetPointerMode_v2
RGPU_EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    const void *argv[] = { &handle, &mode };
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    return set_mode(RGPU_CUBLAS_cublasSetPointerMode_v2, argv, K_POINTER, 1);
}

#undef cublasGetPointerMode_v2
RGPU_EXPORT cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    const void *argv[] = { &handle, &mode };
    return get_mode(RGPU_CUBLAS_cublasGetPointerMode_v2, argv, K_POINTER);
}

/* The math modes of cublas_api.h that every cuBLAS of this major takes, with
 * or without the flag that disallows reduced-precision reductions (the
 * emulation modes may depend on the GPU: those wait). */
static int math_mode_valid(cublasMath_t mode)
{
    int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH ||
           base == CUBLAS_PEDANTIC_MATH || base == CUBLAS_TF32_TENSOR_OP_MATH;
}

#undef cublasSetMathMode
RGPU_EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    const void *argv[] = { &handle, &mode };
    return set_mode(RGPU_CUBLAS_cublasSetMathMode, argv, K_MATH, math_mode_valid(mode));
}

#undef cublasGetMathMode
RGPU_EXPORT cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    const void *argv[] = { &handle, &mode };
    return get_mode(RGPU_CUBLAS_cublasGetMathMode, argv, K_MATH);
}

#undef cublasSetAtomicsMode
RGPU_EXPORT cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
    const void *argv[] = { &handle, &mode };
    return set_mode(RGPU_CUBLAS_cublasSetAtomicsMode, argv, K_ATOMICS,
                    mode == CUBLAS_ATOMICS_NOT_ALLOWED || mode == CUBLAS_ATOMICS_ALLOWED);
}

#undef cublasGetAtomicsMode
RGPU_EXPORT cublasStatus_t cublasGetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t *mode)
{
    const void *argv[] = { &handle, &mode };
    return get_mode(RGPU_CUBLAS_cublasGetAtomicsMode, argv, K_ATOMICS);
}

/* Setting the stream also drops the user's workspace (cuBLAS documents it),
 * so it is sent even when the stream is the one set: PyTorch sets both
 * before every gemm.  Neither waits on a known handle. */
#undef cublasSetStream_v2
RGPU_EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    const void *argv[] = { &handle, &streamId };
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasSetStream_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        state_set(handle, K_STREAM, (int64_t)(uintptr_t)streamId);
    return rc;
}

#undef cublasGetStream_v2
RGPU_EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    const void *argv[] = { &handle, &streamId };
    int64_t known;
    if (streamId && state_get(handle, K_STREAM, &known)) {
        *streamId = (cudaStream_t)(uintptr_t)known;
        return CUBLAS_STATUS_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasGetStream_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && streamId)
        state_set(handle, K_STREAM, (int64_t)(uintptr_t)*streamId);
    return rc;
}

/* cuBLAS refuses a workspace not aligned to 256 bytes: that one waits. */
#undef cublasSetWorkspace_v2
RGPU_EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                                 size_t workspaceSizeInBytes)
{
    const void *argv[] = { &handle, &workspace, &workspaceSizeInBytes };
    return (uintptr_t)workspace % 256 == 0
               ? rgpu_call(LIB, RGPU_CUBLAS_cublasSetWorkspace_v2, argv)
               : rgpu_call_waiting(LIB, RGPU_CUBLAS_cublasSetWorkspace_v2, argv);
}

/* The library's version: the same for every handle, asked once (through
 * a handle this process holds, so that a bad handle is still refused). */
#undef cublasGetVersion_v2
RGPU_EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    static int known;
    const void *argv[] = { &handle, &version };
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (version && v && handle_known(handle)) {
        *version = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasGetVersion_v2, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && version && handle_known(handle))
        __atomic_store_n(&known, *version, __ATOMIC_RELAXED);
    return rc;
}

#undef cublasGetProperty
RGPU_EXPORT cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    static int known[3], have[3];
    const void *argv[] = { &type, &value };
    int cacheable = value && (int)type >= 0 && (int)type < 3;
    if (cacheable && __atomic_load_n(&have[type], __ATOMIC_ACQUIRE)) {
        *value = known[type];
        return CUBLAS_STATUS_SUCCESS;
    }
    int rc = rgpu_call(LIB, RGPU_CUBLAS_cublasGetProperty, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && cacheable) {
        known[type] = *value;
        __atomic_store_n(&have[type], 1, __ATOMIC_RELEASE);
    }
    return rc;
}

/* ---- vectors and matrices between host and device ------------------------------- */

/* A runtime failure moving bytes is cuBLAS's mapping error. */
static cublasStatus_t copy_status(int rc)
{
    return rc == 0 ? CUBLAS_STATUS_SUCCESS
           : rc == CUBLAS_STATUS_NOT_SUPPORTED || rc == CUBLAS_STATUS_NOT_INITIALIZED
               ? (cublasStatus_t)rc
               : CUBLAS_STATUS_MAPPING_ERROR;
}

static cublasStatus_t set_matrix(int64_t rows, int64_t cols, int64_t elemSize, const void *A,
                                 int64_t lda, void *B, int64_t ldb, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elemSize <= 0 || lda <= 0 || ldb <= 0 || lda < rows ||
        ldb < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows == 0 || cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_htod_2d(LIB, RGPU_CUBLAS_rgpu_cublas_htod_2d,
                                         (uint64_t)(uintptr_t)B, (size_t)ldb * es, A,
                                         (size_t)lda * es, (size_t)rows * es, (size_t)cols,
                                         (uint64_t)(uintptr_t)stream, 1));
}

static cublasStatus_t get_matrix(int64_t rows, int64_t cols, int64_t elemSize, const void *A,
                                 int64_t lda, void *B, int64_t ldb, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elemSize <= 0 || lda <= 0 || ldb <= 0 || lda < rows ||
        ldb < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows == 0 || cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_dtoh_2d(LIB, RGPU_CUBLAS_rgpu_cublas_dtoh_2d, B,
                                         (size_t)ldb * es, (uint64_t)(uintptr_t)A,
                                         (size_t)lda * es, (size_t)rows * es, (size_t)cols,
                                         (uint64_t)(uintptr_t)stream));
}

/* A vector with strides is a matrix of n rows of one element. */
static cublasStatus_t set_vector(int64_t n, int64_t elemSize, const void *x, int64_t incx,
                                 void *y, int64_t incy, cudaStream_t stream)
{
    if (n < 0 || elemSize <= 0 || incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_htod_2d(LIB, RGPU_CUBLAS_rgpu_cublas_htod_2d,
                                         (uint64_t)(uintptr_t)y, (size_t)incy * es, x,
                                         (size_t)incx * es, es, (size_t)n,
                                         (uint64_t)(uintptr_t)stream, 1));
}

static cublasStatus_t get_vector(int64_t n, int64_t elemSize, const void *x, int64_t incx,
                                 void *y, int64_t incy, cudaStream_t stream)
{
    if (n < 0 || elemSize <= 0 || incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = (size_t)elemSize;
    return copy_status(rgpu_copy_dtoh_2d(LIB, RGPU_CUBLAS_rgpu_cublas_dtoh_2d, y,
                                         (size_t)incy * es, (uint64_t)(uintptr_t)x,
                                         (size_t)incx * es, es, (size_t)n,
                                         (uint64_t)(uintptr_t)stream));
}

RGPU_EXPORT cublasStatus_t cublasSetVector(int n, int elemSize, const void *x, int incx,
                                           void *devicePtr, int incy)
{
    return set_vector(n, elemSize, x, incx, devicePtr, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetVector(int n, int elemSize, const void *x, int incx, void *y,
                                           int incy)
{
    return get_vector(n, elemSize, x, incx, y, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void *A,
                                           int lda, void *B, int ldb)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

/* The Async forms: the host side must be done with when they return, so
 * they complete before returning, as pageable copies do. */
RGPU_EXPORT cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void *hostPtr,
                                                int incx, void *devicePtr, int incy,
                                                cudaStream_t stream)
{
    return set_vector(n, elemSize, hostPtr, incx, devicePtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void *devicePtr,
                                                int incx, void *hostPtr, int incy,
                                                cudaStream_t stream)
{
    return get_vector(n, elemSize, devicePtr, incx, hostPtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                                int lda, void *B, int ldb, cudaStream_t stream)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A,
                                                int lda, void *B, int ldb, cudaStream_t stream)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

/* The _64 forms take 64-bit sizes; the copies are the same. */
RGPU_EXPORT cublasStatus_t cublasSetVector_64(int64_t n, int64_t elemSize, const void *x,
                                              int64_t incx, void *devicePtr, int64_t incy)
{
    return set_vector(n, elemSize, x, incx, devicePtr, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetVector_64(int64_t n, int64_t elemSize, const void *x,
                                              int64_t incx, void *y, int64_t incy)
{
    return get_vector(n, elemSize, x, incx, y, incy, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrix_64(int64_t rows, int64_t cols, int64_t elemSize,
                                              const void *A, int64_t lda, void *B, int64_t ldb)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, NULL);
}

RGPU_EXPORT cublasStatus_t cublasSetVectorAsync_64(int64_t n, int64_t elemSize,
                                                   const void *hostPtr, int64_t incx,
                                                   void *devicePtr, int64_t incy,
                                                   cudaStream_t stream)
{
    return set_vector(n, elemSize, hostPtr, incx, devicePtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetVectorAsync_64(int64_t n, int64_t elemSize,
                                                   const void *devicePtr, int64_t incx,
                                                   void *hostPtr, int64_t incy,
                                                   cudaStream_t stream)
{
    return get_vector(n, elemSize, devicePtr, incx, hostPtr, incy, stream);
}

RGPU_EXPORT cublasStatus_t cublasSetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                                   const void *A, int64_t lda, void *B,
                                                   int64_t ldb, cudaStream_t stream)
{
    return set_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

RGPU_EXPORT cublasStatus_t cublasGetMatrixAsync_64(int64_t rows, int64_t cols, int64_t elemSize,
                                                   const void *A, int64_t lda, void *B,
                                                   int64_t ldb, cudaStream_t stream)
{
    return get_matrix(rows, cols, elemSize, A, lda, B, ldb, stream);
}

/* ---- answered on the client --------------------------------------------------------- */

RGPU_EXPORT const char *cublasGetStatusName(cublasStatus_t status)
{
    const char *s = rgpu_cublas_error_name(status);
    return s ? s : "CUBLAS_STATUS_UNKNOWN";
}

RGPU_EXPORT const char *cublasGetStatusString(cublasStatus_t status)
{
    const char *s = rgpu_server_error_string(LIB, status);
    return s ? s : cublasGetStatusName(status);
}

RGPU_EXPORT size_t cublasGetCudartVersion(void)
{
    return CUDART_VERSION;
}

RGPU_EXPORT void cublasXerbla(const char *srName, int info)
{
    fprintf(stderr, " ** On entry to %s parameter number %d had an illegal value\n",
            srName ? srName : "?", info);
}

/* The hello carries this library's table digest (common/rgpu_hello.h). */
__attribute__((constructor)) static void register_lib(void)
{
    rgpu_register_lib(&rgpu_cublas_lib);
}
