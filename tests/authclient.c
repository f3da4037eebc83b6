/* authclient: the hello of common/rgpu_hello.h, as honest and dishonest
 * clients and servers speak it, for tests/auth.sh.
 *
 *   authclient hello ADDR       an honest client with every library's digest
 *   authclient digest ADDR      a client whose cudart table differs by one
 *                               parameter size (another build)
 *   authclient digest-rgpu ADDR the same for the client core's own table
 *                               (library rgpu)
 *   authclient proto1 ADDR      a protocol-1 hello ([HELLO, 1, name])
 *   authclient replay ADDR      an auth recorded in one session, replayed in
 *                               another with the same client nonce
 *   authclient fake PATH        serve one client on a Unix socket at PATH
 *                               as a fake rgpud: challenge, then an OK
 *                               welcome with a proof made without the key
 *   authclient hold ADDR FROM SECONDS N
 *                               a peer without a key: N silent connections
 *                               from the local address FROM, each opened
 *                               again as soon as the server closes it, for
 *                               SECONDS; prints "held M" (connections made)
 *   authclient hammer ADDR FROM SECONDS
 *                               hello and auth with RGPU_KEY_FILE's key from
 *                               FROM, one after the other, for SECONDS;
 *                               prints "attempts A in S s: let-in L
 *                               auth-failed F closed C"
 *
 * Prints "welcome STATUS MESSAGE", "refused WHY" (the client's own check
 * failed) or "error WHY" and exits 0, except on a usage error; tests/auth.sh
 * judges the line.  Keys come from RGPU_KEY_FILE like the client core's. */
#include "rgpu_addr.h"
#include "rgpu_hello.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"
#include "cudart_procs.h"
#include "cuda_procs.h"
#include "cublas_procs.h"
#include "cublasLt_procs.h"
#include "cudnn_procs.h"
#include "nvml_procs.h"
#include "rgpu_procs.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const struct rgpu_lib *const libs[] = {
    &rgpu_cudart_lib, &rgpu_cuda_lib, &rgpu_cublas_lib, &rgpu_cublasLt_lib, &rgpu_cudnn_lib,
    &rgpu_nvml_lib, &rgpu_rgpu_lib,
};

static int dial(const char *spec, struct rgpu_addr *a)
{
    char err[512];
    struct timeval tv = { 10, 0 };
    if (rgpu_addr_parse(spec, a, err, sizeof err) < 0) {
        printf("error %s\n", err);
        return -1;
    }
    int fd = rgpu_addr_dial(a, 5000, err, sizeof err);
    if (fd < 0) {
        printf("error %s\n", err);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void report(int rc, const struct rgpu_welcome *w, const char *why)
{
    if (rc == 0)
        printf("welcome %d %s\n", w->status, w->message);
    else
        printf("%s %s\n", rc == -2 ? "refused" : "error", why);
}

/* lib as a build whose first procedure's first parameter has another
 * size would describe it: only the table differs. */
static struct rgpu_lib other_build(const struct rgpu_lib *lib)
{
    struct rgpu_lib other = *lib;
    struct rgpu_proc *procs = calloc(other.nprocs, sizeof *procs);
    memcpy(procs, other.procs, other.nprocs * sizeof *procs);
    size_t k = 0;
    while (k < other.nprocs && procs[k].nparams == 0)
        k++;
    struct rgpu_param *params = calloc(procs[k].nparams, sizeof *params);
    memcpy(params, procs[k].params, procs[k].nparams * sizeof *params);
    params[0].size += 4;
    procs[k].params = params;
    other.procs = procs;
    return other;
}

/* Every library's digest, except that changed (another build's table,
 * with newer 0) or, with newer 1, cudart's own table from a library of a
 * newer major (libcudart.so.99). */
static int do_hello(const char *spec, const struct rgpu_lib *changed, int newer)
{
    struct rgpu_addr a;
    struct rgpu_hello h;
    struct rgpu_welcome w;
    char why[512], how[256];
    int fd = dial(spec, &a);
    if (fd < 0)
        return 0;
    memset(&h, 0, sizeof h);
    snprintf(h.client_name, sizeof h.client_name, "authclient");
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        if (libs[i] != changed) {
            rgpu_hello_add_lib(&h, libs[i], NULL);
        } else if (newer) {
            rgpu_hello_add_lib(&h, changed, "libcudart.so.99");
        } else {
            struct rgpu_lib other = other_build(changed);
            rgpu_hello_add_lib(&h, &other, NULL);
        }
    }
    int rc = rgpu_hs_client(fd, a.kind == RGPU_ADDR_TCP, &h, &w, how, sizeof how, why,
                            sizeof why);
    report(rc, &w, why);
    close(fd);
    return 0;
}

static int do_proto1(const char *spec)
{
    struct rgpu_addr a;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_zone zone;
    msgpack_object root;
    char *frame;
    size_t len;
    int fd = dial(spec, &a);
    if (fd < 0)
        return 0;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, RGPU_MSG_HELLO);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "rgpu-client", 11);
    struct iovec iov = { sb.data, sb.size };
    msgpack_zone_init(&zone, 1024);
    /* What a protocol-1 client reads: status at [2], message at [6]. */
    if (rgpu_write_frame(fd, &iov, 1) < 0 || rgpu_read_frame(fd, &frame, &len) < 0 ||
        rgpu_unpack_frame(frame, len, &zone, &root) < 0 || root.type != MSGPACK_OBJECT_ARRAY ||
        root.via.array.size < 7 || root.via.array.ptr[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        root.via.array.ptr[6].type != MSGPACK_OBJECT_STR)
        printf("error no welcome a protocol-1 client can read\n");
    else
        printf("welcome %d %.*s\n", (int)root.via.array.ptr[2].via.u64,
               (int)root.via.array.ptr[6].via.str.size, root.via.array.ptr[6].via.str.ptr);
    close(fd);
    return 0;
}

/* Session 1 runs honestly, recording its nonce and MAC; session 2 sends
 * the same hello and the recorded MAC to a fresh challenge. */
static int do_replay(const char *spec)
{
    struct rgpu_addr a;
    struct rgpu_hs_msg m;
    struct rgpu_key key;
    struct rgpu_hello h;
    unsigned char mac[RGPU_MAC_LEN];
    char why[512];

    if (rgpu_key_load(getenv("RGPU_KEY_FILE"), &key, why, sizeof why) < 0) {
        printf("error %s\n", why);
        return 0;
    }
    memset(&h, 0, sizeof h);
    h.proto = RGPU_PROTO_VERSION;
    snprintf(h.client_name, sizeof h.client_name, "replayer");
    rgpu_random(h.nonce, sizeof h.nonce);
    for (int round = 0; round < 2; round++) {
        int fd = dial(spec, &a);
        if (fd < 0)
            return 0;
        m.type = RGPU_MSG_HELLO;
        m.u.hello = h;
        if (rgpu_hs_send(fd, &m) < 0 || rgpu_hs_recv(fd, &m, why, sizeof why) < 0 ||
            m.type != RGPU_MSG_CHALLENGE) {
            printf("error no challenge in round %d\n", round + 1);
            return 0;
        }
        if (round == 0)
            rgpu_hs_mac(key.secret, RGPU_MAC_CLIENT, h.nonce, m.u.server_nonce, mac);
        m.type = RGPU_MSG_AUTH;
        memset(&m.u.auth, 0, sizeof m.u.auth);
        snprintf(m.u.auth.key_id, sizeof m.u.auth.key_id, "%s", key.id);
        memcpy(m.u.auth.mac, mac, sizeof mac);
        m.u.auth.has_mac = 1;
        if (rgpu_hs_send(fd, &m) < 0 || rgpu_hs_recv(fd, &m, why, sizeof why) < 0 ||
            m.type != RGPU_MSG_WELCOME) {
            printf("error no welcome in round %d\n", round + 1);
            return 0;
        }
        if (round == 0 && m.u.welcome.status != RGPU_OK) {
            printf("error the honest round was refused: %s\n", m.u.welcome.message);
            return 0;
        }
        close(fd);
    }
    printf("welcome %d %s\n", m.u.welcome.status, m.u.welcome.message);
    return 0;
}

/* A fake rgpud without the key: it can challenge and say OK, but its proof
 * is made with a key of its own. */
static int do_fake(const char *path)
{
    struct rgpu_addr a;
    struct rgpu_hs_msg m;
    char err[512], why[512];
    unsigned char nonce[RGPU_NONCE_LEN], client_nonce[RGPU_NONCE_LEN], guess[RGPU_KEY_LEN];

    if (rgpu_addr_parse(path, &a, err, sizeof err) < 0 || a.kind != RGPU_ADDR_UNIX) {
        fprintf(stderr, "authclient fake: %s\n", "want a Unix socket path");
        return 2;
    }
    int lfd = rgpu_addr_listen(&a, 0600, (gid_t)-1, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, "authclient fake: %s\n", err);
        return 2;
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0 && rgpu_hs_recv(fd, &m, why, sizeof why) == 0 && m.type == RGPU_MSG_HELLO) {
        memcpy(client_nonce, m.u.hello.nonce, sizeof client_nonce);
        rgpu_random(nonce, sizeof nonce);
        rgpu_random(guess, sizeof guess);
        m.type = RGPU_MSG_CHALLENGE;
        memcpy(m.u.server_nonce, nonce, sizeof nonce);
        if (rgpu_hs_send(fd, &m) == 0 && rgpu_hs_recv(fd, &m, why, sizeof why) == 0) {
            memset(&m, 0, sizeof m);
            m.type = RGPU_MSG_WELCOME;
            m.u.welcome.proto = RGPU_PROTO_VERSION;
            m.u.welcome.runtime_version = 13000;
            m.u.welcome.driver_version = 13000;
            snprintf(m.u.welcome.server_name, sizeof m.u.welcome.server_name, "fake");
            rgpu_hs_mac(guess, RGPU_MAC_SERVER, nonce, client_nonce, m.u.welcome.proof);
            m.u.welcome.has_proof = 1;
            rgpu_hs_send(fd, &m);
        }
    }
    if (fd >= 0)
        close(fd);
    close(lfd);
    unlink(a.path);
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A TCP connection to spec from the local address from (port chosen by
 * the kernel), blocking; -1 on failure. */
static int dial_from(const char *spec, const char *from)
{
    struct rgpu_addr a;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *to = NULL, *src = NULL;
    char err[512];
    int fd = -1;
    if (rgpu_addr_parse(spec, &a, err, sizeof err) < 0 || a.kind != RGPU_ADDR_TCP ||
        getaddrinfo(a.host, a.port, &hints, &to) != 0 ||
        getaddrinfo(from, NULL, &hints, &src) != 0)
        goto out;
    fd = socket(to->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (bind(fd, src->ai_addr, src->ai_addrlen) < 0 ||
                    connect(fd, to->ai_addr, to->ai_addrlen) < 0)) {
        close(fd);
        fd = -1;
    }
out:
    if (to)
        freeaddrinfo(to);
    if (src)
        freeaddrinfo(src);
    return fd;
}

/* N silent connections, each reopened when the server ends it. */
static int do_hold(const char *spec, const char *from, double seconds, int n)
{
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    long made = 0;
    double end = now_s() + seconds;
    for (int i = 0; i < n; i++)
        p[i].fd = -1;
    while (now_s() < end) {
        for (int i = 0; i < n; i++) {
            if (p[i].fd < 0 && (p[i].fd = dial_from(spec, from)) >= 0)
                made++;
            p[i].events = POLLIN;
        }
        if (poll(p, (nfds_t)n, 20) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            char buf[4096];
            if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
                read(p[i].fd, buf, sizeof buf) <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
            }
        }
    }
    printf("held %ld\n", made);
    return 0;
}

/* One honest hello after another, with whatever key RGPU_KEY_FILE names. */
static int do_hammer(const char *spec, const char *from, double seconds)
{
    long attempts = 0, let_in = 0, failed = 0, closed = 0;
    double t0 = now_s();
    while (now_s() - t0 < seconds) {
        struct rgpu_hello h;
        struct rgpu_welcome w;
        char why[512], how[256];
        struct timeval tv = { 10, 0 };
        int fd = dial_from(spec, from);
        attempts++;
        if (fd < 0) {
            closed++;
            usleep(1000);
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        memset(&h, 0, sizeof h);
        snprintf(h.client_name, sizeof h.client_name, "hammer");
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            rgpu_hello_add_lib(&h, libs[i], NULL);
        int rc = rgpu_hs_client(fd, 1, &h, &w, how, sizeof how, why, sizeof why);
        close(fd);
        if (rc == 0 && w.status == RGPU_OK)
            let_in++;
        else if (rc == 0 && w.status == RGPU_EAUTH)
            failed++;
        else {
            closed++;
            usleep(1000);       /* closed at once: do not spin */
        }
    }
    printf("attempts %ld in %.1f s: let-in %ld auth-failed %ld closed %ld\n", attempts,
           now_s() - t0, let_in, failed, closed);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "hold") == 0)
        return do_hold(argv[2], argv[3], atof(argv[4]), atoi(argv[5]));
    if (argc == 5 && strcmp(argv[1], "hammer") == 0)
        return do_hammer(argv[2], argv[3], atof(argv[4]));
    if (argc != 3) {
        fprintf(stderr, "usage: authclient hello|digest|digest-rgpu|newer|proto1|replay ADDR | "
                "fake PATH | "
                "hold ADDR FROM SECONDS N | hammer ADDR FROM SECONDS\n");
        return 2;
    }
    if (strcmp(argv[1], "hello") == 0)
        return do_hello(argv[2], NULL, 0);
    if (strcmp(argv[1], "digest") == 0)
        return do_hello(argv[2], &rgpu_cudart_lib, 0);
    if (strcmp(argv[1], "digest-rgpu") == 0)
        return do_hello(argv[2], &rgpu_rgpu_lib, 0);
    if (strcmp(argv[1], "newer") == 0)
        return do_hello(argv[2], &rgpu_cudart_lib, 1);
    if (strcmp(argv[1], "proto1") == 0)
        return do_proto1(argv[2]);
    if (strcmp(argv[1], "replay") == 0)
        return do_replay(argv[2]);
    if (strcmp(argv[1], "fake") == 0)
        return do_fake(argv[2]);
    fprintf(stderr, "authclient: unknown mode %s\n", argv[1]);
    return 2;
}
