#!/bin/bash
# cudnn-compare.sh [RELEASE]   -- on a machine with PyPI (or the wheels cached)
#
# cuDNN 9 ships one build per CUDA major (nvidia-cudnn-cu12, -cu13) under
# one soname, libcudnn.so.9, which rgpu's stub stands for in both kinds of
# process (docs/cuda12.md).  This compares the two builds of one version,
# pinned in cuda-wheels.lock as RELEASE (default cudnn-9.19): their headers,
# and per library the exported functions and data, the version nodes they
# carry, the libraries they need and the CUDA libraries they name (the ones
# they load at run time by soname).  Prints a report; exits 0 when it could
# compare, whatever it found, 1 when a wheel is missing.
set -eu -o pipefail
release=${1:-cudnn-9.19}
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wheels < <("$here/cuda-wheels.sh" --fetch "$release")
[ "${#wheels[@]}" = 2 ] || { echo "$0: $release pins ${#wheels[@]} wheels, not 2" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-cudnn.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
names=()
for w in "${wheels[@]}"; do
    name=$(basename "$w" | sed 's/^nvidia_cudnn_\(cu[0-9]*\)-.*/\1/')
    names+=("$name")
    mkdir -p "$tmp/$name"
    python3 -m zipfile -e "$w" "$tmp/$name"
done
a=${names[0]} b=${names[1]}
inc_a=$tmp/$a/nvidia/cudnn/include inc_b=$tmp/$b/nvidia/cudnn/include
lib_a=$tmp/$a/nvidia/cudnn/lib lib_b=$tmp/$b/nvidia/cudnn/lib

# defined LIB: "TYPE name@@node" per defined dynamic symbol.
defined() {
    readelf --dyn-syms -W "$1" |
        awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 != "" { print $4, $8 }' | LC_ALL=C sort -u
}
# only_in NAME < SYMBOLS: C names one a line, C++ internals (_Z...) counted.
only_in() {
    local line cxx=0
    while read -r line; do
        case ${line#* } in
        _Z*) cxx=$((cxx + 1)) ;;
        *) echo "    only in $1: $line" ;;
        esac
    done
    [ "$cxx" = 0 ] || echo "    only in $1: $cxx C++ internals (_Z...: template instances, no API)"
}
needed() { readelf -d -W "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' '; }
# The CUDA sonames a library names in its strings: what it dlopens.
cuda_sonames() {
    strings -a "$1" | grep -oE 'lib(cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|cuda)\.so(\.[0-9]+)*' |
        sort -u | tr '\n' ' '
}

echo "cuDNN $release: nvidia-cudnn-$a against nvidia-cudnn-$b"
echo
echo "== headers ($(ls "$inc_a" | wc -l) files in $a, $(ls "$inc_b" | wc -l) in $b)"
if diff -r "$inc_a" "$inc_b" > "$tmp/headers.diff"; then
    echo "identical"
else
    echo "they differ:"
    cat "$tmp/headers.diff"
fi
echo
for lib in "$lib_a"/lib*.so.*; do
    so=$(basename "$lib")
    echo "== $so"
    if [ ! -e "$lib_b/$so" ]; then
        echo "  only in $a"
        continue
    fi
    defined "$lib" > "$tmp/a.syms"
    defined "$lib_b/$so" > "$tmp/b.syms"
    printf '  exports: %d in %s, %d in %s; the same: %s\n' "$(wc -l < "$tmp/a.syms")" "$a" \
        "$(wc -l < "$tmp/b.syms")" "$b" \
        "$(cmp -s "$tmp/a.syms" "$tmp/b.syms" && echo yes || echo no)"
    only_in "$a" < <(comm -23 "$tmp/a.syms" "$tmp/b.syms")
    only_in "$b" < <(comm -13 "$tmp/a.syms" "$tmp/b.syms")
    printf '  version nodes: %s | %s\n' \
        "$(sed -n 's/^[A-Z]* [^@]*@@*//p' "$tmp/a.syms" | sort -u | tr '\n' ' ')" \
        "$(sed -n 's/^[A-Z]* [^@]*@@*//p' "$tmp/b.syms" | sort -u | tr '\n' ' ')"
    printf '  needs: %s| %s\n' "$(needed "$lib")" "$(needed "$lib_b/$so")"
    printf '  CUDA sonames named: %s| %s\n' "$(cuda_sonames "$lib")" "$(cuda_sonames "$lib_b/$so")"
    printf '  size: %d | %d bytes\n' "$(stat -c %s "$lib")" "$(stat -c %s "$lib_b/$so")"
done
for lib in "$lib_b"/lib*.so.*; do
    [ -e "$lib_a/$(basename "$lib")" ] || echo "== $(basename "$lib"): only in $b"
done
