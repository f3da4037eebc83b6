/* Checks of module images the client sends (image_check.c). */
#ifndef IMAGE_CHECK_H
#define IMAGE_CHECK_H

#include <stddef.h>

enum {
    IMAGE_OK = 0,
    IMAGE_BAD = 1,          /* headers that point outside the buffer */
    IMAGE_WRAPPER = 2,      /* a fatbin wrapper: its pointer would be followed */
};

/* Whether the n bytes at image hold one module image whose own headers
 * describe it entirely inside them.  IMAGE_OK when they do. */
int image_check(const void *image, size_t n);

/* A malloc'd copy of n bytes followed by zero bytes (a terminating NUL
 * for PTX, no "next container" for a fatbin), or NULL. */
void *image_copy(const void *image, size_t n);
/* image_check() == IMAGE_OK, with a log line saying why not. */
int image_acceptable(const void *image, size_t n);

#endif
