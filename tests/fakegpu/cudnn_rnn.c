// Fake libcudnn.so.9, part three: RNN and dropout descriptors, RNN data
// descriptors, the weight space and a single-layer RNN forward pass.
//
// What the fake computes: one layer, one direction, RNN_RELU, RNN_TANH or
// LSTM cells, linear input, float or double data (math in the data's own
// precision), any bias mode, over unpacked sequence-major or batch-major
// data, in double on the CPU.  With z_g = W_g x_t + bW_g + R_g h_(t-1) + bR_g
// for each gate g:
//     RNN:  h_t = act(z_0)
//     LSTM: i, f, o = sigmoid(z_0, z_1, z_3), g = tanh(z_2),
//           c_t = f c_(t-1) + i g, h_t = o tanh(c_t)
// Anything else (GRU, several layers, bidirectional, projection, packed
// layouts, LSTM gradients) is CUDNN_STATUS_NOT_SUPPORTED, never an
// approximation.
//
// The weight space is the fake's own layout, which programs only learn
// through cudnnGetRNNWeightParams (as with cuDNN): the gates' W (hidden x
// input each), then their R (hidden x hidden), then the biases present
// (the gates' bW, then their bR), each row-major and compact.  As in
// cuDNN, linear layer ids 0..G-1 are the W of gates 0..G-1 and G..2G-1
// their R (G = 1 for RNN cells, 4 for LSTM: input, forget, cell, output).
#include "dnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

// States a dropout descriptor wants: the fake keeps its seed there.
#define DROPOUT_STATES 64

struct rnn {
    int set;
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t input;
    cudnnDataType_t type, math_prec;
    cudnnMathType_t math;
    int32_t in, hid, proj, layers;
    cudnnDropoutDescriptor_t dropout;
    uint32_t aux;
};

struct rnn_data {
    int set;
    cudnnDataType_t type;
    cudnnRNNDataLayout_t layout;
    int max_seq, batch, vec;
    int *seq;                   // batch lengths
    int has_fill;
    double fill;
};

struct dropout {
    float p;
    void *states;
    size_t size;
    unsigned long long seed;
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

#define RD(p) (dnn_reg_has((p), DNN_RNN) ? (struct rnn *)(p) : NULL)
#define DD(p) (dnn_reg_has((p), DNN_RNN_DATA) ? (struct rnn_data *)(p) : NULL)
#define OD(p) (dnn_reg_has((p), DNN_DROPOUT) ? (struct dropout *)(p) : NULL)

// ---- Dropout descriptors -------------------------------------------------------------

API cudnnStatus_t cudnnCreateDropoutDescriptor(cudnnDropoutDescriptor_t *d)
{
    return create((void **)d, sizeof(struct dropout), DNN_DROPOUT);
}

API cudnnStatus_t cudnnDestroyDropoutDescriptor(cudnnDropoutDescriptor_t d)
{
    return destroy(d, DNN_DROPOUT);
}

API cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *size)
{
    if (!dnn_handle(handle) || !size)
        return CUDNN_STATUS_BAD_PARAM;
    *size = DROPOUT_STATES;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_dropout(cudnnDropoutDescriptor_t d, cudnnHandle_t handle, float p,
                                 void *states, size_t size, unsigned long long seed)
{
    struct dropout *o = OD(d);
    if (!o || !dnn_handle(handle) || p < 0.0f || p > 1.0f)
        return CUDNN_STATUS_BAD_PARAM;
    if (states && size < DROPOUT_STATES)
        return CUDNN_STATUS_INVALID_VALUE;
    o->p = p;
    o->states = states;
    o->size = size;
    o->seed = seed;
    return CUDNN_STATUS_SUCCESS;
}

// cuDNN initialises its generators' states in device memory; the fake's
// state is the seed, written there so that a restore finds it.
API cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle,
                                            float p, void *states, size_t size,
                                            unsigned long long seed)
{
    cudnnStatus_t st = set_dropout(d, handle, p, states, size, seed);
    if (st != CUDNN_STATUS_SUCCESS || !states)
        return st;
    if (cuMemcpyHtoD((CUdeviceptr)(uintptr_t)states, &seed, sizeof seed) != CUDA_SUCCESS)
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnRestoreDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle,
                                                float p, void *states, size_t size,
                                                unsigned long long seed)
{
    return set_dropout(d, handle, p, states, size, seed);
}

API cudnnStatus_t cudnnGetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle,
                                            float *p, void **states, unsigned long long *seed)
{
    struct dropout *o = OD(d);
    if (!o || !dnn_handle(handle) || !p || !states || !seed)
        return CUDNN_STATUS_BAD_PARAM;
    *p = o->p;
    *states = o->states;
    *seed = o->seed;
    return CUDNN_STATUS_SUCCESS;
}

// ---- RNN descriptors ------------------------------------------------------------------

API cudnnStatus_t cudnnCreateRNNDescriptor(cudnnRNNDescriptor_t *d)
{
    return create((void **)d, sizeof(struct rnn), DNN_RNN);
}

API cudnnStatus_t cudnnDestroyRNNDescriptor(cudnnRNNDescriptor_t d)
{
    return destroy(d, DNN_RNN);
}

static int computed(const struct rnn *r)
{
    return r->algo == CUDNN_RNN_ALGO_STANDARD &&
           (r->cell == CUDNN_RNN_RELU || r->cell == CUDNN_RNN_TANH || r->cell == CUDNN_LSTM) &&
           r->dir == CUDNN_UNIDIRECTIONAL && r->input == CUDNN_LINEAR_INPUT &&
           (r->type == CUDNN_DATA_FLOAT || r->type == CUDNN_DATA_DOUBLE) &&
           r->math_prec == r->type && r->layers == 1 && r->proj == r->hid;
}

API cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo,
                                           cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                                           cudnnDirectionMode_t dir, cudnnRNNInputMode_t input,
                                           cudnnDataType_t type, cudnnDataType_t math_prec,
                                           cudnnMathType_t math, int32_t in, int32_t hid,
                                           int32_t proj, int32_t layers,
                                           cudnnDropoutDescriptor_t dropout, uint32_t aux)
{
    struct rnn *r = RD(d), n;
    if (!r || in <= 0 || hid <= 0 || proj <= 0 || proj > hid || layers <= 0 ||
        (dropout && !OD(dropout)))
        return CUDNN_STATUS_BAD_PARAM;
    if ((int)bias < CUDNN_RNN_NO_BIAS || (int)bias > CUDNN_RNN_DOUBLE_BIAS)
        return CUDNN_STATUS_BAD_PARAM;
    n = (struct rnn){ 1, algo, cell, bias, dir, input, type, math_prec, math,
                      in, hid, proj, layers, dropout, aux };
    if (!computed(&n))
        return CUDNN_STATUS_NOT_SUPPORTED;
    *r = n;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t *algo,
                                           cudnnRNNMode_t *cell, cudnnRNNBiasMode_t *bias,
                                           cudnnDirectionMode_t *dir, cudnnRNNInputMode_t *input,
                                           cudnnDataType_t *type, cudnnDataType_t *math_prec,
                                           cudnnMathType_t *math, int32_t *in, int32_t *hid,
                                           int32_t *proj, int32_t *layers,
                                           cudnnDropoutDescriptor_t *dropout, uint32_t *aux)
{
    struct rnn *r = RD(d);
    if (!r)
        return CUDNN_STATUS_BAD_PARAM;
#define OUT(p, v) do { if (p) *(p) = (v); } while (0)
    OUT(algo, r->algo); OUT(cell, r->cell); OUT(bias, r->bias); OUT(dir, r->dir);
    OUT(input, r->input); OUT(type, r->type); OUT(math_prec, r->math_prec);
    OUT(math, r->math); OUT(in, r->in); OUT(hid, r->hid); OUT(proj, r->proj);
    OUT(layers, r->layers); OUT(dropout, r->dropout); OUT(aux, r->aux);
#undef OUT
    return CUDNN_STATUS_SUCCESS;
}

// ---- RNN data descriptors -----------------------------------------------------------------

API cudnnStatus_t cudnnCreateRNNDataDescriptor(cudnnRNNDataDescriptor_t *d)
{
    return create((void **)d, sizeof(struct rnn_data), DNN_RNN_DATA);
}

API cudnnStatus_t cudnnDestroyRNNDataDescriptor(cudnnRNNDataDescriptor_t d)
{
    struct rnn_data *r = DD(d);
    if (r)
        free(r->seq);
    return destroy(d, DNN_RNN_DATA);
}

API cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t type,
                                            cudnnRNNDataLayout_t layout, int max_seq, int batch,
                                            int vec, const int seq[], void *fill)
{
    struct rnn_data *r = DD(d);
    int *copy;
    if (!r || max_seq <= 0 || batch <= 0 || vec <= 0 || !seq)
        return CUDNN_STATUS_BAD_PARAM;
    for (int b = 0; b < batch; b++)
        if (seq[b] <= 0 || seq[b] > max_seq)
            return CUDNN_STATUS_BAD_PARAM;
    if (type != CUDNN_DATA_FLOAT && type != CUDNN_DATA_DOUBLE)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED &&
        layout != CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!(copy = malloc((size_t)batch * sizeof *copy)))
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    memcpy(copy, seq, (size_t)batch * sizeof *copy);
    free(r->seq);
    *r = (struct rnn_data){ 1, type, layout, max_seq, batch, vec, copy, fill != NULL, 0 };
    if (fill)
        r->fill = type == CUDNN_DATA_DOUBLE ? *(const double *)fill : *(const float *)fill;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnGetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t *type,
                                            cudnnRNNDataLayout_t *layout, int *max_seq,
                                            int *batch, int *vec, int requested, int seq[],
                                            void *fill)
{
    struct rnn_data *r = DD(d);
    if (!r || !r->set || !type || !layout || !max_seq || !batch || !vec || requested < 0 ||
        (requested > 0 && !seq))
        return CUDNN_STATUS_BAD_PARAM;
    *type = r->type;
    *layout = r->layout;
    *max_seq = r->max_seq;
    *batch = r->batch;
    *vec = r->vec;
    for (int b = 0; b < requested && b < r->batch; b++)
        seq[b] = r->seq[b];
    if (fill && r->type == CUDNN_DATA_DOUBLE)
        *(double *)fill = r->fill;
    else if (fill)
        *(float *)fill = (float)r->fill;
    return CUDNN_STATUS_SUCCESS;
}

// ---- The weight space ------------------------------------------------------------------

static int64_t bias_count(const struct rnn *r)
{
    switch (r->bias) {
    case CUDNN_RNN_NO_BIAS:
        return 0;
    case CUDNN_RNN_DOUBLE_BIAS:
        return 2;
    default:
        return 1;
    }
}

static int gates(const struct rnn *r)
{
    return r->cell == CUDNN_LSTM ? 4 : 1;
}

// Elements of the matrices: every W, then every R.
static int64_t matrix_count(const struct rnn *r)
{
    return gates(r) * ((int64_t)r->hid * r->in + (int64_t)r->hid * r->hid);
}

// Elements: the matrices, then the biases.
static int64_t weight_count(const struct rnn *r)
{
    return matrix_count(r) + bias_count(r) * gates(r) * r->hid;
}

// Where the matrix of linear layer `lin` starts, in elements.
static int64_t matrix_offset(const struct rnn *r, int lin)
{
    int g = gates(r);
    return lin < g ? (int64_t)lin * r->hid * r->in
                   : (int64_t)g * r->hid * r->in + (int64_t)(lin - g) * r->hid * r->hid;
}

API cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                             size_t *size)
{
    struct rnn *r = RD(d);
    if (!dnn_handle(handle) || !r || !r->set || !size)
        return CUDNN_STATUS_BAD_PARAM;
    *size = (size_t)weight_count(r) * dnn_esize(r->type);
    return CUDNN_STATUS_SUCCESS;
}

// Where gate's bias `which` (0: bW, 1: bR) lives, in elements; -1 when
// absent.
static int64_t bias_offset(const struct rnn *r, int which, int gate)
{
    int64_t base = matrix_count(r), g = gates(r);
    if (r->bias == CUDNN_RNN_DOUBLE_BIAS)
        return base + (which * g + gate) * r->hid;
    if ((r->bias == CUDNN_RNN_SINGLE_INP_BIAS && which == 0) ||
        (r->bias == CUDNN_RNN_SINGLE_REC_BIAS && which == 1))
        return base + gate * r->hid;
    return -1;
}

static cudnnStatus_t describe(cudnnTensorDescriptor_t t, cudnnDataType_t type, int rows, int cols)
{
    int dim[3] = { 1, rows, cols }, stride[3] = { rows * cols, cols, 1 };
    return cudnnSetTensorNdDescriptor(t, type, 3, dim, stride);
}

// linLayerID lin < G is gate lin's input matrix W and its bias, G + g gate
// g's recurrent R and its bias; an absent bias gives a NULL address.
API cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                          int32_t layer, size_t size, const void *space,
                                          int32_t lin, cudnnTensorDescriptor_t m_desc,
                                          void **m_addr, cudnnTensorDescriptor_t b_desc,
                                          void **b_addr)
{
    struct rnn *r = RD(d);
    cudnnStatus_t st;
    if (!dnn_handle(handle) || !r || !r->set || layer != 0 || lin < 0 || lin >= 2 * gates(r) ||
        size < (size_t)weight_count(r) * dnn_esize(r->type))
        return CUDNN_STATUS_BAD_PARAM;
    size_t es = dnn_esize(r->type);
    const char *base = space;
    int cols = lin < gates(r) ? r->in : r->hid;
    int64_t boff = bias_offset(r, lin >= gates(r), lin % gates(r));
    if (m_desc && (st = describe(m_desc, r->type, r->hid, cols)) != CUDNN_STATUS_SUCCESS)
        return st;
    if (m_addr)
        *m_addr = space ? (void *)(base + matrix_offset(r, lin) * (int64_t)es) : NULL;
    if (boff >= 0 && b_desc && (st = describe(b_desc, r->type, r->hid, 1)) != CUDNN_STATUS_SUCCESS)
        return st;
    if (b_addr)
        *b_addr = space && boff >= 0 ? (void *)(base + boff * (int64_t)es) : NULL;
    return CUDNN_STATUS_SUCCESS;
}

// Work space: none needed, a token asked for all the same so that programs
// pass one; reserve space (training): the hidden states of every step.
API cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                            cudnnForwardMode_t mode, cudnnRNNDataDescriptor_t x,
                                            size_t *work, size_t *reserve)
{
    struct rnn *r = RD(d);
    struct rnn_data *xd = DD(x);
    if (!dnn_handle(handle) || !r || !r->set || !xd || !xd->set ||
        (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING))
        return CUDNN_STATUS_BAD_PARAM;
    if (work)
        *work = 256;
    if (reserve)
        *reserve = mode == CUDNN_FWD_MODE_TRAINING
                       ? (size_t)xd->max_seq * xd->batch * r->hid * dnn_esize(r->type) : 0;
    return CUDNN_STATUS_SUCCESS;
}

// ---- Forward ------------------------------------------------------------------------------

static struct dnn_view flat(cudnnDataType_t type, int64_t n)
{
    struct dnn_view v = { .nb = 1, .dim = { n }, .stride = { 1 }, .type = type };
    return v;
}

// Element (t, b, k) of RNN data of vector size vec, in a compact array.
static int64_t at(const struct rnn_data *d, int t, int b, int k)
{
    if (d->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED)
        return ((int64_t)t * d->batch + b) * d->vec + k;
    return ((int64_t)b * d->max_seq + t) * d->vec + k;
}

// hDesc: {layers, batch, hidden}, compact, of the RNN's type.
static int hidden_ok(const struct rnn *r, int batch, cudnnTensorDescriptor_t h)
{
    cudnnDataType_t type;
    int nb, dim[3], stride[3];
    if (cudnnGetTensorNdDescriptor(h, 3, &type, &nb, dim, stride) != CUDNN_STATUS_SUCCESS)
        return 0;
    return nb == 3 && type == r->type && dim[0] == 1 && dim[1] == batch && dim[2] == r->hid &&
           stride[2] == 1 && stride[1] == r->hid && stride[0] == batch * r->hid;
}

static double sigmoid(double v)
{
    return 1 / (1 + exp(-v));
}

// z[g * hid + i]: gate g's pre-activation of unit i at step t of sequence b.
static void preactivate(const struct rnn *r, const struct rnn_data *xd, int t, int b,
                        const double *x, const double *w, const double *h, double *z)
{
    for (int g = 0; g < gates(r); g++) {
        const double *W = w + matrix_offset(r, g), *R = w + matrix_offset(r, gates(r) + g);
        int64_t bw = bias_offset(r, 0, g), br = bias_offset(r, 1, g);
        for (int i = 0; i < r->hid; i++) {
            double s = (bw >= 0 ? w[bw + i] : 0) + (br >= 0 ? w[br + i] : 0);
            for (int k = 0; k < r->in; k++)
                s += W[(int64_t)i * r->in + k] * x[at(xd, t, b, k)];
            for (int k = 0; k < r->hid; k++)
                s += R[(int64_t)i * r->hid + k] * h[k];
            z[(int64_t)g * r->hid + i] = s;
        }
    }
}

// One step from the pre-activations: h (and c for LSTM) updated.
static void step(const struct rnn *r, const double *z, double *h, double *c)
{
    int64_t n = r->hid;
    for (int64_t i = 0; i < n; i++) {
        if (r->cell == CUDNN_LSTM) {
            double in = sigmoid(z[i]), f = sigmoid(z[n + i]), g = tanh(z[2 * n + i]);
            c[i] = f * c[i] + in * g;
            h[i] = sigmoid(z[3 * n + i]) * tanh(c[i]);
        } else {
            h[i] = r->cell == CUDNN_RNN_RELU ? (z[i] > 0 ? z[i] : 0) : tanh(z[i]);
        }
    }
}

// One sequence b: y rows and the last states into h and c (holding hx, cx).
static void run_sequence(const struct rnn *r, const struct rnn_data *xd, const struct rnn_data *yd,
                         int b, const double *x, const double *w, double *h, double *c, double *y)
{
    double *z = malloc((size_t)gates(r) * r->hid * sizeof *z);
    if (!z)
        return;
    for (int t = 0; t < xd->seq[b]; t++) {
        preactivate(r, xd, t, b, x, w, h, z);
        step(r, z, h, c);
        for (int i = 0; i < r->hid; i++)
            y[at(yd, t, b, i)] = h[i];
    }
    for (int t = xd->seq[b]; t < yd->max_seq && yd->has_fill; t++)
        for (int i = 0; i < r->hid; i++)
            y[at(yd, t, b, i)] = yd->fill;
    free(z);
}

static cudnnStatus_t forward_checks(const struct rnn *r, const struct rnn_data *xd,
                                    const struct rnn_data *yd, cudnnTensorDescriptor_t h_desc,
                                    cudnnTensorDescriptor_t c_desc, size_t wsize, size_t work, size_t reserve,
                                    cudnnForwardMode_t mode)
{
    if (!r || !r->set || !xd || !xd->set || !yd || !yd->set)
        return CUDNN_STATUS_BAD_PARAM;
    if (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING)
        return CUDNN_STATUS_BAD_PARAM;
    if (xd->type != r->type || yd->type != r->type || xd->vec != r->in || yd->vec != r->hid ||
        xd->batch != yd->batch || xd->max_seq != yd->max_seq || xd->layout != yd->layout ||
        memcmp(xd->seq, yd->seq, (size_t)xd->batch * sizeof *xd->seq) != 0)
        return CUDNN_STATUS_BAD_PARAM;
    // cuDNN takes the unpacked layouts (the only ones the fake has) only
    // from an RNN whose descriptor enabled padded input and output.
    if (!(r->aux & CUDNN_RNN_PADDED_IO_ENABLED))
        return CUDNN_STATUS_BAD_PARAM;
    if (!hidden_ok(r, xd->batch, h_desc) ||
        (r->cell == CUDNN_LSTM && !hidden_ok(r, xd->batch, c_desc)))
        return CUDNN_STATUS_BAD_PARAM;
    if (wsize < (size_t)weight_count(r) * dnn_esize(r->type) || work < 256 ||
        (mode == CUDNN_FWD_MODE_TRAINING &&
         reserve < (size_t)xd->max_seq * xd->batch * r->hid * dnn_esize(r->type)))
        return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

// The sequence lengths are taken from xDesc, whose host copy cuDNN requires
// devSeqLengths to match; the fake does not read the device copy.
// A batch of hidden or cell states: loaded from dev, or zeros without it.
static cudnnStatus_t load_states(CUstream st, const struct dnn_view *v, const void *dev,
                                 double **out)
{
    if (dev)
        return dnn_load(st, v, dev, out);
    *out = calloc((size_t)dnn_count(v), sizeof **out);
    return *out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

// The sequence lengths are taken from xDesc, whose host copy cuDNN requires
// devSeqLengths to match; the fake does not read the device copy.
API cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                  cudnnForwardMode_t mode, const int32_t dev_seq[],
                                  cudnnRNNDataDescriptor_t x_desc, const void *x,
                                  cudnnRNNDataDescriptor_t y_desc, void *y,
                                  cudnnTensorDescriptor_t h_desc, const void *hx, void *hy,
                                  cudnnTensorDescriptor_t c_desc, const void *cx, void *cy,
                                  size_t wsize, const void *wspace, size_t work, void *wkspace,
                                  size_t reserve, void *rspace)
{
    struct dnn_handle *hd = dnn_handle(handle);
    struct rnn *r = RD(d);
    struct rnn_data *xd = DD(x_desc), *yd = DD(y_desc);
    double *xv = NULL, *wv = NULL, *yv = NULL, *hv = NULL, *cv = NULL;
    cudnnStatus_t st;
    (void)wkspace; (void)rspace;
    if (!hd || !dev_seq || !x || !y || !wspace)
        return CUDNN_STATUS_BAD_PARAM;
    st = forward_checks(r, xd, yd, h_desc, c_desc, wsize, work, reserve, mode);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    int lstm = r->cell == CUDNN_LSTM;
    int64_t nx = (int64_t)xd->max_seq * xd->batch * r->in;
    int64_t ny = (int64_t)yd->max_seq * yd->batch * r->hid, nh = (int64_t)xd->batch * r->hid;
    struct dnn_view xvw = flat(r->type, nx), yvw = flat(r->type, ny), hvw = flat(r->type, nh),
                    wvw = flat(r->type, weight_count(r));
    if ((st = dnn_load(hd->stream, &xvw, x, &xv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &wvw, wspace, &wv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &yvw, y, &yv)) != CUDNN_STATUS_SUCCESS ||
        (st = load_states(hd->stream, &hvw, hx, &hv)) != CUDNN_STATUS_SUCCESS ||
        (st = load_states(hd->stream, &hvw, lstm ? cx : NULL, &cv)) != CUDNN_STATUS_SUCCESS)
        goto out;
    for (int b = 0; b < xd->batch; b++)
        run_sequence(r, xd, yd, b, xv, wv, hv + (int64_t)b * r->hid, cv + (int64_t)b * r->hid, yv);
    st = dnn_store(hd->stream, &yvw, y, yv, 1.0, 0.0);
    if (st == CUDNN_STATUS_SUCCESS && hy)
        st = dnn_store(hd->stream, &hvw, hy, hv, 1.0, 0.0);
    if (st == CUDNN_STATUS_SUCCESS && lstm && cy)
        st = dnn_store(hd->stream, &hvw, cy, cv, 1.0, 0.0);
out:
    free(xv);
    free(wv);
    free(yv);
    free(hv);
    free(cv);
    return st;
}

// ---- Backward passes: RNN cells only --------------------------------------------------------
//
// The data pass walks each sequence backwards from dy and dhy: with h_t
// the forward's output (y holds it), dz_t = (dh_t) act'(h_t), dx_t = W^T
// dz_t, dh_(t-1) = dy_(t-1) + R^T dz_t.  It leaves dz in the reserve space
// (what cuDNN keeps there is its own business too), from which the weights
// pass sums dW = dz x^T, dR = dz h_(t-1)^T and the biases' dz.  LSTM
// gradients are CUDNN_STATUS_NOT_SUPPORTED.

static double derivative(const struct rnn *r, double h)
{
    return r->cell == CUDNN_RNN_RELU ? (h > 0 ? 1 : 0) : 1 - h * h;
}

// dz of one sequence into dz (compact like y), dx rows, and dh: dhy in,
// dhx out.
static void back_sequence(const struct rnn *r, const struct rnn_data *xd,
                          const struct rnn_data *yd, int b, const double *w, const double *y,
                          const double *dy, double *dh, double *dz, double *dx)
{
    const double *W = w + matrix_offset(r, 0), *R = w + matrix_offset(r, 1);
    double *prev = malloc((size_t)r->hid * sizeof *prev);
    if (!prev)
        return;
    for (int t = xd->seq[b] - 1; t >= 0; t--) {
        for (int i = 0; i < r->hid; i++) {
            int64_t at_y = at(yd, t, b, i);
            dz[at_y] = (dh[i] + dy[at_y]) * derivative(r, y[at_y]);
        }
        for (int k = 0; k < r->in; k++) {
            double s = 0;
            for (int i = 0; i < r->hid; i++)
                s += W[(int64_t)i * r->in + k] * dz[at(yd, t, b, i)];
            dx[at(xd, t, b, k)] = s;
        }
        for (int k = 0; k < r->hid; k++) {
            double s = 0;
            for (int i = 0; i < r->hid; i++)
                s += R[(int64_t)i * r->hid + k] * dz[at(yd, t, b, i)];
            prev[k] = s;
        }
        memcpy(dh, prev, (size_t)r->hid * sizeof *dh);
    }
    free(prev);
}

static cudnnStatus_t backward_checks(const struct rnn *r, const struct rnn_data *xd,
                                     const struct rnn_data *yd, cudnnTensorDescriptor_t h_desc,
                                     size_t wsize, size_t work, size_t reserve)
{
    // LSTM is refused below whatever its cell state descriptor.
    cudnnStatus_t st = forward_checks(r, xd, yd, h_desc, h_desc, wsize, work, reserve,
                                      CUDNN_FWD_MODE_TRAINING);
    if (st == CUDNN_STATUS_SUCCESS && r->cell == CUDNN_LSTM)
        st = CUDNN_STATUS_NOT_SUPPORTED;
    return st;
}

API cudnnStatus_t cudnnRNNBackwardData_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                          const int32_t dev_seq[], cudnnRNNDataDescriptor_t y_desc,
                                          const void *y, const void *dy,
                                          cudnnRNNDataDescriptor_t x_desc, void *dx,
                                          cudnnTensorDescriptor_t h_desc, const void *hx,
                                          const void *dhy, void *dhx,
                                          cudnnTensorDescriptor_t c_desc, const void *cx,
                                          const void *dcy, void *dcx, size_t wsize,
                                          const void *wspace, size_t work, void *wkspace,
                                          size_t reserve, void *rspace)
{
    struct dnn_handle *hd = dnn_handle(handle);
    struct rnn *r = RD(d);
    struct rnn_data *xd = DD(x_desc), *yd = DD(y_desc);
    double *yv = NULL, *dyv = NULL, *wv = NULL, *dh = NULL, *dz = NULL, *dxv = NULL;
    cudnnStatus_t st;
    (void)hx; (void)c_desc; (void)cx; (void)dcy; (void)dcx; (void)wkspace;
    if (!hd || !dev_seq || !y || !dy || !dx || !wspace || !rspace)
        return CUDNN_STATUS_BAD_PARAM;
    if ((st = backward_checks(r, xd, yd, h_desc, wsize, work, reserve)) != CUDNN_STATUS_SUCCESS)
        return st;
    int64_t nx = (int64_t)xd->max_seq * xd->batch * r->in;
    int64_t ny = (int64_t)yd->max_seq * yd->batch * r->hid, nh = (int64_t)xd->batch * r->hid;
    struct dnn_view xvw = flat(r->type, nx), yvw = flat(r->type, ny), hvw = flat(r->type, nh),
                    wvw = flat(r->type, weight_count(r));
    if ((st = dnn_load(hd->stream, &yvw, y, &yv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &yvw, dy, &dyv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &wvw, wspace, &wv)) != CUDNN_STATUS_SUCCESS ||
        (st = load_states(hd->stream, &hvw, dhy, &dh)) != CUDNN_STATUS_SUCCESS)
        goto out;
    dz = calloc((size_t)ny, sizeof *dz);
    dxv = calloc((size_t)nx, sizeof *dxv);
    if (!dz || !dxv) {
        st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        goto out;
    }
    for (int b = 0; b < xd->batch; b++)
        back_sequence(r, xd, yd, b, wv, yv, dyv, dh + (int64_t)b * r->hid, dz, dxv);
    st = dnn_store(hd->stream, &xvw, dx, dxv, 1.0, 0.0);
    if (st == CUDNN_STATUS_SUCCESS)
        st = dnn_store(hd->stream, &yvw, rspace, dz, 1.0, 0.0);
    if (st == CUDNN_STATUS_SUCCESS && dhx)
        st = dnn_store(hd->stream, &hvw, dhx, dh, 1.0, 0.0);
out:
    free(yv);
    free(dyv);
    free(wv);
    free(dh);
    free(dz);
    free(dxv);
    return st;
}

// Gradients of one sequence's steps added into dw (the weight layout).
static void weight_grads(const struct rnn *r, const struct rnn_data *xd,
                         const struct rnn_data *yd, int b, const double *x, const double *hx,
                         const double *y, const double *dz, double *dw)
{
    double *dW = dw + matrix_offset(r, 0), *dR = dw + matrix_offset(r, 1);
    int64_t bw = bias_offset(r, 0, 0), br = bias_offset(r, 1, 0);
    for (int t = 0; t < xd->seq[b]; t++)
        for (int i = 0; i < r->hid; i++) {
            double g = dz[at(yd, t, b, i)];
            for (int k = 0; k < r->in; k++)
                dW[(int64_t)i * r->in + k] += g * x[at(xd, t, b, k)];
            for (int k = 0; k < r->hid; k++)
                dR[(int64_t)i * r->hid + k] +=
                    g * (t == 0 ? hx[(int64_t)b * r->hid + k] : y[at(yd, t - 1, b, k)]);
            if (bw >= 0)
                dw[bw + i] += g;
            if (br >= 0)
                dw[br + i] += g;
        }
}

API cudnnStatus_t cudnnRNNBackwardWeights_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t d,
                                             cudnnWgradMode_t add, const int32_t dev_seq[],
                                             cudnnRNNDataDescriptor_t x_desc, const void *x,
                                             cudnnTensorDescriptor_t h_desc, const void *hx,
                                             cudnnRNNDataDescriptor_t y_desc, const void *y,
                                             size_t wsize, void *dwspace, size_t work,
                                             void *wkspace, size_t reserve, void *rspace)
{
    struct dnn_handle *hd = dnn_handle(handle);
    struct rnn *r = RD(d);
    struct rnn_data *xd = DD(x_desc), *yd = DD(y_desc);
    double *xv = NULL, *hv = NULL, *yv = NULL, *dz = NULL, *dw = NULL;
    cudnnStatus_t st;
    (void)wkspace;
    if (!hd || !dev_seq || !x || !y || !dwspace || !rspace ||
        (add != CUDNN_WGRAD_MODE_ADD && add != CUDNN_WGRAD_MODE_SET))
        return CUDNN_STATUS_BAD_PARAM;
    if ((st = backward_checks(r, xd, yd, h_desc, wsize, work, reserve)) != CUDNN_STATUS_SUCCESS)
        return st;
    int64_t nx = (int64_t)xd->max_seq * xd->batch * r->in;
    int64_t ny = (int64_t)yd->max_seq * yd->batch * r->hid, nh = (int64_t)xd->batch * r->hid;
    struct dnn_view xvw = flat(r->type, nx), yvw = flat(r->type, ny), hvw = flat(r->type, nh),
                    wvw = flat(r->type, weight_count(r));
    if ((st = dnn_load(hd->stream, &xvw, x, &xv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &yvw, y, &yv)) != CUDNN_STATUS_SUCCESS ||
        (st = dnn_load(hd->stream, &yvw, rspace, &dz)) != CUDNN_STATUS_SUCCESS ||
        (st = load_states(hd->stream, &hvw, hx, &hv)) != CUDNN_STATUS_SUCCESS)
        goto out;
    if (add == CUDNN_WGRAD_MODE_ADD)
        st = dnn_load(hd->stream, &wvw, dwspace, &dw);
    else if (!(dw = calloc((size_t)weight_count(r), sizeof *dw)))
        st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (st != CUDNN_STATUS_SUCCESS)
        goto out;
    for (int b = 0; b < xd->batch; b++)
        weight_grads(r, xd, yd, b, xv, hv, yv, dz, dw);
    st = dnn_store(hd->stream, &wvw, dwspace, dw, 1.0, 0.0);
out:
    free(xv);
    free(hv);
    free(yv);
    free(dz);
    free(dw);
    return st;
}
