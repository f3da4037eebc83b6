/* rgpu's own procedures of the golden test library (mini.ann,
 * "procedures"): a request no library function is, with a handle and a
 * buffer of stated length. */
#ifndef MINI_OWN_H
#define MINI_OWN_H

#include "mini.h"

miniStatus rgpu_miniFill(miniStream s, const void *bytes, size_t n);

#endif
