#!/bin/bash
# Who may connect to rgpud, refusal by refusal (docs/security.md).
#
#   auth.sh RGPUD AUTHCLIENT LIB_DIR
#
# Unix socket: rgpud's own user (root here) gets in; uid 65534 gets in as a
# member of the allowed group and is refused with a message naming its uid
# and the group otherwise, first by the socket file's mode and then, with the
# file opened to everyone, by rgpud's peer-credential check.  TCP: a
# directory of keys others can read stops rgpud from starting; the right key
# gets in; a wrong key, an unknown key, no key and a replayed auth are
# refused; a client refuses a fake server's proof and, without
# RGPU_INSECURE_TCP=1, a TCP server that asks for no key; another build's
# table digest (of a CUDA library or the client core's own) and a
# protocol-1 hello get RGPU_EVERSION with both versions.
set -u
rgpud=$1 client=$2 libdir=$3
tmp=$(mktemp -d /tmp/rgpu-auth.XXXXXX) || exit 1
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

# expect NAME OUTPUT REGEX...: every regex matches OUTPUT.
expect() {
    local name=$1 out=$2
    shift 2
    for re in "$@"; do
        if ! grep -Eq -- "$re" <<<"$out"; then
            bad "$name" "'$out' lacks /$re/"
            return
        fi
    done
    ok "$name"
}

# start_rgpud LOG ARGS...: in the background, in a process group of its own.
start_rgpud() {
    local log=$1
    shift
    setsid "$rgpud" --foreground --lib-dir "$libdir" "$@" >"$log" 2>&1 </dev/null &
    pids+=($!)
}

wait_for() {    # wait_for TEST...: up to 5 s
    for _ in $(seq 50); do
        test "$@" && return 0
        sleep 0.1
    done
    return 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

as_nobody() {   # as_nobody [--groups G | --clear-groups] CMD...
    local groups=$1
    shift
    setpriv --reuid 65534 --regid 65534 $groups -- "$@"
}

# ---- Unix socket: peer credentials ------------------------------------------------
chmod 0711 "$tmp"
mkdir -m 0711 "$tmp/u"
sock=$tmp/u/rgpud.sock
start_rgpud "$tmp/unix.log" --listen "unix:$sock" --group 4242 -v -v
wait_for -S "$sock" || { cat "$tmp/unix.log"; echo "FAIL rgpud did not start"; exit 1; }

mode=$(stat -c '%a %g' "$sock")
[ "$mode" = "660 4242" ] && ok "socket mode 0660, group 4242" || bad "socket mode" "$mode"
expect "own user (root) let in" "$("$client" hello "unix:$sock")" '^welcome 0 ' 'uid 0'
expect "uid 65534 in the allowed group let in" \
    "$(as_nobody "--groups 4242" "$client" hello "unix:$sock")" '^welcome 0 ' 'uid 65534'
expect "uid 65534 outside the group: the socket's mode" \
    "$(as_nobody --clear-groups "$client" hello "unix:$sock")" '^error ' 'Permission denied'
chmod 0666 "$sock"
expect "uid 65534 outside the group: peer credentials" \
    "$(as_nobody --clear-groups "$client" hello "unix:$sock")" \
    "^welcome 9 uid 65534 is not in group 4242"
grep -q "refusing a client: uid 65534 is not in group 4242" "$tmp/unix.log" &&
    ok "refusal logged" || bad "refusal logged" "$(cat "$tmp/unix.log")"
# A session that lets its client in loads the CUDA libraries (rgpud -v -v
# logs each); one that refuses it never does.
refused=$(sed -n 's/^rgpud\[\([0-9]*\)\]: warning: refusing a client: uid 65534.*/\1/p' "$tmp/unix.log")
if [ -n "$refused" ] && grep -q "^rgpud\[[0-9]*\]: debug: loaded" "$tmp/unix.log" &&
    ! grep -q "^rgpud\[$refused\]: debug: loaded" "$tmp/unix.log"; then
    ok "a refused session loads no CUDA library"
else
    bad "a refused session loads no CUDA library" "session ${refused:-?}: $(grep -c loaded "$tmp/unix.log") loads"
fi
expect "protocol-1 hello gets a welcome it can read" "$("$client" proto1 "unix:$sock")" \
    '^welcome 6 ' 'server speaks protocol [2-9]' 'protocol 1'
expect "another build's table" "$("$client" digest "unix:$sock")" \
    '^welcome 6 library cudart differs' 'rgpu [0-9.]+'
expect "another build's table of the client core's own procedures" \
    "$("$client" digest-rgpu "unix:$sock")" '^welcome 6 library rgpu differs' 'rgpu [0-9.]+'
expect "a library of a newer major" "$("$client" newer "unix:$sock")" \
    "^welcome 6 the client \\(authclient\\) loaded libcudart\\.so\\.99, newer than this server's libcudart\\.so\\.[0-9]+"

# A second rgpud on a live socket refuses; a regular file is never removed.
"$rgpud" --foreground --lib-dir "$libdir" --listen "unix:$sock" >"$tmp/second.log" 2>&1
expect "second rgpud on a live socket" "$(cat "$tmp/second.log")" 'another rgpud answers'
echo keep >"$tmp/u/file"
"$rgpud" --foreground --listen "unix:$tmp/u/file" >"$tmp/file.log" 2>&1
expect "a regular file is not replaced" "$(cat "$tmp/file.log"; cat "$tmp/u/file")" \
    'is not a socket' '^keep$'

# --group none: nobody but rgpud's user and root.
sock2=$tmp/u/none.sock
start_rgpud "$tmp/none.log" --listen "unix:$sock2" --group none
wait_for -S "$sock2" || bad "rgpud --group none" "$(cat "$tmp/none.log")"
[ "$(stat -c '%a' "$sock2")" = 600 ] && ok "--group none: mode 0600" || bad "mode 0600" ""
chmod 0666 "$sock2"
expect "--group none refuses uid 65534" \
    "$(as_nobody "--groups 4242" "$client" hello "unix:$sock2")" \
    "^welcome 9 uid 65534 is not rgpud's user"

# A stale socket (its rgpud killed) is replaced.
kill -KILL -- "-${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null
start_rgpud "$tmp/stale.log" --listen "unix:$sock2" --group none
wait_for -S "$sock2" && sleep 0.3
expect "stale socket replaced" "$("$client" hello "unix:$sock2")" '^welcome 0 '

# ---- TCP: keys --------------------------------------------------------------------
keys=$tmp/keys
"$rgpud" --key-dir "$keys" --new-client-key lab >"$tmp/lab.key" 2>"$tmp/keygen.log" ||
    bad "--new-client-key" "$(cat "$tmp/keygen.log")"
chmod 600 "$tmp/lab.key"
[ "$(stat -c '%a' "$keys") $(stat -c '%a' "$keys/lab")" = "700 600" ] &&
    ok "key directory 0700, key file 0600" || bad "key modes" "$(ls -la "$keys")"
"$rgpud" --key-dir "$keys" --new-client-key other >"$tmp/other.key" 2>/dev/null
chmod 600 "$tmp/other.key"
# The wrong key: a key named lab with other's secret.
sed 's/ other / lab /' "$tmp/other.key" >"$tmp/wrong.key"
chmod 600 "$tmp/wrong.key"
printf 'rgpu-key-1 ghost %064d\n' 0 >"$tmp/ghost.key"
chmod 600 "$tmp/ghost.key"

port=$(free_port)
chmod 0755 "$keys"
"$rgpud" --foreground --listen "127.0.0.1:$port" --key-dir "$keys" >"$tmp/open.log" 2>&1
expect "key directory readable by others: refused" "$(cat "$tmp/open.log")" \
    'refusing to start' 'mode 0755'
chmod 0700 "$keys"
chmod 0640 "$keys/other"
"$rgpud" --foreground --listen "127.0.0.1:$port" --key-dir "$keys" >"$tmp/open.log" 2>&1
expect "key file readable by the group: refused" "$(cat "$tmp/open.log")" 'refusing to start'
chmod 0600 "$keys/other"
"$rgpud" --foreground --listen "127.0.0.1:$port" --key-dir "$tmp/nokeys" >"$tmp/open.log" 2>&1
expect "TCP without a key directory: refused" "$(cat "$tmp/open.log")" 'TCP needs client keys'

start_rgpud "$tmp/tcp.log" --listen "127.0.0.1:$port" --key-dir "$keys"
wait_for -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" || sleep 1
tcp=127.0.0.1:$port
expect "right key" "$(RGPU_KEY_FILE=$tmp/lab.key "$client" hello "$tcp")" "^welcome 0 key 'lab'"
expect "wrong key" "$(RGPU_KEY_FILE=$tmp/wrong.key "$client" hello "$tcp")" \
    "^welcome 9 authentication failed for key 'lab'"
expect "unknown key" "$(RGPU_KEY_FILE=$tmp/ghost.key "$client" hello "$tcp")" \
    "^welcome 9 authentication failed for key 'ghost'"
expect "no key" "$(RGPU_KEY_FILE=$tmp/absent.key "$client" hello "$tcp")" \
    '^welcome 9 this server requires a key: set RGPU_KEY_FILE' 'absent.key'
expect "replayed auth" "$(RGPU_KEY_FILE=$tmp/lab.key "$client" replay "$tcp")" \
    "^welcome 9 authentication failed for key 'lab'"
chmod 644 "$tmp/lab.key"
expect "client key readable by others: not used" \
    "$(RGPU_KEY_FILE=$tmp/lab.key "$client" hello "$tcp")" '^welcome 9 ' 'chmod 600'
chmod 600 "$tmp/lab.key"
expect "another build's table over TCP" "$(RGPU_KEY_FILE=$tmp/lab.key "$client" digest "$tcp")" \
    '^welcome 6 library cudart differs'

# A fake server: challenges, says OK, but cannot prove it holds the key.
"$client" fake "$tmp/u/fake.sock" &
wait_for -S "$tmp/u/fake.sock"
expect "fake server's proof refused" \
    "$(RGPU_KEY_FILE=$tmp/lab.key "$client" hello "unix:$tmp/u/fake.sock")" \
    "^refused the server did not prove that it holds key 'lab'"

# --insecure-tcp-no-auth: said loudly; clients must opt in as well.
port2=$(free_port)
start_rgpud "$tmp/insecure.log" --listen "127.0.0.1:$port2" --insecure-tcp-no-auth
wait_for -n "$(ss -Hltn "sport = :$port2" 2>/dev/null)" || sleep 1
expect "insecure TCP warned" "$(cat "$tmp/insecure.log")" 'WITHOUT AUTHENTICATION'
expect "client refuses a TCP server that asks for no key" \
    "$("$client" hello "127.0.0.1:$port2")" '^refused .*RGPU_INSECURE_TCP=1'
expect "client opts in to insecure TCP" \
    "$(RGPU_INSECURE_TCP=1 "$client" hello "127.0.0.1:$port2")" '^welcome 0 no authentication'

[ $failures -eq 0 ] || { echo "---- logs ----"; tail -n 20 "$tmp"/*.log; }
exit $((failures > 0))
