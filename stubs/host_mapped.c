/* Mapped and managed host memory for both APIs (stubs/host_mapped.h). */
#include "host_mapped.h"

#include "client_ranges.h"
#include "rgpu_log.h"

#include <stdlib.h>

int host_mapped_status(const struct host_mapped_api *api, int status)
{
    return api->lib->is_runtime ? rgpu_runtime_result(status) : status;
}

/* Share [host, host+size) with the GPU's copy at dev; the client ranges
 * say what each address is. */
static int share(const struct host_mapped_api *api, uint64_t host, uint64_t dev, size_t size,
                 int flags, int host_kind)
{
    return rgpu_mapped_share(host, dev, size, flags, host_kind) < 0
               ? host_mapped_status(api, api->out_of_memory) : 0;
}

/* The program's copy at the GPU's address (one pointer for both, as
 * unified addressing gives), or, when the client has something there,
 * elsewhere: the device-pointer query then answers the GPU's. */
int host_mapped_alloc(const struct host_mapped_api *api, void **pp, size_t size)
{
    uint64_t dev;
    size = size ? size : 1;
    int rc = api->alloc_device(size, &dev);
    if (rc != 0)
        return rc;
    uint64_t host = rgpu_mapped_place(dev, size, api->host_alloc_name);
    if (!host) {
        api->free_device(dev);
        return host_mapped_status(api, api->out_of_memory);
    }
    rc = api->zero_device(dev, size);       /* fresh memory is zeros on both sides */
    if (rc == 0)
        rc = share(api, host, dev, size, RGPU_MAPPED_OWN_HOST, RGPU_RANGE_PINNED);
    if (rc != 0) {
        rgpu_mapped_unmap(host, size);
        api->free_device(dev);
        return rc;
    }
    *pp = (void *)(uintptr_t)host;
    return 0;
}

int host_mapped_free(const struct host_mapped_api *api, void *p)
{
    uint64_t host, dev, a = (uint64_t)(uintptr_t)p;
    int flags = 0;
    if (rgpu_mapped_find(a, 0, &host, NULL, NULL, &flags) && host == a &&
        rgpu_mapped_release(a, 0, &dev)) {
        api->free_device(dev);
        if (flags & RGPU_MAPPED_OWN_HOST)
            return 0;           /* unmapped by the release */
    }
    if (p)
        rgpu_ranges_remove(a);
    free(p);
    return 0;
}

/* Registered memory is the program's own: pinned memory as far as copies
 * go, mapped or not.  Its GPU copy (at another address: the APIs say the
 * host pointer cannot be used for registered memory, so programs ask for
 * the device pointer) is made when a device call first names it, as for
 * any pinned memory (host_mapped_map_pinned): until then no kernel can
 * reach it, and a program that registers a large buffer only to copy
 * through it pays nothing at its synchronisations. */
int host_mapped_register(const struct host_mapped_api *api, void *p, size_t size)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!p || !size)
        return host_mapped_status(api, api->lib->invalid_value);
    int kind = rgpu_ranges_find(a, NULL, NULL);
    if (kind == RGPU_RANGE_PINNED || kind == RGPU_RANGE_MAPPED)
        return host_mapped_status(api, api->already_registered);
    rgpu_ranges_add(a, size, RGPU_RANGE_PINNED);
    return 0;
}

int host_mapped_unregister(const struct host_mapped_api *api, void *p)
{
    uint64_t dev, a = (uint64_t)(uintptr_t)p;
    if (!p)
        return host_mapped_status(api, api->lib->invalid_value);
    if (rgpu_mapped_release(a, 0, &dev)) {
        api->free_device(dev);
        return 0;
    }
    if (rgpu_ranges_find(a, NULL, NULL) != RGPU_RANGE_PINNED)
        return host_mapped_status(api, api->not_registered);
    rgpu_ranges_remove(a);
    return 0;
}

int host_mapped_is_mapped(const void *p)
{
    return rgpu_mapped_find((uint64_t)(uintptr_t)p, 0, NULL, NULL, NULL, NULL);
}

/* Pinned memory not allocated mapped gets its GPU copy on demand, as
 * unified addressing maps every pinned allocation: from then on it is
 * kept coherent like the others. */
int host_mapped_map_pinned(const struct host_mapped_api *api, uint64_t p)
{
    uint64_t base, dev;
    size_t size;
    if (rgpu_ranges_find(p, &base, &size) != RGPU_RANGE_PINNED)
        return 0;
    if (api->alloc_device(size, &dev) != 0)
        return 0;
    if (rgpu_mapped_add(base, dev, size, 0) < 0) {
        api->free_device(dev);
        return 0;
    }
    rgpu_ranges_add(dev, size, RGPU_RANGE_MAPPED);
    return 1;
}

int host_mapped_device_pointer(const struct host_mapped_api *api, const void *p, uint64_t *dev)
{
    uint64_t host, base, a = (uint64_t)(uintptr_t)p;
    if (!rgpu_mapped_find(a, 0, &host, &base, NULL, NULL) &&
        !(host_mapped_map_pinned(api, a) && rgpu_mapped_find(a, 0, &host, &base, NULL, NULL)))
        return host_mapped_status(api, api->lib->invalid_value);
    *dev = base + (a - host);
    return 0;
}

/* Managed memory must have one address on both sides: the client's copy
 * goes at the address the GPU's driver chose, and when something of the
 * client's is there the allocation fails (docs/architecture.md). */
int host_mapped_adopt_managed(const struct host_mapped_api *api, uint64_t p, size_t size)
{
    if (rgpu_mapped_map_at(p, size) < 0) {
        rgpu_warn("%s: the GPU's address %#llx is taken in this process", api->managed_name,
                  (unsigned long long)p);
        api->free_device(p);
        return host_mapped_status(api, api->out_of_memory);
    }
    if (api->zero_device(p, size) != 0 ||
        rgpu_mapped_add(p, p, size, RGPU_MAPPED_MANAGED | RGPU_MAPPED_OWN_HOST) < 0) {
        rgpu_mapped_unmap(p, size);
        api->free_device(p);
        return host_mapped_status(api, api->out_of_memory);
    }
    rgpu_ranges_add(p, size, RGPU_RANGE_MANAGED);
    return 0;
}
