/* Launch attributes a client sent, rebuilt and checked before the driver
 * or runtime sees them (daemon/launch_attrs.c; the wire format:
 * common/rgpu_launch_attrs.h). */
#ifndef RGPUD_LAUNCH_ATTRS_H
#define RGPUD_LAUNCH_ATTRS_H

#include "rgpud.h"
#include "rgpu_launch_attrs.h"

#include <cuda.h>

/* What a check of the attributes found. */
enum launch_attrs_verdict {
    LAUNCH_ATTRS_OK = 0,
    LAUNCH_ATTRS_BAD_EVENT,     /* an event the session never handed out: bad handle */
    LAUNCH_ATTRS_BAD_WINDOW,    /* an access policy window outside the session's memory */
    LAUNCH_ATTRS_MALFORMED,     /* records of no served attribute: a protocol error */
};

/* Every event an attribute names must be NULL or one of the session's
 * (the driver follows the pointer), and an access policy window must lie
 * in the session's device memory (it is an address range of the GPU the
 * client may only name where it owns memory).  Logs what it refuses. */
enum launch_attrs_verdict launch_attrs_check(const CUlaunchAttribute *attrs, unsigned n);

/* A launch's n attribute records from the wire, rebuilt into out (room for
 * RGPU_LAUNCH_ATTRS_MAX) and checked as above. */
enum launch_attrs_verdict launch_attrs_take(const struct rgpu_launch_attr *in, size_t n,
                                            CUlaunchAttribute *out);

#endif
