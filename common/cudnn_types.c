/* Element sizes of cuDNN backend attribute values, by cudnnBackendAttributeType_t:
 * cudnnBackendSetAttribute/GetAttribute carry arrays whose element type is
 * an argument, so both ends of the wire need this table (it sizes the
 * buffers; 0 refuses an unknown type rather than guess). */
#include <stddef.h>
#include <stdint.h>

#include <cudnn_graph.h>

#include "cudnn_own.h"

uint32_t rgpu_cudnn_type_size(int type);

uint32_t rgpu_cudnn_type_size(int type)
{
    switch (type) {
    case CUDNN_TYPE_BOOLEAN:
    case CUDNN_TYPE_CHAR:
        return 1;
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return 8;
    case CUDNN_TYPE_FRACTION:
        return sizeof(cudnnFraction_t);
    case CUDNN_TYPE_FLOAT:
    case CUDNN_TYPE_INT32:
    case CUDNN_TYPE_DATA_TYPE:
    case CUDNN_TYPE_CONVOLUTION_MODE:
    case CUDNN_TYPE_HEUR_MODE:
    case CUDNN_TYPE_KNOB_TYPE:
    case CUDNN_TYPE_NAN_PROPOGATION:
    case CUDNN_TYPE_NUMERICAL_NOTE:
    case CUDNN_TYPE_LAYOUT_TYPE:
    case CUDNN_TYPE_ATTRIB_NAME:
    case CUDNN_TYPE_POINTWISE_MODE:
    case CUDNN_TYPE_GENSTATS_MODE:
    case CUDNN_TYPE_BN_FINALIZE_STATS_MODE:
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE:
    case CUDNN_TYPE_BEHAVIOR_NOTE:
    case CUDNN_TYPE_TENSOR_REORDERING_MODE:
    case CUDNN_TYPE_RESAMPLE_MODE:
    case CUDNN_TYPE_PADDING_MODE:
    case CUDNN_TYPE_SIGNAL_MODE:
    case CUDNN_TYPE_NORM_MODE:
    case CUDNN_TYPE_NORM_FWD_PHASE:
    case CUDNN_TYPE_RNG_DISTRIBUTION:
    case CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE:
        return 4;       /* enums */
    default:
        return 0;
    }
}

/* The attributes a variant pack takes (stubs/cudnn_variant_pack.c keeps
 * them on the client, daemon/hand_cudnn.c builds the pack from them). */
int rgpu_cudnn_is_pack_attribute(int64_t name);

int rgpu_cudnn_is_pack_attribute(int64_t name)
{
    return name == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS ||
           name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS ||
           name == CUDNN_ATTR_VARIANT_PACK_INTERMEDIATES ||
           name == CUDNN_ATTR_VARIANT_PACK_WORKSPACE ||
           name == CUDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS ||
           name == CUDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES ||
           name == CUDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES;
}

/* The storage size of one element of a cudnnDataType_t, for host values
 * whose type a call names (an RNN data descriptor's padding fill, which
 * cuDNN reads as the descriptor's own data type).  0 for the unknown. */
uint32_t rgpu_cudnn_data_type_size(int type);

uint32_t rgpu_cudnn_data_type_size(int type)
{
    switch (type) {
    case CUDNN_DATA_DOUBLE:
        return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
        return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
        return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
        return 1;
    default:
        return 0;
    }
}

/* The bytes of one element of a cudnnDataType_t, for the value of a tensor
 * passed by value (the client reads it at the host address the program
 * gave, stubs/cudnn_backend.c).  Sub-byte types take a whole byte; 0 for
 * the unknown. */
uint32_t rgpu_cudnn_value_size(int dtype);

uint32_t rgpu_cudnn_value_size(int dtype)
{
    switch (dtype) {
    case CUDNN_DATA_COMPLEX_FP64:
        return 16;
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
    case CUDNN_DATA_COMPLEX_FP32:
        return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_UINT32:
        return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
        return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2:
    case CUDNN_DATA_FP8_E8M0:
    case CUDNN_DATA_FP4_E2M1:
    case CUDNN_DATA_INT4:
    case CUDNN_DATA_UINT4:
        return 1;
    default:
        return 0;
    }
}

/* The attributes of each descriptor type that rgpud reads when it
 * describes a finalized descriptor (codegen/cudnn_own.h, "description"):
 * what cudnn-frontend reads of heuristics, engine configs, engines, knob
 * choices, plans and operation graphs. */
static const struct rgpu_cudnn_described described[] = {
    { CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_RESULTS,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 128, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR },
    { CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, CUDNN_BACKEND_ENGINE_DESCRIPTOR },
    { CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR },
    { CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
      1, 0 },
    { CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED,
      CUDNN_TYPE_INT32, 1, 0 },
    { CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, 0 },
    { CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
      CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, 0 },
    { CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
      CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, 0 },
    { CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
      CUDNN_TYPE_KNOB_TYPE, 1, 0 },
    { CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64,
      1, 0 },
    { CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
      CUDNN_TYPE_INT64, 1, 0 },
    { CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR },
    { CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
      CUDNN_TYPE_INT64, 1, 0 },
};

/* Entry i of the table (NULL past its end). */
const struct rgpu_cudnn_described *rgpu_cudnn_described_attr(size_t i);

const struct rgpu_cudnn_described *rgpu_cudnn_described_attr(size_t i)
{
    return i < sizeof described / sizeof described[0] ? &described[i] : NULL;
}

/* Whether rgpud describes attribute attr of descriptors of type desc_type. */
int rgpu_cudnn_is_described(int desc_type, int64_t attr);

int rgpu_cudnn_is_described(int desc_type, int64_t attr)
{
    for (size_t i = 0; i < sizeof described / sizeof described[0]; i++)
        if (described[i].desc_type == desc_type && described[i].attr == attr)
            return 1;
    return 0;
}
