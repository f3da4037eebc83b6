/* Module images on their way to rgpud (client core).
 *
 * A module image, a fatbin registered by the runtime or a link input can
 * be larger than a frame (RGPU_FRAME_MAX).  Images up to
 * RGPU_IMAGE_INLINE_MAX travel inside the request that loads them; larger
 * ones go ahead in pieces (rgpu_image_piece of rgpu's own library,
 * codegen/rgpu_own.h), which the session assembles in a buffer of the
 * calling thread (daemon/image_stage.c), and the request names the image
 * by its size alone.
 *
 * The first piece waits for its answer: it is where the server says
 * whether it will hold an image that large (its staging limit).  The
 * others go without waiting where the waiting policy lets them: the
 * request that loads the image runs after them and reports what went
 * wrong.  Each piece is written from the caller's image, and the session
 * reads it from the socket straight into the staging buffer (a stream
 * parameter). */
#include "rgpu_client.h"
#include "rgpu_procs.h"
#include "rgpu_own.h"

/* A status of rgpu's own library as lib's. */
static int lib_status(const struct rgpu_lib *lib, int status, int no_memory)
{
    switch (status) {
    case RGPU_STATUS_OK:
        return 0;
    case RGPU_STATUS_NO_MEMORY:
        return no_memory;
    case RGPU_STATUS_UNAVAILABLE:
        return lib->unavailable;
    default:
        return lib->not_supported;
    }
}

static int send_piece(const unsigned char *image, size_t total, size_t offset, int wait)
{
    uint64_t t = total, off = offset;
    size_t size = total - offset < RGPU_IMAGE_PIECE ? total - offset : RGPU_IMAGE_PIECE;
    const void *piece = image + offset;
    const void *argv[] = { &t, &off, &size, &piece };
    return rgpu_call_unwaited_when(&rgpu_rgpu_lib, RGPU_RGPU_rgpu_image_piece, argv, !wait);
}

int rgpu_image_stage(const struct rgpu_lib *lib, const void *image, size_t size, int no_memory,
                     const void **bytes)
{
    *bytes = image;
    if (size <= RGPU_IMAGE_INLINE_MAX)
        return 0;
    *bytes = NULL;
    for (size_t off = 0; off < size; off += RGPU_IMAGE_PIECE) {
        int rc = send_piece(image, size, off, off == 0 || !rgpu_may_skip_reply());
        if (rc != RGPU_STATUS_OK) {
            rc = lib_status(lib, rc, no_memory);
            return lib->is_runtime ? rgpu_runtime_result(rc) : rc;
        }
    }
    return 0;
}
