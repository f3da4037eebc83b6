/* Turns request frames recorded by rgpud (RGPU_RECORD_DIR, see record.sh)
 * into seed inputs for each harness:
 *
 *   fuzz-corpus OUTDIR FRAME...
 *
 * FRAMEs are given in recording order (PID-SEQ names, sorted).  Writes
 * OUTDIR/frame/ (the frames as they are), OUTDIR/decode/ (one record per
 * generated call) and OUTDIR/dispatch/ (each session's calls in order, cut
 * into inputs of at most MAX_RECORDS records), each file named by a hash of
 * its contents, so that repeated calls collapse into one file.  The
 * harnesses' -merge=1 then keeps what adds coverage. */
#include "procs.h"
#include "rgpu_proto.h"
#include "rgpu_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_MAX 16384         /* bytes per seed input */
#define MAX_RECORDS 24          /* records per dispatch input */

static const char *outdir;

static void write_input(const char *sub, const void *buf, size_t len)
{
    char path[4096];
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)buf)[i]) * 1099511628211ull;
    snprintf(path, sizeof path, "%s/%s/%016llx", outdir, sub, (unsigned long long)h);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The session a frame came from: the PID part of its name. */
static long session_of(const char *path)
{
    const char *base = strrchr(path, '/');
    return atol(base ? base + 1 : path);
}

static struct {
    char buf[SEED_MAX];
    size_t len;
    int records;
    long session;
} seq;

static void flush_seq(void)
{
    if (seq.records)
        write_input("dispatch", seq.buf, seq.len);
    seq.len = 0;
    seq.records = 0;
}

static void add_record(long session, unsigned sel, unsigned index, const msgpack_sbuffer *args)
{
    unsigned char head[5] = { (unsigned char)sel, (unsigned char)(index >> 8),
                              (unsigned char)index, (unsigned char)(args->size >> 8),
                              (unsigned char)args->size };
    if (args->size > 0xffff || sizeof head + args->size > SEED_MAX)
        return;
    if (session != seq.session || seq.records == MAX_RECORDS ||
        seq.len + sizeof head + args->size > SEED_MAX)
        flush_seq();
    seq.session = session;
    memcpy(seq.buf + seq.len, head, sizeof head);
    memcpy(seq.buf + seq.len + sizeof head, args->data, args->size);
    seq.len += sizeof head + args->size;
    seq.records++;
}

static void one_frame(const char *path)
{
    size_t len;
    char *frame = slurp(path, &len);
    msgpack_zone zone;
    msgpack_object root;
    uint64_t proc;
    unsigned sel, index;

    if (!frame || !msgpack_zone_init(&zone, 4096))
        return;
    if (len <= SEED_MAX)
        write_input("frame", frame, len);
    if (rgpu_unpack_frame(frame, len, &zone, &root) == 0 && root.type == MSGPACK_OBJECT_ARRAY &&
        root.via.array.size == 6 && rgpu_obj_u64(&root.via.array.ptr[2], &proc) == 0 &&
        fuzz_locate((uint32_t)proc, &sel, &index) == 0) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, root.via.array.ptr[5]);
        if (sel < FUZZ_NGEN && 3 + sb.size <= SEED_MAX) {
            char *rec = malloc(3 + sb.size);
            rec[0] = (char)sel;
            rec[1] = (char)(index >> 8);
            rec[2] = (char)index;
            memcpy(rec + 3, sb.data, sb.size);
            write_input("decode", rec, 3 + sb.size);
            free(rec);
        }
        add_record(session_of(path), sel, index, &sb);
        msgpack_sbuffer_destroy(&sb);
    }
    msgpack_zone_destroy(&zone);
    free(frame);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz-corpus OUTDIR FRAME...\n");
        return 2;
    }
    outdir = argv[1];
    for (int i = 2; i < argc; i++)
        one_frame(argv[i]);
    flush_seq();
    return 0;
}
