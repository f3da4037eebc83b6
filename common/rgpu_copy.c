/* Bulk copies between client memory and device memory, in chunks of
 * RGPU_COPY_CHUNK, shared by the runtime and driver stubs.  Both directions
 * keep the connection busy: host-to-device chunks go without waiting (the
 * last one waits where the caller's policy says so), device-to-host
 * requests are kept several in flight.  Neither copies the bytes on this
 * side: a chunk is written from the program's buffer, and a large reply's
 * bytes are read straight into it (a data frame, common/rgpu_proto.h). */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"

#include <stdlib.h>
#include <string.h>

#define DTOH_IN_FLIGHT 4

static size_t chunk_len(size_t count, size_t off)
{
    return count - off < RGPU_COPY_CHUNK ? count - off : RGPU_COPY_CHUNK;
}

/* The status of a reply whose one output is `want` bytes for dst, copied
 * there row by row (rows of width bytes, dpitch apart); reply freed. */
static int land_rows(const struct rgpu_lib *lib, const char *what, struct rgpu_reply *reply,
                     char *dst, size_t dpitch, size_t width, size_t height)
{
    int rc = rgpu_reply_status(lib, reply);
    const msgpack_object *o = rgpu_reply_bin(reply, 0);
    if (rc == 0 && o && o->via.bin.size == width * height) {
        for (size_t r = 0; r < height; r++)
            memcpy(dst + r * dpitch, o->via.bin.ptr + r * width, width);
    } else if (rc == 0) {
        rc = rgpu_transport_status(lib, what, RGPU_EPROTO);
    }
    rgpu_reply_free(reply);
    return rc;
}

int rgpu_copy_htod(const struct rgpu_lib *lib, uint32_t proc_id, const char *what,
                   uint64_t dst, const void *src, size_t count, uint64_t stream, int wait)
{
    size_t off = 0;
    do {
        size_t n = chunk_len(count, off);
        int last = off + n >= count && wait;
        struct rgpu_req req;
        rgpu_req_begin(&req, proc_id, last ? 0 : RGPU_CALL_NOREPLY);
        rgpu_stats_name(proc_id, what);
        msgpack_pack_array(&req.pk, 3);
        msgpack_pack_uint64(&req.pk, dst + off);
        msgpack_pack_uint64(&req.pk, stream);
        rgpu_req_payload(&req, (const char *)src + off, n);
        if (last)
            return rgpu_req_status(lib, what, &req);
        int rc = rgpu_req_send(&req, NULL);
        if (rc != RGPU_OK)
            return rgpu_transport_status(lib, what, rc);
        off += n;
    } while (off < count);
    return 0;
}

/* Collect one device-to-host reply; the request asked for want bytes at
 * dst.  Large ones landed there already, from a data frame ahead of the
 * reply (whose bin is then empty); small ones come inside it. */
static int land(const struct rgpu_lib *lib, const char *what, struct rgpu_ticket *t,
                char *dst, size_t want)
{
    struct rgpu_reply reply;
    int rc = rgpu_req_wait(t, &reply);
    if (rc != RGPU_OK)
        return rgpu_transport_status(lib, what, rc);
    if (reply.transport != RGPU_OK) {
        rc = reply.transport;
        rgpu_reply_free(&reply);
        return rgpu_transport_status(lib, what, rc);
    }
    rc = rgpu_reply_status(lib, &reply);
    const msgpack_object *o = rgpu_reply_bin(&reply, 0);
    if (rc == 0 && o && reply.sunk == want && want > 0 && o->via.bin.size == 0)
        ;                                       /* in place already */
    else if (rc == 0 && o && reply.sunk == 0 && o->via.bin.size == want && want > 0)
        memcpy(dst, o->via.bin.ptr, want);
    else if (rc == 0 && !(o && reply.sunk == 0 && want == 0))
        rc = rgpu_transport_status(lib, what, RGPU_EPROTO);
    rgpu_reply_free(&reply);
    return rc;
}

int rgpu_copy_dtoh(const struct rgpu_lib *lib, uint32_t proc_id, const char *what, void *dst,
                   uint64_t src, size_t count, uint64_t stream)
{
    struct rgpu_ticket *ring[DTOH_IN_FLIGHT];
    size_t at[DTOH_IN_FLIGHT], len[DTOH_IN_FLIGHT];
    size_t posted = 0, landed = 0, off = 0;
    int status = 0;

    /* Post up to DTOH_IN_FLIGHT requests ahead, land them in order.  After
     * a failure, the ones already posted are still collected. */
    while (landed < posted || (off < count && status == 0) || (count == 0 && posted == 0)) {
        if (posted - landed < DTOH_IN_FLIGHT && status == 0 &&
            (off < count || (count == 0 && posted == 0))) {
            size_t n = chunk_len(count, off);
            struct rgpu_req req;
            rgpu_req_begin(&req, proc_id, 0);
            rgpu_stats_name(proc_id, what);
            msgpack_pack_array(&req.pk, 3);
            msgpack_pack_uint64(&req.pk, src + off);
            msgpack_pack_uint64(&req.pk, n);
            msgpack_pack_uint64(&req.pk, stream);
            rgpu_req_sink(&req, (char *)dst + off, n);
            size_t slot = posted % DTOH_IN_FLIGHT;
            int rc = rgpu_req_post(&req, &ring[slot]);
            if (rc != RGPU_OK || !ring[slot]) {
                status = rgpu_transport_status(lib, what, rc != RGPU_OK ? rc : RGPU_EPROTO);
                continue;
            }
            at[slot] = off;
            len[slot] = n;
            posted++;
            off += n;
            continue;
        }
        size_t slot = landed % DTOH_IN_FLIGHT;
        int rc = land(lib, what, ring[slot], (char *)dst + at[slot], len[slot]);
        if (status == 0)
            status = rc;
        landed++;
        if (count == 0)
            break;
    }
    /* A copy to the host waited for the GPU: what it wrote into shared
     * memory is the program's to read now (rgpu_mapped.c); the server
     * synchronised the stream, so what its kernels printed came ahead of
     * the reply (rgpu_printing.c). */
    if (status == 0 && rgpu_mapped_active())
        rgpu_mapped_after_sync();
    if (status == 0 && count > 0)
        rgpu_printing_stream_synced(stream);
    return status;
}

/* ---- strided copies (cudaMemcpy2D, cublasSetMatrix) -------------------------- */

int rgpu_copy_htod_2d(const struct rgpu_lib *lib, const char *what, uint64_t dst, size_t dpitch,
                      const void *src, size_t spitch, size_t width, size_t height,
                      uint64_t stream)
{
    struct rgpu_req req;
    if ((uint64_t)width * height > RGPU_FRAME_MAX - 4096)
        return rgpu_transport_status(lib, what, RGPU_ETOOBIG);   /* TODO: split tall copies */
    char *rows = malloc(width * height + 1);
    if (!rows)
        return rgpu_transport_status(lib, what, RGPU_ENOMEM);
    /* The rows travel packed; the server lays them out at dpitch. */
    for (size_t r = 0; r < height; r++)
        memcpy(rows + r * width, (const char *)src + r * spitch, width);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_HTOD_2D), 0);
    msgpack_pack_array(&req.pk, 6);
    msgpack_pack_uint64(&req.pk, dst);
    msgpack_pack_uint64(&req.pk, dpitch);
    msgpack_pack_uint64(&req.pk, width);
    msgpack_pack_uint64(&req.pk, height);
    msgpack_pack_uint64(&req.pk, stream);
    rgpu_req_payload(&req, rows, width * height);
    int rc = rgpu_req_status(lib, what, &req);
    free(rows);
    return rc;
}

int rgpu_copy_dtoh_2d(const struct rgpu_lib *lib, const char *what, void *dst, size_t dpitch,
                      uint64_t src, size_t spitch, size_t width, size_t height, uint64_t stream)
{
    struct rgpu_req req;
    struct rgpu_reply reply;
    if ((uint64_t)width * height > RGPU_FRAME_MAX - 4096)
        return rgpu_transport_status(lib, what, RGPU_ETOOBIG);
    rgpu_req_begin(&req, rgpu_proc_id("cudart", RGPU_H_DTOH_2D), 0);
    msgpack_pack_array(&req.pk, 5);
    msgpack_pack_uint64(&req.pk, src);
    msgpack_pack_uint64(&req.pk, spitch);
    msgpack_pack_uint64(&req.pk, width);
    msgpack_pack_uint64(&req.pk, height);
    msgpack_pack_uint64(&req.pk, stream);
    int rc = rgpu_req_exchange(lib, what, &req, &reply);
    if (rc != RGPU_REPLY_READY)
        return rc;
    rc = land_rows(lib, what, &reply, dst, dpitch, width, height);
    if (rc == 0 && rgpu_mapped_active())
        rgpu_mapped_after_sync();
    return rc;
}
