// Shared core of the fake libcublas.so.13 and libcublasLt.so.13 (compiled
// into both).  Like the fake libcudart, they use only the public API of the
// fake libcuda.so.1: operands are copied out of "device memory" with the
// driver's copy calls on the caller's stream (which checks every address
// against the live allocations), computed on the CPU in double precision,
// and copied back.  The fake runs work when it is enqueued, so this is as
// synchronous as its kernels; after a kernel fault the copies are dropped
// and succeed, so the BLAS call is dropped as a real GPU would drop it.
//
// A bad device pointer makes the copy fail, and the BLAS call returns
// CUBLAS_STATUS_EXECUTION_FAILED (a real GPU would launch the kernel and
// fault later; the fake cannot set libcuda's sticky fault from outside).
#pragma once

#include <cublas_api.h>
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

// The most elements of one operand the fake computes with: it stages
// operands in host memory (as doubles, complex as pairs), and a larger one
// is refused with CUBLAS_STATUS_ALLOC_FAILED, as a GPU short of memory
// refuses, so that a hostile size cannot take the test machine's memory
// (or the fuzzers': they stop at 2 GiB).  16M elements: 256 MiB complex.
#define FGB_MAX_ELEMS (1ll << 24)

// Makes sure the calling thread has a current context, initialising the
// runtime (primary context) as NVIDIA's libraries do through cudart.
cublasStatus_t fgb_init(void);

// Element size of a data type the fake computes with (CUDA_R_32F and
// CUDA_R_64F), 0 for any other.
size_t fgb_size(cudaDataType t);

// A column-major rows x cols matrix of type t at device address src, ld
// elements between columns, into a compact array of doubles (rows x cols,
// leading dimension rows).  A strided vector is a 1 x n matrix with ld = inc.
cublasStatus_t fgb_get(CUstream s, double *dst, const void *src, cudaDataType t,
                       int64_t rows, int64_t cols, int64_t ld);
// The reverse: a compact rows x cols array into device matrix dst.  Only
// the rows x cols elements are written, never the padding between columns.
cublasStatus_t fgb_put(CUstream s, void *dst, cudaDataType t, int64_t ld,
                       const double *src, int64_t rows, int64_t cols);

// n raw bytes between host and device on stream s (fake: synchronous).
cublasStatus_t fgb_read(CUstream s, void *dst, const void *src_dev, size_t n);
cublasStatus_t fgb_write(CUstream s, void *dst_dev, const void *src, size_t n);

// A 2D copy of height rows of width bytes, for cublasSet/GetVector/Matrix:
// each side is host or device memory with its own pitch.  async selects the
// stream-ordered call (work dropped after a fault) over the blocking one.
CUresult fgb_copy2d(void *dst, int dst_dev, size_t dpitch, const void *src,
                    int src_dev, size_t spitch, size_t width, size_t height,
                    int async, CUstream s);

// Reads an alpha/beta of type t from host memory or, with device != 0,
// from device memory.
cublasStatus_t fgb_scalar(CUstream s, int device, const void *p, cudaDataType t,
                          double *out);

// D = epilogue(alpha * op(A) * op(B) + beta * C [+ bias]), all column-major
// device matrices of one type.  A is m x k (k x m when transposed), B k x n
// (n x k), C and D m x n; C is not read when beta is 0 (it may hold NaNs),
// A and B are not read when k is 0 or alpha is 0, as cuBLAS documents.
// C and D may be the same matrix.
struct fgb_gemm {
    int ta, tb;                 // op(A) = A^T, op(B) = B^T
    int64_t m, n, k;
    double alpha, beta;
    cudaDataType type;
    const void *a, *b, *c;
    void *d;
    int64_t lda, ldb, ldc, ldd;
    const double *bias;         // m values added to every column, or NULL
    int relu;                   // then max(x, 0)
};
cublasStatus_t fgb_gemm_run(CUstream s, const struct fgb_gemm *g);

// Live objects handed out (handles, descriptors), so that a stale or forged
// one is refused instead of dereferenced.  fgb_reg_add returns -1 when out
// of memory.
enum fgb_kind { FGB_CUBLAS = 1, FGB_LT, FGB_LT_DESC, FGB_LT_LAYOUT, FGB_LT_PREF };
int fgb_reg_add(const void *p, enum fgb_kind kind);
int fgb_reg_has(const void *p, enum fgb_kind kind);
void fgb_reg_del(const void *p);

#pragma GCC visibility pop

// The fake libcuda's (driver_exec.c): a handle's device is the one
// current at its creation; whether a stream can take its kernels.
int fakegpu_current_device(void);
int fakegpu_stream_fits(CUstream s, int dev);

