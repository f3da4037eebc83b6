# shellcheck shell=bash
# Helpers for tests/packaging/run.sh and tls.sh (sourced, not run).
#
# Each check prints one line, "ok - WHAT" or "FAIL - WHAT"; finish prints
# "NAME: N passed, N failed" and exits non-zero if anything failed.
# Background processes started with start_bg are ended on exit, and the
# scratch folder $tmp removed (kept with RGPU_TEST_KEEP=1, for debugging).

npass=0
nfail=0
bg_pids=()
tmp=

ok() {
    echo "ok - $*"
    npass=$((npass + 1))
}

fail() {
    echo "FAIL - $*"
    nfail=$((nfail + 1))
}

# check WHAT COMMAND...: ok if the command succeeds.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}

finish() {
    echo "$(basename "$0" .sh): $npass passed, $nfail failed"
    [ "$nfail" -eq 0 ]
    exit
}

# Whatever must not run on (a test that cannot go on): count it and stop.
die() {
    fail "$*"
    finish
}

cleanup_common() {
    local pid
    for pid in "${bg_pids[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null
    done
    for pid in "${bg_pids[@]}"; do
        for _ in $(seq 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    bg_pids=()
    if [ -n "${RGPU_TEST_KEEP:-}" ]; then
        [ -n "$tmp" ] && echo "# RGPU_TEST_KEEP: logs and files kept in $tmp"
    elif [ -n "$tmp" ]; then
        rm -rf "$tmp"
    fi
}

# start_bg LOG COMMAND...: runs the command in its own session (so that
# its process group, children included, can be ended), output to LOG.
# Sets bg_pid.
start_bg() {
    local log=$1
    shift
    setsid "$@" >"$log" 2>&1 </dev/null &
    bg_pid=$!
    bg_pids+=("$bg_pid")
}

# stop_bg PID: ends one process started with start_bg.
stop_bg() {
    kill -TERM -- "-$1" 2>/dev/null
    for _ in $(seq 30); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# A loopback port nobody listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# True once something listens on 127.0.0.1:$1 (from /proc/net/tcp, so that
# no probe connection reaches the listener).
listening() {
    local hex
    hex=$(printf '%04X' "$1")
    grep -Eq "^ *[0-9]+: (0100007F|7F000001):$hex 00000000:0000 0A " /proc/net/tcp
}

# wait_listen PORT PID: up to 10 s for PID to listen on PORT.
wait_listen() {
    for _ in $(seq 100); do
        listening "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# ensure_build DIR: a normal (gpu_tests=true) build in DIR with the example
# program, the stubs, rgpud and the fake GPU backend, made if missing.
ensure_build() {
    local build=$1 src
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$src" >"${tmp:-/tmp}/meson-setup.log" 2>&1 ||
            { cat "${tmp:-/tmp}/meson-setup.log"; return 1; }
    fi
    ninja -C "$build" tests/progs/example daemon/rgpud \
        tests/fakegpu/libcuda.so.1 "tests/fakegpu/libcudart.so.$(cuda_major)" \
        stubs/libcudart.so."$(cuda_major)" stubs/libcuda.so.1 >"${tmp:-/tmp}/ninja.log" 2>&1 ||
        { cat "${tmp:-/tmp}/ninja.log"; return 1; }
}

# The CUDA major version the build uses (the runtime's soname number).
cuda_major() {
    local v
    v=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "${RGPU_TOOLKIT:-/usr/local/cuda}/include/cuda.h")
    echo $((v / 1000))
}

# run_example LOGPREFIX LIBDIR SERVER: runs the example program ($example,
# set by the caller) with the stubs in LIBDIR against SERVER; output in
# LOGPREFIX.out/.err; returns its status.
# shellcheck disable=SC2154
run_example() {
    LD_LIBRARY_PATH=$2 RGPU_SERVER=$3 RGPU_LOG=info \
        timeout -k 5 60 "$example" >"$1.out" 2>"$1.err" </dev/null
}

# True if the client core printed its banner: the program ran through rgpu.
connected() {
    grep -Eq '^rgpu\[[0-9]+\]: info: connected to' "$1.err"
}

show() {
    local f
    for f in "$@"; do
        echo "---- $f ----"
        cat "$f" 2>/dev/null
    done
    echo "---- end ----"
}
