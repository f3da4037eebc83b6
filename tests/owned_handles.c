/* The session's handle table (daemon/owned_handles.c) against a plain
 * reference: random adds and removes of values that collide in the hash
 * (two classes, clustered values), checking membership of every value
 * after each step.  A slip in the backward-shift deletion would hide a
 * live handle, and rgpud would then refuse a legitimate call. */
#include "owned_handles.h"

#include <stdio.h>
#include <stdlib.h>

#define NVALUES 512

int main(void)
{
    static char ref[2][NVALUES];
    uint32_t cls[2] = { H_STREAM, H_EVENT };
    unsigned long live = 0;
    srand(14);
    for (int step = 0; step < 40000; step++) {
        int c = rand() % 2, i = rand() % NVALUES;
        uint64_t h = 0x7f0000001000ull + (uint64_t)i * 16;
        if (rand() % 3) {
            live += !ref[c][i];
            ref[c][i] = 1;
            handles_add(cls[c], h);
        } else {
            live -= ref[c][i];
            ref[c][i] = 0;
            handles_remove(cls[c], h);
        }
        if (step % 97 && step < 39990)
            continue;
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < NVALUES; j++)
                if (handles_contains(cls[k], 0x7f0000001000ull + (uint64_t)j * 16) != ref[k][j]) {
                    printf("FAIL step %d: class %d value %d: table %d, reference %d\n", step, k,
                           j, !ref[k][j], ref[k][j]);
                    return 1;
                }
        if (handles_count() != live) {
            printf("FAIL step %d: %lu handles, reference %lu\n", step, handles_count(), live);
            return 1;
        }
    }
    /* NULL is never a member; special streams are valid without being one. */
    if (handles_contains(H_STREAM, 0) || !handles_valid(H_STREAM, 0) ||
        !handles_valid(H_STREAM, 1) || !handles_valid(H_STREAM, 2) ||
        handles_valid(H_EVENT, 1) || handles_valid(H_STREAM, 3)) {
        printf("FAIL special values\n");
        return 1;
    }
    /* A cuBLAS handle may be cast to a cuBLASLt handle; not the reverse. */
    handles_add(H_CUBLAS, 0x5000);
    handles_add(H_CUBLASLT, 0x6000);
    if (!handles_valid(H_CUBLASLT, 0x5000) || handles_valid(H_CUBLAS, 0x6000) ||
        handles_valid(H_CUDNN, 0x5000)) {
        printf("FAIL cuBLAS handle as cuBLASLt handle\n");
        return 1;
    }
    /* cuBLASLt hands one handle to every cublasLtCreate and counts them:
     * it stays valid until the last destroy.  Other classes do not count:
     * one destroy (or a context destroyed after many getters) forgets. */
    handles_add(H_CUBLASLT, 0x7000);
    handles_add(H_CUBLASLT, 0x7000);
    handles_remove(H_CUBLASLT, 0x7000);
    int shared_kept = handles_contains(H_CUBLASLT, 0x7000);
    handles_remove(H_CUBLASLT, 0x7000);
    handles_add(H_CONTEXT, 0x8000);
    handles_add(H_CONTEXT, 0x8000);
    handles_remove(H_CONTEXT, 0x8000);
    if (!shared_kept || handles_contains(H_CUBLASLT, 0x7000) ||
        handles_contains(H_CONTEXT, 0x8000)) {
        printf("FAIL shared handles counted, others not\n");
        return 1;
    }
    printf("ok handle table: %lu live handles match the reference\n", live);
    return 0;
}
