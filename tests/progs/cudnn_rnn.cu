// cuDNN's RNN API through rgpu: dropout, RNN and RNN data descriptors (set
// and read back), the weight space (its size, and the matrices and biases
// cudnnGetRNNWeightParams describes and points into), the temporary space
// sizes, and cudnnRNNForward of a single-layer unidirectional RNN (tanh in
// float, relu in double, LSTM in float; inference and training) over
// sequences of unequal length, checked against a CPU reference: outputs,
// padding fill and the final hidden (and LSTM cell) state; for the tanh
// cells trained in double, cudnnRNNBackwardData_v8 (dx at the sequences'
// steps, dhx) and cudnnRNNBackwardWeights_v8 (every weight and bias
// gradient, added into a zeroed space) against backpropagation through
// time on the CPU.  Bad input: a NULL RNN descriptor and a linear layer
// id out of range must come back as CUDNN_STATUS_BAD_PARAM.
//
//   cudnn_rnn bad-handles  also: a destroyed RNN descriptor and RNN data
//                          descriptor (undefined natively: rgpu's answer is
//                          CUDNN_STATUS_BAD_PARAM, so not in the GPU diff),
//                          and a padding fill of a type whose size rgpu
//                          does not know (refused, the session goes on)
//
// Weights are filled through the addresses cudnnGetRNNWeightParams gives
// (linear layers 0..G-1 the gates' input matrices, G..2G-1 their recurrent
// ones; LSTM gates in cuDNN's order: input, forget, cell, output),
// matrices row-major (hidden x input, hidden x hidden) as cuDNN keeps them
// (and PyTorch copies them); the layout of the weight space itself is the
// library's and is never assumed.  Tolerance per element: 1e-4 * (1 + |ref|
// + sum of the magnitudes of the terms).  Values, sizes and addresses are
// never printed: the output must be identical natively and through rgpu.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cudnn.h>
#include "check.h"

static const int IN = 3, HID = 4, BATCH = 3, MAXSEQ = 4;
static const int SEQ[BATCH] = { 4, 2, 3 };

static bool check_dnn(cudnnStatus_t s, const char *name)
{
    return check(s == CUDNN_STATUS_SUCCESS, name, "%s", cudnnGetErrorString(s));
}

static bool check_dnn_err(cudnnStatus_t got, cudnnStatus_t want, const char *name)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s -> %s", name, cudnnGetErrorString(want));
    return check(got == want, buf, "got %s", cudnnGetErrorString(got));
}

static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// Multiples of 1/8 in [-1, 1), from a fixed generator.
static double value(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return (double)((int)((*state >> 16) % 16) - 8) / 8.0;
}

struct case_def {
    const char *name;
    cudnnDataType_t type;
    cudnnRNNMode_t cell;
    cudnnForwardMode_t mode;
};

static int gates(const case_def &c)
{
    return c.cell == CUDNN_LSTM ? 4 : 1;
}

// Host copies of everything the reference needs, as doubles; W, R, bW, bR
// one per gate.
struct host_rnn {
    std::vector<std::vector<double>> W, R, bW, bR;
    std::vector<double> x, hx, cx;
};

static double sigmoid(double v)
{
    return 1 / (1 + exp(-v));
}

static void reference(const case_def &c, const host_rnn &m, double fill, std::vector<double> &y,
                      std::vector<double> &hy, std::vector<double> &cy,
                      std::vector<double> &scale)
{
    int G = gates(c);
    y.assign((size_t)MAXSEQ * BATCH * HID, fill);
    scale.assign(y.size(), 0.0);
    hy = m.hx;
    cy = m.cx;
    for (int b = 0; b < BATCH; b++) {
        double *h = &hy[(size_t)b * HID], *cs = &cy[(size_t)b * HID];
        for (int t = 0; t < SEQ[b]; t++) {
            double z[4][HID], sc[HID] = { 0 };
            for (int g = 0; g < G; g++)
                for (int i = 0; i < HID; i++) {
                    double s = m.bW[g][i] + m.bR[g][i];
                    sc[i] += fabs(m.bW[g][i]) + fabs(m.bR[g][i]);
                    for (int k = 0; k < IN; k++) {
                        double p = m.W[g][(size_t)i * IN + k] * m.x[((size_t)t * BATCH + b) * IN + k];
                        s += p;
                        sc[i] += fabs(p);
                    }
                    for (int k = 0; k < HID; k++) {
                        double p = m.R[g][(size_t)i * HID + k] * h[k];
                        s += p;
                        sc[i] += fabs(p);
                    }
                    z[g][i] = s;
                }
            for (int i = 0; i < HID; i++) {
                if (c.cell == CUDNN_LSTM) {
                    cs[i] = sigmoid(z[1][i]) * cs[i] + sigmoid(z[0][i]) * tanh(z[2][i]);
                    h[i] = sigmoid(z[3][i]) * tanh(cs[i]);
                } else {
                    h[i] = c.cell == CUDNN_RNN_RELU ? (z[0][i] > 0 ? z[0][i] : 0) : tanh(z[0][i]);
                }
                y[((size_t)t * BATCH + b) * HID + i] = h[i];
                scale[((size_t)t * BATCH + b) * HID + i] = sc[i];
            }
        }
    }
}

// Device buffer of n elements of c.type from doubles.
static void *upload(const case_def &c, const std::vector<double> &v)
{
    void *d = NULL;
    size_t es = c.type == CUDNN_DATA_DOUBLE ? 8 : 4;
    std::vector<unsigned char> bytes(v.size() * es);
    for (size_t i = 0; i < v.size(); i++) {
        if (c.type == CUDNN_DATA_DOUBLE)
            memcpy(&bytes[i * es], &v[i], es);
        else {
            float f = (float)v[i];
            memcpy(&bytes[i * es], &f, es);
        }
    }
    must(cudaMalloc(&d, bytes.size() ? bytes.size() : 1) == cudaSuccess, "cudaMalloc");
    must(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess,
         "cudaMemcpy up");
    return d;
}

static std::vector<double> download(const case_def &c, const void *d, size_t n)
{
    size_t es = c.type == CUDNN_DATA_DOUBLE ? 8 : 4;
    std::vector<unsigned char> bytes(n * es);
    std::vector<double> v(n);
    must(cudaMemcpy(bytes.data(), d, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess,
         "cudaMemcpy down");
    for (size_t i = 0; i < n; i++) {
        if (c.type == CUDNN_DATA_DOUBLE)
            memcpy(&v[i], &bytes[i * es], es);
        else {
            float f;
            memcpy(&f, &bytes[i * es], es);
            v[i] = f;
        }
    }
    return v;
}

// Copy host values to a weight param cudnnGetRNNWeightParams pointed at.
static void put(const case_def &c, void *dst, const std::vector<double> &v)
{
    void *tmp = upload(c, v);
    size_t es = c.type == CUDNN_DATA_DOUBLE ? 8 : 4;
    must(cudaMemcpy(dst, tmp, v.size() * es, cudaMemcpyDeviceToDevice) == cudaSuccess,
         "cudaMemcpy weights");
    cudaFree(tmp);
}

static int64_t elements(cudnnTensorDescriptor_t d)
{
    cudnnDataType_t t;
    int nb, dim[8], stride[8];
    if (cudnnGetTensorNdDescriptor(d, 8, &t, &nb, dim, stride) != CUDNN_STATUS_SUCCESS)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < nb; i++)
        n *= dim[i];
    return n;
}

static bool within(const void *p, size_t n, const void *base, size_t size)
{
    const char *a = (const char *)p, *b = (const char *)base;
    return a >= b && a + n <= b + size;
}

// Describe the weights, fill them, return the host copy.
static void weights(cudnnHandle_t h, cudnnRNNDescriptor_t rnn, const case_def &c, size_t wsize,
                    void *wspace, host_rnn &m, unsigned *seed)
{
    char name[128];
    size_t es = c.type == CUDNN_DATA_DOUBLE ? 8 : 4;
    cudnnTensorDescriptor_t md, bd;
    must(cudnnCreateTensorDescriptor(&md) == CUDNN_STATUS_SUCCESS, "create mDesc");
    must(cudnnCreateTensorDescriptor(&bd) == CUDNN_STATUS_SUCCESS, "create bDesc");
    int G = gates(c);
    m.W.resize(G);
    m.R.resize(G);
    m.bW.resize(G);
    m.bR.resize(G);
    for (int lin = 0; lin < 2 * G; lin++) {
        void *ma = NULL, *ba = NULL;
        int cols = lin < G ? IN : HID;
        check_dnn(cudnnGetRNNWeightParams(h, rnn, 0, wsize, wspace, lin, md, &ma, bd, &ba),
                  fmt_name(name, sizeof name, "%s weight params %d", c.name, lin));
        check(elements(md) == (int64_t)HID * cols,
              fmt_name(name, sizeof name, "%s matrix %d described", c.name, lin),
              "%lld elements", (long long)elements(md));
        check(elements(bd) == HID, fmt_name(name, sizeof name, "%s bias %d described", c.name, lin),
              "%lld elements", (long long)elements(bd));
        check(ma && ba && within(ma, (size_t)HID * cols * es, wspace, wsize) &&
                  within(ba, HID * es, wspace, wsize),
              fmt_name(name, sizeof name, "%s params %d inside the weight space", c.name, lin),
              "matrix %p bias %p space %p+%zu", ma, ba, wspace, wsize);
        std::vector<double> mat((size_t)HID * cols), bias(HID);
        for (double &v : mat)
            v = value(seed) / 2;
        for (double &v : bias)
            v = value(seed) / 4;
        if (ma && ba) {
            put(c, ma, mat);
            put(c, ba, bias);
        }
        (lin < G ? m.W : m.R)[lin % G] = mat;
        (lin < G ? m.bW : m.bR)[lin % G] = bias;
    }
    check_dnn_err(cudnnGetRNNWeightParams(h, rnn, 0, wsize, wspace, 9, md, NULL, bd, NULL),
                  CUDNN_STATUS_BAD_PARAM, fmt_name(name, sizeof name, "%s linLayerID 9", c.name));
    cudnnDestroyTensorDescriptor(md);
    cudnnDestroyTensorDescriptor(bd);
}

static void compare(const char *name, const std::vector<double> &got,
                    const std::vector<double> &ref, const std::vector<double> &scale)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ref.size(); i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-4 * (1 + fabs(ref[i]) + scale[i])) && !bad++)
            first = i;
    check(bad == 0, name, "%zu wrong, first [%zu] %g want %g", bad, first,
          bad ? got[first] : 0.0, bad ? ref[first] : 0.0);
}

// Device buffers and descriptors of one case, for the backward passes.
struct rnn_call {
    cudnnHandle_t h;
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    void *dev_seq, *x, *hx, *y, *wspace, *workspace, *rspace;
    size_t wsize, work, reserve;
};

// Backpropagation through time on the CPU: dz per step (laid out as y),
// dx, dhx, and the weight gradients (one per gate, as host_rnn).
static void bptt(const host_rnn &m, const std::vector<double> &y, const std::vector<double> &dy,
                 const std::vector<double> &dhy, std::vector<double> &dx,
                 std::vector<double> &dhx, host_rnn &g)
{
    std::vector<double> dz(y.size(), 0.0);
    dx.assign((size_t)MAXSEQ * BATCH * IN, 0.0);
    dhx = dhy;
    for (int b = 0; b < BATCH; b++) {
        double *dh = &dhx[(size_t)b * HID];
        for (int t = SEQ[b] - 1; t >= 0; t--) {
            size_t row = ((size_t)t * BATCH + b) * HID;
            for (int i = 0; i < HID; i++)
                dz[row + i] = (dh[i] + dy[row + i]) * (1 - y[row + i] * y[row + i]);
            for (int k = 0; k < IN; k++) {
                double s = 0;
                for (int i = 0; i < HID; i++)
                    s += m.W[0][(size_t)i * IN + k] * dz[row + i];
                dx[((size_t)t * BATCH + b) * IN + k] = s;
            }
            for (int k = 0; k < HID; k++) {
                double s = 0;
                for (int i = 0; i < HID; i++)
                    s += m.R[0][(size_t)i * HID + k] * dz[row + i];
                dh[k] = s;
            }
        }
    }
    g.W.assign(1, std::vector<double>((size_t)HID * IN, 0.0));
    g.R.assign(1, std::vector<double>((size_t)HID * HID, 0.0));
    g.bW.assign(1, std::vector<double>(HID, 0.0));
    g.bR.assign(1, std::vector<double>(HID, 0.0));
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < SEQ[b]; t++)
            for (int i = 0; i < HID; i++) {
                double d = dz[((size_t)t * BATCH + b) * HID + i];
                for (int k = 0; k < IN; k++)
                    g.W[0][(size_t)i * IN + k] += d * m.x[((size_t)t * BATCH + b) * IN + k];
                for (int k = 0; k < HID; k++)
                    g.R[0][(size_t)i * HID + k] +=
                        d * (t == 0 ? m.hx[(size_t)b * HID + k] : y[((size_t)(t - 1) * BATCH + b) * HID + k]);
                g.bW[0][i] += d;
                g.bR[0][i] += d;
            }
}

static void backward(const case_def &c, const rnn_call &k, const host_rnn &m,
                     const std::vector<double> &yref, unsigned *seed)
{
    char name[128];
    std::vector<double> dy(yref.size()), dhy((size_t)BATCH * HID);
    for (double &v : dy)
        v = value(seed);
    for (double &v : dhy)
        v = value(seed) / 2;
    void *ddy = upload(c, dy), *ddhy = upload(c, dhy);
    void *ddx = upload(c, std::vector<double>((size_t)MAXSEQ * BATCH * IN, 0.0));
    void *ddhx = upload(c, std::vector<double>((size_t)BATCH * HID, 7.0));
    void *dw = NULL;
    must(cudaMalloc(&dw, k.wsize) == cudaSuccess && cudaMemset(dw, 0, k.wsize) == cudaSuccess,
         "dweight space");
    check_dnn(cudnnRNNBackwardData_v8(k.h, k.rnn, (const int32_t *)k.dev_seq, k.yd, k.y, ddy, k.xd,
                                      ddx, k.hd, k.hx, ddhy, ddhx, k.hd, NULL, NULL, NULL,
                                      k.wsize, k.wspace, k.work, k.workspace, k.reserve, k.rspace),
              fmt_name(name, sizeof name, "%s backward data", c.name));
    check_dnn(cudnnRNNBackwardWeights_v8(k.h, k.rnn, CUDNN_WGRAD_MODE_ADD,
                                         (const int32_t *)k.dev_seq, k.xd, k.x, k.hd, k.hx, k.yd,
                                         k.y, k.wsize, dw, k.work, k.workspace, k.reserve,
                                         k.rspace),
              fmt_name(name, sizeof name, "%s backward weights", c.name));
    std::vector<double> dx, dhx;
    host_rnn g;
    bptt(m, yref, dy, dhy, dx, dhx, g);
    std::vector<double> got = download(c, ddx, dx.size());
    for (int b = 0; b < BATCH; b++)      // past a sequence's end dx is not compared
        for (int t = SEQ[b]; t < MAXSEQ; t++)
            for (int i = 0; i < IN; i++)
                got[((size_t)t * BATCH + b) * IN + i] = dx[((size_t)t * BATCH + b) * IN + i];
    std::vector<double> loose(dx.size(), 16.0);
    compare(fmt_name(name, sizeof name, "%s dx", c.name), got, dx, loose);
    compare(fmt_name(name, sizeof name, "%s dhx", c.name), download(c, ddhx, dhx.size()), dhx,
            std::vector<double>(dhx.size(), 16.0));
    cudnnTensorDescriptor_t md, bd;
    must(cudnnCreateTensorDescriptor(&md) == CUDNN_STATUS_SUCCESS, "create mDesc");
    must(cudnnCreateTensorDescriptor(&bd) == CUDNN_STATUS_SUCCESS, "create bDesc");
    for (int lin = 0; lin < 2; lin++) {
        void *ma = NULL, *ba = NULL;
        must(cudnnGetRNNWeightParams(k.h, k.rnn, 0, k.wsize, dw, lin, md, &ma, bd, &ba) ==
                 CUDNN_STATUS_SUCCESS && ma && ba, "gradient params");
        const std::vector<double> &mat = lin == 0 ? g.W[0] : g.R[0];
        const std::vector<double> &bias = lin == 0 ? g.bW[0] : g.bR[0];
        compare(fmt_name(name, sizeof name, "%s matrix %d gradient", c.name, lin),
                download(c, ma, mat.size()), mat, std::vector<double>(mat.size(), 16.0));
        compare(fmt_name(name, sizeof name, "%s bias %d gradient", c.name, lin),
                download(c, ba, bias.size()), bias, std::vector<double>(bias.size(), 16.0));
    }
    cudnnDestroyTensorDescriptor(md);
    cudnnDestroyTensorDescriptor(bd);
    cudaFree(ddy); cudaFree(ddhy); cudaFree(ddx); cudaFree(ddhx); cudaFree(dw);
}

static void descriptors_round_trip(const case_def &c, cudnnRNNDescriptor_t rnn,
                                   cudnnDropoutDescriptor_t drop, cudnnRNNDataDescriptor_t yd,
                                   double fill)
{
    char name[128];
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t input;
    cudnnDataType_t type, prec;
    cudnnMathType_t math;
    int32_t in, hid, proj, layers;
    cudnnDropoutDescriptor_t d;
    uint32_t aux;
    check_dnn(cudnnGetRNNDescriptor_v8(rnn, &algo, &cell, &bias, &dir, &input, &type, &prec, &math,
                                       &in, &hid, &proj, &layers, &d, &aux),
              fmt_name(name, sizeof name, "%s get rnn descriptor", c.name));
    check(algo == CUDNN_RNN_ALGO_STANDARD && cell == c.cell && bias == CUDNN_RNN_DOUBLE_BIAS &&
              dir == CUDNN_UNIDIRECTIONAL && input == CUDNN_LINEAR_INPUT && type == c.type &&
              prec == c.type && in == IN && hid == HID && proj == HID && layers == 1 && d == drop &&
              aux == CUDNN_RNN_PADDED_IO_ENABLED,
          fmt_name(name, sizeof name, "%s rnn descriptor round trip", c.name),
          "cell %d type %d in %d hid %d proj %d layers %d", (int)cell, (int)type, in, hid, proj,
          layers);

    cudnnRNNDataLayout_t layout;
    int maxseq, batch, vec, seq[BATCH + 1] = { 0, 0, 0, -7 };
    double fill_back[2] = { 0, 0 };
    check_dnn(cudnnGetRNNDataDescriptor(yd, &type, &layout, &maxseq, &batch, &vec, BATCH, seq,
                                        fill_back),
              fmt_name(name, sizeof name, "%s get rnn data descriptor", c.name));
    double f = c.type == CUDNN_DATA_DOUBLE ? fill_back[0] : (double)*(float *)fill_back;
    bool tail_kept = c.type == CUDNN_DATA_DOUBLE || ((float *)fill_back)[1] == 0.0f;
    check(type == c.type && layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED &&
              maxseq == MAXSEQ && batch == BATCH && vec == HID && seq[0] == SEQ[0] &&
              seq[1] == SEQ[1] && seq[2] == SEQ[2] && seq[3] == -7 && f == fill && tail_kept,
          fmt_name(name, sizeof name, "%s rnn data descriptor round trip", c.name),
          "type %d maxseq %d batch %d vec %d seq %d %d %d %d fill %g", (int)type, maxseq, batch,
          vec, seq[0], seq[1], seq[2], seq[3], f);
}

static void run_case(cudnnHandle_t h, cudnnDropoutDescriptor_t drop, const case_def &c,
                     unsigned seed)
{
    char name[128];
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    must(cudnnCreateRNNDescriptor(&rnn) == CUDNN_STATUS_SUCCESS, "create rnn");
    if (!check_dnn(cudnnSetRNNDescriptor_v8(rnn, CUDNN_RNN_ALGO_STANDARD, c.cell,
                                            CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                            CUDNN_LINEAR_INPUT, c.type, c.type, CUDNN_FMA_MATH,
                                            IN, HID, HID, 1, drop,
                                            CUDNN_RNN_PADDED_IO_ENABLED),
                   fmt_name(name, sizeof name, "%s set rnn descriptor", c.name))) {
        cudnnDestroyRNNDescriptor(rnn);
        return;
    }
    double fill = -0.5;
    float fill_f = -0.5f;
    void *fill_p = c.type == CUDNN_DATA_DOUBLE ? (void *)&fill : (void *)&fill_f;
    must(cudnnCreateRNNDataDescriptor(&xd) == CUDNN_STATUS_SUCCESS, "create x data");
    must(cudnnCreateRNNDataDescriptor(&yd) == CUDNN_STATUS_SUCCESS, "create y data");
    // No fill for the input (as PyTorch sets its descriptors): NULL travels.
    check_dnn(cudnnSetRNNDataDescriptor(xd, c.type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        MAXSEQ, BATCH, IN, SEQ, NULL),
              fmt_name(name, sizeof name, "%s set x data descriptor", c.name));
    check_dnn(cudnnSetRNNDataDescriptor(yd, c.type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        MAXSEQ, BATCH, HID, SEQ, fill_p),
              fmt_name(name, sizeof name, "%s set y data descriptor", c.name));
    descriptors_round_trip(c, rnn, drop, yd, fill);

    int hdim[3] = { 1, BATCH, HID }, hstride[3] = { BATCH * HID, HID, 1 };
    must(cudnnCreateTensorDescriptor(&hd) == CUDNN_STATUS_SUCCESS, "create hDesc");
    must(cudnnSetTensorNdDescriptor(hd, c.type, 3, hdim, hstride) == CUDNN_STATUS_SUCCESS,
         "set hDesc");

    size_t wsize = 0, work = 0, reserve = 0;
    check_dnn(cudnnGetRNNWeightSpaceSize(h, rnn, &wsize),
              fmt_name(name, sizeof name, "%s weight space size", c.name));
    check_dnn(cudnnGetRNNTempSpaceSizes(h, rnn, c.mode, xd, &work, &reserve),
              fmt_name(name, sizeof name, "%s temp space sizes", c.name));
    void *wspace = NULL, *workspace = NULL, *rspace = NULL;
    must(cudaMalloc(&wspace, wsize ? wsize : 1) == cudaSuccess, "alloc weights");
    must(cudaMalloc(&workspace, work ? work : 1) == cudaSuccess, "alloc work");
    must(cudaMalloc(&rspace, reserve ? reserve : 1) == cudaSuccess, "alloc reserve");
    must(cudaMemset(wspace, 0, wsize) == cudaSuccess, "clear weights");

    host_rnn m;
    weights(h, rnn, c, wsize, wspace, m, &seed);
    m.x.resize((size_t)MAXSEQ * BATCH * IN);
    m.hx.resize((size_t)BATCH * HID);
    m.cx.assign((size_t)BATCH * HID, 0.0);
    for (double &v : m.x)
        v = value(&seed);
    for (double &v : m.hx)
        v = value(&seed) / 2;
    if (c.cell == CUDNN_LSTM)
        for (double &v : m.cx)
            v = value(&seed);
    void *cx = upload(c, m.cx);
    void *cy = upload(c, std::vector<double>((size_t)BATCH * HID, 7.0));
    void *x = upload(c, m.x), *hx = upload(c, m.hx);
    void *y = upload(c, std::vector<double>((size_t)MAXSEQ * BATCH * HID, 7.0));
    void *hy = upload(c, std::vector<double>((size_t)BATCH * HID, 7.0));
    void *dev_seq = NULL;
    must(cudaMalloc(&dev_seq, sizeof SEQ) == cudaSuccess, "alloc seq");
    must(cudaMemcpy(dev_seq, SEQ, sizeof SEQ, cudaMemcpyHostToDevice) == cudaSuccess, "seq up");

    bool lstm = c.cell == CUDNN_LSTM;
    check_dnn(cudnnRNNForward(h, rnn, c.mode, (const int32_t *)dev_seq, xd, x, yd, y, hd, hx, hy,
                              hd, lstm ? cx : NULL, lstm ? cy : NULL, wsize, wspace, work,
                              workspace, reserve, rspace),
              fmt_name(name, sizeof name, "%s forward", c.name));
    std::vector<double> yref, hyref, cyref, scale;
    reference(c, m, fill, yref, hyref, cyref, scale);
    if (lstm)
        compare(fmt_name(name, sizeof name, "%s final cell state", c.name),
                download(c, cy, cyref.size()), cyref, std::vector<double>(cyref.size(), 16.0));
    compare(fmt_name(name, sizeof name, "%s y and padding", c.name),
            download(c, y, yref.size()), yref, scale);
    compare(fmt_name(name, sizeof name, "%s final hidden state", c.name),
            download(c, hy, hyref.size()), hyref, std::vector<double>(hyref.size(), 16.0));

    if (c.mode == CUDNN_FWD_MODE_TRAINING && c.cell == CUDNN_RNN_TANH) {
        rnn_call k = { h, rnn, xd, yd, hd, dev_seq, x, hx, y, wspace, workspace, rspace,
                       wsize, work, reserve };
        backward(c, k, m, yref, &seed);
    }
    check_dnn_err(cudnnRNNForward(h, NULL, c.mode, (const int32_t *)dev_seq, xd, x, yd, y, hd, hx,
                                  hy, hd, NULL, NULL, wsize, wspace, work, workspace, reserve,
                                  rspace),
                  CUDNN_STATUS_BAD_PARAM, fmt_name(name, sizeof name, "%s forward without rnn", c.name));

    cudaFree(cx); cudaFree(cy);
    cudaFree(x); cudaFree(hx); cudaFree(y); cudaFree(hy); cudaFree(dev_seq);
    cudaFree(wspace); cudaFree(workspace); cudaFree(rspace);
    cudnnDestroyTensorDescriptor(hd);
    cudnnDestroyRNNDataDescriptor(xd);
    cudnnDestroyRNNDataDescriptor(yd);
    check_dnn(cudnnDestroyRNNDescriptor(rnn), fmt_name(name, sizeof name, "%s destroy", c.name));
}

static cudnnDropoutDescriptor_t dropout(cudnnHandle_t h, void **states)
{
    cudnnDropoutDescriptor_t d;
    size_t size = 0;
    must(cudnnCreateDropoutDescriptor(&d) == CUDNN_STATUS_SUCCESS, "create dropout");
    check_dnn(cudnnDropoutGetStatesSize(h, &size), "dropout states size");
    must(cudaMalloc(states, size ? size : 1) == cudaSuccess, "alloc states");
    check_dnn(cudnnSetDropoutDescriptor(d, h, 0.0f, *states, size, 1234), "set dropout");
    float p = -1;
    void *s = NULL;
    unsigned long long seed = 0;
    check_dnn(cudnnGetDropoutDescriptor(d, h, &p, &s, &seed), "get dropout");
    check(p == 0.0f && s == *states && seed == 1234, "dropout round trip", "p %g seed %llu", p,
          seed);
    check_dnn(cudnnRestoreDropoutDescriptor(d, h, 0.0f, *states, size, 1234), "restore dropout");
    return d;
}

static void bad_handles(cudnnHandle_t h)
{
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t data;
    size_t size = 0;
    int maxseq, batch, vec;
    cudnnDataType_t type;
    cudnnRNNDataLayout_t layout;
    must(cudnnCreateRNNDescriptor(&rnn) == CUDNN_STATUS_SUCCESS, "bad: create rnn");
    must(cudnnCreateRNNDataDescriptor(&data) == CUDNN_STATUS_SUCCESS, "bad: create data");
    check_dnn(cudnnDestroyRNNDescriptor(rnn), "bad: destroy rnn");
    check_dnn(cudnnDestroyRNNDataDescriptor(data), "bad: destroy data");
    check_dnn_err(cudnnGetRNNWeightSpaceSize(h, rnn, &size), CUDNN_STATUS_BAD_PARAM,
                  "bad: weight space size of a destroyed rnn");
    check_dnn_err(cudnnGetRNNDataDescriptor(data, &type, &layout, &maxseq, &batch, &vec, 0, NULL,
                                            NULL),
                  CUDNN_STATUS_BAD_PARAM, "bad: get a destroyed rnn data descriptor");
    // A fill of a type whose size rgpu does not know: refused, and the
    // session goes on.
    long long fill = 0;
    must(cudnnCreateRNNDataDescriptor(&data) == CUDNN_STATUS_SUCCESS, "bad: create data 2");
    cudnnStatus_t st = cudnnSetRNNDataDescriptor(data, CUDNN_DATA_INT64,
                                                 CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, MAXSEQ,
                                                 BATCH, IN, SEQ, &fill);
    check_dnn_err(st, CUDNN_STATUS_NOT_SUPPORTED, "bad: a fill of a type of unknown size");
    // A negative batch size: natively BAD_PARAM; rgpu cannot send an array
    // of that many lengths and refuses the call without reading it.
    st = cudnnSetRNNDataDescriptor(data, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                   MAXSEQ, -1, IN, SEQ, NULL);
    check(st != CUDNN_STATUS_SUCCESS, "bad: a negative batch size is refused", "%s",
          cudnnGetErrorString(st));
    check_dnn(cudnnDestroyRNNDataDescriptor(data), "bad: session goes on after an unknown fill type");
}

int main(int argc, char **argv)
{
    cudnnHandle_t h;
    void *states = NULL;
    must(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
    cudnnDropoutDescriptor_t drop = dropout(h, &states);
    static const case_def cases[] = {
        { "tanh float inference", CUDNN_DATA_FLOAT, CUDNN_RNN_TANH, CUDNN_FWD_MODE_INFERENCE },
        { "relu double inference", CUDNN_DATA_DOUBLE, CUDNN_RNN_RELU, CUDNN_FWD_MODE_INFERENCE },
        { "tanh double training", CUDNN_DATA_DOUBLE, CUDNN_RNN_TANH, CUDNN_FWD_MODE_TRAINING },
        { "lstm float inference", CUDNN_DATA_FLOAT, CUDNN_LSTM, CUDNN_FWD_MODE_INFERENCE },
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(h, drop, cases[i], 17 + i);
    size_t v;
    check_dnn_err(cudnnGetRNNWeightSpaceSize(h, NULL, &v), CUDNN_STATUS_BAD_PARAM,
                  "weight space size without rnn");
    if (argc > 1 && strcmp(argv[1], "bad-handles") == 0)
        bad_handles(h);
    cudnnDestroyDropoutDescriptor(drop);
    cudaFree(states);
    cudnnDestroy(h);
    return check_exit_status();
}
