/* The device memory this session owns: one table, consulted before any
 * pointer the client sends reaches a library (daemon/owned.c). */
#ifndef RGPUD_OWNED_H
#define RGPUD_OWNED_H

#include <stddef.h>
#include <stdint.h>

/* What made a range (kept for diagnostics and for removal by owner). */
enum owned_kind {
    OWNED_ALLOC,        /* cudaMalloc*, cuMemAlloc*, pitch variants */
    OWNED_POOL,         /* stream-ordered: cudaMallocAsync, cuMemAllocFromPoolAsync */
    OWNED_VMM,          /* cuMemAddressReserve; cuMemMap lands inside it */
    OWNED_GLOBAL,       /* a module's or library's __device__ variable */
    OWNED_IPC,          /* another client process's memory, opened (daemon/ipc.c) */
};

/* Record [base, base+size) as owned; owner is the module or library of a
 * global (0 otherwise), so that unloading it forgets its globals.  The same
 * range recorded again is kept once.  Returns 0, or -1 (out of memory, or
 * an empty or wrapping range). */
int owned_add(uint64_t base, uint64_t size, enum owned_kind kind, uint64_t owner);

/* Forget the range starting at base (a free); 0 when one was there. */
int owned_remove(uint64_t base);

/* A range as recorded, to put back (owned_restore) what a free took out
 * before it ran and then failed. */
struct owned_entry {
    uint64_t base, size, owner;
    enum owned_kind kind;
};
/* Forget the range starting at base, copying it to *e: 0 when one was there. */
int owned_take(uint64_t base, struct owned_entry *e);
int owned_restore(const struct owned_entry *e);
/* Forget every global of this module or library. */
void owned_remove_owner(uint64_t owner);
/* Forget everything (a context or device reset frees it all). */
void owned_clear(void);

/* Whether [ptr, ptr+len) lies inside one owned range (len 0: ptr itself);
 * NULL is allowed, the library checks it. */
int owned_range(uint64_t ptr, uint64_t len);
/* The recorded range with the highest base not above ptr (0, 0: none), for
 * the log line of a refused pointer. */
void owned_nearest(uint64_t ptr, uint64_t *base, uint64_t *size);

/* The 2D extent pitch*(height-1)+width of a strided copy or memset, or -1
 * when it wraps or width exceeds pitch (with more than one row). */
int owned_extent_2d(uint64_t pitch, uint64_t width, uint64_t height, uint64_t *extent);


#endif
