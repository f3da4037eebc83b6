#!/bin/bash
# Errors of work sent without waiting (docs/synchronisation.md), on the fake
# GPU backend:
#
#   lazy-errors.sh <build-dir> <lazy_errors program>
#
# - lazy mode (the default): the cudaStreamSynchronize after a faulting
#   kernel returns at once, and the next waiting call reports the fault
#   with the native code (cudaErrorIllegalAddress);
# - RGPU_SYNC=strict: the synchronise itself reports it;
# - a stream or cuBLAS handle the process never had, or destroyed, fails at
#   once with the library's code, even where the call would not wait;
# - a program that exits right after the lazy synchronise: rgpu logs the
#   fault no call reported (never lost).
set -u
build=$1
prog=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-lazyerr.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# case NAME ENV... -- ARGS: run the program through rgpu, report.
run_case() {
    local name=$1
    shift
    if env "$@" "$here/run-prog.sh" "$build" "$prog" "$name" >"$tmp/out" 2>"$tmp/err"; then
        echo "ok: $name"
        grep -h '^ok ' "$tmp/out" | sed 's/^/    /'
    else
        echo "FAIL: $name"
        cat "$tmp/out" "$tmp/err" | sed 's/^/    /'
        fail=1
    fi
}
run_case deferred RGPU_SYNC=lazy
run_case strict RGPU_SYNC=strict
run_case unknown-handles RGPU_SYNC=lazy
run_case exit RGPU_SYNC=lazy
if grep -q 'no later call of this thread reported it: cudart status 700' "$tmp/err"; then
    echo "ok: the unreported fault was logged at exit"
else
    echo "FAIL: exit: no log line for the unreported fault"
    sed 's/^/    /' "$tmp/err"
    fail=1
fi
exit $fail
