#!/bin/bash
# Pinned memory alone costs nothing of mapped memory's coherence:
#
#   mapped-roundtrips.sh <build-dir> <memcpy_sizes program> <zero_copy program>
#
# memcpy_sizes copies to and from pinned memory (cudaMallocHost) without
# naming it as device memory: under RGPU_STATS=1 no request may move mapped
# memory (common/rgpu_mapped.c), so its synchronises keep their shortcuts.
# zero_copy, which shares memory with its kernels, must move some: the
# check would pass vacuously if the statistics never named them.
set -u
build=$1
plain=$2
shared=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-mappedrt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# moves PROG NAME: run it, print how many requests moved mapped memory.
moves() {
    if ! RGPU_STATS=1 "$here/run-prog.sh" "$build" "$1" >"$tmp/out.$2" 2>"$tmp/err.$2"; then
        cat "$tmp/out.$2" "$tmp/err.$2" >&2
        echo "mapped-roundtrips: $1 failed" >&2
        exit 1
    fi
    awk '$1 == "rgpu:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && $4 == "mapped" \
         { n += $2 + $3 } END { print n + 0 }' "$tmp/err.$2"
}
p=$(moves "$plain" plain)
s=$(moves "$shared" shared)
echo "requests moving mapped memory: $p for pinned memory alone, $s with shared memory"
if [ "$p" -ne 0 ]; then
    echo "FAIL: a program that only copies through pinned memory moved mapped memory:"
    grep mapped "$tmp/err.plain"
    exit 1
fi
if [ "$s" -eq 0 ]; then
    echo "FAIL: zero_copy moved no mapped memory (are the statistics named as expected?)"
    exit 1
fi
echo "ok"
