/* The hello: ONE codec for the messages that open a session, used by the
 * client core, the launcher's probe and rgpud, plus the cryptography they
 * need (OpenSSL's libcrypto) and the key files.
 *
 *   hello     client -> server  [HELLO, 8, client_name, {lib: digest},
 *                                client_nonce(bin 32), {lib: soname},
 *                                cuda_visible_devices (str, or nil: unset)]
 *   challenge server -> client  [CHALLENGE, server_nonce(bin 32)]
 *                               (only where the server wants a key: TCP)
 *   auth      client -> server  [AUTH, key_id, mac(bin 32)]
 *             mac = HMAC-SHA256(key, "rgpu-client" | client_nonce | server_nonce)
 *   welcome   server -> client  [WELCOME, 8, status, runtime, driver,
 *                                server_name, message, server_proof,
 *                                [[lib, soname, version]...], cuda_devices]
 *             server_proof = HMAC-SHA256(key, "rgpu-server" | server_nonce |
 *                                        client_nonce), nil without a key
 *
 * Both nonces are fresh random bytes, so a recorded auth is worth nothing
 * in another session, and the proof shows the client that the server holds
 * its key too.  A protocol-1 hello ([HELLO, 1, name]) still decodes, so that
 * the server can answer it with a welcome a protocol-1 client reads (status
 * at [2], message at [6]).
 *
 * {lib: digest} maps each library's name to the SHA-256 of its procedure
 * table (rgpu_lib_digest): two builds whose tables differ refuse each other
 * at hello instead of misreading frames.  {lib: soname} says which major of
 * each library the client loaded (libcudart.so.12 or .13: docs/cuda12.md),
 * and the welcome's list which libraries the session loaded, of which
 * version (0: not loaded), for the client's messages and `rgpu info`.
 * The welcome's list is its last element, so a client of protocol 5
 * still reads the rest.
 *
 * cuda_visible_devices is the client's CUDA_VISIBLE_DEVICES, which narrows
 * the GPUs the server offers as it narrows a host's (daemon/devices.c);
 * cuda_devices, how many GPUs the session's CUDA then sees (-1: it cannot
 * say), tells the client whether work can go to a stream of another
 * device than the one meant (common/rgpu_lazy.c). */
#ifndef RGPU_HELLO_H
#define RGPU_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu_marshal.h"

#define RGPU_NONCE_LEN      32
#define RGPU_MAC_LEN        32
#define RGPU_KEY_LEN        32
#define RGPU_DIGEST_LEN     32
#define RGPU_HELLO_MAX_LIBS 16
#define RGPU_KEY_ID_MAX     64

struct rgpu_lib_digest {
    char name[32];
    unsigned char digest[RGPU_DIGEST_LEN];
    char soname[48];        /* the client's library: libcudart.so.12 */
};

/* A library of the server's session, as the welcome lists it. */
struct rgpu_lib_version {
    char name[32];          /* cudart */
    char soname[48];        /* libcudart.so.13 */
    int version;            /* its own numbering (13000, 130100, 91300); 0: not loaded */
};

/* A CUDA_VISIBLE_DEVICES: 64 GPUs' UUIDs fit. */
#define RGPU_VISIBLE_MAX 4096

struct rgpu_visible {
    int set;                /* 0: the variable is unset */
    char list[RGPU_VISIBLE_MAX];
};

struct rgpu_hello {
    int proto;
    char client_name[128];
    int nlibs;
    struct rgpu_lib_digest libs[RGPU_HELLO_MAX_LIBS];
    unsigned char nonce[RGPU_NONCE_LEN];
    struct rgpu_visible visible;
};

struct rgpu_auth {
    char key_id[RGPU_KEY_ID_MAX + 1];   /* "" : the client has no key */
    int has_mac;
    unsigned char mac[RGPU_MAC_LEN];
};

struct rgpu_welcome {
    int proto;
    int status;
    int runtime_version;
    int driver_version;
    char server_name[128];
    char message[512];
    int has_proof;
    unsigned char proof[RGPU_MAC_LEN];
    int nlibs;
    struct rgpu_lib_version libs[RGPU_HELLO_MAX_LIBS];
    int cuda_devices;
};

struct rgpu_hs_msg {
    int type;               /* RGPU_MSG_HELLO, _CHALLENGE, _AUTH or _WELCOME */
    union {
        struct rgpu_hello hello;
        unsigned char server_nonce[RGPU_NONCE_LEN];
        struct rgpu_auth auth;
        struct rgpu_welcome welcome;
    } u;
};

/* Send one handshake message as a frame: 0, or -1 with errno set. */
int rgpu_hs_send(int fd, const struct rgpu_hs_msg *m);
/* Decode one frame.  0, or -1 with a reason in why. */
int rgpu_hs_decode(const char *frame, size_t len, struct rgpu_hs_msg *m, char *why,
                   size_t whylen);
/* Read and decode one frame: 0; -1 when reading failed (errno set); -2
 * when the frame is not a handshake message (why set). */
int rgpu_hs_recv(int fd, struct rgpu_hs_msg *m, char *why, size_t whylen);

/* "rgpu 0.1.0": what hellos and welcomes name themselves with. */
const char *rgpu_version_string(void);

/* The client's side of the handshake on a connected fd: hello (h's libs
 * filled in by the caller; proto, name and nonce here), then the challenge
 * if the server sends one (the key from rgpu_key_client_path, wiped after
 * use), then the welcome, whose server proof is checked.  tcp: the address
 * was a TCP one, where a server that asks for no key is refused unless
 * RGPU_INSECURE_TCP=1, since anyone could be listening there.
 * Returns 0 with *w filled (its status may still refuse: w->message says
 * why); -1 when the connection failed (errno set, why too); -2 when the
 * peer is not an rgpud we may trust (why set).  how gets how we were let in
 * ("key 'lab' (HMAC-SHA256, server proof checked)"). */
int rgpu_hs_client(int fd, int tcp, struct rgpu_hello *h, struct rgpu_welcome *w, char *how,
                   size_t howlen, char *why, size_t whylen);

/* ---- procedure-table digests --------------------------------------------- */

/* SHA-256 over everything in lib's table that decides the wire format:
 * procedure ids, names and flags, each parameter's kind, size, count and
 * type parameters.  The same function runs on both ends. */
void rgpu_lib_digest(const struct rgpu_lib *lib, unsigned char out[RGPU_DIGEST_LEN]);
/* Add lib's digest to h (once per name), and the soname of the library
 * that holds it (soname; NULL: the table's own, lib->soname). */
void rgpu_hello_add_lib(struct rgpu_hello *h, const struct rgpu_lib *lib, const char *soname);
/* The major version in a soname: 12 for libcudart.so.12; -1 without one. */
int rgpu_soname_major(const char *soname);

/* ---- cryptography ---------------------------------------------------------- */

/* Random bytes from the system: 0, or -1 (never use such a nonce). */
int rgpu_random(void *buf, size_t len);
/* HMAC-SHA256(key, label | a | b) into out (RGPU_MAC_LEN bytes). */
void rgpu_hs_mac(const unsigned char key[RGPU_KEY_LEN], const char *label,
                 const unsigned char a[RGPU_NONCE_LEN], const unsigned char b[RGPU_NONCE_LEN],
                 unsigned char out[RGPU_MAC_LEN]);
#define RGPU_MAC_CLIENT "rgpu-client"
#define RGPU_MAC_SERVER "rgpu-server"
/* Constant-time comparison of two MACs: 1 when equal. */
int rgpu_mac_equal(const unsigned char a[RGPU_MAC_LEN], const unsigned char b[RGPU_MAC_LEN]);
/* Overwrite secrets so that they do not linger in memory. */
void rgpu_wipe(void *p, size_t len);

/* ---- key files --------------------------------------------------------------- */

/* A shared secret and the name both ends know it by.  On disk, one line:
 *     rgpu-key-1 KEY_ID HEX64
 * the same format for the server's file (/etc/rgpu/clients/KEY_ID) and the
 * client's (RGPU_KEY_FILE, ~/.config/rgpu/key). */
struct rgpu_key {
    char id[RGPU_KEY_ID_MAX + 1];
    unsigned char secret[RGPU_KEY_LEN];
};

/* Key ids: 1..64 of [A-Za-z0-9._-], not starting with '.'; they name files. */
int rgpu_key_id_valid(const char *id);
/* Load a key file: it must be a regular file (not a link) of the running
 * user, with no permission for group or others.  0, or -1 with why. */
int rgpu_key_load(const char *path, struct rgpu_key *k, char *why, size_t whylen);
/* A new random key with this id. */
int rgpu_key_new(const char *id, struct rgpu_key *k);
/* Write k to path (created 0600, never over an existing file). */
int rgpu_key_write(const char *path, const struct rgpu_key *k, char *why, size_t whylen);
/* The client's key file: RGPU_KEY_FILE, else $XDG_CONFIG_HOME/rgpu/key,
 * else ~/.config/rgpu/key.  0 with path set, -1 when none can be named. */
int rgpu_key_client_path(char *path, size_t size);

#endif
