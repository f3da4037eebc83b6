#!/bin/bash
# Builds rgpu and runs the example CUDA program (tests/progs/example.cu,
# built with nvcc -cudart shared) through rgpu against a local rgpud.
# On a machine with an NVIDIA driver rgpud uses the real GPU; without one it
# uses the fake GPU backend of the tests, and says so.
set -eu
cd "$(dirname "$0")"
./setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

if ldconfig -p | grep -q 'libcuda.so.1 '; then
    export RGPU_REAL_GPU=1
    echo "example.sh: rgpud uses this machine's NVIDIA GPU"
else
    echo "example.sh: no NVIDIA driver here: rgpud runs on the FAKE GPU backend (tests/fakegpu)," \
         "which computes on the CPU; on a GPU host the same command uses the real GPU."
fi
exec tests/run-prog.sh "$PWD/build" build/tests/progs/example
