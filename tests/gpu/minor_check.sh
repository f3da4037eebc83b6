#!/bin/bash
# tests/gpu/minor_check.sh [BUILD_DIR]   -- on the GPU machine, from the repo root
#
# A program built against the stubs' newer CUDA 13 headers (13.5, from the
# pinned wheels) on a CUDA 13.0 host: BUILD/tests/minor_prog (C, linked to
# libcudart.so.13) runs
#   - natively, with the host's libcudart.so.13 (CUDA_HOME/lib64);
#   - through rgpu: rgpu's libcudart.so.13 (BUILD/stubs) -> a private rgpud
#     on a Unix socket -> the host's CUDA 13.0 libraries;
# `compare` mode (CUDA 13.0's functions only, through structures 13.5
# extends) must print the same byte for byte both ways; `full` mode through
# rgpu must print "minor: ok": what 13.1 and later brought is refused at
# the call, with the log line naming both versions, or served by rgpu's
# client.  Natively `full` finds the newer functions missing and calls none.
# BUILD_DIR: a meson build dir or tests/gpu/pack-build.sh's build-gpu.
# Prints one line per check and "minor_check: PASS" or "... FAIL"; exits 0
# on pass, 1 on failure, 2 when something to run is missing.
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
prog=$build/tests/minor_prog
for f in "$prog" "$build/daemon/rgpud" "$build/stubs/libcudart.so.13"; do
    [ -e "$f" ] || { echo "minor_check: $f is missing (build with -Dcuda13=13.5)"; exit 2; }
done

tag=minor_check
# shellcheck source=tests/gpu/check_lib.sh
. "$(dirname "$0")/check_lib.sh"

env -u RGPU_SERVER LD_LIBRARY_PATH="$cuda_lib" timeout 60 "$prog" compare \
    > "$tmp/native.out" 2> "$tmp/native.err"
check "native run (the host's libcudart.so.13)" $? "$tmp/native.err"
env -u RGPU_SERVER LD_LIBRARY_PATH="$cuda_lib" timeout 60 "$prog" full \
    > "$tmp/native-full.out" 2> "$tmp/native-full.err"
grep -q '^minor: ok$' "$tmp/native-full.out"
check "native full mode (the newer functions looked up, none called)" $? "$tmp/native-full.err"

start_rgpud rgpud
through_rgpu rgpud rgpu compare
check "rgpu run (rgpu's CUDA 13.5 libcudart.so.13, served by the host's 13.0)" $? "$tmp/rgpu.err"
diff -u "$tmp/native.out" "$tmp/rgpu.out" > "$tmp/diff"
check "output identical to native" $? "$tmp/diff"
through_rgpu rgpud full full
grep -q '^minor: ok$' "$tmp/full.out" &&
    grep -q "cudaGraphGetId: the server's libcudart.so.13 is version 130[0-9]0, and cudaGraphGetId came with version 13010: refused" "$tmp/full.err"
check "full mode through rgpu (13.1's functions refused, naming both versions)" $? "$tmp/full.err"

finish "$tmp/native.out"
