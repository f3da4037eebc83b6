#!/bin/bash
# A training step waits for the network only to read the loss:
#
#   step-roundtrips.sh <build-dir> <program> [ARGS...]
#
# Runs the program (tests/progs/train_step, printf_step) through rgpu
# (run-prog.sh) as `program STEPS ARGS...` for 20 and for 60 steps under
# RGPU_STATS=1.  train_step's ARGS: CONFIGS more launches of as many
# configurations per step (train_step.cu says why); printf_step's: `driver`
# for the driver API, `big` for batches of 32 KiB, 1 MiB and 64 MiB
# (printf_step.cu).  The 40 extra steps read the loss 4 times, and
# nothing else of theirs may wait: the batch copies and their stream
# synchronise, the gemm, the device-to-device copy, the launches, the event
# synchronise all go without waiting.  The per-procedure table of both runs
# is printed, so a failure names the call that waited.
#
# rgpud's side too: the fake GPU counts the stream synchronises the session
# makes (FAKEGPU_SYNC_COUNT_FILE).  Over the 40 extra steps it may make one
# per stream synchronise of the program and one per copy to the host, and
# none for the copies to the device that went without waiting: those must
# not make rgpud, and the requests behind them, wait for the GPU
# (daemon/copy.c, "the staging ring").
set -u
build=$1
prog=$2
shift 2
args=("$@")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-steprt.XXXXXX") || exit 1
syncs=$tmp/syncs
trap 'rm -rf "$tmp"' EXIT

# waited STEPS: run, keep the table, print the total of waiting calls.
waited() {
    if ! FAKEGPU_SYNC_COUNT_FILE="$syncs.$1" RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" "$1" "${args[@]}" >"$tmp/out.$1" 2>"$tmp/err.$1"; then
        cat "$tmp/out.$1" "$tmp/err.$1" >&2
        echo "step-roundtrips: $prog $1 failed" >&2
        exit 1
    fi
    awk '$1 == "rgpu:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/' "$tmp/err.$1" >"$tmp/table.$1"
    awk '$1 == "rgpu:" && $3 == "calls" && $4 == "waited" { print $2 }' "$tmp/err.$1"
}
w20=$(waited 20)
w60=$(waited 60)
echo "waited/unwaited per procedure, 20 steps:"
cat "$tmp/table.20"
echo "waited/unwaited per procedure, 60 steps:"
cat "$tmp/table.60"
echo "calls that waited: $w20 in 20 steps, $w60 in 60 steps"
if [ -z "$w20" ] || [ -z "$w60" ]; then
    echo "FAIL: no RGPU_STATS totals"
    exit 1
fi
if [ $((w60 - w20)) -ne 4 ]; then
    echo "FAIL: the 40 extra steps waited $((w60 - w20)) times; only their 4 loss reads may"
    join -a 1 -a 2 -1 4 -2 4 -e 0 -o 0,1.2,2.2 <(sort -k4 "$tmp/table.20") <(sort -k4 "$tmp/table.60") |
        awk '$2 != $3 { print "  " $1 ": " $2 " -> " $3 " waited" }'
    exit 1
fi
echo "ok: 40 extra steps, 4 waiting calls (the loss reads)"

# server_syncs STEPS: the stream synchronises rgpud's session made.
server_syncs() {
    tr -d ' ' <"$syncs.$1" 2>/dev/null || echo 0
}
# allowed STEPS: the program's stream synchronises and copies to the host.
allowed() {
    awk '$5 == "" && ($4 ~ /StreamSynchronize/ || $4 ~ /^rgpu(_cu)?_dtoh/) { n += $2 + $3 } END { print n + 0 }' \
        "$tmp/table.$1"
}
s20=$(server_syncs 20)
s60=$(server_syncs 60)
a=$(( $(allowed 60) - $(allowed 20) ))
echo "rgpud's stream synchronises: $s20 in 20 steps, $s60 in 60 steps (at most $a more allowed)"
if [ $((s60 - s20)) -gt "$a" ]; then
    echo "FAIL: rgpud waited for the GPU $((s60 - s20)) times in the 40 extra steps;" \
         "the program's synchronises and copies to the host account for $a"
    exit 1
fi
echo "ok: rgpud waited for its stream $((s60 - s20)) times in 40 steps"
