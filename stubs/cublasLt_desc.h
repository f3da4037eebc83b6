/* cuBLASLt descriptors on the client (stubs/cublasLt_desc.c).
 *
 * Matmul descriptors, matrix layouts and preferences are client objects:
 * creating, setting and destroying them costs no round trip.  A call that
 * needs them on the server acquires server-side descriptors of the same
 * content (kind, create parameters, attributes in the order last set),
 * made once and kept by content. */
#ifndef RGPU_CUBLASLT_DESC_H
#define RGPU_CUBLASLT_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "cublasLt_own.h"       /* enum rgpu_lt_kind */
#include "rgpu_lt_pointers.h"

struct cc_entry;

/* The most descriptors one call takes: cublasLtMatmulAlgoGetHeuristic's
 * operation descriptor, four layouts and the preference. */
#define LT_MAX_USE 6

/* Server-side descriptors acquired for one call, pinned (never evicted)
 * until released. */
struct lt_use {
    unsigned n;
    uint64_t handle[LT_MAX_USE];        /* 0 for a NULL descriptor */
    struct cc_entry *entry[LT_MAX_USE];
    /* Status of an earlier asynchronous cuBLASLt call that failed, which
     * the server reported with the descriptors: the call returns it. */
    int deferred;
};

/* Acquire the server-side descriptors for objs[0..n-1] (of kinds
 * kinds[i]; NULL stays NULL), making the missing ones with one request.
 * Returns 0, or the status for the call: CUBLAS_STATUS_INVALID_VALUE for
 * something that is no live descriptor of its kind, the library's status
 * when making one failed, or a transport status.  On failure nothing
 * stays acquired. */
int lt_acquire(const void *const *objs, const enum rgpu_lt_kind *kinds, unsigned n,
               struct lt_use *use);
void lt_release(struct lt_use *use);

/* The content of a live descriptor of kind `kind` (its identity for caches
 * of answers); -1 when obj is not one. */
int lt_content(const void *obj, enum rgpu_lt_kind kind, const unsigned char **bytes,
               size_t *len);

/* The pointer attributes set on matmul descriptor op (a client object),
 * in the order set: attrs[i] and values[i], at most RGPU_LT_NPOINTERS.
 * Their values are not part of the content (cublasLt_desc.c says why): a
 * call that takes op sends them along. */
unsigned lt_pointers(const void *op, uint32_t *attrs, uint64_t *values);

/* Called (in cublasLt_hand.c) when a server-side matmul descriptor is made
 * and when it is destroyed: alpha and beta travel by its pointer mode and
 * scale type. */
void lt_matmul_desc_made(uint64_t handle, int32_t scale_type, int32_t pointer_mode);
void lt_matmul_desc_gone(uint64_t handle);

#endif
