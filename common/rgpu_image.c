/* Module images on their way to rgpud (client core).
 *
 * A module image, a fatbin registered by the runtime or a link input can
 * be larger than a frame (RGPU_FRAME_MAX).  Images up to
 * RGPU_IMAGE_INLINE_MAX travel inside the request that loads them; larger
 * ones go ahead in pieces (rgpu.image_piece of the stub's library), which
 * the session assembles in a buffer of the calling thread
 * (daemon/image_stage.c), and the request names the image by its size.
 *
 * The first piece waits for its answer: it is where the server says
 * whether it will hold an image that large (its staging limit).  The
 * others go without waiting where the waiting policy lets them: the
 * request that loads the image runs after them and reports what went
 * wrong.  The session reads each piece straight from the socket into the
 * staging buffer (a streamed payload, daemon/copy.c's hand_streamed). */
#include "rgpu_client.h"
#include "rgpu_hand_procs.h"

static int send_piece(const struct rgpu_lib *lib, const char *what, uint32_t proc,
                      const unsigned char *image, size_t size, size_t offset, int wait)
{
    struct rgpu_req req;
    size_t len = size - offset < RGPU_IMAGE_PIECE ? size - offset : RGPU_IMAGE_PIECE;

    rgpu_req_begin(&req, proc, wait ? 0 : RGPU_CALL_NOREPLY);
    msgpack_pack_array(&req.pk, 3);
    msgpack_pack_uint64(&req.pk, size);
    msgpack_pack_uint64(&req.pk, offset);
    rgpu_req_payload(&req, image + offset, len);
    if (wait)
        return rgpu_req_status(lib, what, &req);
    int t = rgpu_req_send(&req, NULL);
    return t == RGPU_OK ? 0 : rgpu_transport_status(lib, what, t);
}

int rgpu_image_stage(const struct rgpu_lib *lib, const char *what, struct rgpu_image *img,
                     const void *image, size_t size)
{
    uint32_t proc = rgpu_proc_id(lib->name, RGPU_H_IMAGE_PIECE);

    img->bytes = image;
    img->size = size;
    img->staged = size > RGPU_IMAGE_INLINE_MAX;
    if (!img->staged)
        return 0;
    rgpu_stats_name(proc, RGPU_H_IMAGE_PIECE);
    for (size_t off = 0; off < size; off += RGPU_IMAGE_PIECE) {
        int rc = send_piece(lib, what, proc, image, size, off,
                            off == 0 || !rgpu_may_skip_reply());
        if (rc != 0)
            return rc;
    }
    return 0;
}

void rgpu_image_pack(struct rgpu_req *req, const struct rgpu_image *img)
{
    if (img->staged)
        msgpack_pack_uint64(&req->pk, img->size);
    else
        rgpu_req_payload(req, img->bytes, img->size);
}
