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

tmp=$(mktemp -d /tmp/rgpu-cuda12.XXXXXX)
daemon=
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
check() {       # NAME OK(0|1) [DETAIL FILE]
    if [ "$2" = 0 ]; then
        echo "cuda12_check: $1: ok"
    else
        echo "cuda12_check: $1: FAIL"
        [ -n "${3:-}" ] && sed 's/^/    /' "$3" | tail -n 30
        failed=1
    fi
}

env -u RGPU_SERVER LD_LIBRARY_PATH="$real12:$cuda_lib" timeout 60 "$prog" compare \
    > "$tmp/native.out" 2> "$tmp/native.err"
check "native run (real libcudart.so.12)" $? "$tmp/native.err"

LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$build/daemon/rgpud" --foreground -v --listen "unix:$tmp/rgpud.sock" --group none \
    > "$tmp/rgpud.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$tmp/rgpud.sock" ] && break; sleep 0.1; done
[ -S "$tmp/rgpud.sock" ] || { check "rgpud started" 1 "$tmp/rgpud.log"; exit 1; }

through_rgpu() {    # TAG ARGS...
    local tag=$1
    shift
    LD_LIBRARY_PATH="$build/stubs" RGPU_SERVER="unix:$tmp/rgpud.sock" RGPU_LOG=info \
        timeout 60 "$prog" "$@" > "$tmp/$tag.out" 2> "$tmp/$tag.err"
}
through_rgpu rgpu compare
check "rgpu run (rgpu's libcudart.so.12, served by the host's CUDA 13)" $? "$tmp/rgpu.err"
diff -u "$tmp/native.out" "$tmp/rgpu.out" > "$tmp/diff"
check "output identical to native" $? "$tmp/diff"
grep -q "libcudart.so.12 is served by the server's libcudart.so.13" "$tmp/rgpu.err"
check "banner names the serving library" $? "$tmp/rgpu.err"
through_rgpu full
grep -q '^cuda12: ok$' "$tmp/full.out"
check "full mode through rgpu (refusals of the CUDA 12 layouts)" $? "$tmp/full.err"

# Served by the real CUDA 12 runtime the build carries (rgpud
# --cuda12-lib-dir): the same output as natively, and the banner says so.
kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$build/daemon/rgpud" --foreground -v --listen "unix:$tmp/rgpud12.sock" --group none \
    --cuda12-lib-dir "$real12" > "$tmp/rgpud12.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$tmp/rgpud12.sock" ] && break; sleep 0.1; done
through_rgpu12() {  # TAG ARGS...
    local tag=$1
    shift
    LD_LIBRARY_PATH="$build/stubs" RGPU_SERVER="unix:$tmp/rgpud12.sock" RGPU_LOG=info \
        timeout 60 "$prog" "$@" > "$tmp/$tag.out" 2> "$tmp/$tag.err"
}
through_rgpu12 rgpu12 compare
check "rgpu run served by the real libcudart.so.12 (--cuda12-lib-dir)" $? "$tmp/rgpu12.err"
diff -u "$tmp/native.out" "$tmp/rgpu12.out" > "$tmp/diff12"
check "output identical to native (CUDA 12 runtime on the server)" $? "$tmp/diff12"
grep -q 'CUDA runtime 12[0-9][0-9][0-9],' "$tmp/rgpu12.err" &&
    ! grep -q "is served by the server's libcudart.so.13" "$tmp/rgpu12.err"
check "banner names CUDA 12's runtime as the server's" $? "$tmp/rgpu12.err"
through_rgpu12 full12 full
grep -q '^cuda12: ok$' "$tmp/full12.out"
check "full mode served by CUDA 12's runtime" $? "$tmp/full12.err"
cat "$tmp/rgpud12.log" >> "$tmp/rgpud.log"

echo "--- native output"
cat "$tmp/native.out"
if [ $failed = 0 ]; then
    echo "cuda12_check: PASS"
    exit 0
fi
echo "--- rgpud log (end)"
tail -n 40 "$tmp/rgpud.log"
echo "cuda12_check: FAIL"
exit 1
