#!/bin/bash
# rgpu-gen --compare: two minor releases of the miniature header.  A newer
# release that takes reserved bytes for a field passes the same bytes (the
# report says what it added); one that moves or retypes an older field
# stops the generator, naming the function.
#   compare.sh RGPU_GEN REFERENCE_LIB
set -u
gen=$(realpath "$1")
ref=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# release NAME 'FIELDS': a copy of root/ whose struct miniProps holds FIELDS.
release() {
    mkdir -p "$tmp/$1/include"
    sed "s/^struct miniProps {.*/struct miniProps { $2 };/" "$here/root/include/mini.h" \
        > "$tmp/$1/include/mini.h"
    grep -qF "$2" "$tmp/$1/include/mini.h" || { echo "FAIL: no struct miniProps to edit"; exit 1; }
}
release old 'char name[32]; int major, minor; size_t mem; int reserved[4];'
release extended 'char name[32]; int major, minor; size_t mem; int clock; int reserved[3];'
release moved 'char name[32]; int major; short minor; size_t mem; int reserved[4];'

cd "$here"
if "$gen" --compare mini.ann "$tmp/extended" "$ref" 1.1 "$tmp/old" "$ref" 1.0 \
        "$tmp/report.txt" 2> "$tmp/err"; then
    if grep -q 'miniGetProps .*extended, the same bytes: .*adds clock$' "$tmp/report.txt" &&
       grep -q 'miniSetProps .*adds clock$' "$tmp/report.txt"; then
        echo "ok a field in reserved bytes is an extension, reported"
    else
        echo "FAIL: the report does not name the added field"; cat "$tmp/report.txt"; fail=1
    fi
else
    echo "FAIL: a compatible extension stopped the generator: $(cat "$tmp/err")"; fail=1
fi
if "$gen" --compare mini.ann "$tmp/moved" "$ref" 1.1 "$tmp/old" "$ref" 1.0 \
        "$tmp/report.txt" 2> "$tmp/err"; then
    echo "FAIL: a retyped field passed"; fail=1
elif grep -q 'miniGetProps: .*misread it' "$tmp/err"; then
    echo "ok a retyped field stops the generator, naming the function"
else
    echo "FAIL: no message naming miniGetProps: $(cat "$tmp/err")"; fail=1
fi
exit $fail
