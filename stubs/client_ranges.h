/* Device ranges this process was handed (cudaMalloc, cuMemAlloc, ...), so
 * that cudaMemcpyDefault and cudaPointerGetAttributes can tell device from
 * host pointers without asking the server. */
#ifndef RGPU_CLIENT_RANGES_H
#define RGPU_CLIENT_RANGES_H

#include <stddef.h>
#include <stdint.h>

enum rgpu_range_kind {
    RGPU_RANGE_DEVICE = 1,      /* device memory on the server */
    RGPU_RANGE_PINNED = 2,      /* host memory the program believes pinned */
    RGPU_RANGE_MAPPED = 3,      /* the GPU's address of mapped host memory
                                   (common/rgpu_mapped.c); often the program's too */
    RGPU_RANGE_MANAGED = 4,     /* managed memory: one address on both sides */
};

void rgpu_ranges_add(uint64_t base, size_t size, int kind);
/* The same, with the device the memory is on (-1: not known yet). */
void rgpu_ranges_add_on(uint64_t base, size_t size, int kind, int device);
void rgpu_ranges_remove(uint64_t base);
/* The kind of the recorded range holding p (0: none); base and size
 * describe it where not NULL. */
int rgpu_ranges_find(uint64_t p, uint64_t *base, size_t *size);
/* The device recorded for the range holding p (-1: none, or not known),
 * and a device learnt later for the range at base. */
int rgpu_ranges_device(uint64_t p);
void rgpu_ranges_set_device(uint64_t base, int device);
/* Whether any range of kind RGPU_RANGE_PINNED is recorded (one relaxed load). */
int rgpu_ranges_any_pinned(void);

#endif
