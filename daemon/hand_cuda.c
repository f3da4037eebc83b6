/* Hand-written driver-API procedures, server side (client side:
 * stubs/cuda_hand.c; argument lists: common/rgpu_hand_procs.h).  Modules,
 * libraries and JIT linking: hand_cuda_modules.c. */
#include "rgpud.h"
#include "copy.h"
#include "owned.h"
#include "owned_handles.h"
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REAL(name) ((__typeof__(&name))backend_sym("cuda", #name))
#define NEED(fn) do { if (!(fn)) return -RGPU_ENOSYM; } while (0)
#define PROTO_IF(cond) do { if (cond) return -RGPU_EPROTO; } while (0)

/* A stream the session never handed out is refused before the driver sees
 * it: nouts empty outputs, and the driver's bad-handle status. */
#define STREAM_OR_REFUSE(c, stream, nouts) \
    do { if (!handles_valid(H_STREAM, (stream))) return bad_handle((c), (nouts), "stream"); } \
    while (0)

static int bad_handle(struct hand_call *c, unsigned nouts, const char *what)
{
    rgpu_warn("refused a %s the session never handed out", what);
    msgpack_pack_array(c->out, nouts);
    for (unsigned i = 0; i < nouts; i++)
        msgpack_pack_bin(c->out, 0);
    return CUDA_ERROR_INVALID_HANDLE;
}

static int drv_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
    return REAL(cuMemcpyHtoDAsync_v2)(dst, src, n, (CUstream)stream);
}

static int drv_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
    return REAL(cuMemcpyDtoHAsync_v2)(dst, src, n, (CUstream)stream);
}

static int drv_sync(uint64_t stream)
{
    return REAL(cuStreamSynchronize)((CUstream)stream);
}

static const struct copy_api driver_copies = { drv_htod, drv_dtoh, drv_sync };

/* [dst, stream, bin]; a large bin stays in the socket (daemon/copy.c). */
static int h_htod(struct hand_call *c)
{
    uint64_t dst, stream;
    const void *p;
    size_t n;
    PROTO_IF(args_count(c, 3) || arg_u64(c, 0, &dst) || arg_u64(c, 1, &stream) ||
             arg_bin(c, 2, &p, &n));
    STREAM_OR_REFUSE(c, stream, 0);
    NEED(REAL(cuMemcpyHtoDAsync_v2));
    NEED(REAL(cuStreamSynchronize));
    if (c->in_len)
        n = c->in_len;
    /* Only the session's device memory (daemon/owned.c). */
    if ((!dst && n) || !owned_range(dst, n)) {
        msgpack_pack_array(c->out, 0);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int rc;
    if (c->in_len) {
        rc = copy_htod_streamed(c, &driver_copies, dst, stream);
    } else {
        rc = drv_htod(dst, p, n, stream);
        /* The frame is freed after we return: wait for the bytes to land. */
        if (rc == CUDA_SUCCESS)
            rc = drv_sync(stream);
    }
    if (rc < 0)
        return rc;
    msgpack_pack_array(c->out, 0);
    return rc;
}

/* [src, count, stream] -> [bin]; a large count comes in a data frame ahead
 * of the reply, whose bin is then empty (daemon/copy.c). */
static int h_dtoh(struct hand_call *c)
{
    uint64_t src, count, stream;
    PROTO_IF(args_count(c, 3) || arg_u64(c, 0, &src) || arg_u64(c, 1, &count) ||
             arg_u64(c, 2, &stream));
    STREAM_OR_REFUSE(c, stream, 1);
    if (count > RGPU_FRAME_MAX - 4096)
        return -RGPU_ETOOBIG;
    NEED(REAL(cuMemcpyDtoHAsync_v2));
    NEED(REAL(cuStreamSynchronize));
    if ((!src && count) || !owned_range(src, count)) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_nil(c->out);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (count >= RGPU_STREAM_MIN) {
        int rc = copy_dtoh_streamed(c, &driver_copies, src, count, stream);
        if (rc < 0)
            return rc;
        msgpack_pack_array(c->out, 1);
        msgpack_pack_bin(c->out, 0);
        return rc;
    }
    void *buf = malloc(count ? count : 1);
    if (!buf)
        return -RGPU_ENOMEM;
    int rc = drv_dtoh(buf, src, count, stream);
    if (!rc)
        rc = drv_sync(stream);
    msgpack_pack_array(c->out, 1);
    hand_payload(c, buf, rc ? 0 : count);
    return rc;
}

/* Layouts asked for, by function: a launch must name one of these. */
struct layout {
    uint64_t func;
    unsigned n;
    uint32_t off[512], size[512];
    struct layout *next;
};
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static struct layout *layouts;

static struct layout *find_layout(uint64_t func)
{
    struct layout *l;
    pthread_mutex_lock(&layout_lock);
    for (l = layouts; l && l->func != func; l = l->next)
        ;
    pthread_mutex_unlock(&layout_lock);
    return l;
}

/* [function] -> [[[offset, size]...]] */
static int h_param_layout(struct hand_call *c)
{
    uint64_t func;
    PROTO_IF(args_count(c, 1) || arg_u64(c, 0, &func));
    NEED(REAL(cuFuncGetParamInfo));
    /* An invented handle would reach the driver's lookup: refuse it. */
    if (!guard_function_known(func)) {
        msgpack_pack_array(c->out, 1);
        msgpack_pack_array(c->out, 0);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct layout *l = find_layout(func);
    int rc = CUDA_SUCCESS;
    if (!l) {
        l = calloc(1, sizeof *l);
        if (!l)
            return -RGPU_ENOMEM;
        l->func = func;
        size_t off, size;
        /* A CUkernel cast to CUfunction is a valid launch handle too; its
         * layout comes from cuKernelGetParamInfo. */
        int as_kernel = REAL(cuFuncGetParamInfo)((CUfunction)func, 0, &off, &size) ==
                            CUDA_ERROR_INVALID_HANDLE && REAL(cuKernelGetParamInfo);
        while (l->n < 512) {
            rc = as_kernel ? REAL(cuKernelGetParamInfo)((CUkernel)func, l->n, &off, &size)
                           : REAL(cuFuncGetParamInfo)((CUfunction)func, l->n, &off, &size);
            if (rc != CUDA_SUCCESS)
                break;
            l->off[l->n] = (uint32_t)off;
            l->size[l->n] = (uint32_t)size;
            l->n++;
        }
        /* Asking past the last parameter is how the end is found. */
        if (rc == CUDA_ERROR_INVALID_VALUE || l->n == 512)
            rc = CUDA_SUCCESS;
        if (rc != CUDA_SUCCESS) {
            free(l);
            msgpack_pack_array(c->out, 1);
            msgpack_pack_array(c->out, 0);
            return rc;
        }
        pthread_mutex_lock(&layout_lock);
        l->next = layouts;
        layouts = l;
        pthread_mutex_unlock(&layout_lock);
    }
    msgpack_pack_array(c->out, 1);
    msgpack_pack_array(c->out, l->n);
    for (unsigned i = 0; i < l->n; i++) {
        msgpack_pack_array(c->out, 2);
        msgpack_pack_uint32(c->out, l->off[i]);
        msgpack_pack_uint32(c->out, l->size[i]);
    }
    return rc;
}

/* [function, gx, gy, gz, bx, by, bz, shmem, stream, packed, bin params] */
static int h_launch(struct hand_call *c)
{
    uint64_t v[10];
    const void *params;
    size_t n;
    void *argv[512];
    PROTO_IF(args_count(c, 11) || arg_bin(c, 10, &params, &n) || arg_u64s(c, 10, v));
    STREAM_OR_REFUSE(c, v[8], 0);
    /* The packed path names the function without asking its layout. */
    if (!guard_function_known(v[0]))
        return bad_handle(c, 0, "function");
    NEED(REAL(cuLaunchKernel));
    msgpack_pack_array(c->out, 0);
    if (v[9]) {     /* the caller packed the buffer itself (`extra`) */
        size_t size = n;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)params,
                          CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
        return REAL(cuLaunchKernel)((CUfunction)v[0], (unsigned)v[1], (unsigned)v[2],
                                    (unsigned)v[3], (unsigned)v[4], (unsigned)v[5],
                                    (unsigned)v[6], (unsigned)v[7], (CUstream)v[8], NULL, extra);
    }
    struct layout *l = find_layout(v[0]);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    PROTO_IF(layout_argv(l->off, l->size, l->n, params, n, argv, 512));
    return REAL(cuLaunchKernel)((CUfunction)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
                                (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7],
                                (CUstream)v[8], argv, NULL);
}

const struct hand_proc hand_cuda_procs[] = {
    { "cuda", RGPU_H_CU_HTOD, h_htod },
    { "cuda", RGPU_H_CU_DTOH, h_dtoh },
    { "cuda", RGPU_H_CU_PARAM_LAYOUT, h_param_layout },
    { "cuda", RGPU_H_CU_LAUNCH, h_launch },
};
const int hand_cuda_nprocs = sizeof hand_cuda_procs / sizeof hand_cuda_procs[0];
