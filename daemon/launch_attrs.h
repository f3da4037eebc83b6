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
};

/* Argument i of c as launch attributes, into out (room for
 * RGPU_LAUNCH_ATTRS_MAX): 0 with *n set, or -1 (a malformed request). */
int launch_attrs_arg(const struct hand_call *c, unsigned i, CUlaunchAttribute *out, unsigned *n);

/* Every event an attribute names must be NULL or one of the session's
 * (the driver follows the pointer), and an access policy window must lie
 * in the session's device memory (it is an address range of the GPU the
 * client may only name where it owns memory).  Logs what it refuses. */
enum launch_attrs_verdict launch_attrs_check(const CUlaunchAttribute *attrs, unsigned n);

#endif
