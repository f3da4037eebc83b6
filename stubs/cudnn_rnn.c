/* cuDNN RNN calls that the annotations cannot say whole.
 *
 * Everything else of the RNN API is generated (codegen/cudnn.ann): RNN and
 * dropout descriptors are server handles, sequence length arrays travel
 * as buffers, the weight, work and reserve spaces are checked device
 * ranges.  The tensor descriptors cudnnGetRNNWeightParams fills get a
 * server descriptor of their own first (stubs/cudnn_tensor.c). */
#include "rgpu_client.h"
#include "cudnn_procs.h"

#include <cudnn.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)

uint32_t rgpu_cudnn_data_type_size(int type);   /* common/cudnn_types.c */

/* The padding fill is one value of the descriptor's data type, which the
 * call itself returns: the server's answer arrives in an eight-byte
 * buffer and only as many bytes as that type holds reach the program. */
#undef cudnnGetRNNDataDescriptor
RGPU_EXPORT cudnnStatus_t cudnnGetRNNDataDescriptor(cudnnRNNDataDescriptor_t rnnDataDesc,
                                                    cudnnDataType_t *dataType,
                                                    cudnnRNNDataLayout_t *layout,
                                                    int *maxSeqLength, int *batchSize,
                                                    int *vectorSize, int arrayLengthRequested,
                                                    int seqLengthArray[], void *paddingFill)
{
    unsigned char fill[8] = { 0 };
    void *fill_out = paddingFill ? fill : NULL;
    const void *argv[] = { &rnnDataDesc, &dataType, &layout, &maxSeqLength, &batchSize,
                           &vectorSize, &arrayLengthRequested, &seqLengthArray, &fill_out };
    int rc = rgpu_call(LIB, RGPU_CUDNN_cudnnGetRNNDataDescriptor, argv);
    /* cuDNN answers BAD_PARAM for a NULL dataType: success means it is set. */
    if (rc == CUDNN_STATUS_SUCCESS && paddingFill && dataType) {
        uint32_t n = rgpu_cudnn_data_type_size((int)*dataType);
        memcpy(paddingFill, fill, n <= sizeof fill ? n : sizeof fill);
    }
    return (cudnnStatus_t)rc;
}
