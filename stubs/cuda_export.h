/* The driver's export tables as rgpu hands them out (stubs/cuda_export.c)
 * and the integrity check answered through them (stubs/cuda_integrity.c). */
#ifndef RGPU_CUDA_EXPORT_H
#define RGPU_CUDA_EXPORT_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* MD2 (RFC 1319), as the integrity check's hash. */
struct rgpu_md2 {
    uint8_t x[48], checksum[16], buf[16];
    unsigned count;
};
void rgpu_md2_init(struct rgpu_md2 *m);
void rgpu_md2_update(struct rgpu_md2 *m, const void *data, size_t n);
void rgpu_md2_final(struct rgpu_md2 *m, uint8_t digest[16]);

/* The addresses the runtime hashes: where our tables are. */
struct rgpu_integrity_tables {
    const void *cudart_table, *integrity_table, *check_fn;
};

/* The 16 bytes a runtime of runtime_version expects from the integrity
 * check called with unix_seconds. */
CUresult rgpu_integrity_answer(unsigned runtime_version, uint64_t unix_seconds,
                               const struct rgpu_integrity_tables *t, uint64_t out[2]);

/* Context-local storage: the destructors of a context's entries run when
 * the program destroys or resets it (stubs/cuda_contexts.c). */
void rgpu_cls_context_ending(CUcontext ctx);
void rgpu_cls_primary_ending(CUdevice dev);

#endif
