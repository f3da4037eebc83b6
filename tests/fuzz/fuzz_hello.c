/* libFuzzer harness: the hello codec (common/rgpu_hello.c) on arbitrary
 * frames, as a session decodes a client's hello or auth before it knows
 * who the client is, and as a client decodes a welcome or challenge.
 * Beyond "no crash, no sanitizer report": a decoded message's strings are
 * NUL-terminated within their fields. */
#include "rgpu_hello.h"
#include "rgpu_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_terminated(const char *s, size_t size)
{
    if (!memchr(s, '\0', size))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rgpu_hs_msg m;
    char why[256];
    if (rgpu_hs_decode((const char *)data, size, &m, why, sizeof why) < 0) {
        check_terminated(why, sizeof why);
        return 0;
    }
    switch (m.type) {
    case RGPU_MSG_HELLO:
        check_terminated(m.u.hello.client_name, sizeof m.u.hello.client_name);
        if (m.u.hello.nlibs < 0 || m.u.hello.nlibs > RGPU_HELLO_MAX_LIBS)
            abort();
        for (int i = 0; i < m.u.hello.nlibs; i++)
            check_terminated(m.u.hello.libs[i].name, sizeof m.u.hello.libs[i].name);
        if (m.u.hello.visible.set)
            check_terminated(m.u.hello.visible.list, sizeof m.u.hello.visible.list);
        break;
    case RGPU_MSG_AUTH:
        check_terminated(m.u.auth.key_id, sizeof m.u.auth.key_id);
        break;
    case RGPU_MSG_WELCOME:
        check_terminated(m.u.welcome.server_name, sizeof m.u.welcome.server_name);
        check_terminated(m.u.welcome.message, sizeof m.u.welcome.message);
        break;
    default:
        break;
    }
    return 0;
}
