/* cuDNN variant packs as client objects.
 *
 * A variant pack names the device buffers of one execution of a plan
 * (their unique ids and pointers, and the workspace).  PyTorch builds one
 * around every convolution: create, three attributes, finalize, execute,
 * destroy.  Served on the server each of those but the execute waited for
 * the network, six round trips a convolution.  Here the pack is a record
 * of its attributes on the client; cudnnBackendExecute sends the plan and
 * the record in one request (rgpu_cudnn_execute, codegen/cudnn_own.h;
 * server side daemon/hand_cudnn.c),
 * which builds the pack on the server, runs it and destroys it, without
 * waiting when the handle and the plan are ones this process holds.
 * Every other kind of backend descriptor is served as before. */
#include "rgpu_client.h"
#include "cudnn_own.h"
#include "cudnn_procs.h"

#include <cudnn_graph.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudnn_lib)
#define MAX_ATTRS 8

uint32_t rgpu_cudnn_type_size(int type);
int rgpu_cudnn_is_pack_attribute(int64_t name);

struct pack_attr {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t count;
    void *bytes;
};

struct variant_pack {
    int finalized;
    unsigned n;
    struct pack_attr attr[MAX_ATTRS];
};

/* The packs alive in this process: a descriptor is one of ours exactly
 * when it is listed here (anything else is the server's). */
static struct rgpu_keyed packs = RGPU_KEYED_INIT;

static struct variant_pack *pack_of(cudnnBackendDescriptor_t d)
{
    int64_t v;
    return d && rgpu_keyed_get(&packs, d, &v) ? (struct variant_pack *)(intptr_t)v : NULL;
}


/* ---- create, set, get, finalize, destroy: on the client -------------------------- */

#undef cudnnBackendCreateDescriptor
RGPU_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                       cudnnBackendDescriptor_t *descriptor)
{
    const void *argv[] = { &descriptorType, &descriptor };
    if (descriptorType != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !descriptor)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendCreateDescriptor, argv);
    struct variant_pack *p = calloc(1, sizeof *p);
    if (!p)
        return CUDNN_STATUS_ALLOC_FAILED;
    rgpu_keyed_set(&packs, p, (int64_t)(intptr_t)p);
    *descriptor = (cudnnBackendDescriptor_t)p;
    return CUDNN_STATUS_SUCCESS;
}

static void pack_free(struct variant_pack *p)
{
    for (unsigned i = 0; i < p->n; i++)
        free(p->attr[i].bytes);
    free(p);
}

#undef cudnnBackendDestroyDescriptor
RGPU_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    const void *argv[] = { &descriptor };
    struct variant_pack *p = pack_of(descriptor);
    if (!p)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendDestroyDescriptor, argv);
    rgpu_keyed_remove(&packs, descriptor);
    pack_free(p);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t pack_set(struct variant_pack *p, cudnnBackendAttributeName_t name,
                              cudnnBackendAttributeType_t type, int64_t count,
                              const void *elements)
{
    uint32_t size = rgpu_cudnn_type_size((int)type);
    if (p->finalized)
        return CUDNN_STATUS_NOT_INITIALIZED;    /* cuDNN: set after finalize */
    if (!rgpu_cudnn_is_pack_attribute(name) || !size || count < 0 || (count && !elements) ||
        (uint64_t)count > RGPU_COPY_CHUNK / size)
        return CUDNN_STATUS_BAD_PARAM;
    unsigned i = 0;
    while (i < p->n && p->attr[i].name != name)
        i++;
    if (i == MAX_ATTRS)
        return CUDNN_STATUS_BAD_PARAM;
    void *copy = malloc(count ? (size_t)count * size : 1);
    if (!copy)
        return CUDNN_STATUS_ALLOC_FAILED;
    if (count)
        memcpy(copy, elements, (size_t)count * size);
    if (i == p->n)
        p->n++;
    else
        free(p->attr[i].bytes);
    p->attr[i] = (struct pack_attr){ name, type, count, copy };
    return CUDNN_STATUS_SUCCESS;
}

#undef cudnnBackendSetAttribute
RGPU_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t elementCount,
                                                   const void *arrayOfElements)
{
    const void *argv[] = { &descriptor, &attributeName, &attributeType, &elementCount,
                           &arrayOfElements };
    struct variant_pack *p = pack_of(descriptor);
    if (!p)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendSetAttribute, argv);
    return pack_set(p, attributeName, attributeType, elementCount, arrayOfElements);
}

#undef cudnnBackendGetAttribute
RGPU_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t requestedElementCount,
                                                   int64_t *elementCount, void *arrayOfElements)
{
    const void *argv[] = { &descriptor, &attributeName, &attributeType, &requestedElementCount,
                           &elementCount, &arrayOfElements };
    struct variant_pack *p = pack_of(descriptor);
    if (!p)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendGetAttribute, argv);
    for (unsigned i = 0; i < p->n; i++) {
        const struct pack_attr *a = &p->attr[i];
        if (a->name != attributeName)
            continue;
        if (a->type != attributeType || requestedElementCount < 0)
            return CUDNN_STATUS_BAD_PARAM;
        int64_t n = requestedElementCount < a->count ? requestedElementCount : a->count;
        if (elementCount)
            *elementCount = a->count;
        if (n && arrayOfElements)
            memcpy(arrayOfElements, a->bytes, (size_t)n * rgpu_cudnn_type_size((int)a->type));
        return CUDNN_STATUS_SUCCESS;
    }
    if (elementCount)
        *elementCount = 0;
    return rgpu_cudnn_is_pack_attribute(attributeName) ? CUDNN_STATUS_SUCCESS
                                                       : CUDNN_STATUS_BAD_PARAM;
}

/* The checks cuDNN makes when a pack is finalized: as many pointers as
 * unique ids. */
static int64_t attr_count(const struct variant_pack *p, cudnnBackendAttributeName_t name)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->attr[i].name == name)
            return p->attr[i].count;
    return 0;
}

#undef cudnnBackendFinalize
RGPU_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    const void *argv[] = { &descriptor };
    struct variant_pack *p = pack_of(descriptor);
    if (!p)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendFinalize, argv);
    if (attr_count(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) !=
        attr_count(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS))
        return CUDNN_STATUS_BAD_PARAM;
    p->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- execute: the plan and the pack's record in one request ------------------------ */

/* The pack's attributes as a table and one run of their bytes
 * (rgpu_cudnn_execute, codegen/cudnn_own.h); the call goes without waiting
 * when the handle and the plan are ones this process holds (async). */
static cudnnStatus_t execute_pack(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  const struct variant_pack *p)
{
    struct rgpu_cudnn_pack_attr attrs[MAX_ATTRS];
    size_t size[MAX_ATTRS], total = 0;
    if (!p->finalized)
        return CUDNN_STATUS_BAD_PARAM;
    for (unsigned i = 0; i < p->n; i++) {
        const struct pack_attr *a = &p->attr[i];
        size[i] = (size_t)a->count * rgpu_cudnn_type_size((int)a->type);
        attrs[i] = (struct rgpu_cudnn_pack_attr){ a->name, a->type, a->count, total };
        total += size[i];
    }
    char *bytes = malloc(total ? total : 1);
    if (!bytes)
        return CUDNN_STATUS_ALLOC_FAILED;
    for (unsigned i = 0; i < p->n; i++)
        if (size[i])
            memcpy(bytes + attrs[i].offset, p->attr[i].bytes, size[i]);
    cudnnStatus_t rc = rgpu_cudnn_execute(handle, plan, attrs, p->n, bytes, total);
    free(bytes);
    return rc;
}

#undef cudnnBackendExecute
RGPU_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                              cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack)
{
    const void *argv[] = { &handle, &executionPlan, &variantPack };
    struct variant_pack *p = pack_of(variantPack);
    if (!p)
        return (cudnnStatus_t)rgpu_call(LIB, RGPU_CUDNN_cudnnBackendExecute, argv);
    return execute_pack(handle, executionPlan, p);
}

/* Building a CUDA graph from a plan and a pack: the pack would have to be
 * made on the server first.  Refused for packs kept here (all of them). */
static cudnnStatus_t graph_with_pack(const struct rgpu_proc *proc, const char *name,
                                     const void *const *argv, cudnnBackendDescriptor_t pack)
{
    static int logged;
    if (!pack_of(pack))
        return (cudnnStatus_t)rgpu_call(LIB, proc, argv);
    return (cudnnStatus_t)rgpu_refused(LIB, name,
                                       "variant packs live on the client: not remoted yet",
                                       &logged);
}

#undef cudnnBackendPopulateCudaGraph
RGPU_EXPORT cudnnStatus_t cudnnBackendPopulateCudaGraph(cudnnHandle_t handle,
                                                        cudnnBackendDescriptor_t executionPlan,
                                                        cudnnBackendDescriptor_t variantPack,
                                                        cudaGraph_t graph)
{
    const void *argv[] = { &handle, &executionPlan, &variantPack, &graph };
    return graph_with_pack(RGPU_CUDNN_cudnnBackendPopulateCudaGraph,
                           "cudnnBackendPopulateCudaGraph", argv, variantPack);
}

#undef cudnnBackendUpdateCudaGraph
RGPU_EXPORT cudnnStatus_t cudnnBackendUpdateCudaGraph(cudnnHandle_t handle,
                                                      cudnnBackendDescriptor_t executionPlan,
                                                      cudnnBackendDescriptor_t variantPack,
                                                      cudaGraph_t graph)
{
    const void *argv[] = { &handle, &executionPlan, &variantPack, &graph };
    return graph_with_pack(RGPU_CUDNN_cudnnBackendUpdateCudaGraph,
                           "cudnnBackendUpdateCudaGraph", argv, variantPack);
}
