#!/bin/bash
# Runs each libFuzzer harness of a fuzzing build for a bounded time:
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]
#
# BUILD_DIR was set up with -Dfuzzing=true (tests/fuzz/meson.build); nothing
# is built here.  Each harness runs SECONDS from its seed corpus
# (tests/fuzz/corpus/HARNESS, never written to: new inputs go to a scratch
# directory), then one line per harness says its executions and crashes, as
# "ok - HARNESS: ..." or "FAIL - HARNESS: ..." (the lines .ci/run counts).
# Crash inputs are kept in BUILD_DIR/fuzz-artifacts/; reproduce one with
# BUILD_DIR/tests/fuzz/HARNESS FILE.  Exits non-zero when any harness
# crashed.  One line per harness is appended to BUILD_DIR/fuzz-runs.log (or
# $RGPU_FUZZ_LOG).  RGPU_FUZZ_KEEP_GOING=1 runs libFuzzer's fork mode, which
# goes on after a crash and collects them all (for exploring, not for CI).
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD_DIR SECONDS [HARNESS...]" >&2
    exit 2
fi
build=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_frame fuzz_hello fuzz_decode fuzz_dispatch fuzz_image)
log=${RGPU_FUZZ_LOG:-$build/fuzz-runs.log}
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
rev=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)

status=0
for h in "${harnesses[@]}"; do
    exe=$build/tests/fuzz/$h
    if [ ! -x "$exe" ]; then
        echo "FAIL - $h: $exe is missing (meson setup with -Dfuzzing=true, then ninja)"
        status=1
        continue
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-fuzz.XXXXXX") || exit 1
    mkdir -p "$work/corpus"
    touch "$work/stamp"     # artifacts newer than this are this run's
    # Leaks: the dispatch harness keeps the fake backend's state (handles,
    # device memory) across inputs on purpose, as a session keeps it across
    # calls; and a forged size asks the fake backend for terabytes, which it
    # refuses by a NULL from malloc, as a GPU refuses with an error.
    asan=${ASAN_OPTIONS:-}
    [ "$h" = fuzz_dispatch ] && asan=detect_leaks=0:allocator_may_return_null=1${asan:+:$asan}
    # Module images: real cubins and fatbins are tens of KiB.
    max_len=16384
    [ "$h" = fuzz_image ] && max_len=65536
    mode=()
    [ -n "${RGPU_FUZZ_KEEP_GOING:-}" ] && mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    start=$(date +%s)
    ASAN_OPTIONS=$asan UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$exe" "${mode[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
        -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$artifacts/$h-" \
        "$work/corpus" "$here/corpus/$h" >"$work/log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
    [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$work/log" | tail -1 | tr -d '#')
    # A crash, leak, timeout or out-of-memory leaves an artifact behind.
    crashes=$(find "$artifacts" -name "$h-*" -newer "$work/stamp" | wc -l)
    [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
    line="$h: ${execs:-0} executions in ${took} s, $crashes crashes (rev $rev)"
    if [ "$crashes" -eq 0 ]; then
        echo "ok - $line"
    else
        echo "FAIL - $line"
        grep -m 20 -A 12 '^==[0-9]*==ERROR\|^SUMMARY\|runtime error' "$work/log" | head -60
        find "$artifacts" -name "$h-*" -newer "$work/stamp" | sed 's/^/  artifact: /' 
        status=1
    fi
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $line" >>"$log"
    rm -rf "$work"
done
exit $status
