/* Module images from the client: checks (image_check.c) and images larger
 * than a frame, assembled from pieces (image_stage.c). */
#ifndef IMAGE_CHECK_H
#define IMAGE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "rgpud.h"

enum {
    IMAGE_OK = 0,
    IMAGE_BAD = 1,          /* headers that point outside the buffer */
    IMAGE_WRAPPER = 2,      /* a fatbin wrapper: its pointer would be followed */
};

/* Zero bytes after every image handed to a library. */
#define IMAGE_ZERO_TAIL 64
/* The most a compressed fatbin entry may declare it holds (the largest
 * cubin in the fatbins of PyTorch, cuBLAS, cuDNN, cuFFT, cuSPARSE and
 * cuSOLVER of CUDA 13.0 holds 41 MB). */
#define IMAGE_ENTRY_MAX (256ull << 20)

/* Whether the n bytes at image hold one module image whose own headers
 * describe it entirely inside them: IMAGE_OK when they do, else why (a
 * sentence, in why's whylen bytes; why may be NULL). */
int image_check(const void *image, size_t n, char *why, size_t whylen);
/* The same for an input whose size the call gives (cuLinkAddData): a
 * fatbin, an ELF (cubin or host object) or an ar archive (a library of
 * objects) must lie inside its n bytes; anything else (PTX, LTO-IR) is
 * read by size, and its zero tail ends a string. */
int image_check_sized(const void *image, size_t n, char *why, size_t whylen);

/* A malloc'd copy of n bytes followed by IMAGE_ZERO_TAIL zero bytes (a
 * terminating NUL for PTX, no "next container" for a fatbin), or NULL. */
void *image_copy(const void *image, size_t n);
/* image_check() == IMAGE_OK, or image_check_sized(), with a log line
 * saying why not. */
int image_acceptable(const void *image, size_t n);
int image_acceptable_sized(const void *image, size_t n);

/* ---- image_stage.c: images larger than a frame --------------------------- */

/* The most the staged images of a session may hold together. */
void image_staging_limit(uint64_t bytes);
/* An image parameter of rgpu's own procedures (image_size bytes at image;
 * image NULL: the image of that size this thread staged in pieces,
 * complete; or bytes the request left in the socket): buf, when set, is
 * ours, with IMAGE_ZERO_TAIL zero bytes after it, and reserved when it
 * counts against the staging limit. */
struct image_arg {
    const void *p;
    size_t n;
    unsigned char *buf;
    int reserved;
};
/* 0, or -RGPU_EPROTO when a staged image of that size is not complete
 * (a protocol error), -RGPU_ENOMEM. */
int image_take(const void *image, size_t size, struct image_arg *img);
/* The bytes to hand the library, followed by IMAGE_ZERO_TAIL zeros: our
 * buffer, or a copy of the frame's bytes (NULL: out of memory). */
void *image_for_library(const struct image_arg *img);
/* After the library call: frees the copy and our buffer. */
void image_done(struct image_arg *img, void *lib_copy);

#endif
