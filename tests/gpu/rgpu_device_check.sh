#!/bin/bash
# tests/gpu/rgpu_device_check.sh [BUILD_DIR]   -- on the GPU machine, from the repo root
#
# Device "rgpu" (docs/rgpu-device.md) on a real GPU:
#
# 1. rgpu-opserver --device cuda on a private Unix socket, with this
#    machine's PyTorch, its sessions sandboxed (BUILD_DIR's
#    daemon/librgpu-opsandbox.so; RGPU_DEVICE_SANDBOX=audit logs forbidden
#    calls instead of killing, =off runs unconfined); a session the sandbox
#    killed, or a system call it refused, fails the check and is shown;
# 2. examples/nanogpt/train.py for RGPU_DEVICE_STEPS (200) steps on
#    --device cuda natively and on --device rgpu, fp32 with the script's
#    deterministic settings, every step's loss logged: each pair must agree
#    within 1e-4 relative.  Every --device rgpu client runs under
#    tests/rgpu_device/cudaless.py: the kernel (Landlock) hides the NVIDIA
#    driver's libraries and device nodes from it and CUDA_VISIBLE_DEVICES is
#    empty, the nearest stand-in for PyTorch's CPU-only wheel here (that
#    file says what it shows and what not); its verdict is printed;
# 3. two more models (tests/rgpu_device/train_models.py), RGPU_DEVICE_MODEL_STEPS
#    (50) steps each, --device cuda against --device rgpu, every step's
#    loss within 1e-4 relative: a CNN with BatchNorm, dropout, SGD with
#    Nesterov momentum, a step schedule and eval mode at the end; a
#    two-layer LSTM (batch_first) with Adam.  RGPU_DEVICE_MODELS names
#    others ("cnn lstm rnn"; empty: none);
# 4. the step time over links made by bench/rgpu-delay (BUILD_DIR's) in
#    front of the op server, at 0, 1 and 10 ms round trip (0 = the proxy
#    without delay) besides the direct socket, RGPU_DEVICE_TIME_STEPS (60)
#    steps each with a loss read every 20 steps, as a training loop logs:
#    wall ms per step (steps 11..N, batches included), the client's CPU ms
#    per step (all its threads), requests that waited for the server per
#    step, the op server session's CPU ms per step (all its threads:
#    torch.rgpu.server_cpu_time), and the ratio to native cuda measured the
#    same way right before each rgpu run (the target is 1.3 at most; a
#    number, not a verdict); RGPU_DEVICE_REPEAT (3) such pairs a row, the
#    pair with the median ratio shown and every pair's ratio listed.
#
# With RGPU_STUB_SERVER=ADDR (an rgpud already running; tests/gpu/run.sh
# passes its own), the table also has the stub path's rows: the same
# script on --device cuda through BUILD_DIR/launcher/rgpu run --server, over
# the same links in front of that rgpud, RGPU_DEVICE_STUB_STEPS (30) steps
# each, at most RGPU_DEVICE_STUB_TIMEOUT (240) s each (wall ms per step;
# its waits per step are in run.sh's RGPU_TRAIN table, model gpt-small).
# RGPU_DEVICE_STUB_ROWS=0 leaves them out.  Each part prints how long it
# took.
#
# RGPU_DEVICE_PROFILE=N then runs nanoGPT once more on a second op server
# with --profile N and prints the N functions its session spent most time
# in (docs/rgpu-device.md: where the op server's time goes).
#
# Prints one table and "rgpu device check: PASS" or "... FAIL" last; exit
# status 0 on PASS, 1 on FAIL, 2 when something it needs is missing.
# The stub path's waits per step for the same model (bench/train_bench.py's
# gpt-small: 4 layers, d=128, 4 heads, batch 32 x block 64) come from
# `RGPU_PROGS=0 RGPU_BENCH=0 RGPU_FRAMEWORKS=0 RGPU_TRAIN=1 bash tests/gpu/run.sh`.
#
# RGPU_DEVICE_NATIVE=cpu runs everything on PyTorch's CPU device instead (a
# dry run of this script on a machine without a GPU, few steps advised).
#
# Needs, in RGPU_PYTHON (python3): PyTorch with CUDA and msgpack.  Where
# msgpack is missing and the machine has no network, carry a wheel from a
# machine with PyPI and name its folder with RGPU_WHEELS:
#     pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
#         --python-version 3.X -d .whl msgpack==1.1.2      (3.X: that Python's version)
#     RGPU_WHEELS=.whl bash tests/gpu/rgpu_device_check.sh build     (carry .whl too)
# (it is installed into $OUT/pydeps for this run only).
set -u
BUILD=${1:-build}
OUTDIR=${OUT:-/tmp/rgpu-gpu}
STEPS=${RGPU_DEVICE_STEPS:-200}
TSTEPS=${RGPU_DEVICE_TIME_STEPS:-60}
REPEAT=${RGPU_DEVICE_REPEAT:-3}
MSTEPS=${RGPU_DEVICE_MODEL_STEPS:-50}
STUB_STEPS=${RGPU_DEVICE_STUB_STEPS:-30}
STUB_TIMEOUT=${RGPU_DEVICE_STUB_TIMEOUT:-240}
SANDBOX=${RGPU_DEVICE_SANDBOX:-on}
PY=${RGPU_PYTHON:-python3}
NATIVE=${RGPU_DEVICE_NATIVE:-cuda}
MODELS_DEFAULT="cnn lstm"
[ "$NATIVE" = cpu ] && MODELS_DEFAULT="cnn rnn"     # a CPU op server has no fused LSTM cells
MODELS=${RGPU_DEVICE_MODELS-$MODELS_DEFAULT}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN=$SRC/examples/nanogpt/train.py
MODELS_PY=$SRC/tests/rgpu_device/train_models.py
CUDALESS=$SRC/tests/rgpu_device/cudaless.py
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-device.XXXXXX")
chmod 700 "$WORK"
LOG=$OUTDIR/rgpu-device-logs.txt
: > "$LOG"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "$*"; }
die() { echo "rgpu device check: $*" >&2; echo "rgpu device check: FAIL (not run)"; exit 2; }

# ---- what this machine must have ----------------------------------------------------------
if [ "$NATIVE" = cuda ]; then
    "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>>"$LOG" ||
        die "$PY has no PyTorch with a usable CUDA device (RGPU_PYTHON names another Python)"
fi
if ! "$PY" -c 'import msgpack' 2>/dev/null; then
    if [ -n "${RGPU_WHEELS:-}" ] && "$PY" -m pip install --no-index --find-links "$RGPU_WHEELS" \
            --target "$OUTDIR/pydeps" msgpack >>"$LOG" 2>&1; then
        export PYTHONPATH=$OUTDIR/pydeps${PYTHONPATH:+:$PYTHONPATH}
    else
        pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        die "$PY (Python $pyver) has no msgpack, which the rgpu client and op server need: \
install it (pip install msgpack), or on a machine with PyPI run 'pip download --no-deps \
--only-binary=:all: --platform manylinux2014_x86_64 --python-version $pyver -d .whl \
msgpack==1.1.2', carry .whl here and set RGPU_WHEELS=.whl${RGPU_WHEELS:+ (RGPU_WHEELS=$RGPU_WHEELS \
did not install it: see $LOG)}"
    fi
fi
export PYTHONPATH=$SRC/python${PYTHONPATH:+:$PYTHONPATH}
DELAY=$BUILD/bench/rgpu-delay
[ -x "$DELAY" ] || say "note: no $DELAY: the link rows are skipped"
DATA=$WORK/data.txt

# wait_for FILE PID: FILE appears (a socket) while PID lives, 60 s at most.
wait_for() {
    for _ in $(seq 600); do
        [ -S "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

SANDBOX_LIB=$BUILD/daemon/librgpu-opsandbox.so
case $SANDBOX in
    on) SANDBOX_ARGS=() ;;
    audit) SANDBOX_ARGS=(--sandbox-audit) ;;
    off) SANDBOX_ARGS=(--no-sandbox) ;;
    *) die "RGPU_DEVICE_SANDBOX=$SANDBOX: on, audit or off" ;;
esac
[ "$SANDBOX" = off ] || [ -f "$SANDBOX_LIB" ] ||
    die "no $SANDBOX_LIB (the op server's session sandbox; ninja builds it, tests/gpu/pack-build.sh carries it)"
began=$SECONDS
part() { say "($1: $((SECONDS - began)) s)"; began=$SECONDS; }
# start_opserver: the op server on $WORK/ops.sock with SANDBOX_ARGS, its
# log appended to $WORK/opserver.log; start_opserver NAME ARGS...: another
# on $WORK/NAME.sock with ARGS too, its log $WORK/NAME.log.
start_opserver() {
    local name=${1:-ops} log=$WORK/opserver.log
    shift $(( $# > 0 ))
    [ "$name" = ops ] || log=$WORK/$name.log
    rm -f "$WORK/$name.sock"
    RGPU_OPSERVER_SANDBOX=$(realpath -m "$SANDBOX_LIB") setsid "$PY" -m rgpu_opserver \
        --device "$NATIVE" --listen "unix:$WORK/$name.sock" --group none "${SANDBOX_ARGS[@]}" \
        "$@" >>"$log" 2>&1 &
    OPSERVER_PID=$!
    PIDS+=($!)
    disown
    if ! wait_for "$WORK/$name.sock" "$OPSERVER_PID"; then
        cat "$log" >&2
        die "rgpu-opserver did not start (its log is above)"
    fi
}
# sessions_ended LOG N: LOG has N "session:" lines (a session logs one as it
# ends, just after its client left), 10 s at most.
sessions_ended() {
    for _ in $(seq 100); do
        [ "$(grep -c 'session: ' "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
# busy LOG: the share of its last session's time the op server spent
# running frames ("-" without one): near 100% it is the slower side; then
# the share of that running spent inside the operators themselves (the
# rest is rgpu's own work on the server).
busy() {
    grep 'session: ' "$1" | tail -1 |
        sed -n 's/.*running them \([0-9.]*\) s, waiting for the client \([0-9.]*\) s.*the operators themselves \([0-9.]*\) s.*/\1 \2 \3/p' |
        awk '{ if ($1 + $2 > 0) printf "%.0f%%", 100 * $1 / ($1 + $2); else printf "-";
               if ($1 > 0) printf " (%.0f%% in operators)", 100 * $3 / $1 }'
}
: >"$WORK/opserver.log"
start_opserver
say "op server: $(head -1 "$WORK/opserver.log") (session sandbox: $SANDBOX)"

# train DEVICE STEPS LOG_EVERY SERVER OUTFILE: --device rgpu as a CUDA-less client.
train() {
    local wrap=()
    [ "$1" = rgpu ] && wrap=("$CUDALESS")
    RGPU_OP_SERVER=unix:$4 timeout 1200 "$PY" "${wrap[@]}" "$TRAIN" --device "$1" --steps "$2" \
        --log-every "$3" --data "$DATA" >"$5" 2>&1
    local rc=$?
    { echo "== train.py --device $1 --steps $2 --log-every $3 (server $4): exit $rc"
      cat "$5"; } >>"$LOG"
    return $rc
}
# train_model MODEL DEVICE OUTFILE: train_models.py, on the op server's socket.
train_model() {
    local wrap=()
    [ "$2" = rgpu ] && wrap=("$CUDALESS")
    RGPU_OP_SERVER=unix:$WORK/ops.sock timeout 1200 "$PY" "${wrap[@]}" "$MODELS_PY" \
        --model "$1" --device "$2" --steps "$MSTEPS" >"$3" 2>&1
    local rc=$?
    { echo "== train_models.py --model $1 --device $2 --steps $MSTEPS: exit $rc"; cat "$3"; } >>"$LOG"
    return $rc
}
field() { sed -n "s/^$1 \\([0-9.]*\\).*/\\1/p" "$2" | tail -1; }
# compare_losses WHAT NATIVE_OUT RGPU_OUT STEPS: every step's loss within 1e-4 relative.
compare_losses() {
    "$PY" - "$@" <<'PY'
import re, sys
def losses(path):
    return [float(v) for v in re.findall(r"^step \d+ loss (\S+)", open(path).read(), re.M)]
what, a, b, n = sys.argv[1], losses(sys.argv[2]), losses(sys.argv[3]), int(sys.argv[4])
if len(a) != n or len(b) != n:
    sys.exit(f"{what}: losses logged: native {len(a)}, rgpu {len(b)}, wanted {n}")
rel = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
same = sum(x == y for x, y in zip(a, b))
print(f"{what} losses: {n} steps, first {a[0]:.6f} / {b[0]:.6f}, last {a[-1]:.6f} / {b[-1]:.6f} "
      f"(native / rgpu); identical at {same} steps; largest relative difference {rel:.2e} "
      f"(allowed 1e-4)")
sys.exit(0 if rel <= 1e-4 else 1)
PY
}

# ---- 1. losses, 200 steps ---------------------------------------------------------------------
fail=0 rgpu_ok=1
train "$NATIVE" "$STEPS" 1 "$WORK/ops.sock" "$WORK/native.out" || { fail=1; say "native run failed (see $LOG)"; }
train rgpu "$STEPS" 1 "$WORK/ops.sock" "$WORK/rgpu.out" || rgpu_ok=0
# A session the sandbox killed: say which call, then go on with the sandbox
# in audit mode, so that the numbers still come out (the check fails).
if [ "$SANDBOX" = on ] && grep -q 'killed by the sandbox' "$WORK/opserver.log"; then
    say "the op server's sandbox killed the rgpu session:"
    grep 'sandbox' "$WORK/opserver.log" | head -10
    kill -KILL -- "-$OPSERVER_PID" 2>/dev/null
    SANDBOX=audit-after-kill
    SANDBOX_ARGS=(--sandbox-audit)
    start_opserver
    say "(the op server again, with --sandbox-audit; the check FAILs)"
    rgpu_ok=1
    train rgpu "$STEPS" 1 "$WORK/ops.sock" "$WORK/rgpu.out" || rgpu_ok=0
    sandbox_failed=1
fi
[ $rgpu_ok = 1 ] || { fail=1; say "rgpu run failed (see $LOG)"; }
if [ $fail = 0 ]; then
    compare_losses nanoGPT "$WORK/native.out" "$WORK/rgpu.out" "$STEPS" || fail=1
    cudaless=$(grep '^cudaless client:' "$WORK/rgpu.out" | tail -1)
    say "device rgpu client: ${cudaless:-no verdict from tests/rgpu_device/cudaless.py}"
    case $cudaless in "cudaless client: OK"*) ;; *) fail=1 ;; esac
fi
part "losses"

# ---- 2. other models ------------------------------------------------------------------------
for model in $MODELS; do
    if train_model "$model" "$NATIVE" "$WORK/m-native.out" &&
            train_model "$model" rgpu "$WORK/m-rgpu.out"; then
        compare_losses "$model" "$WORK/m-native.out" "$WORK/m-rgpu.out" "$MSTEPS" || fail=1
    else
        say "$model: a run failed (see $LOG)"
        fail=1
    fi
done
[ -z "$MODELS" ] || part "models"

# ---- 3. step time over links -----------------------------------------------------------------
say ""
say "nanoGPT (4 layers, d=128, batch 32 x block 64, fp32), $TSTEPS steps, loss read every 20;"
say "native $NATIVE measured right before each rgpu run (ratio = rgpu wall / that native wall);"
say "$REPEAT pairs a row (RGPU_DEVICE_REPEAT), the pair with the median ratio shown"
say "| run | RTT | wall ms/step | client CPU ms/step | server CPU ms/step | server busy | waits/step | ratio to native |"
say "|---|---|---|---|---|---|---|---|"
# pair K SOCKET: native then device rgpu, once; their outputs in
# t-native.K.out and t.K.out, the session's busy share in busy.K, the
# ratio in PAIR_RATIO ("" when either failed).
pair() {
    local ended wall native
    PAIR_RATIO=
    train "$NATIVE" "$TSTEPS" 20 "$WORK/ops.sock" "$WORK/t-native.$1.out" || return 1
    ended=$(grep -c 'session: ' "$WORK/opserver.log")
    train rgpu "$TSTEPS" 20 "$2" "$WORK/t.$1.out" || return 1
    sessions_ended "$WORK/opserver.log" $((ended + 1)) && busy "$WORK/opserver.log" >"$WORK/busy.$1"
    native=$(field wall_ms_per_step "$WORK/t-native.$1.out")
    wall=$(field wall_ms_per_step "$WORK/t.$1.out")
    [ -n "$native" ] && [ -n "$wall" ] &&
        PAIR_RATIO=$(awk "BEGIN { printf \"%.2f\", $wall / $native }")
}
# row LABEL SOCKET: RGPU_DEVICE_REPEAT pairs; the pair with the median
# ratio is shown, with every pair's ratio (this machine's own speed swings
# between runs as much as the gap measured).
row() {
    local k ratios=() best
    for k in $(seq "$REPEAT"); do
        if ! pair "$k" "$2" || [ -z "$PAIR_RATIO" ]; then
            say "| device rgpu | $1 | failed (see $LOG) | | | | | |"
            fail=1
            return
        fi
        ratios+=("$PAIR_RATIO $k")
    done
    best=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (REPEAT + 1) / 2 ))p" | cut -d' ' -f2)
    local n=$WORK/t-native.$best.out r=$WORK/t.$best.out
    say "| native $NATIVE | - | $(field wall_ms_per_step "$n") | $(field cpu_ms_per_step "$n") | - | - | - | - |"
    say "| device rgpu | $1 | $(field wall_ms_per_step "$r") | $(field cpu_ms_per_step "$r") | $(field server_cpu_ms_per_step "$r") | $(cat "$WORK/busy.$best" 2>/dev/null || echo -) | $(field rgpu_waits_per_step "$r") | $(printf '%s\n' "${ratios[@]}" | awk -v k="$best" '$2 == k { print $1 }') |"
    say "(ratios of the $REPEAT pairs at $1: $(printf '%s\n' "${ratios[@]}" | cut -d' ' -f1 | paste -sd' ' | sed 's/ /, /g'))"
}
# stub_row LABEL ADDR: the same script on --device cuda through the stubs.
STUB_ROWS=${RGPU_DEVICE_STUB_ROWS:-1}
[ -n "${RGPU_STUB_SERVER:-}" ] || STUB_ROWS=0
stub_row() {
    [ "$STUB_ROWS" != 0 ] || return 0
    if timeout "$STUB_TIMEOUT" "$BUILD/launcher/rgpu" run --server "$2" -- "$PY" "$TRAIN" \
            --device cuda --steps "$STUB_STEPS" --log-every 10 --data "$DATA" >"$WORK/s.out" 2>&1; then
        say "| stubs (rgpu run) | $1 | $(field wall_ms_per_step "$WORK/s.out") | $(field cpu_ms_per_step "$WORK/s.out") | - | - | (RGPU_TRAIN table) | |"
    else
        say "| stubs (rgpu run) | $1 | failed (see $LOG) | | | | | |"
    fi
    { echo "== stubs over $1 ($2)"; cat "$WORK/s.out"; } >>"$LOG"
}

# link RTT TARGET NAME: rgpu-delay in front of TARGET at RTT ms round trip;
# sets LINK to its socket, or to "" when it does not start.
link() {
    local one_way
    one_way=$(awk "BEGIN { print $1 / 2 }")
    LINK=
    setsid "$DELAY" --listen "unix:$WORK/$3$1.sock" --to "$2" --delay-ms "$one_way" \
        >"$WORK/$3$1.log" 2>&1 &
    PIDS+=($!)
    disown
    if wait_for "$WORK/$3$1.sock" "${PIDS[-1]}"; then
        LINK=$WORK/$3$1.sock
    else
        cat "$WORK/$3$1.log" >>"$LOG"
    fi
}

row "direct" "$WORK/ops.sock"
stub_row "direct" "${RGPU_STUB_SERVER:-}"
if [ -x "$DELAY" ]; then
    for rtt in 0 1 10; do
        link "$rtt" "unix:$WORK/ops.sock" oplink
        if [ -n "$LINK" ]; then
            row "$rtt ms" "$LINK"
        else
            say "| device rgpu | $rtt ms | rgpu-delay did not start | | | | | |"
        fi
        if [ "$STUB_ROWS" != 0 ]; then
            link "$rtt" "$RGPU_STUB_SERVER" stublink
            [ -n "$LINK" ] && stub_row "$rtt ms" "unix:$LINK"
        fi
    done
fi
part "step times"
[ "$STUB_ROWS" = 0 ] || say "(stub rows: $STUB_STEPS steps each, a loss read every 10)"
say "(server busy: the share of the op server session's time spent running frames, not"
say " waiting for the next: near 100%, the op server is the slower side; in operators: the"
say " share of that running spent inside the ATen operators, the rest is rgpu's own work)"

# ---- 5. where the op server's time goes (RGPU_DEVICE_PROFILE=N) -----------------------------
if [ "${RGPU_DEVICE_PROFILE:-0}" != 0 ]; then
    start_opserver prof --profile "$RGPU_DEVICE_PROFILE"
    say ""
    say "op server profile: nanoGPT $TSTEPS steps on a profiled session (slower than the rows above),"
    say "the $RGPU_DEVICE_PROFILE functions that took most time themselves, then the operators':"
    if train rgpu "$TSTEPS" 20 "$WORK/prof.sock" "$WORK/p.out" &&
            sessions_ended "$WORK/prof.log" 1; then
        grep -E 'profile: |operators: |session: ' "$WORK/prof.log" | sed 's/^rgpu-opserver\[[0-9]*\]: //'
    else
        say "the profiled run failed (see $LOG)"
    fi
    cat "$WORK/prof.log" >>"$LOG"
    part "profile"
fi
cat "$WORK/opserver.log" >>"$LOG"
# What the session sandbox refused or killed: a CUDA session must need
# nothing it forbids.
if grep -E 'sandbox: |killed by the sandbox' "$WORK/opserver.log" >"$WORK/sandbox.txt" ||
        [ -n "${sandbox_failed:-}" ]; then
    say "op server sandbox: $(wc -l <"$WORK/sandbox.txt") lines (a session needed what it forbids):"
    head -20 "$WORK/sandbox.txt"
    fail=1
elif [ "$SANDBOX" != off ]; then
    say "op server sandbox ($SANDBOX): no system call refused, no session killed"
fi
say ""
say "logs: $LOG"
if [ $fail = 0 ]; then
    say "rgpu device check: PASS"
    exit 0
fi
say "rgpu device check: FAIL"
exit 1
