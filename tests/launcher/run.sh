#!/bin/bash
# The launcher on one machine, against the fake GPU backend:
#
#   tests/launcher/run.sh <build-dir>
#
# A private rgpud is started and stopped (nothing left running), exit
# statuses and signals pass through, signals sent to the launcher reach
# the command, the command's environment puts the stubs first, a CUDA
# program runs through it, `rgpu info` describes the server, `rgpu smi`
# shows its GPUs through NVML, and each
# failure says what went wrong.  The SSH tunnel has its own test (ssh.sh).
set -u

build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd) || exit 2
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=lib.sh
. "$here/lib.sh"

R() { timeout -k 5 60 "$rgpu" "$@"; }
F=(--daemon-lib-dir "$fake")

# ---- exit status and signals -------------------------------------------------

R run "${F[@]}" -- sh -c 'exit 3' >"$tmp/out" 2>&1
expect "exit status passes through" 3 $? "$tmp/out"

R run "${F[@]}" -- true >"$tmp/out" 2>&1
expect "exit status 0" 0 $? "$tmp/out"

# The launcher must die of the signal itself (a shell then reports 143),
# not exit with 143: python tells the two apart.
sig=$(python3 -c 'import subprocess, sys; print(subprocess.run(sys.argv[1:]).returncode)' \
      "$rgpu" run "${F[@]}" -- sh -c 'kill -TERM $$' 2>"$tmp/out")
expect "dies of the command's SIGTERM" -15 "$sig" "$tmp/out"

R run "${F[@]}" -- sh -c 'kill -TERM $$' >"$tmp/out" 2>&1
expect "SIGTERM seen as 143 by a shell" 143 $? "$tmp/out"

# forward SIG: the launcher gets SIG from someone; the command must get it,
# and the private rgpud must still be stopped.
forward() {
    local sig=$1 want=$2 lp status pid
    rm -f "$tmp/ready"
    # The launcher starts with SIG's default action even where this suite
    # inherited it ignored (run under nohup, say): the launcher leaves an
    # ignored signal ignored, for itself and the command, as nohup means.
    env --default-signal="$sig" "$rgpu" run -v "${F[@]}" -- \
        sh -c "echo up >'$tmp/ready'; exec sleep 30" >"$tmp/out" 2>&1 &
    lp=$!
    for _ in $(seq 100); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
    kill -"$sig" "$lp"
    local t0=$SECONDS
    wait "$lp" 2>/dev/null    # bash would report the signal
    status=$?
    pid=$(sed -n 's/.*started rgpud (pid \([0-9]*\)).*/\1/p' "$tmp/out")
    if [ $((SECONDS - t0)) -gt 10 ]; then
        fail "SIG$sig forwarded" "the launcher took $((SECONDS - t0)) s to end"
    elif [ -z "$pid" ] || ! gone "$pid"; then
        fail "SIG$sig forwarded" "rgpud (pid ${pid:-?}) is still running"
        show "$tmp/out"
    else
        expect "SIG$sig forwarded to the command" "$want" "$status" "$tmp/out"
    fi
}
forward TERM 143
forward HUP 129

# ---- the private daemon ---------------------------------------------------------

# shellcheck disable=SC2016  # expanded by the command's shell
R run -v "${F[@]}" -- sh -c 'echo "server=$RGPU_SERVER"' >"$tmp/out" 2>&1
status=$?
pid=$(sed -n 's/.*started rgpud (pid \([0-9]*\)).*/\1/p' "$tmp/out")
server=$(sed -n 's/^server=//p' "$tmp/out")
if expect "private rgpud started" 0 $status "$tmp/out" 'started rgpud \(pid [0-9]+\)' \
        '^server=unix:/.*/rgpud\.sock$'; then
    if ! gone "$pid" || [ -n "$(procs_matching "--listen $server ")" ]; then
        fail "private rgpud stopped" "a process listening as $server is still running"
    else
        ok "private rgpud stopped"
    fi
fi

# ---- the command's environment ----------------------------------------------------

LD_LIBRARY_PATH=/nonexistent-before LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}libm.so.6 \
    R run "${F[@]}" -- env >"$tmp/out" 2>&1
expect "LD_LIBRARY_PATH: stubs first, old value kept" 0 $? "$tmp/out" \
    "^LD_LIBRARY_PATH=$stubs:/nonexistent-before\$"
expect "LD_PRELOAD: stub sonames, old value kept" 0 0 "$tmp/out" \
    "^LD_PRELOAD=$stubs/libcuda\.so\.1:" "^LD_PRELOAD=.*:$stubs/libcudart\.so\.[0-9]+:" \
    "^LD_PRELOAD=.*$stubs/libcublas\.so\.[0-9]+" "^LD_PRELOAD=.*:libm\.so\.6\$"
expect "RGPU_SERVER set" 0 0 "$tmp/out" '^RGPU_SERVER=unix:/.*/rgpud\.sock$'

# --lib-dir and RGPU_LIB_DIR name the stub directory.
R run --lib-dir "$build/stubs" "${F[@]}" -- env >"$tmp/out" 2>&1
expect "--lib-dir" 0 $? "$tmp/out" "^LD_LIBRARY_PATH=$stubs(:|\$)"
RGPU_LIB_DIR=$build/stubs R run "${F[@]}" -- env >"$tmp/out" 2>&1
expect "RGPU_LIB_DIR" 0 $? "$tmp/out" "^LD_LIBRARY_PATH=$stubs(:|\$)"
RGPUD_LIB_DIR=$fake R run -- true >"$tmp/out" 2>&1
expect "RGPUD_LIB_DIR reaches the private rgpud" 0 $? "$tmp/out"

# ---- a CUDA program ------------------------------------------------------------------

if [ -x "$example" ]; then
    RGPU_LOG=info R run -v "${F[@]}" -- "$example" >"$tmp/out" 2>&1
    expect "example program through the launcher" 0 $? "$tmp/out" \
        '^rgpu\[[0-9]+\]: info: connected to unix:/.*/rgpud\.sock' '^ok y = 2\*x \+ y'
    # The daemon and the session it forked for the program.
    listen=$(sed -n 's/.*started rgpud (pid [0-9]*) on \(unix:[^ ]*\.sock\):.*/\1/p' "$tmp/out")
    procs=$(procs_matching "--listen ${listen:-?} ")
    if [ -n "$procs" ]; then
        fail "no rgpud session left after the program" "still running: $procs"
    else
        ok "no rgpud session left after the program"
    fi
else
    echo "note: $example not built (no nvcc): example check left out"
fi

# ---- rgpu info -----------------------------------------------------------------------

R info "${F[@]}" >"$tmp/out" 2>&1
expect "rgpu info" 0 $? "$tmp/out" '^server +unix:/.*/rgpud\.sock \(private rgpud' \
    '^auth +peer credentials on a Unix socket; server: uid [0-9]+ let in' \
    '^CUDA runtime +[0-9]+\.[0-9]+' '^CUDA driver +[0-9]+\.[0-9]+' '^GPUs +1$' \
    '^  0  rgpu fake GPU, 16\.0 GiB' '^round trip +[0-9]+ us median of 20 calls' \
    '^ +cudart +libcudart\.so\.13 \(13[0-9]+\) +libcudart\.so\.13 \(13000\) +(yes|older server: what came after 13000 is refused at the call)$' \
    '^ +cudnn +libcudnn\.so\.9 \([0-9]+\) +libcudnn\.so\.9 \([0-9]+\) +yes$' \
    "^library path +LD_LIBRARY_PATH=$stubs\$"
# The CUDA 12 stubs: served by CUDA 13's runtime, or by the CUDA 12 face of
# the fake when rgpud has CUDA 12 libraries (RGPUD_CUDA12_LIB_DIR).
if [ -e "$stubs/libcudart.so.12" ]; then
    grep -Eq '^ +cudart +libcudart\.so\.12 \(12[0-9]+\) +libcudart\.so\.13 \(13000\) +served by the server.s newer major' "$tmp/out" ||
        fail "rgpu info: the CUDA 12 runtime served by CUDA 13's" "$(cat "$tmp/out")"
    RGPUD_CUDA12_LIB_DIR=$fake/cuda12 R info "${F[@]}" >"$tmp/out" 2>&1
    expect "rgpu info, CUDA 12 libraries on the server" 0 $? "$tmp/out" \
        '^ +cudart +libcudart\.so\.12 \(12090\) +libcudart\.so\.12 \(12090\) +yes$' \
        '^ +cublas +libcublas\.so\.12 \([0-9]+\) +libcublas\.so\.13 \([0-9]+\) +no: the server.s CUDA 12 libraries lack it'
fi

# ---- rgpu smi: the fake GPU's NVML values through the stub libnvidia-ml ----------------

R smi "${F[@]}" >"$tmp/out" 2>&1
expect "rgpu smi" 0 $? "$tmp/out" \
    '^\| rgpu smi +Driver Version: [0-9]+\.[0-9.]+ +CUDA Version: [0-9]+\.[0-9]+ +\|$' \
    '^\| server: unix:/.*/rgpud\.sock \(private rgpud' \
    '^\| +0  rgpu fake GPU +On \| 00000000:00:00\.0 +Off \| +0 \|$' \
    '^\| +30% +41C +P0 +71W / +300W \| +0MiB / 16384MiB \| +0% +Default \|$' \
    '^\| +\| +\| +Disabled \|$' '^\|  No running processes found +\|$'
if grep -q 'warning' "$tmp/out"; then
    fail "rgpu smi: no warnings" "$(grep warning "$tmp/out")"
fi
R smi --server "127.0.0.1:$(free_port)" >"$tmp/out" 2>&1
expect "rgpu smi, unreachable" 1 $? "$tmp/out" 'cannot reach rgpud'

# A private rgpud serving GPUs 2 and 0 of three (RGPUD_DEVICES reaches it):
# rgpu smi and rgpu info show those two, renumbered, and not GPU 1.
RGPU_FAKEGPU_DEVICES=3 RGPUD_DEVICES=2,0 R smi "${F[@]}" >"$tmp/out" 2>&1
expect "rgpu smi under RGPUD_DEVICES=2,0" 0 $? "$tmp/out" \
    '^\| +0  rgpu fake GPU +On \| 00000000:02:00\.0 +Off \|' \
    '^\| +1  rgpu fake GPU +On \| 00000000:00:00\.0 +Off \|'
if grep -q '00000000:01:00\.0' "$tmp/out"; then
    fail "rgpu smi under RGPUD_DEVICES=2,0" "GPU 1, which rgpud does not serve, is listed"
    show "$tmp/out"
fi
RGPU_FAKEGPU_DEVICES=3 RGPUD_DEVICES=2,0 R info "${F[@]}" >"$tmp/out" 2>&1
expect "rgpu info under RGPUD_DEVICES=2,0" 0 $? "$tmp/out" '^GPUs +2$'

"$rgpu" --version >"$tmp/out" 2>&1
expect "rgpu --version" 0 $? "$tmp/out" '^rgpu [0-9]+\.[0-9]+'
"$rgpu" --help >"$tmp/out" 2>&1
expect "rgpu --help" 0 $? "$tmp/out" 'rgpu run' '--ssh'

# ---- errors: what went wrong, and what to do -----------------------------------------

closed=$(free_port)
R run --server "127.0.0.1:$closed" -- true >"$tmp/out" 2>&1
expect "unreachable --server" 125 $? "$tmp/out" \
    "cannot reach rgpud at 127\.0\.0\.1:$closed: Connection refused" 'start rgpud' '--ssh'

RGPU_SERVER=127.0.0.1:$closed R run -- true >"$tmp/out" 2>&1
expect "unreachable RGPU_SERVER" 125 $? "$tmp/out" 'from RGPU_SERVER' 'cannot reach rgpud'

R info --server "127.0.0.1:$closed" >"$tmp/out" 2>&1
expect "rgpu info, unreachable" 1 $? "$tmp/out" 'cannot reach rgpud'

t0=$SECONDS
R run -v "${F[@]}" -- no-such-command-rgpu >"$tmp/out" 2>&1
expect "missing command: 127" 127 $? "$tmp/out" 'no-such-command-rgpu: command not found'
if grep -q 'started rgpud' "$tmp/out"; then
    fail "missing command: nothing started" "rgpud was started for a missing command"
fi
printf 'echo hi\n' >"$tmp/noexec"
chmod -x "$tmp/noexec"
R run "${F[@]}" -- "$tmp/noexec" >"$tmp/out" 2>&1
expect "command not executable: 126" 126 $? "$tmp/out" 'Permission denied'

R run "${F[@]}" >"$tmp/out" 2>&1
expect "no command" 125 $? "$tmp/out" 'no command given'

mkdir "$tmp/empty"
R run --lib-dir "$tmp/empty" "${F[@]}" -- true >"$tmp/out" 2>&1
expect "no stub directory" 125 $? "$tmp/out" "no rgpu stub libraries in $tmp/empty" \
    'librgpu-client\.so\.0'

R run --rgpud "$tmp/empty/rgpud" -- true >"$tmp/out" 2>&1
expect "no rgpud" 125 $? "$tmp/out" 'is not an executable file'

R run --rgpud /bin/false -- true >"$tmp/out" 2>&1
expect "rgpud that exits" 125 $? "$tmp/out" 'exited before it answered \(exit status 1\)'

R run --server 127.0.0.1:1 --ssh localhost -- true >"$tmp/out" 2>&1
expect "--server with --ssh" 125 $? "$tmp/out" 'give one'

# Every address form is checked where it is given, with the same parser
# as the program's: a bare IPv6 address gets the default port.
R run --server ::1 -- true >"$tmp/out" 2>&1
expect "--server ::1: parsed, then unreachable" 125 $? "$tmp/out" 'cannot reach rgpud at ::1'
R run --server '[::1' -- true >"$tmp/out" 2>&1
expect "--server with a bad address" 125 $? "$tmp/out" "bad server address: '\[::1'"
RGPU_SERVER="unix:$tmp/none.sock" R run -- true >"$tmp/out" 2>&1
expect "RGPU_SERVER naming a missing socket" 125 $? "$tmp/out" 'from RGPU_SERVER' \
    'No such file or directory'

if command -v ssh >/dev/null; then
    export RGPU_SSH_OPTS="-F /dev/null -o UserKnownHostsFile=$tmp/known_hosts"
    R run --ssh "127.0.0.1:$closed" -- true >"$tmp/out" 2>&1
    expect "--ssh to a closed port" 125 $? "$tmp/out" \
        "ssh to 127\.0\.0\.1 port $closed failed" 'Connection refused' 'RGPU_SSH_OPTS'
    R run --ssh nosuchhost.invalid -- true >"$tmp/out" 2>&1
    expect "--ssh to an unknown host" 125 $? "$tmp/out" \
        'ssh to nosuchhost\.invalid failed' 'ssh said' 'nosuchhost\.invalid'
    unset RGPU_SSH_OPTS
    PATH=$tmp/empty "$rgpu" run --ssh localhost -- /bin/true >"$tmp/out" 2>&1
    expect "--ssh without an ssh client" 125 $? "$tmp/out" \
        'cannot run ssh' 'OpenSSH client is not installed'
else
    echo "note: no ssh client: --ssh error checks left out"
fi

# Welcomes a real rgpud gives only across versions or without a GPU.
fake_server() {    # fake_server STATUS RUNTIME DRIVER MESSAGE: sets $port (a socket)
    port=$tmp/fake-$RANDOM.sock
    python3 "$here/fake_rgpud.py" "$port" "$@" &
    cleanups+=("kill $! 2>/dev/null")
    for _ in $(seq 50); do [ -S "$port" ] && break; sleep 0.1; done
}
if command -v python3 >/dev/null; then
    fake_server 6 0 0 "server speaks protocol 3, client 2"
    R run --server "unix:$port" -- true >"$tmp/out" 2>&1
    expect "protocol mismatch" 125 $? "$tmp/out" \
        'refused the session: protocol version mismatch: server speaks protocol 3, client 2' \
        'same rgpu version on both machines'
    # A runtime of another major version than the stubs' newest libcudart.so.N.
    major=$(find "$stubs" -name 'libcudart.so.*' | sed -n 's/.*\.so\.\([0-9]*\)$/\1/p' |
            sort -n | tail -1)
    if [ "${major:-0}" = 12 ]; then other=13000 other_text=13.0; else other=12080 other_text=12.8; fi
    fake_server 0 "$other" "$other" ""
    R run --server "unix:$port" -- true >"$tmp/out" 2>&1
    expect "CUDA version mismatch" 125 $? "$tmp/out" \
        "are for CUDA $major \\(libcudart\\.so\\.$major\\), but rgpud at .* runs CUDA runtime $other_text"
    fake_server 0 13000 0 ""
    R run --server "unix:$port" -- true >"$tmp/out" 2>&1
    expect "server without a driver" 125 $? "$tmp/out" 'has no GPU to offer: no NVIDIA driver'
else
    echo "note: no python3: version mismatch checks left out"
fi

finish
