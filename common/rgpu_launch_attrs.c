/* Launch attributes on the wire: see rgpu_launch_attrs.h. */
#include "rgpu_launch_attrs.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* How a member of an attribute's value travels. */
enum field_kind {
    F_END = 0,
    F_INT,      /* int or an enum: a signed 32-bit integer */
    F_UINT,     /* unsigned int */
    F_BYTE,     /* unsigned char */
    F_U64,      /* a handle, an address or a size_t */
    F_FLOAT,    /* float */
};

struct field {
    enum field_kind kind;
    size_t offset;      /* in CUlaunchAttributeValue */
};

struct attr_layout {
    const char *name;
    const char *refusal;        /* NULL: served */
    struct field fields[5];     /* as many as a wire record's (rgpu_launch_attr) */
};

#define AT(member) offsetof(CUlaunchAttributeValue, member)

/* Enums travel as int: the header's enums all are. */
_Static_assert(sizeof(CUaccessProperty) == sizeof(int), "enum size");
_Static_assert(sizeof(CUsynchronizationPolicy) == sizeof(int), "enum size");
_Static_assert(sizeof(CUclusterSchedulingPolicy) == sizeof(int), "enum size");
_Static_assert(sizeof(CUlaunchMemSyncDomain) == sizeof(int), "enum size");
_Static_assert(sizeof(CUevent) == 8 && sizeof(size_t) == 8, "64-bit handles");

/* By id, as cuda.h (CUDA 13) numbers them; 15 is unused there. */
static const struct attr_layout layouts[] = {
    [CU_LAUNCH_ATTRIBUTE_IGNORE] = { "CU_LAUNCH_ATTRIBUTE_IGNORE", NULL, { { F_END, 0 } } },
    [CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW] = {
        "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW", NULL,
        { { F_U64, AT(accessPolicyWindow.base_ptr) },
          { F_U64, AT(accessPolicyWindow.num_bytes) },
          { F_FLOAT, AT(accessPolicyWindow.hitRatio) },
          { F_INT, AT(accessPolicyWindow.hitProp) },
          { F_INT, AT(accessPolicyWindow.missProp) } } },
    [CU_LAUNCH_ATTRIBUTE_COOPERATIVE] = {
        "CU_LAUNCH_ATTRIBUTE_COOPERATIVE", NULL, { { F_INT, AT(cooperative) } } },
    [CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY] = {
        "CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY", NULL, { { F_INT, AT(syncPolicy) } } },
    [CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION] = {
        "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", NULL,
        { { F_UINT, AT(clusterDim.x) }, { F_UINT, AT(clusterDim.y) },
          { F_UINT, AT(clusterDim.z) } } },
    [CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE] = {
        "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE", NULL,
        { { F_INT, AT(clusterSchedulingPolicyPreference) } } },
    [CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION] = {
        "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION", NULL,
        { { F_INT, AT(programmaticStreamSerializationAllowed) } } },
    [CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT] = {
        "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT", NULL,
        { { F_U64, AT(programmaticEvent.event) }, { F_INT, AT(programmaticEvent.flags) },
          { F_INT, AT(programmaticEvent.triggerAtBlockStart) } } },
    [CU_LAUNCH_ATTRIBUTE_PRIORITY] = {
        "CU_LAUNCH_ATTRIBUTE_PRIORITY", NULL, { { F_INT, AT(priority) } } },
    [CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP] = {
        "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP", NULL,
        { { F_BYTE, AT(memSyncDomainMap.default_) }, { F_BYTE, AT(memSyncDomainMap.remote) } } },
    [CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN] = {
        "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN", NULL, { { F_INT, AT(memSyncDomain) } } },
    [CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION] = {
        "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION", NULL,
        { { F_UINT, AT(preferredClusterDim.x) }, { F_UINT, AT(preferredClusterDim.y) },
          { F_UINT, AT(preferredClusterDim.z) } } },
    [CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT] = {
        "CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT", NULL,
        { { F_U64, AT(launchCompletionEvent.event) },
          { F_INT, AT(launchCompletionEvent.flags) } } },
    /* The driver writes a device-side node handle back into the caller's
     * attribute array, and only for launches captured into a graph. */
    [CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE] = {
        "CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE",
        "device-updatable graph nodes: the node handle the driver writes back into the "
        "attribute is not remoted", { { F_END, 0 } } },
    [CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = {
        "CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", NULL,
        { { F_UINT, AT(sharedMemCarveout) } } },
    [CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING] = {
        "CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING", NULL,
        { { F_UINT, AT(nvlinkUtilCentricScheduling) } } },
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

static const struct attr_layout *layout_of(unsigned id)
{
    return id < NLAYOUTS && layouts[id].name ? &layouts[id] : NULL;
}

const char *rgpu_launch_attr_name(unsigned id)
{
    const struct attr_layout *l = layout_of(id);
    return l ? l->name : NULL;
}

const char *rgpu_launch_attr_refusal(unsigned id)
{
    const struct attr_layout *l = layout_of(id);
    if (!l)
        return "a launch attribute this build of rgpu does not know";
    return l->refusal;
}

unsigned rgpu_launch_attrs_first_refused(const CUlaunchAttribute *attrs, unsigned n)
{
    unsigned i = 0;
    while (i < n && !rgpu_launch_attr_refusal(attrs[i].id))
        i++;
    return i;
}

unsigned rgpu_launch_attrs_count(const CUlaunchAttribute *attrs, unsigned n)
{
    unsigned count = 0;
    for (unsigned i = 0; i < n; i++)
        count += attrs[i].id != CU_LAUNCH_ATTRIBUTE_IGNORE;
    return count;
}

static int checked_here(const CUlaunchAttribute *a, int (*event_untimed)(uint64_t))
{
    const CUlaunchAttributeValue *v = &a->value;
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:      /* out of range is clamped, as for streams */
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        return 1;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        return v->memSyncDomain == CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT ||
               v->memSyncDomain == CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return v->clusterSchedulingPolicyPreference >= CU_CLUSTER_SCHEDULING_POLICY_DEFAULT &&
               v->clusterSchedulingPolicyPreference <= CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        return v->programmaticEvent.flags == 0 &&
               event_untimed((uint64_t)(uintptr_t)v->programmaticEvent.event);
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        return v->launchCompletionEvent.flags == 0 &&
               event_untimed((uint64_t)(uintptr_t)v->launchCompletionEvent.event);
    default:
        return 0;
    }
}

int rgpu_launch_attrs_checked(const CUlaunchAttribute *attrs, unsigned n,
                              int (*event_untimed)(uint64_t event))
{
    for (unsigned i = 0; i < n; i++)
        if (!checked_here(&attrs[i], event_untimed))
            return 0;
    return 1;
}

static unsigned field_count(const struct attr_layout *l)
{
    unsigned n = 0;
    while (n < sizeof l->fields / sizeof l->fields[0] && l->fields[n].kind != F_END)
        n++;
    return n;
}

static size_t field_bytes(enum field_kind kind)
{
    switch (kind) {
    case F_BYTE:
        return 1;
    case F_U64:
        return 8;
    case F_INT:
    case F_UINT:
    case F_FLOAT:
        return 4;
    case F_END:
        break;
    }
    return 0;
}

uint64_t rgpu_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t rgpu_launch_attrs_hash(const CUlaunchAttribute *attrs, unsigned n, uint64_t h)
{
    for (unsigned i = 0; i < n; i++) {
        const struct attr_layout *l = layout_of(attrs[i].id);
        unsigned id = attrs[i].id;
        if (id == CU_LAUNCH_ATTRIBUTE_IGNORE)
            continue;
        h = rgpu_hash_bytes(h, &id, sizeof id);
        for (unsigned k = 0; l && k < field_count(l); k++)
            h = rgpu_hash_bytes(h, (const unsigned char *)&attrs[i].value + l->fields[k].offset,
                    field_bytes(l->fields[k].kind));
    }
    return h;
}

/* A member's value as its 64-bit field. */
static uint64_t field_to_wire(const struct field *f, const unsigned char *value)
{
    const unsigned char *p = value + f->offset;
    int i;
    unsigned u;
    uint64_t v = 0;
    switch (f->kind) {
    case F_INT:
        memcpy(&i, p, sizeof i);
        return (uint64_t)(int64_t)i;
    case F_UINT:
    case F_FLOAT:           /* the float's bits */
        memcpy(&u, p, sizeof u);
        return u;
    case F_BYTE:
        return *p;
    case F_U64:
        memcpy(&v, p, sizeof v);
        return v;
    case F_END:
        break;
    }
    return 0;
}

void rgpu_launch_attrs_to_wire(const CUlaunchAttribute *attrs, unsigned n,
                               struct rgpu_launch_attr *out)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct attr_layout *l = layout_of(attrs[i].id);
        if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_IGNORE)
            continue;
        struct rgpu_launch_attr *w = &out[k++];
        memset(w, 0, sizeof *w);
        w->id = attrs[i].id;
        for (unsigned f = 0; l && f < field_count(l); f++)
            w->field[f] = field_to_wire(&l->fields[f], (const unsigned char *)&attrs[i].value);
    }
}

/* A field back into its member: 0, or -1 when out of the member's range. */
static int field_from_wire(uint64_t w, const struct field *f, unsigned char *value)
{
    unsigned char *p = value + f->offset;
    int64_t s = (int64_t)w;
    switch (f->kind) {
    case F_INT: {
        if (s < INT32_MIN || s > INT32_MAX)
            return -1;
        int i = (int)s;
        memcpy(p, &i, sizeof i);
        return 0;
    }
    case F_UINT:
    case F_FLOAT: {
        if (w > UINT32_MAX)
            return -1;
        unsigned u = (unsigned)w;
        memcpy(p, &u, sizeof u);
        return 0;
    }
    case F_BYTE:
        if (w > UINT8_MAX)
            return -1;
        *p = (unsigned char)w;
        return 0;
    case F_U64:
        memcpy(p, &w, sizeof w);
        return 0;
    case F_END:
        break;
    }
    return -1;
}

static int from_wire(const struct rgpu_launch_attr *w, CUlaunchAttribute *a)
{
    const struct attr_layout *l = layout_of(w->id);
    if (w->id == CU_LAUNCH_ATTRIBUTE_IGNORE || w->id > INT32_MAX || w->zero || !l ||
        l->refusal)
        return -1;
    unsigned nf = field_count(l);
    a->id = (CUlaunchAttributeID)w->id;
    for (unsigned k = 0; k < sizeof w->field / sizeof w->field[0]; k++) {
        if (k >= nf ? w->field[k] != 0
                    : field_from_wire(w->field[k], &l->fields[k], (unsigned char *)&a->value) < 0)
            return -1;
    }
    return 0;
}

int rgpu_launch_attrs_from_wire(const struct rgpu_launch_attr *in, size_t n,
                                CUlaunchAttribute *out)
{
    if (n > RGPU_LAUNCH_ATTRS_MAX || (n && !in))
        return -1;
    memset(out, 0, n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        if (from_wire(&in[i], &out[i]) < 0)
            return -1;
    return 0;
}

const char *rgpu_launch_attr_refused_what(char *buf, size_t n, const char *launch, unsigned id)
{
    const char *name = rgpu_launch_attr_name(id);
    if (name)
        snprintf(buf, n, "%s with %s", launch, name);
    else
        snprintf(buf, n, "%s with launch attribute %u", launch, id);
    return buf;
}

unsigned rgpu_launch_attr_log_slot(unsigned id)
{
    return id < RGPU_LAUNCH_ATTR_LOG_SLOTS ? id : RGPU_LAUNCH_ATTR_LOG_SLOTS - 1;
}
