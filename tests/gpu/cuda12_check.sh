#!/bin/bash
# tests/gpu/cuda12_check.sh [BUILD_DIR]   -- on the GPU machine, from the repo root
#
# A CUDA 12 program through rgpu on a CUDA 13 host: BUILD/tests/cuda12_prog
# (C, built against the CUDA 12.9 headers of the wheels, linked to
# libcudart.so.12) runs
#   - natively, with the real libcudart.so.12 the build carries
#     (BUILD/cuda-12.9/lib, 0.7 MB: the GPU machine has no network) and the
#     host's driver;
#   - through rgpu: rgpu's libcudart.so.12 (BUILD/stubs) -> a private rgpud
#     on a Unix socket -> the host's CUDA 13 libraries;
#   - through rgpu served by CUDA 12's runtime: rgpud --cuda12-lib-dir names
#     the carried libcudart.so.12, which then replays the program's calls;
# both in `compare` mode, whose output must be byte for byte the same; then
# through rgpu in its full mode, which must also print "cuda12: ok" (the
# CUDA 12 layouts rgpu does not convert are refused, not misread).
# BUILD_DIR: a meson build dir or tests/gpu/pack-build.sh's build-gpu.
# Prints one line per check and "cuda12_check: PASS" or "... FAIL"; exits 0
# on pass, 1 on failure, 2 when something to run is missing.
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
prog=$build/tests/cuda12_prog
real12=$build/cuda-12.9/lib
for f in "$prog" "$build/daemon/rgpud" "$build/stubs/libcudart.so.12" "$real12/libcudart.so.12"; do
    [ -e "$f" ] || { echo "cuda12_check: $f is missing (build with -Dcuda12=12.9)"; exit 2; }
done

tag=cuda12_check
# shellcheck source=tests/gpu/check_lib.sh
. "$(dirname "$0")/check_lib.sh"

env -u RGPU_SERVER LD_LIBRARY_PATH="$real12:$cuda_lib" timeout 60 "$prog" compare \
    > "$tmp/native.out" 2> "$tmp/native.err"
check "native run (real libcudart.so.12)" $? "$tmp/native.err"

start_rgpud rgpud
through_rgpu rgpud rgpu compare
check "rgpu run (rgpu's libcudart.so.12, served by the host's CUDA 13)" $? "$tmp/rgpu.err"
diff -u "$tmp/native.out" "$tmp/rgpu.out" > "$tmp/diff"
check "output identical to native" $? "$tmp/diff"
grep -q "libcudart.so.12 is served by the server's libcudart.so.13" "$tmp/rgpu.err"
check "banner names the serving library" $? "$tmp/rgpu.err"
through_rgpu rgpud full full
grep -q '^cuda12: ok$' "$tmp/full.out"
check "full mode through rgpu (refusals of the CUDA 12 layouts)" $? "$tmp/full.err"

# Served by the real CUDA 12 runtime the build carries (rgpud
# --cuda12-lib-dir): the same output as natively, and the banner says so.
start_rgpud rgpud12 --cuda12-lib-dir "$real12"
through_rgpu rgpud12 rgpu12 compare
check "rgpu run served by the real libcudart.so.12 (--cuda12-lib-dir)" $? "$tmp/rgpu12.err"
diff -u "$tmp/native.out" "$tmp/rgpu12.out" > "$tmp/diff12"
check "output identical to native (CUDA 12 runtime on the server)" $? "$tmp/diff12"
grep -q 'CUDA runtime 12[0-9][0-9][0-9],' "$tmp/rgpu12.err" &&
    ! grep -q "is served by the server's libcudart.so.13" "$tmp/rgpu12.err"
check "banner names CUDA 12's runtime as the server's" $? "$tmp/rgpu12.err"
through_rgpu rgpud12 full12 full
grep -q '^cuda12: ok$' "$tmp/full12.out"
check "full mode served by CUDA 12's runtime" $? "$tmp/full12.err"

finish "$tmp/native.out"
