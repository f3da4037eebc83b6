/* rgpu's own procedures of the golden test library (mini.ann,
 * "procedures"): requests no library function is, with a handle and a
 * buffer of stated length; with bytes that travel outside the frame
 * buffer (a stream and a sink), and an output of which only the part the
 * callee filled travels back (used=). */
#ifndef MINI_OWN_H
#define MINI_OWN_H

#include "mini.h"

miniStatus rgpu_miniFill(miniStream s, const void *bytes, size_t n);
miniStatus rgpu_miniWrite(miniStream s, size_t n, const void *bytes);
miniStatus rgpu_miniRead(void *bytes, size_t n, size_t *got);

#endif
