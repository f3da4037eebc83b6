/* Server addresses: ONE parser, dialer and listener for the client core,
 * the launcher and rgpud, so that an address one of them accepts the
 * others accept too.
 *
 *   unix:PATH, or any absolute PATH   a Unix-domain socket
 *   HOST:PORT                         TCP (HOST a name or an IPv4 address)
 *   [V6]:PORT, [V6]                   TCP over IPv6
 *   V6 (two colons or more, no port)  TCP over IPv6, port RGPU_DEFAULT_PORT
 *   HOST                              TCP, port RGPU_DEFAULT_PORT
 */
#ifndef RGPU_ADDR_H
#define RGPU_ADDR_H

#include <stddef.h>
#include <sys/types.h>

#define RGPU_DEFAULT_SOCKET "/run/rgpu/rgpud.sock"
#define RGPU_DEFAULT_SERVER "unix:" RGPU_DEFAULT_SOCKET

enum rgpu_addr_kind { RGPU_ADDR_UNIX, RGPU_ADDR_TCP };

struct rgpu_addr {
    enum rgpu_addr_kind kind;
    char path[108];         /* UNIX: fits sockaddr_un's sun_path */
    char host[256];         /* TCP: without brackets */
    char port[8];           /* TCP: decimal, 1..65535 */
};

/* Parse spec.  0, or -1 with a sentence in err saying what is wrong. */
int rgpu_addr_parse(const char *spec, struct rgpu_addr *a, char *err, size_t errlen);

/* The canonical text of a ("unix:/run/rgpu/rgpud.sock", "[::1]:9713"),
 * which rgpu_addr_parse reads back as the same address. */
void rgpu_addr_format(const struct rgpu_addr *a, char *buf, size_t len);

/* Connect to a, giving up after timeout_ms (< 0: the kernel's own limit).
 * Returns a blocking, close-on-exec socket (TCP_NODELAY on TCP), or -1
 * with errno set and a sentence in err. */
int rgpu_addr_dial(const struct rgpu_addr *a, int timeout_ms, char *err, size_t errlen);

/* Listen on a.  A Unix socket is created with mode unix_mode, group-owned
 * by unix_gid unless that is (gid_t)-1; a socket file left by an rgpud
 * that is gone is replaced, while anything else at the path (another
 * file, a socket someone answers on) is refused.  Returns the listening
 * socket or -1 with a sentence in err. */
int rgpu_addr_listen(const struct rgpu_addr *a, mode_t unix_mode, gid_t unix_gid, char *err,
                     size_t errlen);

/* Whether a TCP address is a loopback one (127.0.0.0/8, ::1); 0 for a
 * name that does not resolve to loopback only. */
int rgpu_addr_is_loopback(const struct rgpu_addr *a);

#endif
