// Shared core of the fake libcudnn.so.9 (cudnn.c: handle, legacy API;
// cudnn_backend.c: the backend "graph" API).  Like the fake cuBLAS it uses
// only the public API of the fake libcuda.so.1 and libcudart: tensors are
// copied out of "device memory" on the handle's stream with the driver's
// copy calls (which check every address against the live allocations),
// computed on the CPU in double precision, and copied back.  The fake runs
// work when it is enqueued, so this is as synchronous as its kernels.
//
// Supported data: fp32 and fp64 tensors of any strides (non-negative),
// computed in double and rounded once.  Anything else is
// CUDNN_STATUS_NOT_SUPPORTED, never a silent approximation.
//
// A bad device pointer makes a copy fail, and the call returns
// CUDNN_STATUS_EXECUTION_FAILED (a GPU would fault in the kernel; the fake
// cannot set libcuda's sticky fault from outside).
#pragma once

#include <cudnn.h>
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

// Makes sure the calling thread has a current context, initialising the
// runtime's primary context as cuDNN's embedded runtime does.
cudnnStatus_t dnn_init(void);

// ---- Registry of live objects -------------------------------------------------
//
// Handles and descriptors are pointers to our structs; a pointer not handed
// out (or already destroyed) is refused instead of dereferenced.
enum dnn_kind {
    DNN_HANDLE = 1, DNN_TENSOR, DNN_FILTER, DNN_CONV, DNN_ACT, DNN_POOL,
    DNN_BACKEND, DNN_RNN, DNN_RNN_DATA, DNN_DROPOUT,
};
int dnn_reg_add(const void *p, enum dnn_kind kind);     // -1: out of memory
int dnn_reg_has(const void *p, enum dnn_kind kind);
void dnn_reg_del(const void *p);

struct dnn_handle {
    CUstream stream;
    // Current at cudnnCreate: the handle's work runs there, whichever
    // device the thread has when it calls, as NVIDIA's does; a created
    // stream of another device cannot take it (fakegpu_stream_fits).
    CUdevice device;
};
// The handle, or NULL when h is not a live handle.
struct dnn_handle *dnn_handle(cudnnHandle_t h);

// ---- Tensors in device memory -------------------------------------------------

#define DNN_DIM_MAX 8           // CUDNN_DIM_MAX

// A strided view of device memory: element (i0, i1, ...) lives at
// sum(i_d * stride[d]) elements from the base.
struct dnn_view {
    int nb;
    int64_t dim[DNN_DIM_MAX];
    int64_t stride[DNN_DIM_MAX];
    cudnnDataType_t type;
};

// Element size of a data type the fake computes with (FLOAT, DOUBLE), 0
// for any other.
size_t dnn_esize(cudnnDataType_t t);
// Number of elements (product of the dimensions).
int64_t dnn_count(const struct dnn_view *v);
// Checks a view the fake can compute with: a supported type, positive
// dimensions, non-negative strides, a sane size.
cudnnStatus_t dnn_view_ok(const struct dnn_view *v);

// Reads the tensor at device address dev into a compact row-major array of
// doubles (*out, malloc'd; the caller frees it).
cudnnStatus_t dnn_load(CUstream s, const struct dnn_view *v, const void *dev,
                       double **out);
// dst = alpha * val + beta * dst over the view (val compact row-major).  dst
// is not read when beta is 0 (it may hold NaNs), as cuDNN documents.
cudnnStatus_t dnn_store(CUstream s, const struct dnn_view *v, void *dev,
                        const double *val, double alpha, double beta);
// A host alpha/beta: a double for DOUBLE data, a float for any other.
cudnnStatus_t dnn_scalar(cudnnDataType_t data, const void *p, double *out);

// ---- Convolution ----------------------------------------------------------------

#define DNN_SPATIAL_MAX (DNN_DIM_MAX - 2)

struct dnn_conv {
    int nsp;                            // spatial dimensions
    int64_t pre[DNN_SPATIAL_MAX];       // padding before / after
    int64_t post[DNN_SPATIAL_MAX];
    int64_t stride[DNN_SPATIAL_MAX];
    int64_t dil[DNN_SPATIAL_MAX];
    int flip;                           // CUDNN_CONVOLUTION: flipped filter
};

// Output dimensions of x (N, C, spatial...) convolved with w (K, C,
// filter...): N, K, then 1 + (in + pre + post - ((f - 1) * dil + 1)) /
// stride.  BAD_PARAM when the shapes do not fit together.
cudnnStatus_t dnn_conv_out(const struct dnn_conv *cv, int nbx, const int64_t *xd,
                           int nbw, const int64_t *wd, int64_t *yd);

enum dnn_conv_op { DNN_FWD, DNN_BWD_DATA, DNN_BWD_FILTER };
// Accumulates into the compact array the operation writes (y, x or w, which
// must start zeroed) from the two others.
void dnn_conv_run(enum dnn_conv_op op, const struct dnn_conv *cv, const int64_t *xd,
                  const int64_t *wd, const int64_t *yd, double *x, double *w, double *y);

// y = alpha * conv(x, w) + beta * y on stream s, all three views of one
// data type, shapes already checked.
cudnnStatus_t dnn_conv_forward(CUstream s, const struct dnn_conv *cv, double alpha,
                               const struct dnn_view *xv, const void *x,
                               const struct dnn_view *wv, const void *w, double beta,
                               const struct dnn_view *yv, void *y);

// The name of a status, as cudnnGetErrorString gives it.
const char *dnn_status_name(cudnnStatus_t s);

#pragma GCC visibility pop

// The fake libcuda's (driver_exec.c): the device current now; whether
// stream s can take work of device dev.
int fakegpu_current_device(void);
int fakegpu_stream_fits(CUstream s, int dev);

