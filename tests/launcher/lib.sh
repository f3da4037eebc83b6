# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # variables shared with the scripts that source this
# Shared by the launcher tests (sourced): checks, temp dir, helpers.
#
# Expects $build (the build directory, absolute).  Sets $rgpu, $fake,
# $stubs, $tmp.  Each check prints "ok NAME" or "FAIL NAME: why" and the
# script's exit status counts the failures (finish).

rgpu=$build/launcher/rgpu
fake=$build/tests/fakegpu
stubs=$(readlink -f "$build/stubs")
example=$build/tests/progs/example

# A sanitized build (-Db_sanitize=address): the stubs `rgpu run` preloads
# need the ASan runtime in the preload list too.  It cannot come first (the
# launcher puts the stubs in front), which ASan accepts when told; the leak
# check is off for the commands run (ssh, env, sleep), which are not ours.
asan_rt=$(ldd "$build/stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_rt" ]; then
    export LD_PRELOAD=$asan_rt ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0
fi

# The launcher's environment must not already point somewhere.
unset RGPU_SERVER RGPU_LIB_DIR RGPUD RGPUD_LIB_DIR RGPU_SSH_OPTS SSH_AUTH_SOCK
export RGPU_LOG=warn

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-launcher.XXXXXX") || exit 1
failures=0
cleanups=()

# shellcheck disable=SC2317  # called from the EXIT trap
run_cleanups() {
    local c
    for c in "${cleanups[@]}"; do eval "$c"; done
    rm -rf "$tmp"
}
trap run_cleanups EXIT
trap 'exit 143' TERM INT

ok() { echo "ok $1"; }
fail() {
    echo "FAIL $1: $2"
    failures=$((failures + 1))
}

# show FILE: a command's output, indented, after a failure.
show() {
    sed 's/^/    | /' "$1"
}

# expect NAME WANT_STATUS GOT_STATUS OUTFILE [PATTERN...]: the status and
# every (extended regex) pattern in the output.
expect() {
    local name=$1 want=$2 got=$3 out=$4 p
    shift 4
    if [ "$got" != "$want" ]; then
        fail "$name" "exit status $got, wanted $want"
        show "$out"
        return 1
    fi
    for p in "$@"; do
        if ! grep -Eq -- "$p" "$out"; then
            fail "$name" "no /$p/ in the output"
            show "$out"
            return 1
        fi
    done
    ok "$name"
}

# A port nobody listens on right now (a race we accept: tests retry or
# tolerate a collision as a failure message of the same kind).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
        2>/dev/null || echo $((20000 + RANDOM % 40000))
}

# True once something listens on 127.0.0.1:$1 (read from /proc, so that
# no probe connection reaches the listener).
listening() {
    local hex
    hex=$(printf '%04X' "$1")
    grep -Eq "^ *[0-9]+: (0100007F|7F000001):$hex 00000000:0000 0A " /proc/net/tcp
}

# wait_listening PORT PID: up to 10 s, while PID lives.
wait_listening() {
    for _ in $(seq 100); do
        listening "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Processes whose command line contains $1 (no procps needed).
procs_matching() {
    local f
    for f in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' 2>/dev/null <"$f" | grep -F -- "$1" >/dev/null && echo "${f%/cmdline}"
    done
    return 0
}

# gone PID: true once no process PID exists, within 5 s.
gone() {
    for _ in $(seq 50); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# start_rgpud SOCK_VAR: an rgpud on the fake backend, as on a GPU host, on
# a Unix socket in our temporary directory.  Sets the named variable to the
# socket's path and records its cleanup.
start_rgpud() {
    local sock=$tmp/rgpud-$RANDOM.sock pid
    # Not our stubs: meson may have put them on LD_LIBRARY_PATH.
    env -u LD_LIBRARY_PATH -u LD_PRELOAD setsid "$build/daemon/rgpud" \
        --listen "unix:$sock" --lib-dir "$fake" >"$sock.log" 2>&1 </dev/null &
    pid=$!
    cleanups+=("kill -TERM -- -$pid 2>/dev/null; sleep 0.2; kill -KILL -- -$pid 2>/dev/null")
    for _ in $(seq 100); do
        if [ -S "$sock" ]; then
            printf -v "$1" '%s' "$sock"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "cannot start rgpud:" >&2
    cat "$sock.log" >&2
    return 1
}

finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$failures check(s) failed"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
