/* bad-input: rgpud survives hostile input.
 *
 *   badinput RGPUD LIB_DIR
 *
 * Starts RGPUD on a Unix socket in a private temporary directory (rgpud's
 * default kind of address) with the CUDA libraries of LIB_DIR
 * (the fake GPU backend), keeps one well-behaved session ("A") open, and for
 * each hostile case opens a new connection, sends one bad frame and checks
 * that the server answers with an error where the protocol allows one and
 * then closes that connection.  After every case session A and a brand-new
 * session must still get correct answers: a bad client costs only its own
 * session.  Prints "ok CASE" or "FAIL CASE: why" per case and exits
 * non-zero on any failure.
 *
 * Every wait is bounded (IO_TIMEOUT_S), so a server that hangs shows up as
 * a failure, not as a stuck test.  Valid frames are built with msgpack-c,
 * hostile ones partly by hand: msgpack-c cannot write the lies. */
#include "rgpu_graph_wire.h"
#include "rgpu_module_wire.h"
#include "rgpu_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <msgpack.h>

#define IO_TIMEOUT_S    5
#define REPLY_MAX       (1u << 20)  /* nothing we expect back is larger */
#define BAD_SERIAL      77          /* the serial hostile requests carry */
#define ANY_ERROR       (-1)        /* any non-zero transport status */

static char sock_dir[64];          /* ours, 0700 */
static char sock_path[96];
static pid_t daemon_pid;            /* 0 once it has been reaped */
static uint32_t count_proc;         /* cudart/cudaGetDeviceCount */
static char why[512];               /* why the last check failed */

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return -1;
}

/* Put "prefix: " in front of the current reason. */
static int fail_prefix(const char *prefix)
{
    char tmp[sizeof why];
    /* A long reason is cut short; that is fine. */
    if (snprintf(tmp, sizeof tmp, "%s: %s", prefix, why) >= 0)
        memcpy(why, tmp, sizeof why);
    return -1;
}

/* ---- sockets ---------------------------------------------------------------- */

static int dial(void)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct timeval tv = { IO_TIMEOUT_S, 0 };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd < 0)
        return fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return fail("connect: %s", strerror(e));
    }
    /* Bounds every read and write below: a hang becomes an EAGAIN. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return fail("send: %s", strerror(errno));
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Exactly n bytes: 0, or 1 on a clean end of stream before the first
 * byte, or -1 (why set). */
static int recv_exact(int fd, void *p, size_t n)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, c + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return fail("no answer within %d s", IO_TIMEOUT_S);
            return fail("recv: %s", strerror(errno));
        }
        if (r == 0)
            return got == 0 ? 1 : fail("connection closed inside a frame");
        got += (size_t)r;
    }
    return 0;
}

/* The server must end the connection: end of stream (or a reset, when it
 * left bytes of ours unread) within the timeout.  Data before that is a
 * failure unless allow_data. */
static int expect_close(int fd, int allow_data)
{
    char buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0)
            return 0;
        if (r > 0) {
            if (!allow_data)
                return fail("%zd more bytes instead of the close", r);
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == ECONNRESET)
            return 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return fail("connection still open after %d s", IO_TIMEOUT_S);
        return fail("recv: %s", strerror(errno));
    }
}

/* ---- building frames ---------------------------------------------------------- */

static void put_u32(msgpack_sbuffer *out, uint32_t v)
{
    uint32_t be = htonl(v);
    msgpack_sbuffer_write(out, (const char *)&be, sizeof be);
}

/* A well-framed body: its true length, then the bytes. */
static void put_frame(msgpack_sbuffer *out, const void *body, size_t n)
{
    put_u32(out, (uint32_t)n);
    msgpack_sbuffer_write(out, (const char *)body, n);
}

/* One msgpack message under construction; msg_end frames it into out. */
struct msg {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void msg_begin(struct msg *m)
{
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static void msg_end(struct msg *m, msgpack_sbuffer *out)
{
    put_frame(out, m->sb.data, m->sb.size);
    msgpack_sbuffer_destroy(&m->sb);
}

/* A hello of this protocol naming no library and no CUDA_VISIBLE_DEVICES
 * ([HELLO, 7, name, {}, nonce, {}, nil]), or for any other version the
 * protocol-1 layout [HELLO, version, name]. */
static void put_hello(msgpack_sbuffer *out, uint64_t version)
{
    static const char nonce[32] = "badinput: a nonce, not random";
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, version == RGPU_PROTO_VERSION ? 7 : 3);
    msgpack_pack_int(&m.pk, RGPU_MSG_HELLO);
    msgpack_pack_uint64(&m.pk, version);
    msgpack_pack_str_with_body(&m.pk, "test", 4);
    if (version == RGPU_PROTO_VERSION) {
        msgpack_pack_map(&m.pk, 0);
        msgpack_pack_bin_with_body(&m.pk, nonce, sizeof nonce);
        msgpack_pack_map(&m.pk, 0);
        msgpack_pack_nil(&m.pk);
    }
    msg_end(&m, out);
}

/* [CALL, serial, proc, thread 1, flags 0, ...]: the caller packs the args. */
static void pack_call_head(struct msg *m, uint64_t serial, uint32_t proc)
{
    msgpack_pack_array(&m->pk, 6);
    msgpack_pack_int(&m->pk, RGPU_MSG_CALL);
    msgpack_pack_uint64(&m->pk, serial);
    msgpack_pack_uint32(&m->pk, proc);
    msgpack_pack_uint32(&m->pk, 1);
    msgpack_pack_uint32(&m->pk, 0);
}

/* cudaGetDeviceCount(int *count) asking for the 4 bytes of count back. */
static void put_count_call(msgpack_sbuffer *out, uint64_t serial)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, serial, count_proc);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint32(&m.pk, sizeof(int));
    msg_end(&m, out);
}

static int send_buf(int fd, msgpack_sbuffer *out)
{
    int rc = send_all(fd, out->data, out->size);
    msgpack_sbuffer_clear(out);
    return rc;
}

/* ---- reading answers ------------------------------------------------------------ */

struct answer {
    char *frame;
    msgpack_zone zone;
    const msgpack_object *f;    /* the elements of the top-level array */
    uint32_t n;
};

static void answer_free(struct answer *a)
{
    msgpack_zone_destroy(&a->zone);
    free(a->frame);
}

/* One frame holding one msgpack array; -1 (why set) on anything else. */
static int read_answer(int fd, struct answer *a)
{
    unsigned char hdr[4];
    msgpack_object root;
    size_t off = 0;
    int rc = recv_exact(fd, hdr, sizeof hdr);

    if (rc != 0)
        return rc > 0 ? fail("connection closed without an answer") : -1;
    uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (n == 0 || n > REPLY_MAX)
        return fail("answer frame of %u bytes", n);
    a->frame = malloc(n);
    if (!a->frame)
        return fail("out of memory");
    rc = recv_exact(fd, a->frame, n);
    if (rc != 0) {
        free(a->frame);
        return rc > 0 ? fail("connection closed inside a frame") : -1;
    }
    msgpack_zone_init(&a->zone, 1024);
    if (msgpack_unpack(a->frame, n, &off, &a->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
        off != n || root.type != MSGPACK_OBJECT_ARRAY) {
        answer_free(a);
        return fail("answer is not one msgpack array");
    }
    a->f = root.via.array.ptr;
    a->n = root.via.array.size;
    return 0;
}

/* Element i as an unsigned integer, or UINT64_MAX when it is not one. */
static uint64_t field(const struct answer *a, uint32_t i)
{
    if (i >= a->n || a->f[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return UINT64_MAX;
    return a->f[i].via.u64;
}

static int status_matches(uint64_t got, int want)
{
    if (want == ANY_ERROR)
        return got != RGPU_OK && got != UINT64_MAX;
    return got == (uint64_t)want;
}

/* A welcome whose transport status is want. */
static int expect_welcome(int fd, int want)
{
    struct answer a;
    if (read_answer(fd, &a) < 0)
        return fail_prefix("welcome");
    int rc = 0;
    if (a.n != 10 || field(&a, 0) != RGPU_MSG_WELCOME)
        rc = fail("not a welcome (%u elements)", a.n);
    else if (!status_matches(field(&a, 2), want))
        rc = fail("welcome status %lld, wanted %d", (long long)field(&a, 2), want);
    answer_free(&a);
    return rc;
}

/* A reply with transport status want, carrying serial (when >= 0).  On
 * success the caller owns *a. */
static int expect_reply(int fd, int64_t serial, int want, struct answer *a)
{
    if (read_answer(fd, a) < 0)
        return fail_prefix("reply");
    int rc = 0;
    if (a->n != 6 || field(a, 0) != RGPU_MSG_REPLY)
        rc = fail("not a reply (%u elements)", a->n);
    else if (serial >= 0 && field(a, 1) != (uint64_t)serial)
        rc = fail("reply serial %lld, wanted %lld", (long long)field(a, 1), (long long)serial);
    else if (!status_matches(field(a, 2), want))
        rc = fail("transport status %lld (%s), wanted %s", (long long)field(a, 2),
                  rgpu_status_name((int)field(a, 2)),
                  want == ANY_ERROR ? "an error" : rgpu_status_name(want));
    if (rc < 0)
        answer_free(a);
    return rc;
}

/* ---- the well-behaved client ------------------------------------------------------ */

static int open_session(void)
{
    msgpack_sbuffer out;
    int fd = dial();
    if (fd < 0)
        return -1;
    msgpack_sbuffer_init(&out);
    put_hello(&out, RGPU_PROTO_VERSION);
    int rc = send_buf(fd, &out);
    msgpack_sbuffer_destroy(&out);
    if (rc < 0 || expect_welcome(fd, RGPU_OK) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* cudaGetDeviceCount must succeed and say 1 (the fake backend's count). */
static int good_call(int fd, uint64_t serial)
{
    msgpack_sbuffer out;
    struct answer a;
    int count, rc;

    msgpack_sbuffer_init(&out);
    put_count_call(&out, serial);
    rc = send_buf(fd, &out);
    msgpack_sbuffer_destroy(&out);
    if (rc < 0 || expect_reply(fd, (int64_t)serial, RGPU_OK, &a) < 0)
        return -1;
    const msgpack_object *outs = a.n == 6 ? &a.f[5] : NULL;
    if (field(&a, 3) != 0 || field(&a, 4) != 0)
        rc = fail("api status %lld, deferred %lld", (long long)field(&a, 3),
                  (long long)field(&a, 4));
    else if (!outs || outs->type != MSGPACK_OBJECT_ARRAY || outs->via.array.size != 1 ||
             outs->via.array.ptr[0].type != MSGPACK_OBJECT_BIN ||
             outs->via.array.ptr[0].via.bin.size != sizeof count)
        rc = fail("outputs are not [bin %zu]", sizeof count);
    else {
        memcpy(&count, outs->via.array.ptr[0].via.bin.ptr, sizeof count);
        if (count != 1)
            rc = fail("device count %d, wanted 1", count);
    }
    answer_free(&a);
    return rc;
}

/* ---- rgpud ------------------------------------------------------------------------- */

/* Reaps rgpud if it has ended; 1 when it is gone. */
static int daemon_gone(int *status)
{
    if (!daemon_pid)
        return 1;
    if (waitpid(daemon_pid, status, WNOHANG) != daemon_pid)
        return 0;
    daemon_pid = 0;
    return 1;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int start_daemon(const char *exe, const char *lib_dir)
{
    char listen[160];
    int status;

    snprintf(sock_dir, sizeof sock_dir, "%s", "/tmp/rgpu-badinput-XXXXXX");
    if (!mkdtemp(sock_dir))
        return fail("mkdtemp: %s", strerror(errno));
    snprintf(sock_path, sizeof sock_path, "%s/rgpud.sock", sock_dir);
    snprintf(listen, sizeof listen, "unix:%s", sock_path);
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);                      /* stop_daemon ends its sessions too */
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* and it dies with us on a timeout */
        execl(exe, exe, "--foreground", "--listen", listen, "--lib-dir", lib_dir,
              (char *)NULL);
        fprintf(stderr, "badinput: cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    daemon_pid = pid;
    for (int waited = 0; waited < IO_TIMEOUT_S * 1000; waited += 50) {
        int fd = dial();
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (daemon_gone(&status))
            return fail("rgpud exited (status %#x) before accepting", status);
        pause_ms(50);
    }
    return fail("rgpud did not accept within %d s", IO_TIMEOUT_S);
}

/* SIGTERM to rgpud's process group (the listener and its sessions); it
 * must exit cleanly.  The group is signalled only before rgpud is reaped,
 * so its id cannot have been reused. */
static int stop_daemon(void)
{
    int status = 0;
    if (!daemon_pid)
        return fail("rgpud had already exited");
    kill(-daemon_pid, SIGTERM);
    for (int waited = 0; waited < IO_TIMEOUT_S * 1000; waited += 50) {
        if (daemon_gone(&status))
            return WIFEXITED(status) && WEXITSTATUS(status) == 0
                       ? 0 : fail("rgpud ended with status %#x", status);
        pause_ms(50);
    }
    kill(-daemon_pid, SIGKILL);
    waitpid(daemon_pid, &status, 0);
    daemon_pid = 0;
    return fail("rgpud ignored SIGTERM for %d s", IO_TIMEOUT_S);
}

/* ---- hostile cases ------------------------------------------------------------------ */

static void b_truncated(msgpack_sbuffer *out)
{
    put_u32(out, 100);
    msgpack_sbuffer_write(out, "\x96\x03\x01\x02\x03\x04\x05\x06\x07\x08", 10);
}

static void b_oversized(msgpack_sbuffer *out)
{
    put_u32(out, 0x7fffffff);
}

static void b_empty(msgpack_sbuffer *out)
{
    put_u32(out, 0);
}

static void b_not_msgpack(msgpack_sbuffer *out)
{
    char b[16];
    memset(b, 0xc1, sizeof b);          /* 0xc1: "never used" in msgpack */
    put_frame(out, b, sizeof b);
}

static void b_lying_count(msgpack_sbuffer *out)
{
    put_frame(out, "\xdd\xff\xff\xff\xff", 5);  /* array32 of 4 G elements */
}

static void b_deep(msgpack_sbuffer *out)
{
    char b[64];
    memset(b, 0x91, sizeof b - 1);      /* [[[[ ... [] ... ]]]] */
    b[sizeof b - 1] = (char)0x90;
    put_frame(out, b, sizeof b);
}

static void b_serial_string(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, 6);
    msgpack_pack_int(&m.pk, RGPU_MSG_CALL);
    msgpack_pack_str_with_body(&m.pk, "77", 2);
    msgpack_pack_uint32(&m.pk, count_proc);
    msgpack_pack_uint32(&m.pk, 1);
    msgpack_pack_uint32(&m.pk, 0);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint32(&m.pk, sizeof(int));
    msg_end(&m, out);
}

static void b_five_elements(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, 5);
    msgpack_pack_int(&m.pk, RGPU_MSG_CALL);
    msgpack_pack_uint32(&m.pk, BAD_SERIAL);
    msgpack_pack_uint32(&m.pk, count_proc);
    msgpack_pack_uint32(&m.pk, 1);
    msgpack_pack_uint32(&m.pk, 0);
    msg_end(&m, out);
}

static void b_two_args(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, count_proc);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint32(&m.pk, sizeof(int));
    msgpack_pack_uint32(&m.pk, sizeof(int));
    msg_end(&m, out);
}

static void b_arg_type(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, count_proc);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_str_with_body(&m.pk, "four", 4);
    msg_end(&m, out);
}

static void put_count_call_asking(msgpack_sbuffer *out, uint64_t outlen)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, count_proc);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, outlen);
    msg_end(&m, out);
}

static void b_out_huge(msgpack_sbuffer *out)
{
    put_count_call_asking(out, 1ull << 40);
}

/* Fewer bytes than the callee writes: served as asked, the int would land
 * in a 1-byte buffer. */
static void b_out_short(msgpack_sbuffer *out)
{
    put_count_call_asking(out, 1);
}

static void b_unknown_proc(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, 0xdeadbeefu);
    msgpack_pack_array(&m.pk, 0);
    msg_end(&m, out);
}

/* rgpu_lt_materialize (cuBLASLt descriptors, codegen/cublasLt_own.h) with
 * one content of the given kind and parameter count and one 4-byte
 * attribute whose record says it holds `claimed` bytes; `extra` more bytes
 * of contents than the lengths account for. */
static void put_lt_create(msgpack_sbuffer *out, unsigned kind, unsigned nparams,
                          uint32_t claimed, unsigned extra)
{
    unsigned char content[2 + 8 * 8 + 8 + 4 + 8] = { (unsigned char)kind,
                                                     (unsigned char)nparams };
    size_t len = 2;
    for (unsigned i = 0; i < nparams && i < 8; i++, len += 8)
        content[len] = 1;
    const uint32_t record[2] = { 5, claimed };
    memcpy(content + len, record, sizeof record);
    memcpy(content + len + sizeof record, "\1\0\0\0", 4);
    len += sizeof record + 4;
    uint32_t length = (uint32_t)len;
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, rgpu_proc_id("cublasLt", "rgpu_lt_materialize"));
    msgpack_pack_array(&m.pk, 9);
    msgpack_pack_nil(&m.pk);                        /* nothing to destroy */
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_bin_with_body(&m.pk, &length, sizeof length);
    msgpack_pack_uint64(&m.pk, 1);
    msgpack_pack_bin_with_body(&m.pk, content, len + extra);
    msgpack_pack_uint64(&m.pk, len + extra);
    msgpack_pack_uint32(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, sizeof(int32_t));   /* a status */
    msgpack_pack_uint64(&m.pk, sizeof(uint64_t));  /* a handle */
    msg_end(&m, out);
}

/* A layout takes four create parameters. */
static void b_lt_param_count(msgpack_sbuffer *out)
{
    put_lt_create(out, 1, 2, 4, 0);
}

/* An attribute record that runs past its content. */
static void b_lt_record_past_content(msgpack_sbuffer *out)
{
    put_lt_create(out, 1, 4, 4000, 0);
}

static void b_lt_bad_kind(msgpack_sbuffer *out)
{
    put_lt_create(out, 7, 0, 4, 0);
}

/* Bytes of contents that no length accounts for. */
static void b_lt_lengths_short(msgpack_sbuffer *out)
{
    put_lt_create(out, 1, 4, 4, 8);
}

/* rgpu_cu_launch_ex (cuLaunchKernelEx) whose one launch attribute record
 * has id and `nfields` fields of value `v` (struct rgpu_launch_attr), or,
 * with nfields < 0, bytes that are no whole record.  The function and
 * stream are NULL: a malformed record must be refused before anything is
 * looked up. */
static void put_launch_ex(msgpack_sbuffer *out, uint64_t id, int nfields, int64_t v)
{
    struct msg m;
    struct rgpu_launch_attr attr = { (uint32_t)id, 0, { 0 } };
    for (int i = 0; i < nfields; i++)
        attr.field[i] = (uint64_t)v;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, rgpu_proc_id("cuda", "rgpu_cu_launch_ex"));
    msgpack_pack_array(&m.pk, 14);
    for (int i = 0; i < 10; i++)        /* function, grid, block, shmem, stream, packed */
        msgpack_pack_uint64(&m.pk, i >= 1 && i <= 6 ? 1 : 0);
    if (nfields < 0)
        msgpack_pack_bin_with_body(&m.pk, "attr", 4);
    else
        msgpack_pack_bin_with_body(&m.pk, &attr, sizeof attr);
    msgpack_pack_uint64(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_bin_with_body(&m.pk, "", 0);
    msg_end(&m, out);
}

/* A priority takes one field. */
static void b_attr_field_count(msgpack_sbuffer *out)
{
    put_launch_ex(out, CU_LAUNCH_ATTRIBUTE_PRIORITY, 2, 1);
}

/* A carveout is unsigned. */
static void b_attr_out_of_range(msgpack_sbuffer *out)
{
    put_launch_ex(out, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 1, -5);
}

/* The driver would write a node handle back into it: never served. */
static void b_attr_refused_id(msgpack_sbuffer *out)
{
    put_launch_ex(out, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, 2, 1);
}

static void b_attr_unknown_id(msgpack_sbuffer *out)
{
    put_launch_ex(out, 4000, 1, 1);
}

static void b_attr_not_a_list(msgpack_sbuffer *out)
{
    put_launch_ex(out, 0, -1, 0);
}

/* A host-to-device copy of `claimed` bytes to dst whose frame holds `sent`
 * bytes of payload: large copies stream, their payload read by the handler
 * (daemon/copy.c), and anything that does not add up is read whole and
 * judged as any frame.  The frame length says `sent`; the bin `claimed`. */
static void put_htod(msgpack_sbuffer *out, uint64_t serial, uint64_t dst, uint64_t stream,
                     size_t claimed, size_t sent, size_t frame_payload)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, serial, rgpu_proc_id("cudart", "rgpu_htod"));
    msgpack_pack_array(&m.pk, 4);
    msgpack_pack_uint64(&m.pk, dst);
    msgpack_pack_uint64(&m.pk, stream);
    msgpack_pack_uint64(&m.pk, claimed);
    msgpack_pack_bin(&m.pk, claimed);
    put_u32(out, (uint32_t)(m.sb.size + frame_payload));
    msgpack_sbuffer_write(out, m.sb.data, m.sb.size);
    char *zeros = calloc(1, sent ? sent : 1);
    msgpack_sbuffer_write(out, zeros, sent);
    free(zeros);
    msgpack_sbuffer_destroy(&m.sb);
}

#define BIG ((size_t)1 << 20)       /* a copy large enough to stream */

static void b_streamed_truncated(msgpack_sbuffer *out)
{
    put_htod(out, BAD_SERIAL, 0x1000, 0, BIG, 1000, BIG);
}

static void b_bin_beyond_frame(msgpack_sbuffer *out)
{
    put_htod(out, BAD_SERIAL, 0x1000, 0, BIG, BIG / 2, BIG / 2);
}

static void b_bin_short_of_frame(msgpack_sbuffer *out)
{
    put_htod(out, BAD_SERIAL, 0x1000, 0, BIG / 2, BIG, BIG);
}

/* A large bin, last in the frame, to a procedure that does not stream. */
static void b_big_bin_elsewhere(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, BAD_SERIAL, count_proc);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_bin(&m.pk, BIG);
    char *zeros = calloc(1, BIG);
    msgpack_pack_bin_body(&m.pk, zeros, BIG);
    free(zeros);
    msg_end(&m, out);
}

static void b_bad_version(msgpack_sbuffer *out)
{
    put_hello(out, 99);
}

static void b_garbage(msgpack_sbuffer *out)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: rgpu\r\n\r\n";
    msgpack_sbuffer_write(out, http, sizeof http - 1);
}

static void b_call_before_hello(msgpack_sbuffer *out)
{
    put_count_call(out, BAD_SERIAL);
}

enum expect {
    CLOSE_ONLY,     /* no answer required (any is ignored), then the close */
    REPLY,          /* a reply with the status, then the close */
    WELCOME,        /* a welcome with the status, then the close */
};

struct bad_case {
    const char *name;
    void (*build)(msgpack_sbuffer *out);
    int hello;          /* a valid hello (and its welcome) first */
    int shut_wr;        /* then end our side of the stream */
    enum expect expect;
    int status;         /* RGPU_E*, or ANY_ERROR */
    int64_t serial;     /* the reply's serial; -1: not checked */
};

static void b_host_node_deps(msgpack_sbuffer *out);
static void b_ack_not_bin(msgpack_sbuffer *out);

static const struct bad_case cases[] = {
    { "truncated-frame", b_truncated, 1, 1, CLOSE_ONLY, 0, -1 },
    { "oversized-length", b_oversized, 1, 0, REPLY, RGPU_ETOOBIG, -1 },
    { "zero-length", b_empty, 1, 0, REPLY, ANY_ERROR, -1 },
    { "not-msgpack", b_not_msgpack, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "lying-array-count", b_lying_count, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "deep-nesting", b_deep, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "serial-is-string", b_serial_string, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "five-element-request", b_five_elements, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "wrong-arg-count", b_two_args, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "wrong-arg-type", b_arg_type, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "out-size-too-big", b_out_huge, 1, 0, REPLY, RGPU_ETOOBIG, BAD_SERIAL },
    { "out-size-too-small", b_out_short, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "unknown-procedure", b_unknown_proc, 1, 0, REPLY, RGPU_ENOPROC, BAD_SERIAL },
    { "lt-descriptor-param-count", b_lt_param_count, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "lt-descriptor-record-past-content", b_lt_record_past_content, 1, 0, REPLY, RGPU_EPROTO,
      BAD_SERIAL },
    { "lt-descriptor-unknown-kind", b_lt_bad_kind, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "lt-descriptor-lengths-short", b_lt_lengths_short, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "launch-attr-field-count", b_attr_field_count, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "launch-attr-out-of-range", b_attr_out_of_range, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "launch-attr-refused-id", b_attr_refused_id, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "launch-attr-unknown-id", b_attr_unknown_id, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "launch-attr-not-a-list", b_attr_not_a_list, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "streamed-copy-truncated", b_streamed_truncated, 1, 1, CLOSE_ONLY, 0, -1 },
    { "copy-bin-beyond-frame", b_bin_beyond_frame, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "copy-bin-short-of-frame", b_bin_short_of_frame, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "big-bin-to-other-procedure", b_big_bin_elsewhere, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "host-node-deps-not-handles", b_host_node_deps, 1, 0, REPLY, RGPU_EPROTO, BAD_SERIAL },
    { "callback-done-bytes-not-bin", b_ack_not_bin, 1, 0, REPLY, RGPU_EPROTO, -1 },
    { "wrong-version-hello", b_bad_version, 0, 0, WELCOME, RGPU_EVERSION, -1 },
    { "garbage-before-hello", b_garbage, 0, 0, CLOSE_ONLY, 0, -1 },
    { "call-before-hello", b_call_before_hello, 0, 0, CLOSE_ONLY, 0, -1 },
};

static int run_case(const struct bad_case *c)
{
    msgpack_sbuffer out;
    struct answer a;
    int rc = -1;
    int fd = c->hello ? open_session() : dial();

    if (fd < 0)
        return -1;
    msgpack_sbuffer_init(&out);
    c->build(&out);
    if (send_buf(fd, &out) < 0)
        goto done;
    if (c->shut_wr && shutdown(fd, SHUT_WR) < 0) {
        fail("shutdown: %s", strerror(errno));
        goto done;
    }
    if (c->expect == REPLY) {
        if (expect_reply(fd, c->serial, c->status, &a) < 0)
            goto done;
        answer_free(&a);
    } else if (c->expect == WELCOME && expect_welcome(fd, c->status) < 0) {
        goto done;
    }
    rc = expect_close(fd, c->expect == CLOSE_ONLY);
done:
    msgpack_sbuffer_destroy(&out);
    close(fd);
    return rc;
}

/* The daemon is alive, session A still answers, a new session works. */
static int still_serving(int session_a, uint64_t *serial)
{
    int status;
    if (daemon_gone(&status))
        return fail("rgpud exited (status %#x)", status);
    if (good_call(session_a, ++*serial) < 0)
        return fail_prefix("session A");
    int fd = open_session();
    if (fd < 0)
        return fail_prefix("new session");
    int rc = good_call(fd, 1);
    close(fd);
    return rc < 0 ? fail_prefix("new session") : 0;
}

/* Streamed copies the session refuses (memory it does not own, a stream it
 * never handed out) are answered, their payload read and dropped, and the
 * session goes on. */
static int streamed_refusals(void)
{
    static const struct {
        uint64_t dst, stream;
        uint64_t api;           /* cudaErrorInvalidValue, ...InvalidResourceHandle */
    } tries[] = { { 0x1000, 0, 1 }, { 0, 0xdead0, 400 } };
    uint64_t serial = 1;
    int fd = open_session();
    if (fd < 0)
        return fail_prefix("session");
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        msgpack_sbuffer out;
        struct answer a;
        msgpack_sbuffer_init(&out);
        put_htod(&out, ++serial, tries[i].dst, tries[i].stream, BIG, BIG, BIG);
        int rc = send_buf(fd, &out);
        msgpack_sbuffer_destroy(&out);
        if (rc < 0 || expect_reply(fd, (int64_t)serial, RGPU_OK, &a) < 0) {
            close(fd);
            return fail_prefix("refused copy");
        }
        rc = field(&a, 3) == tries[i].api ? 0
                                          : fail("api status %lld, wanted %llu",
                                                 (long long)field(&a, 3),
                                                 (unsigned long long)tries[i].api);
        answer_free(&a);
        if (rc < 0 || good_call(fd, ++serial) < 0) {
            close(fd);
            return fail_prefix("after a refused copy");
        }
    }
    close(fd);
    return 0;
}

/* ---- host functions: what a client says back ------------------------------------ */

/* cudaLaunchHostFunc's request: [CALL, serial, rgpu_host_func, 1, 0,
 * [stream, ptsz 0, callback 0, id, flags 0, token 0, captured's size]]
 * (codegen/cudart_own.h) */
static void put_host_func(msgpack_sbuffer *out, uint64_t serial, uint64_t stream, uint64_t id)
{
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, serial, rgpu_proc_id("cudart", "rgpu_host_func"));
    msgpack_pack_array(&m.pk, 7);
    msgpack_pack_uint64(&m.pk, stream);
    msgpack_pack_uint32(&m.pk, 0);
    msgpack_pack_uint32(&m.pk, 0);
    msgpack_pack_uint64(&m.pk, id);
    msgpack_pack_uint32(&m.pk, 0);
    msgpack_pack_uint64(&m.pk, 0);
    msgpack_pack_uint32(&m.pk, sizeof(int));
    msg_end(&m, out);
}

/* [CALLBACK_DONE, id] */
static void put_ack(msgpack_sbuffer *out, uint64_t id)
{
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_int(&m.pk, RGPU_MSG_CALLBACK_DONE);
    msgpack_pack_uint64(&m.pk, id);
    msg_end(&m, out);
}

/* The next frame that is no keepalive (sent while a host function waits). */
static int read_skipping_keepalives(int fd, struct answer *a)
{
    for (;;) {
        if (read_answer(fd, a) < 0)
            return -1;
        if (!(a->n == 1 && field(a, 0) == RGPU_MSG_KEEPALIVE))
            return 0;
        answer_free(a);
    }
}

/* The reply to serial with API status api; callback frames of id set *called. */
static int host_func_reply(int fd, uint64_t serial, uint64_t api, uint64_t id, int *called)
{
    struct answer a;
    for (;;) {
        if (read_skipping_keepalives(fd, &a) < 0)
            return fail_prefix("host function");
        if (a.n == 3 && field(&a, 0) == RGPU_MSG_CALLBACK) {
            int ok = field(&a, 1) == id && field(&a, 2) == 0;
            answer_free(&a);
            if (!ok)
                return fail("a callback frame for another id or status");
            ++*called;
            continue;
        }
        int rc = a.n == 6 && field(&a, 0) == RGPU_MSG_REPLY && field(&a, 1) == serial &&
                         field(&a, 2) == RGPU_OK && field(&a, 3) == api
                     ? 0
                     : fail("host function answered api %lld, wanted %llu",
                            (long long)field(&a, 3), (unsigned long long)api);
        answer_free(&a);
        return rc;
    }
}

/* Acknowledgements of ids that are not waiting, and repeated ones, are
 * ignored; a host function on a stream the session never handed out is
 * refused; one with an id still waiting too; a real one sends its callback
 * frame and the session goes on once acknowledged. */
static int host_function_acks(void)
{
    msgpack_sbuffer out;
    struct answer a;
    uint64_t serial = 1;
    int called = 0, rc = -1;
    int fd = open_session();
    if (fd < 0)
        return fail_prefix("session");
    msgpack_sbuffer_init(&out);
    put_ack(&out, 12345);               /* nothing waits */
    put_host_func(&out, ++serial, 0xdead0, 1);
    if (send_buf(fd, &out) < 0 || host_func_reply(fd, serial, 400, 1, &called) < 0)
        goto done;
    put_host_func(&out, ++serial, 0, 7);        /* the legacy stream */
    if (send_buf(fd, &out) < 0 || host_func_reply(fd, serial, 0, 7, &called) < 0)
        goto done;
    put_host_func(&out, ++serial, 0, 7);        /* id 7 still waits: refused */
    if (send_buf(fd, &out) < 0 || host_func_reply(fd, serial, 2, 7, &called) < 0)
        goto done;
    while (!called) {
        if (read_skipping_keepalives(fd, &a) < 0)
            goto done;
        called = a.n == 3 && field(&a, 0) == RGPU_MSG_CALLBACK && field(&a, 1) == 7;
        answer_free(&a);
        if (!called) {
            fail("a frame other than the callback");
            goto done;
        }
    }
    put_ack(&out, 7);
    put_ack(&out, 7);                   /* again: ignored */
    put_count_call(&out, ++serial);
    if (send_buf(fd, &out) < 0 || read_skipping_keepalives(fd, &a) < 0)
        goto done;
    rc = a.n == 6 && field(&a, 1) == serial && field(&a, 2) == RGPU_OK && field(&a, 3) == 0
             ? 0
             : fail("the session did not answer after the acknowledgements");
    answer_free(&a);
done:
    msgpack_sbuffer_destroy(&out);
    close(fd);
    return rc;
}

/* ---- graph host nodes: what a client names ------------------------------------- */

#define RUN_ID (1ull << 63)     /* the server's ids of graph host node runs */

/* [CALLBACK_DONE, id, bin of n bytes] */
static void put_ack_bytes(msgpack_sbuffer *out, uint64_t id, size_t n)
{
    static const char zeros[64];
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_int(&m.pk, RGPU_MSG_CALLBACK_DONE);
    msgpack_pack_uint64(&m.pk, id);
    msgpack_pack_bin(&m.pk, n);
    msgpack_pack_bin_body(&m.pk, zeros, n);
    msg_end(&m, out);
}

/* One argument of a request built by hand: an unsigned, or a bin of len
 * bytes (zeros when bytes is NULL). */
struct warg {
    int is_bin;
    uint64_t v;
    const void *bytes;
    size_t len;
};
#define WU(x) { 0, (x), NULL, 0 }
#define BIN(p, n) { 1, 0, (p), (n) }

/* A call of the runtime's procedure name with these arguments. */
static void put_rt_call(msgpack_sbuffer *out, uint64_t serial, const char *name,
                        const struct warg *args, unsigned nargs)
{
    static const char zeros[64];
    struct msg m;
    msg_begin(&m);
    pack_call_head(&m, serial, rgpu_proc_id("cudart", name));
    msgpack_pack_array(&m.pk, nargs);
    for (unsigned i = 0; i < nargs; i++) {
        if (!args[i].is_bin) {
            msgpack_pack_uint64(&m.pk, args[i].v);
            continue;
        }
        msgpack_pack_bin(&m.pk, args[i].len);
        msgpack_pack_bin_body(&m.pk, args[i].bytes ? args[i].bytes : zeros, args[i].len);
    }
    msg_end(&m, out);
}

/* The next frame must be the reply to serial, with API status api (no
 * callback or marker frame before it). */
static int graph_reply(int fd, uint64_t serial, uint64_t api, const char *what)
{
    struct answer a;
    if (read_skipping_keepalives(fd, &a) < 0)
        return fail_prefix(what);
    int rc = a.n == 6 && field(&a, 0) == RGPU_MSG_REPLY && field(&a, 1) == serial &&
                     field(&a, 2) == RGPU_OK && field(&a, 3) == api
                 ? 0
                 : fail("%s: frame %lld, api %lld, wanted a reply with %llu", what,
                        (long long)field(&a, 0), (long long)field(&a, 3),
                        (unsigned long long)api);
    answer_free(&a);
    return rc;
}

/* A forged acknowledgement of a graph node run (with bytes or without) is
 * ignored; a host function may not take an id of the server's runs; a host
 * node, a host copy node or a launch naming a graph or executable graph the
 * session never handed out is refused with the invalid-handle status, a
 * capture copy of device memory the session never owned or in no
 * direction with invalid value, and nothing runs on the client: the
 * session goes on. */
static int graph_host_requests(void)
{
    msgpack_sbuffer out;
    uint64_t serial = 1;
    int rc = -1;
    int fd = open_session();
    if (fd < 0)
        return fail_prefix("session");
    msgpack_sbuffer_init(&out);
    put_ack(&out, RUN_ID | 99);
    put_ack_bytes(&out, RUN_ID | 99, 16);
    put_host_func(&out, ++serial, 0, RUN_ID | 5);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 2, "host function with a run id") < 0)
        goto done;
    /* rgpu_graph_host_node: [op, graph, exec, node, deps, ndeps, token, made] */
    const struct warg node[8] = { WU(0), WU(0xdead000), WU(0), WU(0), BIN(NULL, 0), WU(0), WU(5),
                                  WU(8) };
    put_rt_call(&out, ++serial, "rgpu_graph_host_node", node, 8);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 400, "host node on a forged graph") < 0)
        goto done;
    /* rgpu_graph_host_copy: [op, graph, exec, node, deps, ndeps, copy, made] */
    struct rgpu_graph_copy c = { RGPU_COPY_TO_DEVICE, 0, 3, 64, 1, 1, 0x1000, 0, 0, 0, 0, 0 };
    const struct warg copy[8] = { WU(0), WU(0xdead000), WU(0), WU(0), BIN(NULL, 0), WU(0),
                                  BIN(&c, sizeof c), WU(8) };
    put_rt_call(&out, ++serial, "rgpu_graph_host_copy", copy, 8);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 400, "copy node on a forged graph") < 0)
        goto done;
    /* rgpu_capture_host_copy: [stream, ptsz, copy, captured] */
    const struct warg capture[4] = { WU(0), WU(0), BIN(&c, sizeof c), WU(sizeof(int)) };
    put_rt_call(&out, ++serial, "rgpu_capture_host_copy", capture, 4);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 1, "capture copy of foreign memory") < 0)
        goto done;
    struct rgpu_graph_copy nowhere = c;
    nowhere.direction = 9;
    const struct warg capture_nowhere[4] = { WU(0), WU(0), BIN(&nowhere, sizeof nowhere),
                                             WU(sizeof(int)) };
    put_rt_call(&out, ++serial, "rgpu_capture_host_copy", capture_nowhere, 4);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 1, "capture copy in no direction") < 0)
        goto done;
    /* rgpu_graph_launch: [exec, stream, ptsz, marker, marked, plain] */
    const struct warg launch[6] = { WU(0xdead000), WU(0), WU(0), WU(77), WU(sizeof(int)),
                                    WU(sizeof(int)) };
    put_rt_call(&out, ++serial, "rgpu_graph_launch", launch, 6);
    if (send_buf(fd, &out) < 0 || graph_reply(fd, serial, 400, "launch of a forged graph") < 0)
        goto done;
    rc = good_call(fd, ++serial);
done:
    msgpack_sbuffer_destroy(&out);
    close(fd);
    return rc;
}

/* A graph host node's dependencies that are no whole handles (7 bytes for
 * one): a malformed request. */
static void b_host_node_deps(msgpack_sbuffer *out)
{
    const struct warg node[8] = { WU(0), WU(0xdead000), WU(0), WU(0), BIN(NULL, 7), WU(1), WU(5),
                                  WU(8) };
    put_rt_call(out, BAD_SERIAL, "rgpu_graph_host_node", node, 8);
}

/* An acknowledgement whose bytes are no bin: a malformed frame. */
static void b_ack_not_bin(msgpack_sbuffer *out)
{
    struct msg m;
    msg_begin(&m);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_int(&m.pk, RGPU_MSG_CALLBACK_DONE);
    msgpack_pack_uint64(&m.pk, RUN_ID | 1);
    msgpack_pack_uint32(&m.pk, 5);
    msg_end(&m, out);
}

/* tests/ptrcheck.c includes this file for its helpers. */
#ifndef BADINPUT_HELPERS_ONLY
int main(int argc, char **argv)
{
    uint64_t serial = 0;
    int failures = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    count_proc = rgpu_proc_id("cudart", "cudaGetDeviceCount");
    int started = start_daemon(argv[1], argv[2]);
    if (started < 0) {
        printf("FAIL start: %s\n", why);
        if (daemon_pid)
            stop_daemon();
        return 1;
    }
    int a = open_session();
    if (a < 0 || good_call(a, ++serial) < 0) {
        printf("FAIL good-session: %s\n", why);
        stop_daemon();
        return 1;
    }
    printf("ok good-session\n");

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad_case *c = &cases[i];
        if (run_case(c) < 0 || still_serving(a, &serial) < 0) {
            printf("FAIL %s: %s\n", c->name, why);
            failures++;
        } else {
            printf("ok %s\n", c->name);
        }
    }

    if (streamed_refusals() < 0 || still_serving(a, &serial) < 0) {
        printf("FAIL streamed-copy-refused: %s\n", why);
        failures++;
    } else {
        printf("ok streamed-copy-refused\n");
    }

    if (host_function_acks() < 0 || still_serving(a, &serial) < 0) {
        printf("FAIL host-function-acks: %s\n", why);
        failures++;
    } else {
        printf("ok host-function-acks\n");
    }

    if (graph_host_requests() < 0 || still_serving(a, &serial) < 0) {
        printf("FAIL graph-host-requests: %s\n", why);
        failures++;
    } else {
        printf("ok graph-host-requests\n");
    }

    close(a);
    if (stop_daemon() < 0) {
        printf("FAIL stop: %s\n", why);
        failures++;
    } else {
        printf("ok stop\n");
    }
    unlink(sock_path);          /* rgpud removes it on a clean stop */
    rmdir(sock_dir);
    return failures ? 1 : 0;
}
#endif
