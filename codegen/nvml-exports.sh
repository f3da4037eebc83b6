#!/bin/sh
# nvml-exports.sh NVML_H OUT
#
# The functions libnvidia-ml.so.1 exports, as NVIDIA's nvml.h declares them:
# every "DECLDIR nvml...(" declaration, whichever macros guard it (the
# unversioned names of NVML_NO_UNVERSIONED_FUNC_DEFS among them).  The
# nvidia-nvml-dev wheel ships the header without a library, so this list is
# the reference the generator and tests/check-symbols.sh compare with.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 NVML_H OUT" >&2; exit 2; }
grep -oE 'DECLDIR[ a-z*]*nvml[A-Za-z0-9_]+ *\(' "$1" |
    sed -E 's/.*(nvml[A-Za-z0-9_]+).*/\1/' | LC_ALL=C sort -u > "$2.tmp"
[ -s "$2.tmp" ] || { echo "$0: no NVML functions in $1" >&2; rm -f "$2.tmp"; exit 1; }
mv "$2.tmp" "$2"
