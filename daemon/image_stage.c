/* Module images larger than a frame, assembled from pieces (client side:
 * common/rgpu_image.c; the wire: common/rgpu_hand_procs.h).
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
#include "rgpu_hand_procs.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"

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

int image_piece(struct hand_call *c, int oom_status)
{
    uint64_t total, offset;
    const void *p;
    size_t n;
    if (args_count(c, 3) || arg_u64(c, 0, &total) || arg_u64(c, 1, &offset) ||
        arg_bin(c, 2, &p, &n))
        return -RGPU_EPROTO;
    if (c->in_len)
        n = c->in_len;              /* a large piece waits in the socket */
    if (total == 0 || offset > total || n > total - offset || n > RGPU_IMAGE_PIECE)
        return -RGPU_EPROTO;
    if (offset == 0 && staging_begin(total) < 0) {
        msgpack_pack_array(c->out, 0);
        return oom_status;          /* the session drops the payload */
    }
    if (!staging.buf || staging.total != total || staging.received != offset)
        return -RGPU_EPROTO;
    if (c->in_len)
        hand_read_payload(c, staging.buf + offset, n);
    else
        memcpy(staging.buf + offset, p, n);
    staging.received += n;
    msgpack_pack_array(c->out, 0);
    return 0;
}

int image_arg(const struct hand_call *c, unsigned i, struct image_arg *img)
{
    uint64_t size;
    memset(img, 0, sizeof *img);
    if (arg_bin(c, i, &img->p, &img->n) == 0)
        return 0;
    /* Else the size of the image this thread staged, complete. */
    if (arg_u64(c, i, &size) < 0 || !staging.buf || staging.total != size ||
        staging.received != size)
        return -1;
    img->p = img->staged = staging.buf;
    img->n = size;
    staging.buf = NULL;             /* the image's now; still reserved */
    staging.total = staging.received = 0;
    return 0;
}

void *image_for_library(const struct image_arg *img)
{
    return img->staged ? img->staged : image_copy(img->p, img->n);
}

void image_done(struct image_arg *img, void *lib_copy)
{
    if (lib_copy && lib_copy != img->staged)
        free(lib_copy);
    if (img->staged) {
        free(img->staged);
        unreserve(img->n);
    }
    memset(img, 0, sizeof *img);
}
