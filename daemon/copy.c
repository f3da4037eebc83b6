/* Bulk copies on the server: staging and the pipelines of pieces.
 *
 * A host-to-device copy's payload is not read into a frame buffer: the
 * handler reads it from the socket a piece at a time into one of two
 * staging buffers and copies each piece asynchronously, so that the PCIe
 * copy of one piece runs while the next arrives.  A device-to-host copy
 * goes the other way: the GPU fills one buffer while the other is sent, as
 * a data frame ahead of the reply (common/rgpu_proto.h).  There every
 * piece's copy is waited for before its call returns.  A copy to the
 * device that the client does not wait for goes through a ring instead,
 * whose pieces outlive the request (below, "the staging ring"): a stretch
 * is written again only after an event says the GPU has read it, and the
 * ring is drained before a context is destroyed or a device reset.
 *
 * The staging buffers and the ring are the session's own memory, page-locked with
 * cuMemHostRegister where the driver lets us, so that the driver's DMA
 * reads and writes them directly instead of passing pageable memory
 * through a staging copy of its own.  Registered rather than allocated
 * with cuMemHostAlloc: a context or device reset unregisters them but
 * cannot free them, so they stay valid (only pageable until pinned again).
 * Where the driver refuses (or the fake backend lacks the call) they stay
 * ordinary memory and the copies are as correct, if slower. */
#include "copy.h"
#include "owned.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A piece: large enough that a system call and a copy launch per piece are
 * noise, small enough that the pipeline fills and drains quickly. */
#define PIECE ((size_t)1 << 20)

struct staging {
    pthread_mutex_t lock;
    char *buf;                  /* two pieces */
    unsigned pinned_in;         /* the pinning generation it was tried in; 0: never */
};

/* One set per direction: a device-to-host copy of one client thread may
 * run while another thread's host-to-device payload is read. */
static struct staging to_device = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };
static struct staging to_host = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };
static atomic_uint pinning = 1;

void copy_forget_pinning(void)
{
    atomic_fetch_add(&pinning, 1);
}

/* Pin size bytes at buf if not tried since the last reset: needs a
 * current context (a driver-API program may have none yet; then later). */
static void pin_buffer(void *buf, size_t size, unsigned *pinned_in)
{
    __typeof__(&cuMemHostRegister_v2) reg =
        (__typeof__(&cuMemHostRegister_v2))backend_sym("cuda", "cuMemHostRegister_v2");
    __typeof__(&cuCtxGetCurrent) current =
        (__typeof__(&cuCtxGetCurrent))backend_sym("cuda", "cuCtxGetCurrent");
    unsigned gen = atomic_load(&pinning);
    CUcontext ctx = NULL;

    if (*pinned_in == gen)
        return;
    if (!reg || !current) {
        *pinned_in = gen;
        return;
    }
    if (current(&ctx) != CUDA_SUCCESS || !ctx)
        return;
    /* Portable: pinned for every context, whichever device copies. */
    CUresult rc = reg(buf, size, CU_MEMHOSTREGISTER_PORTABLE);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        rgpu_debug("copy staging (%zu KiB) page-locked", size >> 10);
    else
        rgpu_debug("copy staging stays pageable: cuMemHostRegister returned %d", (int)rc);
    *pinned_in = gen;
}

static void pin(struct staging *st)
{
    pin_buffer(st->buf, 2 * PIECE, &st->pinned_in);
}

/* Lock st and make its buffers ready; -1 (unlocked) when out of memory. */
static int staging_take(struct staging *st)
{
    pthread_mutex_lock(&st->lock);
    if (!st->buf) {
        void *p;
        if (posix_memalign(&p, 4096, 2 * PIECE) != 0) {
            pthread_mutex_unlock(&st->lock);
            return -1;
        }
        st->buf = p;
    }
    pin(st);
    return 0;
}

static size_t piece_len(size_t count, size_t off)
{
    return count - off < PIECE ? count - off : PIECE;
}

int copy_htod_streamed(const struct copy_api *api, uint64_t dst, uint64_t stream)
{
    struct staging *st = &to_device;
    size_t count = serve_stream_left(), off = 0;
    int status = 0, in_flight = 0;

    if (staging_take(st) < 0)
        return -RGPU_ENOMEM;
    for (unsigned i = 0; off < count; i++) {
        size_t n = piece_len(count, off);
        char *b = st->buf + (i & 1) * PIECE;
        /* This buffer's last copy (two pieces ago) was waited for before
         * the previous piece's began; the previous one runs meanwhile. */
        serve_stream_read(b, n);
        if (in_flight) {
            int rc = api->sync(stream);
            status = status ? status : rc;
            in_flight = 0;
        }
        if (status == 0) {
            status = api->htod(dst + off, b, n, stream);
            in_flight = status == 0;
        }
        off += n;
    }
    if (in_flight) {
        int rc = api->sync(stream);
        status = status ? status : rc;
    }
    pthread_mutex_unlock(&st->lock);
    return status;
}

int copy_dtoh_streamed(const struct copy_api *api, uint64_t src, size_t count, uint64_t stream)
{
    struct staging *st = &to_host;
    size_t off = 0;

    if (staging_take(st) < 0)
        return -RGPU_ENOMEM;
    /* The first piece before anything is sent: a copy that fails at once
     * (a poisoned context, a bad stream) gets a plain error reply. */
    int status = api->dtoh(st->buf, src, piece_len(count, 0), stream);
    if (status == 0)
        status = api->sync(stream);
    if (status != 0) {
        pthread_mutex_unlock(&st->lock);
        return status;
    }
    serve_data_begin(count);
    int valid = 1;                          /* whether this piece's bytes are good */
    for (unsigned i = 0; off < count; i++) {
        size_t n = piece_len(count, off), next = off + n;
        char *b = st->buf + (i & 1) * PIECE, *nb = st->buf + ((i + 1) & 1) * PIECE;
        int issued = 0;
        /* The next piece's buffer was sent from last time round. */
        if (next < count && status == 0) {
            status = api->dtoh(nb, src + next, piece_len(count, next), stream);
            issued = status == 0;
        }
        if (!valid)
            memset(b, 0, n);                /* a failed copy's garbage is not sent */
        serve_data_write(b, n);
        valid = 0;
        if (issued) {
            int rc = api->sync(stream);
            status = status ? status : rc;
            valid = rc == 0;
        }
        off = next;
    }
    serve_data_end();
    pthread_mutex_unlock(&st->lock);
    return status;
}

/* ---- copies to the device that nothing waits for: the staging ring ----------------
 *
 * A copy to the device that the client sent without waiting for its reply
 * (RGPU_CALL_NOREPLY) need not have finished when its request returns:
 * CUDA promises the caller only that its buffer may be reused, which holds
 * once the bytes are here (a copy from pageable memory natively too may
 * reach the device after the call returns).  Waiting for the copy would
 * make rgpud, and the requests behind it in the socket, wait for all the
 * work its stream holds (a training step's batch waits for the whole
 * previous step), and the GPU would then idle until the next requests
 * arrived.  So such a copy's bytes go into a ring of page-locked memory and
 * are copied asynchronously, each piece followed by an event in its stream;
 * a stretch of the ring is written again only once the events of the
 * copies that read it have completed.  With the ring full, the oldest copy
 * is waited for: the ring bounds how far the server runs ahead of the
 * GPU's copies.  A copy whose client waits, one into a stream under
 * capture (the copy would become a graph node reading the ring), and a
 * backend without the driver's event calls keep copy_htod_streamed's
 * copy-then-synchronise. */

#define RING_SIZE ((size_t)32 << 20)
#define RING_COPIES 256                 /* pieces in flight at most */

struct ring_piece {
    size_t off, len;
    CUevent done;                       /* recorded after the piece's copy */
};

static struct {
    pthread_mutex_t lock;
    char *buf;
    unsigned pinned_in;
    size_t head;                        /* where the next piece goes */
    struct ring_piece flight[RING_COPIES];      /* oldest at first */
    unsigned first, count;
} ring = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The driver's calls the ring needs, from the backend; NULL where absent. */
static struct {
    __typeof__(&cuStreamGetCtx) stream_ctx;
    __typeof__(&cuStreamIsCapturing) capturing;
    __typeof__(&cuCtxPushCurrent_v2) push;
    __typeof__(&cuCtxPopCurrent_v2) pop;
    __typeof__(&cuEventCreate) create;
    __typeof__(&cuEventRecord) record;
    __typeof__(&cuEventSynchronize) wait;
    __typeof__(&cuEventDestroy_v2) destroy;
} ev;
static pthread_once_t ev_once = PTHREAD_ONCE_INIT;

#define EV_SYM(field, name) ev.field = (__typeof__(ev.field))backend_sym("cuda", name)

static void ev_resolve(void)
{
    EV_SYM(stream_ctx, "cuStreamGetCtx");
    EV_SYM(capturing, "cuStreamIsCapturing");
    EV_SYM(push, "cuCtxPushCurrent_v2");
    EV_SYM(pop, "cuCtxPopCurrent_v2");
    EV_SYM(create, "cuEventCreate");
    EV_SYM(record, "cuEventRecord");
    EV_SYM(wait, "cuEventSynchronize");
    EV_SYM(destroy, "cuEventDestroy_v2");
}

/* Whether a copy into stream may go through the ring: the backend has
 * the calls, and the stream is not capturing (a stream whose capture
 * state cannot be told, a legacy stream while another captures, neither). */
static int ring_usable(uint64_t stream)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_once(&ev_once, ev_resolve);
    return ev.stream_ctx && ev.capturing && ev.push && ev.pop && ev.create && ev.record &&
           ev.wait && ev.destroy && ev.capturing((CUstream)stream, &st) == CUDA_SUCCESS &&
           st == CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Wait for the oldest piece in flight and free its stretch.  An event
 * that fails to wait belongs to a context with a sticky error, whose
 * copies will not run: its stretch is free as well (copy_drain empties
 * the ring before any context goes). */
static void ring_retire_oldest(void)
{
    struct ring_piece *p = &ring.flight[ring.first];
    (void)ev.wait(p->done);
    (void)ev.destroy(p->done);
    ring.first = (ring.first + 1) % RING_COPIES;
    if (--ring.count == 0)
        ring.head = 0;
}

/* Where n (at most PIECE) bytes can go: after the newest piece, or at the
 * start once the end is too short, waiting for old pieces until there is
 * room.  The pieces in flight always lie from the oldest's offset, maybe
 * wrapping round, to head. */
static size_t ring_claim(size_t n)
{
    for (;;) {
        if (ring.count == 0)
            return 0;
        if (ring.count < RING_COPIES) {
            size_t tail = ring.flight[ring.first].off;
            if (ring.head > tail) {
                if (n <= RING_SIZE - ring.head)
                    return ring.head;
                if (n <= tail)
                    return 0;
            } else if (ring.head < tail && n <= tail - ring.head) {
                return ring.head;
            }
        }
        ring_retire_oldest();
    }
}

/* An event after the work stream holds so far, made in the stream's
 * context (an event records only on a stream of its own context); NULL
 * when the driver makes none. */
static CUevent event_after(uint64_t stream)
{
    CUcontext ctx = NULL, popped;
    CUevent e = NULL;
    if (ev.stream_ctx((CUstream)stream, &ctx) != CUDA_SUCCESS || !ctx ||
        ev.push(ctx) != CUDA_SUCCESS)
        return NULL;
    if (ev.create(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        e = NULL;
    } else if (ev.record(e, (CUstream)stream) != CUDA_SUCCESS) {
        (void)ev.destroy(e);
        e = NULL;
    }
    (void)ev.pop(&popped);
    return e;
}

static int ring_take(void)
{
    pthread_mutex_lock(&ring.lock);
    if (!ring.buf) {
        void *p;
        if (posix_memalign(&p, 4096, RING_SIZE) != 0) {
            pthread_mutex_unlock(&ring.lock);
            return -1;
        }
        ring.buf = p;
    }
    pin_buffer(ring.buf, RING_SIZE, &ring.pinned_in);
    return 0;
}

/* count bytes to dst through the ring, from data, or from the socket when
 * data is NULL; nothing waits for the GPU unless the ring is full. */
static int copy_htod_staged(const struct copy_api *api, uint64_t dst, uint64_t stream,
                            const void *data, size_t count)
{
    int status = 0;
    if (ring_take() < 0)
        return -RGPU_ENOMEM;
    for (size_t off = 0; off < count && status == 0;) {
        size_t n = piece_len(count, off), at = ring_claim(n);
        char *b = ring.buf + at;
        if (data)
            memcpy(b, (const char *)data + off, n);
        else
            serve_stream_read(b, n);
        status = api->htod(dst + off, b, n, stream);
        if (status == 0) {
            CUevent e = event_after(stream);
            if (e) {
                ring.flight[(ring.first + ring.count) % RING_COPIES] = (struct ring_piece){ at, n, e };
                ring.count++;
                ring.head = at + n;
            } else {
                status = api->sync(stream);     /* no event: wait, and the stretch is free */
            }
        }
        off += n;
    }
    pthread_mutex_unlock(&ring.lock);
    return status;
}

void copy_drain(void)
{
    pthread_mutex_lock(&ring.lock);
    while (ring.count)
        ring_retire_oldest();
    pthread_mutex_unlock(&ring.lock);
}

/* ---- one copy, for either API ------------------------------------------------------ */

/* Only the session's device memory (daemon/owned.c): the codec checked the
 * range already; asked again, so that no annotation change can open the
 * server's own memory to a copy. */
static int device_range_ok(uint64_t ptr, size_t count)
{
    return (ptr || !count) && owned_range(ptr, count);
}

int copy_htod(const struct copy_api *api, uint64_t dst, uint64_t stream, const void *data,
              size_t count)
{
    if (!api->available())
        return -RGPU_ENOSYM;
    if (!device_range_ok(dst, count) || (!data && !serve_stream_left() && count))
        return api->invalid_value;
    if (count && !serve_waited() && ring_usable(stream))
        return copy_htod_staged(api, dst, stream, serve_stream_left() ? NULL : data,
                                serve_stream_left() ? serve_stream_left() : count);
    if (serve_stream_left())
        return copy_htod_streamed(api, dst, stream);
    int rc = api->htod(dst, data, count, stream);
    return rc ? rc : api->sync(stream);     /* the frame is freed after we return */
}

int copy_dtoh(const struct copy_api *api, void *data, size_t count, uint64_t src,
              uint64_t stream)
{
    char none;
    if (!api->available())
        return -RGPU_ENOSYM;
    if (count > RGPU_FRAME_MAX - 4096)          /* its data frame must fit a frame */
        return -RGPU_ETOOBIG;
    if (!device_range_ok(src, count) || (!data && !serve_sink_len() && count))
        return api->invalid_value;
    if (serve_sink_len())
        return copy_dtoh_streamed(api, src, count, stream);
    int rc = api->dtoh(data ? data : &none, src, count, stream);
    return rc ? rc : api->sync(stream);
}

int copy_served(int rc)
{
    return rc < 0 ? serve_transport(-rc) : rc;
}
