/* The hello codec, its cryptography and key files (see rgpu_hello.h). */
#include "rgpu_hello.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#ifndef RGPU_VERSION
#define RGPU_VERSION "unknown"
#endif

/* Nothing in a handshake is large: a bigger frame before authentication
 * is refused before it is read, so an unknown peer cannot make the
 * session allocate RGPU_FRAME_MAX. */
#define HS_FRAME_MAX (64u << 10)

/* Put a reason in why and return -1 (rgpu_log.h). */
#define WHY(...) rgpu_reason(why, whylen, __VA_ARGS__)

const char *rgpu_version_string(void)
{
    return "rgpu " RGPU_VERSION;
}

/* ---- encoding ---------------------------------------------------------------- */

static void pack_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_bin(msgpack_packer *pk, const unsigned char *p, size_t n)
{
    msgpack_pack_bin_with_body(pk, p, n);
}

static void pack_hello(msgpack_packer *pk, const struct rgpu_hello *h)
{
    msgpack_pack_array(pk, 7);
    msgpack_pack_int(pk, RGPU_MSG_HELLO);
    msgpack_pack_int(pk, h->proto);
    pack_str(pk, h->client_name);
    msgpack_pack_map(pk, (size_t)h->nlibs);
    for (int i = 0; i < h->nlibs; i++) {
        pack_str(pk, h->libs[i].name);
        pack_bin(pk, h->libs[i].digest, RGPU_DIGEST_LEN);
    }
    pack_bin(pk, h->nonce, RGPU_NONCE_LEN);
    msgpack_pack_map(pk, (size_t)h->nlibs);
    for (int i = 0; i < h->nlibs; i++) {
        pack_str(pk, h->libs[i].name);
        pack_str(pk, h->libs[i].soname);
    }
    if (h->visible.set)
        pack_str(pk, h->visible.list);
    else
        msgpack_pack_nil(pk);
}

static void pack_welcome(msgpack_packer *pk, const struct rgpu_welcome *w)
{
    msgpack_pack_array(pk, 10);
    msgpack_pack_int(pk, RGPU_MSG_WELCOME);
    msgpack_pack_int(pk, w->proto);
    msgpack_pack_int(pk, w->status);
    msgpack_pack_int(pk, w->runtime_version);
    msgpack_pack_int(pk, w->driver_version);
    pack_str(pk, w->server_name);
    pack_str(pk, w->message);
    if (w->has_proof)
        pack_bin(pk, w->proof, RGPU_MAC_LEN);
    else
        msgpack_pack_nil(pk);
    msgpack_pack_array(pk, (size_t)w->nlibs);
    for (int i = 0; i < w->nlibs; i++) {
        msgpack_pack_array(pk, 3);
        pack_str(pk, w->libs[i].name);
        pack_str(pk, w->libs[i].soname);
        msgpack_pack_int(pk, w->libs[i].version);
    }
    msgpack_pack_int(pk, w->cuda_devices);
}

int rgpu_hs_send(int fd, const struct rgpu_hs_msg *m)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    switch (m->type) {
    case RGPU_MSG_HELLO:
        pack_hello(&pk, &m->u.hello);
        break;
    case RGPU_MSG_CHALLENGE:
        msgpack_pack_array(&pk, 2);
        msgpack_pack_int(&pk, RGPU_MSG_CHALLENGE);
        pack_bin(&pk, m->u.server_nonce, RGPU_NONCE_LEN);
        break;
    case RGPU_MSG_AUTH:
        msgpack_pack_array(&pk, 3);
        msgpack_pack_int(&pk, RGPU_MSG_AUTH);
        pack_str(&pk, m->u.auth.key_id);
        if (m->u.auth.has_mac)
            pack_bin(&pk, m->u.auth.mac, RGPU_MAC_LEN);
        else
            msgpack_pack_nil(&pk);
        break;
    case RGPU_MSG_WELCOME:
        pack_welcome(&pk, &m->u.welcome);
        break;
    default:
        msgpack_sbuffer_destroy(&sb);
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = { sb.data, sb.size };
    int rc = rgpu_write_frame(fd, &iov, 1);
    int e = errno;
    /* The frame held a MAC at most, never a key; cleared all the same. */
    rgpu_wipe(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    errno = e;
    return rc;
}

/* ---- decoding ---------------------------------------------------------------- */

static int get_str(const msgpack_object *o, char *buf, size_t size)
{
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= size)
        return -1;
    /* msgpack-c gives an empty str a NULL pointer: nothing to look at. */
    if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size))
        return -1;
    if (o->via.str.size)
        memcpy(buf, o->via.str.ptr, o->via.str.size);
    buf[o->via.str.size] = '\0';
    return 0;
}

/* Like get_str, but a long text is cut rather than refused (messages). */
static void get_text(const msgpack_object *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (o->type == MSGPACK_OBJECT_STR && o->via.str.size)     /* empty: a NULL pointer */
        snprintf(buf, size, "%.*s", (int)o->via.str.size, o->via.str.ptr);
}

static int get_bin(const msgpack_object *o, unsigned char *buf, size_t n)
{
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != n)
        return -1;
    memcpy(buf, o->via.bin.ptr, n);
    return 0;
}

static int get_int(const msgpack_object *o, int *v)
{
    int64_t x;
    if (rgpu_obj_i64(o, &x) < 0 || x < INT32_MIN || x > INT32_MAX)
        return -1;
    *v = (int)x;
    return 0;
}

/* {lib: soname}: each name one the digests named. */
static int decode_sonames(const msgpack_object_map *m, struct rgpu_hello *h, char *why,
                          size_t whylen)
{
    if (m->size > RGPU_HELLO_MAX_LIBS)
        return WHY("hello names %u library sonames, more than %d", m->size,
                   RGPU_HELLO_MAX_LIBS);
    for (uint32_t i = 0; i < m->size; i++) {
        char name[32], soname[48];
        int k;
        if (get_str(&m->ptr[i].key, name, sizeof name) < 0 ||
            get_str(&m->ptr[i].val, soname, sizeof soname) < 0)
            return WHY("hello's library sonames are not {name: soname}");
        for (k = 0; k < h->nlibs && strcmp(h->libs[k].name, name) != 0; k++)
            ;
        if (k == h->nlibs)
            return WHY("hello names the soname of %s, a library without a digest", name);
        snprintf(h->libs[k].soname, sizeof h->libs[k].soname, "%s", soname);
    }
    return 0;
}

static int decode_hello(const msgpack_object *f, uint32_t n, struct rgpu_hello *h, char *why,
                        size_t whylen)
{
    if (n < 2 || get_int(&f[1], &h->proto) < 0)
        return WHY("hello without a protocol version");
    /* Any other version: enough to answer it with a version message. */
    if (h->proto != RGPU_PROTO_VERSION) {
        if (n >= 3)
            get_text(&f[2], h->client_name, sizeof h->client_name);
        return 0;
    }
    if (n != 7 || get_str(&f[2], h->client_name, sizeof h->client_name) < 0 ||
        f[3].type != MSGPACK_OBJECT_MAP || get_bin(&f[4], h->nonce, RGPU_NONCE_LEN) < 0 ||
        f[5].type != MSGPACK_OBJECT_MAP ||
        (f[6].type != MSGPACK_OBJECT_NIL &&
         get_str(&f[6], h->visible.list, sizeof h->visible.list) < 0))
        return WHY("hello is not [HELLO, %d, name, {lib: digest}, nonce(32), {lib: soname}, "
                   "CUDA_VISIBLE_DEVICES (str of at most %d bytes, or nil)]",
                   RGPU_PROTO_VERSION, RGPU_VISIBLE_MAX - 1);
    h->visible.set = f[6].type != MSGPACK_OBJECT_NIL;
    const msgpack_object_map *m = &f[3].via.map;
    if (m->size > RGPU_HELLO_MAX_LIBS)
        return WHY("hello names %u libraries, more than %d", m->size, RGPU_HELLO_MAX_LIBS);
    for (uint32_t i = 0; i < m->size; i++) {
        struct rgpu_lib_digest *d = &h->libs[i];
        if (get_str(&m->ptr[i].key, d->name, sizeof d->name) < 0 ||
            get_bin(&m->ptr[i].val, d->digest, RGPU_DIGEST_LEN) < 0)
            return WHY("hello's library digests are not {name: bin(32)}");
    }
    h->nlibs = (int)m->size;
    return decode_sonames(&f[5].via.map, h, why, whylen);
}

static int decode_lib_versions(const msgpack_object *o, struct rgpu_welcome *w)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > RGPU_HELLO_MAX_LIBS)
        return -1;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        struct rgpu_lib_version *v = &w->libs[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 3 ||
            get_str(&e->via.array.ptr[0], v->name, sizeof v->name) < 0 ||
            get_str(&e->via.array.ptr[1], v->soname, sizeof v->soname) < 0 ||
            get_int(&e->via.array.ptr[2], &v->version) < 0)
            return -1;
    }
    w->nlibs = (int)o->via.array.size;
    return 0;
}

static int decode_welcome(const msgpack_object *f, uint32_t n, struct rgpu_welcome *w,
                          char *why, size_t whylen)
{
    /* 7 elements: a protocol-1 server, still able to tell us why it refuses. */
    if (n < 7 || get_int(&f[1], &w->proto) < 0 || get_int(&f[2], &w->status) < 0 ||
        get_int(&f[3], &w->runtime_version) < 0 || get_int(&f[4], &w->driver_version) < 0)
        return WHY("the answer to hello is not an rgpud welcome");
    get_text(&f[5], w->server_name, sizeof w->server_name);
    get_text(&f[6], w->message, sizeof w->message);
    if (n >= 8 && f[7].type != MSGPACK_OBJECT_NIL) {
        if (get_bin(&f[7], w->proof, RGPU_MAC_LEN) < 0)
            return WHY("the welcome's server proof is not 32 bytes");
        w->has_proof = 1;
    }
    /* 9 elements from protocol 6 on: the session's libraries. */
    if (n >= 9 && decode_lib_versions(&f[8], w) < 0)
        return WHY("the welcome's libraries are not [[name, soname, version]...]");
    /* 10 from protocol 7 on: the session's GPUs. */
    w->cuda_devices = -1;
    if (n >= 10 && get_int(&f[9], &w->cuda_devices) < 0)
        return WHY("the welcome's GPU count is not a number");
    return 0;
}

int rgpu_hs_decode(const char *frame, size_t len, struct rgpu_hs_msg *m, char *why,
                   size_t whylen)
{
    msgpack_zone zone;
    msgpack_object root;
    uint64_t type;
    int rc = -1;

    memset(m, 0, sizeof *m);
    msgpack_zone_init(&zone, 1024);
    if (rgpu_unpack_frame(frame, len, &zone, &root) < 0 || root.type != MSGPACK_OBJECT_ARRAY ||
        root.via.array.size < 1 || rgpu_obj_u64(&root.via.array.ptr[0], &type) < 0) {
        WHY("not a handshake message");
        goto out;
    }
    const msgpack_object *f = root.via.array.ptr;
    uint32_t n = root.via.array.size;
    m->type = (int)type;
    switch (type) {
    case RGPU_MSG_HELLO:
        rc = decode_hello(f, n, &m->u.hello, why, whylen);
        break;
    case RGPU_MSG_CHALLENGE:
        rc = n == 2 && get_bin(&f[1], m->u.server_nonce, RGPU_NONCE_LEN) == 0
                 ? 0 : WHY("challenge is not [CHALLENGE, nonce(32)]");
        break;
    case RGPU_MSG_AUTH:
        if (n != 3 || get_str(&f[1], m->u.auth.key_id, sizeof m->u.auth.key_id) < 0)
            rc = WHY("auth is not [AUTH, key_id, mac(32)]");
        else if (f[2].type == MSGPACK_OBJECT_NIL)
            rc = 0;
        else if (get_bin(&f[2], m->u.auth.mac, RGPU_MAC_LEN) < 0)
            rc = WHY("auth's mac is not 32 bytes");
        else
            rc = 0, m->u.auth.has_mac = 1;
        break;
    case RGPU_MSG_WELCOME:
        rc = decode_welcome(f, n, &m->u.welcome, why, whylen);
        break;
    default:
        rc = WHY("message type %llu where a handshake message belongs",
                 (unsigned long long)type);
    }
out:
    msgpack_zone_destroy(&zone);
    return rc;
}

/* The socket's receive timeout (the client's RGPU_TIMEOUT) in ms, -1 where
 * it has none: it bounds each handshake message, from its first byte to
 * its last.  The server's session bounds its whole hello with an alarm. */
static int receive_timeout_ms(int fd)
{
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) < 0 || (!tv.tv_sec && !tv.tv_usec))
        return -1;
    long ms = (long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Through common/rgpu_wire.c's reader of single frames, as every frame:
 * exactly the one message, so that what follows stays in the socket for
 * the session's reader. */
int rgpu_hs_recv(int fd, struct rgpu_hs_msg *m, char *why, size_t whylen)
{
    char *frame;
    size_t len;
    if (rgpu_read_frame_limited(fd, &frame, &len, HS_FRAME_MAX, receive_timeout_ms(fd)) < 0) {
        if (errno == EMSGSIZE)
            WHY("an empty frame or one above %u bytes where a handshake message belongs",
                HS_FRAME_MAX);
        else if (errno == ENOMEM)
            WHY("out of memory");
        else
            return -1;
        return -2;
    }
    int rc = rgpu_hs_decode(frame, len, m, why, whylen) < 0 ? -2 : 0;
    free(frame);
    return rc;
}

/* ---- digests ----------------------------------------------------------------- */

static void put_u32(EVP_MD_CTX *md, uint32_t v)
{
    unsigned char b[4] = { v >> 24, v >> 16, v >> 8, v };
    EVP_DigestUpdate(md, b, 4);
}

static void put_s(EVP_MD_CTX *md, const char *s)
{
    EVP_DigestUpdate(md, s, strlen(s) + 1);
}

void rgpu_lib_digest(const struct rgpu_lib *lib, unsigned char out[RGPU_DIGEST_LEN])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;

    memset(out, 0, RGPU_DIGEST_LEN);
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(md);
        return;     /* all zeros: matches no real table, so it is refused */
    }
    put_s(md, "rgpu-table-1");
    put_s(md, lib->name);
    put_u32(md, (uint32_t)lib->nprocs);
    for (size_t i = 0; i < lib->nprocs; i++) {
        const struct rgpu_proc *p = &lib->procs[i];
        put_u32(md, p->id);
        put_s(md, p->name);
        put_u32(md, p->flags);
        put_u32(md, p->nparams);
        for (unsigned k = 0; k < p->nparams; k++) {
            const struct rgpu_param *q = &p->params[k];
            /* Parameter names do not travel: left out. */
            put_u32(md, q->kind);
            put_u32(md, q->size);
            put_u32(md, (uint32_t)(int32_t)q->len_arg);
            put_u32(md, (uint32_t)(int32_t)q->aux_arg);
            put_u32(md, q->elem != NULL);
            put_u32(md, q->flags);
            put_u32(md, (uint32_t)(int32_t)q->used_arg);
        }
    }
    EVP_DigestFinal_ex(md, out, &n);
    EVP_MD_CTX_free(md);
}

int rgpu_soname_major(const char *soname)
{
    const char *v = strstr(soname, ".so.");
    if (!v || !isdigit((unsigned char)v[4]))
        return -1;
    /* A peer's soname: any number of digits, so no atoi. */
    long major = strtol(v + 4, NULL, 10);
    return major > 100000 ? 100000 : (int)major;
}

void rgpu_hello_add_lib(struct rgpu_hello *h, const struct rgpu_lib *lib, const char *soname)
{
    for (int i = 0; i < h->nlibs; i++)
        if (strcmp(h->libs[i].name, lib->name) == 0)
            return;
    if (h->nlibs == RGPU_HELLO_MAX_LIBS)
        return;
    struct rgpu_lib_digest *d = &h->libs[h->nlibs++];
    snprintf(d->name, sizeof d->name, "%s", lib->name);
    snprintf(d->soname, sizeof d->soname, "%s", soname ? soname : lib->soname);
    rgpu_lib_digest(lib, d->digest);
}

/* ---- cryptography -------------------------------------------------------------- */

int rgpu_random(void *buf, size_t len)
{
    return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

void rgpu_hs_mac(const unsigned char key[RGPU_KEY_LEN], const char *label,
                 const unsigned char a[RGPU_NONCE_LEN], const unsigned char b[RGPU_NONCE_LEN],
                 unsigned char out[RGPU_MAC_LEN])
{
    unsigned char msg[32 + 2 * RGPU_NONCE_LEN];
    size_t l = strlen(label);
    unsigned int n = RGPU_MAC_LEN;
    memcpy(msg, label, l);
    memcpy(msg + l, a, RGPU_NONCE_LEN);
    memcpy(msg + l + RGPU_NONCE_LEN, b, RGPU_NONCE_LEN);
    if (!HMAC(EVP_sha256(), key, RGPU_KEY_LEN, msg, l + 2 * RGPU_NONCE_LEN, out, &n))
        rgpu_random(out, RGPU_MAC_LEN);     /* never a MAC anyone can match */
}

int rgpu_mac_equal(const unsigned char a[RGPU_MAC_LEN], const unsigned char b[RGPU_MAC_LEN])
{
    return CRYPTO_memcmp(a, b, RGPU_MAC_LEN) == 0;
}

void rgpu_wipe(void *p, size_t len)
{
    if (p && len)
        OPENSSL_cleanse(p, len);
}

/* ---- key files ----------------------------------------------------------------- */

#define KEY_MAGIC "rgpu-key-1"

int rgpu_key_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > RGPU_KEY_ID_MAX || id[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return 0;
    return 1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int parse_key(const char *text, struct rgpu_key *k)
{
    char magic[16], id[RGPU_KEY_ID_MAX + 2], hex[2 * RGPU_KEY_LEN + 2];
    int rc = -1;
    if (sscanf(text, "%15s %65s %65s", magic, id, hex) == 3 && strcmp(magic, KEY_MAGIC) == 0 &&
        rgpu_key_id_valid(id) && strlen(hex) == 2 * RGPU_KEY_LEN) {
        rc = 0;
        for (int i = 0; i < RGPU_KEY_LEN && rc == 0; i++) {
            int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
            if (hi < 0 || lo < 0)
                rc = -1;
            else
                k->secret[i] = (unsigned char)(hi << 4 | lo);
        }
        memcpy(k->id, id, strlen(id) + 1);    /* valid: at most RGPU_KEY_ID_MAX */
    }
    rgpu_wipe(hex, sizeof hex);
    return rc;
}

int rgpu_key_load(const char *path, struct rgpu_key *k, char *why, size_t whylen)
{
    char text[256];
    struct stat sb;
    ssize_t n;
    int rc = -1;

    memset(k, 0, sizeof *k);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0)
        return WHY("cannot read key file %s: %s", path,
                   errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        WHY("key file %s is not a regular file", path);
    else if (sb.st_uid != geteuid())
        WHY("key file %s belongs to uid %ld, not to this user (uid %ld)", path,
            (long)sb.st_uid, (long)geteuid());
    else if (sb.st_mode & 077)
        WHY("key file %s is readable by others (mode %04o): chmod 600 it", path,
            (unsigned)(sb.st_mode & 07777));
    else if ((n = read(fd, text, sizeof text - 1)) < 0)
        WHY("cannot read key file %s: %s", path, strerror(errno));
    else {
        text[n] = '\0';
        if (parse_key(text, k) < 0)
            WHY("key file %s is not '" KEY_MAGIC " KEY_ID HEX64'", path);
        else
            rc = 0;
    }
    rgpu_wipe(text, sizeof text);
    close(fd);
    if (rc < 0)
        rgpu_wipe(k, sizeof *k);
    return rc;
}

int rgpu_key_new(const char *id, struct rgpu_key *k)
{
    memset(k, 0, sizeof *k);
    if (!rgpu_key_id_valid(id) || rgpu_random(k->secret, RGPU_KEY_LEN) < 0)
        return -1;
    snprintf(k->id, sizeof k->id, "%s", id);
    return 0;
}

int rgpu_key_write(const char *path, const struct rgpu_key *k, char *why, size_t whylen)
{
    char text[256];
    int n = snprintf(text, sizeof text, KEY_MAGIC " %s ", k->id);
    for (int i = 0; i < RGPU_KEY_LEN; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%02x", k->secret[i]);
    n += snprintf(text + n, sizeof text - (size_t)n, "\n");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = fd < 0 ? -1 : (write(fd, text, (size_t)n) == n ? 0 : -1);
    if (rc < 0)
        WHY("cannot write key file %s: %s", path, strerror(errno));
    if (fd >= 0 && (close(fd) < 0 || rc < 0)) {
        if (rc == 0)
            WHY("cannot write key file %s: %s", path, strerror(errno));
        unlink(path);
        rc = -1;
    }
    rgpu_wipe(text, sizeof text);
    return rc;
}

int rgpu_key_client_path(char *path, size_t size)
{
    const char *env = getenv("RGPU_KEY_FILE");
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    if (env && *env)
        return snprintf(path, size, "%s", env) < (int)size ? 0 : -1;
    if (xdg && *xdg == '/')
        return snprintf(path, size, "%s/rgpu/key", xdg) < (int)size ? 0 : -1;
    if (home && *home == '/')
        return snprintf(path, size, "%s/.config/rgpu/key", home) < (int)size ? 0 : -1;
    return -1;
}

/* ---- the client's handshake ------------------------------------------------------- */

static int send_auth(int fd, const struct rgpu_hello *h, const unsigned char *server_nonce,
                     struct rgpu_key *key, int have_key, unsigned char proof[RGPU_MAC_LEN])
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_AUTH };
    if (have_key) {
        snprintf(m.u.auth.key_id, sizeof m.u.auth.key_id, "%s", key->id);
        rgpu_hs_mac(key->secret, RGPU_MAC_CLIENT, h->nonce, server_nonce, m.u.auth.mac);
        m.u.auth.has_mac = 1;
        rgpu_hs_mac(key->secret, RGPU_MAC_SERVER, server_nonce, h->nonce, proof);
    }
    /* From here on only the MACs are needed: the key goes now. */
    rgpu_wipe(key->secret, sizeof key->secret);
    int rc = rgpu_hs_send(fd, &m);
    rgpu_wipe(&m, sizeof m);
    return rc;
}

int rgpu_hs_client(int fd, int tcp, struct rgpu_hello *h, struct rgpu_welcome *w, char *how,
                   size_t howlen, char *why, size_t whylen)
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_HELLO };
    struct rgpu_key key;
    unsigned char proof[RGPU_MAC_LEN];
    char keypath[4096], keywhy[512] = "";
    int challenged = 0, have_key = 0, rc;

    memset(w, 0, sizeof *w);
    memset(&key, 0, sizeof key);
    snprintf(how, howlen, "none");
    why[0] = '\0';
    h->proto = RGPU_PROTO_VERSION;
    if (!h->client_name[0])
        snprintf(h->client_name, sizeof h->client_name, "%s", rgpu_version_string());
    if (rgpu_random(h->nonce, RGPU_NONCE_LEN) < 0) {
        WHY("no random bytes for a nonce");
        return -2;
    }
    m.u.hello = *h;
    if (rgpu_hs_send(fd, &m) < 0 || (rc = rgpu_hs_recv(fd, &m, why, whylen)) == -1) {
        snprintf(why, whylen, "%s", errno == EPIPE || errno == ECONNRESET
                                        ? "the connection closed before a welcome"
                                        : strerror(errno));
        return -1;
    }
    if (rc < 0)
        return -2;
    if (m.type == RGPU_MSG_CHALLENGE) {
        unsigned char server_nonce[RGPU_NONCE_LEN];
        memcpy(server_nonce, m.u.server_nonce, sizeof server_nonce);
        challenged = 1;
        if (rgpu_key_client_path(keypath, sizeof keypath) < 0)
            snprintf(keywhy, sizeof keywhy, "no key file: set RGPU_KEY_FILE");
        else
            have_key = rgpu_key_load(keypath, &key, keywhy, sizeof keywhy) == 0;
        if (have_key)
            snprintf(how, howlen, "key '%s' from %s (HMAC-SHA256, server proof checked)",
                     key.id, keypath);
        if (send_auth(fd, h, server_nonce, &key, have_key, proof) < 0 ||
            (rc = rgpu_hs_recv(fd, &m, why, whylen)) == -1) {
            snprintf(why, whylen, "%s", errno == EPIPE || errno == ECONNRESET
                                            ? "the connection closed after our key"
                                            : strerror(errno));
            return -1;
        }
        if (rc < 0)
            return -2;
    }
    if (m.type != RGPU_MSG_WELCOME) {
        WHY("the answer to hello is not an rgpud welcome");
        return -2;
    }
    *w = m.u.welcome;
    if (w->status != RGPU_OK) {
        if (challenged && !have_key) {
            size_t n = strlen(w->message);
            snprintf(w->message + n, sizeof w->message - n, "%s(%s)", n ? " " : "", keywhy);
        }
        return 0;
    }
    if (challenged) {
        /* A fake server can send a challenge and an OK, but not this. */
        int proven = w->has_proof && rgpu_mac_equal(w->proof, proof);
        rgpu_wipe(proof, sizeof proof);
        if (!proven) {
            WHY("the server did not prove that it holds key '%s': it is not the rgpud "
                "that key belongs to", key.id);
            return -2;
        }
        return 0;
    }
    if (w->has_proof) {
        WHY("the welcome carries a server proof for a challenge never made");
        return -2;
    }
    if (tcp) {
        const char *e = getenv("RGPU_INSECURE_TCP");
        if (!e || strcmp(e, "1") != 0) {
            WHY("the server asked for no key over TCP, where anyone could be listening: "
                "refusing it (for an rgpud started with --insecure-tcp-no-auth on a "
                "trusted network, set RGPU_INSECURE_TCP=1)");
            return -2;
        }
        snprintf(how, howlen, "none: TCP without a key (RGPU_INSECURE_TCP=1)");
    } else {
        snprintf(how, howlen, "peer credentials on a Unix socket");
    }
    return 0;
}
