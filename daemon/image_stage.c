/* Module images larger than a frame, assembled from pieces (rgpu_image_piece
 * of rgpu's own library, codegen/rgpu_own.h; client side:
 * common/rgpu_image.c), and the image parameters of the procedures that
 * load them.
 *
 * Each client thread has one image in assembly at most: its pieces arrive
 * in order on that thread's worker (a client thread is one server thread,
 * daemon/session.c), so the buffer is the worker's own (thread-local) and
 * needs no lock.  The first piece names the total size; the buffer is
 * reserved against the session's staging limit (all threads together,
 * rgpud --module-staging-limit, 2 GiB by default) and allocated at once
 * with the zero bytes a library expects after an image (image_copy), so
 * that the assembled image is handed to the library without a copy.  A
 * request that loads the image takes it; it is freed after that call, and
 * an unfinished one when its thread starts another (or when the session
 * ends, with the process).  Anything out of order is a protocol error: the
 * client core never sends it. */
#include "image_check.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_serve.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LIMIT ((uint64_t)2 << 30)

static uint64_t limit = DEFAULT_LIMIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t in_use;             /* reserved by every thread; lock */

static __thread struct {
    unsigned char *buf;             /* total + IMAGE_ZERO_TAIL bytes */
    uint64_t total, received;
} staging;

void image_staging_limit(uint64_t bytes)
{
    limit = bytes;
}

static int reserve(uint64_t n)
{
    pthread_mutex_lock(&lock);
    int ok = n <= limit && in_use <= limit - n;
    if (ok)
        in_use += n;
    pthread_mutex_unlock(&lock);
    return ok;
}

static void unreserve(uint64_t n)
{
    pthread_mutex_lock(&lock);
    in_use -= n;
    pthread_mutex_unlock(&lock);
}

static void staging_drop(void)
{
    if (!staging.buf)
        return;
    free(staging.buf);
    unreserve(staging.total);
    memset(&staging, 0, sizeof staging);
}

/* A new image of total bytes for this thread: 0, or -1 when the limit or
 * the memory refuses it. */
static int staging_begin(uint64_t total)
{
    staging_drop();
    if (!reserve(total)) {
        rgpu_warn("refusing a module image of %llu bytes: the session's staging limit is "
                  "%llu bytes (rgpud --module-staging-limit)",
                  (unsigned long long)total, (unsigned long long)limit);
        return -1;
    }
    staging.buf = total <= SIZE_MAX - IMAGE_ZERO_TAIL ? malloc(total + IMAGE_ZERO_TAIL) : NULL;
    if (!staging.buf) {
        unreserve(total);
        rgpu_warn("cannot allocate %llu bytes for a module image", (unsigned long long)total);
        return -1;
    }
    memset(staging.buf + total, 0, IMAGE_ZERO_TAIL);
    staging.total = total;
    staging.received = 0;
    return 0;
}

/* The codec checked that a piece's bytes are size long: in the frame at
 * piece, or left in the socket (serve_stream_left). */
rgpu_status serve_rgpu_image_piece(uint64_t total, uint64_t offset, size_t size,
                                   const void *piece)
{
    size_t in_socket = serve_stream_left();
    if (total == 0 || offset > total || size > total - offset || size > RGPU_IMAGE_PIECE ||
        (size && !piece && !in_socket))
        return serve_transport(RGPU_EPROTO);
    if (offset == 0 && staging_begin(total) < 0)
        return RGPU_STATUS_NO_MEMORY;       /* the session drops the piece's bytes */
    if (!staging.buf || staging.total != total || staging.received != offset)
        return serve_transport(RGPU_EPROTO);
    if (in_socket)
        serve_stream_read(staging.buf + offset, size);
    else if (size)
        memcpy(staging.buf + offset, piece, size);
    staging.received += size;
    return RGPU_STATUS_OK;
}

int image_take(const void *image, size_t size, struct image_arg *img)
{
    memset(img, 0, sizeof *img);
    img->n = size;
    if (serve_stream_left()) {
        /* A large image of the request itself, read straight into a
         * buffer with the zero bytes after it (the codec checked its
         * length). */
        img->buf = size <= SIZE_MAX - IMAGE_ZERO_TAIL ? malloc(size + IMAGE_ZERO_TAIL) : NULL;
        if (!img->buf)
            return -RGPU_ENOMEM;
        serve_stream_read(img->buf, size);
        memset(img->buf + size, 0, IMAGE_ZERO_TAIL);
        img->p = img->buf;
        return 0;
    }
    if (image || size == 0) {
        img->p = image ? image : "";
        return 0;
    }
    /* Else the image this thread staged, complete. */
    if (!staging.buf || staging.total != size || staging.received != size)
        return -RGPU_EPROTO;
    img->p = img->buf = staging.buf;
    img->reserved = 1;
    staging.buf = NULL;             /* the image's now; still reserved */
    staging.total = staging.received = 0;
    return 0;
}

void *image_for_library(const struct image_arg *img)
{
    return img->buf ? img->buf : image_copy(img->p, img->n);
}

void image_done(struct image_arg *img, void *lib_copy)
{
    if (lib_copy && lib_copy != img->buf)
        free(lib_copy);
    free(img->buf);
    if (img->reserved)
        unreserve(img->n);
    memset(img, 0, sizeof *img);
}
