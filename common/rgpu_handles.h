/* Library handle classes, as the generator and the server name them.
 *
 * A handle's class is the name of the record its type points at
 * (cudaStream_t and CUstream are both struct CUstream_st *: one class), or,
 * for an integer handle, its typedef name (CUmemGenericAllocationHandle).
 * The id is a hash of that name, so each library's generated table and the
 * hand-written server code agree without a shared list. */
#ifndef RGPU_HANDLES_H
#define RGPU_HANDLES_H

#include <stdint.h>

/* rgpu_param.handle_flags */
enum rgpu_handle_flags {
    RGPU_HANDLE_DESTROYS = 1u << 0,     /* the call frees this handle */
    RGPU_HANDLE_NULLABLE = 1u << 1,     /* NULL is a valid value (annotation nullable) */
};

/* FNV-1a of "handle/" CLASS: the same hash family as procedure ids. */
static inline uint32_t rgpu_handle_class(const char *cls)
{
    uint32_t h = 2166136261u;
    for (const char *s = "handle/"; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    for (; *cls; cls++)
        h = (h ^ (unsigned char)*cls) * 16777619u;
    return h;
}

#endif
