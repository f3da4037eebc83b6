#!/bin/bash
# The TLS mode on loopback, with real stunnel4 and the configuration files
# the packages ship (packaging/stunnel/):
#
#   tests/packaging/tls.sh [BUILD-DIR]
#
#   example program -> client stunnel -> TLS -> server stunnel -> rgpud
#
# Certificates come from packaging/stunnel/rgpu-tls-certs.sh: an rgpu CA
# with a server and a client certificate, and a second, foreign CA.  The
# server and client stunnel configurations are the shipped examples with
# only ports and certificate paths changed.  Checks that the example
# program runs through the tunnel, and that the connection is refused,
# without reaching rgpud, for a client with no certificate, a client with
# a certificate of the foreign CA, a client that does not trust the
# server's CA, and a client that expects another host name.
#
# rgpud, the stubs, the example program and the fake GPU backend come from
# the normal build in BUILD-DIR (default: build/; made when missing).
# Prints "ok - ..." or "FAIL - ..." per check and exits non-zero if any
# failed.
# Checks run through `bash -c '...' _ ARGS` and helper functions called
# through `check`: shellcheck sees neither.
# shellcheck disable=SC2016,SC2317
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/packaging/common.sh
. "$src/tests/packaging/common.sh"

build=${1:-$src/build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-tlstest.XXXXXX")
trap cleanup_common EXIT
trap 'exit 143' TERM INT

stunnel=$(command -v stunnel4 || command -v stunnel) || die "stunnel4 is not installed"
command -v openssl >/dev/null || die "openssl is not installed"
ensure_build "$build" || die "a normal build in $build has the example program and the fake GPU backend"
example=$build/tests/progs/example
examples=$src/packaging/stunnel

# ---- certificates -----------------------------------------------------------
pki=$tmp/pki
foreign=$tmp/foreign
certs=$examples/rgpu-tls-certs.sh
if sh "$certs" ca "$pki" >/dev/null && sh "$certs" server "$pki" gpuhost.example.org >/dev/null &&
   sh "$certs" client "$pki" alice >/dev/null &&
   sh "$certs" ca "$foreign" >/dev/null && sh "$certs" client "$foreign" mallory >/dev/null; then
    ok "rgpu-tls-certs.sh makes the CA, server and client certificates"
else
    die "rgpu-tls-certs.sh makes the CA, server and client certificates"
fi
check "the certificates verify against the rgpu CA, the foreign one does not" \
    bash -c 'openssl verify -CAfile "$1/ca.crt" "$1/server.crt" "$1/alice.crt" >/dev/null &&
             ! openssl verify -CAfile "$1/ca.crt" "$2/mallory.crt" >/dev/null 2>&1' _ "$pki" "$foreign"

# ---- configurations, from the shipped examples --------------------------------
p_rgpud=$(free_port)
p_server=$(free_port)
# sub FILE PATTERN REPLACEMENT: sed s|PATTERN|REPLACEMENT| that must match.
sub() {
    grep -q -- "$2" "$1" || { echo "  no line matching '$2' in $1"; return 1; }
    sed -i "s|$2|$3|" "$1"
}

server_conf=$tmp/server.conf
cp "$examples/rgpud-tls-server.conf" "$server_conf"
# The test runs as whoever runs it, not as stunnel4.
if sed -i '/^setuid = /d; /^setgid = /d' "$server_conf" &&
   sub "$server_conf" '^accept = 9714$' "accept = 127.0.0.1:$p_server" &&
   sub "$server_conf" '^connect = 127.0.0.1:9713$' "connect = 127.0.0.1:$p_rgpud" &&
   sub "$server_conf" '/etc/stunnel/rgpu/server.crt' "$pki/server.crt" &&
   sub "$server_conf" '/etc/stunnel/rgpu/server.key' "$pki/server.key" &&
   sub "$server_conf" '/etc/stunnel/rgpu/ca.crt' "$pki/ca.crt" &&
   grep -qx 'verifyChain = yes' "$server_conf"; then
    ok "server stunnel configuration from rgpud-tls-server.conf"
else
    die "server stunnel configuration from rgpud-tls-server.conf"
fi

# The client example's [rgpu] section, then variants of it in more
# sections of the same stunnel, one local port each.
client_conf=$tmp/client.conf
cp "$examples/rgpu-tls-client.conf" "$client_conf"
if sed -i '/^setuid = /d; /^setgid = /d' "$client_conf" &&
   sub "$client_conf" '^connect = gpuhost.example.org:9714$' "connect = 127.0.0.1:$p_server" &&
   sub "$client_conf" '/etc/stunnel/rgpu/client.crt' "$pki/alice.crt" &&
   sub "$client_conf" '/etc/stunnel/rgpu/client.key' "$pki/alice.key" &&
   sub "$client_conf" '/etc/stunnel/rgpu/ca.crt' "$pki/ca.crt" &&
   grep -qx 'checkHost = gpuhost.example.org' "$client_conf" &&
   grep -qx 'accept = 127.0.0.1:9713' "$client_conf"; then
    ok "client stunnel configuration from rgpu-tls-client.conf"
else
    die "client stunnel configuration from rgpu-tls-client.conf"
fi
# The example's global part, then its [rgpu] section once per variant
# (not as itself: it would listen on 9713).
section=$(sed -n '/^\[rgpu\]$/,$p' "$client_conf")
sed -i '/^\[rgpu\]$/,$d' "$client_conf"
declare -A port
# variant NAME SED-SCRIPT: a copy of [rgpu] as [NAME], changed by the script.
variant() {
    port[$1]=$(free_port)
    printf '\n%s\n' "$section" | sed -e "s|^\[rgpu\]$|[$1]|" \
        -e "s|^accept = 127.0.0.1:9713$|accept = 127.0.0.1:${port[$1]}|" -e "$2" >>"$client_conf"
}
variant good ''
variant nocert '/^cert = /d; /^key = /d'
variant wrongcert "s|^cert = .*|cert = $foreign/mallory.crt|; s|^key = .*|key = $foreign/mallory.key|"
variant wrongca "s|^CAfile = .*|CAfile = $foreign/ca.crt|"
variant wronghost 's|^checkHost = .*|checkHost = otherhost.example.org|'

# ---- a client key: behind stunnel rgpud listens on TCP, which needs one ------
# (TLS decides which machines reach rgpud; the key, which client may use it.)
if env LD_LIBRARY_PATH= "$build/daemon/rgpud" --key-dir "$tmp/keys" --new-client-key alice \
        >"$tmp/alice.key" 2>"$tmp/keygen.log" && chmod 600 "$tmp/alice.key"; then
    ok "rgpud --new-client-key alice"
else
    show "$tmp/keygen.log"
    die "rgpud --new-client-key alice"
fi
export RGPU_KEY_FILE=$tmp/alice.key

# ---- start rgpud and both stunnels --------------------------------------------
start_bg "$tmp/rgpud.log" env LD_LIBRARY_PATH= "$build/daemon/rgpud" \
    --listen "127.0.0.1:$p_rgpud" --key-dir "$tmp/keys" --lib-dir "$build/tests/fakegpu" -v
rgpud_pid=$bg_pid
start_bg "$tmp/server-stunnel.log" "$stunnel" "$server_conf"
server_pid=$bg_pid
start_bg "$tmp/client-stunnel.log" "$stunnel" "$client_conf"
client_pid=$bg_pid
up=1
wait_listen "$p_rgpud" "$rgpud_pid" || up=0
wait_listen "$p_server" "$server_pid" || up=0
for name in "${!port[@]}"; do
    wait_listen "${port[$name]}" "$client_pid" || up=0
done
if [ $up -eq 1 ]; then
    ok "rgpud, server stunnel and client stunnel listen on loopback"
else
    show "$server_conf" "$client_conf" "$tmp/rgpud.log" "$tmp/server-stunnel.log" "$tmp/client-stunnel.log"
    die "rgpud, server stunnel and client stunnel listen on loopback"
fi

sessions() {
    grep -c 'info: session [0-9]* started' "$tmp/rgpud.log"
}

# ---- the good path ------------------------------------------------------------
if run_example "$tmp/good" "$build/stubs" "127.0.0.1:${port[good]}" && connected "$tmp/good"; then
    ok "example program runs through client stunnel -> server stunnel -> rgpud"
else
    show "$tmp/good.out" "$tmp/good.err" "$tmp/rgpud.log" "$tmp/server-stunnel.log" "$tmp/client-stunnel.log"
    fail "example program runs through client stunnel -> server stunnel -> rgpud"
fi
check "rgpud saw that session" test "$(sessions)" -ge 1

# The manual check of docs/tls.md: the handshake alone, with openssl.
check "openssl s_client with the client certificate: Verification: OK" \
    bash -c 'openssl s_client -connect "127.0.0.1:$1" -CAfile "$2/ca.crt" -cert "$2/alice.crt" \
                 -key "$2/alice.key" -verify_hostname gpuhost.example.org -brief </dev/null 2>&1 |
             grep -q "^Verification: OK"' _ "$p_server" "$pki"
check "openssl s_client without a certificate: the server answers 'certificate required'" \
    bash -c 'timeout 10 openssl s_client -connect "127.0.0.1:$1" -CAfile "$2/ca.crt" \
                 -verify_hostname gpuhost.example.org -brief -ign_eof </dev/null 2>&1 |
             grep -q "alert certificate required"' _ "$p_server" "$pki"

# ---- refusals -------------------------------------------------------------------
refused() {    # refused NAME WHAT
    local before
    before=$(sessions)
    if run_example "$tmp/$1" "$build/stubs" "127.0.0.1:${port[$1]}"; then
        show "$tmp/$1.out" "$tmp/$1.err"
        fail "$2: refused (the example program succeeded)"
    elif connected "$tmp/$1"; then
        show "$tmp/$1.err"
        fail "$2: refused (the program got connected)"
    elif [ "$(sessions)" -ne "$before" ]; then
        show "$tmp/rgpud.log"
        fail "$2: refused before reaching rgpud (rgpud started a session)"
    else
        ok "$2: refused, rgpud never saw it ($(grep -m1 -E 'error' "$tmp/$1.err" | cut -c1-90))"
    fi
}
refused nocert "client without a certificate"
refused wrongcert "client with a certificate of another CA"
refused wrongca "client that does not trust the server's CA"
refused wronghost "client that expects another host name"
# stunnel's log, for the connection of one client section: why_refused
# LOG SECTION PATTERN.  Each connection logs under its own [N].
why_refused() {
    local n
    n=$(sed -n "s/.*LOG[0-9]\[\([0-9]*\)\]: Service \[$2\] accepted connection.*/\1/p" "$1" | head -1)
    [ -n "$n" ] && grep -Eq "LOG[0-9]\[$n\]: .*($3)" "$1"
}
check "server stunnel: no certificate -> 'peer did not return a certificate'" \
    grep -q 'peer did not return a certificate' "$tmp/server-stunnel.log"
check "server stunnel: foreign certificate -> 'Rejected by CERT at depth=0: CN=mallory'" \
    grep -q 'Rejected by CERT at depth=0: CN=mallory' "$tmp/server-stunnel.log"
check "client stunnel: server of a CA it does not trust -> 'certificate verify failed'" \
    why_refused "$tmp/client-stunnel.log" wrongca 'certificate verify failed'
check "client stunnel: other host name -> 'Subject checks failed'" \
    why_refused "$tmp/client-stunnel.log" wronghost 'Subject checks failed'

# TLS let it through, but without the key rgpud itself refuses.
if RGPU_KEY_FILE=$tmp/none.key run_example "$tmp/nokey" "$build/stubs" "127.0.0.1:${port[good]}"; then
    fail "a client with a certificate but no key: refused by rgpud"
elif grep -q 'this server requires a key' "$tmp/nokey.err"; then
    ok "a client with a certificate but no key: refused by rgpud"
else
    show "$tmp/nokey.err"
    fail "a client with a certificate but no key: refused by rgpud"
fi

# After all that, the good path still works.
if run_example "$tmp/again" "$build/stubs" "127.0.0.1:${port[good]}" && connected "$tmp/again"; then
    ok "the tunnel still serves a good client afterwards"
else
    show "$tmp/again.out" "$tmp/again.err"
    fail "the tunnel still serves a good client afterwards"
fi
check "rgpud is still running" kill -0 "$rgpud_pid"

finish
