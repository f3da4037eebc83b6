#!/bin/bash
# Rebuilds the fuzzers' seed corpus (tests/fuzz/corpus/HARNESS/) from the
# test programs:
#
#   tests/fuzz/record.sh BUILD_DIR FUZZ_BUILD_DIR
#
# Runs every program in BUILD_DIR/tests/progs through tests/run-prog.sh with
# RGPU_RECORD_DIR set (rgpud then writes each request frame it reads, see
# daemon/record.c), turns the frames into each harness's input format
# (FUZZ_BUILD_DIR/tests/fuzz/fuzz-corpus), and keeps of those only the ones
# that add coverage (libFuzzer's -merge=1), replacing the committed corpus.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR FUZZ_BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
fuzz=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-record.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/frames" "$tmp/raw/frame" "$tmp/raw/decode" "$tmp/raw/dispatch"

for prog in "$build"/tests/progs/*; do
    [ -f "$prog" ] && [ -x "$prog" ] || continue
    echo "record: $(basename "$prog")"
    # The session writes the frames it reads: a file opened for writing,
    # which its sandbox forbids (docs/security.md), so it runs unconfined.
    RGPU_RECORD_DIR=$tmp/frames RGPU_PROG_DAEMON_ARGS=--no-sandbox \
        LD_LIBRARY_PATH="$build/stubs:$build/tests/fakegpu" \
        "$here/../run-prog.sh" "$build" "$prog" >/dev/null 2>&1 ||
        echo "record: $(basename "$prog") failed; its frames are kept" >&2
done
# Session PID, then sequence number: the order the session read them.
find "$tmp/frames" -type f | sort -t/ -k1,1 -V | xargs -r "$fuzz/tests/fuzz/fuzz-corpus" "$tmp/raw"

for h in frame decode dispatch; do
    rm -rf "$here/corpus/fuzz_$h"
    mkdir -p "$here/corpus/fuzz_$h"
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
        "$fuzz/tests/fuzz/fuzz_$h" -merge=1 -max_len=16384 -rss_limit_mb=2048 -timeout=25 \
        "$here/corpus/fuzz_$h" "$tmp/raw/$h" >"$tmp/merge-$h.log" 2>&1 ||
        { tail -30 "$tmp/merge-$h.log" >&2; exit 1; }
    echo "record: fuzz_$h: $(ls "$tmp/raw/$h" | wc -l) recorded, $(ls "$here/corpus/fuzz_$h" | wc -l) kept, $(du -sh "$here/corpus/fuzz_$h" | cut -f1)"
done
