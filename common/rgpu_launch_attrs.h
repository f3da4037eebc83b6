/* Launch attributes on the wire (cuLaunchKernelEx, cudaLaunchKernelExC and
 * the cooperative launches), shared by the stubs and rgpud.
 *
 * An attribute travels as a struct rgpu_launch_attr
 * (codegen/rgpu_module_wire.h): its id and one field per member of its
 * value in the header's order, integers widened (signed where the member
 * is), the access policy window's hit ratio as a float's bits, events and
 * the window's base as the handle's or address's value.  The union itself
 * never travels: it holds an event pointer and a device address that the
 * server must check, and 64 bytes of padding that would carry whatever
 * the client's stack held.
 *
 * The runtime's cudaLaunchAttribute has the same ids and layout as the
 * driver's CUlaunchAttribute (stubs/cudart_hand.c asserts it), so both
 * APIs use these functions. */
#ifndef RGPU_LAUNCH_ATTRS_H
#define RGPU_LAUNCH_ATTRS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "rgpu_module_wire.h"

/* The header's name of an attribute id ("CU_LAUNCH_ATTRIBUTE_PRIORITY"),
 * or NULL for an id this build does not know. */
const char *rgpu_launch_attr_name(unsigned id);

/* Why rgpu does not serve attribute id in a launch, or NULL when it does.
 * Unknown ids are refused too: their value's layout is not known. */
const char *rgpu_launch_attr_refusal(unsigned id);

/* The log line of a refused attribute: what (buf) names the launch call
 * and the attribute, and each id has a once-only flag of its own among
 * RGPU_LAUNCH_ATTR_LOG_SLOTS (ids past the header's share the last). */
#define RGPU_LAUNCH_ATTR_LOG_SLOTS (CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING + 2)
const char *rgpu_launch_attr_refused_what(char *buf, size_t n, const char *launch, unsigned id);
unsigned rgpu_launch_attr_log_slot(unsigned id);

/* The index of the first attribute rgpu refuses, or n when none is. */
unsigned rgpu_launch_attrs_first_refused(const CUlaunchAttribute *attrs, unsigned n);

/* The attributes that travel: all but CU_LAUNCH_ATTRIBUTE_IGNORE. */
unsigned rgpu_launch_attrs_count(const CUlaunchAttribute *attrs, unsigned n);

/* Whether the client can make every check the driver would make at once
 * on these attributes, so that the launch may go without waiting (the
 * policy of cuLaunchKernel, docs/synchronisation.md): a priority, the
 * programmatic stream serialisation, a memory-sync domain or a cluster
 * scheduling policy in its enum's range, and an event to record that
 * event_untimed says this process made for it (timing disabled, not
 * interprocess) with no record flags.  Anything else depends on the kernel
 * or the device (cooperative grids, clusters, windows, carveouts...): the
 * launch waits, and the driver's own answer comes back from it. */
int rgpu_launch_attrs_checked(const CUlaunchAttribute *attrs, unsigned n,
                              int (*event_untimed)(uint64_t event));

/* FNV-1a: h mixed with n bytes at p (start from 0xcbf29ce484222325). */
uint64_t rgpu_hash_bytes(uint64_t h, const void *p, size_t n);
/* h mixed with what the attributes say (their ids and the members each
 * one uses, not the rest of the union): equal for launches the driver
 * judges alike. */
uint64_t rgpu_launch_attrs_hash(const CUlaunchAttribute *attrs, unsigned n, uint64_t h);
/* The attributes that travel (rgpu_launch_attrs_count of them, at most
 * RGPU_LAUNCH_ATTRS_MAX), as their records into out.  Every id must be
 * served (rgpu_launch_attr_refusal). */
void rgpu_launch_attrs_to_wire(const CUlaunchAttribute *attrs, unsigned n,
                               struct rgpu_launch_attr *out);

/* The server's side: rebuild n records from the wire into out (zeroed
 * first; room for n).  0, or -1 when there are more than
 * RGPU_LAUNCH_ATTRS_MAX or a record is not a served attribute with exactly
 * its fields, each in its member's range, and zeros past them.  Handles
 * and addresses are values here: the caller checks them against the
 * session before the driver sees them. */
int rgpu_launch_attrs_from_wire(const struct rgpu_launch_attr *in, size_t n,
                                CUlaunchAttribute *out);

#endif
