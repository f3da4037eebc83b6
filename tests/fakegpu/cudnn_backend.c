// Fake libcudnn.so.9, part two: the backend (graph) API, as far as a
// graph of one convolution forward or one pointwise operation goes: TENSOR,
// CONVOLUTION, POINTWISE, OPERATION_CONVOLUTION_FORWARD,
// OPERATION_POINTWISE (add or multiply x by b, b a tensor of y's shape or
// a scalar, which may be passed by value), OPERATIONGRAPH (one operation),
// ENGINEHEUR (ENGINES results whatever the mode), ENGINECFG (with KNOBS knob
// choices), ENGINE (global indices 0 to ENGINES-1, which all compute the
// same; their numerical notes differ: see engine_notes), KNOB_CHOICE,
// EXECUTION_PLAN (no workspace) and VARIANT_PACK descriptors.
// Every other descriptor type is refused at creation with
// CUDNN_STATUS_NOT_SUPPORTED, and so is an attribute of a supported
// descriptor that the fake does not model.
//
// Semantics follow NVIDIA's cuDNN 9.19, observed without a GPU (the
// descriptor calls need none):
// - SetAttribute on a finalized descriptor, with elementCount <= 0, with a
//   NULL array or with an attribute of another descriptor type:
//   CUDNN_STATUS_BAD_PARAM; the wrong attribute type:
//   CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE.
// - GetAttribute before Finalize: CUDNN_STATUS_NOT_INITIALIZED.  With a
//   NULL array it reports the number of elements the attribute has (a count
//   query, e.g. requestedElementCount 0); otherwise it writes and reports
//   min(requestedElementCount, that number).  elementCount may be NULL.
// - Attributes whose values are descriptors are copied on Set (destroying
//   the source afterwards is fine), and on Get they are copied into
//   descriptors the caller created beforehand, of the right type (a NULL
//   element is CUDNN_STATUS_BAD_PARAM) -- this is how the engine configs of
//   CUDNN_ATTR_ENGINEHEUR_RESULTS are read.
// - A tensor needs its data type, dimensions, strides, unique id and byte
//   alignment before Finalize; a variant pack needs its unique ids.
// - The operation's alpha and beta are kept as doubles: they are set as
//   FLOAT or DOUBLE, and read back as DOUBLE only.
// - CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, the variant pack's attributes and
//   CUDNN_ATTR_OPERATIONGRAPH_OPS cannot be read back
//   (CUDNN_STATUS_NOT_SUPPORTED).
// - A tensor passed by value (CUDNN_ATTR_TENSOR_IS_BY_VALUE) is a scalar
//   (every dimension 1); its variant pack pointer is a host address,
//   read when the plan executes.
#include "dnn.h"

#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

#define MAX_OPS 4               // operations a graph may list (one runs)
#define MAX_VP 64               // variant pack entries
#define ENGINES 3               // engines of every graph, and heuristics results
#define KNOBS 2                 // knob choices of every engine config

// Bits of the attributes that were set.
enum {
    T_TYPE = 1, T_DIMS = 2, T_STRIDES = 4, T_UID = 8, T_ALIGN = 16,
    C_NSP = 1, C_CTYPE = 2, C_MODE = 4, C_DIL = 8, C_STRIDES = 16, C_PRE = 32, C_POST = 64,
    O_X = 1, O_W = 2, O_Y = 4, O_CONV = 8, O_PW = 16,
    W_MODE = 1,
    K_TYPE = 1, K_VALUE = 2,
    G_OPS = 1, G_HANDLE = 2,
    H_GRAPH = 1, H_MODE = 2,
    E_GRAPH = 1, E_INDEX = 2,
    F_ENGINE = 1,
    P_CFG = 1, P_HANDLE = 2,
    V_UIDS = 1, V_PTRS = 2, V_WS = 4,
};

struct btensor {
    unsigned set;
    int finalized;
    cudnnDataType_t type;
    int64_t ndims, nstrides;
    int64_t dim[DNN_DIM_MAX], stride[DNN_DIM_MAX];
    int64_t uid, align, vector_count, vector_dim;
    uint8_t is_virtual, by_value;       // CUDNN_TYPE_BOOLEAN is one byte
    cudnnBackendTensorReordering_t reorder;
};

struct bconv {
    unsigned set;
    int finalized;
    int64_t nsp;
    cudnnDataType_t ctype;
    cudnnConvolutionMode_t mode;
    int64_t ndil, nstrides, npre, npost;
    int64_t dil[DNN_SPATIAL_MAX], stride[DNN_SPATIAL_MAX];
    int64_t pre[DNN_SPATIAL_MAX], post[DNN_SPATIAL_MAX];
};

struct bpw {
    unsigned set;
    int finalized;
    cudnnPointwiseMode_t mode;
    cudnnDataType_t prec;
};

// A convolution forward (x, w, y, conv) or a pointwise operation (x, b in
// w, y, pw): kind is its descriptor type.
struct bop {
    unsigned set;
    int finalized;
    cudnnBackendDescriptorType_t kind;
    struct btensor x, w, y;
    struct bconv conv;
    struct bpw pw;
    double alpha, beta;
};

struct bgraph {
    unsigned set;
    int finalized;
    int64_t nops;
    struct bop ops[MAX_OPS];
    cudnnHandle_t handle;
    uint8_t dynamic;
};

struct bengine {
    unsigned set;
    int finalized;
    struct bgraph graph;
    int64_t index;
};

struct bknob {
    unsigned set;
    int finalized;
    cudnnBackendKnobType_t type;
    int64_t value;
};

struct bcfg {
    unsigned set;
    int finalized;
    struct bengine engine;
    int64_t nknobs;
    struct bknob knobs[KNOBS];
};

struct bheur {
    unsigned set;
    int finalized;
    struct bgraph graph;
    cudnnBackendHeurMode_t mode;
    int32_t sm_target;
};

struct bplan {
    unsigned set;
    int finalized;
    struct bcfg cfg;
    cudnnHandle_t handle;
};

struct bvp {
    unsigned set;
    int finalized;
    int64_t nuids, nptrs;
    int64_t uids[MAX_VP];
    void *ptrs[MAX_VP];
    void *workspace;
};

// A backend descriptor.  Every member of the union starts with the set
// bits and the finalized flag, so copying a member copies its state.
struct bd {
    cudnnBackendDescriptorType_t type;
    union {
        struct { unsigned set; int finalized; } hdr;
        struct btensor tensor;
        struct bconv conv;
        struct bpw pw;
        struct bknob knob;
        struct bop op;
        struct bgraph graph;
        struct bengine engine;
        struct bcfg cfg;
        struct bheur heur;
        struct bplan plan;
        struct bvp vp;
    } u;
};

// The element type of CUDNN_ATTR_OPERATIONGRAPH_OPS: any operation.
#define ANY_OP ((cudnnBackendDescriptorType_t)-1)

static int is_op(cudnnBackendDescriptorType_t t)
{
    return t == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR;
}

static int of_type(cudnnBackendDescriptorType_t have, cudnnBackendDescriptorType_t want)
{
    return have == want || (want == ANY_OP && is_op(have));
}

static size_t body_size(cudnnBackendDescriptorType_t t)
{
    switch (t) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return sizeof(struct btensor);
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: return sizeof(struct bconv);
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return sizeof(struct bpw);
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: return sizeof(struct bknob);
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return sizeof(struct bop);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return sizeof(struct bgraph);
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return sizeof(struct bengine);
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return sizeof(struct bcfg);
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return sizeof(struct bheur);
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return sizeof(struct bplan);
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return sizeof(struct bvp);
    default: return 0;
    }
}

static struct bd *bd_of(cudnnBackendDescriptor_t d)
{
    return dnn_reg_has(d, DNN_BACKEND) ? (struct bd *)d : NULL;
}

// ---- Create, destroy ------------------------------------------------------------------------

API cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                               cudnnBackendDescriptor_t *descriptor)
{
    struct bd *d;

    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if ((int)type < CUDNN_BACKEND_POINTWISE_DESCRIPTOR ||
        (int)type > CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM;
    if (!body_size(type))
        return CUDNN_STATUS_NOT_SUPPORTED;
    d = calloc(1, sizeof *d);
    if (!d || dnn_reg_add(d, DNN_BACKEND) != 0) {
        free(d);
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    }
    d->type = type;
    // Defaults: an operation scales by 1 and adds 0 times the output; a
    // tensor is one vector element per element; heuristics are instant.
    if (type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
        type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
        d->u.op.kind = type;
        d->u.op.alpha = 1;
    }
    if (type == CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
        d->u.tensor.vector_count = 1;
        d->u.tensor.vector_dim = -1;
    }
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

API cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!bd_of(descriptor))
        return CUDNN_STATUS_BAD_PARAM;
    dnn_reg_del(descriptor);
    free(descriptor);
    return CUDNN_STATUS_SUCCESS;
}

// Deprecated: resets a descriptor to its freshly created state.
API cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor)
{
    struct bd *d = bd_of(descriptor);
    cudnnBackendDescriptor_t fresh;
    cudnnStatus_t r;

    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    r = cudnnBackendCreateDescriptor(d->type, &fresh);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    memcpy(&d->u, &((struct bd *)fresh)->u, body_size(d->type));
    cudnnBackendDestroyDescriptor(fresh);
    return CUDNN_STATUS_SUCCESS;
}

// ---- Attributes ------------------------------------------------------------------------------

// Where an attribute's values live in a descriptor.
struct slot {
    cudnnBackendAttributeType_t type;
    int64_t min, max;           // element counts accepted by Set
    void *p;                    // the values (descriptor bodies for BACKEND_DESCRIPTOR)
    int64_t *n;                 // their count, or NULL: exactly one
    unsigned bit;               // set bit
    cudnnBackendDescriptorType_t dtype;     // type of descriptor values
    int set_ok, get_ok;         // 0: refused with CUDNN_STATUS_NOT_SUPPORTED
    int64_t value;              // storage of computed values (Get only)
    int64_t count;              // and their count
};

#define SLOT(T, lo, hi, ptr, cnt, b) \
    (*s = (struct slot){ .type = (T), .min = (lo), .max = (hi), .p = (ptr), .n = (cnt), \
                         .bit = (b), .set_ok = 1, .get_ok = 1 }, CUDNN_STATUS_SUCCESS)
#define DSLOT(DT, lo, hi, ptr, cnt, b) \
    (*s = (struct slot){ .type = CUDNN_TYPE_BACKEND_DESCRIPTOR, .min = (lo), .max = (hi), \
                         .p = (ptr), .n = (cnt), .bit = (b), .dtype = (DT), .set_ok = 1, \
                         .get_ok = 1 }, CUDNN_STATUS_SUCCESS)
// A value computed by the fake, read-only: count elements of v.
#define COMPUTED(T, v, cnt) \
    (*s = (struct slot){ .type = (T), .min = 1, .max = 1, .value = (v), .count = (cnt), \
                         .get_ok = 1 }, s->p = &s->value, s->n = &s->count, CUDNN_STATUS_SUCCESS)

// Whether an attribute belongs to a descriptor type at all: those of other
// types are BAD_PARAM, unmodelled ones of this type NOT_SUPPORTED.
static int in_range(cudnnBackendDescriptorType_t t, int a)
{
    switch (t) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return a >= 0 && a < 100;
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: return a >= 100 && a < 200;
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: return a >= 600 && a < 700;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return a >= 750 && a <= 758;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return a >= 200 && a < 300;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return a >= 300 && a < 400;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return a >= 400 && a < 500;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: return a >= 700 && a <= 705;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return a >= 800 && a < 900;
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return a >= 900 && a < 1000;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return a >= 1000 && a < 1100;
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return a >= 1300 && a < 1400;
    default: return 0;
    }
}

// The numerical note of an engine, or -1: engine 1 uses tensor cores,
// engine 2 down-converts its inputs, engine 0 has no note.
static int engine_note(int64_t index)
{
    return index == 1 ? CUDNN_NUMERICAL_NOTE_TENSOR_CORE
           : index == 2 ? CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS
                        : -1;
}

static cudnnStatus_t slot_for(struct bd *d, cudnnBackendAttributeName_t a, struct slot *s)
{
    memset(s, 0, sizeof *s);
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
        struct btensor *t = &d->u.tensor;
        switch ((int)a) {
        case CUDNN_ATTR_TENSOR_DATA_TYPE: return SLOT(CUDNN_TYPE_DATA_TYPE, 1, 1, &t->type, NULL, T_TYPE);
        case CUDNN_ATTR_TENSOR_DIMENSIONS: return SLOT(CUDNN_TYPE_INT64, 1, DNN_DIM_MAX, t->dim, &t->ndims, T_DIMS);
        case CUDNN_ATTR_TENSOR_STRIDES: return SLOT(CUDNN_TYPE_INT64, 1, DNN_DIM_MAX, t->stride, &t->nstrides, T_STRIDES);
        case CUDNN_ATTR_TENSOR_UNIQUE_ID: return SLOT(CUDNN_TYPE_INT64, 1, 1, &t->uid, NULL, T_UID);
        case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
            (void)SLOT(CUDNN_TYPE_INT64, 1, 1, &t->align, NULL, T_ALIGN);
            s->get_ok = 0;
            return CUDNN_STATUS_SUCCESS;
        case CUDNN_ATTR_TENSOR_VECTOR_COUNT: return SLOT(CUDNN_TYPE_INT64, 1, 1, &t->vector_count, NULL, 0);
        case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION: return SLOT(CUDNN_TYPE_INT64, 1, 1, &t->vector_dim, NULL, 0);
        case CUDNN_ATTR_TENSOR_IS_VIRTUAL: return SLOT(CUDNN_TYPE_BOOLEAN, 1, 1, &t->is_virtual, NULL, 0);
        case CUDNN_ATTR_TENSOR_IS_BY_VALUE: return SLOT(CUDNN_TYPE_BOOLEAN, 1, 1, &t->by_value, NULL, 0);
        case CUDNN_ATTR_TENSOR_REORDERING_MODE: return SLOT(CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, 1, &t->reorder, NULL, 0);
        }
        break;
    }
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
        struct bconv *c = &d->u.conv;
        switch ((int)a) {
        case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: return SLOT(CUDNN_TYPE_INT64, 1, 1, &c->nsp, NULL, C_NSP);
        case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return SLOT(CUDNN_TYPE_DATA_TYPE, 1, 1, &c->ctype, NULL, C_CTYPE);
        case CUDNN_ATTR_CONVOLUTION_CONV_MODE: return SLOT(CUDNN_TYPE_CONVOLUTION_MODE, 1, 1, &c->mode, NULL, C_MODE);
        case CUDNN_ATTR_CONVOLUTION_DILATIONS: return SLOT(CUDNN_TYPE_INT64, 1, DNN_SPATIAL_MAX, c->dil, &c->ndil, C_DIL);
        case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return SLOT(CUDNN_TYPE_INT64, 1, DNN_SPATIAL_MAX, c->stride, &c->nstrides, C_STRIDES);
        case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return SLOT(CUDNN_TYPE_INT64, 1, DNN_SPATIAL_MAX, c->pre, &c->npre, C_PRE);
        case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: return SLOT(CUDNN_TYPE_INT64, 1, DNN_SPATIAL_MAX, c->post, &c->npost, C_POST);
        }
        break;
    }
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: {
        struct bpw *w = &d->u.pw;
        switch ((int)a) {
        case CUDNN_ATTR_POINTWISE_MODE: return SLOT(CUDNN_TYPE_POINTWISE_MODE, 1, 1, &w->mode, NULL, W_MODE);
        case CUDNN_ATTR_POINTWISE_MATH_PREC: return SLOT(CUDNN_TYPE_DATA_TYPE, 1, 1, &w->prec, NULL, 0);
        }
        break;
    }
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        struct bop *o = &d->u.op;
        switch ((int)a) {
        case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: return DSLOT(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, 1, 1, &o->pw, NULL, O_PW);
        case CUDNN_ATTR_OPERATION_POINTWISE_XDESC: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->x, NULL, O_X);
        case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->w, NULL, O_W);
        case CUDNN_ATTR_OPERATION_POINTWISE_YDESC: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->y, NULL, O_Y);
        }
        break;
    }
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: {
        struct bknob *k = &d->u.knob;
        switch ((int)a) {
        case CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE: return SLOT(CUDNN_TYPE_KNOB_TYPE, 1, 1, &k->type, NULL, K_TYPE);
        case CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE: return SLOT(CUDNN_TYPE_INT64, 1, 1, &k->value, NULL, K_VALUE);
        }
        break;
    }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: {
        struct bop *o = &d->u.op;
        switch ((int)a) {
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->x, NULL, O_X);
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->w, NULL, O_W);
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y: return DSLOT(CUDNN_BACKEND_TENSOR_DESCRIPTOR, 1, 1, &o->y, NULL, O_Y);
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC: return DSLOT(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, 1, 1, &o->conv, NULL, O_CONV);
        // FLOAT or DOUBLE on Set: handled by the caller.
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA: return SLOT(CUDNN_TYPE_DOUBLE, 1, 1, &o->alpha, NULL, 0);
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA: return SLOT(CUDNN_TYPE_DOUBLE, 1, 1, &o->beta, NULL, 0);
        }
        break;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
        struct bgraph *g = &d->u.graph;
        switch ((int)a) {
        case CUDNN_ATTR_OPERATIONGRAPH_OPS:
            (void)DSLOT(ANY_OP, 1, MAX_OPS, g->ops, &g->nops, G_OPS);
            s->get_ok = 0;
            return CUDNN_STATUS_SUCCESS;
        case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: return SLOT(CUDNN_TYPE_HANDLE, 1, 1, &g->handle, NULL, G_HANDLE);
        case CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED: return SLOT(CUDNN_TYPE_BOOLEAN, 1, 1, &g->dynamic, NULL, 0);
        case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: return COMPUTED(CUDNN_TYPE_INT64, ENGINES, 1);
        }
        break;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        struct bheur *h = &d->u.heur;
        switch ((int)a) {
        case CUDNN_ATTR_ENGINEHEUR_MODE: return SLOT(CUDNN_TYPE_HEUR_MODE, 1, 1, &h->mode, NULL, H_MODE);
        case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: return DSLOT(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, 1, 1, &h->graph, NULL, H_GRAPH);
        case CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET: return SLOT(CUDNN_TYPE_INT32, 1, 1, &h->sm_target, NULL, 0);
        case CUDNN_ATTR_ENGINEHEUR_RESULTS:
            // Read-only, ENGINES engine configs: built by the caller (heuristic_results).
            *s = (struct slot){ .type = CUDNN_TYPE_BACKEND_DESCRIPTOR, .dtype = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                .get_ok = 1, .count = ENGINES };
            s->n = &s->count;
            return CUDNN_STATUS_SUCCESS;
        }
        break;
    }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
        struct bengine *e = &d->u.engine;
        switch ((int)a) {
        case CUDNN_ATTR_ENGINE_OPERATION_GRAPH: return DSLOT(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, 1, 1, &e->graph, NULL, E_GRAPH);
        case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: return SLOT(CUDNN_TYPE_INT64, 1, 1, &e->index, NULL, E_INDEX);
        case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: {
            int note = engine_note(e->index);
            return COMPUTED(CUDNN_TYPE_NUMERICAL_NOTE, note, note >= 0);
        }
        case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE: return COMPUTED(CUDNN_TYPE_BEHAVIOR_NOTE, 0, 0);
        }
        break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
        struct bcfg *c = &d->u.cfg;
        switch ((int)a) {
        case CUDNN_ATTR_ENGINECFG_ENGINE: return DSLOT(CUDNN_BACKEND_ENGINE_DESCRIPTOR, 1, 1, &c->engine, NULL, F_ENGINE);
        case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES: return DSLOT(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, 1, KNOBS, c->knobs, &c->nknobs, 0);
        case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE: return COMPUTED(CUDNN_TYPE_INT64, 0, 1);
        case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED: return COMPUTED(CUDNN_TYPE_INT32, 0, 1);
        }
        break;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        struct bplan *p = &d->u.plan;
        switch ((int)a) {
        case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: return SLOT(CUDNN_TYPE_HANDLE, 1, 1, &p->handle, NULL, P_HANDLE);
        case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: return DSLOT(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, 1, 1, &p->cfg, NULL, P_CFG);
        case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: return COMPUTED(CUDNN_TYPE_INT64, 0, 1);
        // No intermediates: empty lists.
        case CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS: return COMPUTED(CUDNN_TYPE_INT64, 0, 0);
        case CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS: return COMPUTED(CUDNN_TYPE_INT64, 0, 0);
        }
        break;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        struct bvp *v = &d->u.vp;
        switch ((int)a) {
        case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (void)SLOT(CUDNN_TYPE_INT64, 1, MAX_VP, v->uids, &v->nuids, V_UIDS); break;
        case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (void)SLOT(CUDNN_TYPE_VOID_PTR, 1, MAX_VP, v->ptrs, &v->nptrs, V_PTRS); break;
        case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (void)SLOT(CUDNN_TYPE_VOID_PTR, 1, 1, &v->workspace, NULL, V_WS); break;
        default: goto unknown;
        }
        s->get_ok = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    default:
        break;
    }
unknown:
    return in_range(d->type, (int)a) ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
}

static size_t type_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_BOOLEAN: case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_HANDLE: case CUDNN_TYPE_INT64: case CUDNN_TYPE_DOUBLE:
    case CUDNN_TYPE_VOID_PTR: case CUDNN_TYPE_BACKEND_DESCRIPTOR: return 8;
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    default: return 4;          // float, int32 and the enums
    }
}

API cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                           cudnnBackendAttributeName_t attributeName,
                                           cudnnBackendAttributeType_t attributeType,
                                           int64_t elementCount, const void *arrayOfElements)
{
    struct bd *d = bd_of(descriptor);
    struct slot s;
    cudnnStatus_t r;

    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d || d->u.hdr.finalized || elementCount <= 0 || !arrayOfElements)
        return CUDNN_STATUS_BAD_PARAM;
    r = slot_for(d, attributeName, &s);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (!s.set_ok)
        return CUDNN_STATUS_BAD_PARAM;          // read-only
    // alpha and beta: a float or a double, kept as a double.
    if (s.type == CUDNN_TYPE_DOUBLE && attributeType == CUDNN_TYPE_FLOAT) {
        float f;
        if (elementCount != 1)
            return CUDNN_STATUS_BAD_PARAM;
        memcpy(&f, arrayOfElements, sizeof f);
        *(double *)s.p = f;
        return CUDNN_STATUS_SUCCESS;
    }
    if (attributeType != s.type)
        return CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE;
    if (elementCount < s.min || elementCount > s.max)
        return CUDNN_STATUS_BAD_PARAM;
    if (s.type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        const cudnnBackendDescriptor_t *src = arrayOfElements;
        size_t size = s.dtype == ANY_OP ? sizeof(struct bop) : body_size(s.dtype);
        // All elements are checked before any is copied.
        for (int64_t i = 0; i < elementCount; i++) {
            struct bd *e = bd_of(src[i]);
            if (!e || !of_type(e->type, s.dtype))
                return CUDNN_STATUS_BAD_PARAM;
            if (!e->u.hdr.finalized)
                return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        }
        for (int64_t i = 0; i < elementCount; i++)
            memcpy((char *)s.p + (size_t)i * size, &((struct bd *)src[i])->u, size);
    } else {
        memcpy(s.p, arrayOfElements, (size_t)elementCount * type_size(s.type));
    }
    if (s.n)
        *s.n = elementCount;
    d->u.hdr.set |= s.bit;
    return CUDNN_STATUS_SUCCESS;
}

// Copies a descriptor body into a descriptor the caller created.
static cudnnStatus_t copy_out(cudnnBackendDescriptor_t dst, cudnnBackendDescriptorType_t type,
                              const void *body)
{
    struct bd *e = bd_of(dst);

    if (!e || e->type != type)
        return CUDNN_STATUS_BAD_PARAM;
    memcpy(&e->u, body, body_size(type));
    return CUDNN_STATUS_SUCCESS;
}

// The heuristics' results for a graph, best first: engine 1 (tensor
// cores), 0, then 2 (down-converted inputs), each finalized with its knob
// choices (a tile size and a number of stages that differ by engine).
static void heuristic_results(const struct bgraph *g, struct bcfg cfg[ENGINES])
{
    static const int64_t order[ENGINES] = { 1, 0, 2 };
    memset(cfg, 0, ENGINES * sizeof *cfg);
    for (int i = 0; i < ENGINES; i++) {
        struct bcfg *c = &cfg[i];
        c->set = F_ENGINE;
        c->finalized = 1;
        c->engine.set = E_GRAPH | E_INDEX;
        c->engine.finalized = 1;
        c->engine.graph = *g;
        c->engine.index = order[i];
        c->nknobs = KNOBS;
        c->knobs[0] = (struct bknob){ K_TYPE | K_VALUE, 1, CUDNN_KNOB_TYPE_TILE_SIZE, order[i] + 1 };
        c->knobs[1] = (struct bknob){ K_TYPE | K_VALUE, 1, CUDNN_KNOB_TYPE_STAGES, 2 * order[i] + 3 };
    }
}

API cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                           cudnnBackendAttributeName_t attributeName,
                                           cudnnBackendAttributeType_t attributeType,
                                           int64_t requestedElementCount, int64_t *elementCount,
                                           void *arrayOfElements)
{
    struct bd *d = bd_of(descriptor);
    struct slot s;
    int64_t have, n;
    cudnnStatus_t r;

    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d || requestedElementCount < 0)
        return CUDNN_STATUS_BAD_PARAM;
    if (!d->u.hdr.finalized)
        return CUDNN_STATUS_NOT_INITIALIZED;
    r = slot_for(d, attributeName, &s);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (!s.get_ok)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (s.type == CUDNN_TYPE_DOUBLE && attributeType == CUDNN_TYPE_FLOAT)
        return CUDNN_STATUS_BAD_PARAM;          // alpha and beta read back as doubles only
    if (attributeType != s.type)
        return CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE;
    have = s.n ? *s.n : 1;
    if (!arrayOfElements) {
        if (elementCount)
            *elementCount = have;
        return CUDNN_STATUS_SUCCESS;
    }
    n = requestedElementCount < have ? requestedElementCount : have;
    if (s.type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        cudnnBackendDescriptor_t *dst = arrayOfElements;
        struct bcfg cfg[ENGINES];
        for (int64_t i = 0; i < n; i++) {
            struct bd *e = bd_of(dst[i]);
            if (!e || e->type != s.dtype)
                return CUDNN_STATUS_BAD_PARAM;
        }
        if (attributeName == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
            heuristic_results(&d->u.heur.graph, cfg);
            s.p = cfg;
        }
        for (int64_t i = 0; i < n; i++)
            copy_out(dst[i], s.dtype, (const char *)s.p + (size_t)i * body_size(s.dtype));
    } else {
        memcpy(arrayOfElements, s.p, (size_t)n * type_size(s.type));
    }
    if (elementCount)
        *elementCount = n;
    return CUDNN_STATUS_SUCCESS;
}

// ---- Finalize ---------------------------------------------------------------------------------

static int all_set(unsigned set, unsigned want)
{
    return (set & want) == want;
}

static cudnnStatus_t finalize_tensor(struct btensor *t)
{
    if (!all_set(t->set, T_TYPE | T_DIMS | T_STRIDES | T_UID | T_ALIGN) ||
        t->ndims != t->nstrides || t->align <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    for (int64_t i = 0; i < t->ndims; i++)
        if (t->dim[i] <= 0 || t->stride[i] <= 0)
            return CUDNN_STATUS_BAD_PARAM;
    if (t->vector_count != 1 || t->reorder != CUDNN_TENSOR_REORDERING_NONE)
        return CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; t->by_value && i < t->ndims; i++)
        if (t->dim[i] != 1)
            return CUDNN_STATUS_NOT_SUPPORTED;      // only scalars go by value
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t finalize_conv(struct bconv *c)
{
    if (!all_set(c->set, C_NSP | C_CTYPE | C_MODE | C_DIL | C_STRIDES | C_PRE | C_POST) ||
        c->nsp < 1 || c->nsp > DNN_SPATIAL_MAX || c->ndil != c->nsp ||
        c->nstrides != c->nsp || c->npre != c->nsp || c->npost != c->nsp ||
        (c->mode != CUDNN_CONVOLUTION && c->mode != CUDNN_CROSS_CORRELATION))
        return CUDNN_STATUS_BAD_PARAM;
    for (int64_t i = 0; i < c->nsp; i++)
        if (c->dil[i] < 1 || c->stride[i] < 1 || c->pre[i] < 0 || c->post[i] < 0)
            return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

static void conv_of(const struct bconv *c, struct dnn_conv *cv)
{
    memset(cv, 0, sizeof *cv);
    cv->nsp = (int)c->nsp;
    for (int i = 0; i < cv->nsp; i++) {
        cv->pre[i] = c->pre[i];
        cv->post[i] = c->post[i];
        cv->stride[i] = c->stride[i];
        cv->dil[i] = c->dil[i];
    }
    cv->flip = c->mode == CUDNN_CONVOLUTION;
}

static void view_of(const struct btensor *t, struct dnn_view *v)
{
    memset(v, 0, sizeof *v);
    v->nb = (int)t->ndims;
    v->type = t->type;
    memcpy(v->dim, t->dim, sizeof v->dim);
    memcpy(v->stride, t->stride, sizeof v->stride);
}

// Whether tensor b may stand beside y in a pointwise operation: y's shape,
// or a scalar (every dimension 1).
static int fits_or_scalar(const struct btensor *b, const struct btensor *y)
{
    int scalar = 1, same = b->ndims == y->ndims;
    for (int64_t i = 0; i < b->ndims; i++) {
        scalar &= b->dim[i] == 1;
        same &= i < y->ndims && b->dim[i] == y->dim[i];
    }
    return scalar || same;
}

// x and y of one shape, b of that shape or a scalar; float or double data;
// add or multiply.  Virtual tensors are not computed.
static cudnnStatus_t finalize_pointwise(struct bop *o)
{
    if (!all_set(o->set, O_X | O_W | O_Y | O_PW))
        return CUDNN_STATUS_BAD_PARAM;
    if (o->x.is_virtual || o->w.is_virtual || o->y.is_virtual || o->x.by_value ||
        o->y.by_value)
        return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
    if (o->pw.mode != CUDNN_POINTWISE_ADD && o->pw.mode != CUDNN_POINTWISE_MUL)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (o->x.ndims != o->y.ndims || !fits_or_scalar(&o->w, &o->y))
        return CUDNN_STATUS_BAD_PARAM;
    for (int64_t i = 0; i < o->x.ndims; i++)
        if (o->x.dim[i] != o->y.dim[i])
            return CUDNN_STATUS_BAD_PARAM;
    if (o->x.type != o->y.type || o->w.type != o->y.type || !dnn_esize(o->x.type))
        return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
    return CUDNN_STATUS_SUCCESS;
}

// The shapes of x, w and y must fit the convolution; virtual tensors and
// types other than float and double are not computed.
static cudnnStatus_t finalize_conv_op(struct bop *o)
{
    struct dnn_conv cv;
    struct dnn_view x, w, y;
    int64_t out[DNN_DIM_MAX];
    cudnnStatus_t r;

    if (!all_set(o->set, O_X | O_W | O_Y | O_CONV))
        return CUDNN_STATUS_BAD_PARAM;
    if (o->x.is_virtual || o->w.is_virtual || o->y.is_virtual || o->x.by_value ||
        o->w.by_value || o->y.by_value)
        return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
    conv_of(&o->conv, &cv);
    view_of(&o->x, &x);
    view_of(&o->w, &w);
    view_of(&o->y, &y);
    r = dnn_conv_out(&cv, x.nb, x.dim, w.nb, w.dim, out);
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    if (y.nb != x.nb)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < y.nb; i++)
        if (y.dim[i] != out[i])
            return CUDNN_STATUS_BAD_PARAM;
    if (x.type != w.type || x.type != y.type || !dnn_esize(x.type) ||
        (o->conv.ctype != CUDNN_DATA_FLOAT && o->conv.ctype != CUDNN_DATA_DOUBLE))
        return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
    return dnn_view_ok(&x) == CUDNN_STATUS_SUCCESS && dnn_view_ok(&w) == CUDNN_STATUS_SUCCESS &&
                   dnn_view_ok(&y) == CUDNN_STATUS_SUCCESS
               ? CUDNN_STATUS_SUCCESS
               : CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
}

static cudnnStatus_t finalize_op(struct bop *o)
{
    return o->kind == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ? finalize_pointwise(o)
                                                                  : finalize_conv_op(o);
}

API cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    struct bd *d = bd_of(descriptor);
    cudnnStatus_t r = CUDNN_STATUS_SUCCESS;

    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d || d->u.hdr.finalized)
        return CUDNN_STATUS_BAD_PARAM;
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        r = finalize_tensor(&d->u.tensor);
        break;
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
        r = finalize_conv(&d->u.conv);
        break;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        r = finalize_op(&d->u.op);
        break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        if (!all_set(d->u.pw.set, W_MODE))
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
        if (!all_set(d->u.knob.set, K_TYPE | K_VALUE))
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        if (!all_set(d->u.graph.set, G_OPS))
            r = CUDNN_STATUS_BAD_PARAM;
        else if ((d->u.graph.set & G_HANDLE) && !dnn_handle(d->u.graph.handle))
            r = CUDNN_STATUS_BAD_PARAM;
        else if (d->u.graph.nops != 1 || d->u.graph.dynamic)
            r = CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;     // fusions: not computed
        break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        if (!all_set(d->u.heur.set, H_GRAPH) || (int)d->u.heur.mode < CUDNN_HEUR_MODE_INSTANT ||
            (int)d->u.heur.mode >= CUDNN_HEUR_MODES_COUNT)
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
        if (!all_set(d->u.engine.set, E_GRAPH | E_INDEX))
            r = CUDNN_STATUS_BAD_PARAM;
        else if (d->u.engine.index < 0 || d->u.engine.index >= ENGINES)
            r = CUDNN_STATUS_NOT_SUPPORTED;
        break;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
        if (!all_set(d->u.cfg.set, F_ENGINE))
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        if (!all_set(d->u.plan.set, P_CFG))
            r = CUDNN_STATUS_BAD_PARAM;
        else if ((d->u.plan.set & P_HANDLE) && !dnn_handle(d->u.plan.handle))
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        if (!all_set(d->u.vp.set, V_UIDS) || d->u.vp.nuids != d->u.vp.nptrs)
            r = CUDNN_STATUS_BAD_PARAM;
        break;
    default:
        r = CUDNN_STATUS_NOT_SUPPORTED;
        break;
    }
    if (r == CUDNN_STATUS_SUCCESS)
        d->u.hdr.finalized = 1;
    return r;
}

// ---- Execute ----------------------------------------------------------------------------------

static void *lookup(const struct bvp *v, int64_t uid)
{
    for (int64_t i = 0; i < v->nuids; i++)
        if (v->uids[i] == uid)
            return v->ptrs[i];
    return NULL;
}

static cudnnStatus_t run_conv(const struct dnn_handle *h, const struct bop *o,
                              const struct bvp *vp)
{
    struct dnn_conv cv;
    struct dnn_view xv, wv, yv;
    void *x = lookup(vp, o->x.uid), *w = lookup(vp, o->w.uid), *y = lookup(vp, o->y.uid);
    if (!x || !w || !y)
        return CUDNN_STATUS_BAD_PARAM;
    conv_of(&o->conv, &cv);
    view_of(&o->x, &xv);
    view_of(&o->w, &wv);
    view_of(&o->y, &yv);
    return dnn_conv_forward(h->stream, &cv, o->alpha, &xv, x, &wv, w, o->beta, &yv, y);
}

// y = x + b or x * b.  A b passed by value is read at its host address, as
// cuDNN reads it; any other b is device memory of y's shape or a scalar.
static cudnnStatus_t run_pointwise(const struct dnn_handle *h, const struct bop *o,
                                   const struct bvp *vp)
{
    struct dnn_view xv, bv, yv;
    void *x = lookup(vp, o->x.uid), *b = lookup(vp, o->w.uid), *y = lookup(vp, o->y.uid);
    double *xs = NULL, *bs = NULL, scalar = 0;
    cudnnStatus_t r;
    if (!x || !b || !y)
        return CUDNN_STATUS_BAD_PARAM;
    view_of(&o->x, &xv);
    view_of(&o->w, &bv);
    view_of(&o->y, &yv);
    r = dnn_load(h->stream, &xv, x, &xs);
    if (r == CUDNN_STATUS_SUCCESS && o->w.by_value)
        r = dnn_scalar(o->w.type, b, &scalar);
    else if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_load(h->stream, &bv, b, &bs);
    int64_t n = dnn_count(&yv), nb = dnn_count(&bv);
    for (int64_t i = 0; r == CUDNN_STATUS_SUCCESS && i < n; i++) {
        double bi = bs ? bs[nb == n ? i : 0] : scalar;
        xs[i] = o->pw.mode == CUDNN_POINTWISE_MUL ? xs[i] * bi : xs[i] + bi;
    }
    if (r == CUDNN_STATUS_SUCCESS)
        r = dnn_store(h->stream, &yv, y, xs, 1, 0);
    free(xs);
    free(bs);
    return r;
}

API cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                      cudnnBackendDescriptor_t variantPack)
{
    struct dnn_handle *h = dnn_handle(handle);
    struct bd *p = bd_of(executionPlan), *v = bd_of(variantPack);
    const struct bgraph *g;
    cudnnStatus_t r;

    if (!h || !p || !v || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
        v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM;
    if (!p->u.plan.finalized || !v->u.vp.finalized)
        return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    r = dnn_init();
    if (r != CUDNN_STATUS_SUCCESS)
        return r;
    g = &p->u.plan.cfg.engine.graph;
    for (int64_t i = 0; i < g->nops; i++) {
        r = g->ops[i].kind == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR
                ? run_pointwise(h, &g->ops[i], &v->u.vp)
                : run_conv(h, &g->ops[i], &v->u.vp);
        if (r != CUDNN_STATUS_SUCCESS)
            return r;
    }
    return CUDNN_STATUS_SUCCESS;
}
