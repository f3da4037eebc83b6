#!/bin/bash
# tests/multidev.sh BUILD MULTIDEV N
#
# Several GPUs on the fake backend (tests/multidev.c), with N devices
# (RGPU_FAKEGPU_DEVICES=N): natively on the fake and through rgpu against
# an rgpud whose fake has N devices; the program's checks pass both ways
# and both print the same lines.
set -u
[ $# -eq 3 ] || { echo "usage: $0 BUILD MULTIDEV N" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
prog=$2
n=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-multidev.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
export RGPU_FAKEGPU_DEVICES=$n
fails=0

# A sanitized build: the ASan runtime first, as run-prog.sh does.
asan_rt=$(ldd "$build/stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')

if LD_PRELOAD=${asan_rt:-} LD_LIBRARY_PATH=$build/tests/fakegpu "$prog" "$n" \
        >"$tmp/native" 2>"$tmp/native.err"; then
    echo "ok - $n devices natively on the fake GPU"
else
    echo "FAIL - $n devices natively on the fake GPU"
    cat "$tmp/native" "$tmp/native.err"
    fails=$((fails + 1))
fi
if "$here/run-prog.sh" "$build" "$prog" "$n" >"$tmp/rgpu" 2>"$tmp/rgpu.err"; then
    echo "ok - $n devices through rgpu"
else
    echo "FAIL - $n devices through rgpu"
    cat "$tmp/rgpu" "$tmp/rgpu.err"
    fails=$((fails + 1))
fi
if diff -u "$tmp/native" "$tmp/rgpu"; then
    echo "ok - the same lines both ways"
else
    echo "FAIL - the outputs differ"
    fails=$((fails + 1))
fi
exit $((fails > 0))
