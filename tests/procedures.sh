#!/bin/bash
# server-procedures: rgpud serves no procedure that no client sends
# (docs/security.md, "Procedures").  A procedure no stub sends is only a
# way for a hostile client to reach the real libraries unchecked (a file
# path for cuLibraryLoadFromFile, skipping the image checks).
#
#   procedures.sh RGPUD SOURCE_ROOT STUBS_BUILD_DIR
#
# Compares rgpud's own table (rgpud --procedures) with what the client can
# send:
#  - a generated procedure must be in the generator's list of senders
#    (STUBS_BUILD_DIR/LIB-sent.txt, written from the annotations and the
#    client's code), and that sender must send it now: the generated stub
#    names it (LIB_client.c), or the client file named still does
#    (RGPU_LIB_NAME, or rgpu_NAME( for rgpu's own procedures), so that an
#    edit of a stub since the tables were generated shows;
#  - nothing else is served: every procedure is in the codec's tables.
# Prints "ok ..." or "FAIL ..." per check; exits non-zero on any failure.
set -u
rgpud=$1
src=$(cd "$2" && pwd)
gen=$(cd "$3" && pwd)
fail=0

table=$("$rgpud" --procedures) || { echo "FAIL rgpud --procedures"; exit 1; }
[ -n "$table" ] || { echo "FAIL rgpud --procedures listed nothing"; exit 1; }

upper() { echo "$1" | tr '[:lower:]' '[:upper:]'; }

# A file of the client's sources naming procedure name of library lib.
sends() {
    local lib=$1 name=$2 file=$3
    grep -q -E "\\bRGPU_$(upper "$lib")_${name}\\b" "$file" ||
        { [[ $name == rgpu_* ]] && grep -q -E "\\b${name}\\(" "$file"; }
}

# Who sends what, as the generator found it; what the generated stubs name.
declare -A sender stubbed
for list in "$gen"/*-sent.txt; do
    lib=$(basename "$list" -sent.txt)
    while read -r name who; do
        sender[$lib/$name]=$who
    done <"$list"
    for name in $(grep -o -E "\\bRGPU_$(upper "$lib")_[A-Za-z0-9_]+" "$gen/${lib}_client.c" |
                  sed "s/^RGPU_$(upper "$lib")_//"); do
        stubbed[$lib/$name]=1
    done
done

generated=0
while read -r kind lib name; do
    [ "$kind" = generated ] || continue
    generated=$((generated + 1))
    who=${sender[$lib/$name]:-}
    if [ -z "$who" ] || [ "$who" = none ]; then
        echo "FAIL $lib $name: served, but no client sends it ($lib-sent.txt)"
        fail=1
    elif [ "$who" = generated ]; then
        [ -n "${stubbed[$lib/$name]:-}" ] ||
            { echo "FAIL $lib $name: served, said to be sent by its generated stub, which does not"; fail=1; }
    elif ! sends "$lib" "$name" "$src/$who"; then
        echo "FAIL $lib $name: served, said to be sent by $who, which no longer does"
        fail=1
    fi
done <<<"$table"
[ "$fail" -eq 0 ] && echo "ok every generated procedure rgpud serves ($generated) is sent by a client stub"

# Every procedure is declared in the tables and marshalled by the codec:
# rgpud lists nothing else.
others=$(awk '$1 != "generated"' <<<"$table")
if [ -n "$others" ]; then
    echo "FAIL rgpud serves procedures outside the codec's tables:"
    echo "$others" | sed 's/^/  /'
    fail=1
else
    echo "ok rgpud serves no procedure outside the codec's tables"
fi

[ "$fail" -eq 0 ]
