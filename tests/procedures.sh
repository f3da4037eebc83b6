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
#  - a hand-written procedure ("rgpu.NAME") must be named, by the macro
#    that defines its name (common/rgpu_hand_procs.h), in a client file
#    (stubs/, common/) other than the header defining it.
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

# Hand-written procedures: the macros naming each, then their client users.
hand=0
hand_fail=0
while read -r kind lib name; do
    [ "$kind" = hand ] || continue
    hand=$((hand + 1))
    macros=$(grep -h -o -E "#define +RGPU_H_[A-Z0-9_]+ +\"${name//./\\.}\"" "$src"/common/*.h |
             awk '{ print $2 }')
    found=
    for m in $macros; do
        if grep -l -E "\\b$m\\b" "$src"/stubs/*.c "$src"/stubs/*.h "$src"/common/*.c \
                "$src"/common/*.h | grep -v -q -x "$src/common/rgpu_hand_procs.h"; then
            found=$m
            break
        fi
    done
    if [ -z "$macros" ]; then
        echo "FAIL $lib $name: served, but no macro of common/ names it (RGPU_H_*)"
        hand_fail=1
    elif [ -z "$found" ]; then
        echo "FAIL $lib $name: served, but no client file uses $macros"
        hand_fail=1
    fi
done <<<"$table"
[ "$hand_fail" -eq 0 ] && echo "ok every hand-written procedure rgpud serves ($hand) is named by client code"

[ "$fail" -eq 0 ] && [ "$hand_fail" -eq 0 ]
