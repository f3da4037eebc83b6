#!/bin/bash
# CUDA IPC handles are only good for the identity they were made for
# (daemon/ipc.c, docs/security.md "CUDA IPC"): over TCP, a process with key
# 'lab' exports memory; another process with key 'lab' opens it and reads
# the contents, one with key 'other' is refused, and so is a process of
# another rgpud with key 'lab'.  The daemons run sandboxed, as in
# production: the fake backend's IPC memory is in /dev/shm under the
# driver's names (tests/fakegpu/ipc.c), which the sandbox lets through.
#
#   ipc-identity.sh RGPUD IPC-PROGRAM FAKEGPU-DIR STUBS-DIR
set -u
rgpud=$1 prog=$2 libdir=$3 stubs=$4
tmp=$(mktemp -d /tmp/rgpu-ipc-id.XXXXXX) || exit 1
pids=()
failures=0
cleanup() {
    exec 3>&- 2>/dev/null
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start_rgpud LOG PORT: a daemon on 127.0.0.1:PORT with the keys of $tmp/keys.
start_rgpud() {
    # Meson puts the stubs on LD_LIBRARY_PATH: rgpud must not load them.
    LD_LIBRARY_PATH= setsid "$rgpud" --foreground --lib-dir "$libdir" --listen "127.0.0.1:$2" \
        --key-dir "$tmp/keys" >"$1" 2>&1 </dev/null &
    pids+=($!)
    for _ in $(seq 50); do
        [ -n "$(ss -Hltn "sport = :$2" 2>/dev/null)" ] && return
        sleep 0.1
    done
}
# A sanitized build (-Db_sanitize=address): the stubs need the ASan runtime
# loaded first, which an nvcc-built program does not do (as run-prog.sh).
asan_rt=$(ldd "$stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
# client KEY PORT ARGS...: the program through rgpu, with that key.
client() {
    local key=$1 port=$2
    shift 2
    LD_PRELOAD=${asan_rt:-${LD_PRELOAD:-}} \
    LD_LIBRARY_PATH="$stubs" RGPU_SERVER="127.0.0.1:$port" RGPU_KEY_FILE="$tmp/$key.key" \
        RGPU_LOG=warn timeout 60 "$prog" "$@"
}

for k in lab other; do
    "$rgpud" --key-dir "$tmp/keys" --new-client-key $k >"$tmp/$k.key" 2>/dev/null
    chmod 600 "$tmp/$k.key"
done
port=$(free_port)
start_rgpud "$tmp/one.log" "$port"
port2=$(free_port)
start_rgpud "$tmp/two.log" "$port2"

# The exporter keeps its memory until its stdin (fd 3 here) closes.
mkfifo "$tmp/in"
client lab "$port" export <"$tmp/in" >"$tmp/export.out" 2>"$tmp/export.err" &
exporter=$!
exec 3>"$tmp/in"
for _ in $(seq 100); do
    grep -q '^handles ' "$tmp/export.out" && break
    sleep 0.1
done
read -r _ mh eh <"$tmp/export.out"
if [ -z "${eh:-}" ]; then
    bad "export" "$(cat "$tmp/export.out" "$tmp/export.err")"
    exit 1
fi
ok "export"

same=$(client lab "$port" try "$mh" "$eh" 2>&1)
[ "$same" = $'memory opened\nevent opened\ncontents match' ] && ok "same key: opened" ||
    bad "same key" "$same"
other=$(client other "$port" try "$mh" "$eh" 2>&1)
[ "$other" = $'memory refused\nevent refused' ] && ok "another key: refused" ||
    bad "another key" "$other"
grep -q "IPC handle not made by this GPU host's rgpud" "$tmp/one.log" &&
    ok "refusal logged" || bad "refusal logged" "$(cat "$tmp/one.log")"
elsewhere=$(client lab "$port2" try "$mh" "$eh" 2>&1)
[ "$elsewhere" = $'memory refused\nevent refused' ] && ok "another rgpud: refused" ||
    bad "another rgpud" "$elsewhere"

exec 3>&-
wait "$exporter" 2>/dev/null
[ $failures -eq 0 ]
