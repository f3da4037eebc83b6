#!/bin/bash
# No session holds rgpud's IPC secret (daemon/ipc.c, docs/security.md
# "CUDA IPC"): a client may read its own session's memory through its
# kernels, and with the secret it could compute the IPC key of every other
# identity (HMAC(secret, "key bob")).  The listener keeps the secret and
# hands each session only what it derived for it.
#
# The test reads the secret from the listener's memory (the static
# daemon_secret, found with nm) -- which also shows that the scan finds it
# where it is -- then searches all readable memory of a live session for
# it in every form an HMAC computation leaves: the secret itself, the key
# XORed with HMAC's inner and outer pads, and those as the big-endian
# words SHA-256 loads.  Over TCP with keys (a session of key 'alice' while
# 'bob' exists) and on a Unix socket (the second of two sessions, forked
# after the listener derived the first one's key).  Needs root, to read
# processes that the sandbox made undumpable.
#
#   ipc-secret.sh RGPUD IPC-PROGRAM FAKEGPU-DIR STUBS-DIR
set -u
rgpud=$1 prog=$2 libdir=$3 stubs=$4
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: reading rgpud's memory needs root"
    exit 77
fi
tmp=$(mktemp -d /tmp/rgpu-ipc-secret.XXXXXX) || exit 1
pids=()
failures=0
cleanup() {
    exec 3>&- 4>&- 5>&- 2>/dev/null
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
wait_for() {    # wait_for TEST...: up to 5 s
    for _ in $(seq 50); do
        test "$@" && return 0
        sleep 0.1
    done
    return 1
}
exported() {    # exported FILE: the IPC program printed its handles there, within 10 s
    for _ in $(seq 100); do
        grep -q '^handles ' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

offset=$(nm "$rgpud" | awk '$3 == "daemon_secret" { print $1 }')
if [ -z "$offset" ]; then
    echo "FAIL rgpud has no symbol daemon_secret: this test looks for it there"
    exit 1
fi
asan_rt=$(ldd "$stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')

# start_rgpud LOG ARGS...: sandboxed, as in production.
start_rgpud() {
    local log=$1
    shift
    LD_LIBRARY_PATH= setsid "$rgpud" --foreground --lib-dir "$libdir" "$@" >"$log" 2>&1 \
        </dev/null &
    pids+=($!)
}

# exporter SERVER KEY FIFO OUT: the IPC program holds a session (and
# exported memory) until its stdin, the fifo, closes.
exporter() {
    LD_PRELOAD=${asan_rt:-${LD_PRELOAD:-}} LD_LIBRARY_PATH="$stubs" RGPU_SERVER="$1" \
        RGPU_KEY_FILE="$tmp/$2.key" RGPU_LOG=warn timeout 60 "$prog" export <"$3" >"$4" 2>&1 &
}

# The sessions of rgpud $1 (its children), one per line.
sessions_of() { ps -o pid= --ppid "$1" | tr -d ' '; }

# scan LISTENER SESSION: "listener N" and "session N", the matches of the
# secret's forms in each; the session's must be 0.
scan() {
    python3 - "$1" "$2" "$offset" <<'EOF'
import os, sys
listener, session, offset = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3], 16)

def regions(pid):
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        path = f[5] if len(f) > 5 else ""
        if "r" in f[1] and not path.startswith("/dev/") and path not in ("[vvar]", "[vsyscall]"):
            yield lo, hi, int(f[2], 16), path

def secret_of(pid):
    exe = os.readlink(f"/proc/{pid}/exe")
    base = next(lo for lo, hi, off, path in regions(pid) if path == exe and off == 0)
    with open(f"/proc/{pid}/mem", "rb", 0) as m:
        m.seek(base + offset)
        return m.read(32)

def forms(s):
    out = [s]
    for pad in (0x36, 0x5C):
        x = bytes(b ^ pad for b in s)
        out += [x, b"".join(x[i:i + 4][::-1] for i in range(0, 32, 4))]
    out.append(b"".join(s[i:i + 4][::-1] for i in range(0, 32, 4)))
    return out

# Regions beyond this are reservations, not data: a sanitizer's shadow
# memory (terabytes, never touched but where it shadows).
HUGE = 64 << 30
CHUNK = 64 << 20

def count(pid, needles):
    n = 0
    with open(f"/proc/{pid}/mem", "rb", 0) as m:
        for lo, hi, off, path in regions(pid):
            if hi - lo > HUGE:
                continue
            tail = b""
            for at in range(lo, hi, CHUNK):
                try:
                    m.seek(at)
                    data = tail + m.read(min(CHUNK, hi - at))
                except OSError:
                    break
                for needle in needles:
                    i = data.find(needle)
                    while i >= 0:
                        n += 1
                        i = data.find(needle, i + 1)
                tail = data[-31:]       # a match across chunks, counted once
    return n

s = secret_of(listener)
if s == bytes(32):
    print("secret-zero")
    sys.exit(0)
needles = forms(s)
print("listener", count(listener, needles))
print("session", count(session, needles))
EOF
}

# judge NAME LISTENER SESSION
judge() {
    local out
    out=$(scan "$2" "$3" 2>&1)
    case "$out" in
    *"listener 0"*|secret-zero*) bad "$1" "the scan did not find the secret in the listener: $out" ;;
    *"session 0"*) ok "$1: the secret in none of its forms in the session (${out//$'\n'/, })" ;;
    *) bad "$1" "the session holds the daemon's secret: $out" ;;
    esac
}

# ---- TCP with keys ------------------------------------------------------------------
for k in alice bob; do
    "$rgpud" --key-dir "$tmp/keys" --new-client-key $k >"$tmp/$k.key" 2>/dev/null
    chmod 600 "$tmp/$k.key"
done
port=$(free_port)
start_rgpud "$tmp/tcp.log" --listen "127.0.0.1:$port" --key-dir "$tmp/keys"
tcp_pid=${pids[-1]}
for _ in $(seq 50); do
    [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && break
    sleep 0.1
done
mkfifo "$tmp/in1"
exporter "127.0.0.1:$port" alice "$tmp/in1" "$tmp/alice.out"
exec 3>"$tmp/in1"
exported "$tmp/alice.out" ||
    { bad "alice exports" "$(cat "$tmp/alice.out" "$tmp/tcp.log")"; exit 1; }
alice=$(sessions_of "$tcp_pid")
[ "$(wc -w <<<"$alice")" = 1 ] || { bad "one session" "sessions: $alice"; exit 1; }
judge "TCP, key alice" "$tcp_pid" "$alice"
exec 3>&-

# ---- Unix socket --------------------------------------------------------------------
sock=$tmp/rgpud.sock
start_rgpud "$tmp/unix.log" --listen "unix:$sock" --group none
unix_pid=${pids[-1]}
wait_for -S "$sock" && sleep 0.3
mkfifo "$tmp/in2" "$tmp/in3"
exporter "unix:$sock" alice "$tmp/in2" "$tmp/first.out"
exec 4>"$tmp/in2"
exported "$tmp/first.out" ||
    { bad "first exporter" "$(cat "$tmp/first.out" "$tmp/unix.log")"; exit 1; }
first=$(sessions_of "$unix_pid")
exporter "unix:$sock" alice "$tmp/in3" "$tmp/second.out"
exec 5>"$tmp/in3"
exported "$tmp/second.out" ||
    { bad "second exporter" "$(cat "$tmp/second.out" "$tmp/unix.log")"; exit 1; }
second=$(sessions_of "$unix_pid" | grep -vx "$first")
[ "$(wc -w <<<"$second")" = 1 ] || { bad "a second session" "sessions: $second"; exit 1; }
judge "Unix socket, second session" "$unix_pid" "$second"
exec 4>&- 5>&-

[ $failures -eq 0 ]
