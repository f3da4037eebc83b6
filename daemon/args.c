/* The running call of rgpu's own procedures' serve_ functions (serve_call):
 * its bulk bytes, and the launch arguments' layout. */
#include "rgpud.h"
#include "rgpu_log.h"

#include <stdio.h>
#include <string.h>

_Thread_local struct hand_call *serve_call;

int serve_waited(void)
{
    return !serve_call || !serve_call->noreply;
}

size_t serve_stream_left(void)
{
    return serve_call ? serve_call->in_len : 0;
}

void serve_stream_read(void *buf, size_t len)
{
    hand_read_payload(serve_call, buf, len);
}

size_t serve_sink_len(void)
{
    return serve_call ? serve_call->sink_len : 0;
}

void serve_data_begin(size_t len)
{
    hand_data_begin(serve_call, len);
}

void serve_data_write(const void *p, size_t n)
{
    hand_data_write(serve_call, p, n);
}

void serve_data_end(void)
{
    hand_data_end(serve_call);
}

/* Kernel arguments where the driver reads them: a CUtensorMap argument
 * must sit 64-byte aligned (the driver refuses the launch otherwise), as
 * it would in the program's memory, and the frame's bytes have no such
 * alignment.  Copied into the serving thread's buffer, aligned to 128
 * bytes; a launch reads it before it returns.  CUDA takes at most 32764
 * bytes of arguments. */
const void *params_aligned(const void *params, size_t len)
{
    static _Thread_local _Alignas(128) unsigned char buf[32768];
    if (len > sizeof buf)
        return NULL;
    if (len)
        memcpy(buf, params, len);
    return buf;
}

int layout_argv(const uint32_t *offset, const uint32_t *size, unsigned n, const void *params,
                size_t len, void **argv, unsigned max)
{
    if (n > max)
        return -1;
    params = params_aligned(params, len);
    if (!params)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        if ((size_t)offset[i] + size[i] > len)
            return -1;
        argv[i] = (char *)params + offset[i];
    }
    return 0;
}
