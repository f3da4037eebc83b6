/* Writing a file the caller named, with text the server produced (a
 * graph's dot description): the stubs of the runtime and of the driver. */
#ifndef RGPU_WRITE_FILE_H
#define RGPU_WRITE_FILE_H

#include <stddef.h>
#include <stdio.h>

/* 0 when all of data reached path (created or truncated), else -1. */
static inline int rgpu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    int closed = fclose(f);
    return put == len && closed == 0 ? 0 : -1;
}

#endif
