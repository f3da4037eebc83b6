#!/bin/bash
# minor test: a program built against the stubs' CUDA 13 headers (13.5)
# meets the fake backend, a CUDA 13.0 runtime (tests/minor/minor_prog.c).
#   - On purpose: the stub exports cudaGraphGetId (CUDA 13.1), the fake
#     runtime does not, and it says it is 13000; a function newer than the
#     server's runtime is refused at the call, with one log line naming the
#     function and both versions, and the session serves on.
#   - A runtime that claims 13.5 (RGPU_FAKEGPU_CUDART_VERSION=13050) but
#     lacks the function: the server's refusal, "lacks it", once.
#   - `compare` (CUDA 13.0's functions only) prints what `full` prints
#     but its verdict.
#   run.sh BUILD PROGRAM
set -u
build=$1 prog=$2
here=$(dirname "$0")
fake=$build/tests/fakegpu
fail() { echo "FAIL: $*"; exit 1; }

exports() { readelf --dyn-syms -W "$1" | awk '$4 == "FUNC" && $7 != "UND" { sub(/@.*/, "", $8); print $8 }'; }
exports "$build/stubs/libcudart.so.13" | grep -qx cudaGraphGetId ||
    fail "the stub does not export cudaGraphGetId: not built from CUDA 13.1 or later"
! exports "$fake/libcudart.so.13" | grep -qx cudaGraphGetId ||
    fail "the fake runtime has cudaGraphGetId: it is no 13.0 runtime"

# once LINE OUTPUT: LINE is in OUTPUT exactly once.
once() {
    local n
    n=$(grep -cF "$1" <<< "$2")
    [ "$n" = 1 ] || fail "'$1' logged $n times, not once"
}

out=$(RGPU_LOG=info "$here/../run-prog.sh" "$build" "$prog" full 2>&1) ||
    { echo "$out"; fail "full mode against a 13.0 runtime"; }
echo "$out"
grep -qx 'minor: ok' <<< "$out" || fail "no 'minor: ok'"
grep -q '^minor: built with CUDA 13[0-9][0-9][0-9], runtime 13000$' <<< "$out" ||
    fail "the server's runtime is not reported as 13000"
once "cudaGraphGetId: the server's libcudart.so.13 is version 13000, and cudaGraphGetId came with version 13010: refused" "$out"
grep -Eq "libcudart\.so\.13 \(version 13[0-9]+\) is served by the server's libcudart\.so\.13, version 13000: what came after it is refused at the call" <<< "$out" ||
    fail "no connection note naming both versions"

out=$(RGPU_FAKEGPU_CUDART_VERSION=13050 RGPU_LOG=info "$here/../run-prog.sh" "$build" "$prog" full 2>&1) ||
    { echo "$out"; fail "full mode against a runtime claiming 13050"; }
echo "$out"
grep -qx 'minor: ok' <<< "$out" || fail "no 'minor: ok' (runtime claiming 13050)"
once "cudaGraphGetId: the server's libcudart.so.13 (version 13050) lacks it" "$out"

# compare mode calls only CUDA 13.0's functions, and full mode's refusals
# change nothing else: the same lines but "minor: ok".  (Native against
# the fake runtime: no, it lacks functions rgpu's client serves itself;
# tests/gpu/minor_check.sh compares with a native run on the GPU host.)
full=$("$here/../run-prog.sh" "$build" "$prog" full 2>/dev/null | grep -vx 'minor: ok')
compare=$("$here/../run-prog.sh" "$build" "$prog" compare 2>/dev/null) ||
    fail "compare mode through rgpu"
diff <(echo "$compare") <(echo "$full") || fail "compare mode differs from full mode"
echo "PASS"
