/* Who may use rgpud: the listener's socket and the session's hello.
 *
 * On a Unix socket (the default, /run/rgpu/rgpud.sock) the kernel tells
 * the session who connected (SO_PEERCRED, SO_PEERGROUPS): rgpud's own
 * user, root and members of the allowed group get in.  On TCP the client
 * must show that it holds a key that rgpud holds too (a file in the key
 * directory): HMAC-SHA256 over both sides' fresh nonces, answered by a
 * proof that the server holds the key as well.  Either way this happens in
 * the session process before it loads any CUDA library: a client that is
 * not let in costs a fork and a few hundred bytes.
 *
 * The hello also carries the digests of the client's procedure tables;
 * a client of another build is refused with both versions named, rather
 * than having its frames misread. */
#include "rgpud.h"
#include "rgpu_serve.h"
#include "rgpu_hello.h"
#include "rgpu_log.h"
#include "rgpu_proto.h"
#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"
#include "nvml_procs.h"
#include "rgpu_procs.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_GROUP "rgpu"

static const struct rgpu_lib *const server_libs[] = {
    &rgpu_cudart_lib, &rgpu_cuda_lib, &rgpu_cublas_lib, &rgpu_cublasLt_lib, &rgpu_cudnn_lib,
    &rgpu_nvml_lib, &rgpu_rgpu_lib,
};
#define NLIBS (sizeof server_libs / sizeof server_libs[0])

/* ---- the listener: checks before the first client -------------------------------- */

static int in_my_groups(gid_t gid)
{
    gid_t g[NGROUPS_MAX];
    int n = getgroups(NGROUPS_MAX, g);
    if (getegid() == gid)
        return 1;
    for (int i = 0; i < n; i++)
        if (g[i] == gid)
            return 1;
    return 0;
}

static int resolve_group(struct rgpud_options *opt)
{
    const char *name = opt->group;
    struct group *gr;
    char *end;

    opt->have_gid = 0;
    if (name && (!*name || strcmp(name, "none") == 0))
        return 0;                       /* only rgpud's user and root */
    if (!name) {
        /* The default group, where it exists and rgpud may give its
         * socket to it (root, or a member: the package's rgpu user). */
        gr = getgrnam(DEFAULT_GROUP);
        if (!gr || (geteuid() != 0 && !in_my_groups(gr->gr_gid)))
            return 0;
        opt->gid = gr->gr_gid;
    } else if ((gr = getgrnam(name))) {
        opt->gid = gr->gr_gid;
    } else {
        errno = 0;
        long v = strtol(name, &end, 10);
        if (*end || end == name || errno || v < 0 || v > INT_MAX) {
            rgpu_error("--group %s: no such group", name);
            return -1;
        }
        opt->gid = (gid_t)v;
    }
    snprintf(opt->group_name, sizeof opt->group_name, "%s", gr ? gr->gr_name : name);
    opt->have_gid = 1;
    return 0;
}

/* Secrets readable by anyone but rgpud would let that someone in. */
static int private_to_me(const char *path, const struct stat *sb, int dir)
{
    if (dir ? !S_ISDIR(sb->st_mode) : !S_ISREG(sb->st_mode)) {
        rgpu_error("%s is not a %s", path, dir ? "directory" : "regular file");
        return -1;
    }
    if (sb->st_uid != geteuid() || (sb->st_mode & 077)) {
        rgpu_error("%s must belong to rgpud's user (uid %ld) and be private to it (mode %s), "
                   "but is uid %ld mode %04o: refusing to start", path, (long)geteuid(),
                   dir ? "0700" : "0600", (long)sb->st_uid, (unsigned)(sb->st_mode & 07777));
        return -1;
    }
    return 0;
}

static int check_key_dir(const char *dir)
{
    struct stat sb;
    char path[PATH_MAX];
    int nkeys = 0, rc = 0;

    if (lstat(dir, &sb) < 0) {
        rgpu_error("TCP needs client keys, but the key directory %s: %s (make a key with "
                   "rgpud --new-client-key NAME, name another directory with --key-dir, or "
                   "listen on a Unix socket)", dir, strerror(errno));
        return -1;
    }
    if (private_to_me(dir, &sb, 1) < 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d) {
        rgpu_error("cannot read %s: %s", dir, strerror(errno));
        return -1;
    }
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &sb) < 0 || private_to_me(path, &sb, 0) < 0)
            rc = -1;
        nkeys++;
    }
    closedir(d);
    if (rc == 0 && nkeys == 0)
        rgpu_warn("no client keys in %s yet: every TCP client will be refused until one is "
                  "made (rgpud --new-client-key NAME)", dir);
    return rc;
}

int auth_prepare(struct rgpud_options *opt)
{
    char err[512];

    if (rgpu_addr_parse(opt->listen, &opt->addr, err, sizeof err) < 0) {
        rgpu_error("--listen: %s", err);
        return -1;
    }
    if (opt->addr.kind == RGPU_ADDR_UNIX)
        return resolve_group(opt);
    if (opt->insecure_tcp) {
        rgpu_warn("!!! --insecure-tcp-no-auth: listening on TCP %s WITHOUT AUTHENTICATION. "
                  "Anyone who can reach this port can run code as rgpud's user (uid %ld). Use "
                  "this only on a network where every host is trusted. !!!", opt->listen,
                  (long)geteuid());
        return 0;
    }
    return check_key_dir(opt->key_dir);
}

int auth_listen(const struct rgpud_options *opt)
{
    char err[512];
    mode_t mode = opt->have_gid ? 0660 : 0600;
    int fd = rgpu_addr_listen(&opt->addr, mode, opt->have_gid ? opt->gid : (gid_t)-1, err,
                              sizeof err);
    if (fd < 0) {
        rgpu_error("%s", err);
        if (opt->addr.kind == RGPU_ADDR_UNIX && errno != EEXIST)
            rgpu_error("(the directory of the socket must exist and be writable by rgpud; "
                       "the package's service has /run/rgpu; elsewhere give --listen "
                       "unix:PATH)");
        return -1;
    }
    if (opt->addr.kind == RGPU_ADDR_UNIX)
        rgpu_info("clients allowed: uid %ld, root%s%s", (long)geteuid(),
                  opt->have_gid ? " and group " : "", opt->have_gid ? opt->group_name : "");
    return fd;
}

int auth_new_client_key(const char *dir, const char *id)
{
    struct rgpu_key k;
    char path[PATH_MAX], why[512];
    int rc = -1;

    if (!rgpu_key_id_valid(id)) {
        rgpu_error("key name '%s': use 1 to 64 of A-Z a-z 0-9 . _ - (not starting with '.')",
                   id);
        return -1;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rgpu_error("cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, id);
    if (rgpu_key_new(id, &k) < 0)
        rgpu_error("no random bytes for a key");
    else if (rgpu_key_write(path, &k, why, sizeof why) < 0)
        rgpu_error("%s", why);
    else {
        /* The client's copy: the same line, for the client to keep in
         * ~/.config/rgpu/key (mode 0600) or name with RGPU_KEY_FILE. */
        printf("rgpu-key-1 %s ", k.id);
        for (int i = 0; i < RGPU_KEY_LEN; i++)
            printf("%02x", k.secret[i]);
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "rgpud: wrote %s; the line above is the client's key: store it as "
                "~/.config/rgpu/key (chmod 600) on the client, or name its file with "
                "RGPU_KEY_FILE\n", path);
        rc = 0;
    }
    rgpu_wipe(&k, sizeof k);
    return rc;
}

/* ---- the session: one client's hello ------------------------------------------------- */

static void send_welcome(int fd, struct rgpu_welcome *w)
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_WELCOME };
    w->proto = RGPU_PROTO_VERSION;
    gethostname(w->server_name, sizeof w->server_name - 1);
    m.u.welcome = *w;
    if (rgpu_hs_send(fd, &m) < 0)
        rgpu_info("client gone before its welcome: %s", strerror(errno));
}

__attribute__((format(printf, 3, 4), noreturn))
static void refuse(int fd, int status, const char *fmt, ...)
{
    struct rgpu_welcome w = { .status = status };
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w.message, sizeof w.message, fmt, ap);
    va_end(ap);
    rgpu_warn("refusing a client: %s", w.message);
    send_welcome(fd, &w);
    _exit(2);
}

static void check_digests(int fd, const struct rgpu_hello *h)
{
    unsigned char mine[RGPU_DIGEST_LEN];
    for (int i = 0; i < h->nlibs; i++) {
        const struct rgpu_lib *lib = NULL;
        for (size_t k = 0; k < NLIBS; k++)
            if (strcmp(server_libs[k]->name, h->libs[i].name) == 0)
                lib = server_libs[k];
        if (!lib)
            refuse(fd, RGPU_EVERSION, "the client (%s) uses library %s, which this server (%s, "
                   "protocol %d) does not serve: install the same rgpu on both machines",
                   h->client_name, h->libs[i].name, rgpu_version_string(), RGPU_PROTO_VERSION);
        rgpu_lib_digest(lib, mine);
        if (memcmp(mine, h->libs[i].digest, RGPU_DIGEST_LEN) != 0)
            refuse(fd, RGPU_EVERSION, "library %s differs between the client (%s) and this "
                   "server (%s, protocol %d): their procedure tables come from other builds; "
                   "install the same rgpu build on both machines", lib->name, h->client_name,
                   rgpu_version_string(), RGPU_PROTO_VERSION);
    }
}

/* A client library of a newer major than the session's (libcudart.so.14
 * against libcudart.so.13) could call what this server cannot serve in
 * ways its table does not describe: refused at connection, naming both.
 * An older major is served by the newer library: its stub sends only the
 * functions whose prototypes are the same in both (docs/cuda12.md). */
static void check_majors(int fd, const struct rgpu_hello *h)
{
    for (int i = 0; i < h->nlibs; i++) {
        const char *mine = backend_soname(h->libs[i].name);
        int client = rgpu_soname_major(h->libs[i].soname);
        if (mine && client > rgpu_soname_major(mine))
            refuse(fd, RGPU_EVERSION, "the client (%s) loaded %s, newer than this server's %s "
                   "(%s): run it against a server with %s", h->client_name, h->libs[i].soname,
                   mine, rgpu_version_string(), h->libs[i].soname);
    }
}

static int peer_in_group(int fd, const struct ucred *cr, gid_t gid)
{
    gid_t groups[NGROUPS_MAX];
    socklen_t len = sizeof groups;
    if (cr->gid == gid)
        return 1;
    /* The groups the client had when it connected: its supplementary
     * groups as the kernel saw them, not as /etc/group says now. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
        return 0;
    for (size_t i = 0; i < len / sizeof(gid_t); i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

static void check_peer(int fd, const struct rgpud_options *opt, struct rgpu_welcome *w)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        refuse(fd, RGPU_EAUTH, "cannot tell who connected: %s", strerror(errno));
    if (cr.uid == geteuid() || cr.uid == 0 || (opt->have_gid && peer_in_group(fd, &cr, opt->gid))) {
        snprintf(w->message, sizeof w->message, "uid %ld let in by its Unix-socket credentials",
                 (long)cr.uid);
        rgpu_info("client pid %ld uid %ld let in (peer credentials)", (long)cr.pid,
                  (long)cr.uid);
        char who[32];
        snprintf(who, sizeof who, "uid %ld", (long)cr.uid);
        ipc_identity(who);
        return;
    }
    if (opt->have_gid)
        refuse(fd, RGPU_EAUTH, "uid %ld is not in group %s (rgpud lets in its own user, root "
               "and that group's members)", (long)cr.uid, opt->group_name);
    refuse(fd, RGPU_EAUTH, "uid %ld is not rgpud's user (uid %ld) or root, and rgpud allows "
           "no group (--group)", (long)cr.uid, (long)geteuid());
}

static void check_key(int fd, const struct rgpud_options *opt, const struct rgpu_hello *h,
                      struct rgpu_welcome *w)
{
    struct rgpu_hs_msg m = { .type = RGPU_MSG_CHALLENGE };
    unsigned char nonce[RGPU_NONCE_LEN], want[RGPU_MAC_LEN];
    struct rgpu_key key;
    char path[PATH_MAX], why[512];

    if (rgpu_random(nonce, sizeof nonce) < 0)
        refuse(fd, RGPU_EAUTH, "the server has no random bytes for a challenge");
    memcpy(m.u.server_nonce, nonce, sizeof nonce);
    if (rgpu_hs_send(fd, &m) < 0)
        _exit(0);
    int rc = rgpu_hs_recv(fd, &m, why, sizeof why);
    if (rc == -1)
        _exit(0);
    if (rc < 0 || m.type != RGPU_MSG_AUTH)
        refuse(fd, RGPU_EAUTH, "this server requires a key, and the client did not answer its "
               "challenge (%s)", rc < 0 ? why : "another message came");
    const struct rgpu_auth *a = &m.u.auth;
    if (!a->key_id[0] || !a->has_mac)
        refuse(fd, RGPU_EAUTH, "this server requires a key: set RGPU_KEY_FILE (or keep it in "
               "~/.config/rgpu/key); rgpud --new-client-key NAME on the server makes one");
    /* Unknown key and wrong MAC get the same answer; the log tells which. */
    snprintf(path, sizeof path, "%s/%s", opt->key_dir, a->key_id);
    if (!rgpu_key_id_valid(a->key_id) || rgpu_key_load(path, &key, why, sizeof why) < 0 ||
        strcmp(key.id, a->key_id) != 0) {
        rgpu_warn("key '%s': %s", a->key_id,
                  rgpu_key_id_valid(a->key_id) ? why : "not a valid key name");
        refuse(fd, RGPU_EAUTH, "authentication failed for key '%s'", a->key_id);
    }
    rgpu_hs_mac(key.secret, RGPU_MAC_CLIENT, h->nonce, nonce, want);
    int good = rgpu_mac_equal(want, a->mac);
    if (good) {
        rgpu_hs_mac(key.secret, RGPU_MAC_SERVER, nonce, h->nonce, w->proof);
        ipc_identity_key(a->key_id, key.secret, sizeof key.secret);
    }
    /* The session's own client may read this process's memory through its
     * kernels: no key stays in it. */
    rgpu_wipe(&key, sizeof key);
    rgpu_wipe(want, sizeof want);
    if (!good)
        refuse(fd, RGPU_EAUTH, "authentication failed for key '%s'", a->key_id);
    w->has_proof = 1;
    snprintf(w->message, sizeof w->message, "key '%s' (HMAC-SHA256)", a->key_id);
    rgpu_info("client let in with key '%s'", a->key_id);
}

/* What the session must know of the client's libraries once the hello is
 * gone: their majors. */
static void note_client_libs(const struct rgpu_hello *h, struct client_libs *client)
{
    memset(client, 0, sizeof *client);
    for (int i = 0; i < h->nlibs && i < RGPU_HELLO_MAX_LIBS; i++) {
        snprintf(client->name[i], sizeof client->name[i], "%s", h->libs[i].name);
        client->major[i] = rgpu_soname_major(h->libs[i].soname);
        client->n++;
    }
}

void auth_session(int fd, const struct rgpud_options *opt, struct rgpu_welcome *w,
                  struct rgpu_visible *visible, struct client_libs *client)
{
    struct rgpu_hs_msg m;
    char why[512];

    memset(w, 0, sizeof *w);
    int rc = rgpu_hs_recv(fd, &m, why, sizeof why);
    if (rc == -1) {
        rgpu_info("client left before its hello");
        _exit(0);
    }
    if (rc < 0 || m.type != RGPU_MSG_HELLO) {
        rgpu_warn("client did not say hello properly (%s); closing",
                  rc < 0 ? why : "another message came first");
        _exit(2);
    }
    const struct rgpu_hello *h = &m.u.hello;
    if (h->proto != RGPU_PROTO_VERSION)
        refuse(fd, RGPU_EVERSION, "server speaks protocol %d (%s), client '%s' protocol %d: "
               "install the same rgpu version on both machines", RGPU_PROTO_VERSION,
               rgpu_version_string(), h->client_name, h->proto);
    check_majors(fd, h);        /* first: a newer major's table differs too */
    check_digests(fd, h);
    note_client_libs(h, client);
    if (opt->addr.kind == RGPU_ADDR_UNIX)
        check_peer(fd, opt, w);
    else if (!opt->insecure_tcp)
        check_key(fd, opt, h, w);
    else {
        snprintf(w->message, sizeof w->message,
                 "no authentication (rgpud --insecure-tcp-no-auth)");
        ipc_identity("unauthenticated");    /* every such client is one identity */
    }
    *visible = h->visible;
    rgpu_wipe(&m, sizeof m);
}

void auth_welcome(int fd, struct rgpu_welcome *w)
{
    w->status = RGPU_OK;
    send_welcome(fd, w);
    rgpu_wipe(w->proof, sizeof w->proof);
}

void auth_welcome_refusal(int fd, struct rgpu_welcome *w, int status, const char *why)
{
    w->status = status;
    snprintf(w->message, sizeof w->message, "%s", why);
    rgpu_warn("refusing a client: %s", why);
    send_welcome(fd, w);
    _exit(2);
}

/* ---- a library the client loaded after its hello ------------------------------ */

/* rgpu_late_lib (codegen/rgpu_own.h): a table that differs from ours ends
 * the session (RGPU_EVERSION), as at the hello. */
rgpu_status serve_rgpu_late_lib(const char *lib, const void *digest, size_t digest_size)
{
    unsigned char mine[RGPU_DIGEST_LEN];
    if (!lib || strlen(lib) >= 32 || !digest || digest_size != RGPU_DIGEST_LEN)
        return serve_transport(RGPU_EPROTO);
    for (size_t k = 0; k < NLIBS; k++) {
        if (strcmp(server_libs[k]->name, lib) != 0)
            continue;
        rgpu_lib_digest(server_libs[k], mine);
        if (memcmp(mine, digest, RGPU_DIGEST_LEN) != 0)
            break;
        return RGPU_STATUS_OK;
    }
    rgpu_warn("the client's library %s differs from this server's (%s): its calls would be "
              "misread", lib, rgpu_version_string());
    return serve_transport(RGPU_EVERSION);
}
