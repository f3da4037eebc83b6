#!/bin/bash
# Runs one integration program through rgpu against a private rgpud:
#
#   run-prog.sh <build-dir> <program> [args...]
#
# Starts <build-dir>/daemon/rgpud on a Unix socket in a private temporary
# directory (rgpud's default kind of address) with the fake GPU backend (<build-dir>/tests/fakegpu), runs the program with the stub
# libraries from <build-dir>/stubs first on LD_LIBRARY_PATH, stops the
# daemon, and exits with the program's status.  The daemon log is printed
# when something fails.  Environment: RGPU_PROG_TIMEOUT (seconds, default
# 100), RGPU_LOG (default info; the check below needs at least info),
# RGPU_PROG_DAEMON_ARGS (more rgpud options, split at spaces),
# RGPU_PROG_DAEMON_LOG (a file that gets a copy of rgpud's log).
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 <build-dir> <program> [args...]" >&2
    exit 2
fi
build=$(cd "$1" && pwd) || exit 2
prog=$2
shift 2
case $prog in */*) ;; *) prog=./$prog ;; esac

rgpud=$build/daemon/rgpud
for f in "$rgpud" "$prog"; do
    if [ ! -x "$f" ]; then
        echo "run-prog: $f is missing or not executable" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-prog.XXXXXX") || exit 1
daemon_pid=
prog_pid=

stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    # rgpud was started with setsid, so its pid is also its process group:
    # signalling the group also ends the session processes it forked.
    kill -TERM -- "-$daemon_pid" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
    daemon_pid=
}
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
    [ -n "$prog_pid" ] && kill -TERM "$prog_pid" 2>/dev/null
    stop_daemon
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT    # meson's timeout or ^C: still clean up

daemon_log() {
    echo "---- rgpud log ----" >&2
    cat "$tmp/rgpud.log" >&2
    echo "---- end of rgpud log ----" >&2
}

# RGPU_REAL_GPU=1: rgpud loads the system's NVIDIA libraries (example.sh on a
# GPU host); otherwise the fake backend.
libargs=(--lib-dir "$build/tests/fakegpu")
[ -n "${RGPU_REAL_GPU:-}" ] && libargs=()
read -ra daemon_args <<<"${RGPU_PROG_DAEMON_ARGS:-}"

# Meson puts the directory of every library a test depends on into
# LD_LIBRARY_PATH: our stubs and the fake backend.  rgpud must find neither
# by soname: a stub libcuda.so.1 would forward the daemon's own calls back
# to it, and with RGPU_REAL_GPU a fake one would stand in for the GPU.
daemon_ldpath=
IFS=: read -ra ld_dirs <<<"${LD_LIBRARY_PATH:-}"
for d in "${ld_dirs[@]}"; do
    case $(readlink -f "$d" 2>/dev/null) in
        "$(readlink -f "$build/stubs")" | "$(readlink -f "$build/tests/fakegpu")") ;;
        *) daemon_ldpath=${daemon_ldpath:+$daemon_ldpath:}$d ;;
    esac
done

# The socket's directory is this script's own (mode 0700): nobody else
# reaches the daemon, and rgpud lets its own user in by peer credentials.
sock=$tmp/rgpud.sock
LD_LIBRARY_PATH=$daemon_ldpath setsid "$rgpud" --foreground --listen "unix:$sock" "${libargs[@]}" "${daemon_args[@]}" \
    >"$tmp/rgpud.log" 2>&1 </dev/null &
daemon_pid=$!
for _ in $(seq 50); do              # up to about 5 s
    [ -S "$sock" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
done
if [ ! -S "$sock" ]; then
    echo "run-prog: rgpud did not come up on $sock" >&2
    daemon_log
    exit 1
fi

# A sanitized build (-Db_sanitize=address): the stubs need the ASan runtime
# loaded before anything else, which an nvcc-built program does not do.
asan_rt=$(ldd "$build/stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
prog_preload=${asan_rt:+$asan_rt${LD_PRELOAD:+:$LD_PRELOAD}}

# In the background, because bash runs traps only once a foreground command
# has finished, while `wait` returns as soon as a signal arrives.
LD_PRELOAD=${prog_preload:-${LD_PRELOAD:-}} \
LD_LIBRARY_PATH="$build/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
RGPU_SERVER="unix:$sock" RGPU_LOG="${RGPU_LOG:-info}" \
    timeout -k 5 "${RGPU_PROG_TIMEOUT:-100}" "$prog" "$@" >"$tmp/out" 2>"$tmp/err" &
prog_pid=$!
wait "$prog_pid"
status=$?
prog_pid=
cat "$tmp/out"
cat "$tmp/err" >&2

failed=0
if [ $status -ne 0 ]; then
    [ $status -eq 124 ] && echo "run-prog: $prog timed out" >&2
    echo "run-prog: $prog exited with status $status" >&2
    failed=1
fi
# The client core prints this banner at RGPU_LOG=info.  Without it the
# program ran on some other libcudart (say, a real GPU's), not through rgpu.
if ! grep -Eq '^rgpu\[[0-9]+\]: info: connected to' "$tmp/err"; then
    echo "run-prog: no 'rgpu[PID]: info: connected to' banner: $prog did not run through rgpu's stubs" >&2
    failed=1
    [ $status -eq 0 ] && status=1
fi
if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "run-prog: rgpud died while $prog ran" >&2
    failed=1
    [ $status -eq 0 ] && status=1
fi

stop_daemon
[ $failed -eq 0 ] || daemon_log
[ -n "${RGPU_PROG_DAEMON_LOG:-}" ] && cp "$tmp/rgpud.log" "$RGPU_PROG_DAEMON_LOG"
exit $status
