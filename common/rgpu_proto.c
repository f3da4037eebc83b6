#include "rgpu_proto.h"

#include <string.h>

const char *rgpu_status_name(int status)
{
    static const char *const names[] = {
        [RGPU_OK] = "ok",
        [RGPU_EPROTO] = "malformed request",
        [RGPU_ENOPROC] = "unknown procedure",
        [RGPU_ENOSYM] = "function missing from the server's library",
        [RGPU_ETOOBIG] = "size too large",
        [RGPU_ENOMEM] = "server out of memory",
        [RGPU_EVERSION] = "protocol version mismatch",
        [RGPU_EBUSY] = "server busy (session limit)",
        [RGPU_EIO] = "connection lost",
        [RGPU_EAUTH] = "not authorised",
        [RGPU_ETIMEDOUT] = "server did not answer in time",
        [RGPU_EREFUSED] = "argument refused by the server's checks",
        [RGPU_ENOTPERMITTED] = "CUDA called from a host function",
        [RGPU_ENODEV] = "a GPU of the server's is missing",
    };
    if (status < 0 || (unsigned)status >= sizeof names / sizeof names[0] || !names[status])
        return "unknown status";
    return names[status];
}

static uint32_t fnv1a(uint32_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

uint32_t rgpu_proc_id(const char *lib, const char *name)
{
    uint32_t h = fnv1a(2166136261u, lib);
    h = fnv1a(h, "/");
    return fnv1a(h, name);
}
