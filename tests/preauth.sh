#!/bin/bash
# Connections that are not let in yet cannot keep others out, and failed
# authentications are rate-limited (daemon/admission.c, docs/security.md
# "No hangs, no exhaustion, no races").  TCP on loopback, rgpud with its
# default bounds; the hostile peers use other loopback addresses than the
# legitimate client (127.0.0.1), as hosts of their own would.
#
#  - lock-out: a peer without a key at 127.0.0.2 keeps 200 silent
#    connections open, reopening each one rgpud closes; meanwhile a client
#    with its key tries 60 times, 0.1 s apart: every attempt gets in.
#  - failed MACs: a peer at 127.0.0.3 with a wrong key authenticates over
#    and over for 5 s: at most the allowance (10 a minute) and the
#    connections in flight fail at rgpud, the rest are closed before any
#    session starts; the client at 127.0.0.1 still gets in, and the log
#    names the bound.
#  - busy: a second rgpud with --max-startups 2; a peer at 127.0.0.4 holds
#    its startup slots and queue: a client with its key gets a busy
#    welcome naming the bound, and gets in once the peer is gone.
#
#   preauth.sh RGPUD AUTHCLIENT LIB_DIR
set -u
rgpud=$1 client=$2 libdir=$3
tmp=$(mktemp -d /tmp/rgpu-preauth.XXXXXX) || exit 1
pids=()
failures=0
cleanup() {
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

for k in lab other; do
    "$rgpud" --key-dir "$tmp/keys" --new-client-key $k >"$tmp/$k.key" 2>/dev/null
    chmod 600 "$tmp/$k.key"
done
sed 's/ other / lab /' "$tmp/other.key" >"$tmp/wrong.key"     # lab's name, other's secret
chmod 600 "$tmp/wrong.key"

# start_rgpud LOG [ARGS...]: rgpud on a free loopback port with ARGS, its
# address in ADDR once it listens.
start_rgpud() {
    local log=$1 port
    shift
    port=$(free_port)
    ADDR=127.0.0.1:$port
    setsid "$rgpud" --foreground --lib-dir "$libdir" --listen "$ADDR" --key-dir "$tmp/keys" \
        "$@" >"$log" 2>&1 </dev/null &
    pids+=($!)
    for _ in $(seq 50); do
        [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && break
        sleep 0.1
    done
}
start_rgpud "$tmp/rgpud.log"
tcp=$ADDR

# ---- a peer without a key holds connections ---------------------------------------
"$client" hold "$tcp" 127.0.0.2 9 200 >"$tmp/hold.out" &
holder=$!
sleep 1
got=0
for _ in $(seq 60); do
    RGPU_KEY_FILE=$tmp/lab.key timeout 20 "$client" hello "$tcp" | grep -q '^welcome 0 ' &&
        got=$((got + 1))
    sleep 0.1
done
wait "$holder"
echo "# legitimate attempts let in while 127.0.0.2 held connections: $got of 60 ($(cat "$tmp/hold.out"))"
[ "$got" = 60 ] && ok "a peer without a key locks no one out ($got of 60 let in)" ||
    bad "lock-out" "$got of 60 legitimate attempts let in"
grep -q '127.0.0.2: .*(--per-source-startups)' "$tmp/rgpud.log" &&
    ok "the peer's surplus connections logged" ||
    bad "surplus logged" "$(tail -n 5 "$tmp/rgpud.log")"

# ---- a peer with a wrong key tries and tries ----------------------------------------
out=$(RGPU_KEY_FILE=$tmp/wrong.key "$client" hammer "$tcp" 127.0.0.3 5)
echo "# wrong key from 127.0.0.3 for 5 s: $out"
failed=$(sed -n 's/.*auth-failed \([0-9]*\).*/\1/p' <<<"$out")
# The allowance (10), the startups in flight when it ran out (8), and what
# refilled in 5 s (1).
if [ -n "$failed" ] && [ "$failed" -ge 10 ] && [ "$failed" -le 19 ]; then
    ok "failed authentications rate-limited ($failed in 5 s)"
else
    bad "failed authentications" "$out"
fi
grep -q '127.0.0.3: .*(--max-auth-failures)' "$tmp/rgpud.log" &&
    ok "the bound logged" || bad "bound logged" "$(tail -n 5 "$tmp/rgpud.log")"
RGPU_KEY_FILE=$tmp/lab.key "$client" hello "$tcp" | grep -q '^welcome 0 ' &&
    ok "another source still let in" || bad "another source" "refused"

# ---- every startup slot taken: a busy answer, then room again ------------------------
# A second rgpud with 2 startup slots (and 2 waiting): a peer at 127.0.0.4
# holds them with silent connections; a client with its key from 127.0.0.1
# must get a busy welcome that says why, promptly, and get in once the
# peer is gone.
start_rgpud "$tmp/busy.log" --max-startups 2
btcp=$ADDR
"$client" hold "$btcp" 127.0.0.4 4 6 >"$tmp/bhold.out" &
holder=$!
sleep 1
start=$(date +%s%N)
out=$(RGPU_KEY_FILE=$tmp/lab.key timeout 20 "$client" hello "$btcp")
ms=$((($(date +%s%N) - start) / 1000000))
echo "# while 127.0.0.4 held every startup slot: '$out' in $ms ms"
case $out in
    "welcome 7 rgpud has 2 connections that are not let in yet (--max-startups); try again later")
        [ "$ms" -lt 5000 ] && ok "a client finding every slot taken is told so (busy, $ms ms)" ||
            bad "busy answer" "it took $ms ms" ;;
    *) bad "busy answer" "got '$out'" ;;
esac
grep -q 'connections not let in yet, the cap (--max-startups): refusing a client' "$tmp/busy.log" &&
    ok "the busy refusal logged" || bad "busy logged" "$(tail -n 5 "$tmp/busy.log")"
wait "$holder"
got=
for _ in $(seq 30); do
    got=$(RGPU_KEY_FILE=$tmp/lab.key timeout 20 "$client" hello "$btcp")
    case $got in "welcome 0 "*) break ;; esac
    sleep 0.2
done
case $got in
    "welcome 0 "*) ok "let in once the slots are free" ;;
    *) bad "after the peer left" "got '$got'" ;;
esac

[ $failures -eq 0 ] || { echo "---- log ----"; tail -n 30 "$tmp/rgpud.log"; tail -n 10 "$tmp/busy.log"; }
exit $((failures > 0))
