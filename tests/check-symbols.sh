#!/bin/bash
# check-symbols.sh STUB.so REAL.so
# check-symbols.sh STUB.so REAL.exports
#
# Our stubs must export exactly what the real NVIDIA library exports, with the
# same symbol version nodes: binaries record "cudaMalloc@libcudart.so.13" and
# do not load against a stub that lacks the node.  Extra exports
# are errors too: they would leak our internals into the application.
#
# Compared: every defined dynamic symbol (not UND), as "TYPE name@@node".
# That covers functions (FUNC) and data (OBJECT, e.g. the version node's own
# "libcudart.so.13" ABS entry, which both sides must have).
#
# When REAL has no version nodes at all, names are compared without versions
# and version node definitions are ignored on both sides.  That is libcuda:
# neither the toolkit's stubs/libcuda.so (our reference, 637 functions) nor the
# driver's own libcuda.so.1 (580.159: 682 functions plus cudbg* debugger data,
# all unversioned) has version nodes, so binaries record plain names.
#
# REAL may also be a text file (*.txt) of function names, one a line: the reference
# where NVIDIA ships a header without a library (NVML: the names nvml.h
# declares, codegen/nvml-exports.sh).  Names are then compared unversioned.
#
# Exit: 0 same, 1 different, 2 usage or unreadable file.
set -u -o pipefail   # a readelf failure inside a pipe is an error too

if [ $# -ne 2 ]; then
    echo "usage: $0 STUB.so REAL.so" >&2
    exit 2
fi
stub=$1 real=$2
for f in "$stub" "$real"; do
    if [ ! -r "$f" ]; then
        echo "$0: cannot read $f" >&2
        exit 2
    fi
done

# defined_syms FILE: "TYPE name@@node" per defined dynamic symbol, sorted.
# The Name column is field 8; readelf may append " (N)" (a version index) as
# field 9, which we drop.  A FILE that is not ELF is such a list already
# (codegen/cuda-wheels.sh writes them from the real libraries of a wheel).
defined_syms() {
    if [ "$(head -c 4 "$1")" != $'\x7fELF' ]; then
        LC_ALL=C sort -u "$1"
        return
    fi
    readelf --dyn-syms -W "$1" |
        awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 != "" { print $4, $8 }' |
        LC_ALL=C sort -u
}

# unversioned: strip "@node"/"@@node" from each name.
unversioned() {
    awk '{ n = $2; sub(/@.*/, "", n); print $1, n }' |
        LC_ALL=C sort -u
}

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

defined_syms "$stub" > "$tmp/stub" || exit 2
case $real in
    *.txt)      # a name list
        awk 'NF { print "FUNC", $1 }' "$real" | LC_ALL=C sort -u > "$tmp/real" ;;
    *)          # a library, or an export list of one
        defined_syms "$real" > "$tmp/real" || exit 2 ;;
esac
if [ ! -s "$tmp/real" ]; then
    echo "$0: $real exports no symbols (not an ELF shared library?)" >&2
    exit 2
fi

if ! grep -q '@' "$tmp/real"; then
    echo "note: $real has no symbol versions; comparing plain names"
    # The nodes a versioned stub defines, to drop their ABS entries.
    nodes=$(sed -n 's/^[A-Z]* [^@]*@@\{0,1\}//p' "$tmp/stub" | sort -u)
    for f in stub real; do
        unversioned < "$tmp/$f" |
            awk -v nodes="$nodes" 'BEGIN { split(nodes, a, "\n"); for (i in a) skip["OBJECT " a[i]] = 1 }
                                   !($0 in skip)' > "$tmp/$f.plain"
        mv "$tmp/$f.plain" "$tmp/$f"
    done
fi

LC_ALL=C comm -13 "$tmp/stub" "$tmp/real" > "$tmp/missing"
LC_ALL=C comm -23 "$tmp/stub" "$tmp/real" > "$tmp/extra"
nmiss=$(wc -l < "$tmp/missing")
nextra=$(wc -l < "$tmp/extra")

# report LABEL FILE COUNT: at most 20 lines, then how many more.
report() {
    [ "$3" -eq 0 ] && return
    echo "$1 ($3):"
    head -n 20 "$2" | sed 's/^/  /'
    [ "$3" -gt 20 ] && echo "  ... and $(($3 - 20)) more"
}
report "missing from $stub" "$tmp/missing" "$nmiss"
report "extra in $stub" "$tmp/extra" "$nextra"

nfunc=$(grep -c '^FUNC ' "$tmp/real")
if [ "$nmiss" -eq 0 ] && [ "$nextra" -eq 0 ]; then
    echo "ok: $stub exports the same $nfunc functions as $real"
    exit 0
fi
echo "FAIL: $stub: $nmiss missing, $nextra extra (real library: $nfunc functions)"
exit 1
