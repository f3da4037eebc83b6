#!/bin/bash
# Golden tests of rgpu-gen: generate from a miniature header, annotation
# file and reference library, and compare every output file with the
# committed copy in tests/codegen/golden/.  Also checks that an unexplained
# parameter stops the generator with file:line.
#   golden.sh RGPU_GEN REFERENCE_LIB [--update]
set -u
gen=$(realpath "$1")
ref=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

# Paths in the output are relative to tests/codegen, so they are stable.
cd "$here"
if ! "$gen" mini.ann root "$ref" libmini.so.1 "$out" 2>"$out/stderr"; then
    echo "FAIL generate: $(cat "$out/stderr")"
    exit 1
fi
rm -f "$out/stderr"
if [ "${3:-}" = "--update" ]; then
    rm -rf golden && mkdir golden && cp "$out"/* golden/
    echo "updated $(ls golden | wc -l) golden files"
    exit 0
fi
for f in golden/*; do
    name=$(basename "$f")
    if diff -u "$f" "$out/$name" >"$out/diff.txt"; then
        echo "ok golden $name"
    else
        echo "FAIL golden $name:"; cat "$out/diff.txt"; fail=1
    fi
done
rm -f "$out/diff.txt"
if [ "$(cd "$out" && ls)" != "$(cd golden && ls)" ]; then
    echo "FAIL the generator's set of output files changed:"
    diff <(cd golden && ls) <(cd "$out" && ls); fail=1
fi

# An unexplained void pointer must stop the build and say where.
if "$gen" bad.ann root "$ref" libmini.so.1 "$out/bad" 2>"$out/bad.err"; then
    echo "FAIL bad.ann: the generator accepted an unexplained void pointer"; fail=1
elif grep -q "mini.h:[0-9]*: miniMemset: parameter 'dst'" "$out/bad.err"; then
    echo "ok unexplained parameter rejected with file:line"
else
    echo "FAIL bad.ann: unexpected message: $(cat "$out/bad.err")"; fail=1
fi
# A device address narrower than 64 bits can be neither checked nor
# recorded by the server: unrefused, it must stop the build too.
if "$gen" narrow.ann root "$ref" libmini.so.1 "$out/narrow" 2>"$out/narrow.err"; then
    echo "FAIL narrow.ann: the generator accepted a 32-bit device address"; fail=1
elif grep -q "mini.h:[0-9]*: miniOldMemset: parameter 'dst' (miniDeviceptr_v1): device address narrower" \
        "$out/narrow.err"; then
    echo "ok 32-bit device address rejected with file:line"
else
    echo "FAIL narrow.ann: unexpected message: $(cat "$out/narrow.err")"; fail=1
fi
# A stream's bytes follow the frame's head: a stream parameter that is not
# the last must stop the build too.
if "$gen" bulk.ann root "$ref" libmini.so.1 "$out/bulk" 2>"$out/bulk.err"; then
    echo "FAIL bulk.ann: the generator accepted a stream parameter that is not the last"; fail=1
elif grep -q "mini_own.h:[0-9]*: rgpu_miniFill.bytes: a stream parameter comes last" \
        "$out/bulk.err"; then
    echo "ok stream parameter not last rejected with file:line"
else
    echo "FAIL bulk.ann: unexpected message: $(cat "$out/bulk.err")"; fail=1
fi
# A `client` function that no client file sends would give the server a
# procedure no stub sends: the generator must refuse it, naming it.
if "$gen" unsent.ann root "$ref" libmini.so.1 "$out/unsent" 2>"$out/unsent.err"; then
    echo "FAIL unsent.ann: the generator served a client function no client file sends"; fail=1
elif grep -q "miniGetCount is annotated client, but no client file sends its procedure (RGPU_MINI_miniGetCount)" \
        "$out/unsent.err"; then
    echo "ok a client function no client file sends rejected"
else
    echo "FAIL unsent.ann: unexpected message: $(cat "$out/unsent.err")"; fail=1
fi
exit $fail
