/* Mapped (zero-copy) host memory and managed memory, for the runtime
 * (stubs/cudart_mapped.c) and the driver (stubs/cuda_mapped.c) alike: the
 * GPU's copy is device memory the session allocates, the program's is
 * client memory at the same address where it can be had, and
 * common/rgpu_mapped.c keeps the two coherent at synchronisations
 * (docs/architecture.md, "Mapped and managed memory").
 *
 * The two APIs differ only in the calls that make, zero and free the GPU's
 * copy and in how their statuses are spelled: each names its own in a
 * struct host_mapped_api, and returns what these functions return. */
#ifndef RGPU_HOST_MAPPED_H
#define RGPU_HOST_MAPPED_H

#include "rgpu_client.h"

#include <stddef.h>
#include <stdint.h>

struct host_mapped_api {
    const struct rgpu_lib *lib;         /* its statuses: the runtime's recorded */
    /* The GPU's copy: size bytes at *dev; zeroed; freed. */
    int (*alloc_device)(size_t size, uint64_t *dev);
    int (*zero_device)(uint64_t dev, size_t size);
    void (*free_device)(uint64_t dev);
    /* Its statuses for what the client itself refuses. */
    int out_of_memory, already_registered, not_registered;
    const char *host_alloc_name, *managed_name;     /* for the log */
};

/* A status of api's made on the client (recorded as the runtime's last
 * error where api is the runtime). */
int host_mapped_status(const struct host_mapped_api *api, int status);

/* Mapped host memory of size bytes at *pp. */
int host_mapped_alloc(const struct host_mapped_api *api, void **pp, size_t size);

/* Frees host memory of api's allocating, mapped or pinned. */
int host_mapped_free(const struct host_mapped_api *api, void *p);

/* Registers [p, p+size) as pinned (flags already checked), and undoes it. */
int host_mapped_register(const struct host_mapped_api *api, void *p, size_t size);
int host_mapped_unregister(const struct host_mapped_api *api, void *p);

/* Whether p lies in mapped host memory (the flags the APIs answer). */
int host_mapped_is_mapped(const void *p);

/* The GPU's address of host address p at *dev, mapping pinned memory on
 * demand; 0, else api's invalid-value status. */
int host_mapped_device_pointer(const struct host_mapped_api *api, const void *p, uint64_t *dev);

/* Gives pinned memory at p its GPU copy (the pinned mapper of
 * common/rgpu_mapped.c); 1 when it now has one. */
int host_mapped_map_pinned(const struct host_mapped_api *api, uint64_t p);

/* After the server allocated managed memory of size bytes at p: the
 * client's copy at the same address, zeroed on both sides; on failure p
 * is freed and api's out-of-memory status returned. */
int host_mapped_adopt_managed(const struct host_mapped_api *api, uint64_t p, size_t size);

#endif
