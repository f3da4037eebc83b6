#!/bin/bash
# Pinned memory alone costs nothing of mapped memory's coherence:
#
#   mapped-roundtrips.sh <build-dir> <memcpy_sizes program> <zero_copy program>
#                        <streams_mapped program>
#
# memcpy_sizes copies to and from pinned memory (cudaMallocHost) without
# naming it as device memory: under RGPU_STATS=1 no request may move mapped
# memory (common/rgpu_mapped.c), so its synchronises keep their shortcuts.
# streams_mapped host-only registers memory with cudaHostRegisterMapped and
# copies into it from four streams without asking its device pointer: it
# too must move none (registered memory gets its GPU copy only when a
# device call names it; before, every synchronise brought the whole range
# back: 64 MiB copied into from four streams took minutes).
# zero_copy, which shares memory with its kernels, must move some: the
# check would pass vacuously if the statistics never named them.
set -u
build=$1
plain=$2
shared=$3
registered=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-mappedrt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# moves PROG NAME [ARGS...]: run it, print how many requests moved mapped memory.
moves() {
    local prog=$1 name=$2
    shift 2
    if ! RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" "$@" >"$tmp/out.$name" 2>"$tmp/err.$name"; then
        cat "$tmp/out.$name" "$tmp/err.$name" >&2
        echo "mapped-roundtrips: $prog failed" >&2
        exit 1
    fi
    # the shared-memory copies: rgpu's own rgpu_shared_htod and rgpu_shared_dtoh
    awk '$1 == "rgpu:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && $4 ~ /^rgpu_shared_/ \
         { n += $2 + $3 } END { print n + 0 }' "$tmp/err.$name"
}
p=$(moves "$plain" plain)
s=$(moves "$shared" shared)
r=$(moves "$registered" registered 4 3 host-only)
echo "requests moving mapped memory: $p for pinned memory alone, $s with shared memory," \
     "$r for registered memory copied through"
if [ "$p" -ne 0 ]; then
    echo "FAIL: a program that only copies through pinned memory moved mapped memory:"
    grep rgpu_shared_ "$tmp/err.plain"
    exit 1
fi
if [ "$r" -ne 0 ]; then
    echo "FAIL: memory registered mapped, only copied through, moved mapped memory:"
    grep rgpu_shared_ "$tmp/err.registered"
    exit 1
fi
if [ "$s" -eq 0 ]; then
    echo "FAIL: zero_copy moved no mapped memory (are the statistics named as expected?)"
    exit 1
fi
echo "ok"
