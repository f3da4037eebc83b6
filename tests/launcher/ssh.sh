#!/bin/bash
# The launcher's SSH tunnel, against a real sshd on loopback:
#
#   tests/launcher/ssh.sh <build-dir>
#
# Starts OpenSSH's sshd (Debian: openssh-server) on a free 127.0.0.1 port
# with a config, host key and authorized key of its own, all in a temp
# dir, and an rgpud on the fake backend as the "remote" daemon on the same
# machine; then runs `rgpu run --ssh USER@127.0.0.1:PORT` and checks that
# programs run through the tunnel, that the tunnel is gone afterwards, and
# that a wrong key, or no daemon behind the tunnel, fail fast and say so.
# Exits 77 (skip) only when sshd cannot be started at all.
set -u

build=$(cd "${1:?usage: ssh.sh BUILD_DIR}" && pwd) || exit 2
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=lib.sh
. "$here/lib.sh"

skip() {
    echo "SKIP: $*"
    exit 77
}

sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || skip "no sshd (install openssh-server)"
command -v ssh >/dev/null || skip "no ssh client (install openssh-client)"
command -v ssh-keygen >/dev/null || skip "no ssh-keygen (install openssh-client)"

# ---- sshd of our own ----------------------------------------------------------------

user=$(id -un)
ssh-keygen -q -t ed25519 -N '' -C rgpu-test-host -f "$tmp/host_key" || exit 1
ssh-keygen -q -t ed25519 -N '' -C rgpu-test -f "$tmp/key" || exit 1
ssh-keygen -q -t ed25519 -N '' -C rgpu-test-wrong -f "$tmp/wrong_key" || exit 1
cp "$tmp/key.pub" "$tmp/authorized_keys"
chmod 600 "$tmp/authorized_keys"

write_sshd_config() {
    cat >"$tmp/sshd_config" <<EOF
Port $1
ListenAddress 127.0.0.1
HostKey $tmp/host_key
PidFile $tmp/sshd.pid
AuthorizedKeysFile $tmp/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The temp dir's parents are not ours to vouch for.
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
AllowUsers $user
LogLevel VERBOSE
EOF
}

# As root, sshd insists on its privilege separation directory.
[ "$(id -u)" = 0 ] && mkdir -p /run/sshd 2>/dev/null

sshd_port=
for _ in 1 2 3; do
    p=$(free_port)
    write_sshd_config "$p"
    if ! "$sshd" -t -f "$tmp/sshd_config" >"$tmp/sshd.log" 2>&1; then
        cat "$tmp/sshd.log"
        skip "sshd refuses its test configuration (see above)"
    fi
    # sshd re-executes itself, so it wants an absolute path.
    env -u LD_LIBRARY_PATH -u LD_PRELOAD setsid "$sshd" -D -e -f "$tmp/sshd_config" \
        >"$tmp/sshd.log" 2>&1 </dev/null &
    spid=$!
    cleanups+=("kill -TERM -- -$spid 2>/dev/null")
    if wait_listening "$p" "$spid"; then
        sshd_port=$p
        break
    fi
    kill -TERM -- "-$spid" 2>/dev/null
done
if [ -z "$sshd_port" ]; then
    cat "$tmp/sshd.log"
    skip "sshd could not be started (its log is above)"
fi

ssh_opts="-F /dev/null -o IdentitiesOnly=yes -o UserKnownHostsFile=$tmp/known_hosts"
ssh_opts+=" -o StrictHostKeyChecking=no"
export RGPU_SSH_OPTS="$ssh_opts -i $tmp/key"
dest="$user@127.0.0.1:$sshd_port"

# A plain login first: if this fails, the launcher cannot do better, and
# the reason is in sshd's log rather than in rgpu.
# shellcheck disable=SC2086  # the options are words
if ! timeout 20 ssh $RGPU_SSH_OPTS -o BatchMode=yes -p "$sshd_port" "$user@127.0.0.1" true \
        >"$tmp/plain.log" 2>&1; then
    # sshd without PAM lets no one log in to a locked account (a system
    # user such as nobody, running this test): nothing rgpu could change.
    if grep -q 'not allowed because account is locked' "$tmp/sshd.log"; then
        skip "sshd refuses logins to the locked account $user (run as root or a normal user)"
    fi
    fail "plain ssh login to the test sshd" "$(cat "$tmp/plain.log")"
    show "$tmp/sshd.log"
    finish
fi
ok "plain ssh login to the test sshd"

# ---- rgpud on the "remote" side ------------------------------------------------------------

rport=
start_rgpud rport || exit 1

R() { timeout -k 5 60 "$rgpu" "$@"; }

# tunnel_gone NAME OUTFILE: the ssh the launcher started has ended.
tunnel_gone() {
    local pid
    pid=$(sed -n 's/.*started ssh (pid \([0-9]*\)).*/\1/p' "$2")
    if [ -z "$pid" ]; then
        fail "$1" "no 'started ssh (pid N)' line"
        show "$2"
    elif ! gone "$pid"; then
        fail "$1" "ssh (pid $pid) is still running"
    else
        ok "$1"
    fi
}

if [ -x "$example" ]; then
    RGPU_LOG=info R run -v --ssh "$dest" --remote "unix:$rport" -- "$example" >"$tmp/out" 2>&1
    expect "example program through the SSH tunnel" 0 $? "$tmp/out" \
        'started ssh \(pid [0-9]+\)' "an SSH tunnel to $user@127\\.0\\.0\\.1:$sshd_port" \
        '^rgpu\[[0-9]+\]: info: connected to unix:/.*/rgpud\.sock' '^ok y = 2\*x \+ y'
else
    echo "note: $example not built (no nvcc): using env instead"
    R run -v --ssh "$dest" --remote "unix:$rport" -- env >"$tmp/out" 2>&1
    expect "command through the SSH tunnel" 0 $? "$tmp/out" '^RGPU_SERVER=unix:/.*/rgpud\.sock$'
fi
tunnel_gone "tunnel closed after the command" "$tmp/out"

R run -v --ssh "$dest" --remote "unix:$rport" -- sh -c 'exit 5' >"$tmp/out" 2>&1
expect "exit status through the tunnel" 5 $? "$tmp/out"

R run -v --ssh "$dest" --remote "unix:$rport" -- sh -c 'kill -TERM $$' >"$tmp/out" 2>&1
expect "signal through the tunnel" 143 $? "$tmp/out"
tunnel_gone "tunnel closed after a signal" "$tmp/out"

R info --ssh "$dest" --remote "unix:$rport" >"$tmp/out" 2>&1
expect "rgpu info through the tunnel" 0 $? "$tmp/out" \
    "^server +unix:/.*/rgpud\\.sock, an SSH tunnel to $user@127\\.0\\.0\\.1:$sshd_port, unix:$rport there" \
    '^auth +peer credentials on a Unix socket; server: uid [0-9]+ let in' \
    '^  0  rgpu fake GPU' '^round trip +[0-9]+ us'

# The op server of the rgpu PyTorch device, through the same tunnel (its
# second forward), when the test's PyTorch is there (tests/rgpu_device).
py=${RGPU_TORCH_PYTHON:-${RGPU_TORCH_VENV:-/opt/rgpu-torch}/bin/python}
if "$py" -c "import torch, msgpack" 2>/dev/null; then
    RGPU_OPSERVER_PYTHON=$py setsid "$build/python/rgpu-opserver" --device cpu \
        --listen "unix:$tmp/ops.sock" >"$tmp/opserver.log" 2>&1 &
    ops_pid=$!
    cleanups+=("kill -KILL -- -$ops_pid 2>/dev/null")
    for _ in $(seq 300); do [ -S "$tmp/ops.sock" ] && break; sleep 0.1; done
    RGPU_REMOTE_OPSERVER=unix:$tmp/ops.sock PYTHONPATH=$here/../../python R run --ssh "$dest" \
        --remote "unix:$rport" -- "$py" -c 'import torch, rgpu
print("sum=%s" % torch.full((3,), 2.0, device="rgpu").sum().item())' >"$tmp/out" 2>&1
    expect "device rgpu through the SSH tunnel" 0 $? "$tmp/out" '^sum=6\.0$'
else
    echo "note: no PyTorch at $py: device rgpu through the tunnel not tried"
fi

# ---- failures ---------------------------------------------------------------------------------

t0=$SECONDS
RGPU_SSH_OPTS="$ssh_opts -i $tmp/wrong_key" R run -v --ssh "$dest" --remote "unix:$rport" \
    -- true >"$tmp/out" 2>&1
status=$?
if [ $((SECONDS - t0)) -gt 10 ]; then
    fail "wrong key fails fast" "took $((SECONDS - t0)) s"
else
    expect "wrong key fails fast, with ssh's reason" 125 $status "$tmp/out" \
        "ssh to $user@127\\.0\\.0\\.1 port $sshd_port failed \\(exit status 255\\)" \
        'Permission denied \(publickey\)' 'RGPU_SSH_OPTS'
fi

nobody=$(free_port)
t0=$SECONDS
R run --ssh "$dest" --remote-port "$nobody" -- true >"$tmp/out" 2>&1
status=$?
if [ $((SECONDS - t0)) -gt 10 ]; then
    fail "no rgpud behind the tunnel fails fast" "took $((SECONDS - t0)) s"
else
    expect "no rgpud behind the tunnel" 125 $status "$tmp/out" \
        "the SSH tunnel to .* is up, but nothing answers at 127\\.0\\.0\\.1:$nobody there" \
        'start rgpud on'
fi

R run --ssh "$dest" --remote "unix:$tmp/nobody.sock" -- true >"$tmp/out" 2>&1
expect "no rgpud socket behind the tunnel" 125 $? "$tmp/out" \
    "the SSH tunnel to .* is up, but nothing answers at unix:$tmp/nobody\\.sock there"

finish
