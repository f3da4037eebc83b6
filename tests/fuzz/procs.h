/* The procedures the fuzzers can reach, and how an input names one.
 *
 * A record is [selector u8][index u16 BE][msgpack arguments]: the selector
 * picks one of the libraries (modulo their number), the index a procedure in it (modulo its size), so
 * that every byte value names some procedure and a mutation of the header
 * moves to a neighbour instead of to nowhere.  fuzz_dispatch takes several
 * records, each with a u16 BE length before its arguments. */
#ifndef RGPU_FUZZ_PROCS_H
#define RGPU_FUZZ_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu_marshal.h"
#include "rgpud.h"

#define FUZZ_NGEN 7             /* generated libraries, rgpu's own last */

struct fuzz_gen {
    const struct rgpu_lib *lib;
    const struct rgpu_server_proc *server;
};

extern const struct fuzz_gen fuzz_gen[FUZZ_NGEN];

/* What the last serve_ function said of its call's transport
 * (session_stub.c's serve_transport). */
extern int fuzz_serve_status;

/* The generated procedure a selector and index name. */
const struct rgpu_proc *fuzz_pick_generated(unsigned sel, unsigned index, unsigned *lib);

/* A procedure id back to a selector and index (the corpus tool), or -1. */
int fuzz_locate(uint32_t id, unsigned *sel, unsigned *index);

#endif
