#!/bin/bash
# cuda-wheels.sh RELEASE DEST
# cuda-wheels.sh --fetch RELEASE      the release's wheels, checked, one path a line
#
# Makes DEST a small CUDA tree of one release, taken from NVIDIA's wheels on
# PyPI at the versions and SHA-256 sums pinned in cuda-wheels.lock:
#   DEST/include/        the headers of every wheel (crt/ included), merged
#   DEST/lib/            libcudart.so.N (small; the GPU check carries it)
#   DEST/ref/SONAME.exports
#                        the real libraries' exports, "TYPE name@@node" per
#                        line: what the stubs must export (the generator and
#                        tests/check-symbols.sh read these lists)
# The big libraries (cuBLASLt is 750 MB) are listed and deleted.
#
# Wheels are kept in a cache (RGPU_WHEEL_CACHE, else
# $XDG_CACHE_HOME/rgpu/wheels, else ~/.cache/rgpu/wheels) and downloaded
# with pip only when the cache lacks them; a wheel whose sum differs from
# the lock is deleted and refused.  DEST is rebuilt only when the lock's
# lines for RELEASE change.
set -eu -o pipefail

fetch_only=
if [ $# -eq 2 ] && [ "$1" = --fetch ]; then
    fetch_only=1
    set -- "$2" ""
fi
if [ $# -ne 2 ]; then
    echo "usage: $0 RELEASE DEST | --fetch RELEASE" >&2
    exit 2
fi
release=$1 dest=$2
here=$(cd "$(dirname "$0")" && pwd)
lock=$here/cuda-wheels.lock
cache=${RGPU_WHEEL_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/rgpu/wheels}

pins=$(awk -v r="$release" '$1 == r { print $2, $3, $4 }' "$lock")
if [ -z "$pins" ]; then
    echo "$0: release '$release' is not in $lock (known: $(awk '/^[0-9]/ { print $1 }' "$lock" | sort -u | tr '\n' ' '))" >&2
    exit 1
fi
if [ -z "$fetch_only" ] && [ -f "$dest/.pins" ] && [ "$(cat "$dest/.pins")" = "$pins" ]; then
    exit 0
fi

# wheel_file PACKAGE VERSION: the cached wheel's path, if any.
wheel_file() {
    local stem=${1//-/_}-$2
    ls "$cache"/"$stem"-*.whl 2>/dev/null | head -n 1
}

# fetch PACKAGE VERSION SHA256: the wheel, in the cache and checked.
fetch() {
    local f
    f=$(wheel_file "$1" "$2")
    if [ -z "$f" ]; then
        echo "cuda-wheels: downloading $1==$2 into $cache" >&2
        mkdir -p "$cache"
        # Any manylinux x86_64 build of this version: the lock's sum decides.
        python3 -m pip download --quiet --no-deps --only-binary=:all: \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
            --python-version 3 --implementation py \
            --dest "$cache" "$1==$2" >&2 ||
            { echo "$0: cannot download $1==$2 from PyPI (no network?): put the wheel in $cache" >&2; exit 1; }
        f=$(wheel_file "$1" "$2")
    fi
    if [ "$(sha256sum < "$f" | cut -d' ' -f1)" != "$3" ]; then
        rm -f "$f"
        echo "$0: $f: SHA-256 differs from $lock: deleted" >&2
        exit 1
    fi
    echo "$f"
}

# unpack WHEEL DIR: its headers and shared libraries (not nvcc's tools).
unpack() {
    python3 - "$1" "$2" <<'PY'
import re, sys, zipfile
wanted = re.compile(r'nvidia/[^/]+/(include/.*[^/]|lib/lib[^/]+\.so\.[0-9.]+)$')
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if wanted.match(name):
            z.extract(name, sys.argv[2])
PY
}

# exports LIB: the defined dynamic symbols, as tests/check-symbols.sh lists them.
exports() {
    readelf --dyn-syms -W "$1" |
        awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 != "" { print $4, $8 }' |
        LC_ALL=C sort -u
}

if [ -n "$fetch_only" ]; then
    while read -r pkg ver sum; do
        fetch "$pkg" "$ver" "$sum"
    done <<< "$pins"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-wheels.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib" "$dest/ref"
while read -r pkg ver sum; do
    whl=$(fetch "$pkg" "$ver" "$sum")
    rm -rf "$tmp/x"
    unpack "$whl" "$tmp/x"
    for inc in "$tmp"/x/nvidia/*/include; do
        [ -d "$inc" ] && cp -R "$inc/." "$dest/include/"
    done
    for lib in "$tmp"/x/nvidia/*/lib/lib*.so.*; do
        [ -f "$lib" ] || continue
        name=$(basename "$lib")
        case $name in
        libcudart.so.*|libcublas.so.*|libcublasLt.so.*)
            exports "$lib" > "$dest/ref/$name.exports" ;;
        esac
        case $name in
        libcudart.so.*) cp "$lib" "$dest/lib/" ;;
        esac
    done
done <<< "$pins"
echo "$pins" > "$dest/.pins"
