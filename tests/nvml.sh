#!/bin/bash
# tests/nvml.sh BUILD NVML_QUERY
#
# NVML through rgpu on the fake GPU (tests/nvml_query.c):
#  1. natively on the fake (its libcuda and libnvidia-ml loaded directly)
#     and through the stub against a private rgpud: the program's checks
#     pass both ways and both print the same values;
#  2. rgpud with --nvml-settings lets a setting call through (refused by
#     default, in 1);
#  3. rgpud on a host without libnvidia-ml: NVML calls fail, CUDA works.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BUILD NVML_QUERY" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
prog=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-nvml.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL - $*"
    fails=$((fails + 1))
}

# A sanitized build: the program links the (instrumented) stubs, whose ASan
# runtime must come first even when the fake stands in for them.
asan_rt=$(ldd "$build/stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')

if LD_PRELOAD=${asan_rt:-} LD_LIBRARY_PATH=$build/tests/fakegpu \
        "$prog" --settings allowed >"$tmp/native" 2>"$tmp/native.err"; then
    echo "ok - natively on the fake GPU"
else
    fail "natively on the fake GPU"
    cat "$tmp/native" "$tmp/native.err"
fi

if RGPU_PROG_DAEMON_LOG=$tmp/rgpud.log "$here/run-prog.sh" "$build" "$prog" --settings refused \
        >"$tmp/rgpu" 2>"$tmp/rgpu.err"; then
    echo "ok - through rgpu"
else
    fail "through rgpu"
    cat "$tmp/rgpu" "$tmp/rgpu.err"
fi
# The fake NVML checks its handles too: rgpud's log shows that rgpud
# refused the forged ones before the library saw them (three forged
# handles, to the generated name and memory queries and the process list,
# rgpu's own procedure rgpu_nvml_list).
for what in 'nvmlDeviceGetName: refused device, a handle' 'nvmlDeviceGetMemoryInfo: refused device, a handle' \
            'rgpu_nvml_list: refused device, a handle'; do
    if [ "$(grep -c "$what" "$tmp/rgpud.log")" -ge 1 ]; then
        echo "ok - rgpud: $what"
    else
        fail "rgpud's log lacks '$what'"
        cat "$tmp/rgpud.log"
    fi
done
if diff -u "$tmp/native" "$tmp/rgpu" >"$tmp/diff"; then
    echo "ok - the same values both ways ($(grep -c . "$tmp/native") lines)"
else
    fail "values differ between the fake GPU and rgpu"
    cat "$tmp/diff"
fi

if RGPU_PROG_DAEMON_ARGS=--nvml-settings "$here/run-prog.sh" "$build" "$prog" --settings allowed \
        >"$tmp/allowed" 2>"$tmp/allowed.err"; then
    echo "ok - rgpud --nvml-settings lets a setting call through"
else
    fail "rgpud --nvml-settings"
    cat "$tmp/allowed" "$tmp/allowed.err"
fi

# The fake backend without its libnvidia-ml: what a GPU host lacking NVML
# looks like to rgpud.
mkdir "$tmp/no-nvml"
for f in "$build"/tests/fakegpu/lib*.so*; do
    case $(basename "$f") in libnvidia-ml.*) continue ;; esac
    ln -s "$f" "$tmp/no-nvml/"
done
if RGPU_PROG_DAEMON_ARGS="--lib-dir $tmp/no-nvml" "$here/run-prog.sh" "$build" "$prog" --no-nvml \
        >"$tmp/none" 2>"$tmp/none.err"; then
    echo "ok - without NVML on the server: NVML refused, CUDA works"
else
    fail "without NVML on the server"
    cat "$tmp/none" "$tmp/none.err"
fi

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
exit 0
