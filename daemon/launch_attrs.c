/* Launch attributes from the wire, checked against the session: see
 * launch_attrs.h. */
#include "launch_attrs.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_log.h"

#include <cuda_runtime_api.h>
#include <stddef.h>

/* The runtime procedure hands the same array to cudaLaunchKernelExC: the
 * two APIs' attribute records must agree member for member. */
#define SAME_AT(drv, rt) \
    _Static_assert(offsetof(CUlaunchAttribute, drv) == offsetof(cudaLaunchAttribute, rt), #drv)
_Static_assert(sizeof(CUlaunchAttribute) == sizeof(cudaLaunchAttribute), "attribute size");
SAME_AT(id, id);
SAME_AT(value.accessPolicyWindow.base_ptr, val.accessPolicyWindow.base_ptr);
SAME_AT(value.accessPolicyWindow.num_bytes, val.accessPolicyWindow.num_bytes);
SAME_AT(value.accessPolicyWindow.hitRatio, val.accessPolicyWindow.hitRatio);
SAME_AT(value.accessPolicyWindow.hitProp, val.accessPolicyWindow.hitProp);
SAME_AT(value.accessPolicyWindow.missProp, val.accessPolicyWindow.missProp);
SAME_AT(value.clusterDim.z, val.clusterDim.z);
SAME_AT(value.programmaticEvent.event, val.programmaticEvent.event);
SAME_AT(value.programmaticEvent.flags, val.programmaticEvent.flags);
SAME_AT(value.programmaticEvent.triggerAtBlockStart, val.programmaticEvent.triggerAtBlockStart);
SAME_AT(value.launchCompletionEvent.event, val.launchCompletionEvent.event);
SAME_AT(value.launchCompletionEvent.flags, val.launchCompletionEvent.flags);
SAME_AT(value.memSyncDomainMap.remote, val.memSyncDomainMap.remote);
SAME_AT(value.preferredClusterDim.z, val.preferredClusterDim.z);
SAME_AT(value.sharedMemCarveout, val.sharedMemCarveout);
SAME_AT(value.nvlinkUtilCentricScheduling, val.nvlinkUtilCentricScheduling);
_Static_assert(CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT ==
               (int)cudaLaunchAttributeLaunchCompletionEvent, "attribute ids");
_Static_assert(CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING ==
               (int)cudaLaunchAttributeNvlinkUtilCentricScheduling, "attribute ids");

static int event_allowed(CUevent ev)
{
    if (handles_valid(H_EVENT, (uint64_t)(uintptr_t)ev))
        return 1;
    rgpu_warn("refused a launch attribute naming an event the session never handed out");
    return 0;
}

static int window_allowed(const CUaccessPolicyWindow *w)
{
    uint64_t base = (uint64_t)(uintptr_t)w->base_ptr;
    if ((!base && !w->num_bytes) || (base && owned_range(base, w->num_bytes)))
        return 1;
    rgpu_warn("refused an access policy window outside the session's device memory");
    return 0;
}

enum launch_attrs_verdict launch_attrs_check(const CUlaunchAttribute *attrs, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        const CUlaunchAttributeValue *v = &attrs[i].value;
        switch (attrs[i].id) {
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
            if (!event_allowed(v->programmaticEvent.event))
                return LAUNCH_ATTRS_BAD_EVENT;
            break;
        case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
            if (!event_allowed(v->launchCompletionEvent.event))
                return LAUNCH_ATTRS_BAD_EVENT;
            break;
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
            if (!window_allowed(&v->accessPolicyWindow))
                return LAUNCH_ATTRS_BAD_WINDOW;
            break;
        default:
            break;
        }
    }
    return LAUNCH_ATTRS_OK;
}

enum launch_attrs_verdict launch_attrs_take(const struct rgpu_launch_attr *in, size_t n,
                                            CUlaunchAttribute *out)
{
    if (rgpu_launch_attrs_from_wire(in, n, out) < 0)
        return LAUNCH_ATTRS_MALFORMED;
    return launch_attrs_check(out, (unsigned)n);
}
