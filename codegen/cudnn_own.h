/* rgpu's own procedures of libcudnn (codegen/cudnn.ann, "procedures"):
 * requests of the wire that are no cuDNN function, declared as C functions
 * so that the one codec marshals them (see codegen/cudart_own.h for the
 * conventions). */
#ifndef RGPU_CUDNN_OWN_H
#define RGPU_CUDNN_OWN_H

#include <cudnn_graph.h>
#include <stddef.h>
#include <stdint.h>

/* One attribute of a variant pack kept on the client: count elements of
 * the cuDNN attribute type `type`, at byte `offset` of the request's
 * bytes. */
struct rgpu_cudnn_pack_attr {
    int64_t name, type, count;
    uint64_t offset;
};

/* cudnnBackendExecute of plan with a variant pack the client kept
 * (stubs/cudnn_variant_pack.c, daemon/hand_cudnn.c): the server makes the
 * pack from the attributes, runs the plan with it and destroys it. */
cudnnStatus_t rgpu_cudnn_execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                 const struct rgpu_cudnn_pack_attr *attrs, size_t nattrs,
                                 const void *bytes, size_t nbytes);

/* cudnnGetVersion and cudnnGetMaxDeviceVersion of the server's cuDNN, asked
 * once (stubs/cudnn_hand.c): a program compares the runtime version with
 * the one it was built for, and must see the library that runs its work.
 * A server cuDNN without cudnnGetMaxDeviceVersion answers 0 for it. */
cudnnStatus_t rgpu_cudnn_versions(size_t *version, size_t *max_device_version);

/* cudnnGetLastErrorString of the server thread that serves this client
 * thread (cuDNN keeps its last message per thread; stubs/cudnn_hand.c). */
cudnnStatus_t rgpu_cudnn_last_error(char *message, size_t max_size);

/* The client's cuDNN callback mask (cudnnSetCallback): rgpud's callback
 * sends the messages of that mask to the client (stubs/cudnn_logger.c
 * through common/rgpu_liblog.c; daemon/liblog.c). */
cudnnStatus_t rgpu_cudnn_log_settings(unsigned int mask);

#endif
