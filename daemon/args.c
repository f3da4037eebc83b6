/* Argument helpers for hand-written procedures, and the bulk bytes of
 * rgpu's own procedures' serve_ functions (serve_call). */
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

void hand_payload(struct hand_call *c, void *buf, size_t len)
{
    msgpack_pack_bin(c->out, len);
    c->payload = buf;
    c->payload_len = len;
}

int hand_refuse_handle(struct hand_call *c, unsigned nouts, const char *what, int status)
{
    rgpu_warn("refused a %s the session never handed out", what);
    msgpack_pack_array(c->out, nouts);
    for (unsigned i = 0; i < nouts; i++)
        msgpack_pack_bin(c->out, 0);
    return status;
}

int args_count(const struct hand_call *c, unsigned n)
{
    return c->args->type == MSGPACK_OBJECT_ARRAY && c->args->via.array.size == n ? 0 : -1;
}

static const msgpack_object *arg(const struct hand_call *c, unsigned i)
{
    if (c->args->type != MSGPACK_OBJECT_ARRAY || i >= c->args->via.array.size)
        return NULL;
    return &c->args->via.array.ptr[i];
}

int arg_u64(const struct hand_call *c, unsigned i, uint64_t *v)
{
    const msgpack_object *o = arg(c, i);
    if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    *v = o->via.u64;
    return 0;
}

int arg_bin(const struct hand_call *c, unsigned i, const void **p, size_t *len)
{
    const msgpack_object *o = arg(c, i);
    if (!o || o->type != MSGPACK_OBJECT_BIN)
        return -1;
    /* msgpack-c gives an empty bin a NULL ptr; handlers memcpy from it. */
    *p = o->via.bin.size ? o->via.bin.ptr : "";
    *len = o->via.bin.size;
    return 0;
}

int arg_str(const struct hand_call *c, unsigned i, char *buf, size_t size)
{
    const msgpack_object *o = arg(c, i);
    if (!o || o->type != MSGPACK_OBJECT_STR || o->via.str.size >= size)
        return -1;
    if (o->via.str.size)    /* msgpack-c: an empty str's ptr is NULL */
        memcpy(buf, o->via.str.ptr, o->via.str.size);
    buf[o->via.str.size] = '\0';
    return 0;
}

int arg_u64s(const struct hand_call *c, unsigned n, uint64_t *v)
{
    for (unsigned i = 0; i < n; i++)
        if (arg_u64(c, i, &v[i]) < 0)
            return -1;
    return 0;
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
