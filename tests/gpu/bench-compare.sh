#!/bin/bash
# tests/gpu/bench-compare.sh BEFORE_BUILD [BUILD] [ROUNDS]   -- on the GPU machine
#
# What a change cost: rgpu-bench through an older build (BEFORE_BUILD, a
# build dir of an earlier commit, carried like BUILD) and through this one,
# on the same machine in one run, alternating so that the host's drift
# falls on both.  Three ways in, each its own rgpud on the real libraries:
#
#   before-tcp  the old build over TCP on loopback (what it offered)
#   after-tcp   this build over TCP on loopback, with a client key (HMAC)
#   after-unix  this build over its default Unix socket
#
# Prints, per metric, the median of ROUNDS runs (default 3) of each and the
# ratios after/before; writes the same to $OUT/bench-compare.txt.  The old
# build must listen with `--listen 127.0.0.1:PORT` (every build did).
# RGPU_COMPARE_LIB_DIR=DIR: the daemons load the CUDA libraries from DIR
# (the fake backend, to try the script without a GPU; the bench then runs
# --quick).
set -u

BEFORE=$(cd "${1:?usage: $0 BEFORE_BUILD [BUILD] [ROUNDS]}" && pwd) || exit 2
AFTER=$(cd "${2:-build}" && pwd) || exit 2
ROUNDS=${3:-3}
OUTDIR=${OUT:-/tmp/rgpu-gpu}
RESULT=$OUTDIR/bench-compare.txt
CUDA_LIB=${CUDA_HOME:-/usr/local/cuda}/lib64
WORK=$(mktemp -d /tmp/rgpu-bench-compare.XXXXXX)
PIDS=()
LIB_DIR=${RGPU_COMPARE_LIB_DIR:-}
BENCH_ARGS=()
[ -n "$LIB_DIR" ] && BENCH_ARGS=(--quick)
mkdir -p "$OUTDIR"

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME RGPUD ARGS...: rgpud in the background, its log in $WORK/NAME.log.
start() {
    local name=$1 exe=$2
    shift 2
    LD_LIBRARY_PATH=$CUDA_LIB "$exe" --foreground ${LIB_DIR:+--lib-dir "$LIB_DIR"} "$@" \
        > "$WORK/$name.log" 2>&1 &
    PIDS+=($!)
}

# wait_up ADDRESS: until a Unix socket exists or a TCP port listens.
wait_up() {
    local a=$1
    for _ in $(seq 100); do
        case $a in
            unix:*) [ -S "${a#unix:}" ] && return 0 ;;
            *) python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', ${a##*:}), 1)" \
                   2>/dev/null && return 0 ;;
        esac
        sleep 0.1
    done
    echo "bench-compare: nothing listens at $a" >&2
    cat "$WORK"/*.log >&2
    exit 2
}

p_before=$(free_port)
p_after=$(free_port)
start before "$BEFORE/daemon/rgpud" --listen "127.0.0.1:$p_before"
mkdir -m 700 "$WORK/keys"
"$AFTER/daemon/rgpud" --key-dir "$WORK/keys" --new-client-key bench > "$WORK/client.key" ||
    { echo "bench-compare: cannot make a key" >&2; exit 2; }
chmod 600 "$WORK/client.key"
start after-tcp "$AFTER/daemon/rgpud" --listen "127.0.0.1:$p_after" --key-dir "$WORK/keys"
start after-unix "$AFTER/daemon/rgpud" --listen "unix:$WORK/rgpud.sock" --group none
wait_up "127.0.0.1:$p_before"
wait_up "127.0.0.1:$p_after"
wait_up "unix:$WORK/rgpud.sock"

# run CONFIG ROUND
run() {
    local cfg=$1 r=$2 build server
    case $cfg in
        before-tcp) build=$BEFORE server=127.0.0.1:$p_before ;;
        after-tcp) build=$AFTER server=127.0.0.1:$p_after ;;
        after-unix) build=$AFTER server=unix:$WORK/rgpud.sock ;;
    esac
    env LD_LIBRARY_PATH="$build/stubs" RGPU_SERVER="$server" RGPU_KEY_FILE="$WORK/client.key" \
        timeout -k 5 300 "$build/bench/rgpu-bench" "${BENCH_ARGS[@]}" > "$WORK/$cfg.$r.out" 2> "$WORK/$cfg.$r.err" ||
        { echo "bench-compare: $cfg round $r failed:"; cat "$WORK/$cfg.$r.err"; } >&2
}

CONFIGS="before-tcp after-tcp after-unix"
for r in $(seq "$ROUNDS"); do
    for cfg in $CONFIGS; do run "$cfg" "$r"; done
done

{
    echo "== bench-compare: median of $ROUNDS rounds each, alternating"
    echo "   before: $BEFORE   after: $AFTER"
    python3 - "$WORK" "$ROUNDS" $CONFIGS <<'EOF'
import statistics, sys
work, rounds, cfgs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
vals, units, order = {}, {}, []
for c in cfgs:
    for r in range(1, rounds + 1):
        try:
            lines = open(f"{work}/{c}.{r}.out").read().splitlines()
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if line.startswith('#') or len(f) != 3:
                continue
            if f[0] not in order:
                order.append(f[0])
            units[f[0]] = f[2]
            vals.setdefault((c, f[0]), []).append(float(f[1]))
med = {k: statistics.median(v) for k, v in vals.items()}
print(f"{'metric':<20} {'before-tcp':>11} {'after-tcp':>11} {'after-unix':>11} {'tcp a/b':>8} {'unix a/b':>8} unit")
for m in order:
    b, t, u = (med.get((c, m)) for c in cfgs)
    fmt = lambda x: f"{x:11.3f}" if x is not None else f"{'-':>11}"
    ratio = lambda x: f"{x / b:8.3f}" if x is not None and b else f"{'-':>8}"
    print(f"{m:<20} {fmt(b)} {fmt(t)} {fmt(u)} {ratio(t)} {ratio(u)} {units[m]}")
EOF
} | tee "$RESULT"
grep -h 'refused system call\|killed by the sandbox' "$WORK"/*.log | sort | uniq -c | head -20
