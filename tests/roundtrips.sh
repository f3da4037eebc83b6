#!/bin/bash
# What a training step asks again and again costs no round trip after the
# first time:
#
#   roundtrips.sh <build-dir> <roundtrips program>
#
# Runs tests/progs/roundtrips through rgpu (run-prog.sh) under RGPU_STATS=1.
# The program measures, with rgpu_stats_totals, how many requests waited
# for the server during its steps after the first, per part (cuBLAS handle
# state around gemms; cuBLASLt matmuls with a new bias pointer each step; a
# kernel's attributes, a repeated attribute set and occupancy; launches
# with attributes the client can check, function handles and names; device facts
# through the runtime and the driver; cuDNN tensor descriptors made, set and
# destroyed around a batch norm) and writes
# "roundtrips: PART waited N" to stderr.  Every N must be 0, and every part
# must report.  On failure the per-procedure table says which call waited.
set -u
build=$1
prog=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-rt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

if ! RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" 20 >"$tmp/out" 2>"$tmp/err"; then
    cat "$tmp/out" "$tmp/err" >&2
    echo "roundtrips: $prog failed" >&2
    exit 1
fi
cat "$tmp/out"
fail=0
for part in cublas cublasLt kernel launch device cudnn; do
    n=$(awk -v p="$part" '$1 == "roundtrips:" && $2 == p && $3 == "waited" { print $4 }' "$tmp/err")
    if [ -z "$n" ]; then
        echo "FAIL: $part reported nothing (not run through rgpu?)"
        fail=1
    elif [ "$n" -ne 0 ]; then
        echo "FAIL: $part waited for the server $n times after the first step"
        fail=1
    else
        echo "ok: $part waited for nothing after the first step"
    fi
done
if [ $fail -ne 0 ]; then
    echo "---- what waited, per procedure (whole run) ----"
    grep '^rgpu: ' "$tmp/err"
fi
exit $fail
