/* libFuzzer harness: the frame pre-check and unpack (common/rgpu_wire.c) on
 * arbitrary bytes, as the session runs them on every frame it reads.
 *
 * Invariants checked beyond "no crash, no sanitizer report":
 *  - what rgpu_msgpack_check accepts, msgpack-c unpacks whole (the two
 *    parsers agree; a disagreement is a hole in the pre-check);
 *  - the unpacked tree has no more elements than the frame has bytes (the
 *    pre-check's promise), and no more than RGPU_MAX_OBJECTS where the
 *    protocol defines such a cap;
 *  - msgpack-c's zone grows by at most BOUND(elements): the element arrays
 *    (sizeof(msgpack_object) each, two per map entry) at most doubled by the
 *    zone's chunk rounding, plus the chunks' own headers.  Strings and bins
 *    point into the frame and cost nothing;
 *  - rgpu_split_trailing_bin (the split of a frame whose bulk bytes are
 *    read elsewhere) stays inside the bytes it was shown, and the head of
 *    an acceptable frame, its bin emptied, is acceptable on its own. */
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <sanitizer/allocator_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 4096      /* the session's zone chunk (daemon/session.c) */
#define SPLIT_PEEK 128  /* what the session looks at (daemon/session.c) */

static size_t count_elements(const msgpack_object *o)
{
    size_t n = 0;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        n += o->via.array.size;
        for (uint32_t i = 0; i < o->via.array.size; i++)
            n += count_elements(&o->via.array.ptr[i]);
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        n += 2 * (size_t)o->via.map.size;
        for (uint32_t i = 0; i < o->via.map.size; i++)
            n += count_elements(&o->via.map.ptr[i].key) + count_elements(&o->via.map.ptr[i].val);
    }
    return n;
}

/* What msgpack-c may allocate for a tree of n elements, in bytes. */
static size_t alloc_bound(size_t n)
{
    size_t arrays = n * sizeof(msgpack_object);
    return 2 * arrays + 2 * CHUNK + 64 * (arrays / CHUNK + 2);
}

static void fail(const char *what, size_t a, size_t b)
{
    fprintf(stderr, "fuzz_frame: invariant broken: %s (%zu, %zu)\n", what, a, b);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    msgpack_zone zone;
    msgpack_object root;

    int accepted = rgpu_msgpack_check(buf, size) == 0;
    if (!msgpack_zone_init(&zone, CHUNK))
        return 0;
    size_t before = __sanitizer_get_current_allocated_bytes();
    int unpacked = rgpu_unpack_frame(buf, size, &zone, &root) == 0;
    size_t grew = __sanitizer_get_current_allocated_bytes() - before;

    if (accepted != unpacked)
        fail("pre-check and unpack disagree", (size_t)accepted, (size_t)unpacked);
    if (unpacked) {
        size_t n = count_elements(&root);
        if (n > size)
            fail("more elements than bytes", n, size);
#ifdef RGPU_MAX_OBJECTS
        if (n > RGPU_MAX_OBJECTS)
            fail("more elements than RGPU_MAX_OBJECTS", n, (size_t)RGPU_MAX_OBJECTS);
#endif
        if (grew > alloc_bound(n))
            fail("msgpack-c allocated beyond the bound", grew, alloc_bound(n));
        /* The helpers the session applies to the root. */
        uint64_t u;
        int64_t i;
        (void)rgpu_obj_u64(&root, &u);
        (void)rgpu_obj_i64(&root, &i);
    }
    msgpack_zone_destroy(&zone);

    size_t head, bin_at, have = size < SPLIT_PEEK ? size : SPLIT_PEEK;
    if (rgpu_split_trailing_bin(buf, have, size, &head, &bin_at) == 0) {
        if (head > have || bin_at >= head)
            fail("split outside the bytes shown", head, bin_at);
        char *copy = malloc(head);
        if (copy) {
            memcpy(copy, buf, head);
            rgpu_empty_trailing_bin(copy, bin_at);
            if (accepted && rgpu_msgpack_check(copy, head) != 0)
                fail("an acceptable frame's head is not", head, size);
            free(copy);
        }
    }
    return 0;
}
