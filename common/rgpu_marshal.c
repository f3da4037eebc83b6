#include "rgpu_marshal.h"
#include "rgpu_handle_table.h"
#include "rgpu_proto.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers shared by both ends ---------------------------------------- */

static int is_output(uint8_t kind)
{
    return kind == RGPU_OUT || kind == RGPU_INOUT || kind == RGPU_OUT_BUF ||
           kind == RGPU_INOUT_BUF ||
           kind == RGPU_SCALAR_OUT || kind == RGPU_SCALAR_INOUT;
}

static int is_scalar(uint8_t kind)
{
    return kind == RGPU_SCALAR_IN || kind == RGPU_SCALAR_OUT || kind == RGPU_SCALAR_INOUT;
}

/* The element count a *_BUF parameter's length argument holds.  The length
 * argument is always a VAL parameter of at most 8 bytes. */
static uint64_t count_from_value(const void *p, uint32_t size)
{
    uint64_t v = 0;
    memcpy(&v, p, size < 8 ? size : 8);
    return v;
}

static int buf_bytes(uint64_t count, uint32_t elem, size_t *bytes)
{
    if (elem && count > (uint64_t)RGPU_FRAME_MAX / elem)
        return RGPU_ETOOBIG;
    *bytes = (size_t)(count * elem);
    return RGPU_OK;
}

const struct rgpu_proc *rgpu_lib_find(const struct rgpu_lib *lib, uint32_t id)
{
    size_t lo = 0, hi = lib->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t got = lib->procs[mid].id;
        if (got == id)
            return &lib->procs[mid];
        if (got < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- client: encode arguments, decode outputs ---------------------------- */

static void pack_bytes_or_nil(msgpack_packer *pk, const void *p, size_t n)
{
    if (!p) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_bin(pk, n);
    msgpack_pack_bin_body(pk, p, n);
}

/* A buffer's element count (its length argument's value, or one value
 * whose type an argument names) and element size (fixed, or by its type
 * argument; 0 for a type the size function does not know).  vals[i]
 * points at argument i's value, on either end. */
static void buf_dims(const struct rgpu_proc *proc, const struct rgpu_param *prm,
                     const void *const *vals, uint64_t *count, uint32_t *elem)
{
    *elem = prm->size;
    if (prm->elem)
        *elem = prm->elem(
            (int)count_from_value(vals[prm->aux_arg], proc->params[prm->aux_arg].size));
    *count = prm->len_arg < 0
                 ? 1 : count_from_value(vals[prm->len_arg], proc->params[prm->len_arg].size);
}

static size_t buf_len_client(const struct rgpu_proc *proc, const struct rgpu_param *prm,
                             const void *const *argv)
{
    uint64_t count;
    uint32_t elem;
    buf_dims(proc, prm, argv, &count, &elem);
    return (size_t)(count * elem);
}

static uint32_t scalar_size(const struct rgpu_proc *proc, unsigned i, const void *const *argv,
                            const struct rgpu_scalar_policy *pol)
{
    const struct rgpu_param *p = &proc->params[i];
    uint32_t n = p->size;
    /* Typed by an argument: its element size, times the annotated count. */
    if (p->len_arg >= 0 && pol && pol->size)
        n = pol->size(proc, i, argv) * (p->size ? p->size : 1);
    else if (!n && pol && pol->size)
        n = pol->size(proc, i, argv);
    else if (n && pol && pol->refine)
        n = pol->refine(proc, i, argv, n);
    return n > RGPU_SCALAR_MAX ? RGPU_SCALAR_MAX : n;
}

/* A scalar: its bytes when the call's scalars are on the host, else the
 * device pointer itself.  A host output travels as [size]. */
static int scalar_on_host(const struct rgpu_proc *proc, unsigned i, const void *const *argv,
                          const struct rgpu_scalar_policy *pol)
{
    return !pol || !pol->host || pol->host(proc, i, argv);
}

static void pack_scalar(msgpack_packer *pk, const struct rgpu_proc *proc, unsigned i,
                        const void *const *argv, const struct rgpu_scalar_policy *pol)
{
    int host = scalar_on_host(proc, i, argv, pol);
    const void *ptr = *(const void *const *)argv[i];
    if (!ptr) {
        msgpack_pack_nil(pk);
    } else if (!host) {
        msgpack_pack_uint64(pk, (uint64_t)(uintptr_t)ptr);
    } else if (proc->params[i].kind == RGPU_SCALAR_OUT) {
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint32(pk, scalar_size(proc, i, argv, pol));
    } else {
        uint32_t n = scalar_size(proc, i, argv, pol);
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, ptr, n);
    }
}

int rgpu_has_host_outputs(const struct rgpu_proc *proc, const void *const *argv,
                          const struct rgpu_scalar_policy *pol)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        uint8_t k = proc->params[i].kind;
        if (k == RGPU_OUT || k == RGPU_INOUT || k == RGPU_OUT_BUF || k == RGPU_INOUT_BUF)
            return 1;
        if ((k == RGPU_SCALAR_OUT || k == RGPU_SCALAR_INOUT) && *(const void *const *)argv[i] &&
            scalar_on_host(proc, i, argv, pol))
            return 1;
    }
    return 0;
}

int rgpu_encode_args(msgpack_packer *pk, const struct rgpu_proc *proc,
                     const void *const *argv, const struct rgpu_scalar_policy *pol)
{
    return rgpu_encode_call(pk, proc, argv, pol, NULL);
}

/* A stream or sink parameter of len bytes, when the sender moves its
 * bytes itself (bulk): noted there.  Returns 1 when the stream's bytes are
 * left out of pk (the sender packs their bin), else 0. */
static int note_bulk(const struct rgpu_param *prm, unsigned i, const void *ptr, size_t len,
                     struct rgpu_bulk *bulk)
{
    if (!bulk || !ptr || !(prm->flags & (RGPU_PARAM_SINK | RGPU_PARAM_STREAM)))
        return 0;
    if (prm->flags & RGPU_PARAM_SINK) {
        bulk->sink = (void *)(uintptr_t)ptr;
        bulk->sink_len = len;
        bulk->sink_param = i;
        return 0;
    }
    bulk->payload = ptr;
    bulk->payload_len = len;
    return 1;
}

/* A buffer's bytes, client side, or -1 when it cannot be sent: its element
 * type, where an argument names it, one the size function does not know
 * (the server takes an unknown one for a protocol error and closes the
 * session), or its length more than a frame can hold (a negative count,
 * read as a huge one, must not make the client read far past the
 * program's array). */
static int buf_len_sendable(const struct rgpu_proc *proc, const struct rgpu_param *prm,
                            const void *const *argv, size_t *len)
{
    uint64_t count;
    uint32_t elem;
    buf_dims(proc, prm, argv, &count, &elem);
    if ((prm->elem && elem == 0) || buf_bytes(count, elem, len) != RGPU_OK)
        return -1;
    return 0;
}

int rgpu_encode_call(msgpack_packer *pk, const struct rgpu_proc *proc, const void *const *argv,
                     const struct rgpu_scalar_policy *pol, struct rgpu_bulk *bulk)
{
    size_t len;
    if (bulk)
        memset(bulk, 0, sizeof *bulk);
    msgpack_pack_array(pk, proc->nparams);
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        const void *ptr = prm->kind == RGPU_VAL || prm->kind == RGPU_BYVAL ||
                                  prm->kind == RGPU_DEVPTR || prm->kind == RGPU_HANDLE
                              ? NULL : *(const void *const *)argv[i];
        switch (prm->kind) {
        case RGPU_HANDLE:
        case RGPU_VAL:
            msgpack_pack_uint64(pk, count_from_value(argv[i], prm->size));
            break;
        case RGPU_DEVPTR:
            msgpack_pack_uint64(pk, count_from_value(argv[i], 8));
            break;
        case RGPU_BYVAL:
            pack_bytes_or_nil(pk, argv[i], prm->size);
            break;
        case RGPU_IN:
        case RGPU_INOUT:
            pack_bytes_or_nil(pk, ptr, prm->size);
            break;
        case RGPU_OUT:
            msgpack_pack_uint64(pk, ptr ? prm->size : 0);
            break;
        case RGPU_STR:
            if (ptr)
                msgpack_pack_str_with_body(pk, ptr, strlen(ptr));
            else
                msgpack_pack_nil(pk);
            break;
        case RGPU_IN_BUF:
        case RGPU_INOUT_BUF:
            len = 0;
            if (ptr && buf_len_sendable(proc, prm, argv, &len) < 0)
                return RGPU_EPROTO;
            if (!note_bulk(prm, i, ptr, len, bulk))
                pack_bytes_or_nil(pk, ptr, len);
            break;
        case RGPU_OUT_BUF:
            len = 0;
            if (ptr && buf_len_sendable(proc, prm, argv, &len) < 0)
                return RGPU_EPROTO;
            note_bulk(prm, i, ptr, len, bulk);
            msgpack_pack_uint64(pk, len);
            break;
        case RGPU_SCALAR_IN:
        case RGPU_SCALAR_OUT:
        case RGPU_SCALAR_INOUT:
            pack_scalar(pk, proc, i, argv, pol);
            break;
        default:
            return RGPU_EPROTO;
        }
    }
    return RGPU_OK;
}

int rgpu_decode_outs(const msgpack_object *outs, const struct rgpu_proc *proc,
                     const void *const *argv, const struct rgpu_scalar_policy *pol)
{
    return rgpu_decode_call_outs(outs, proc, argv, pol, NULL, 0, 0);
}

/* A sink output: 1 when its bytes landed already (its bin must then be
 * empty, else -1), 0 when they come in the reply: whole, or nil when the
 * call failed (api). */
static int sink_landed(const msgpack_object *o, unsigned i, const struct rgpu_bulk *bulk,
                       size_t sunk, int api)
{
    if (!bulk || !bulk->sink || i != bulk->sink_param)
        return 0;
    if (sunk && sunk == bulk->sink_len)
        return o->type == MSGPACK_OBJECT_NIL ||
               (o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == 0) ? 1 : -1;
    if (o->type == MSGPACK_OBJECT_BIN)
        return o->via.bin.size == bulk->sink_len ? 0 : -1;
    return api || !bulk->sink_len ? 0 : -1;
}

int rgpu_decode_call_outs(const msgpack_object *outs, const struct rgpu_proc *proc,
                          const void *const *argv, const struct rgpu_scalar_policy *pol,
                          const struct rgpu_bulk *bulk, size_t sunk, int api)
{
    unsigned k = 0;
    if (outs->type != MSGPACK_OBJECT_ARRAY)
        return RGPU_EPROTO;
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (!is_output(prm->kind))
            continue;
        if (k >= outs->via.array.size)
            return RGPU_EPROTO;
        const msgpack_object *o = &outs->via.array.ptr[k++];
        void *dst = *(void *const *)argv[i];
        int landed = sink_landed(o, i, bulk, sunk, api);
        if (landed < 0)
            return RGPU_EPROTO;
        if (landed || o->type == MSGPACK_OBJECT_NIL || !dst)
            continue;
        if (o->type != MSGPACK_OBJECT_BIN ||
            (is_scalar(prm->kind) && !scalar_on_host(proc, i, argv, pol)))
            return RGPU_EPROTO;
        size_t cap = prm->kind == RGPU_OUT_BUF || prm->kind == RGPU_INOUT_BUF
                         ? buf_len_client(proc, prm, argv)
                     : is_scalar(prm->kind)    ? scalar_size(proc, i, argv, pol)
                                               : prm->size;
        if (o->via.bin.size > cap)
            return RGPU_EPROTO;
        if (o->via.bin.size)    /* msgpack-c: an empty bin's ptr is NULL */
            memcpy(dst, o->via.bin.ptr, o->via.bin.size);
    }
    return k == outs->via.array.size ? RGPU_OK : RGPU_EPROTO;
}

/* ---- server: decode arguments, encode outputs ---------------------------- */

static int decode_val(const msgpack_object *o, uint64_t *out)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return RGPU_EPROTO;
    *out = o->via.u64;
    return RGPU_OK;
}

/* A buffer a callee reads or writes in place of the program's: aligned as
 * the largest structure of the headers wants it (CUtensorMap: 128 bytes;
 * the driver refuses a map that is not), zeroed when asked. */
static void *frame_buffer(size_t n, int zero)
{
    void *p = NULL;
    if (n < 128)
        return zero ? calloc(1, n ? n : 1) : malloc(n ? n : 1);
    if (posix_memalign(&p, 128, n) != 0)
        return NULL;
    if (zero)
        memset(p, 0, n);
    return p;
}

/* A bin argument of exactly want bytes (or nil when nil_ok), copied into a
 * buffer the frame owns so that the callee may keep or modify it. */
static int decode_bytes(const msgpack_object *o, size_t want, int nil_ok,
                        struct rgpu_call_frame *f, unsigned i)
{
    if (o->type == MSGPACK_OBJECT_NIL && nil_ok) {
        f->slot[i] = 0;
        return RGPU_OK;
    }
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != want)
        return RGPU_EPROTO;
    void *p = frame_buffer(want, 0);
    if (!p)
        return RGPU_ENOMEM;
    if (want)               /* msgpack-c: an empty bin's ptr is NULL */
        memcpy(p, o->via.bin.ptr, want);
    f->owned[i] = p;
    f->slot[i] = (uint64_t)(uintptr_t)p;
    return RGPU_OK;
}

static int decode_str(const msgpack_object *o, struct rgpu_call_frame *f, unsigned i)
{
    if (o->type == MSGPACK_OBJECT_NIL) {
        f->slot[i] = 0;
        return RGPU_OK;
    }
    if (o->type != MSGPACK_OBJECT_STR)
        return RGPU_EPROTO;
    char *s = malloc(o->via.str.size + 1);
    if (!s)
        return RGPU_ENOMEM;
    if (o->via.str.size)    /* msgpack-c: an empty str's ptr is NULL */
        memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    f->owned[i] = s;
    f->slot[i] = (uint64_t)(uintptr_t)s;
    return RGPU_OK;
}

/* An output buffer of the size the client asked for (0: the client passed
 * NULL, and so does the callee).  Any size but 0 or cap is refused: the
 * callee writes up to cap bytes whatever the client asked for, so a smaller
 * buffer would be overrun. */
static int alloc_out(const msgpack_object *o, size_t cap, int sink, struct rgpu_call_frame *f,
                     unsigned i)
{
    uint64_t want;
    int rc = decode_val(o, &want);
    if (rc != RGPU_OK)
        return rc;
    if (want != 0 && want != cap)
        return want > RGPU_FRAME_MAX ? RGPU_ETOOBIG : RGPU_EPROTO;
    f->slot[i] = 0;
    f->outlen[i] = 0;
    if (want == 0)
        return RGPU_OK;
    /* A large sink: the serve_ function sends its bytes itself. */
    if (sink && want >= RGPU_STREAM_MIN) {
        f->sink_len = want;
        return RGPU_OK;
    }
    void *p = frame_buffer(want, 1);
    if (!p)
        return RGPU_ENOMEM;
    f->owned[i] = p;
    f->slot[i] = (uint64_t)(uintptr_t)p;
    f->outlen[i] = want;
    return RGPU_OK;
}

/* A scalar: bytes (host value), an unsigned (device pointer), [size] (a
 * host output) or nil.  Host buffers are RGPU_SCALAR_MAX bytes, so a callee
 * reading the largest scalar type never runs past them. */
static int decode_scalar(const msgpack_object *o, uint8_t kind, struct rgpu_call_frame *f,
                         unsigned i)
{
    f->slot[i] = 0;
    f->outlen[i] = 0;
    if (o->type == MSGPACK_OBJECT_NIL)
        return RGPU_OK;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        f->slot[i] = o->via.u64;            /* a device pointer: no output */
        return RGPU_OK;
    }
    size_t n;
    if (kind == RGPU_SCALAR_OUT && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 1 &&
        o->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        n = o->via.array.ptr[0].via.u64;
    else if (kind != RGPU_SCALAR_OUT && o->type == MSGPACK_OBJECT_BIN)
        n = o->via.bin.size;
    else
        return RGPU_EPROTO;
    if (n > RGPU_SCALAR_MAX)
        return RGPU_EPROTO;
    void *p = calloc(1, RGPU_SCALAR_MAX);
    if (!p)
        return RGPU_ENOMEM;
    if (o->type == MSGPACK_OBJECT_BIN && n)
        memcpy(p, o->via.bin.ptr, n);
    f->owned[i] = p;
    f->slot[i] = (uint64_t)(uintptr_t)p;
    f->outlen[i] = kind == RGPU_SCALAR_IN ? 0 : n;
    return RGPU_OK;
}

/* The length and type arguments are plain values, decoded before any
 * buffer (rgpu_decode_args), so f->argv already points at them. */
static int buf_len_server(const struct rgpu_proc *proc, const struct rgpu_param *prm,
                          const struct rgpu_call_frame *f, size_t *bytes)
{
    uint64_t count;
    uint32_t elem;
    buf_dims(proc, prm, (const void *const *)f->argv, &count, &elem);
    if (prm->elem && elem == 0)
        return RGPU_EPROTO;     /* an element type we do not know */
    return buf_bytes(count, elem, bytes);
}

/* A stream parameter (the last): its bytes stayed in the socket (its bin
 * arrived empty, and what is left must be exactly its length), or they are
 * in the frame, where the serve_ function reads them during the call: no
 * copy of a frame buffer's bytes. */
static int decode_streamed(const msgpack_object *o, size_t bytes, struct rgpu_call_frame *f,
                           unsigned i)
{
    if (o->type != MSGPACK_OBJECT_BIN ||
        o->via.bin.size != (f->stream_len ? 0 : bytes) || (f->stream_len && bytes != f->stream_len))
        return RGPU_EPROTO;
    f->slot[i] = f->stream_len || !bytes ? 0 : (uint64_t)(uintptr_t)o->via.bin.ptr;
    return RGPU_OK;
}

static int decode_one(const msgpack_object *o, const struct rgpu_proc *proc, unsigned i,
                      struct rgpu_call_frame *f)
{
    const struct rgpu_param *prm = &proc->params[i];
    size_t bytes;
    int rc;

    /* Values live in the slot and the thunk dereferences the slot; for
     * every pointer kind the slot holds the pointer and the thunk
     * dereferences the slot to get it. */
    f->argv[i] = &f->slot[i];
    switch (prm->kind) {
    case RGPU_VAL:
        /* A value wider than its parameter is no value the client sent
         * (it sends the parameter's bytes): refused, not cut. */
        rc = decode_val(o, &f->slot[i]);
        return rc == RGPU_OK && prm->size < 8 && f->slot[i] >> (8 * prm->size) ? RGPU_EPROTO
                                                                               : rc;
    case RGPU_DEVPTR:
    case RGPU_HANDLE:   /* checked by the server before the call */
        return decode_val(o, &f->slot[i]);
    case RGPU_BYVAL:
        rc = decode_bytes(o, prm->size, 0, f, i);
        f->argv[i] = f->owned[i];   /* the struct itself */
        return rc;
    case RGPU_IN:
        return decode_bytes(o, prm->size, 1, f, i);
    case RGPU_INOUT:
        rc = decode_bytes(o, prm->size, 1, f, i);
        f->outlen[i] = f->slot[i] ? prm->size : 0;
        return rc;
    case RGPU_OUT:
        return alloc_out(o, prm->size, 0, f, i);
    case RGPU_STR:
        return decode_str(o, f, i);
    case RGPU_IN_BUF:
    case RGPU_INOUT_BUF:
        /* NULL needs no length: its element size may be unknown (a
         * tensor map's strides for rank 1: none). */
        if (o->type == MSGPACK_OBJECT_NIL) {
            f->slot[i] = 0;
            f->outlen[i] = 0;
            return RGPU_OK;
        }
        if (prm->kind == RGPU_IN_BUF) {
            rc = buf_len_server(proc, prm, f, &bytes);
            if (rc == RGPU_OK && (prm->flags & RGPU_PARAM_STREAM))
                return decode_streamed(o, bytes, f, i);
            return rc != RGPU_OK ? rc : decode_bytes(o, bytes, 1, f, i);
        }
        rc = buf_len_server(proc, prm, f, &bytes);
        if (rc != RGPU_OK)
            return rc;
        rc = decode_bytes(o, bytes, 1, f, i);
        f->outlen[i] = f->slot[i] ? bytes : 0;
        return rc;
    case RGPU_OUT_BUF:
        rc = buf_len_server(proc, prm, f, &bytes);
        return rc != RGPU_OK ? rc
                             : alloc_out(o, bytes, (prm->flags & RGPU_PARAM_SINK) != 0, f, i);
    case RGPU_SCALAR_IN:
    case RGPU_SCALAR_OUT:
    case RGPU_SCALAR_INOUT:
        return decode_scalar(o, prm->kind, f, i);
    default:
        return RGPU_EPROTO;
    }
}

int rgpu_decode_args(const msgpack_object *args, const struct rgpu_proc *proc,
                     struct rgpu_call_frame *f)
{
    return rgpu_decode_streamed_args(args, proc, f, 0);
}

int rgpu_proc_streams(const struct rgpu_proc *proc)
{
    return proc->nparams > 0 && proc->params[proc->nparams - 1].kind == RGPU_IN_BUF &&
           (proc->params[proc->nparams - 1].flags & RGPU_PARAM_STREAM);
}

int rgpu_decode_streamed_args(const msgpack_object *args, const struct rgpu_proc *proc,
                              struct rgpu_call_frame *f, size_t stream_len)
{
    memset(f, 0, sizeof *f);
    f->stream_len = stream_len;
    if (args->type != MSGPACK_OBJECT_ARRAY || args->via.array.size != proc->nparams ||
        proc->nparams > RGPU_MAX_PARAMS || (stream_len && !rgpu_proc_streams(proc)))
        return RGPU_EPROTO;
    /* Length arguments come before or after their buffers; decode the
     * plain values first so that every buffer knows its size. */
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < proc->nparams; i++) {
            int is_val = proc->params[i].kind == RGPU_VAL;
            if (is_val != (pass == 0))
                continue;
            int rc = decode_one(&args->via.array.ptr[i], proc, i, f);
            if (rc != RGPU_OK)
                return rc;
        }
    }
    return RGPU_OK;
}

/* ---- server: pointer checks ------------------------------------------------ */

static const struct rgpu_server_checks *server_checks;

void rgpu_set_server_checks(const struct rgpu_server_checks *checks)
{
    server_checks = checks;
}

static int devptr_ok(uint64_t ptr, uint64_t len)
{
    if (!ptr)
        return 1;
    return server_checks && server_checks->devptr && server_checks->devptr(ptr, len);
}

/* A device pointer parameter: its whole range when the annotation gives
 * its length. */
static int check_devptr(const struct rgpu_proc *proc, const struct rgpu_param *prm,
                        const struct rgpu_call_frame *f, unsigned i)
{
    uint64_t len = 0;
    if (prm->len_arg >= 0) {
        uint64_t count = count_from_value(f->argv[prm->len_arg],
                                          proc->params[prm->len_arg].size);
        uint32_t elem = prm->size ? prm->size : 1;
        if (count > UINT64_MAX / elem)
            return 0;
        len = count * elem;
    }
    return devptr_ok(f->slot[i], len);
}

/* A scalar travels as bytes (decode_scalar gave it a buffer the frame
 * owns) exactly when the server-side library reads it from the host; a
 * pointer from the client is used only in device mode, and only when it
 * is the session's device memory.  Never is a client-supplied address
 * read or written on the server. */
static int check_scalar(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                        const struct rgpu_call_frame *f, unsigned i)
{
    if (!f->slot[i])
        return 1;
    int host = server_checks && server_checks->scalar_host
                   ? server_checks->scalar_host(lib, proc, i, f->argv) : 1;
    if (f->owned[i])
        return host == 1;
    const struct rgpu_param *prm = &proc->params[i];
    uint64_t len = prm->len_arg < 0 ? prm->size : 0;
    return host == 0 && devptr_ok(f->slot[i], len);
}

/* A handle of the call that is NULL where NULL names nothing: not a
 * stream (NULL is the default stream), not an optional handle (nullable).
 * NULL, or the first such parameter. */
static const struct rgpu_param *null_handle(const struct rgpu_proc *proc,
                                            const struct rgpu_call_frame *f)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if (prm->kind == RGPU_HANDLE && !f->slot[i] &&
            !(prm->handle_flags & RGPU_HANDLE_NULLABLE) &&
            !rgpu_handle_default_stream(prm->handle_class, 0))
            return prm;
    }
    return NULL;
}

/* The status a refused call answers: a library checks its handles before
 * its other arguments, so a NULL handle answers as the library answers
 * for it (the status of a handle never handed out: cuBLAS's
 * CUBLAS_STATUS_NOT_INITIALIZED, as natively), else the library's
 * invalid value.  A NULL handle also makes the scalars' place unknowable
 * (the handle or descriptor says it): without this, a cuBLAS call on a
 * NULL handle answered CUBLAS_STATUS_INVALID_VALUE. */
static int refusal(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                   const struct rgpu_call_frame *f)
{
    const struct rgpu_param *h = null_handle(proc, f);
    if (!h)
        return lib->invalid_value;
    return h->handle_status ? h->handle_status : lib->invalid_handle;
}

int rgpu_check_args(const struct rgpu_lib *lib, const struct rgpu_proc *proc,
                    const struct rgpu_call_frame *f)
{
    for (unsigned i = 0; i < proc->nparams; i++) {
        const struct rgpu_param *prm = &proc->params[i];
        if ((prm->kind == RGPU_DEVPTR && !check_devptr(proc, prm, f, i)) ||
            (is_scalar(prm->kind) && !check_scalar(lib, proc, f, i)))
            return refusal(lib, proc, f);
    }
    return 0;
}

/* The bytes of output i that travel back: all of its buffer, or with
 * used= the elements the callee says it filled (never more). */
static size_t out_bytes(const struct rgpu_proc *proc, unsigned i, const struct rgpu_call_frame *f)
{
    const struct rgpu_param *prm = &proc->params[i];
    if (prm->kind != RGPU_OUT_BUF || prm->used_arg < 0 || !f->slot[prm->used_arg])
        return f->outlen[i];
    uint64_t count, used = count_from_value((const void *)(uintptr_t)f->slot[prm->used_arg],
                                            proc->params[prm->used_arg].size);
    uint32_t elem;
    buf_dims(proc, prm, (const void *const *)f->argv, &count, &elem);
    return elem && used < f->outlen[i] / elem ? (size_t)used * elem : f->outlen[i];
}

/* Whether output i travels as nil: the caller passed NULL, a sink's bytes
 * went ahead of the reply, or a scalar given as a device pointer was
 * written there. */
static int out_is_nil(const struct rgpu_proc *proc, unsigned i, const struct rgpu_call_frame *f)
{
    return !f->slot[i] || (is_scalar(proc->params[i].kind) && !f->owned[i]);
}

void rgpu_encode_outs(msgpack_packer *pk, const struct rgpu_proc *proc,
                      const struct rgpu_call_frame *f)
{
    rgpu_encode_outs_tail(pk, proc, (struct rgpu_call_frame *)f, NULL, NULL);
}

void rgpu_encode_outs_tail(msgpack_packer *pk, const struct rgpu_proc *proc,
                           struct rgpu_call_frame *f, void **tail, size_t *tail_len)
{
    unsigned n = 0, last = 0;
    for (unsigned i = 0; i < proc->nparams; i++)
        if (is_output(proc->params[i].kind)) {
            n++;
            last = i;
        }
    if (tail) {
        *tail = NULL;
        *tail_len = 0;
    }
    msgpack_pack_array(pk, n);
    for (unsigned i = 0; i < proc->nparams; i++) {
        if (!is_output(proc->params[i].kind))
            continue;
        if (out_is_nil(proc, i, f)) {
            msgpack_pack_nil(pk);
            continue;
        }
        size_t len = out_bytes(proc, i, f);
        msgpack_pack_bin(pk, len);
        /* The frame's buffer itself goes, handed over to the sender. */
        if (tail && i == last && len >= RGPU_TAIL_MIN && f->owned[i] &&
            (uint64_t)(uintptr_t)f->owned[i] == f->slot[i]) {
            *tail = f->owned[i];
            *tail_len = len;
            f->owned[i] = NULL;
            continue;
        }
        msgpack_pack_bin_body(pk, (const void *)(uintptr_t)f->slot[i], len);
    }
}

void rgpu_call_frame_release(struct rgpu_call_frame *f)
{
    for (unsigned i = 0; i < RGPU_MAX_PARAMS; i++)
        free(f->owned[i]);
    memset(f->owned, 0, sizeof f->owned);
}

size_t rgpu_frame_bytes(const struct rgpu_proc *proc, const struct rgpu_call_frame *f,
                        unsigned i)
{
    size_t bytes = 0;
    if (i >= proc->nparams || !f->slot[i])
        return 0;
    const struct rgpu_param *prm = &proc->params[i];
    switch (prm->kind) {
    case RGPU_IN:
    case RGPU_OUT:
    case RGPU_INOUT:
        return prm->size;
    case RGPU_IN_BUF:
    case RGPU_OUT_BUF:
    case RGPU_INOUT_BUF:
        return buf_len_server(proc, prm, f, &bytes) == RGPU_OK ? bytes : 0;
    default:
        return 0;
    }
}

size_t rgpu_param_bytes_client(const struct rgpu_proc *proc, unsigned i, const void *const *argv)
{
    const struct rgpu_param *prm = &proc->params[i];
    switch (prm->kind) {
    case RGPU_IN: case RGPU_OUT: case RGPU_INOUT:
        return prm->size;
    case RGPU_IN_BUF: case RGPU_OUT_BUF: case RGPU_INOUT_BUF:
        return buf_len_client(proc, prm, argv);
    default:
        return 0;
    }
}
