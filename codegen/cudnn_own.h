/* rgpu's own procedures of libcudnn (codegen/cudnn.ann, "procedures"):
 * requests of the wire that are no cuDNN function, declared as C functions
 * so that the one codec marshals them (see codegen/cudart_own.h for the
 * conventions). */
#ifndef RGPU_CUDNN_OWN_H
#define RGPU_CUDNN_OWN_H

#include <cudnn_graph.h>
#include <stddef.h>
#include <stdint.h>

/* ---- backend descriptors named by the client --------------------------------------
 * A backend descriptor is the program's handle to an object of the client
 * (stubs/cudnn_backend.c), and that handle value, `name`, is what travels:
 * the session keeps each name with the real descriptor it made for it
 * (daemon/cudnn_backend.c, the named handles of daemon/owned_handles.h), so
 * that making, setting and destroying descriptors need no reply.  A name
 * the session does not hold is refused with CUDNN_STATUS_BAD_PARAM; name 0
 * is NULL, for cuDNN's own answer to a NULL descriptor.  A request the
 * client sent without waiting says so (deferred 1): a failure of cuDNN's is
 * then kept with the descriptor and returned by the next request that waits
 * and names it (its finalize, a get, an execution of it), instead of
 * running that request. */

/* cudnnBackendCreateDescriptor of type, named name. */
cudnnStatus_t rgpu_cudnn_backend_create(uint64_t name, int64_t type, int deferred);
/* cudnnBackendDestroyDescriptor; a failure kept for the descriptor comes
 * back here if nothing reported it yet. */
cudnnStatus_t rgpu_cudnn_backend_destroy(uint64_t name);
/* cudnnBackendInitialize. */
cudnnStatus_t rgpu_cudnn_backend_initialize(uint64_t name);
/* cudnnBackendSetAttribute: count elements of attribute type `type`, size
 * bytes in values.  Descriptors among them are names; handles must be the
 * session's cuDNN handles and pointers its device memory. */
cudnnStatus_t rgpu_cudnn_backend_set(uint64_t name, int64_t attr, int64_t type, int64_t count,
                                     const void *values, size_t size, int deferred);
/* What cuDNN answered to the gets of a finalized descriptor, which never
 * change (stubs/cudnn_backend.c answers the program's gets from them).  A
 * description lists, for each attribute of rgpu_cudnn_described_attrs
 * (common/cudnn_types.c) of the descriptor and of the descriptors cuDNN
 * fills from it (an engine config's engine...), the answer to a count query
 * (no array) and to a read of `requested` elements.  Node 0 is the
 * descriptor described; a descriptor attribute's elements are nodes
 * `at`, at + 1, ... (RGPU_CUDNN_UNDESCRIBED: not described, for want of
 * room); other values are count elements at byte `at` of the
 * description's bytes. */
struct rgpu_cudnn_answer {
    int32_t node, attr, type, status, null_status, pad;
    int64_t requested, count, null_count;
    uint64_t at;
};
#define RGPU_CUDNN_UNDESCRIBED UINT64_MAX

/* An attribute that descriptions hold (common/cudnn_types.c): of
 * descriptors of type desc_type, read as type, at most max elements; the
 * elements of a descriptor attribute are described in turn, as
 * descriptors of type child. */
struct rgpu_cudnn_described {
    int32_t desc_type, attr, type;
    int64_t max;
    int32_t child;
};

/* cudnnBackendFinalize; when it succeeds and max_answers is not 0, the
 * description of what was finalized (*nanswers answers). */
cudnnStatus_t rgpu_cudnn_backend_finalize(uint64_t name, struct rgpu_cudnn_answer *answers,
                                          size_t max_answers, size_t *nanswers, void *bytes,
                                          size_t max_bytes);
/* The description of a finalized descriptor alone. */
cudnnStatus_t rgpu_cudnn_describe(uint64_t name, struct rgpu_cudnn_answer *answers,
                                  size_t max_answers, size_t *nanswers, void *bytes,
                                  size_t max_bytes);
/* cudnnBackendGetAttribute.  array 0: the program passed no array (a count
 * query).  Descriptor attributes are read into the descriptors named in
 * fill (nfill: requested of them); others into values (size: requested
 * elements' bytes). */
cudnnStatus_t rgpu_cudnn_backend_get(uint64_t name, int64_t attr, int64_t type,
                                     int64_t requested, int64_t *count, int array,
                                     const uint64_t *fill, size_t nfill, void *values,
                                     size_t size);

/* One attribute of a variant pack kept on the client: count elements of
 * the cuDNN attribute type `type`, at byte `offset` of the request's
 * bytes. */
struct rgpu_cudnn_pack_attr {
    int64_t name, type, count;
    uint64_t offset;
};

/* The value of a tensor passed by value (CUDNN_ATTR_TENSOR_IS_BY_VALUE),
 * whose variant pack pointer is a host address: its bytes, for element
 * `index` of the pack's data pointers.  rgpud keeps them in a zeroed slot
 * of RGPU_CUDNN_VALUE_MAX bytes of its own and points the pack there. */
#define RGPU_CUDNN_VALUE_MAX 64
/* Values one execution carries at most. */
#define RGPU_CUDNN_VALUES_MAX 32
struct rgpu_cudnn_value {
    uint64_t index, size;
    unsigned char bytes[RGPU_CUDNN_VALUE_MAX];
};

/* cudnnBackendExecute of the plan named plan with a variant pack the client
 * kept (stubs/cudnn_backend.c): the server makes the pack from the
 * attributes and the values, runs the plan with it and destroys it. */
cudnnStatus_t rgpu_cudnn_execute(cudnnHandle_t handle, uint64_t plan,
                                 const struct rgpu_cudnn_pack_attr *attrs, size_t nattrs,
                                 const void *bytes, size_t nbytes,
                                 const struct rgpu_cudnn_value *values, size_t nvalues);

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
