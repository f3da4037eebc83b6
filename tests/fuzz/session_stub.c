/* What the hand-written procedures need from daemon/session.c, for the
 * harnesses that run them without it. */
#include "rgpud.h"
#include "rgpu_wire.h"

#include <stdio.h>
#include <stdlib.h>

/* The session would write sb to the client (liblog.c's log frames): it
 * must at least be one well-formed msgpack object. */
void session_send(const msgpack_sbuffer *sb)
{
    if (rgpu_msgpack_check(sb->data, sb->size) != 0) {
        fprintf(stderr, "fuzz: the server would send malformed msgpack\n");
        abort();
    }
}
