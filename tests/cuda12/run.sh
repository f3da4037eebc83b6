#!/bin/bash
# cuda12 test: the CUDA 12 program (cuda12_prog.c, built against the 12.9
# headers and linked to libcudart.so.12) through rgpu on the fake backend.
# Passes when the program says "cuda12: ok", the connection banner says
# which library serves libcudart.so.12, and rgpu's log names each refused
# function with the release and the reason.
#   run.sh BUILD PROGRAM
set -u
build=$1 prog=$2
out=$(RGPU_LOG=info "$(dirname "$0")/../run-prog.sh" "$build" "$prog" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the program exited with $rc"; exit 1; }
for want in 'cuda12: ok' \
    "libcudart.so.12 is served by the server's libcudart.so.13 (version 13000)" \
    'cudaEventElapsedTime_v2 is not supported by rgpu: CUDA 12: not in CUDA 13'; do
    grep -qF "$want" <<< "$out" || { echo "FAIL: no line '$want'"; exit 1; }
done
echo "PASS"
