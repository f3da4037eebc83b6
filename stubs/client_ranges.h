/* Device ranges this process was handed (cudaMalloc, cuMemAlloc, ...), so
 * that cudaMemcpyDefault and cudaPointerGetAttributes can tell device from
 * host pointers without asking the server. */
#ifndef RGPU_CLIENT_RANGES_H
#define RGPU_CLIENT_RANGES_H

#include <stddef.h>
#include <stdint.h>

void rgpu_ranges_add(uint64_t base, size_t size);
void rgpu_ranges_remove(uint64_t base);
/* Whether p lies in a recorded device range; base and size describe it. */
int rgpu_ranges_find(uint64_t p, uint64_t *base, size_t *size);

#endif
