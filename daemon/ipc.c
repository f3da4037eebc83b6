/* CUDA IPC between client processes of this rgpud: the server side.
 *
 * Each client process has its own session, a process of the GPU host, so
 * a handle one client gets (cuIpcGetMemHandle, generated) is the driver's
 * own 64 bytes, and another client's session opens it with the real driver,
 * which validates its handles: garbage, a handle of another host, or one
 * whose memory is freed fails there.  That failure is logged here with what
 * it most likely means, and the library's error goes back unchanged.
 *
 * Memory a session opens joins its table of owned memory (daemon/owned.c)
 * with the allocation's size from cuMemGetAddressRange, so that copies,
 * memsets and kernel arguments may use it; a close forgets it.  Sessions
 * share nothing: the table is this session's.  Who may open whose memory:
 * docs/security.md, "CUDA IPC".
 *
 * Users: every session runs as rgpud's user, so the driver would let any
 * session open any handle whose bytes it is shown.  The client therefore
 * never sees the driver's bytes: a handle leaves the server enciphered
 * with a key of this daemon and the client's identity (the uid it
 * connected as, or the name of its key), and is deciphered with the
 * opening session's key.  The cipher is a 64-byte-wide permutation (a
 * four-round Feistel network over two 32-byte halves, HMAC-SHA256 as round
 * function), so a handle shown to a session of another identity, or of
 * another rgpud, deciphers to unpredictable bytes that the driver refuses,
 * and nobody can make the enciphered form of a handle he has not been
 * given. */
#include "rgpud.h"
#include "owned.h"
#include "rgpu_log.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

/* ---- the handles' cipher ------------------------------------------------------------ */

#define IPC_HANDLE_LEN 64
#define HALF (IPC_HANDLE_LEN / 2)
#define ROUNDS 4

_Static_assert(sizeof(CUipcMemHandle) == IPC_HANDLE_LEN, "memory handle size");
_Static_assert(sizeof(CUipcEventHandle) == IPC_HANDLE_LEN, "event handle size");

/* Made by the listener at start; only the listener keeps it.  A session
 * inherits a copy through fork and wipes it first thing (ipc_session_start):
 * a client may read its own session's memory through its kernels, and
 * with this secret it could compute every other identity's key. */
static unsigned char daemon_secret[32];
static int have_secret;
/* What the listener derived for this session before the fork (a key, or a
 * salt for TCP keys), until the client is let in. */
static struct ipc_seed seed;
/* This session's key; unset until let in. */
static unsigned char identity_key[32];
static int have_identity;

int ipc_daemon_secret(void)
{
    size_t got = 0;
    while (got < sizeof daemon_secret) {
        ssize_t n = getrandom(daemon_secret + got, sizeof daemon_secret - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    have_secret = 1;
    return 0;
}

/* HMAC-SHA256(key, label | extra) into out; -1 on failure. */
static int derive(const unsigned char *key, size_t keylen, const char *label,
                  const unsigned char *extra, size_t extra_len, unsigned char out[32])
{
    unsigned char msg[256];
    unsigned int len = 32;
    size_t n = strlen(label);
    if (n + extra_len > sizeof msg)
        return -1;
    memcpy(msg, label, n);
    if (extra_len)
        memcpy(msg + n, extra, extra_len);
    int ok = HMAC(EVP_sha256(), key, (int)keylen, msg, n + extra_len, out, &len) != NULL;
    explicit_bzero(msg, sizeof msg);
    return ok ? 0 : -1;
}

/* Overwrite the stack below the caller's frame, where the HMAC of the
 * secret just left its working state (the padded key's words), so that a
 * session forked next does not inherit it. */
__attribute__((noinline)) static void wipe_stack_below(void)
{
    unsigned char area[64 << 10];
    explicit_bzero(area, sizeof area);
    __asm__ volatile("" : : "r"(area) : "memory");
}

void ipc_listener_seed(int fd, const struct rgpud_options *opt, struct ipc_seed *out)
{
    char label[160];
    memset(out, 0, sizeof *out);
    if (!have_secret)
        return;
    if (opt->addr.kind == RGPU_ADDR_UNIX) {
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
            return;
        snprintf(out->who, sizeof out->who, "uid %ld", (long)cr.uid);
    } else if (opt->insecure_tcp) {
        snprintf(out->who, sizeof out->who, "unauthenticated");
    }
    if (out->who[0]) {
        snprintf(label, sizeof label, "rgpu-ipc-identity %s", out->who);
        out->kind = derive(daemon_secret, sizeof daemon_secret, label, NULL, 0, out->bytes) == 0
                        ? IPC_SEED_KEY : IPC_SEED_NONE;
    } else {
        /* TCP with keys: who it is comes later, in the session; the key
         * then comes from the client's own secret with this salt. */
        out->kind = derive(daemon_secret, sizeof daemon_secret, "rgpu-ipc-tcp-salt", NULL, 0,
                           out->bytes) == 0 ? IPC_SEED_SALT : IPC_SEED_NONE;
    }
    wipe_stack_below();
}

void ipc_session_start(struct ipc_seed *from_listener)
{
    explicit_bzero(daemon_secret, sizeof daemon_secret);
    have_secret = 0;
    seed = *from_listener;
    explicit_bzero(from_listener, sizeof *from_listener);
}

void ipc_forget_secret(void)
{
    explicit_bzero(daemon_secret, sizeof daemon_secret);
    have_secret = 0;
}

static void take_key(const unsigned char key[32])
{
    memcpy(identity_key, key, sizeof identity_key);
    have_identity = 1;
}

void ipc_identity(const char *who)
{
    if (seed.kind == IPC_SEED_KEY && strcmp(seed.who, who) == 0)
        take_key(seed.bytes);
    else if (seed.kind != IPC_SEED_NONE)
        rgpu_warn("the identity '%s' is not the one rgpud derived an IPC key for: CUDA IPC is "
                  "refused in this session", who);
    explicit_bzero(&seed, sizeof seed);
}

void ipc_identity_key(const char *name, const unsigned char *secret, size_t len)
{
    unsigned char key[32];
    char label[160];
    snprintf(label, sizeof label, "rgpu-ipc-identity key %s ", name);
    /* Keyed by the client's own secret: a session of another key knows the
     * salt but not this secret, so it cannot make this key. */
    if (seed.kind == IPC_SEED_SALT &&
        derive(secret, len, label, seed.bytes, sizeof seed.bytes, key) == 0)
        take_key(key);
    explicit_bzero(key, sizeof key);
    explicit_bzero(&seed, sizeof seed);
}

/* Round function: HMAC(identity key, kind | round | half). */
static int round_mix(char kind, int round, const unsigned char in[HALF], unsigned char out[HALF])
{
    unsigned char msg[2 + HALF];
    unsigned int len = HALF;
    msg[0] = (unsigned char)kind;
    msg[1] = (unsigned char)round;
    memcpy(msg + 2, in, HALF);
    return HMAC(EVP_sha256(), identity_key, sizeof identity_key, msg, sizeof msg, out, &len)
               ? 0 : -1;
}

/* Enciphers (decipher 0) or deciphers the 64 bytes in place; -1 when this
 * session has no key.  Enciphering is A ^= F0(B), B ^= F1(A), A ^= F2(B),
 * B ^= F3(A) over the halves A, B; deciphering the same backwards. */
static int ipc_cipher(char kind, unsigned char h[IPC_HANDLE_LEN], int decipher)
{
    unsigned char *a = h, *b = h + HALF, f[HALF];
    if (!have_identity)
        return -1;
    for (int i = 0; i < ROUNDS; i++) {
        int round = decipher ? ROUNDS - 1 - i : i;
        /* Even rounds change A from B, odd rounds B from A. */
        unsigned char *src = round % 2 ? a : b, *dst = round % 2 ? b : a;
        if (round_mix(kind, round, src, f) < 0)
            return -1;
        for (int j = 0; j < HALF; j++)
            dst[j] ^= f[j];
    }
    OPENSSL_cleanse(f, sizeof f);
    return 0;
}

static uint64_t val(void *const *argv, int i)
{
    return *(const uint64_t *)argv[i];
}

static uint64_t out_value(void *const *argv, int i)
{
    const uint64_t *p = *(uint64_t *const *)argv[i];
    return p ? *p : 0;
}

/* The opened allocation's size, from the session's driver: 0 when it
 * does not know the address (then nothing is recorded and every use of the
 * pointer is refused, which is safe). */
static uint64_t opened_size(uint64_t ptr)
{
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        (CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr))backend_sym(
            "cuda", "cuMemGetAddressRange_v2");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!range || range(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS || base != ptr)
        return 0;
    return size;
}

static void record_opened(const char *fn, void **argv, int status)
{
    uint64_t ptr = out_value(argv, 0), size;
    if (status != 0) {
        rgpu_warn("%s: the driver refused the handle (error %d): IPC handle not made by "
                  "this GPU host's rgpud for this identity (another host's or user's, garbage, "
                  "or its memory is freed)",
                  fn, status);
        return;
    }
    size = ptr ? opened_size(ptr) : 0;
    if (!size || owned_add(ptr, size, OWNED_IPC, 0) < 0)
        rgpu_error("%s: opened memory at 0x%llx of unknown size: it cannot be used", fn,
                   (unsigned long long)ptr);
    else
        rgpu_info("%s: opened %llu bytes at 0x%llx", fn, (unsigned long long)size,
                  (unsigned long long)ptr);
}

static void post_open_driver(void **argv, int status)
{
    record_opened("cuIpcOpenMemHandle", argv, status);
}

static void post_open_runtime(void **argv, int status)
{
    record_opened("cudaIpcOpenMemHandle", argv, status);
}

/* The driver refuses to close what it did not open by IPC, so only an
 * opened range is forgotten here. */
static void post_close(void **argv, int status)
{
    if (status == 0)
        (void)owned_remove(val(argv, 0));
}

static void post_open_event(void **argv, int status)
{
    (void)argv;
    if (status != 0)
        rgpu_warn("cuIpcOpenEventHandle: the driver refused the handle (error %d): IPC handle "
                  "not made by this GPU host's rgpud for this identity (another host's or "
                  "user's, or garbage)", status);
}

/* ---- enciphering what leaves, deciphering what comes ------------------------------ */

static int no_identity(const char *fn, int notsup)
{
    rgpu_warn("%s: this session has no identity to key IPC handles with: refused", fn);
    return notsup;
}

/* (handle *, ...): the handle the driver wrote, enciphered before it goes. */
static void encipher_out(char kind, void **argv, int status)
{
    unsigned char *h = *(unsigned char **)argv[0];
    if (status != 0 || !h)
        return;
    if (ipc_cipher(kind, h, 0) < 0) {
        memset(h, 0, IPC_HANDLE_LEN);   /* never the driver's own bytes */
        rgpu_error("IPC handle could not be enciphered: zeroed");
    }
}

static void post_get_mem(void **argv, int status) { encipher_out('m', argv, status); }
static void post_get_event(void **argv, int status) { encipher_out('e', argv, status); }

static int pre_get_driver(void **argv)
{
    (void)argv;
    return have_identity ? 0 : no_identity("cuIpcGet*Handle", CUDA_ERROR_NOT_SUPPORTED);
}

static int pre_get_runtime(void **argv)
{
    (void)argv;
    return have_identity ? 0 : no_identity("cudaIpcGet*Handle", cudaErrorNotSupported);
}

/* (out *, handle by value, ...): deciphered in place before the driver sees it. */
static int decipher_in(char kind, void **argv, int notsup)
{
    if (ipc_cipher(kind, (unsigned char *)argv[1], 1) < 0)
        return no_identity(kind == 'm' ? "IpcOpenMemHandle" : "IpcOpenEventHandle", notsup);
    return 0;
}

static int pre_open_mem_driver(void **argv)
{
    return decipher_in('m', argv, CUDA_ERROR_NOT_SUPPORTED);
}

static int pre_open_event_driver(void **argv)
{
    return decipher_in('e', argv, CUDA_ERROR_NOT_SUPPORTED);
}

static int pre_open_mem_runtime(void **argv)
{
    return decipher_in('m', argv, cudaErrorNotSupported);
}

static int pre_open_event_runtime(void **argv)
{
    return decipher_in('e', argv, cudaErrorNotSupported);
}

static const struct guard ipc_guards[] = {
    { "cuda", "cuIpcGetMemHandle", pre_get_driver, post_get_mem },
    { "cuda", "cuIpcGetEventHandle", pre_get_driver, post_get_event },
    { "cuda", "cuIpcOpenMemHandle_v2", pre_open_mem_driver, post_open_driver },
    { "cuda", "cuIpcCloseMemHandle", NULL, post_close },
    { "cuda", "cuIpcOpenEventHandle", pre_open_event_driver, post_open_event },
    { "cudart", "cudaIpcGetMemHandle", pre_get_runtime, post_get_mem },
    { "cudart", "cudaIpcGetEventHandle", pre_get_runtime, post_get_event },
    { "cudart", "cudaIpcOpenMemHandle", pre_open_mem_runtime, post_open_runtime },
    { "cudart", "cudaIpcCloseMemHandle", NULL, post_close },
    { "cudart", "cudaIpcOpenEventHandle", pre_open_event_runtime, post_open_event },
};

const struct guard *ipc_guard_for(const char *lib, const char *name)
{
    return GUARD_IN(ipc_guards, lib, name);
}
