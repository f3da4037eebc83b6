/* Launch attributes on the wire (cuLaunchKernelEx, cudaLaunchKernelExC and
 * the cooperative launches), shared by the stubs and rgpud.
 *
 * An attribute travels as an explicit list, [id, field...], one field per
 * member of its value in the header's order: integers as msgpack integers
 * (signed where the member is), the access policy window's hit ratio as a
 * float, events and the window's base as the handle's or address's value.
 * The union itself never travels: it holds an event pointer and a device
 * address that the server must check, and 64 bytes of padding that would
 * carry whatever the client's stack held.
 *
 * The runtime's cudaLaunchAttribute has the same ids and layout as the
 * driver's CUlaunchAttribute (stubs/cudart_hand.c asserts it), so both
 * APIs use these functions. */
#ifndef RGPU_LAUNCH_ATTRS_H
#define RGPU_LAUNCH_ATTRS_H

#include <cuda.h>
#include <msgpack.h>
#include <stdint.h>

/* More attributes than this in one launch is a malformed request (the
 * header defines 16; a program may repeat one, as CUDA allows). */
#define RGPU_LAUNCH_ATTRS_MAX 64

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

/* Pack the attributes that travel (rgpu_launch_attrs_count of them) as one
 * msgpack array.  Every id must be served (rgpu_launch_attr_refusal). */
/* FNV-1a: h mixed with n bytes at p (start from 0xcbf29ce484222325). */
uint64_t rgpu_hash_bytes(uint64_t h, const void *p, size_t n);
/* h mixed with what the attributes say (their ids and the members each
 * one uses, not the rest of the union): equal for launches the driver
 * judges alike. */
uint64_t rgpu_launch_attrs_hash(const CUlaunchAttribute *attrs, unsigned n, uint64_t h);
void rgpu_launch_attrs_pack(msgpack_packer *pk, const CUlaunchAttribute *attrs, unsigned n);

/* The server's side: rebuild the array from the wire into out (zeroed
 * first; room for RGPU_LAUNCH_ATTRS_MAX).  0 with *n set, or -1 when o is
 * not a list of served attributes with exactly their fields, each in its
 * member's range.  Handles and addresses are values here: the caller
 * checks them against the session before the driver sees them. */
int rgpu_launch_attrs_unpack(const msgpack_object *o, CUlaunchAttribute *out, unsigned *n);

#endif
