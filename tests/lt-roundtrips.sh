#!/bin/bash
# cuBLASLt's descriptor churn costs no round trip after warm-up:
#
#   lt-roundtrips.sh <build-dir> <cublaslt program>
#
# Runs tests/progs/cublaslt through rgpu (run-prog.sh) with 4 and with 40
# churn steps (and nothing else) under RGPU_STATS=1 and compares the "waited" counts of every
# cuBLASLt procedure (and rgpu_lt_materialize, which makes descriptors):
# the 36 extra steps (each creating, setting and destroying five
# descriptors, asking the heuristics and running a matmul with a bias vector
# at another address than the step before) must add none.  The descriptor
# functions themselves never reach the network, and a matmul waits only the
# first time for each configuration, whatever its bias pointer: the pointer
# travels with the matmul (rgpu_lt_matmul) instead of making the descriptor
# new.
set -u
build=$1
prog=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-ltrt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# The stats table: "rgpu: WAITED UNWAITED NAME" lines of cuBLASLt procedures.
run() {
    if ! RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" "$1" churn >"$tmp/out.$1" 2>"$tmp/err.$1"; then
        cat "$tmp/out.$1" "$tmp/err.$1" >&2
        echo "lt-roundtrips: $prog $1 failed" >&2
        exit 1
    fi
    awk '$1 == "rgpu:" && $2 ~ /^[0-9]+$/ && $4 ~ /^(cublasLt|rgpu_lt_)/ { print $4, $2, $3 }' \
        "$tmp/err.$1" | sort >"$tmp/stats.$1"
}
run 4
run 40

fail=0
echo "waited/unwaited with 4 and with 40 steps:"
join -a 1 -a 2 -e 0 -o 0,1.2,1.3,2.2,2.3 "$tmp/stats.4" "$tmp/stats.40" | tee "$tmp/joined"
while read -r name w4 u4 w40 u40; do
    case $name in
        cublasLtMatmulDesc[CDS]* | cublasLtMatrixLayout[CDS]* | cublasLtMatmulPreference[CDS]*)
            echo "FAIL: $name went to the server ($w40 waited, $u40 not)"
            fail=1 ;;
    esac
    if [ "$w40" != "$w4" ]; then
        echo "FAIL: $name waited $w4 times with 4 steps, $w40 with 40"
        fail=1
    fi
    if [ "$name" = rgpu_lt_matmul ] && [ "$u40" -le "$u4" ]; then
        echo "FAIL: rgpu_lt_matmul did not run more often without waiting ($u4, $u40)"
        fail=1
    fi
done <"$tmp/joined"
# The churn's matmuls carry a bias pointer: they go as rgpu_lt_matmul.
grep -q '^rgpu_lt_matmul ' "$tmp/joined" || { echo "FAIL: no rgpu_lt_matmul in the stats"; fail=1; }
[ $fail -eq 0 ] && echo "ok: the extra steps cost no cuBLASLt round trip"
exit $fail
