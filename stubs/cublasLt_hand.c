/* Hand-written parts of libcublasLt: the pointer mode and scale type of
 * each matmul and transform descriptor (which decide whether alpha and beta
 * are host values or device pointers, and how large), and what is answered
 * on the client.  Everything else is generated from codegen/cublasLt.ann. */
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "cublasLt_procs.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <string.h>

#define LIB (&rgpu_cublasLt_lib)

/* ---- descriptors the client knows the scalars of --------------------------------- */

/* Per matmul or transform descriptor: its pointer mode and scale type. */
static struct rgpu_keyed modes = RGPU_KEYED_INIT;        /* cublasLtPointerMode_t */
static struct rgpu_keyed scale_types = RGPU_KEYED_INIT;  /* cudaDataType */

static void remember_desc(const void *d, int32_t scale_type)
{
    rgpu_keyed_set(&modes, d, CUBLASLT_POINTER_MODE_HOST);
    rgpu_keyed_set(&scale_types, d, scale_type);
}

static void forget_desc(const void *d)
{
    rgpu_keyed_remove(&modes, d);
    rgpu_keyed_remove(&scale_types, d);
}

/* The descriptor a scalar follows: annotated type=<descriptor>. */
static const void *desc_of(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int idx = proc->params[param].len_arg;
    return idx < 0 ? NULL : *(const void *const *)argv[idx];
}

/* alpha is on the host only in host mode; beta also when the mode says
 * "alpha device vector, beta host". */
static int scalar_on_host(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int64_t mode;
    if (!rgpu_keyed_get(&modes, desc_of(proc, param, argv), &mode) ||
        mode == CUBLASLT_POINTER_MODE_HOST)
        return 1;
    return strcmp(proc->params[param].name, "beta") == 0 &&
           mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
}

static uint32_t scale_bytes(int type)
{
    switch (type) {
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_8I: case CUDA_R_8U: return 1;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_C_16F: case CUDA_C_16BF: return 4;
    case CUDA_R_64F: case CUDA_C_32F: return 8;
    case CUDA_C_64F: return 16;
    default: return 16;
    }
}

static uint32_t scalar_size(const struct rgpu_proc *proc, unsigned param, const void *const *argv)
{
    int64_t type;
    return rgpu_keyed_get(&scale_types, desc_of(proc, param, argv), &type)
               ? scale_bytes((int)type) : 16;
}

static const struct rgpu_scalar_policy lt_scalars = { scalar_on_host, scalar_size, NULL };

__attribute__((constructor)) static void register_policy(void)
{
    rgpu_register_scalar_policy(LIB, &lt_scalars);
}

#undef cublasLtMatmulDescCreate
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                                    cublasComputeType_t computeType,
                                                    cudaDataType_t scaleType)
{
    const void *argv[] = { &matmulDesc, &computeType, &scaleType };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatmulDescCreate, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && matmulDesc)
        remember_desc(*matmulDesc, scaleType);
    return rc;
}

#undef cublasLtMatmulDescDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    const void *argv[] = { &matmulDesc };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatmulDescDestroy, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        forget_desc(matmulDesc);
    return rc;
}

/* A successful SetAttribute of the pointer mode or scale type: record it. */
static void note_attribute(const void *desc, int is_mode, int is_scale, const void *buf,
                           size_t size)
{
    int32_t v;
    if ((is_mode || is_scale) && buf && size == sizeof v) {
        memcpy(&v, buf, sizeof v);
        rgpu_keyed_set(is_mode ? &modes : &scale_types, desc, v);
    }
}

#undef cublasLtMatmulDescSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          const void *buf, size_t sizeInBytes)
{
    const void *argv[] = { &matmulDesc, &attr, &buf, &sizeInBytes };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatmulDescSetAttribute, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        note_attribute(matmulDesc, attr == CUBLASLT_MATMUL_DESC_POINTER_MODE,
                       attr == CUBLASLT_MATMUL_DESC_SCALE_TYPE, buf, sizeInBytes);
    return rc;
}

#undef cublasLtMatrixTransformDescCreate
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescCreate(
    cublasLtMatrixTransformDesc_t *transformDesc, cudaDataType scaleType)
{
    const void *argv[] = { &transformDesc, &scaleType };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescCreate, argv);
    if (rc == CUBLAS_STATUS_SUCCESS && transformDesc)
        remember_desc(*transformDesc, scaleType);
    return rc;
}

#undef cublasLtMatrixTransformDescDestroy
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescDestroy(
    cublasLtMatrixTransformDesc_t transformDesc)
{
    const void *argv[] = { &transformDesc };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescDestroy, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        forget_desc(transformDesc);
    return rc;
}

#undef cublasLtMatrixTransformDescSetAttribute
RGPU_EXPORT cublasStatus_t cublasLtMatrixTransformDescSetAttribute(
    cublasLtMatrixTransformDesc_t transformDesc, cublasLtMatrixTransformDescAttributes_t attr,
    const void *buf, size_t sizeInBytes)
{
    const void *argv[] = { &transformDesc, &attr, &buf, &sizeInBytes };
    int rc = rgpu_call(LIB, RGPU_CUBLASLT_cublasLtMatrixTransformDescSetAttribute, argv);
    if (rc == CUBLAS_STATUS_SUCCESS)
        note_attribute(transformDesc, attr == CUBLASLT_MATRIX_TRANSFORM_DESC_POINTER_MODE,
                       attr == CUBLASLT_MATRIX_TRANSFORM_DESC_SCALE_TYPE, buf, sizeInBytes);
    return rc;
}

/* ---- answered on the client ---------------------------------------------------------- */

RGPU_EXPORT const char *cublasLtGetStatusName(cublasStatus_t status)
{
    const char *s = rgpu_cublasLt_error_name(status);
    return s ? s : "CUBLAS_STATUS_UNKNOWN";
}

RGPU_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status)
{
    const char *s = rgpu_server_error_string(LIB, status);
    return s ? s : cublasLtGetStatusName(status);
}

/* The version of the API this stub implements (the headers'): a program
 * checks it against what it was built for. */
RGPU_EXPORT size_t cublasLtGetVersion(void)
{
    return CUBLAS_VERSION;     /* cuBLASLt ships with cuBLAS, same version */
}

RGPU_EXPORT size_t cublasLtGetCudartVersion(void)
{
    return CUDART_VERSION;
}
