#!/bin/bash
# cuda12 test: the CUDA 12 program (cuda12_prog.c, built against the 12.9
# headers and linked to libcudart.so.12) through rgpu on the fake backend.
#   run.sh BUILD PROGRAM            served by the fake's CUDA 13 runtime:
#       the program says "cuda12: ok", the connection banner says which
#       library serves libcudart.so.12, and rgpu's log names each refused
#       function with the release and the reason;
#   run.sh BUILD PROGRAM cuda12     rgpud --cuda12-lib-dir names the fake's
#       CUDA 12 face (tests/fakegpu/cuda12, a libcudart.so.12 saying 12090):
#       the session serves the program with it, and says so;
#   run.sh BUILD PROGRAM required   --cuda12-lib-dir names a folder without
#       CUDA 12's runtime: the session is refused at connection, naming the
#       missing library and the folder.
set -u
build=$1 prog=$2 mode=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
expect() {      # OUTPUT LINE...
    local out=$1
    shift
    for want in "$@"; do
        grep -qF -- "$want" <<< "$out" || fail "no line '$want'"
    done
}

case $mode in
'')
    out=$(RGPU_LOG=info "$(dirname "$0")/../run-prog.sh" "$build" "$prog" 2>&1)
    rc=$?
    echo "$out"
    [ $rc -eq 0 ] || fail "the program exited with $rc"
    expect "$out" 'cuda12: ok' \
        "libcudart.so.12 is served by the server's libcudart.so.13 (version 13000)" \
        'cudaEventElapsedTime_v2 is not supported by rgpu: CUDA 12: not in CUDA 13'
    ;;
cuda12)
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    out=$(RGPU_PROG_DAEMON_ARGS="-v --cuda12-lib-dir $build/tests/fakegpu/cuda12" \
          RGPU_PROG_DAEMON_LOG=$log RGPU_LOG=info \
          "$(dirname "$0")/../run-prog.sh" "$build" "$prog" 2>&1)
    rc=$?
    echo "$out"
    cat "$log"
    [ $rc -eq 0 ] || fail "the program exited with $rc"
    expect "$out" 'cuda12: ok' 'cuda12: 1 device(s), runtime 12090' \
        '(server vm, CUDA runtime 12090,'
    ! grep -q "is served by the server's libcudart.so.13" <<< "$out" ||
        fail "the client says CUDA 13 serves it"
    expect "$(cat "$log")" \
        "a CUDA 12 client: its libcudart.so.12 is served by $build/tests/fakegpu/cuda12/libcudart.so.12"
    ;;
required)
    none=$(mktemp -d)
    trap 'rmdir "$none"' EXIT
    out=$(RGPU_PROG_DAEMON_ARGS="--cuda12-lib-dir $none" RGPU_LOG=info \
          "$(dirname "$0")/../run-prog.sh" "$build" "$prog" 2>&1)
    rc=$?
    echo "$out"
    [ $rc -ne 0 ] || fail "the program ran although the session was refused"
    expect "$out" "refused the session" \
        "the client loaded libcudart.so.12, and this server's CUDA 12 libraries (rgpud --cuda12-lib-dir $none) have no libcudart.so.12"
    ! grep -q 'cuda12: ok' <<< "$out" || fail "the program says ok"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo "PASS"
