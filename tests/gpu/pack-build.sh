#!/bin/bash
# tests/gpu/pack-build.sh [BUILD] [DEST]   -- on the development machine
#
# What tests/gpu/run.sh needs from a build, in the build's layout, without
# object files or meson's state: the device tool carries at most 64 MiB and
# a full build with the static-runtime test programs is larger.  Copies
# daemon/rgpud and the op server's sandbox module, stubs/ (the libraries
# and their links), launcher/rgpu, bench/rgpu-bench and rgpu-delay, the
# test programs of tests/progs and tests/progs/static and tests/devlist and
# tests/multidev (their debug information stripped), into DEST
# (default build-gpu, which git ignores).  Then: run tests/gpu/run.sh DEST.
set -eu
src=${1:-build}
dest=${2:-build-gpu}
[ -x "$src/daemon/rgpud" ] || { echo "pack-build: $src has no daemon/rgpud (build it first)" >&2; exit 2; }
rm -rf "$dest"
mkdir -p "$dest/daemon" "$dest/stubs" "$dest/launcher" "$dest/bench" \
         "$dest/tests/progs/static"
cp -a "$src/daemon/rgpud" "$dest/daemon/"
# The op server's session sandbox (tests/gpu/rgpu_device_check.sh).
[ -f "$src/daemon/librgpu-opsandbox.so" ] && cp -a "$src/daemon/librgpu-opsandbox.so" "$dest/daemon/"
for f in "$src"/stubs/lib*.so*; do
    [ -d "$f" ] || cp -a "$f" "$dest/stubs/"        # not the object folders (*.so.N.p)
done
# The CUDA 12 stubs (linked from stubs/), the CUDA 12 program and the real
# libcudart.so.12 it runs with natively (tests/gpu/cuda12_check.sh).
if [ -d "$src/stubs/cuda12" ]; then
    mkdir -p "$dest/stubs/cuda12" "$dest/cuda-12.9/lib"
    for f in "$src"/stubs/cuda12/lib*.so.*; do
        [ -f "$f" ] && cp -a "$f" "$dest/stubs/cuda12/"     # not the object folders
    done
    cp -a "$src"/cuda-12.9/lib/libcudart.so.12 "$dest/cuda-12.9/lib/"
    strip --strip-debug -o "$dest/tests/cuda12_prog" "$src/tests/cuda12_prog"
fi
# The program built against the stubs' newer CUDA 13 (tests/gpu/minor_check.sh).
if [ -x "$src/tests/minor_prog" ]; then
    strip --strip-debug -o "$dest/tests/minor_prog" "$src/tests/minor_prog"
fi
cp -a "$src/launcher/rgpu" "$dest/launcher/"
for b in rgpu-bench rgpu-delay; do
    [ -x "$src/bench/$b" ] && cp -a "$src/bench/$b" "$dest/bench/"
done
copy_programs() {        # FROM TO: executables only, stripped of debug info
    local f
    for f in "$1"/*; do
        [ -f "$f" ] && [ -x "$f" ] || continue
        strip --strip-debug -o "$2/$(basename "$f")" "$f" 2>/dev/null || cp -a "$f" "$2/"
        chmod +x "$2/$(basename "$f")"
    done
}
copy_programs "$src/tests/progs" "$dest/tests/progs"
# The device programs of tests/gpu/multigpu_check.sh.
for p in devlist multidev; do
    if [ -x "$src/tests/$p" ]; then
        strip --strip-debug -o "$dest/tests/$p" "$src/tests/$p"
    fi
done
copy_programs "$src/tests/progs/static" "$dest/tests/progs/static"
echo "pack-build: $dest: $(du -sh "$dest" | cut -f1)"
