/* The size of one scalar (alpha, beta) of a cuBLAS compute type: the
 * grouped batched Ex gemms carry arrays of them, one per group, so both
 * ends of the wire need it to size the buffers.  0 refuses an unknown
 * compute type rather than guess. */
#include <stdint.h>

#include <cublas_api.h>

uint32_t rgpu_cublas_compute_scalar_size(int type);

uint32_t rgpu_cublas_compute_scalar_size(int type)
{
    switch (type) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return 2;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
        return 4;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        return 8;
    default:
        return 0;
    }
}
