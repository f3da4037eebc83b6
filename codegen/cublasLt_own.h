/* rgpu's own procedures of libcublasLt (codegen/cublasLt.ann,
 * "procedures"): requests of the wire that are no cuBLASLt function,
 * declared as C functions so that the one codec marshals them (see
 * codegen/cudart_own.h for the conventions). */
#ifndef RGPU_CUBLASLT_OWN_H
#define RGPU_CUBLASLT_OWN_H

#include <cublasLt.h>
#include <stddef.h>
#include <stdint.h>

/* The client's cuBLASLt log mask (cublasLtLoggerSetMask and its kin):
 * rgpud's callback sends the messages of that mask to the client
 * (stubs/cublasLt_logger.c through common/rgpu_liblog.c; daemon/liblog.c). */
cublasStatus_t rgpu_cublasLt_log_settings(int mask);

/* ---- descriptors kept by content: stubs/cublasLt_desc.c, daemon/hand_cublasLt.c ---
 * Matmul descriptors, matrix layouts and preferences are client objects,
 * kept as their content:
 *
 *     kind (enum rgpu_lt_kind, 1 byte), number of create parameters (1),
 *     the parameters (int64 each), then one record per attribute set, in
 *     the order last set: id (u32), size (u32), the value's bytes.
 *
 * A call that needs them made on the server sends the contents. */
enum rgpu_lt_kind {
    RGPU_LT_MATMUL_DESC = 0,    /* params: computeType, scaleType */
    RGPU_LT_LAYOUT = 1,         /* params: type, rows, cols, ld */
    RGPU_LT_PREFERENCE = 2,     /* params: none */
};
/* A server descriptor the client's cache lets go. */
struct rgpu_lt_victim {
    uint64_t kind;              /* enum rgpu_lt_kind, as it was made */
    uint64_t handle;
};
/* One request: destroy the victims (descriptors this procedure made, and
 * no other), then make one descriptor per content (ncontents of them back
 * to back in contents, the length of each in lengths) and set its
 * attributes in order, a matmul descriptor's pointer attributes to NULL
 * (they travel with each call: below).  keep 0 destroys each again (a
 * check that an attribute is accepted).  status[i] and handles[i] say how
 * each went; the call's own status is success once it ran, so that the
 * reply's deferred status is an earlier call's. */
cublasStatus_t rgpu_lt_materialize(const struct rgpu_lt_victim *victims, size_t nvictims,
                                   const uint32_t *lengths, size_t ncontents,
                                   const void *contents, size_t contents_size, int keep,
                                   int32_t *status, uint64_t *handles);

/* ---- calls that take a matmul descriptor: stubs/cublasLt_hand.c,
 * daemon/hand_cublasLt.c --------------------------------------------------------
 * cublasLtMatmul, cublasLtMatmulAlgoGetHeuristic and cublasLtMatmulAlgoCheck
 * with the descriptor's pointer attributes sent along, one device pointer
 * per slot of common/rgpu_lt_pointers.h (0: not set), which the server
 * sets on its descriptor for the call alone.  A descriptor without any
 * goes through the generated procedure itself. */
#define RGPU_LT_POINTER_PARAMS                                                             \
    const void *bias, const void *epilogue_aux, const void *a_scale, const void *b_scale,  \
        const void *c_scale, const void *d_scale, const void *amax_d,                      \
        const void *epilogue_aux_scale, const void *epilogue_aux_amax,                     \
        const void *d_out_scale
cublasStatus_t rgpu_lt_matmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream, RGPU_LT_POINTER_PARAMS);
cublasStatus_t rgpu_lt_heuristic(cublasLtHandle_t lightHandle,
                                 cublasLtMatmulDesc_t operationDesc,
                                 cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                 cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                 cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                 cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                 int *returnAlgoCount, RGPU_LT_POINTER_PARAMS);
cublasStatus_t rgpu_lt_algo_check(cublasLtHandle_t lightHandle,
                                  cublasLtMatmulDesc_t operationDesc,
                                  cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                  cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                  const cublasLtMatmulAlgo_t *algo,
                                  cublasLtMatmulHeuristicResult_t *result,
                                  RGPU_LT_POINTER_PARAMS);

#endif
