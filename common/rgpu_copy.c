/* Bulk copies between client memory and device memory, in chunks of
 * RGPU_COPY_CHUNK, shared by the runtime and driver stubs, through rgpu's
 * own copy procedures (codegen/cudart_own.h: rgpu_htod, rgpu_dtoh and the
 * 2D ones; the driver's rgpu_cu_htod, rgpu_cu_dtoh).  Both directions keep
 * the connection busy: host-to-device chunks go without waiting (the last
 * one waits where the caller's policy says so), device-to-host requests
 * are kept several in flight.  Neither copies the bytes on this side: a
 * chunk is written from the program's buffer (a stream parameter), and a
 * large reply's bytes are read straight into it (a sink, as a data frame:
 * common/rgpu_proto.h). */
#include "rgpu_client.h"

#include <stdlib.h>
#include <string.h>

#define DTOH_IN_FLIGHT 4

static size_t chunk_len(size_t count, size_t off)
{
    return count - off < RGPU_COPY_CHUNK ? count - off : RGPU_COPY_CHUNK;
}

/* ---- through rgpu's own procedures ---------------------------------------------- */

int rgpu_copy_to_device(const struct rgpu_lib *lib, const struct rgpu_proc *proc, uint64_t dst,
                        const void *src, size_t count, uint64_t stream, int wait)
{
    size_t off = 0;
    do {
        size_t n = chunk_len(count, off);
        int last = off + n >= count && wait;
        uint64_t at = dst + off;
        const void *data = (const char *)src + off;
        /* rgpu's shared-memory copies name no stream (the server's own). */
        const void *with_stream[] = { &at, &stream, &n, &data }, *without[] = { &at, &n, &data };
        const void **argv = proc->nparams == 3 ? without : with_stream;
        struct rgpu_inflight f;
        int rc = rgpu_call_post(lib, proc, argv, last ? &f : NULL);
        if (rc == 0 && last)
            rc = rgpu_call_finish(lib, proc, argv, &f);
        if (rc != 0 || last)
            return rc;
        off += n;
    } while (off < count);
    return 0;
}

/* One device-to-host chunk in flight: its arguments stay put until its
 * reply is collected (the stream last: rgpu's shared-memory copies, which
 * name none, take the first three). */
struct chunk_out {
    void *data;
    size_t count;
    uint64_t src, stream;
    const void *argv[4];
    struct rgpu_inflight f;
};

int rgpu_copy_to_host(const struct rgpu_lib *lib, const struct rgpu_proc *proc, void *dst,
                      uint64_t src, size_t count, uint64_t stream)
{
    struct chunk_out ring[DTOH_IN_FLIGHT];
    size_t posted = 0, landed = 0, off = 0;
    int status = 0;

    /* Post up to DTOH_IN_FLIGHT requests ahead, land them in order.  After
     * a failure, the ones already posted are still collected.  A copy of
     * nothing is still one request: its stream and range are checked. */
    while (landed < posted || (status == 0 && (off < count || posted == 0))) {
        if (posted - landed < DTOH_IN_FLIGHT && status == 0 && (off < count || posted == 0)) {
            struct chunk_out *c = &ring[posted % DTOH_IN_FLIGHT];
            *c = (struct chunk_out){ .data = (char *)dst + off, .count = chunk_len(count, off),
                                     .src = src + off, .stream = stream };
            c->argv[0] = &c->data;
            c->argv[1] = &c->count;
            c->argv[2] = &c->src;
            c->argv[3] = &c->stream;
            status = rgpu_call_post(lib, proc, c->argv, &c->f);
            if (status == 0) {
                posted++;
                off += c->count;
            }
            continue;
        }
        struct chunk_out *c = &ring[landed % DTOH_IN_FLIGHT];
        int rc = rgpu_call_finish(lib, proc, c->argv, &c->f);
        if (status == 0)
            status = rc;
        landed++;
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

/* Rows per request of a strided copy to the device: a chunk's worth, at
 * least one. */
static size_t rows_per_request(size_t width, size_t height)
{
    size_t rows = width ? RGPU_COPY_CHUNK / width : height;
    return rows ? (rows < height ? rows : height) : 1;
}

int rgpu_copy_htod_2d(const struct rgpu_lib *lib, const struct rgpu_proc *proc, uint64_t dst,
                      size_t dpitch, const void *src, size_t spitch, size_t width,
                      size_t height, uint64_t stream, int wait)
{
    if (width > RGPU_FRAME_MAX - 4096)
        return rgpu_transport_status(lib, proc->name, RGPU_ETOOBIG);
    size_t step = rows_per_request(width, height), r0 = 0;
    /* A copy of nothing is still one request: its stream and range are
     * checked. */
    do {
        size_t h = height - r0 < step ? height - r0 : step;
        int last = r0 + h >= height;
        size_t rows_size = width * h;
        uint64_t at = dst + r0 * dpitch;
        const char *from = (const char *)src + r0 * spitch;
        /* The rows travel packed (gathered here unless they are already);
         * the server lays them out at dpitch. */
        char *rows = NULL;
        if (spitch != width && h > 1) {
            if (!(rows = malloc(rows_size + 1)))
                return rgpu_transport_status(lib, proc->name, RGPU_ENOMEM);
            for (size_t r = 0; r < h; r++)
                memcpy(rows + r * width, from + r * spitch, width);
        }
        const void *data = rows ? rows : from;
        const void *argv[] = { &at, &dpitch, &width, &h, &stream, &rows_size, &data };
        int rc = rgpu_call_unwaited_when(lib, proc, argv, !(last && wait));
        free(rows);
        if (rc != 0 || last)
            return rc;
        r0 += h;
    } while (r0 < height);
    return 0;
}

int rgpu_copy_dtoh_2d(const struct rgpu_lib *lib, const struct rgpu_proc *proc, void *dst,
                      size_t dpitch, uint64_t src, size_t spitch, size_t width, size_t height,
                      uint64_t stream)
{
    if (width > RGPU_FRAME_MAX - 4096)
        return rgpu_transport_status(lib, proc->name, RGPU_ETOOBIG);
    size_t step = rows_per_request(width, height), r0 = 0;
    int rc = 0;
    do {
        size_t h = height - r0 < step ? height - r0 : step;
        size_t rows_size = width * h;
        uint64_t from = src + r0 * spitch;
        char *at = (char *)dst + r0 * dpitch;
        /* They come back packed: straight into dst when it is, else laid
         * out at dpitch here. */
        char *rows = NULL;
        if (dpitch != width && h > 1 && !(rows = malloc(rows_size + 1)))
            return rgpu_transport_status(lib, proc->name, RGPU_ENOMEM);
        void *data = rows ? rows : at;
        const void *argv[] = { &data, &rows_size, &from, &spitch, &width, &h, &stream };
        rc = rgpu_call_unwaited_when(lib, proc, argv, 0);
        for (size_t r = 0; rc == 0 && rows && r < h; r++)
            memcpy(at + r * dpitch, rows + r * width, width);
        free(rows);
        r0 += h;
    } while (rc == 0 && r0 < height);
    if (rc == 0 && rgpu_mapped_active())
        rgpu_mapped_after_sync();
    return rc;
}
