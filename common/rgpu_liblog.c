/* Library logs forwarded from rgpud (see rgpu_liblog.h). */
#include "rgpu_liblog.h"
#include "rgpu_client.h"
#include "rgpu_log.h"
#include "rgpu_wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LIBS 8

static struct logging_lib {
    const struct rgpu_lib *lib;
    rgpu_liblog_sink sink;
    const struct rgpu_proc *proc;   /* the library's rgpu_<lib>_log_settings */
    int setting;
    int pending;                /* the setting not yet sent */
} libs[MAX_LIBS];
static int nlibs;
static atomic_int settings_pending;     /* any lib's: the fast path's test */

struct queued {
    char *frame;
    size_t len;
    struct queued *next;
};
static struct queued *queue_head, **queue_tail = &queue_head;
static atomic_int queued_count;         /* every reply checks it: no lock then */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Called with lock held. */
static struct logging_lib *entry_of(const char *name)
{
    for (int i = 0; i < nlibs; i++)
        if (strcmp(libs[i].lib->name, name) == 0)
            return &libs[i];
    return NULL;
}

static struct logging_lib *entry_for(const struct rgpu_lib *lib)
{
    struct logging_lib *e = entry_of(lib->name);
    if (!e && nlibs < MAX_LIBS) {
        e = &libs[nlibs++];
        e->lib = lib;
    }
    return e;
}

void rgpu_liblog_register(const struct rgpu_lib *lib, rgpu_liblog_sink sink)
{
    pthread_mutex_lock(&lock);
    struct logging_lib *e = entry_for(lib);
    if (e)
        e->sink = sink;
    pthread_mutex_unlock(&lock);
}

/* Send the setting to rgpud: waiting for the reply when wait, so that what
 * applying it logs is delivered before the setter returns, as a local
 * library would; without waiting, a failure shows as the next waiting
 * call's deferred status. */
static void send_setting(const struct rgpu_lib *lib, const struct rgpu_proc *proc, int setting,
                         int wait)
{
    const void *argv[] = { &setting };
    int rc = rgpu_call_unwaited_when(lib, proc, argv, !wait);
    if (rc != 0)
        rgpu_warn("%s: rgpud could not apply its log settings (status %d)", lib->soname, rc);
}

void rgpu_liblog_configure(const struct rgpu_lib *lib, const struct rgpu_proc *proc, int setting)
{
    /* Connected: apply now.  Not yet: before the library's first call, so
     * that loading a stub never opens a session. */
    if (rgpu_session_started()) {
        send_setting(lib, proc, setting, 1);
        return;
    }
    pthread_mutex_lock(&lock);
    struct logging_lib *e = entry_for(lib);
    if (e) {
        e->proc = proc;
        e->setting = setting;
        if (!e->pending) {
            e->pending = 1;
            atomic_fetch_add(&settings_pending, 1);
        }
    }
    pthread_mutex_unlock(&lock);
}

void rgpu_liblog_flush_settings(const struct rgpu_lib *lib)
{
    const struct rgpu_proc *proc = NULL;
    int setting = 0;

    if (atomic_load(&settings_pending) == 0)
        return;
    pthread_mutex_lock(&lock);
    struct logging_lib *e = entry_of(lib->name);
    if (e && e->pending) {
        e->pending = 0;
        atomic_fetch_sub(&settings_pending, 1);
        proc = e->proc;
        setting = e->setting;
    }
    pthread_mutex_unlock(&lock);
    if (proc)
        send_setting(lib, proc, setting, 0);
}

void rgpu_liblog_queue(char *frame, size_t len)
{
    struct queued *q = malloc(sizeof *q);
    if (!q) {
        free(frame);
        return;
    }
    *q = (struct queued){ frame, len, NULL };
    pthread_mutex_lock(&lock);
    *queue_tail = q;
    queue_tail = &q->next;
    atomic_fetch_add(&queued_count, 1);
    pthread_mutex_unlock(&lock);
}

/* A string field as a NUL-terminated copy (msgpack strings are not
 * terminated); NULL when it is not a string. */
static char *str_copy(const msgpack_object *o)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return NULL;
    char *s = malloc(o->via.str.size + 1);
    if (s) {
        memcpy(s, o->via.str.ptr, o->via.str.size);
        s[o->via.str.size] = '\0';
    }
    return s;
}

/* [RGPU_MSG_LOG, lib, level, function, text, [details...]] */
static void deliver_one(const char *frame, size_t len)
{
    msgpack_zone zone;
    msgpack_object root;
    int64_t level, details[16];
    unsigned ndetails = 0;
    char *lib = NULL, *function = NULL, *text = NULL;
    rgpu_liblog_sink sink = NULL;
    int well_formed = 0;

    msgpack_zone_init(&zone, 1024);
    if (rgpu_unpack_frame(frame, len, &zone, &root) < 0 || root.type != MSGPACK_OBJECT_ARRAY ||
        root.via.array.size != 6)
        goto out;
    const msgpack_object *o = root.via.array.ptr;
    if (rgpu_obj_i64(&o[2], &level) < 0 || o[5].type != MSGPACK_OBJECT_ARRAY)
        goto out;
    lib = str_copy(&o[1]);
    function = str_copy(&o[3]);
    text = str_copy(&o[4]);
    if (!lib || !function || !text)
        goto out;
    well_formed = 1;
    for (uint32_t i = 0; i < o[5].via.array.size && ndetails < 16; i++)
        if (rgpu_obj_i64(&o[5].via.array.ptr[i], &details[ndetails]) == 0)
            ndetails++;
    pthread_mutex_lock(&lock);
    struct logging_lib *e = entry_of(lib);
    sink = e ? e->sink : NULL;
    pthread_mutex_unlock(&lock);
    if (sink)
        sink(&(struct rgpu_liblog_msg){ (int)level, function, text, details, ndetails });
out:
    if (!well_formed)
        rgpu_warn("a malformed log message from rgpud: ignored");
    free(lib);
    free(function);
    free(text);
    msgpack_zone_destroy(&zone);
}

void rgpu_liblog_deliver(void)
{
    static _Thread_local int delivering;   /* a callback's own calls: no nesting */
    if (delivering || atomic_load(&queued_count) == 0)
        return;
    delivering = 1;
    for (;;) {
        pthread_mutex_lock(&lock);
        struct queued *q = queue_head;
        if (q) {
            queue_head = q->next;
            if (!queue_head)
                queue_tail = &queue_head;
            atomic_fetch_sub(&queued_count, 1);
        }
        pthread_mutex_unlock(&lock);
        if (!q)
            break;
        deliver_one(q->frame, q->len);
        free(q->frame);
        free(q);
    }
    delivering = 0;
}

FILE *rgpu_liblog_open(const char *spec)
{
    char path[4096];
    size_t n = 0;

    if (strcmp(spec, "stdout") == 0)
        return stdout;
    if (strcmp(spec, "stderr") == 0)
        return stderr;
    for (const char *p = spec; *p && n + 24 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'i') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%ld", (long)getpid());
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    FILE *f = fopen(path, "a");
    if (f)
        setvbuf(f, NULL, _IOLBF, 0);
    return f;
}
