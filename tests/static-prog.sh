#!/bin/bash
# static-prog.sh BUILD SHARED_PROG STATIC_PROG
#
# A program built with the CUDA runtime linked statically (nvcc's default)
# must run through rgpu as its shared-runtime build does: both run against
# a private rgpud on the fake GPU (tests/run-prog.sh), both must succeed,
# and their standard outputs must be identical.
set -u
build=$1 shared=$2 static=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-static.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

"$here/run-prog.sh" "$build" "$shared" >"$tmp/shared.out" 2>"$tmp/shared.err"
shared_rc=$?
"$here/run-prog.sh" "$build" "$static" >"$tmp/static.out" 2>"$tmp/static.err"
static_rc=$?

failed=0
if [ $shared_rc -ne 0 ]; then
    echo "static-prog: the shared-runtime build failed ($shared_rc):"
    cat "$tmp/shared.out" "$tmp/shared.err"
    failed=1
fi
if [ $static_rc -ne 0 ]; then
    echo "static-prog: the static-runtime build failed ($static_rc):"
    cat "$tmp/static.out" "$tmp/static.err"
    failed=1
fi
if ! diff -u "$tmp/shared.out" "$tmp/static.out"; then
    echo "static-prog: the two builds printed different output"
    failed=1
fi
[ $failed -eq 0 ] && echo "static-prog: $(basename "$static"): identical output ($(wc -l <"$tmp/static.out") lines)"
exit $failed
