/* crafted-images: module images whose headers lie are refused by rgpud
 * before a loader reads them (daemon/image_check.c, docs/security.md).
 *
 *   images RGPUD LIB_DIR CUBIN
 *
 * CUBIN is tests/image_global.cu built by nvcc: one kernel and one
 * initialised global.  The test starts RGPUD on a Unix socket in a private
 * directory with the fake GPU backend of LIB_DIR, its log in a file there,
 * opens two sessions, and in the first loads the cubin as it is (it must
 * load, and its global read back its initialiser), then falsified copies,
 * plain and inside zstd-compressed fatbin entries, through each of the
 * three loaders (the runtime's, cuModuleLoadData's, cuLibraryLoadData's):
 *
 *   - section 0 (SHT_NULL) whose offset and size reach 64 KiB beyond the
 *     image: before, the loader computed the image's extent from it and
 *     copied 64 KiB of the session's heap;
 *   - the global's section turned SHT_NULL, reaching 64 KiB beyond the
 *     image, the global as large: before, the global was initialised from
 *     the session's heap and read back by the client;
 *   - the global 64 KiB long in its 64-byte section;
 *   - a compressed entry declaring more bytes than it holds.
 *
 * Each must be refused with CUDA_ERROR_INVALID_IMAGE (200, the runtime's
 * cudaErrorInvalidKernelImage too), rgpud's log must say why, and both
 * sessions must go on serving.  Where a falsified image loads (an rgpud
 * without the checks), the failure says what its global read back.
 * Prints "ok CASE" or "FAIL CASE: why"; exits non-zero on any failure.
 * Every wait is bounded. */
#include "rgpu_hello.h"
#include "rgpu_proto.h"

#include <arpa/inet.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>
#include <zstd.h>

#define IO_TIMEOUT_S 8
#define REPLY_MAX (1u << 20)
#define INVALID_IMAGE 200           /* CUDA_ERROR_INVALID_IMAGE, cudaErrorInvalidKernelImage */
#define BEYOND (64u << 10)          /* how far the lies reach */
#define GLOBAL "rgpu_image_global"
#define GLOBAL_BYTES 64
_Static_assert(BEYOND < RGPU_STREAM_MIN, "a read back must come inside its reply");

static const char *rgpud_exe, *lib_dir;
static char dir[64];                /* ours, 0700: the socket and rgpud's log */
static char sock_path[96], log_path[96];
static pid_t daemon_pid;
static char why[1024];

__attribute__((format(printf, 1, 2)))
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return -1;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- sockets and frames --------------------------------------------------------- */

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
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return fail("send: %s", strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_exact(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail("recv: %s", errno == EAGAIN ? "no answer in time" : strerror(errno));
        if (r == 0)
            return fail("connection closed (the session died)");
        got += (size_t)r;
    }
    return 0;
}

struct answer {
    char *frame;
    msgpack_zone zone;
    const msgpack_object *f;
    uint32_t n;
};

static void answer_free(struct answer *a)
{
    msgpack_zone_destroy(&a->zone);
    free(a->frame);
}

/* One frame holding one array; keepalives are skipped. */
static int read_answer(int fd, struct answer *a)
{
    for (;;) {
        uint32_t be;
        msgpack_object root;
        size_t off = 0;
        if (recv_exact(fd, &be, sizeof be) < 0)
            return -1;
        uint32_t n = ntohl(be);
        if (n == 0 || n > REPLY_MAX)
            return fail("answer frame of %u bytes", n);
        a->frame = malloc(n);
        if (!a->frame || recv_exact(fd, a->frame, n) < 0) {
            free(a->frame);
            return -1;
        }
        msgpack_zone_init(&a->zone, 1024);
        if (msgpack_unpack(a->frame, n, &off, &a->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
            root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size < 1) {
            answer_free(a);
            return fail("answer is not a msgpack array");
        }
        a->f = root.via.array.ptr;
        a->n = root.via.array.size;
        if (a->f[0].via.u64 != RGPU_MSG_KEEPALIVE)
            return 0;
        answer_free(a);
    }
}

static uint64_t field(const struct answer *a, uint32_t i)
{
    if (i >= a->n || a->f[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return UINT64_MAX;
    return a->f[i].via.u64;
}

static int open_session(void)
{
    struct rgpu_hello h = { .client_name = "images" };
    struct rgpu_welcome w;
    char how[128], reason[512];
    int fd = dial();
    if (fd < 0)
        return -1;
    if (rgpu_hs_client(fd, 0, &h, &w, how, sizeof how, reason, sizeof reason) < 0) {
        close(fd);
        return fail("hello: %s", reason);
    }
    if (w.status != RGPU_OK) {
        close(fd);
        return fail("welcome status %d (%s)", w.status, rgpu_status_name(w.status));
    }
    return fd;
}

/* A call being built: [CALL, serial, proc, thread 1, flags 0, args]. */
struct call {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void call_begin(struct call *c, const char *lib, const char *proc, uint32_t nargs)
{
    msgpack_sbuffer_init(&c->sb);
    msgpack_packer_init(&c->pk, &c->sb, msgpack_sbuffer_write);
    msgpack_pack_array(&c->pk, 6);
    msgpack_pack_int(&c->pk, RGPU_MSG_CALL);
    msgpack_pack_uint64(&c->pk, 1);
    msgpack_pack_uint32(&c->pk, rgpu_proc_id(lib, proc));
    msgpack_pack_uint32(&c->pk, 1);
    msgpack_pack_uint32(&c->pk, 0);
    msgpack_pack_array(&c->pk, nargs);
}

/* Send the call and read its reply into a (freed by the caller when 0):
 * the transport status must be RGPU_OK; the api status is field 3, the
 * outputs array field 5. */
static int call_end(int fd, struct call *c, struct answer *a)
{
    uint32_t be = htonl((uint32_t)c->sb.size);
    int rc = send_all(fd, &be, sizeof be) < 0 || send_all(fd, c->sb.data, c->sb.size) < 0 ||
             read_answer(fd, a) < 0 ? -1 : 0;
    msgpack_sbuffer_destroy(&c->sb);
    if (rc < 0)
        return -1;
    if (a->n != 6 || field(a, 0) != RGPU_MSG_REPLY || field(a, 2) != RGPU_OK) {
        answer_free(a);
        return fail("not a served reply (transport %llu)", (unsigned long long)field(a, 2));
    }
    return 0;
}

/* An output of a reply: element i of its outputs, a bin of want bytes. */
static int out_bin(const struct answer *a, uint32_t i, void *dst, size_t want)
{
    const msgpack_object *outs = &a->f[5];
    if (outs->type != MSGPACK_OBJECT_ARRAY || i >= outs->via.array.size ||
        outs->via.array.ptr[i].type != MSGPACK_OBJECT_BIN ||
        outs->via.array.ptr[i].via.bin.size != want)
        return fail("output %u is not %zu bytes", i, want);
    memcpy(dst, outs->via.array.ptr[i].via.bin.ptr, want);
    return 0;
}

/* An 8-byte output (a handle), 0 when absent. */
static uint64_t out_u64(const struct answer *a, uint32_t i)
{
    const msgpack_object *outs = &a->f[5];
    uint64_t v = 0;
    if (outs->type == MSGPACK_OBJECT_ARRAY && i < outs->via.array.size &&
        outs->via.array.ptr[i].type == MSGPACK_OBJECT_BIN &&
        outs->via.array.ptr[i].via.bin.size == sizeof v)
        memcpy(&v, outs->via.array.ptr[i].via.bin.ptr, sizeof v);
    return v;
}

/* A generated call whose api status must be 0. */
static int expect_success(int fd, struct call *c, const char *what, struct answer *a)
{
    if (call_end(fd, c, a) < 0)
        return -1;
    if (field(a, 3) != 0) {
        int api = (int)field(a, 3);
        answer_free(a);
        return fail("%s: status %d", what, api);
    }
    return 0;
}

/* cudaGetDeviceCount: the session serves. */
static int good_call(int fd, const char *who)
{
    struct call c;
    struct answer a;
    call_begin(&c, "cudart", "cudaGetDeviceCount", 1);
    msgpack_pack_uint32(&c.pk, sizeof(int));
    if (expect_success(fd, &c, "cudaGetDeviceCount", &a) < 0)
        return fail("%s no longer serves: %s", who, why);
    answer_free(&a);
    return 0;
}

/* The runtime's primary context current on the session's thread, for the
 * driver's calls (cudaFree(NULL) makes it, as in a program). */
static int context(int fd)
{
    struct call c;
    struct answer a;
    call_begin(&c, "cudart", "cudaFree", 1);
    msgpack_pack_uint64(&c.pk, 0);
    if (expect_success(fd, &c, "cudaFree(NULL)", &a) < 0)
        return -1;
    answer_free(&a);
    return 0;
}

/* ---- loads ----------------------------------------------------------------------- */

struct loader {
    const char *lib, *proc;
};

static const struct loader loaders[] = {
    { "cudart", "rgpu_lib_load" },
    { "cuda", "rgpu_cu_module_load" },
    { "cuda", "rgpu_cu_library_load" },
};
#define NLOADERS (sizeof loaders / sizeof loaders[0])

/* Load image with one loader: its api status (the handle in *handle), or -1. */
static int load(int fd, const struct loader *l, const void *image, size_t n, uint64_t *handle)
{
    struct call c;
    struct answer a;
    /* The runtime's: [library, image_size, image]; the driver's: [handle,
     * options, noptions, names, names_size, result, logs, logs_size,
     * logs_used, image_size, image] without options or logs. */
    int driver = strcmp(l->lib, "cuda") == 0;
    call_begin(&c, l->lib, l->proc, driver ? 11 : 3);
    msgpack_pack_uint64(&c.pk, 8);
    if (driver) {
        msgpack_pack_nil(&c.pk);
        msgpack_pack_uint64(&c.pk, 0);
        msgpack_pack_nil(&c.pk);
        msgpack_pack_uint64(&c.pk, 0);
        msgpack_pack_uint64(&c.pk, 24);     /* struct rgpu_jit_result */
        msgpack_pack_uint64(&c.pk, 0);
        msgpack_pack_uint64(&c.pk, 0);
        msgpack_pack_uint64(&c.pk, 8);
    }
    msgpack_pack_uint64(&c.pk, n);
    msgpack_pack_bin(&c.pk, n);
    msgpack_pack_bin_body(&c.pk, image, n);
    if (call_end(fd, &c, &a) < 0)
        return -1;
    int api = (int)field(&a, 3);
    *handle = out_u64(&a, 0);
    answer_free(&a);
    return api;
}

/* The module's global: its address and size (cuModuleGetGlobal_v2). */
static int module_global(int fd, uint64_t module, uint64_t *dptr, uint64_t *size)
{
    struct call c;
    struct answer a;
    call_begin(&c, "cuda", "cuModuleGetGlobal_v2", 4);
    msgpack_pack_uint32(&c.pk, sizeof *dptr);
    msgpack_pack_uint32(&c.pk, sizeof *size);
    msgpack_pack_uint64(&c.pk, module);
    msgpack_pack_str_with_body(&c.pk, GLOBAL, sizeof GLOBAL);
    if (expect_success(fd, &c, "cuModuleGetGlobal_v2", &a) < 0)
        return -1;
    int rc = out_bin(&a, 0, dptr, sizeof *dptr) < 0 || out_bin(&a, 1, size, sizeof *size) < 0;
    answer_free(&a);
    return rc ? -1 : 0;
}

/* count bytes of device memory at src, read back (rgpu_cu_dtoh: the
 * output's length, the count, src, the stream; below RGPU_STREAM_MIN the
 * bytes come in the reply). */
static int read_device(int fd, uint64_t src, void *dst, size_t count)
{
    struct call c;
    struct answer a;
    call_begin(&c, "cuda", "rgpu_cu_dtoh", 4);
    msgpack_pack_uint64(&c.pk, count);
    msgpack_pack_uint64(&c.pk, count);
    msgpack_pack_uint64(&c.pk, src);
    msgpack_pack_uint64(&c.pk, 0);
    if (expect_success(fd, &c, "rgpu_cu_dtoh", &a) < 0)
        return -1;
    int rc = out_bin(&a, 0, dst, count);
    answer_free(&a);
    return rc;
}

static void unload(int fd, uint64_t module)
{
    struct call c;
    struct answer a;
    call_begin(&c, "cuda", "cuModuleUnload", 1);
    msgpack_pack_uint64(&c.pk, module);
    if (call_end(fd, &c, &a) == 0)
        answer_free(&a);
}

/* The global of a module that loaded: how many of its bytes are not the
 * image's initialiser (where a load should have been refused, this is
 * what the client got to read). */
static int global_check(int fd, uint64_t module, char *said, size_t len)
{
    uint64_t dptr, size;
    if (module_global(fd, module, &dptr, &size) < 0)
        return -1;
    size_t n = size < BEYOND ? (size_t)size : BEYOND;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf || read_device(fd, dptr, buf, n) < 0) {
        free(buf);
        return -1;
    }
    size_t foreign = 0, nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        foreign += i >= GLOBAL_BYTES || buf[i] != i + 1;
        nonzero += i >= GLOBAL_BYTES && buf[i] != 0;
    }
    snprintf(said, len, "its global of %llu bytes read back %zu bytes that are not its "
             "initialiser, %zu of them non-zero beyond it", (unsigned long long)size, foreign,
             nonzero);
    free(buf);
    return size == GLOBAL_BYTES && foreign == 0 ? 0 : 1;
}

/* ---- rgpud and its log ------------------------------------------------------------ */

static int start_daemon(void)
{
    char listen[128];
    snprintf(listen, sizeof listen, "unix:%s", sock_path);
    const char *argv[] = { rgpud_exe, "--foreground", "--listen", listen, "--lib-dir",
                           lib_dir, NULL };
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        FILE *log = freopen(log_path, "w", stderr);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (log)
            execv(rgpud_exe, (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);
    daemon_pid = pid;
    for (int waited = 0; waited < IO_TIMEOUT_S * 1000; waited += 20) {
        struct stat st;
        if (stat(sock_path, &st) == 0)
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            daemon_pid = 0;
            return fail("rgpud exited before listening");
        }
        pause_ms(20);
    }
    return fail("rgpud did not listen within %d s", IO_TIMEOUT_S);
}

static void stop_daemon(void)
{
    if (!daemon_pid)
        return;
    kill(-daemon_pid, SIGKILL);
    waitpid(daemon_pid, NULL, 0);
    daemon_pid = 0;
    unlink(sock_path);
}

/* Lines of rgpud's log containing text, counted. */
static int log_count(const char *text)
{
    char line[2048];
    int n = 0;
    FILE *f = fopen(log_path, "r");
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, text) != NULL;
    if (f)
        fclose(f);
    return n;
}

/* ---- images ------------------------------------------------------------------------ */

struct image {
    unsigned char *p;
    size_t n;
};

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long len;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(p = malloc((size_t)len)) || fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    if (f)
        fclose(f);
    *n = p ? (size_t)len : 0;
    return p;
}

static Elf64_Shdr *section(const struct image *m, unsigned i)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)m->p;
    return (Elf64_Shdr *)(m->p + eh->e_shoff) + i;
}

/* The global's symbol (tests/image_global.cu), or NULL. */
static Elf64_Sym *global_symbol(const struct image *m)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)m->p;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr *s = section(m, i);
        if (s->sh_type != SHT_SYMTAB)
            continue;
        const char *names = (const char *)m->p + section(m, s->sh_link)->sh_offset;
        Elf64_Sym *sym = (Elf64_Sym *)(m->p + s->sh_offset);
        for (size_t k = 0; k < s->sh_size / sizeof *sym; k++)
            if (strcmp(names + sym[k].st_name, GLOBAL) == 0)
                return &sym[k];
    }
    return NULL;
}

/* Falsifications of the cubin, in place. */
static void null_section_beyond(struct image *m)
{
    section(m, 0)->sh_offset = m->n - 16;
    section(m, 0)->sh_size = BEYOND;
}

static void global_section_null_beyond(struct image *m)
{
    Elf64_Sym *g = global_symbol(m);
    Elf64_Shdr *s = section(m, g->st_shndx);
    s->sh_type = SHT_NULL;
    s->sh_offset = m->n - GLOBAL_BYTES;
    s->sh_size = BEYOND;
    g->st_size = BEYOND;
}

static void global_beyond_section(struct image *m)
{
    global_symbol(m)->st_size = BEYOND;
}

/* A fatbin of one zstd-compressed ELF entry holding plain (as nvcc's
 * -compress-all writes it); declared: the size its header claims. */
static int compressed(const struct image *plain, size_t declared, struct image *out)
{
    size_t bound = ZSTD_compressBound(plain->n);
    out->p = calloc(1, 16 + 64 + bound + 8);
    if (!out->p)
        return fail("out of memory");
    size_t c = ZSTD_compress(out->p + 80, bound, plain->p, plain->n, 19);
    if (ZSTD_isError(c)) {
        free(out->p);
        return fail("zstd: %s", ZSTD_getErrorName(c));
    }
    uint64_t payload = (c + 7) & ~(uint64_t)7;
    uint32_t magic = 0xba55ed50u, hsize = 64, csize = (uint32_t)c, arch = 90;
    uint16_t version = 1, chsize = 16, kind = 2, eversion = 0x101;
    uint64_t fat = 64 + payload, flags = 0x8011, dsize = declared;
    memcpy(out->p, &magic, 4);
    memcpy(out->p + 4, &version, 2);
    memcpy(out->p + 6, &chsize, 2);
    memcpy(out->p + 8, &fat, 8);
    unsigned char *e = out->p + 16;
    memcpy(e, &kind, 2);
    memcpy(e + 2, &eversion, 2);
    memcpy(e + 4, &hsize, 4);
    memcpy(e + 8, &payload, 8);
    memcpy(e + 16, &csize, 4);
    memcpy(e + 28, &arch, 4);
    memcpy(e + 40, &flags, 8);
    memcpy(e + 56, &dsize, 8);
    out->n = 16 + 64 + payload;
    return 0;
}

/* ---- cases ------------------------------------------------------------------------- */

static struct image cubin;
static int fd_a, fd_b;             /* the session under test, another client's */

/* Each loader refuses img, naming reason in the log; both sessions serve.
 * A loader that does not refuse is reported with what it did. */
static int refused_everywhere(const struct image *img, const char *reason)
{
    char report[768] = "";
    size_t used = 0;
    for (size_t l = 0; l < NLOADERS; l++) {
        uint64_t handle = 0;
        char said[256] = "";
        int before = log_count(reason);
        int api = load(fd_a, &loaders[l], img->p, img->n, &handle);
        if (api < 0)
            return fail("%s: %s", loaders[l].proc, why);
        if (api == INVALID_IMAGE && log_count(reason) > before)
            continue;
        if (api == INVALID_IMAGE)
            snprintf(said, sizeof said, "refused, but rgpud's log does not say \"%s\"", reason);
        else if (api != 0 || l != 1 || global_check(fd_a, handle, said, sizeof said) < 0)
            snprintf(said, sizeof said, "status %d, wanted %d", api, INVALID_IMAGE);
        else
            snprintf(said + strlen(said), sizeof said - strlen(said), " (loaded: status 0)");
        used += (size_t)snprintf(report + used, sizeof report - used, "%s%s: %s",
                                 used ? "; " : "", loaders[l].proc, said);
        if (used >= sizeof report)
            used = sizeof report - 1;
    }
    if (used)
        return fail("%s", report);
    return good_call(fd_a, "the session") < 0 || good_call(fd_b, "another client's session") < 0
               ? -1 : 0;
}

static int falsified(void (*lie)(struct image *), const char *reason)
{
    struct image m = { malloc(cubin.n), cubin.n };
    if (!m.p)
        return fail("out of memory");
    memcpy(m.p, cubin.p, cubin.n);
    lie(&m);
    int rc = refused_everywhere(&m, reason);
    free(m.p);
    return rc;
}

/* The real cubin, plain and compressed, loads; its global reads back its
 * initialiser. */
static int c_real(void)
{
    struct image z;
    char said[256];
    if (compressed(&cubin, cubin.n, &z) < 0)
        return -1;
    const struct image *forms[] = { &cubin, &z };
    int rc = 0;
    for (size_t i = 0; i < 2 && rc == 0; i++)
        for (size_t l = 0; l < NLOADERS && rc == 0; l++) {
            uint64_t handle = 0;
            int api = load(fd_a, &loaders[l], forms[i]->p, forms[i]->n, &handle);
            if (api != 0)
                rc = api < 0 ? -1 : fail("%s of the %s cubin: status %d", loaders[l].proc,
                                         i ? "compressed" : "plain", api);
            else if (l == 1 && (rc = global_check(fd_a, handle, said, sizeof said)) != 0)
                rc = rc < 0 ? -1 : fail("%s", said);
            if (l == 1 && api == 0)
                unload(fd_a, handle);
        }
    free(z.p);
    return rc;
}

static int c_null_section(void)
{
    return falsified(null_section_beyond, "section 0 (type 0): bytes");
}

static int c_global_section_null(void)
{
    return falsified(global_section_null_beyond, "(type 0): bytes");
}

static int c_global_beyond(void)
{
    return falsified(global_beyond_section, "reaches beyond its section");
}

/* The heap-reading cubin inside a compressed entry. */
static int c_compressed_lie(void)
{
    struct image m = { malloc(cubin.n), cubin.n }, z;
    if (!m.p)
        return fail("out of memory");
    memcpy(m.p, cubin.p, cubin.n);
    global_section_null_beyond(&m);
    int rc = compressed(&m, m.n, &z);
    free(m.p);
    if (rc < 0)
        return -1;
    rc = refused_everywhere(&z, "(type 0): bytes");
    free(z.p);
    return rc;
}

static int c_compressed_short(void)
{
    struct image z;
    if (compressed(&cubin, cubin.n + BEYOND, &z) < 0)
        return -1;
    int rc = refused_everywhere(&z, "does not decompress to");
    free(z.p);
    return rc;
}

static const struct {
    const char *name;
    int (*run)(void);
} cases[] = {
    { "real-cubin-loads", c_real },
    { "null-section-beyond-image", c_null_section },
    { "global-in-null-section-beyond-image", c_global_section_null },
    { "global-beyond-its-section", c_global_beyond },
    { "compressed-entry-lying", c_compressed_lie },
    { "compressed-entry-short", c_compressed_short },
};

int main(int argc, char **argv)
{
    int failures = 0;
    if (argc < 4) {
        fprintf(stderr, "usage: %s RGPUD LIB_DIR CUBIN [CASE...]\n", argv[0]);
        return 2;
    }
    rgpud_exe = argv[1];
    lib_dir = argv[2];
    cubin.p = read_file(argv[3], &cubin.n);
    if (!cubin.p || cubin.n < sizeof(Elf64_Ehdr) || !global_symbol(&cubin)) {
        fprintf(stderr, "images: %s is not the cubin of tests/image_global.cu\n", argv[3]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "%s", "/tmp/rgpu-images-XXXXXX");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "images: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    snprintf(sock_path, sizeof sock_path, "%s/rgpud.sock", dir);
    snprintf(log_path, sizeof log_path, "%s/rgpud.log", dir);
    if (start_daemon() < 0 || (fd_a = open_session()) < 0 || (fd_b = open_session()) < 0 ||
        context(fd_a) < 0 || context(fd_b) < 0) {
        printf("FAIL setup: %s\n", why);
        stop_daemon();
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int chosen = argc == 4;
        for (int k = 4; k < argc; k++)
            chosen |= strcmp(argv[k], cases[i].name) == 0;
        if (!chosen)
            continue;
        why[0] = '\0';
        if (cases[i].run() < 0) {
            printf("FAIL %s: %s\n", cases[i].name, why);
            failures++;
            /* A session that died takes the later cases with it: a new one. */
            if (good_call(fd_a, "the session") < 0) {
                close(fd_a);
                if ((fd_a = open_session()) < 0 || context(fd_a) < 0)
                    break;
            }
        } else {
            printf("ok %s\n", cases[i].name);
        }
    }
    close(fd_a);
    close(fd_b);
    stop_daemon();
    unlink(log_path);
    rmdir(dir);
    return failures ? 1 : 0;
}
