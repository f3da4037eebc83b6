/* The matmul descriptor attributes that hold device pointers, which PyTorch
 * points at new memory every step (a bias cast under AMP).  They are not
 * part of a descriptor's content as the client keeps it
 * (stubs/cublasLt_desc.c): the content holds their alignment class
 * instead, the server makes its descriptors with NULL there, and the
 * values travel with each call that uses the descriptor, one parameter per
 * slot (rgpu_lt_matmul and its kin, codegen/cublasLt_own.h), checked by
 * the codec as device pointers and set on the server's descriptor for that
 * call alone (daemon/hand_cublasLt.c). */
#ifndef RGPU_LT_POINTERS_H
#define RGPU_LT_POINTERS_H

#include <stdint.h>

#define RGPU_LT_NPOINTERS 10

/* The slot 0..RGPU_LT_NPOINTERS-1 of a pointer attribute, -1 for any other
 * (cublasLtMatmulDescAttributes_t values; daemon/hand_cublasLt.c asserts
 * them against cublasLt.h). */
static inline int rgpu_lt_pointer_slot(uint32_t attr)
{
    switch (attr) {
    case 8: return 0;       /* BIAS_POINTER */
    case 11: return 1;      /* EPILOGUE_AUX_POINTER */
    case 17: return 2;      /* A_SCALE_POINTER */
    case 18: return 3;      /* B_SCALE_POINTER */
    case 19: return 4;      /* C_SCALE_POINTER */
    case 20: return 5;      /* D_SCALE_POINTER */
    case 21: return 6;      /* AMAX_D_POINTER */
    case 23: return 7;      /* EPILOGUE_AUX_SCALE_POINTER */
    case 24: return 8;      /* EPILOGUE_AUX_AMAX_POINTER */
    case 36: return 9;      /* D_OUT_SCALE_POINTER */
    default: return -1;
    }
}

/* The attribute of a slot (the inverse). */
static inline uint32_t rgpu_lt_pointer_attr(int slot)
{
    static const uint32_t attrs[RGPU_LT_NPOINTERS] = { 8, 11, 17, 18, 19, 20, 21, 23, 24, 36 };
    return attrs[slot];
}

#endif
