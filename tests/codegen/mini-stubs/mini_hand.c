/* The golden test library's hand-written client (mini.ann's
 * client-sources): read by the generator for what it sends, never
 * compiled.  miniStreamSync is `client`: its stub sends its own
 * procedure; rgpu_miniFill, rgpu_miniWrite and rgpu_miniRead are rgpu's
 * own procedures, called. */
#include "rgpu_client.h"
#include "mini_procs.h"

RGPU_EXPORT miniStatus miniStreamSync(miniStream stream)
{
    const void *argv[] = { &stream };
    return (miniStatus)rgpu_call(&rgpu_mini_lib, RGPU_MINI_miniStreamSync, argv);
}

miniStatus mini_fill_zeros(miniStream s, size_t n)
{
    static const char zeros[64];
    return rgpu_miniFill(s, zeros, n < sizeof zeros ? n : sizeof zeros);
}

miniStatus mini_copy_through(miniStream s, const void *in, void *out, size_t n, size_t *got)
{
    miniStatus rc = rgpu_miniWrite(s, n, in);
    return rc != 0 ? rc : rgpu_miniRead(out, n, got);
}
