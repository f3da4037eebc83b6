/* Calls through the raw protocol, for the tests that send what no stub
 * would (handles.c, devhostile.c): one call with any arguments, its
 * statuses and first output, and rgpud's log, where it says what it
 * refused.  The daemon start, framing and answer helpers are badinput.c's,
 * included rather than copied, so that a change to the hello reaches every
 * such test. */
#define main badinput_main
#include "badinput.c"
#undef main

#include <fcntl.h>
#include <sys/stat.h>

static char log_path[] = "/tmp/rgpu-rawcall-XXXXXX";
static uint64_t serial_no;

/* ---- calls through the raw protocol --------------------------------------- */

/* One call of lib/name with arguments by fmt: u a value, o an 8-byte
 * output (i a 4-byte one), s a string, b a bin (pointer, length).  *api gets the API status
 * and *out the first output's bytes (when there is one).  -1 (why set) on
 * a transport failure. */
static int callf(int fd, const char *lib, const char *name, uint64_t *api, uint64_t *out,
                 const char *fmt, ...)
{
    msgpack_sbuffer sb;
    struct msg m;
    struct answer a;
    va_list ap;

    msg_begin(&m);
    pack_call_head(&m, ++serial_no, rgpu_proc_id(lib, name));
    msgpack_pack_array(&m.pk, (uint32_t)strlen(fmt));
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        if (*f == 'u') {
            msgpack_pack_uint64(&m.pk, va_arg(ap, uint64_t));
        } else if (*f == 'o' || *f == 'i') {
            msgpack_pack_uint64(&m.pk, *f == 'o' ? 8 : 4);
        } else if (*f == 's') {
            const char *s = va_arg(ap, const char *);
            msgpack_pack_str_with_body(&m.pk, s, strlen(s));
        } else {
            const void *p = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            msgpack_pack_bin_with_body(&m.pk, p, n);
        }
    }
    va_end(ap);
    msgpack_sbuffer_init(&sb);
    msg_end(&m, &sb);
    int rc = send_buf(fd, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (rc < 0 || expect_reply(fd, (int64_t)serial_no, RGPU_OK, &a) < 0)
        return fail_prefix(name);
    *api = field(&a, 3);
    if (out) {
        const msgpack_object *o = &a.f[5];
        *out = 0;
        if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1 &&
            o->via.array.ptr[0].type == MSGPACK_OBJECT_BIN && o->via.array.ptr[0].via.bin.size <= 8)
            memcpy(out, o->via.array.ptr[0].via.bin.ptr, o->via.array.ptr[0].via.bin.size);
    }
    answer_free(&a);
    return 0;
}

/* A call that must succeed; its first output in *out. */
static int must(int fd, const char *lib, const char *name, uint64_t *out, const char *fmt,
                uint64_t a0, uint64_t a1)
{
    uint64_t api;
    int rc = strlen(fmt) == 1 ? callf(fd, lib, name, &api, out, fmt, a0)
                              : callf(fd, lib, name, &api, out, fmt, a0, a1);
    if (rc < 0)
        return -1;
    if (api != 0)
        return fail("%s: status %llu", name, (unsigned long long)api);
    if (out && !*out)
        return fail("%s: no handle came back", name);
    return 0;
}

/* ---- rgpud's own word that it refused -------------------------------------- */

/* How many refusals rgpud has logged so far. */
static int refusals(void)
{
    char buf[4096];
    int n = 0, fd = open(log_path, O_RDONLY | O_CLOEXEC);
    const char *needle = "never handed out";
    size_t keep = 0;
    ssize_t r;
    if (fd < 0)
        return -1;
    /* Lines are short; carry the tail over reads so none is split. */
    while ((r = read(fd, buf + keep, sizeof buf - 1 - keep)) > 0) {
        size_t len = keep + (size_t)r;
        buf[len] = '\0';
        for (char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
            n++;
        keep = len < strlen(needle) ? len : strlen(needle) - 1;
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return n;
}

/* Start rgpud with its log in log_path. */
static int start_logged(const char *exe, const char *dir)
{
    int lfd = mkstemp(log_path), saved = dup(STDERR_FILENO), rc = -1;
    if (lfd < 0 || saved < 0)
        return fail("log file: %s", strerror(errno));
    fflush(stderr);
    dup2(lfd, STDERR_FILENO);
    for (int attempt = 0; attempt < 3 && rc < 0 && !daemon_pid; attempt++)
        rc = start_daemon(exe, dir);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(lfd);
    return rc;
}

/* The end of a raw test: the session closed, rgpud stopped (it must exit
 * cleanly), its log kept where something failed.  The exit status. */
static int raw_finish(int fd, int failures)
{
    close(fd);
    if (stop_daemon() < 0) {
        printf("FAIL stop: %s\n", why);
        failures++;
    }
    if (failures)
        printf("rgpud's log: %s\n", log_path);
    else
        unlink(log_path);
    return failures ? 1 : 0;
}
