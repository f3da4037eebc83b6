// Fake libcudnn.so.9, part one: the handle, version queries and the legacy
// API (tensor, filter, convolution, activation and pooling descriptors;
// convolution forward and backward, add-tensor, activation, softmax,
// pooling, batch normalization).  Everything runs on the CPU over the fake
// device memory, synchronously on the handle's stream; see dnn.h.  The
// backend (graph) API is in cudnn_backend.c.
//
// The descriptor calls follow what NVIDIA's cuDNN 9.19 answers on a machine
// without a GPU (they need none): status codes for bad dimensions and
// strides, the sizes and strides the Get calls report.  What the fake does
// not compute (other data types, group count > 1, NCHW_VECT_C) is
// CUDNN_STATUS_NOT_SUPPORTED.
#include "dnn.h"

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#define API __attribute__((visibility("default")))

// ---- Logging: with the information bit on, each call named here is logged -----------------

static unsigned log_mask;
static void *log_data;
static cudnnCallback_t log_fn;

static void log_call(const char *function)
{
    cudnnDebug_t dbg;
    char msg[160];

    if (!log_fn || !(log_mask & CUDNN_SEV_INFO_EN))
        return;
    memset(&dbg, 0, sizeof dbg);
    dbg.cudnn_version = CUDNN_VERSION;
    dbg.pid = (unsigned long long)getpid();
    snprintf(msg, sizeof msg, "function %s() called (fake)", function);
    log_fn(CUDNN_SEV_INFO, log_data, &dbg, msg);
}

API cudnnStatus_t cudnnSetCallback(unsigned mask, void *udata, cudnnCallback_t fptr)
{
    log_mask = mask;
    log_data = udata;
    log_fn = fptr;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetCallback(unsigned *mask, void **udata, cudnnCallback_t *fptr)
{
    if (mask)
        *mask = log_mask;
    if (udata)
        *udata = log_data;
    if (fptr)
        *fptr = log_fn;
    return CUDNN_STATUS_SUCCESS;
}

// ---- The last error message, per thread, as cuDNN keeps it --------------------------------

static __thread char last_error[256];

static cudnnStatus_t bad_param(const char *why)
{
    snprintf(last_error, sizeof last_error, "CUDNN_STATUS_BAD_PARAM; Reason: %s", why);
    return CUDNN_STATUS_BAD_PARAM;
}

API void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (message && max_size) {
        snprintf(message, max_size, "%s", last_error);
        last_error[0] = '\0';
    }
}

// ---- Handle and versions ------------------------------------------------------------------

API size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION;
}

API size_t cudnnGetCudartVersion(void)
{
    return CUDART_VERSION;
}

API const char *cudnnGetErrorString(cudnnStatus_t status)
{
    return dnn_status_name(status);
}

API cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUDNN_STATUS_BAD_PARAM;
    switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; break;
    case MINOR_VERSION: *value = CUDNN_MINOR; break;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; break;
    default: return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGraphVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
API cudnnStatus_t cudnnOpsVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
API cudnnStatus_t cudnnCnnVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

API cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    struct dnn_handle *h;
    cudnnStatus_t r;

    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    r = dnn_init();
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    h = calloc(1, sizeof *h);           // the NULL stream
    if (!h || dnn_reg_add(h, DNN_HANDLE) != 0) {
        free(h);
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    }
    h->device = fakegpu_current_device();
    *handle = (cudnnHandle_t)h;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    struct dnn_handle *h = dnn_handle(handle);

    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_reg_del(h);
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    struct dnn_handle *h = dnn_handle(handle);

    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    h->stream = (CUstream)stream;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream)
{
    struct dnn_handle *h = dnn_handle(handle);

    if (!h || !stream)
        return CUDNN_STATUS_BAD_PARAM;
    *stream = (cudaStream_t)h->stream;
    return CUDNN_STATUS_SUCCESS;
}

// The handle of a computing call, with a current context on this thread.
static cudnnStatus_t enter(cudnnHandle_t handle, struct dnn_handle **h)
{
    *h = dnn_handle(handle);
    if (!*h)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t r = dnn_init();
    if (r == CUDNN_STATUS_SUCCESS && !fakegpu_stream_fits((*h)->stream, (*h)->device))
        r = CUDNN_STATUS_EXECUTION_FAILED;
    return r;
}

// ---- Descriptors --------------------------------------------------------------------------

struct tdesc {
    int nb;                     // 0: never set
    int dim[DNN_DIM_MAX];
    int stride[DNN_DIM_MAX];
    cudnnDataType_t type;
};

struct fdesc {
    int nb;
    int dim[DNN_DIM_MAX];
    cudnnDataType_t type;
    cudnnTensorFormat_t format;
};

struct cdesc {
    int n;                      // spatial dimensions (arrayLength)
    int pad[DNN_SPATIAL_MAX], stride[DNN_SPATIAL_MAX], dil[DNN_SPATIAL_MAX];
    cudnnConvolutionMode_t mode;
    cudnnDataType_t ctype;
    cudnnMathType_t math;
    cudnnReorderType_t reorder;
};

struct adesc {
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef, swish_beta;
};

struct pdesc {
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int n;
    int win[DNN_SPATIAL_MAX], pad[DNN_SPATIAL_MAX], stride[DNN_SPATIAL_MAX];
};

static cudnnStatus_t create(void **out, size_t size, enum dnn_kind kind)
{
    void *p;

    if (!out)
        return CUDNN_STATUS_BAD_PARAM;
    p = calloc(1, size);
    if (!p || dnn_reg_add(p, kind) != 0) {
        free(p);
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    }
    *out = p;
    return CUDNN_STATUS_SUCCESS;
}

// Destroying NULL succeeds, as in cuDNN.
static cudnnStatus_t destroy(void *p, enum dnn_kind kind)
{
    if (!p)
        return CUDNN_STATUS_SUCCESS;
    if (!dnn_reg_has(p, kind))
        return CUDNN_STATUS_BAD_PARAM;
    dnn_reg_del(p);
    free(p);
    return CUDNN_STATUS_SUCCESS;
}

#define GET(kind, T, p) (dnn_reg_has((p), (kind)) ? (T *)(p) : NULL)
#define TD(p) GET(DNN_TENSOR, struct tdesc, p)
#define FD(p) GET(DNN_FILTER, struct fdesc, p)
#define CD(p) GET(DNN_CONV, struct cdesc, p)
#define AD(p) GET(DNN_ACT, struct adesc, p)
#define PD(p) GET(DNN_POOL, struct pdesc, p)

static int valid_type(cudnnDataType_t t)
{
    return (int)t >= CUDNN_DATA_FLOAT && (int)t <= CUDNN_DATA_COMPLEX_FP64;
}

// Storage size of one element, for the size queries (0 for sub-byte and
// vector types, which the fake does not describe).
static size_t storage_size(cudnnDataType_t t)
{
    switch ((int)t) {
    case CUDNN_DATA_DOUBLE: case CUDNN_DATA_INT64: case CUDNN_DATA_COMPLEX_FP32:
        return 8;
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: case CUDNN_DATA_UINT32:
        return 4;
    case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16:
        return 2;
    case CUDNN_DATA_INT8: case CUDNN_DATA_UINT8: case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_FP8_E4M3: case CUDNN_DATA_FP8_E5M2: case CUDNN_DATA_FP8_E8M0:
        return 1;
    case CUDNN_DATA_COMPLEX_FP64:
        return 16;
    default:
        return 0;
    }
}

static void tensor_view(const struct tdesc *t, struct dnn_view *v)
{
    memset(v, 0, sizeof *v);
    v->nb = t->nb;
    v->type = t->type;
    for (int d = 0; d < t->nb; d++) {
        v->dim[d] = t->dim[d];
        v->stride[d] = t->stride[d];
    }
}

// Filters are K, C, spatial... in NCHW order, or K, spatial..., C in NHWC.
static void filter_view(const struct fdesc *f, struct dnn_view *v)
{
    int64_t s = 1;

    memset(v, 0, sizeof *v);
    v->nb = f->nb;
    v->type = f->type;
    for (int d = 0; d < f->nb; d++)
        v->dim[d] = f->dim[d];
    if (f->format == CUDNN_TENSOR_NHWC) {
        v->stride[1] = 1;
        s = f->dim[1];
        for (int d = f->nb - 1; d >= 2; d--) {
            v->stride[d] = s;
            s *= f->dim[d];
        }
        v->stride[0] = s;
    } else {
        for (int d = f->nb - 1; d >= 0; d--) {
            v->stride[d] = s;
            s *= f->dim[d];
        }
    }
}

// Packed strides for dims in NCHW or NHWC order.
static void packed_strides(int nb, const int *dim, cudnnTensorFormat_t format, int *stride)
{
    int s = 1;

    if (format == CUDNN_TENSOR_NHWC && nb >= 3) {
        stride[1] = 1;
        s = dim[1];
        for (int d = nb - 1; d >= 2; d--) {
            stride[d] = s;
            s *= dim[d];
        }
        stride[0] = s;
    } else {
        for (int d = nb - 1; d >= 0; d--) {
            stride[d] = s;
            s *= dim[d];
        }
    }
}

// ---- Tensor descriptors ---------------------------------------------------------------------

API cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    return create((void **)d, sizeof(struct tdesc), DNN_TENSOR);
}

API cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    return destroy(d, DNN_TENSOR);
}

static cudnnStatus_t set_tensor(struct tdesc *t, cudnnDataType_t type, int nb, const int *dim,
                                const int *stride)
{
    if (!t || !valid_type(type) || nb < 1 || !dim || !stride)
        return CUDNN_STATUS_BAD_PARAM;
    if (nb > DNN_DIM_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int d = 0; d < nb; d++)
        if (dim[d] <= 0 || stride[d] == 0)
            return CUDNN_STATUS_BAD_PARAM;
    // cuDNN takes negative strides; the fake cannot address them.
    for (int d = 0; d < nb; d++)
        if (stride[d] < 0)
            return CUDNN_STATUS_NOT_SUPPORTED;
    memset(t, 0, sizeof *t);
    t->nb = nb;
    t->type = type;
    memcpy(t->dim, dim, (size_t)nb * sizeof *dim);
    memcpy(t->stride, stride, (size_t)nb * sizeof *stride);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_tensor_format(struct tdesc *t, cudnnTensorFormat_t format,
                                       cudnnDataType_t type, int nb, const int *dim)
{
    int stride[DNN_DIM_MAX];

    if (!t || !dim || nb < 1)
        return CUDNN_STATUS_BAD_PARAM;
    if (format == CUDNN_TENSOR_NCHW_VECT_C)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
        return CUDNN_STATUS_BAD_PARAM;
    if (nb > DNN_DIM_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int d = 0; d < nb; d++)
        if (dim[d] <= 0)
            return bad_param("tensor dimensions must be positive");
    packed_strides(nb, dim, format, stride);
    return set_tensor(t, type, nb, dim, stride);
}

API cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                             cudnnDataType_t type, int n, int c, int h, int w)
{
    log_call("cudnnSetTensor4dDescriptor");
    int dim[4] = {n, c, h, w};
    return set_tensor_format(TD(d), format, type, 4, dim);
}

API cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t type,
                                               int n, int c, int h, int w, int ns, int cs,
                                               int hs, int ws)
{
    int dim[4] = {n, c, h, w}, stride[4] = {ns, cs, hs, ws};
    return set_tensor(TD(d), type, 4, dim, stride);
}

API cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t *type,
                                             int *n, int *c, int *h, int *w, int *ns, int *cs,
                                             int *hs, int *ws)
{
    struct tdesc *t = TD(d);
    int *dims[4] = {n, c, h, w}, *strides[4] = {ns, cs, hs, ws};

    if (!t || !type || t->nb < 4)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < 4; i++)
        if (!dims[i] || !strides[i])
            return CUDNN_STATUS_BAD_PARAM;
    *type = t->type;
    for (int i = 0; i < 4; i++) {
        *dims[i] = t->dim[i];
        *strides[i] = t->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type,
                                             int nb, const int dim[], const int stride[])
{
    return set_tensor(TD(d), type, nb, dim, stride);
}

API cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                               cudnnDataType_t type, int nb, const int dim[])
{
    return set_tensor_format(TD(d), format, type, nb, dim);
}

API cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int requested,
                                             cudnnDataType_t *type, int *nb, int dim[],
                                             int stride[])
{
    struct tdesc *t = TD(d);
    int n;

    if (!t || !type || !nb || requested < 0 || (requested > 0 && (!dim || !stride)))
        return CUDNN_STATUS_BAD_PARAM;
    *type = t->type;
    *nb = t->nb;
    n = requested < t->nb ? requested : t->nb;
    for (int i = 0; i < n; i++) {
        dim[i] = t->dim[i];
        stride[i] = t->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t d, size_t *size)
{
    struct tdesc *t = TD(d);
    int64_t last = 0;

    if (!t || !size)
        return CUDNN_STATUS_BAD_PARAM;
    if (t->nb == 0) {
        *size = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    for (int i = 0; i < t->nb; i++)
        last += (int64_t)(t->dim[i] - 1) * t->stride[i];
    *size = (size_t)(last + 1) * storage_size(t->type);
    return CUDNN_STATUS_SUCCESS;
}

// ---- Filter descriptors ---------------------------------------------------------------------

API cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    return create((void **)d, sizeof(struct fdesc), DNN_FILTER);
}

API cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    return destroy(d, DNN_FILTER);
}

static cudnnStatus_t set_filter(struct fdesc *f, cudnnDataType_t type, cudnnTensorFormat_t format,
                                int nb, const int *dim)
{
    if (!f || !dim || !valid_type(type) || nb < 3)
        return CUDNN_STATUS_BAD_PARAM;
    if (format == CUDNN_TENSOR_NCHW_VECT_C)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
        return CUDNN_STATUS_BAD_PARAM;
    if (nb > DNN_DIM_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int d = 0; d < nb; d++)
        if (dim[d] <= 0)
            return CUDNN_STATUS_BAD_PARAM;
    memset(f, 0, sizeof *f);
    f->nb = nb;
    f->type = type;
    f->format = format;
    memcpy(f->dim, dim, (size_t)nb * sizeof *dim);
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                             cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    int dim[4] = {k, c, h, w};
    return set_filter(FD(d), type, format, 4, dim);
}

API cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                             cudnnTensorFormat_t format, int nb, const int dim[])
{
    return set_filter(FD(d), type, format, nb, dim);
}

API cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t *type,
                                             cudnnTensorFormat_t *format, int *k, int *c, int *h,
                                             int *w)
{
    struct fdesc *f = FD(d);

    if (!f || !type || !format || !k || !c || !h || !w || f->nb < 4)
        return CUDNN_STATUS_BAD_PARAM;
    *type = f->type;
    *format = f->format;
    *k = f->dim[0];
    *c = f->dim[1];
    *h = f->dim[2];
    *w = f->dim[3];
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t d, int requested,
                                             cudnnDataType_t *type, cudnnTensorFormat_t *format,
                                             int *nb, int dim[])
{
    struct fdesc *f = FD(d);

    if (!f || !type || !format || !nb || requested < 0 || (requested > 0 && !dim))
        return CUDNN_STATUS_BAD_PARAM;
    *type = f->type;
    *format = f->format;
    *nb = f->nb;
    for (int i = 0; i < requested && i < f->nb; i++)
        dim[i] = f->dim[i];
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t d, size_t *size)
{
    struct fdesc *f = FD(d);
    size_t n = 1;

    if (!f || !size)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < f->nb; i++)
        n *= (size_t)f->dim[i];
    *size = f->nb ? n * storage_size(f->type) : 0;
    return CUDNN_STATUS_SUCCESS;
}

// ---- Convolution descriptors ------------------------------------------------------------------

API cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    // A fresh descriptor reads back as zeros (CUDNN_CONVOLUTION, float),
    // default math, group count 1.
    return create((void **)d, sizeof(struct cdesc), DNN_CONV);
}

API cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    return destroy(d, DNN_CONV);
}

API cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    struct cdesc *c = CD(d);

    if (!c || (int)m < CUDNN_DEFAULT_MATH || (int)m > CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    c->math = m;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t *m)
{
    struct cdesc *c = CD(d);

    if (!c || !m)
        return CUDNN_STATUS_BAD_PARAM;
    *m = c->math;
    return CUDNN_STATUS_SUCCESS;
}

// Grouped convolutions are not computed by the fake.
API cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups)
{
    struct cdesc *c = CD(d);

    if (!c || groups < 1)
        return CUDNN_STATUS_BAD_PARAM;
    return groups == 1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
}

API cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int *groups)
{
    if (!CD(d) || !groups)
        return CUDNN_STATUS_BAD_PARAM;
    *groups = 1;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolutionReorderType(cudnnConvolutionDescriptor_t d,
                                                 cudnnReorderType_t t)
{
    struct cdesc *c = CD(d);

    if (!c || ((int)t != CUDNN_DEFAULT_REORDER && (int)t != CUDNN_NO_REORDER))
        return CUDNN_STATUS_BAD_PARAM;
    c->reorder = t;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionReorderType(cudnnConvolutionDescriptor_t d,
                                                 cudnnReorderType_t *t)
{
    struct cdesc *c = CD(d);

    if (!c || !t)
        return CUDNN_STATUS_BAD_PARAM;
    *t = c->reorder;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_conv(struct cdesc *c, int n, const int *pad, const int *stride,
                              const int *dil, cudnnConvolutionMode_t mode, cudnnDataType_t ctype)
{
    if (!c || !pad || !stride || !dil || n < 1 || !valid_type(ctype) ||
        (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION))
        return CUDNN_STATUS_BAD_PARAM;
    if (n > DNN_SPATIAL_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < n; i++)
        if (pad[i] < 0 || stride[i] <= 0 || dil[i] <= 0)
            return CUDNN_STATUS_BAD_PARAM;
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->pad[i] = pad[i];
        c->stride[i] = stride[i];
        c->dil[i] = dil[i];
    }
    c->mode = mode;
    c->ctype = ctype;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                                  int pad_w, int u, int v, int dil_h, int dil_w,
                                                  cudnnConvolutionMode_t mode,
                                                  cudnnDataType_t ctype)
{
    int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dil_h, dil_w};
    return set_conv(CD(d), 2, pad, stride, dil, mode, ctype);
}

API cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t d, int *pad_h,
                                                  int *pad_w, int *u, int *v, int *dil_h,
                                                  int *dil_w, cudnnConvolutionMode_t *mode,
                                                  cudnnDataType_t *ctype)
{
    struct cdesc *c = CD(d);

    if (!c || !pad_h || !pad_w || !u || !v || !dil_h || !dil_w || !mode || !ctype ||
        (c->n != 0 && c->n != 2))
        return CUDNN_STATUS_BAD_PARAM;
    *pad_h = c->pad[0];
    *pad_w = c->pad[1];
    *u = c->stride[0];
    *v = c->stride[1];
    *dil_h = c->dil[0];
    *dil_w = c->dil[1];
    *mode = c->mode;
    *ctype = c->ctype;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int n,
                                                  const int pad[], const int stride[],
                                                  const int dil[], cudnnConvolutionMode_t mode,
                                                  cudnnDataType_t ctype)
{
    return set_conv(CD(d), n, pad, stride, dil, mode, ctype);
}

API cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t d,
                                                  int requested, int *n, int pad[], int stride[],
                                                  int dil[], cudnnConvolutionMode_t *mode,
                                                  cudnnDataType_t *ctype)
{
    struct cdesc *c = CD(d);

    if (!c || !n || !mode || !ctype || requested < 0 ||
        (requested > 0 && (!pad || !stride || !dil)))
        return CUDNN_STATUS_BAD_PARAM;
    *n = c->n;
    for (int i = 0; i < requested && i < c->n; i++) {
        pad[i] = c->pad[i];
        stride[i] = c->stride[i];
        dil[i] = c->dil[i];
    }
    *mode = c->mode;
    *ctype = c->ctype;
    return CUDNN_STATUS_SUCCESS;
}

static void conv_of(const struct cdesc *c, struct dnn_conv *cv)
{
    memset(cv, 0, sizeof *cv);
    cv->nsp = c->n;
    for (int i = 0; i < c->n; i++) {
        cv->pre[i] = cv->post[i] = c->pad[i];
        cv->stride[i] = c->stride[i];
        cv->dil[i] = c->dil[i];
    }
    cv->flip = c->mode == CUDNN_CONVOLUTION;
}

static cudnnStatus_t conv_out_dims(cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t xd,
                                   cudnnFilterDescriptor_t fd, int64_t *yd, int *nb)
{
    struct cdesc *c = CD(cd);
    struct tdesc *x = TD(xd);
    struct fdesc *f = FD(fd);
    struct dnn_conv cv;
    struct dnn_view xv, wv;

    if (!c || !x || !f)
        return CUDNN_STATUS_BAD_PARAM;
    conv_of(c, &cv);
    tensor_view(x, &xv);
    filter_view(f, &wv);
    *nb = x->nb;
    return dnn_conv_out(&cv, xv.nb, xv.dim, wv.nb, wv.dim, yd);
}

API cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                        const cudnnTensorDescriptor_t xd,
                                                        const cudnnFilterDescriptor_t fd, int *n,
                                                        int *c, int *h, int *w)
{
    int64_t yd[DNN_DIM_MAX];
    int nb;
    cudnnStatus_t r;

    if (!n || !c || !h || !w)
        return CUDNN_STATUS_BAD_PARAM;
    r = conv_out_dims(cd, xd, fd, yd, &nb);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (nb != 4)
        return CUDNN_STATUS_BAD_PARAM;
    *n = (int)yd[0];
    *c = (int)yd[1];
    *h = (int)yd[2];
    *w = (int)yd[3];
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                        const cudnnTensorDescriptor_t xd,
                                                        const cudnnFilterDescriptor_t fd, int nb,
                                                        int out[])
{
    int64_t yd[DNN_DIM_MAX];
    int xnb;
    cudnnStatus_t r;

    if (!out || nb < 1)
        return CUDNN_STATUS_BAD_PARAM;
    r = conv_out_dims(cd, xd, fd, yd, &xnb);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (nb > xnb)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < nb; i++)
        out[i] = (int)yd[i];
    return CUDNN_STATUS_SUCCESS;
}

// ---- Activation and pooling descriptors ----------------------------------------------------

API cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *d)
{
    return create((void **)d, sizeof(struct adesc), DNN_ACT);
}

API cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d)
{
    return destroy(d, DNN_ACT);
}

API cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d,
                                               cudnnActivationMode_t mode,
                                               cudnnNanPropagation_t nan, double coef)
{
    struct adesc *a = AD(d);

    if (!a || (int)mode < CUDNN_ACTIVATION_SIGMOID || (int)mode > CUDNN_ACTIVATION_SWISH ||
        ((int)nan != CUDNN_NOT_PROPAGATE_NAN && (int)nan != CUDNN_PROPAGATE_NAN))
        return CUDNN_STATUS_BAD_PARAM;
    a->mode = mode;
    a->nan = nan;
    a->coef = coef;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetActivationDescriptor(const cudnnActivationDescriptor_t d,
                                               cudnnActivationMode_t *mode,
                                               cudnnNanPropagation_t *nan, double *coef)
{
    struct adesc *a = AD(d);

    if (!a || !mode || !nan || !coef)
        return CUDNN_STATUS_BAD_PARAM;
    *mode = a->mode;
    *nan = a->nan;
    *coef = a->coef;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double beta)
{
    struct adesc *a = AD(d);

    if (!a)
        return CUDNN_STATUS_BAD_PARAM;
    a->swish_beta = beta;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double *beta)
{
    struct adesc *a = AD(d);

    if (!a || !beta)
        return CUDNN_STATUS_BAD_PARAM;
    *beta = a->swish_beta;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d)
{
    return create((void **)d, sizeof(struct pdesc), DNN_POOL);
}

API cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d)
{
    return destroy(d, DNN_POOL);
}

static cudnnStatus_t set_pool(struct pdesc *p, cudnnPoolingMode_t mode, cudnnNanPropagation_t nan,
                              int n, const int *win, const int *pad, const int *stride)
{
    if (!p || !win || !pad || !stride || n < 1 || (int)mode < CUDNN_POOLING_MAX ||
        (int)mode > CUDNN_POOLING_MAX_DETERMINISTIC ||
        ((int)nan != CUDNN_NOT_PROPAGATE_NAN && (int)nan != CUDNN_PROPAGATE_NAN))
        return CUDNN_STATUS_BAD_PARAM;
    if (n > DNN_SPATIAL_MAX)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < n; i++)
        if (win[i] <= 0 || pad[i] < 0 || stride[i] <= 0)
            return CUDNN_STATUS_BAD_PARAM;
    p->mode = mode;
    p->nan = nan;
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->win[i] = win[i];
        p->pad[i] = pad[i];
        p->stride[i] = stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                              cudnnNanPropagation_t nan, int wh, int ww, int ph,
                                              int pw, int sh, int sw)
{
    int win[2] = {wh, ww}, pad[2] = {ph, pw}, stride[2] = {sh, sw};
    return set_pool(PD(d), mode, nan, 2, win, pad, stride);
}

API cudnnStatus_t cudnnGetPooling2dDescriptor(const cudnnPoolingDescriptor_t d,
                                              cudnnPoolingMode_t *mode, cudnnNanPropagation_t *nan,
                                              int *wh, int *ww, int *ph, int *pw, int *sh, int *sw)
{
    struct pdesc *p = PD(d);

    if (!p || !mode || !nan || !wh || !ww || !ph || !pw || !sh || !sw ||
        (p->n != 0 && p->n != 2))
        return CUDNN_STATUS_BAD_PARAM;
    *mode = p->mode;
    *nan = p->nan;
    *wh = p->win[0];
    *ww = p->win[1];
    *ph = p->pad[0];
    *pw = p->pad[1];
    *sh = p->stride[0];
    *sw = p->stride[1];
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t d,
                                              const cudnnPoolingMode_t mode,
                                              const cudnnNanPropagation_t nan, int nb,
                                              const int win[], const int pad[],
                                              const int stride[])
{
    return set_pool(PD(d), mode, nan, nb, win, pad, stride);
}

API cudnnStatus_t cudnnGetPoolingNdDescriptor(const cudnnPoolingDescriptor_t d, int requested,
                                              cudnnPoolingMode_t *mode, cudnnNanPropagation_t *nan,
                                              int *nb, int win[], int pad[], int stride[])
{
    struct pdesc *p = PD(d);

    if (!p || !mode || !nan || !nb || requested < 0 ||
        (requested > 0 && (!win || !pad || !stride)))
        return CUDNN_STATUS_BAD_PARAM;
    *mode = p->mode;
    *nan = p->nan;
    *nb = p->n;
    for (int i = 0; i < requested && i < p->n; i++) {
        win[i] = p->win[i];
        pad[i] = p->pad[i];
        stride[i] = p->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

// Output dims of pooling: N, C, then 1 + (in + 2 pad - window) / stride.
static cudnnStatus_t pool_out(const struct pdesc *p, const struct tdesc *x, int *out)
{
    if (!p || !x || p->n < 1 || x->nb != p->n + 2)
        return CUDNN_STATUS_BAD_PARAM;
    out[0] = x->dim[0];
    out[1] = x->dim[1];
    for (int i = 0; i < p->n; i++) {
        int in = x->dim[2 + i] + 2 * p->pad[i];
        if (in < p->win[i])
            return CUDNN_STATUS_BAD_PARAM;
        out[2 + i] = 1 + (in - p->win[i]) / p->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t pd,
                                                    const cudnnTensorDescriptor_t xd, int *n,
                                                    int *c, int *h, int *w)
{
    int out[DNN_DIM_MAX];
    cudnnStatus_t r;

    if (!n || !c || !h || !w)
        return CUDNN_STATUS_BAD_PARAM;
    r = pool_out(PD(pd), TD(xd), out);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (PD(pd)->n != 2)
        return CUDNN_STATUS_BAD_PARAM;
    *n = out[0];
    *c = out[1];
    *h = out[2];
    *w = out[3];
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetPoolingNdForwardOutputDim(const cudnnPoolingDescriptor_t pd,
                                                    const cudnnTensorDescriptor_t xd, int nb,
                                                    int out[])
{
    int dims[DNN_DIM_MAX];
    cudnnStatus_t r;

    if (!out || nb < 1)
        return CUDNN_STATUS_BAD_PARAM;
    r = pool_out(PD(pd), TD(xd), dims);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (nb > TD(xd)->nb)
        return CUDNN_STATUS_BAD_PARAM;
    memcpy(out, dims, (size_t)nb * sizeof *out);
    return CUDNN_STATUS_SUCCESS;
}

// ---- Computing calls: common checks ---------------------------------------------------------

// A tensor operand the fake can compute with: a live descriptor that was
// set, a supported type, a device pointer.
static cudnnStatus_t operand(cudnnTensorDescriptor_t d, const void *p, struct dnn_view *v)
{
    struct tdesc *t = TD(d);

    if (!t || t->nb == 0 || !p)
        return CUDNN_STATUS_BAD_PARAM;
    tensor_view(t, v);
    return dnn_view_ok(v);
}

static cudnnStatus_t filter_operand(cudnnFilterDescriptor_t d, const void *p, struct dnn_view *v)
{
    struct fdesc *f = FD(d);

    if (!f || f->nb == 0 || !p)
        return CUDNN_STATUS_BAD_PARAM;
    filter_view(f, v);
    return dnn_view_ok(v);
}

static int same_dims(const struct dnn_view *a, const struct dnn_view *b)
{
    if (a->nb != b->nb)
        return 0;
    for (int d = 0; d < a->nb; d++)
        if (a->dim[d] != b->dim[d])
            return 0;
    return 1;
}

// alpha and beta of a call whose output has type t.
static cudnnStatus_t alpha_beta(cudnnDataType_t t, const void *alpha, const void *beta,
                                double *a, double *b)
{
    if (!alpha || !beta)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_scalar(t, alpha, a);
    dnn_scalar(t, beta, b);
    return CUDNN_STATUS_SUCCESS;
}

#define TRY(e) do { cudnnStatus_t r_ = (e); if (r_ != CUDNN_STATUS_SUCCESS) return r_; } while (0)

// x (N, C, spatial), w (K, C, filter), y (N, K, out): the descriptors of
// a convolution, with y's shape checked against the convolution of x and w.
struct conv_call {
    struct dnn_conv cv;
    struct dnn_view x, w, y;
    cudnnMathType_t math;
};

static cudnnStatus_t conv_check(cudnnTensorDescriptor_t xd, const void *x,
                                cudnnFilterDescriptor_t wd, const void *w,
                                cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd,
                                const void *y, struct conv_call *cc)
{
    struct cdesc *c = CD(cd);
    int64_t out[DNN_DIM_MAX];

    if (!c)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(operand(xd, x, &cc->x));
    TRY(filter_operand(wd, w, &cc->w));
    TRY(operand(yd, y, &cc->y));
    if (cc->x.type != cc->w.type || cc->x.type != cc->y.type)
        return CUDNN_STATUS_BAD_PARAM;
    conv_of(c, &cc->cv);
    cc->math = c->math;
    TRY(dnn_conv_out(&cc->cv, cc->x.nb, cc->x.dim, cc->w.nb, cc->w.dim, out));
    for (int d = 0; d < cc->y.nb; d++)
        if (cc->y.dim[d] != out[d])
            return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

// Descriptor-only checks (the algorithm and workspace queries): any
// non-NULL pointer stands in for the data.
#define NODATA ((const void *)1)

// ---- Convolution --------------------------------------------------------------------------

API cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                          const cudnnTensorDescriptor_t xDesc, const void *x,
                                          const cudnnFilterDescriptor_t wDesc, const void *w,
                                          const cudnnConvolutionDescriptor_t convDesc,
                                          cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                          size_t workSpaceSizeInBytes, const void *beta,
                                          const cudnnTensorDescriptor_t yDesc, void *y)
{
    struct dnn_handle *h;
    struct conv_call cc;
    double a, b;

    (void)workSpace;
    (void)workSpaceSizeInBytes;         // the fake needs none
    TRY(enter(handle, &h));
    TRY(conv_check(xDesc, x, wDesc, w, convDesc, yDesc, y, &cc));
    if ((int)algo < 0 || (int)algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(cc.y.type, alpha, beta, &a, &b));
    return dnn_conv_forward(h->stream, &cc.cv, a, &cc.x, x, &cc.w, w, b, &cc.y, y);
}

API cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                               const cudnnFilterDescriptor_t wDesc, const void *w,
                                               const cudnnTensorDescriptor_t dyDesc,
                                               const void *dy,
                                               const cudnnConvolutionDescriptor_t convDesc,
                                               cudnnConvolutionBwdDataAlgo_t algo,
                                               void *workSpace, size_t workSpaceSizeInBytes,
                                               const void *beta,
                                               const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    struct dnn_handle *h;
    struct conv_call cc;
    double a, b, *wh = NULL, *dyh = NULL, *dxh;
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    (void)workSpace;
    (void)workSpaceSizeInBytes;
    TRY(enter(handle, &h));
    TRY(conv_check(dxDesc, dx, wDesc, w, convDesc, dyDesc, dy, &cc));
    if ((int)algo < 0 || (int)algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(cc.x.type, alpha, beta, &a, &b));
    dxh = calloc((size_t)dnn_count(&cc.x), sizeof *dxh);
    if (!dxh)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (a != 0) {
        r = dnn_load(h->stream, &cc.w, w, &wh);
        if (r == CUDNN_STATUS_SUCCESS)
            r = dnn_load(h->stream, &cc.y, dy, &dyh);
        if (r == CUDNN_STATUS_SUCCESS)
            dnn_conv_run(DNN_BWD_DATA, &cc.cv, cc.x.dim, cc.w.dim, cc.y.dim, dxh, wh, dyh);
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &cc.x, dx, dxh, a, b);
    free(wh);
    free(dyh);
    free(dxh);
    return r;
}

API cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                 const cudnnTensorDescriptor_t xDesc,
                                                 const void *x,
                                                 const cudnnTensorDescriptor_t dyDesc,
                                                 const void *dy,
                                                 const cudnnConvolutionDescriptor_t convDesc,
                                                 cudnnConvolutionBwdFilterAlgo_t algo,
                                                 void *workSpace, size_t workSpaceSizeInBytes,
                                                 const void *beta,
                                                 const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    struct dnn_handle *h;
    struct conv_call cc;
    double a, b, *xh = NULL, *dyh = NULL, *dwh;
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    (void)workSpace;
    (void)workSpaceSizeInBytes;
    TRY(enter(handle, &h));
    TRY(conv_check(xDesc, x, dwDesc, dw, convDesc, dyDesc, dy, &cc));
    if ((int)algo < 0 || (int)algo >= CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(cc.w.type, alpha, beta, &a, &b));
    dwh = calloc((size_t)dnn_count(&cc.w), sizeof *dwh);
    if (!dwh)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (a != 0) {
        r = dnn_load(h->stream, &cc.x, x, &xh);
        if (r == CUDNN_STATUS_SUCCESS)
            r = dnn_load(h->stream, &cc.y, dy, &dyh);
        if (r == CUDNN_STATUS_SUCCESS)
            dnn_conv_run(DNN_BWD_FILTER, &cc.cv, cc.x.dim, cc.w.dim, cc.y.dim, xh, dwh, dyh);
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &cc.w, dw, dwh, a, b);
    free(xh);
    free(dyh);
    free(dwh);
    return r;
}

// db (1, K, 1, ...) = alpha * sum of dy over N and space + beta * db.
API cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
                                               const cudnnTensorDescriptor_t dyDesc,
                                               const void *dy, const void *beta,
                                               const cudnnTensorDescriptor_t dbDesc, void *db)
{
    struct dnn_handle *h;
    struct dnn_view yv, bv;
    double a, b, *yh = NULL, *bh;
    int64_t N, K, S;
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    TRY(enter(handle, &h));
    TRY(operand(dyDesc, dy, &yv));
    TRY(operand(dbDesc, db, &bv));
    if (yv.type != bv.type || yv.nb != bv.nb || yv.nb < 3 || bv.dim[1] != yv.dim[1])
        return CUDNN_STATUS_BAD_PARAM;
    for (int d = 0; d < bv.nb; d++)
        if (d != 1 && bv.dim[d] != 1)
            return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(bv.type, alpha, beta, &a, &b));
    N = yv.dim[0];
    K = yv.dim[1];
    S = dnn_count(&yv) / (N * K);
    bh = calloc((size_t)K, sizeof *bh);
    if (!bh)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (a != 0)
        r = dnn_load(h->stream, &yv, dy, &yh);
    for (int64_t n = 0; r == CUDNN_STATUS_SUCCESS && a != 0 && n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t s = 0; s < S; s++)
                bh[k] += yh[(n * K + k) * S + s];
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &bv, db, bh, a, b);
    free(yh);
    free(bh);
    return r;
}

// ---- Algorithm and workspace queries ----------------------------------------------------------
//
// The fake has one way to compute each convolution, so it offers one
// algorithm (0), succeeding, deterministic, with no workspace.

#define MAX_COUNT(name)                                                            \
    API cudnnStatus_t name(cudnnHandle_t handle, int *count)                      \
    {                                                                               \
        if (!dnn_handle(handle) || !count)                                          \
            return CUDNN_STATUS_BAD_PARAM;                                          \
        *count = 1;                                                                 \
        return CUDNN_STATUS_SUCCESS;                                                \
    }
MAX_COUNT(cudnnGetConvolutionForwardAlgorithmMaxCount)
MAX_COUNT(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)
MAX_COUNT(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount)

// Fills perf results of any of the three perf structs, which share their
// layout: algo, status, time, memory, determinism, mathType.
#define PERF(PerfT, AlgoT, time_value)                                              \
    do {                                                                            \
        if (!dnn_handle(handle) || requested < 1 || !returned || !perf)             \
            return CUDNN_STATUS_BAD_PARAM;                                          \
        memset(perf, 0, sizeof(PerfT));                                             \
        perf[0].algo = (AlgoT)0;                                                    \
        perf[0].status = CUDNN_STATUS_SUCCESS;                                      \
        perf[0].time = (time_value);                                                \
        perf[0].memory = 0;                                                         \
        perf[0].determinism = CUDNN_DETERMINISTIC;                                  \
        perf[0].mathType = cc.math;                                                 \
        *returned = 1;                                                              \
        return CUDNN_STATUS_SUCCESS;                                                \
    } while (0)

// Get_v7 is a heuristic: no time measured (-1); Find measures.
#define FWD_QUERY(name, time_value)                                                                \
    API cudnnStatus_t name(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,              \
                           const cudnnFilterDescriptor_t wDesc,                                    \
                           const cudnnConvolutionDescriptor_t convDesc,                            \
                           const cudnnTensorDescriptor_t yDesc, const int requested,               \
                           int *returned, cudnnConvolutionFwdAlgoPerf_t *perf)                     \
    {                                                                                              \
        struct conv_call cc;                                                                       \
        TRY(conv_check(xDesc, NODATA, wDesc, NODATA, convDesc, yDesc, NODATA, &cc));               \
        PERF(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t, time_value);                \
    }
FWD_QUERY(cudnnGetConvolutionForwardAlgorithm_v7, -1.0f)
FWD_QUERY(cudnnFindConvolutionForwardAlgorithm, 0.0f)

#define BWD_DATA_QUERY(name, time_value)                                                           \
    API cudnnStatus_t name(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,              \
                           const cudnnTensorDescriptor_t dyDesc,                                   \
                           const cudnnConvolutionDescriptor_t convDesc,                            \
                           const cudnnTensorDescriptor_t dxDesc, const int requested,              \
                           int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf)                 \
    {                                                                                              \
        struct conv_call cc;                                                                       \
        TRY(conv_check(dxDesc, NODATA, wDesc, NODATA, convDesc, dyDesc, NODATA, &cc));             \
        PERF(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t, time_value);        \
    }
BWD_DATA_QUERY(cudnnGetConvolutionBackwardDataAlgorithm_v7, -1.0f)
BWD_DATA_QUERY(cudnnFindConvolutionBackwardDataAlgorithm, 0.0f)

#define BWD_FILTER_QUERY(name, time_value)                                                         \
    API cudnnStatus_t name(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,              \
                           const cudnnTensorDescriptor_t dyDesc,                                   \
                           const cudnnConvolutionDescriptor_t convDesc,                            \
                           const cudnnFilterDescriptor_t dwDesc, const int requested,              \
                           int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf)               \
    {                                                                                              \
        struct conv_call cc;                                                                       \
        TRY(conv_check(xDesc, NODATA, dwDesc, NODATA, convDesc, dyDesc, NODATA, &cc));             \
        PERF(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t, time_value);    \
    }
BWD_FILTER_QUERY(cudnnGetConvolutionBackwardFilterAlgorithm_v7, -1.0f)
BWD_FILTER_QUERY(cudnnFindConvolutionBackwardFilterAlgorithm, 0.0f)

API cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle,
                                                          const cudnnTensorDescriptor_t xDesc,
                                                          const cudnnFilterDescriptor_t wDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t yDesc,
                                                          cudnnConvolutionFwdAlgo_t algo,
                                                          size_t *size)
{
    struct conv_call cc;

    if (!dnn_handle(handle) || !size || (int)algo < 0 ||
        (int)algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(conv_check(xDesc, NODATA, wDesc, NODATA, convDesc, yDesc, NODATA, &cc));
    *size = 0;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle,
                                                               const cudnnFilterDescriptor_t wDesc,
                                                               const cudnnTensorDescriptor_t dyDesc,
                                                               const cudnnConvolutionDescriptor_t convDesc,
                                                               const cudnnTensorDescriptor_t dxDesc,
                                                               cudnnConvolutionBwdDataAlgo_t algo,
                                                               size_t *size)
{
    struct conv_call cc;

    if (!dnn_handle(handle) || !size || (int)algo < 0 ||
        (int)algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(conv_check(dxDesc, NODATA, wDesc, NODATA, convDesc, dyDesc, NODATA, &cc));
    *size = 0;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle,
                                                                 const cudnnTensorDescriptor_t xDesc,
                                                                 const cudnnTensorDescriptor_t dyDesc,
                                                                 const cudnnConvolutionDescriptor_t convDesc,
                                                                 const cudnnFilterDescriptor_t dwDesc,
                                                                 cudnnConvolutionBwdFilterAlgo_t algo,
                                                                 size_t *size)
{
    struct conv_call cc;

    if (!dnn_handle(handle) || !size || (int)algo < 0 ||
        (int)algo >= CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(conv_check(xDesc, NODATA, dwDesc, NODATA, convDesc, dyDesc, NODATA, &cc));
    *size = 0;
    return CUDNN_STATUS_SUCCESS;
}

// ---- Element-wise operations ------------------------------------------------------------------

// C = alpha * A + beta * C, A broadcast along every dimension where it is 1.
API cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
                                 const cudnnTensorDescriptor_t aDesc, const void *A,
                                 const void *beta, const cudnnTensorDescriptor_t cDesc, void *C)
{
    struct dnn_handle *h;
    struct dnn_view av, cv;
    double a, b, *ah = NULL, *ch;
    int64_t n, idx[DNN_DIM_MAX] = {0};
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    TRY(enter(handle, &h));
    TRY(operand(aDesc, A, &av));
    TRY(operand(cDesc, C, &cv));
    if (av.type != cv.type || av.nb != cv.nb)
        return CUDNN_STATUS_BAD_PARAM;
    for (int d = 0; d < av.nb; d++)
        if (av.dim[d] != cv.dim[d] && av.dim[d] != 1)
            return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(cv.type, alpha, beta, &a, &b));
    n = dnn_count(&cv);
    ch = calloc((size_t)n, sizeof *ch);
    if (!ch)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (a != 0)
        r = dnn_load(h->stream, &av, A, &ah);
    for (int64_t i = 0; r == CUDNN_STATUS_SUCCESS && a != 0 && i < n; i++) {
        int64_t ai = 0;
        for (int d = 0; d < cv.nb; d++)
            ai = ai * av.dim[d] + (av.dim[d] == 1 ? 0 : idx[d]);
        ch[i] = ah[ai];
        for (int d = cv.nb - 1; d >= 0 && ++idx[d] == cv.dim[d]; d--)
            idx[d] = 0;
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &cv, C, ch, a, b);
    free(ah);
    free(ch);
    return r;
}

API cudnnStatus_t cudnnSetTensor(cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y,
                                 const void *valuePtr)
{
    struct dnn_handle *h;
    struct dnn_view yv;
    double v, *yh;
    int64_t n;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(operand(yDesc, y, &yv));
    if (!valuePtr)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_scalar(yv.type, valuePtr, &v);
    n = dnn_count(&yv);
    yh = malloc((size_t)n * sizeof *yh);
    if (!yh)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    for (int64_t i = 0; i < n; i++)
        yh[i] = v;
    r = dnn_store(h->stream, &yv, y, yh, 1, 0);
    free(yh);
    return r;
}

API cudnnStatus_t cudnnScaleTensor(cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y,
                                   const void *alpha)
{
    struct dnn_handle *h;
    struct dnn_view yv;
    double a, *yh = NULL;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(operand(yDesc, y, &yv));
    if (!alpha)
        return CUDNN_STATUS_BAD_PARAM;
    dnn_scalar(yv.type, alpha, &a);
    r = dnn_load(h->stream, &yv, y, &yh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &yv, y, yh, a, 0);
    free(yh);
    return r;
}

static double activate(const struct adesc *ad, double x)
{
    switch (ad->mode) {
    case CUDNN_ACTIVATION_SIGMOID: return 1 / (1 + exp(-x));
    case CUDNN_ACTIVATION_RELU: return x > 0 ? x : 0;
    case CUDNN_ACTIVATION_TANH: return tanh(x);
    case CUDNN_ACTIVATION_CLIPPED_RELU: return x > 0 ? (x < ad->coef ? x : ad->coef) : 0;
    case CUDNN_ACTIVATION_ELU: return x > 0 ? x : ad->coef * (exp(x) - 1);
    case CUDNN_ACTIVATION_SWISH: return x / (1 + exp(-ad->swish_beta * x));
    case CUDNN_ACTIVATION_IDENTITY: default: return x;
    }
}

API cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle, cudnnActivationDescriptor_t activationDesc,
                                         const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                         const void *x, const void *beta,
                                         const cudnnTensorDescriptor_t yDesc, void *y)
{
    struct dnn_handle *h;
    struct adesc *ad = AD(activationDesc);
    struct dnn_view xv, yv;
    double a, b, *xh = NULL;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    if (!ad)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(operand(xDesc, x, &xv));
    TRY(operand(yDesc, y, &yv));
    if (xv.type != yv.type || !same_dims(&xv, &yv))
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(yv.type, alpha, beta, &a, &b));
    r = dnn_load(h->stream, &xv, x, &xh);
    for (int64_t i = 0; r == CUDNN_STATUS_SUCCESS && i < dnn_count(&xv); i++)
        xh[i] = activate(ad, xh[i]);
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &yv, y, xh, a, b);
    free(xh);
    return r;
}

// Softmax over C for each (n, position) (CHANNEL), or over C x space for
// each n (INSTANCE); ACCURATE and FAST are computed alike, LOG gives the
// log-softmax.
API cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
                                      cudnnSoftmaxMode_t mode, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const void *beta, const cudnnTensorDescriptor_t yDesc, void *y)
{
    struct dnn_handle *h;
    struct dnn_view xv, yv;
    double a, b, *xh = NULL;
    int64_t N, C, S, groups, len, step;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    if ((int)algo < CUDNN_SOFTMAX_FAST || (int)algo > CUDNN_SOFTMAX_LOG ||
        ((int)mode != CUDNN_SOFTMAX_MODE_INSTANCE && (int)mode != CUDNN_SOFTMAX_MODE_CHANNEL))
        return CUDNN_STATUS_BAD_PARAM;
    TRY(operand(xDesc, x, &xv));
    TRY(operand(yDesc, y, &yv));
    if (xv.type != yv.type || !same_dims(&xv, &yv) || xv.nb < 2)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(yv.type, alpha, beta, &a, &b));
    N = xv.dim[0];
    C = xv.dim[1];
    S = dnn_count(&xv) / (N * C);
    // Each softmax runs over len elements step apart.
    if (mode == CUDNN_SOFTMAX_MODE_INSTANCE) {
        groups = N;
        len = C * S;
        step = 1;
    } else {
        groups = N * S;
        len = C;
        step = S;
    }
    r = dnn_load(h->stream, &xv, x, &xh);
    for (int64_t g = 0; r == CUDNN_STATUS_SUCCESS && g < groups; g++) {
        int64_t base = mode == CUDNN_SOFTMAX_MODE_INSTANCE ? g * len : (g / S) * C * S + g % S;
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < len; i++)
            mx = fmax(mx, xh[base + i * step]);
        for (int64_t i = 0; i < len; i++)
            sum += exp(xh[base + i * step] - mx);
        for (int64_t i = 0; i < len; i++) {
            double *p = &xh[base + i * step];
            *p = algo == CUDNN_SOFTMAX_LOG ? *p - mx - log(sum) : exp(*p - mx) / sum;
        }
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &yv, y, xh, a, b);
    free(xh);
    return r;
}

API cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                      const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void *x, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    struct dnn_handle *h;
    struct pdesc *p = PD(poolingDesc);
    struct dnn_view xv, yv;
    int out[DNN_DIM_MAX];
    double a, b, *xh = NULL, *yh;
    int64_t NC, xs = 1, ys = 1;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(operand(xDesc, x, &xv));
    TRY(operand(yDesc, y, &yv));
    TRY(pool_out(p, TD(xDesc), out));
    if (xv.type != yv.type || yv.nb != xv.nb)
        return CUDNN_STATUS_BAD_PARAM;
    for (int d = 0; d < yv.nb; d++)
        if (yv.dim[d] != out[d])
            return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(yv.type, alpha, beta, &a, &b));
    NC = xv.dim[0] * xv.dim[1];
    for (int d = 2; d < xv.nb; d++) {
        xs *= xv.dim[d];
        ys *= yv.dim[d];
    }
    yh = calloc((size_t)(NC * ys), sizeof *yh);
    if (!yh)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    r = dnn_load(h->stream, &xv, x, &xh);
    for (int64_t oi = 0; r == CUDNN_STATUS_SUCCESS && oi < ys; oi++) {
        int64_t o[DNN_SPATIAL_MAX], t = oi, wn = 1;
        for (int d = p->n - 1; d >= 0; d--) {
            o[d] = t % yv.dim[2 + d];
            t /= yv.dim[2 + d];
            wn *= p->win[d];
        }
        for (int64_t nc = 0; nc < NC; nc++) {
            double acc = p->mode == CUDNN_POOLING_MAX || p->mode == CUDNN_POOLING_MAX_DETERMINISTIC
                             ? -INFINITY : 0;
            int64_t inside = 0;
            for (int64_t wi = 0; wi < wn; wi++) {
                int64_t ii = 0, mul = 1, u = wi;
                int ok = 1;
                for (int d = p->n - 1; d >= 0; d--) {
                    int64_t i = o[d] * p->stride[d] - p->pad[d] + u % p->win[d];
                    u /= p->win[d];
                    if (i < 0 || i >= xv.dim[2 + d])
                        ok = 0;
                    ii += i * mul;
                    mul *= xv.dim[2 + d];
                }
                if (!ok)
                    continue;
                inside++;
                double v = xh[nc * xs + ii];
                if (p->mode == CUDNN_POOLING_MAX || p->mode == CUDNN_POOLING_MAX_DETERMINISTIC)
                    acc = fmax(acc, v);
                else
                    acc += v;
            }
            if (p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING)
                acc /= (double)wn;
            else if (p->mode == CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING)
                acc = inside ? acc / (double)inside : 0;
            yh[nc * ys + oi] = acc;
        }
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &yv, y, yh, a, b);
    free(xh);
    free(yh);
    return r;
}

// ---- Batch normalization ----------------------------------------------------------------------
//
// Spatial modes normalize each channel over N x space; per-activation mode
// normalizes each (channel, position) over N.  The parameter tensors are
// 1 x C x 1 x ... (spatial) or 1 x C x space (per activation), as
// cudnnDeriveBNTensorDescriptor describes them.

API cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc,
                                                const cudnnTensorDescriptor_t xDesc,
                                                cudnnBatchNormMode_t mode)
{
    struct tdesc *d = TD(derivedBnDesc), *x = TD(xDesc);
    int dim[DNN_DIM_MAX];
    cudnnDataType_t t;

    if (!d || !x || x->nb < 3 || (int)mode < CUDNN_BATCHNORM_PER_ACTIVATION ||
        (int)mode > CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < x->nb; i++)
        dim[i] = i == 1 || (mode == CUDNN_BATCHNORM_PER_ACTIVATION && i > 1) ? x->dim[i] : 1;
    // Half and bfloat16 data keep their statistics in float.
    t = x->type == CUDNN_DATA_HALF || x->type == CUDNN_DATA_BFLOAT16 ? CUDNN_DATA_FLOAT : x->type;
    return set_tensor_format(d, CUDNN_TENSOR_NCHW, t, x->nb, dim);
}

struct bn {
    struct dnn_view x, p;       // data, parameters
    int64_t N, C, S;            // batch, channels, positions per channel
    int64_t groups, m;          // parameter count, elements per group
    int spatial;
};

// Group of the element at flat index i (row-major N, C, space).
static int64_t bn_group(const struct bn *bn, int64_t i)
{
    int64_t c = (i / bn->S) % bn->C, s = i % bn->S;
    return bn->spatial ? c : c * bn->S + s;
}

static cudnnStatus_t bn_check(cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t xDesc,
                              const void *x, cudnnTensorDescriptor_t yDesc, const void *y,
                              cudnnTensorDescriptor_t pDesc, double epsilon, struct bn *bn)
{
    struct dnn_view yv;

    if ((int)mode < CUDNN_BATCHNORM_PER_ACTIVATION || (int)mode > CUDNN_BATCHNORM_SPATIAL_PERSISTENT ||
        epsilon < CUDNN_BN_MIN_EPSILON)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(operand(xDesc, x, &bn->x));
    TRY(operand(yDesc, y, &yv));
    TRY(operand(pDesc, NODATA, &bn->p));
    if (yv.type != bn->x.type || !same_dims(&yv, &bn->x) || bn->x.nb < 3 ||
        bn->p.nb != bn->x.nb || bn->p.type != bn->x.type)
        return CUDNN_STATUS_BAD_PARAM;
    bn->spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    for (int d = 0; d < bn->x.nb; d++) {
        int64_t want = d == 1 || (!bn->spatial && d > 1) ? bn->x.dim[d] : 1;
        if (bn->p.dim[d] != want)
            return CUDNN_STATUS_BAD_PARAM;
    }
    bn->N = bn->x.dim[0];
    bn->C = bn->x.dim[1];
    bn->S = dnn_count(&bn->x) / (bn->N * bn->C);
    bn->groups = dnn_count(&bn->p);
    bn->m = dnn_count(&bn->x) / bn->groups;
    return CUDNN_STATUS_SUCCESS;
}

// Mean and biased variance of each group of x.
static void bn_stats(const struct bn *bn, const double *x, double *mean, double *var)
{
    int64_t n = dnn_count(&bn->x);

    for (int64_t g = 0; g < bn->groups; g++)
        mean[g] = var[g] = 0;
    for (int64_t i = 0; i < n; i++)
        mean[bn_group(bn, i)] += x[i];
    for (int64_t g = 0; g < bn->groups; g++)
        mean[g] /= (double)bn->m;
    for (int64_t i = 0; i < n; i++) {
        double d = x[i] - mean[bn_group(bn, i)];
        var[bn_group(bn, i)] += d * d;
    }
    for (int64_t g = 0; g < bn->groups; g++)
        var[g] /= (double)bn->m;
}

// Loads the listed parameter tensors (NULL pointers stay NULL).
static cudnnStatus_t bn_load(CUstream s, const struct bn *bn, int count, const void *const *dev,
                             double **host)
{
    for (int i = 0; i < count; i++) {
        host[i] = NULL;
        if (dev[i]) {
            cudnnStatus_t r = dnn_load(s, &bn->p, dev[i], &host[i]);
            if (r != CUDNN_STATUS_SUCCESS)
                return r;
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
    void *resultRunningVariance, double epsilon, void *resultSaveMean,
    void *resultSaveInvVariance)
{
    struct dnn_handle *h;
    struct bn bn;
    double a, b, *xh = NULL, *mean = NULL, *var = NULL, *istd = NULL, *p[4] = {0};
    const void *pdev[4] = {bnScale, bnBias, resultRunningMean, resultRunningVariance};
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(bn_check(mode, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc, epsilon, &bn));
    // The running statistics come as a pair, and so do the saved ones.
    if (!bnScale || !bnBias || !resultRunningMean != !resultRunningVariance ||
        !resultSaveMean != !resultSaveInvVariance)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(bn.x.type, alpha, beta, &a, &b));
    mean = malloc((size_t)bn.groups * sizeof *mean);
    var = malloc((size_t)bn.groups * sizeof *var);
    istd = malloc((size_t)bn.groups * sizeof *istd);
    r = mean && var && istd ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_load(h->stream, &bn.x, x, &xh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = bn_load(h->stream, &bn, 4, pdev, p);
    if (r == CUDNN_STATUS_SUCCESS) {
        bn_stats(&bn, xh, mean, var);
        for (int64_t g = 0; g < bn.groups; g++)
            istd[g] = 1 / sqrt(var[g] + epsilon);
        for (int64_t i = 0; i < dnn_count(&bn.x); i++) {
            int64_t g = bn_group(&bn, i);
            xh[i] = p[0][g] * (xh[i] - mean[g]) * istd[g] + p[1][g];
        }
        r = dnn_store(h->stream, &bn.x, y, xh, a, b);
    }
    // Running statistics: the variance is the unbiased one.
    if (r == CUDNN_STATUS_SUCCESS && resultRunningMean) {
        double f = exponentialAverageFactor;
        for (int64_t g = 0; g < bn.groups; g++) {
            double unbiased = bn.m > 1 ? var[g] * (double)bn.m / (double)(bn.m - 1) : var[g];
            p[2][g] = (1 - f) * p[2][g] + f * mean[g];
            p[3][g] = (1 - f) * p[3][g] + f * unbiased;
        }
        r = dnn_store(h->stream, &bn.p, resultRunningMean, p[2], 1, 0);
        if (r == CUDNN_STATUS_SUCCESS)
            r = dnn_store(h->stream, &bn.p, resultRunningVariance, p[3], 1, 0);
    }
    if (r == CUDNN_STATUS_SUCCESS && resultSaveMean) {
        r = dnn_store(h->stream, &bn.p, resultSaveMean, mean, 1, 0);
        if (r == CUDNN_STATUS_SUCCESS)
            r = dnn_store(h->stream, &bn.p, resultSaveInvVariance, istd, 1, 0);
    }
    free(xh);
    free(mean);
    free(var);
    free(istd);
    for (int i = 0; i < 4; i++)
        free(p[i]);
    return r;
}

API cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, const void *estimatedMean, const void *estimatedVariance, double epsilon)
{
    struct dnn_handle *h;
    struct bn bn;
    double a, b, *xh = NULL, *p[4] = {0};
    const void *pdev[4] = {bnScale, bnBias, estimatedMean, estimatedVariance};
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(bn_check(mode, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc, epsilon, &bn));
    if (!bnScale || !bnBias || !estimatedMean || !estimatedVariance)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(bn.x.type, alpha, beta, &a, &b));
    r = dnn_load(h->stream, &bn.x, x, &xh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = bn_load(h->stream, &bn, 4, pdev, p);
    if (r == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < dnn_count(&bn.x); i++) {
            int64_t g = bn_group(&bn, i);
            xh[i] = p[0][g] * (xh[i] - p[2][g]) / sqrt(p[3][g] + epsilon) + p[1][g];
        }
        r = dnn_store(h->stream, &bn.x, y, xh, a, b);
    }
    free(xh);
    for (int i = 0; i < 4; i++)
        free(p[i]);
    return r;
}

// dx = scale * istd / m * (m dy - sum dy - xhat sum(dy xhat)),
// dScale = sum(dy xhat), dBias = sum dy, per group; the saved mean and
// inverse deviation are used when given, else recomputed from x.
API cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alphaDataDiff,
    const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t dyDesc,
    const void *dy, const cudnnTensorDescriptor_t dxDesc, void *dx,
    const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScale, void *dBnScaleResult,
    void *dBnBiasResult, double epsilon, const void *savedMean, const void *savedInvVariance)
{
    struct dnn_handle *h;
    struct bn bn;
    struct dnn_view dyv;
    double ad, bd, ap, bp, *xh = NULL, *dyh = NULL, *dsum = NULL, *dxs = NULL, *p[3] = {0};
    const void *pdev[3] = {bnScale, savedMean, savedInvVariance};
    int64_t n;
    cudnnStatus_t r;

    TRY(enter(handle, &h));
    TRY(bn_check(mode, xDesc, x, dxDesc, dx, dBnScaleBiasDesc, epsilon, &bn));
    TRY(operand(dyDesc, dy, &dyv));
    if (!same_dims(&dyv, &bn.x) || dyv.type != bn.x.type || !bnScale || !dBnScaleResult ||
        !dBnBiasResult || !savedMean != !savedInvVariance)
        return CUDNN_STATUS_BAD_PARAM;
    TRY(alpha_beta(bn.x.type, alphaDataDiff, betaDataDiff, &ad, &bd));
    TRY(alpha_beta(bn.x.type, alphaParamDiff, betaParamDiff, &ap, &bp));
    n = dnn_count(&bn.x);
    dsum = calloc((size_t)bn.groups, sizeof *dsum);
    dxs = calloc((size_t)bn.groups, sizeof *dxs);
    r = dsum && dxs ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_load(h->stream, &bn.x, x, &xh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_load(h->stream, &dyv, dy, &dyh);
    if (r == CUDNN_STATUS_SUCCESS)
        r = bn_load(h->stream, &bn, 3, pdev, p);
    if (r == CUDNN_STATUS_SUCCESS && !savedMean) {
        p[1] = malloc((size_t)bn.groups * sizeof *p[1]);
        p[2] = malloc((size_t)bn.groups * sizeof *p[2]);
        if (!p[1] || !p[2]) {
            r = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        } else {
            bn_stats(&bn, xh, p[1], p[2]);
            for (int64_t g = 0; g < bn.groups; g++)
                p[2][g] = 1 / sqrt(p[2][g] + epsilon);
        }
    }
    if (r == CUDNN_STATUS_SUCCESS) {
        double *mean = p[1], *istd = p[2];
        // xh becomes xhat, then dx.
        for (int64_t i = 0; i < n; i++) {
            int64_t g = bn_group(&bn, i);
            xh[i] = (xh[i] - mean[g]) * istd[g];
            dsum[g] += dyh[i];
            dxs[g] += dyh[i] * xh[i];
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t g = bn_group(&bn, i);
            double m = (double)bn.m;
            xh[i] = p[0][g] * istd[g] / m * (m * dyh[i] - dsum[g] - xh[i] * dxs[g]);
        }
        r = dnn_store(h->stream, &bn.x, dx, xh, ad, bd);
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &bn.p, dBnScaleResult, dxs, ap, bp);
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &bn.p, dBnBiasResult, dsum, ap, bp);
    free(xh);
    free(dyh);
    free(dsum);
    free(dxs);
    for (int i = 0; i < 3; i++)
        free(p[i]);
    return r;
}
