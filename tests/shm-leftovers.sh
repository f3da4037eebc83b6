#!/bin/bash
# CUDA IPC files in /dev/shm do not outlive their session (daemon/listener.c,
# docs/security.md "CUDA IPC"): the driver keeps IPC state in files
# /dev/shm/cuda.shm.* (the fake backend the bytes of exported memory too:
# tests/fakegpu/ipc.c), which its process leaves behind when it ends
# without removing them, crash or not.  The session tells the listener
# each one it creates; the listener removes those still there once the
# session has ended.
#
# A client exports 4 allocations of 64 MiB (and one small one), then
#   - closes cleanly (its session ends at the end of its stream),
#   - is killed with SIGKILL,
#   - keeps waiting while its session is killed with SIGKILL;
# each time no file its session made is left in /dev/shm (the fake
# backend names them cuda.shm.fakegpu-PID-N, PID the session's), and the
# count of /dev/shm entries is printed before and after (other programs
# of the machine may change it: not judged).  rgpud runs sandboxed, as in
# production.
#
#   shm-leftovers.sh RGPUD IPC-PROGRAM FAKEGPU-DIR STUBS-DIR
set -u
rgpud=$1 prog=$2 libdir=$3 stubs=$4
tmp=$(mktemp -d /tmp/rgpu-shm.XXXXXX) || exit 1
pids=()
sessions=()
failures=0
cleanup() {
    exec 3>&- 2>/dev/null
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    # What a failing run left: not the machine's to keep.
    for s in "${sessions[@]}"; do rm -f /dev/shm/cuda.shm.fakegpu-"$s"-*; done
    rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
asan_rt=$(ldd "$stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')

sock=$tmp/rgpud.sock
LD_LIBRARY_PATH= setsid "$rgpud" --foreground --lib-dir "$libdir" --listen "unix:$sock" \
    --group none -v >"$tmp/rgpud.log" 2>&1 </dev/null &
daemon=$!
pids+=($daemon)
for _ in $(seq 50); do
    [ -S "$sock" ] && break
    sleep 0.1
done
sleep 0.3

files_of() { ls /dev/shm | grep -c "^cuda\.shm\.fakegpu-$1-"; }

# run_case NAME HOW: an exporter, ended by HOW (close, kill-client,
# kill-session); then its session's files must be gone within 5 s.
run_case() {
    local name=$1 how=$2 before session client
    before=$(ls -A /dev/shm | wc -l)
    rm -f "$tmp/in"
    mkfifo "$tmp/in"
    LD_PRELOAD=${asan_rt:-${LD_PRELOAD:-}} LD_LIBRARY_PATH="$stubs" RGPU_SERVER="unix:$sock" \
        RGPU_LOG=warn timeout 60 "$prog" export 4 64 <"$tmp/in" >"$tmp/out" 2>&1 &
    client=$!
    exec 3>"$tmp/in"
    for _ in $(seq 100); do
        grep -q '^handles ' "$tmp/out" && break
        sleep 0.1
    done
    session=$(ps -o pid= --ppid "$daemon" | tr -d ' ')
    sessions+=($session)
    if ! grep -q '^exported 4' "$tmp/out" || [ "$(wc -w <<<"$session")" != 1 ]; then
        bad "$name" "no export, or not one session ($session): $(cat "$tmp/out")"
        exec 3>&-
        wait "$client" 2>/dev/null
        return
    fi
    local made
    made=$(files_of "$session")
    case $how in
    close) exec 3>&- ;;
    kill-client) kill -KILL "$client"; exec 3>&- ;;
    kill-session) kill -KILL "$session"; exec 3>&- ;;
    esac
    wait "$client" 2>/dev/null
    for _ in $(seq 50); do
        [ "$(files_of "$session")" = 0 ] && break
        sleep 0.1
    done
    local left
    left=$(files_of "$session")
    echo "# $name: /dev/shm had $before entries, $made of session $session while it" \
         "served, $left of it after; $(ls -A /dev/shm | wc -l) entries now"
    [ "$made" -ge 5 ] || bad "$name" "only $made IPC files made (wanted 5): the test did not export"
    [ "$left" = 0 ] && ok "$name: no file of the session left" ||
        bad "$name" "$left files of session $session left in /dev/shm: $(ls /dev/shm | grep "fakegpu-$session-")"
}

run_case "clean close" close
run_case "client killed" kill-client
run_case "session killed" kill-session

[ $failures -eq 0 ] || { echo "---- log ----"; tail -n 20 "$tmp/rgpud.log"; }
exit $((failures > 0))
