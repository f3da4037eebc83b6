/* rogue: the client core against a server that lies about a copy's bytes.
 *
 *   rogue
 *
 * For each case, a fake rgpud (a child process, on a Unix socket in a
 * private directory) lets the client in with a plain welcome and answers
 * one device-to-host copy request of 1 MiB as the case says: with a data
 * frame of the right size or a wrong one, for the right serial or another,
 * once or twice, with or without bytes in the reply itself, after an
 * output frame (what the session printed) for fd 2 or for fd 3, which no
 * server may send (the client's stderr is checked too).  The client (a
 * second child, so that each case has a fresh client core) asks for the
 * copy with rgpu_copy_to_host into a buffer with guard bytes on both sides,
 * and checks the status, the bytes, and that nothing was written outside
 * the buffer.  Prints "ok CASE" or "FAIL CASE: why"; exits non-zero on any
 * failure. */
#include "rgpu_addr.h"
#include "rgpu_client.h"
#include "rgpu_hello.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define COUNT ((size_t)1 << 20)
#define GUARD 4096
#define NOT_SUPPORTED 801
#define UNAVAILABLE 999

enum answer_step { DATA_OK, DATA_SHORT, DATA_LONG, DATA_STRANGER, REPLY_EMPTY, REPLY_FULL,
                   OUTPUT_FD2, OUTPUT_FD3, END };

#define OUTPUT_TEXT "rogue: printed on the server\n"

struct rogue_case {
    const char *name;
    enum answer_step steps[4];
    int status;         /* what rgpu_copy_to_host must return */
    int bytes_good;     /* whether the buffer must then hold the pattern */
    int printed;        /* 1: the client's stderr must hold OUTPUT_TEXT, -1: must not,
                           0: unchecked */
};

static const struct rogue_case cases[] = {
    { "data-frame", { DATA_OK, REPLY_EMPTY, END }, 0, 1, 0 },
    { "bytes-in-reply", { REPLY_FULL, END }, 0, 1, 0 },
    { "data-frame-short", { DATA_SHORT, REPLY_EMPTY, END }, UNAVAILABLE, 0, 0 },
    { "data-frame-long", { DATA_LONG, REPLY_EMPTY, END }, UNAVAILABLE, 0, 0 },
    { "data-frame-for-another-serial", { DATA_STRANGER, REPLY_EMPTY, END }, UNAVAILABLE, 0, 0 },
    { "data-frame-twice", { DATA_OK, DATA_OK, REPLY_EMPTY, END }, UNAVAILABLE, -1, 0 },
    { "no-bytes-at-all", { REPLY_EMPTY, END }, NOT_SUPPORTED, 0, 0 },
    { "data-frame-and-bytes-in-reply", { DATA_OK, REPLY_FULL, END }, NOT_SUPPORTED, -1, 0 },
    { "output-then-copy", { OUTPUT_FD2, DATA_OK, REPLY_EMPTY, END }, 0, 1, 1 },
    { "output-for-fd-3", { OUTPUT_FD3, DATA_OK, REPLY_EMPTY, END }, UNAVAILABLE, 0, -1 },
};

static const struct rgpu_lib lib = {
    .name = "cudart", .soname = "librogue.so", .not_supported = NOT_SUPPORTED,
    .unavailable = UNAVAILABLE, .invalid_value = 1, .invalid_handle = 400,
};

/* The runtime's rgpu_dtoh (codegen/cudart_own.h) as its table describes
 * it: (data, count, src, stream), data a sink of count bytes. */
static const struct rgpu_param dtoh_params[] = {
    { "data", RGPU_OUT_BUF, 1, 1, -1, NULL, 0, 0, 0, RGPU_PARAM_SINK, -1 },
    { "count", RGPU_VAL, 8, -1, -1, NULL, 0, 0, 0, 0, -1 },
    { "src", RGPU_DEVPTR, 1, 1, -1, NULL, 0, 0, 0, 0, -1 },
    { "stream", RGPU_VAL, 8, -1, -1, NULL, 0, 0, 0, 0, -1 },
};
static const struct rgpu_proc dtoh = { "rgpu_dtoh", 1, 0, 4, dtoh_params, 0 };

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 13 + (i >> 11) + 1);
}

/* ---- the rogue server ------------------------------------------------------------ */

static int send_data(int fd, uint64_t serial, size_t len)
{
    unsigned char head[16], *body = malloc(len ? len : 1);
    size_t n = 0;
    if (!body)
        return -1;
    for (size_t i = 0; i < len; i++)
        body[i] = pattern(i);
    head[n++] = 0x93;
    head[n++] = RGPU_MSG_DATA;
    head[n++] = 0xcf;
    for (int i = 7; i >= 0; i--)
        head[n++] = (unsigned char)(serial >> (8 * i));
    head[n++] = 0xc6;
    for (int i = 3; i >= 0; i--)
        head[n++] = (unsigned char)((uint64_t)len >> (8 * i));
    struct iovec iov[2] = { { head, n }, { body, len } };
    int rc = rgpu_write_frame(fd, iov, 2);
    free(body);
    return rc;
}

static int send_reply(int fd, uint64_t serial, size_t bytes)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    unsigned char *body = malloc(bytes ? bytes : 1);
    if (!body)
        return -1;
    for (size_t i = 0; i < bytes; i++)
        body[i] = pattern(i);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_int(&pk, RGPU_MSG_REPLY);
    msgpack_pack_uint64(&pk, serial);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin(&pk, bytes);
    struct iovec iov[2] = { { sb.data, sb.size }, { body, bytes } };
    int rc = rgpu_write_frame(fd, iov, bytes ? 2 : 1);
    msgpack_sbuffer_destroy(&sb);
    free(body);
    return rc;
}

/* [OUTPUT, fd, bin] */
static int send_output(int fd, int target)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_OUTPUT);
    msgpack_pack_int(&pk, target);
    msgpack_pack_bin_with_body(&pk, OUTPUT_TEXT, strlen(OUTPUT_TEXT));
    struct iovec iov = { sb.data, sb.size };
    int rc = rgpu_write_frame(fd, &iov, 1);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* The serial of a request frame, or 0. */
static uint64_t request_serial(const char *frame, size_t len)
{
    msgpack_zone zone;
    msgpack_object root;
    uint64_t serial = 0;
    msgpack_zone_init(&zone, 1024);
    if (rgpu_unpack_frame(frame, len, &zone, &root) == 0 && root.type == MSGPACK_OBJECT_ARRAY &&
        root.via.array.size == 6)
        (void)rgpu_obj_u64(&root.via.array.ptr[1], &serial);
    msgpack_zone_destroy(&zone);
    return serial;
}

static void serve(int lfd, const struct rogue_case *c)
{
    struct rgpu_hs_msg m;
    char why[256], *frame;
    size_t len;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0 || rgpu_hs_recv(fd, &m, why, sizeof why) != 0 || m.type != RGPU_MSG_HELLO)
        _exit(1);
    memset(&m, 0, sizeof m);
    m.type = RGPU_MSG_WELCOME;
    m.u.welcome.proto = RGPU_PROTO_VERSION;
    m.u.welcome.runtime_version = 13000;
    m.u.welcome.driver_version = 13000;
    snprintf(m.u.welcome.server_name, sizeof m.u.welcome.server_name, "rogue");
    if (rgpu_hs_send(fd, &m) < 0 || rgpu_read_frame(fd, &frame, &len) < 0)
        _exit(1);
    uint64_t serial = request_serial(frame, len);
    free(frame);
    for (int i = 0; c->steps[i] != END; i++) {
        switch (c->steps[i]) {
        case DATA_OK: send_data(fd, serial, COUNT); break;
        case DATA_SHORT: send_data(fd, serial, COUNT - 1); break;
        case DATA_LONG: send_data(fd, serial, COUNT + 1); break;
        case DATA_STRANGER: send_data(fd, serial + 1000, COUNT); break;
        case REPLY_EMPTY: send_reply(fd, serial, 0); break;
        case REPLY_FULL: send_reply(fd, serial, COUNT); break;
        case OUTPUT_FD2: send_output(fd, 2); break;
        case OUTPUT_FD3: send_output(fd, 3); break;
        case END: break;
        }
    }
    /* Until the client leaves. */
    while (rgpu_read_frame(fd, &frame, &len) == 0)
        free(frame);
    _exit(0);
}

/* ---- the client -------------------------------------------------------------------- */

static void ask(const struct rogue_case *c, const char *server, int report)
{
    unsigned char *buf = calloc(1, COUNT + 2 * GUARD), *dst = buf + GUARD;
    if (!buf)
        _exit(2);
    setenv("RGPU_SERVER", server, 1);
    setenv("RGPU_TIMEOUT", "10", 1);
    setenv("RGPU_LOG", "error", 1);
    FILE *err = c->printed ? tmpfile() : NULL;
    if (err)
        dup2(fileno(err), STDERR_FILENO);
    int rc = rgpu_copy_to_host(&lib, &dtoh, dst, 0x1000, COUNT, 0);
    char why[256] = "", got[512] = "";
    if (err) {
        ssize_t n = pread(fileno(err), got, sizeof got - 1, 0);
        int has = n > 0 && strstr(got, OUTPUT_TEXT) == got;
        if (has != (c->printed > 0))
            snprintf(why, sizeof why, "stderr %s what the server printed: '%.200s'",
                     has ? "holds" : "lacks", got);
    }
    for (size_t i = 0; i < GUARD && !why[0]; i++)
        if (buf[i] || dst[COUNT + i])
            snprintf(why, sizeof why, "a byte outside the buffer was written");
    if (!why[0] && rc != c->status)
        snprintf(why, sizeof why, "status %d, wanted %d", rc, c->status);
    for (size_t i = 0; i < COUNT && !why[0] && c->bytes_good >= 0; i++)
        if (dst[i] != (c->bytes_good ? pattern(i) : 0))
            snprintf(why, sizeof why, "byte %zu is %u, wanted %u", i, dst[i],
                     c->bytes_good ? pattern(i) : 0);
    if (why[0])
        dprintf(report, "FAIL %s: %s\n", c->name, why);
    else
        dprintf(report, "ok %s\n", c->name);
    _exit(why[0] ? 1 : 0);
}

static int run_case(const struct rogue_case *c, const char *dir, int n)
{
    struct rgpu_addr a;
    char path[128], err[256];
    snprintf(path, sizeof path, "unix:%s/s%d", dir, n);
    if (rgpu_addr_parse(path, &a, err, sizeof err) < 0)
        return -1;
    int lfd = rgpu_addr_listen(&a, 0600, (gid_t)-1, err, sizeof err);
    if (lfd < 0) {
        printf("FAIL %s: %s\n", c->name, err);
        return -1;
    }
    pid_t server = fork();
    if (server == 0)
        serve(lfd, c);
    close(lfd);
    pid_t client = fork();
    if (client == 0)
        ask(c, path, STDOUT_FILENO);
    int status = 1, sstatus;
    /* Both are bounded: the client by RGPU_TIMEOUT, the server by the
     * client's leaving. */
    if (client < 0 || waitpid(client, &status, 0) != client)
        status = 1;
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, &sstatus, 0);
    }
    unlink(a.path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!WIFEXITED(status))
            printf("FAIL %s: the client died (signal %d)\n", c->name, WTERMSIG(status));
        return -1;
    }
    return 0;
}

int main(void)
{
    char dir[] = "/tmp/rgpu-rogue.XXXXXX";
    int failures = 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failures += run_case(&cases[i], dir, (int)i) < 0;
    rmdir(dir);
    return failures ? 1 : 0;
}
