#!/bin/bash
# The libraries' logging environment variables are the program's: set on
# the client, they make the server's libraries log, and the lines land
# where the client said.
#
#   liblog-env.sh <build-dir> <liblog program>
#
# Runs the program's --env mode through rgpu (tests/run-prog.sh) with
# CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=<dir>/lt.%i.log and
# CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG=<dir>/blas.log, then checks that
# cuBLASLt's file (named with the client's pid) has a cublasLtMatmul line
# and cuBLAS's names cublasSgemm.
set -u
build=$1
prog=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-liblog.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT

CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$dir/lt.%i.log" \
CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG="$dir/blas.log" \
    "$(dirname "$0")/run-prog.sh" "$build" "$prog" --env || exit 1

failed=0
expect() {  # FILE-GLOB PATTERN WHAT
    # shellcheck disable=SC2086  # the glob is meant
    if grep -q "$2" $1 2>/dev/null; then
        echo "ok $3"
    else
        echo "FAIL $3: no line matching '$2' in $1"
        ls -l "$dir" >&2
        failed=1
    fi
}
expect "$dir/lt.[0-9]*.log" "\[Api\]\[cublasLtMatmul\]" "CUBLASLT_LOG_FILE (pid in its name) has the API trace"
expect "$dir/blas.log" "cublasSgemm" "CUBLAS_LOGDEST_DBG has the cuBLAS log"
exit $failed
