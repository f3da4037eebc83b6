/* staging: the bounds on module images sent in pieces, on JIT options and
 * on link states hold against a client that ignores them.
 *
 *   staging RGPUD LIB_DIR
 *
 * Speaks the raw protocol (helpers from tests/badinput.c) to an rgpud on
 * the fake GPU backend whose staging limit is 8 MiB
 * (RGPUD_MODULE_STAGING_LIMIT).  Images over the limit, alone or with the
 * other client threads' images, are refused with the library's
 * out-of-memory status, and the session goes on; a restarted image and a
 * loaded one give their memory back; pieces out of order, beyond their
 * image's size or without a start, and loads naming an image not staged
 * whole, end the session with RGPU_EPROTO; unknown and host-pointer JIT
 * options are refused, log buffers are bounded; link states are bounded
 * in number and named only as handed out.  "ok CASE" / "FAIL CASE". */
#define BADINPUT_HELPERS_ONLY
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "badinput.c"
#pragma GCC diagnostic pop

#include <cuda.h>

#include "rgpu_module_wire.h"

#define MiB (1u << 20)
#define OOM 2                   /* CUDA_ERROR_OUT_OF_MEMORY */
#define REFUSED 5               /* RGPU_STATUS_NO_MEMORY: a piece the limit refuses */

static uint64_t serial_no;
static int failures;
static unsigned char zeros[MiB];

/* ---- raw requests of any client thread ------------------------------------------ */

static void begin(struct msg *m, const char *lib, const char *proc, uint32_t tid, uint32_t nargs)
{
    msg_begin(m);
    msgpack_pack_array(&m->pk, 6);
    msgpack_pack_int(&m->pk, RGPU_MSG_CALL);
    msgpack_pack_uint64(&m->pk, ++serial_no);
    msgpack_pack_uint32(&m->pk, rgpu_proc_id(lib, proc));
    msgpack_pack_uint32(&m->pk, tid);
    msgpack_pack_uint32(&m->pk, 0);
    msgpack_pack_array(&m->pk, nargs);
}

/* Sends m; the reply must have transport status want.  Returns the API
 * status (a kept in *a when given), or -1 (why set). */
static int64_t finish(int fd, struct msg *m, int want, struct answer *a)
{
    msgpack_sbuffer out;
    struct answer mine;
    msgpack_sbuffer_init(&out);
    msg_end(m, &out);
    int rc = send_buf(fd, &out);
    msgpack_sbuffer_destroy(&out);
    if (rc < 0 || expect_reply(fd, (int64_t)serial_no, want, a ? a : &mine) < 0)
        return -1;
    int64_t api = (int64_t)field(a ? a : &mine, 3);
    if (!a)
        answer_free(&mine);
    return api;
}

/* rgpu_image_piece: [total, offset, n, bin of n zero bytes]. */
static int64_t piece(int fd, uint32_t tid, uint64_t total, uint64_t offset, size_t n, int want)
{
    struct msg m;
    begin(&m, "rgpu", "rgpu_image_piece", tid, 4);
    msgpack_pack_uint64(&m.pk, total);
    msgpack_pack_uint64(&m.pk, offset);
    msgpack_pack_uint64(&m.pk, n);
    msgpack_pack_bin(&m.pk, n);
    for (size_t done = 0; done < n; done += sizeof zeros)
        msgpack_pack_bin_body(&m.pk, zeros, n - done < sizeof zeros ? n - done : sizeof zeros);
    return finish(fd, &m, want, NULL);
}

/* The rest of an image of total bytes from offset, in pieces of 1 MiB. */
static int64_t pieces(int fd, uint32_t tid, uint64_t total, uint64_t offset)
{
    for (; offset < total; offset += MiB) {
        int64_t api = piece(fd, tid, total, offset, total - offset < MiB ? total - offset : MiB,
                            RGPU_OK);
        if (api != 0)
            return api;
    }
    return 0;
}

/* The options of a driver load or link call, as rgpu_cu_module_load and
 * rgpu_cu_link_create take them: records, the names' bytes, and a result
 * and logs of logs_size bytes of room asked back. */
struct jit_args {
    struct rgpu_jit_option opt[RGPU_JIT_MAX_OPTIONS + 1];
    size_t n;
    const char *names;
    size_t names_size;
};

static void pack_jit(msgpack_packer *pk, const struct jit_args *j, size_t logs_size)
{
    if (j && j->n)
        msgpack_pack_bin_with_body(pk, j->opt, j->n * sizeof j->opt[0]);
    else
        msgpack_pack_nil(pk);
    msgpack_pack_uint64(pk, j ? j->n : 0);
    if (j && j->names_size)
        msgpack_pack_bin_with_body(pk, j->names, j->names_size);
    else
        msgpack_pack_nil(pk);
    msgpack_pack_uint64(pk, j ? j->names_size : 0);
    msgpack_pack_uint64(pk, sizeof(struct rgpu_jit_result));
    msgpack_pack_uint64(pk, logs_size);
    msgpack_pack_uint64(pk, logs_size);
    msgpack_pack_uint64(pk, 8);
}

/* rgpu_cu_module_load of the staged image of size bytes (its bytes nil). */
static int64_t load_staged(int fd, uint32_t tid, uint64_t size, int want)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_module_load", tid, 11);
    msgpack_pack_uint64(&m.pk, 8);
    pack_jit(&m.pk, NULL, 0);
    msgpack_pack_uint64(&m.pk, size);
    msgpack_pack_nil(&m.pk);
    return finish(fd, &m, want, NULL);
}

/* ---- checking --------------------------------------------------------------------- */

static int session;

static void report(const char *what, int ok)
{
    if (ok && good_call(session, ++serial_no) < 0) {
        printf("FAIL %s: session stopped serving: %s\n", what, why);
        failures++;
    } else if (ok) {
        printf("ok %s\n", what);
    } else {
        printf("FAIL %s: %s\n", what, why);
        failures++;
    }
}

/* The call's API status must be want. */
static void expect(const char *what, int64_t got, int64_t want)
{
    if (got >= 0 && got != want)
        fail("API status %lld, wanted %lld", (long long)got, (long long)want);
    report(what, got == want);
}

/* A case on a session of its own that must end it with RGPU_EPROTO. */
static void expect_proto_error(const char *what, int (*send_case)(int fd))
{
    int fd = open_session();
    int ok = fd >= 0 && send_case(fd) == 0 && expect_close(fd, 0) == 0;
    if (fd >= 0)
        close(fd);
    report(what, ok);
}

static int out_of_order(int fd)
{
    if (piece(fd, 1, MiB, 0, 4096, RGPU_OK) != 0)
        return fail("the first piece was refused");
    return piece(fd, 1, MiB, 8192, 4096, RGPU_EPROTO) < 0 ? -1 : 0;
}

static int beyond_total(int fd)
{
    return piece(fd, 1, 4096, 0, 8192, RGPU_EPROTO) < 0 ? -1 : 0;
}

static int without_start(int fd)
{
    return piece(fd, 1, MiB, 4096, 4096, RGPU_EPROTO) < 0 ? -1 : 0;
}

static int zero_total(int fd)
{
    return piece(fd, 1, 0, 0, 0, RGPU_EPROTO) < 0 ? -1 : 0;
}

static int load_unstaged(int fd)
{
    return load_staged(fd, 1, 1234, RGPU_EPROTO) < 0 ? -1 : 0;
}

static int load_incomplete(int fd)
{
    if (piece(fd, 1, 8192, 0, 4096, RGPU_OK) != 0)
        return fail("the first piece was refused");
    return load_staged(fd, 1, 8192, RGPU_EPROTO) < 0 ? -1 : 0;
}

/* ---- JIT options ----------------------------------------------------------------------- */

/* rgpu_cu_module_load of 16 zero bytes with the options j holds (and 64
 * bytes of log room). */
static int64_t load_with(int fd, const struct jit_args *j, int want, struct answer *a)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_module_load", 1, 11);
    msgpack_pack_uint64(&m.pk, 8);
    pack_jit(&m.pk, j, 64);
    msgpack_pack_uint64(&m.pk, 16);
    msgpack_pack_bin_with_body(&m.pk, zeros, 16);
    return finish(fd, &m, want, a);
}

static void option(struct jit_args *j, uint32_t id, uint64_t value)
{
    j->opt[j->n++] = (struct rgpu_jit_option){ id, 0, value };
}

static int64_t unknown_option(void)
{
    struct jit_args j = { .n = 0 };
    option(&j, 999, 1);
    return load_with(session, &j, RGPU_OK, NULL);
}

static int64_t symbol_addresses(void)
{
    struct jit_args j = { .n = 0 };
    option(&j, CU_JIT_GLOBAL_SYMBOL_ADDRESSES, 0);
    return load_with(session, &j, RGPU_OK, NULL);
}

/* A name list longer than its count option says. */
static int64_t names_miscounted(void)
{
    struct jit_args j = { .names = "k", .names_size = 2 };
    option(&j, CU_JIT_REFERENCED_KERNEL_COUNT, 5);
    option(&j, CU_JIT_REFERENCED_KERNEL_NAMES, 1);
    return load_with(session, &j, RGPU_OK, NULL);
}

static int too_many(int fd)
{
    struct jit_args j = { .n = 0 };
    for (unsigned i = 0; i <= RGPU_JIT_MAX_OPTIONS; i++)
        option(&j, CU_JIT_OPTIMIZATION_LEVEL, 3);
    return load_with(fd, &j, RGPU_EPROTO, NULL) < 0 ? -1 : 0;
}

/* Two names said, one sent: its bytes end inside the list. */
static int names_short(int fd)
{
    struct jit_args j = { .names = "k", .names_size = 2 };
    option(&j, CU_JIT_REFERENCED_KERNEL_NAMES, 2);
    return load_with(fd, &j, RGPU_EPROTO, NULL) < 0 ? -1 : 0;
}

/* A name without its NUL. */
static int names_unterminated(int fd)
{
    struct jit_args j = { .names = "kernel", .names_size = 6 };
    option(&j, CU_JIT_REFERENCED_KERNEL_NAMES, 1);
    return load_with(fd, &j, RGPU_EPROTO, NULL) < 0 ? -1 : 0;
}

/* Names' bytes that no list takes. */
static int names_left_over(int fd)
{
    struct jit_args j = { .names = "k\0j", .names_size = 4 };
    option(&j, CU_JIT_REFERENCED_KERNEL_NAMES, 1);
    return load_with(fd, &j, RGPU_EPROTO, NULL) < 0 ? -1 : 0;
}

/* A log buffer's record must carry no value (the server's buffer is used). */
static int log_with_value(int fd)
{
    struct jit_args j = { .n = 0 };
    option(&j, CU_JIT_INFO_LOG_BUFFER, 0x1000);
    return load_with(fd, &j, RGPU_EPROTO, NULL) < 0 ? -1 : 0;
}

/* The outputs of a load: an info log of 4 GiB - 1 asked for is no larger
 * than the server's bound, as the size the library was told says. */
static void check_huge_log(void)
{
    struct answer a;
    struct jit_args j = { .n = 0 };
    option(&j, CU_JIT_INFO_LOG_BUFFER, 0);
    option(&j, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 0xffffffffu);
    int64_t api = load_with(session, &j, RGPU_OK, &a);
    int ok = api > 0;
    if (api > 0) {
        const msgpack_object *outs = &a.f[5];
        struct rgpu_jit_result r;
        uint64_t size = UINT64_MAX;
        if (outs->type == MSGPACK_OBJECT_ARRAY && outs->via.array.size == 4 &&
            outs->via.array.ptr[1].type == MSGPACK_OBJECT_BIN &&
            outs->via.array.ptr[1].via.bin.size == sizeof r) {
            memcpy(&r, outs->via.array.ptr[1].via.bin.ptr, sizeof r);
            size = r.info_log_size;
        }
        ok = size <= MiB + 1;
        if (!ok)
            fail("log size written %llu", (unsigned long long)size);
        answer_free(&a);
    } else if (api == 0) {
        fail("16 zero bytes loaded as a module");
    }
    report("jit-log-bounded", ok);
}

/* ---- link states ----------------------------------------------------------------------- */

/* An 8-byte output (a handle), 0 when absent. */
static uint64_t out_handle(const struct answer *a)
{
    const msgpack_object *outs = &a->f[5];
    uint64_t v = 0;
    if (outs->type == MSGPACK_OBJECT_ARRAY && outs->via.array.size >= 1 &&
        outs->via.array.ptr[0].type == MSGPACK_OBJECT_BIN &&
        outs->via.array.ptr[0].via.bin.size == sizeof v)
        memcpy(&v, outs->via.array.ptr[0].via.bin.ptr, sizeof v);
    return v;
}

static int64_t link_create(uint64_t *handle)
{
    struct msg m;
    struct answer a;
    begin(&m, "cuda", "rgpu_cu_link_create", 1, 9);
    msgpack_pack_uint64(&m.pk, 8);
    pack_jit(&m.pk, NULL, 0);
    int64_t api = finish(session, &m, RGPU_OK, &a);
    if (api >= 0) {
        *handle = out_handle(&a);
        answer_free(&a);
    }
    return api;
}

static int64_t link_complete(uint64_t handle)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_link_complete", 1, 6);
    msgpack_pack_uint64(&m.pk, handle);
    msgpack_pack_uint64(&m.pk, 8);
    msgpack_pack_uint64(&m.pk, sizeof(struct rgpu_jit_result));
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_uint64(&m.pk, 8);
    return finish(session, &m, RGPU_OK, NULL);
}

static int64_t link_destroy(uint64_t handle)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_link_destroy", 1, 1);
    msgpack_pack_uint64(&m.pk, handle);
    return finish(session, &m, RGPU_OK, NULL);
}

static int64_t link_read(uint64_t handle)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_link_read", 1, 4);
    msgpack_pack_uint64(&m.pk, handle);
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_uint64(&m.pk, 16);
    msgpack_pack_uint64(&m.pk, 16);
    return finish(session, &m, RGPU_OK, NULL);
}

/* 64 zero bytes as a cubin input. */
static int64_t link_add(uint64_t handle)
{
    struct msg m;
    begin(&m, "cuda", "rgpu_cu_link_add", 1, 17);
    msgpack_pack_uint64(&m.pk, handle);
    msgpack_pack_uint64(&m.pk, CU_JIT_INPUT_CUBIN);
    msgpack_pack_nil(&m.pk);
    msgpack_pack_nil(&m.pk);                /* options, noptions, names, names_size */
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_nil(&m.pk);
    msgpack_pack_uint64(&m.pk, 0);
    for (int i = 0; i < 2; i++) {           /* the state's outputs, then the call's */
        msgpack_pack_uint64(&m.pk, sizeof(struct rgpu_jit_result));
        msgpack_pack_uint64(&m.pk, 0);
        msgpack_pack_uint64(&m.pk, 0);
        msgpack_pack_uint64(&m.pk, 8);
    }
    msgpack_pack_uint64(&m.pk, 64);
    msgpack_pack_bin_with_body(&m.pk, zeros, 64);
    return finish(session, &m, RGPU_OK, NULL);
}

/* A context for the link calls: the runtime's primary context, current on
 * client thread 1's worker. */
static int64_t set_device(void)
{
    struct msg m;
    begin(&m, "cudart", "cudaSetDevice", 1, 1);
    msgpack_pack_int(&m.pk, 0);
    return finish(session, &m, RGPU_OK, NULL);
}

#define MAX_LINKS 256           /* daemon/hand_cuda_modules.c */

static void link_cases(void)
{
    static uint64_t h[MAX_LINKS];
    uint64_t extra = 0;
    expect("link: a context", set_device(), 0);
    expect("link: add to a state never created", link_add(0xdead0000), CUDA_ERROR_INVALID_HANDLE);
    expect("link: complete a state never created", link_complete(0xdead0000),
           CUDA_ERROR_INVALID_HANDLE);
    expect("link: read a state never created", link_read(0xdead0000), CUDA_ERROR_INVALID_HANDLE);
    expect("link: destroy a state never created", link_destroy(0xdead0000),
           CUDA_ERROR_INVALID_HANDLE);
    int64_t api = 0;
    int made = 0;
    while (made < MAX_LINKS && (api = link_create(&h[made])) == 0)
        made++;
    if (made < MAX_LINKS)
        fail("link state %d: status %lld", made, (long long)api);
    report("link: the session's link states up to the bound", made == MAX_LINKS);
    expect("link: one more than the bound", link_create(&extra), OOM);
    expect("link: read before complete", link_read(h[0]), CUDA_ERROR_INVALID_VALUE);
    expect("link: a bad input refused", link_add(h[0]), CUDA_ERROR_INVALID_IMAGE);
    for (int i = 0; i < made; i++)
        if (link_destroy(h[i]) != 0)
            api = -1;
    report("link: every state destroyed", api == 0 || made == 0);
    expect("link: destroyed twice", link_destroy(h[0]), CUDA_ERROR_INVALID_HANDLE);
    expect("link: a state again after the destroys", link_create(&extra), 0);
    link_destroy(extra);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    count_proc = rgpu_proc_id("cudart", "cudaGetDeviceCount");
    setenv("RGPUD_MODULE_STAGING_LIMIT", "8M", 1);
    if (start_daemon(argv[1], argv[2]) < 0 || (session = open_session()) < 0) {
        printf("FAIL start: %s\n", why);
        if (daemon_pid)
            stop_daemon();
        return 1;
    }

    /* The limit, alone and shared by client threads. */
    expect("over the limit", piece(session, 1, 9 * MiB, 0, 4096, RGPU_OK), REFUSED);
    expect("over the limit, streamed piece", piece(session, 1, 9 * MiB, 0, MiB, RGPU_OK), REFUSED);
    expect("thread 1 stages 5 MiB", piece(session, 1, 5 * MiB, 0, 4096, RGPU_OK), 0);
    expect("thread 2 cannot stage 5 MiB more", piece(session, 2, 5 * MiB, 0, 4096, RGPU_OK), REFUSED);
    expect("thread 2 stages 3 MiB", piece(session, 2, 3 * MiB, 0, 4096, RGPU_OK), 0);
    expect("a restarted image gives its memory back", piece(session, 1, 5 * MiB, 0, 4096, RGPU_OK), 0);
    expect("thread 1's image whole", pieces(session, 1, 5 * MiB, 4096), 0);
    int64_t api = load_staged(session, 1, 5 * MiB, RGPU_OK);
    expect("loading it (not a module)", api > 0 ? 1 : api, 1);
    expect("a loaded image gives its memory back", piece(session, 1, 5 * MiB, 0, 4096, RGPU_OK), 0);

    /* Pieces and loads out of protocol. */
    expect_proto_error("piece out of order", out_of_order);
    expect_proto_error("piece beyond its image", beyond_total);
    expect_proto_error("piece without a start", without_start);
    expect_proto_error("image of size 0", zero_total);
    expect_proto_error("load of an image never staged", load_unstaged);
    expect_proto_error("load of an image staged in part", load_incomplete);

    /* JIT options. */
    expect("jit: an unknown option", unknown_option(), CUDA_ERROR_INVALID_VALUE);
    expect("jit: symbol addresses of the client", symbol_addresses(), CUDA_ERROR_NOT_SUPPORTED);
    expect("jit: a name list longer than its count", names_miscounted(), CUDA_ERROR_INVALID_VALUE);
    check_huge_log();
    expect_proto_error("jit: more options than the bound", too_many);
    expect_proto_error("jit: fewer names than the list says", names_short);
    expect_proto_error("jit: a name without its NUL", names_unterminated);
    expect_proto_error("jit: names no list takes", names_left_over);
    expect_proto_error("jit: a log buffer with a value", log_with_value);

    link_cases();

    close(session);
    if (stop_daemon() < 0) {
        printf("FAIL stop: %s\n", why);
        failures++;
    } else {
        printf("ok stop\n");
    }
    unlink(sock_path);
    rmdir(sock_dir);
    return failures ? 1 : 0;
}
