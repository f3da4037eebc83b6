#!/bin/bash
# tests/gpu/run.sh [BUILD_DIR]   -- run on the GPU machine, from the repo root
#
# Runs every test program of BUILD_DIR/tests/progs twice, natively (the real
# libcudart) and through rgpu (our stubs -> rgpud on 127.0.0.1 -> the real
# libraries), and compares their stdout byte for byte; then runs rgpu-bench
# both ways.  Writes $OUT/summary.txt and $OUT/logs.txt (OUT defaults to
# /tmp/rgpu-gpu) and prints the summary.
#
# The build dir is carried from a development machine: the GPU machine has no
# msgpack-c and no network, so nothing is rebuilt here (RGPU_REBUILD=1 tries
# ninja anyway; if it fails, the carried binaries are used).
#
# Exit status: 0 whatever the tests did (the summary says); 2 when the build
# dir or the daemon is missing or the daemon does not start.
#
# Tunables: RGPU_PROG_LIST (names of the test programs to run, shared and
# static builds alike; default all), RGPU_PROG_TIMEOUT (s, default 60), RGPU_BENCH_TIMEOUT (s, 240),
# RGPU_BENCH_ARGS (e.g. --quick), CUDA_HOME (/usr/local/cuda); RGPU_PROGS=0 and
# RGPU_BENCH=0 skip those parts, RGPU_LADDER=1 adds the PyTorch ladder
# (RGPU_LADDER_RUNGS picks rungs), RGPUD_ARGS more options for rgpud (e.g.
# --sandbox-audit), RGPU_PROFILE=1 a table of where nanogpt
# waits on the network (RGPU_PROFILE_STEPS, default 50); RGPU_PRINTF_WAITS=0
# skips the count of waits after a kernel that printed (run_printf_waits).
#
# RGPU_TRAIN=1 adds training steps over emulated links (off by default: it
# needs PyTorch and takes minutes, at most its budget below): a second rgpud on TCP
# (127.0.0.1, with a client key made for the run), bench/rgpu-delay in front
# of it at 0, 1 and 10 ms round trip (0 = the proxy without delay, so its own
# cost is in every column) besides a direct column without the proxy, and
# bench/train_bench.py's five models natively and through
# `rgpu run --server` on each link, each native run right before its rgpu
# run (RGPU_TRAIN_NATIVE_ONCE=1: native once, first, to save time).  One table: model, RTT, native ms, rgpu
# ms, ratio, waits/step, losses identical; the workers' output, rgpu's
# per-call tables (RGPU_STATS=1) included, go to $OUT/train-logs.txt.
# RGPU_TRAIN_MODELS (gpt-small,gpt-amp,convnet,gpt-bf16,resnet), RGPU_TRAIN_LINKS (one-way
# delays in ms, "direct" for no proxy; default "direct 0 0.5 5"),
# RGPU_TRAIN_WARMUP (10) and RGPU_TRAIN_STEPS (50) steps per run,
# RGPU_TRAIN_SLOW_STEPS (20) on links of 10 ms round trip or more (losses
# then compared over the steps both logged), RGPU_TRAIN_TIMEOUT (s per
# worker, 120), RGPU_TRAIN_BUDGET (s for the whole part, 210: links left
# when it runs out are skipped, a run cut short shows as a timeout),
# RGPU_TRAIN_REPEAT (1: pairs of native and rgpu runs per model and link;
# the row shows the pair of median ratio and every pair's ratio),
# RGPU_TRAIN_THREADS (PyTorch CPU threads per worker, native and rgpu
# alike, 4; 0: every core: train_bench.py's --threads says why).
# Only this part: RGPU_PROGS=0 RGPU_BENCH=0 RGPU_TRAIN=1.
#
# RGPU_DEVICE=1 adds tests/gpu/rgpu_device_check.sh (device "rgpu": nanoGPT
# through rgpu-opserver against native CUDA, and its step times over
# rgpu-delay links); its own header lists its knobs.
#
# Issue 11's roads to the driver (on by default; README.md lists them):
# BUILD/tests/progs/static/*, the test programs built with the static
# cudart, in a second table (RGPU_STATIC_PROGS=0 skips them);
# RGPU_NVCC_PROGS (1): tests/gpu/cufft_check.cu and curand_check.cu, built
# here with plain nvcc (static cudart; RGPU_NVCC_BUILD_TIMEOUT, 240 s) and
# run with RGPU_PROG_TIMEOUT; RGPU_FRAMEWORKS (1): the scripts
# tests/gpu/frameworks/NAME_check.py for NAME in RGPU_FRAMEWORK_LIST (nvml
# cupy triton jax torch_linalg torch_model torch_multigpu: nvml compares
# NVML's values read with ctypes; nvidia_smi, NVIDIA's nvidia-smi, is left
# out: it refuses any NVML but its driver's, docs/launcher.md says why),
# natively and through the launcher, each run at
# most RGPU_FRAMEWORK_TIMEOUT (150 s), all of them RGPU_FRAMEWORK_BUDGET
# (480 s); RGPU_PYTHON (python3); RGPU_ITEM_LOG (debug), the client's log
# level in these rgpu runs.  One line per item: "NAME: native OK|FAIL, rgpu
# OK|FAIL, output identical|DIFFERS", then a count of passed, failed and
# skipped items.  RGPU_SMI (1): `rgpu smi` beside nvidia-smi natively, one
# item.  RGPU_CUDNN_WAITS (1): cuDNN backend graphs built as cudnn-frontend
# builds PyTorch's convolutions (tests/progs/cudnn_frontend.cu) through rgpu
# with 2 and 6 graphs under RGPU_STATS=1: the cuDNN calls that waited per
# graph on the real cuDNN, by procedure, one item (it fails when a graph
# waits more than 16 times or a result is wrong).  Only these: RGPU_PROGS=0 RGPU_BENCH=0.
# RGPU_CUDA12 (1): tests/gpu/cuda12_check.sh, a CUDA 12 program natively
# (the build's real libcudart.so.12) and through rgpu, served by the host's
# CUDA 13 and by that CUDA 12 runtime (rgpud --cuda12-lib-dir), one item.
# RGPU_MINOR (1): tests/gpu/minor_check.sh, a program built against CUDA
# 13.5's headers natively and through rgpu on this 13.0 host, one item.
# RGPU_IPC_FILES (1): tests/gpu/ipc_files_check.sh, the driver's CUDA IPC
# files (/dev/shm/cuda.shm.*) left by rgpud's sessions once they end,
# after a clean run and a killed session (none may be), one item.
# RGPU_MULTIGPU (1): tests/gpu/multigpu_check.sh, rgpud's --devices subset
# (on one GPU too) and, with two GPUs or more, the multi-GPU programs
# natively and through rgpu, one item; the PyTorch checks on two GPUs are
# the framework script torch_multigpu (on one GPU: "SKIP (one GPU)").
# RGPU_JAX_DIAG=1 adds tests/gpu/jax_diag.sh (off by default, about 90 s):
# JAX's basics, matmuls and loops natively and through rgpu under settings
# that each take one suspect away (RGPU_SYNC=blocking and strict, no
# preallocation, no autotuning, no Triton gemm, no command buffers), one
# line each.  Only that: RGPU_PROGS=0 RGPU_BENCH=0 RGPU_NVCC_PROGS=0
# RGPU_CUDA12=0 RGPU_FRAMEWORKS=0 RGPU_SMI=0 RGPU_JAX_DIAG=1.
set -u

BUILD_ARG=${1:-build}
OUTDIR=${OUT:-/tmp/rgpu-gpu}
CUDA_LIB=${CUDA_HOME:-/usr/local/cuda}/lib64
# cuDNN and cuBLAS also come in the Python wheels PyTorch uses, often newer
# than the toolkit's: put them first, for the native runs and rgpud, so
# that both serve what PyTorch was built against (it refuses an older
# cuDNN than its own).
# The wheels' layout differs between CUDA majors (nvidia/cudnn/lib,
# nvidia/cu13/lib): look for the libraries themselves under the nvidia
# namespace of the Python that runs the checks.
wheel_lib_dirs() {
    "${RGPU_PYTHON:-python3}" - <<'PY' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit
found = []
for root in nvidia.__path__:
    for d, _, files in os.walk(root):
        if any(f.startswith(("libcudnn.so.", "libcublas.so.")) for f in files) and d not in found:
            found.append(d)
print(":".join(found))
PY
}
d=$(wheel_lib_dirs)
[ -n "$d" ] && CUDA_LIB=$d:$CUDA_LIB
PROG_TIMEOUT=${RGPU_PROG_TIMEOUT:-60}
GPU_DIR=$(cd "$(dirname "$0")" && pwd)
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
PYTHON=${RGPU_PYTHON:-python3}
# The client's log level in the issue-11 items' rgpu runs (their stderr).
ITEM_LOG=${RGPU_ITEM_LOG:-debug}
BENCH_TIMEOUT=${RGPU_BENCH_TIMEOUT:-240}
BENCH_ARGS=${RGPU_BENCH_ARGS:-}

SUMMARY=$OUTDIR/summary.txt
LOGS=$OUTDIR/logs.txt
WORK=$(mktemp -d /tmp/rgpu-gpu-work.XXXXXX)
DAEMON_PID=
SERVER=

die() {
    echo "run.sh: $*" >&2
    exit 2
}

# say LINE...: to the summary (written as we go, so that a run cut short
# still leaves its results) and to stdout.
say() {
    printf '%s\n' "$*" | tee -a "$SUMMARY"
}

# log_file TITLE FILE: append at most 64 KiB of FILE to logs.txt.
log_file() {
    {
        echo "===== $1"
        if [ -s "$2" ]; then
            head -c 65536 "$2"
            [ "$(wc -c < "$2")" -gt 65536 ] && echo "... (cut at 64 KiB)"
        else
            echo "(empty)"
        fi
        echo
    } >> "$LOGS"
}

# status_word RC: how a run ended, in one word.
status_word() {
    case $1 in
        0) echo ok ;;
        77) echo skip ;;
        124) echo timeout ;;
        137) echo killed ;;   # timeout's -k after the grace period
        *) if [ "$1" -gt 128 ]; then echo "sig$(($1 - 128))"; else echo "exit$1"; fi ;;
    esac
}

# --- the build dir ---------------------------------------------------------

check_build() {
    [ -d "$BUILD_ARG" ] || die "no build dir '$BUILD_ARG' (carry it to this machine)"
    BUILD=$(cd "$BUILD_ARG" && pwd)
    RGPUD=$BUILD/daemon/rgpud
    STUBS=$BUILD/stubs
    # The launcher finds a build's stubs beside itself only in a meson tree;
    # a packed build (tests/gpu/pack-build.sh) names them.
    export RGPU_LIB_DIR=$STUBS
    PROGS=$BUILD/tests/progs
    BENCH=$BUILD/bench/rgpu-bench
    LAUNCHER=$BUILD/launcher/rgpu

    if [ "${RGPU_REBUILD:-0}" = 1 ] && command -v ninja >/dev/null &&
       [ -f "$BUILD/build.ninja" ]; then
        # ld deletes its output when a link fails: keep copies of what we need.
        cp -a "$BUILD/daemon" "$BUILD/stubs" "$WORK/" 2>/dev/null
        if timeout 300 ninja -C "$BUILD" > "$WORK/ninja.log" 2>&1; then
            say "build: rebuilt with ninja"
        else
            say "build: ninja failed (see logs.txt); using the carried binaries"
            log_file "ninja -C $BUILD" "$WORK/ninja.log"
            cp -an "$WORK/daemon/." "$BUILD/daemon/" 2>/dev/null
            cp -an "$WORK/stubs/." "$BUILD/stubs/" 2>/dev/null
        fi
    else
        say "build: carried $BUILD, not rebuilt"
    fi
    [ -x "$RGPUD" ] || die "no daemon at $RGPUD"
    compgen -G "$STUBS/libcudart.so.*" >/dev/null || say "warning: no libcudart stub in $STUBS"
}

# --- the daemon ------------------------------------------------------------


# start_daemon: start rgpud on a Unix socket in $WORK (rgpud's default
# kind of address; it lets in its own user), with the real NVIDIA libraries
# (no --lib-dir); sets SERVER and DAEMON_PID.
start_daemon() {
    local sock=$WORK/rgpud.sock
    echo "--- rgpud on unix:$sock" >> "$WORK/rgpud.log"
    LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$RGPUD" --foreground -v --listen "unix:$sock" --group none ${RGPUD_ARGS:-} \
        >> "$WORK/rgpud.log" 2>&1 &
    DAEMON_PID=$!
    for _ in $(seq 100); do   # 10 s
        if [ -S "$sock" ]; then
            SERVER=unix:$sock
            say "rgpud: pid $DAEMON_PID listening on $SERVER"
            return 0
        fi
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    stop_daemon
    log_file "rgpud log" "$WORK/rgpud.log"
    die "rgpud did not start listening (see $LOGS)"
}

stop_daemon() {
    [ -n "$DAEMON_PID" ] || return 0
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID" 2>/dev/null
    else
        wait "$DAEMON_PID" 2>/dev/null
        echo "--- rgpud had already exited, status $?" >> "$WORK/rgpud.log"
    fi
    DAEMON_PID=
}

# shellcheck disable=SC2317  # called through trap
cleanup() {
    stop_daemon
    stop_train_helpers
    rm -rf "$WORK"
}

# --- running programs ------------------------------------------------------

# cuda_libs_of PROG LD_LIBRARY_PATH: "soname path" for each CUDA library the
# loader would pick for PROG ("not" as the path when it finds none).
cuda_libs_of() {
    LD_LIBRARY_PATH=$2 ldd "$1" 2>/dev/null |
        awk '$1 ~ /^lib(cuda|cudart|cublas|cublasLt|cudnn)\.so/ && $2 == "=>" { print $1, $3 }'
}

# run_as TAG TIMEOUT COMMAND...: COMMAND under timeout, stdout to
# $WORK/TAG.out, stderr to $WORK/TAG.err, no stdin; prints the exit status.
run_as() {
    local tag=$1 limit=$2
    shift 2
    timeout -k 5 "$limit" "$@" > "$WORK/$tag.out" 2> "$WORK/$tag.err" < /dev/null
    echo $?
}

# run_prog_as MODE NAME RGPU_LIBS PROG TIMEOUT ARGS...: run PROG natively
# (MODE native) or through rgpu (MODE rgpu, with LD_LIBRARY_PATH=RGPU_LIBS);
# stdout to $WORK/NAME.MODE.out, stderr to .err; prints the exit status.
run_prog_as() {
    local mode=$1 name=$2 libs=$3 prog=$4 limit=$5
    shift 5
    if [ "$mode" = native ]; then
        # The real runtime first; nvcc links no rpath, so the loader would
        # otherwise depend on ldconfig knowing /usr/local/cuda/lib64.
        run_as "$name.$mode" "$limit" env -u RGPU_SERVER LD_LIBRARY_PATH="$CUDA_LIB" \
            "$prog" "$@"
    else
        run_as "$name.$mode" "$limit" env LD_LIBRARY_PATH="$libs" RGPU_SERVER="$SERVER" \
            "$prog" "$@"
    fi
}

# run_one MODE PROG TIMEOUT ARGS...: PROG natively or through rgpu with
# only the stubs on its library path, output files named after PROG.
run_one() {
    local mode=$1 prog=$2 limit=$3
    shift 3
    run_prog_as "$mode" "$(basename "$prog")" "$STUBS" "$prog" "$limit" "$@"
}

# check_loader PROG: note in the summary each CUDA library that would not
# load from where it should: natively the real one, through rgpu our stub.
check_loader() {
    local prog=$1 name soname path
    name=$(basename "$prog")
    while read -r soname path; do
        case $path in "$STUBS"/*|not) say "warning: $name natively loads $soname from '$path'" ;; esac
    done < <(cuda_libs_of "$prog" "$CUDA_LIB")
    while read -r soname path; do
        case $path in "$STUBS"/*) ;; *) say "warning: $name through rgpu loads $soname from '$path', not our stub" ;; esac
    done < <(cuda_libs_of "$prog" "$STUBS")
}

# run_progs DIR TITLE [KIND]: every program in DIR natively and through rgpu,
# one table row each; KIND (e.g. static) prefixes the names shown ("static/x")
# and the work files ("static-x").
run_progs() {
    local dir=$1 title=$2 kind=${3:-} prog name tag nrc rgrc same result
    say ""
    say "== $title (timeout ${PROG_TIMEOUT}s each; identical = stdout byte for byte)"
    printf '%-20s %-8s %-8s %-9s %s\n' program native rgpu identical result | tee -a "$SUMMARY"
    for prog in "$dir"/*; do
        if [ ! -f "$prog" ] || [ ! -x "$prog" ]; then continue; fi
        name=$(basename "$prog")
        picked "$name" || continue
        tag=${kind:+$kind-}$name
        check_loader "$prog"
        nrc=$(run_prog_as native "$tag" "$STUBS" "$prog" "$PROG_TIMEOUT")
        rgrc=$(run_prog_as rgpu "$tag" "$STUBS" "$prog" "$PROG_TIMEOUT")
        if cmp -s "$WORK/$tag.native.out" "$WORK/$tag.rgpu.out"; then same=yes; else same=no; fi
        if [ "$nrc" = 0 ] && [ "$rgrc" = 0 ] && [ $same = yes ]; then
            result=PASS
        elif [ "$nrc" = 77 ] && [ "$rgrc" = 77 ]; then
            result=SKIP
        else
            result=FAIL
            log_failure "$tag"
        fi
        printf '%-20s %-8s %-8s %-9s %s\n' "${kind:+$kind/}$name" "$(status_word "$nrc")" \
            "$(status_word "$rgrc")" "$same" "$result" | tee -a "$SUMMARY"
        [ -n "$kind" ] && count_item "$result"
    done
}

# picked NAME: whether RGPU_PROG_LIST (program names, blank-separated;
# empty: every program) names it.
picked() {
    [ -z "${RGPU_PROG_LIST:-}" ] && return 0
    case " $RGPU_PROG_LIST " in *" $1 "*) return 0 ;; esac
    return 1
}

# count_item PASS|FAIL|SKIP: into the issue-11 items' closing count.
count_item() {
    case $1 in
        PASS) ITEMS_PASSED=$((ITEMS_PASSED + 1)) ;;
        SKIP) ITEMS_SKIPPED=$((ITEMS_SKIPPED + 1)) ;;
        *) ITEMS_FAILED=$((ITEMS_FAILED + 1)) ;;
    esac
}

# log_failure NAME: both runs' output and their difference into logs.txt.
log_failure() {
    local m
    for m in native rgpu; do
        log_file "$1 ($m) stdout" "$WORK/$1.$m.out"
        log_file "$1 ($m) stderr" "$WORK/$1.$m.err"
    done
    diff -u "$WORK/$1.native.out" "$WORK/$1.rgpu.out" > "$WORK/$1.diff"
    log_file "$1 stdout diff, native -> rgpu" "$WORK/$1.diff"
}

# --- issue 11: library programs built here, and Python frameworks ----------
#
# Each item runs natively and then through rgpu and gets one summary line,
# "NAME: native OK|FAIL, rgpu OK|FAIL, output identical|DIFFERS" (or "NAME:
# SKIP (why)" when the native run found a package missing), with the FAIL
# lines of its output under it.  A failure puts both runs' output, the stdout
# diff and the end of the client's and rgpud's logs into logs.txt.

ITEMS_PASSED=0
ITEMS_FAILED=0
ITEMS_SKIPPED=0

rgpud_log_lines() {
    wc -l < "$WORK/rgpud.log" 2>/dev/null || echo 0
}

# item_word RC: OK, SKIP, or FAIL with how the run ended.
item_word() {
    case $1 in
        0) echo OK ;;
        77) echo SKIP ;;
        *) echo "FAIL ($(status_word "$1"))" ;;
    esac
}

# log_tail TITLE FILE LINES: the last LINES lines of FILE into logs.txt.
log_tail() {
    tail -n "$3" "$2" > "$WORK/tail.tmp" 2>/dev/null
    log_file "$1 (last $3 lines)" "$WORK/tail.tmp"
}

# log_item_failure NAME RGPUD_FROM: what logs.txt gets for a failed item;
# RGPUD_FROM is the rgpud log's line count before the item started.
log_item_failure() {
    local name=$1 from=$2
    log_file "$name (native) stdout" "$WORK/$name.native.out"
    log_tail "$name (native) stderr" "$WORK/$name.native.err" 40
    log_file "$name (rgpu) stdout" "$WORK/$name.rgpu.out"
    log_tail "$name (rgpu) stderr, the client's log" "$WORK/$name.rgpu.err" 80
    diff -u "$WORK/$name.native.out" "$WORK/$name.rgpu.out" > "$WORK/$name.diff"
    log_file "$name stdout diff, native -> rgpu" "$WORK/$name.diff"
    tail -n +"$((from + 1))" "$WORK/rgpud.log" > "$WORK/$name.rgpud.log" 2>/dev/null
    log_tail "$name: rgpud's log during the item" "$WORK/$name.rgpud.log" 60
}

# item_report NAME NATIVE_RC RGPU_RC RGPUD_FROM: the summary line of one
# item (outputs in $WORK/NAME.{native,rgpu}.{out,err}) and the counts.
item_report() {
    local name=$1 nrc=$2 rgrc=$3 from=$4 same m
    if [ "$nrc" = 77 ]; then
        say "$name: SKIP ($(sed -n 's/^SKIP: //p' "$WORK/$name.native.out" | head -n 1))"
        count_item SKIP
        return
    fi
    if cmp -s "$WORK/$name.native.out" "$WORK/$name.rgpu.out"; then
        same=identical
    else
        same=DIFFERS
    fi
    say "$name: native $(item_word "$nrc"), rgpu $(item_word "$rgrc"), output $same"
    if [ "$nrc" = 0 ] && [ "$rgrc" = 0 ] && [ $same = identical ]; then
        count_item PASS
    else
        count_item FAIL
        for m in native rgpu; do
            grep -E '^FAIL' "$WORK/$name.$m.out" 2>/dev/null | head -n 6 | sed "s/^/    $m: /" |
                tee -a "$SUMMARY"
        done
        log_item_failure "$name" "$from"
    fi
    kill -0 "$DAEMON_PID" 2>/dev/null || say "warning: rgpud is gone after $name"
}

# build_nvcc_progs: tests/gpu/cufft_check.cu and curand_check.cu built as a
# user builds them, `nvcc -o X X.cu -lLIB` (the default static runtime), two
# at once, into $WORK/nvcc; NVCC_BUILT: the names that built.
NVCC_BUILT=()
build_nvcc_progs() {
    local spec name lib pids=() names=() i
    mkdir -p "$WORK/nvcc"
    for spec in cufft_check:cufft curand_check:curand; do
        name=${spec%%:*}
        lib=${spec#*:}
        timeout -k 5 "${RGPU_NVCC_BUILD_TIMEOUT:-240}" "$NVCC" -o "$WORK/nvcc/$name" \
            "$GPU_DIR/$name.cu" "-l$lib" > "$WORK/nvcc/$name.log" 2>&1 &
        pids+=($!)
        names+=("$name")
    done
    for i in "${!pids[@]}"; do
        if wait "${pids[$i]}" && [ -x "$WORK/nvcc/${names[$i]}" ]; then
            NVCC_BUILT+=("${names[$i]}")
        else
            say "${names[$i]}: build FAIL (nvcc; see logs.txt)"
            log_file "nvcc ${names[$i]}" "$WORK/nvcc/${names[$i]}.log"
            count_item FAIL
        fi
    done
}

# The cuFFT and cuRAND programs: natively with the toolkit's libraries;
# through rgpu with the stubs first and the toolkit's folder after them,
# since cuFFT and cuRAND themselves run on the client.
run_nvcc_progs() {
    local name nrc rgrc from
    say ""
    say "== cuFFT and cuRAND programs, nvcc with the default static cudart (timeout ${PROG_TIMEOUT}s each)"
    if [ ! -x "$NVCC" ]; then
        say "(no nvcc at $NVCC: skipped)"
        count_item SKIP
        return
    fi
    build_nvcc_progs
    for name in "${NVCC_BUILT[@]}"; do
        from=$(rgpud_log_lines)
        nrc=$(run_prog_as native "$name" "$STUBS:$CUDA_LIB" "$WORK/nvcc/$name" "$PROG_TIMEOUT")
        rgrc=$(RGPU_LOG=$ITEM_LOG run_prog_as rgpu "$name" "$STUBS:$CUDA_LIB" \
               "$WORK/nvcc/$name" "$PROG_TIMEOUT")
        item_report "$name" "$nrc" "$rgrc" "$from"
    done
}

# The CUDA 12 program against the real libcudart.so.12 and through rgpu
# (tests/gpu/cuda12_check.sh, with its own rgpud): one item.
run_cuda12() {
    run_program_check "CUDA 12" cuda12_check cuda12_prog
}

# A program built against the stubs' newer CUDA 13 (13.5) on this 13.0 host,
# natively and through rgpu (tests/gpu/minor_check.sh, with its own rgpud).
run_minor() {
    run_program_check "CUDA 13.x on a 13.0 host" minor_check minor_prog
}

# The driver's CUDA IPC files do not outlive rgpud's sessions
# (tests/gpu/ipc_files_check.sh, with its own sandboxed rgpud): one item.
run_ipc_files() {
    run_program_check "CUDA IPC files in /dev/shm" ipc_files_check progs/ipc
}

# run_program_check TITLE SCRIPT PROGRAM: tests/gpu/SCRIPT.sh, which runs
# BUILD/tests/PROGRAM natively and through rgpu, as one item.
run_program_check() {
    say ""
    say "== $1: tests/gpu/$2.sh"
    if [ ! -x "$BUILD/tests/$3" ]; then
        say "(no tests/$3 in the build: skipped)"
        count_item SKIP
        return
    fi
    script_item "$2" "^$2: " "$GPU_DIR/$2.sh" "$BUILD"
}

# script_item NAME PATTERN SCRIPT ARGS...: a check script as one item: its
# lines matching PATTERN into the summary, the whole output into logs.txt
# when it fails (exit status not 0).
script_item() {
    local name=$1 pattern=$2
    shift 2
    "$@" > "$WORK/$name.out" 2>&1
    local rc=$?
    grep -- "$pattern" "$WORK/$name.out" | tee -a "$SUMMARY"
    if [ $rc = 0 ]; then
        count_item PASS
    else
        count_item FAIL
        log_file "$*" "$WORK/$name.out"
    fi
}

# cuDNN backend graphs as cudnn-frontend builds PyTorch's convolutions: the
# cuDNN calls that waited for rgpud per graph, the 4 extra graphs' of a run
# with 6 over one with 2, by procedure (RGPU_STATS tables).
run_cudnn_waits() {
    local prog=$PROGS/cudnn_frontend n rc=0
    say ""
    say "== cuDNN backend graphs through rgpu: waits per graph (tests/progs/cudnn_frontend.cu)"
    if [ ! -x "$prog" ]; then
        say "cudnn-waits: SKIP (no cudnn_frontend in the build)"
        count_item SKIP
        return
    fi
    export RGPU_STATS=1
    for n in 2 6; do
        [ "$(run_prog_as rgpu "cudnn-waits-$n" "$STUBS" "$prog" "$PROG_TIMEOUT" graphs $n)" = 0 ] ||
            rc=1
        awk '$1 == "rgpu:" && NF == 4 && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ &&
             $4 ~ /^(cudnn|rgpu_cudnn)/ { print $4, $2 }' "$WORK/cudnn-waits-$n.rgpu.err" |
            sort > "$WORK/cudnn-waits-$n.stats"
    done
    unset RGPU_STATS
    join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$WORK/cudnn-waits-2.stats" "$WORK/cudnn-waits-6.stats" |
        awk '{ d = ($3 - $2) / 4; t += d; if (d) printf "cudnn-waits:   %-32s %g\n", $1, d }
             END { printf "cudnn-waits: %g per graph\n", t; exit !(t <= 16) }' |
        tee -a "$SUMMARY"
    [ "${PIPESTATUS[1]}" = 0 ] || rc=1
    grep -q '^ok graph 5: convolution result$' "$WORK/cudnn-waits-6.rgpu.out" || rc=1
    if [ $rc = 0 ]; then
        say "cudnn-waits: PASS"
        count_item PASS
    else
        say "cudnn-waits: FAIL"
        count_item FAIL
        log_file "cudnn_frontend graphs 6 (rgpu) stdout" "$WORK/cudnn-waits-6.rgpu.out"
        log_file "cudnn_frontend graphs 6 (rgpu) stderr" "$WORK/cudnn-waits-6.rgpu.err"
    fi
}

# rgpud's device subset and several GPUs (tests/gpu/multigpu_check.sh,
# with its own rgpud): one item.
run_multigpu() {
    say ""
    say "== several GPUs and --devices: tests/gpu/multigpu_check.sh"
    if [ ! -x "$BUILD/tests/devlist" ] || [ ! -x "$BUILD/tests/multidev" ]; then
        say "(no tests/devlist or tests/multidev in the build: skipped)"
        count_item SKIP
        return
    fi
    script_item multigpu '^multigpu_check: \|^    native: \|^    rgpu smi: ' \
        env RGPU_CUDA_LIB="$CUDA_LIB" "$GPU_DIR/multigpu_check.sh" "$BUILD"
}

# run_python MODE NAME SCRIPT LIMIT: a check script natively (the user's
# environment as it is) or through rgpu (`rgpu run`, as a user runs it, or
# the stubs preloaded by hand when the build has no launcher).
run_python() {
    local mode=$1 name=$2 script=$3 limit=$4 watchdog
    # The script's own watchdog fires first, so that a hang leaves a Python
    # stack in the log rather than nothing.
    watchdog=$((limit > 30 ? limit - 10 : limit))
    if [ "$mode" = native ]; then
        run_as "$name.$mode" "$limit" env -u RGPU_SERVER RGPU_CHECK_TIMEOUT="$watchdog" \
            "$PYTHON" "$script"
    elif [ -x "$LAUNCHER" ]; then
        run_as "$name.$mode" "$limit" env RGPU_CHECK_TIMEOUT="$watchdog" RGPU_LOG="$ITEM_LOG" \
            "$LAUNCHER" run --server "$SERVER" -- "$PYTHON" "$script"
    else
        run_as "$name.$mode" "$limit" env RGPU_CHECK_TIMEOUT="$watchdog" RGPU_LOG="$ITEM_LOG" \
            LD_PRELOAD="$(stub_preload)" RGPU_SERVER="$SERVER" \
            LD_LIBRARY_PATH="$STUBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$PYTHON" "$script"
    fi
}

# shellcheck source=tests/gpu/jax_diag.sh
. "$GPU_DIR/jax_diag.sh"

# The framework scripts of tests/gpu/frameworks, within one time budget.
run_frameworks() {
    local per=${RGPU_FRAMEWORK_TIMEOUT:-150} name script nrc rgrc from left limit
    local deadline=$((SECONDS + ${RGPU_FRAMEWORK_BUDGET:-480}))
    say ""
    say "== frameworks: tests/gpu/frameworks/*_check.py (timeout ${per}s per run)"
    if [ -x "$LAUNCHER" ]; then
        say "(through $LAUNCHER run --server $SERVER)"
    else
        say "(no launcher in the build: through LD_PRELOAD of the stubs)"
    fi
    for name in ${RGPU_FRAMEWORK_LIST:-nvml cupy triton jax torch_linalg torch_model torch_multigpu}; do
        script=$GPU_DIR/frameworks/${name}_check.py
        if [ ! -f "$script" ]; then
            say "$name: no $script"
            count_item FAIL
            continue
        fi
        left=$((deadline - SECONDS))
        if [ "$left" -lt 60 ]; then
            say "$name: SKIP (${left}s left of RGPU_FRAMEWORK_BUDGET)"
            count_item SKIP
            continue
        fi
        limit=$((per < left / 2 ? per : left / 2))
        from=$(rgpud_log_lines)
        nrc=$(run_python native "$name" "$script" "$limit")
        if [ "$nrc" = 77 ]; then
            rgrc=77     # a package is missing: nothing to run through rgpu
        else
            rgrc=$(run_python rgpu "$name" "$script" "$limit")
        fi
        item_report "$name" "$nrc" "$rgrc" "$from"
    done
}

# `rgpu smi` beside nvidia-smi: the table goes into the summary, and each
# GPU nvidia-smi lists natively must be in it under its name (the first 23
# characters, the table's column) and PCI bus id.
run_rgpu_smi() {
    local name bus missing=0
    say ""
    say "== rgpu smi --server $SERVER (beside nvidia-smi --query-gpu natively)"
    if [ ! -x "$LAUNCHER" ]; then
        say "rgpu-smi: SKIP (no launcher in the build)"
        count_item SKIP
        return
    fi
    nvidia-smi --query-gpu=name,pci.bus_id --format=csv,noheader > "$WORK/smi.native" 2>&1
    tee -a "$SUMMARY" < "$WORK/smi.native"
    timeout -k 5 60 "$LAUNCHER" smi --server "$SERVER" > "$WORK/smi.rgpu" 2>&1
    local rc=$?
    tee -a "$SUMMARY" < "$WORK/smi.rgpu"
    while IFS=, read -r name bus; do
        bus=${bus# }
        if ! grep -qF -- "${name:0:23}" "$WORK/smi.rgpu" || ! grep -qiF -- "$bus" "$WORK/smi.rgpu"; then
            say "    rgpu smi lacks '$name' at $bus"
            missing=$((missing + 1))
        fi
    done < "$WORK/smi.native"
    if [ "$rc" = 0 ] && [ "$missing" = 0 ] && [ -s "$WORK/smi.native" ]; then
        say "rgpu-smi: OK (every GPU under its name and bus id)"
        count_item PASS
    else
        say "rgpu-smi: FAIL (exit $rc, $missing GPUs missing)"
        count_item FAIL
    fi
}

# --- the benchmark ---------------------------------------------------------

# metric_value FILE NAME: the value of one "name value unit" line.
metric_value() {
    awk -v m="$2" '$1 == m { print $2; exit }' "$1"
}

run_bench() {
    local nrc rgrc m n r unit
    say ""
    if [ ! -x "$BENCH" ]; then
        say "== bench: no $BENCH"
        return
    fi
    # shellcheck disable=SC2086  # BENCH_ARGS is a word list
    nrc=$(run_one native "$BENCH" "$BENCH_TIMEOUT" $BENCH_ARGS)
    # shellcheck disable=SC2086
    rgrc=$(run_one rgpu "$BENCH" "$BENCH_TIMEOUT" $BENCH_ARGS)
    say "== bench ${BENCH_ARGS:-(full size)}: native $(status_word "$nrc"), rgpu $(status_word "$rgrc"); ratio = rgpu / native"
    grep -h '^#' "$WORK/rgpu-bench.native.out" | head -n 1 | tee -a "$SUMMARY"
    printf '%-20s %12s %12s %8s %s\n' metric native rgpu ratio unit | tee -a "$SUMMARY"
    # Metric names in the order either run printed them (a failed run may
    # have printed fewer).
    for m in $(cat "$WORK/rgpu-bench.native.out" "$WORK/rgpu-bench.rgpu.out" |
               awk '!/^#/ && NF == 3 && !seen[$1]++ { print $1 }'); do
        n=$(metric_value "$WORK/rgpu-bench.native.out" "$m")
        r=$(metric_value "$WORK/rgpu-bench.rgpu.out" "$m")
        unit=$(cat "$WORK/rgpu-bench.native.out" "$WORK/rgpu-bench.rgpu.out" |
               awk -v m="$m" '$1 == m { print $3; exit }')
        awk -v m="$m" -v n="${n:--}" -v r="${r:--}" -v u="$unit" 'BEGIN {
                ratio = (n != "-" && r != "-" && n + 0 != 0) ? sprintf("%.2f", r / n) : "-"
                printf "%-20s %12s %12s %8s %s\n", m, n, r, ratio, u }' | tee -a "$SUMMARY"
    done
    [ "$nrc" = 0 ] || { log_file "bench (native) stdout" "$WORK/rgpu-bench.native.out"
                        log_file "bench (native) stderr" "$WORK/rgpu-bench.native.err"; }
    [ "$rgrc" = 0 ] || { log_file "bench (rgpu) stdout" "$WORK/rgpu-bench.rgpu.out"
                         log_file "bench (rgpu) stderr" "$WORK/rgpu-bench.rgpu.err"; }
}

# The PyTorch ladder (tests/gpu/ladder.py), natively and through rgpu.
run_ladder() {
    say ""
    say "== PyTorch ladder: native vs rgpu (stubs preloaded)"
    local launcher=$BUILD/launcher/rgpu
    [ -x "$launcher" ] && say "(through $launcher run --server $SERVER)"
    RGPU_LAUNCHER=$([ -x "$launcher" ] && realpath "$launcher") \
    timeout 900 python3 "$(dirname "$0")/ladder.py" compare "$STUBS" "$SERVER" \
        ${RGPU_LADDER_RUNGS:-} 2>&1 | tee -a "$SUMMARY"
}

# Where a training step waits: examples/nanogpt through rgpu with RGPU_STATS=1,
# whose table of calls that waited for a reply (and those that did not) goes
# to the summary.  It steers the performance work.
run_profile() {
    local steps=${RGPU_PROFILE_STEPS:-50}
    say ""
    say "== where rgpu waits: examples/nanogpt, $steps steps, RGPU_STATS=1"
    LD_PRELOAD=$(stub_preload) RGPU_SERVER=$SERVER RGPU_STATS=1 \
    LD_LIBRARY_PATH=$STUBS:${LD_LIBRARY_PATH:-} \
    timeout 300 python3 "$(dirname "$0")/../../examples/nanogpt/train.py" --steps "$steps" \
        --log-every "$steps" --data /tmp/rgpu-nanogpt-data.txt > "$WORK/profile.out" 2>&1
    say "exit status $?"
    grep -E '^(rgpu: |mean_step_ms)' "$WORK/profile.out" | head -45 | tee -a "$SUMMARY"
    log_file "nanogpt profile" "$WORK/profile.out"
}

# Synchronises wait only after kernels that may printf
# (docs/synchronisation.md): tests/progs/printf_step through rgpu for 20 and
# 60 training-like steps after one kernel of its module printed, under
# RGPU_STATS=1, through the runtime, the driver API and with 64 MiB batches;
# the 40 extra steps may wait for their 4 loss reads only.
run_printf_waits() {
    local variant steps w20 w60
    say ""
    say "== waits after a printf: printf_step, 40 extra steps (want 4: the loss reads)"
    for variant in runtime driver big; do
        for steps in 20 60; do
            RGPU_STATS=1 run_prog_as rgpu "printf-waits-$variant-$steps" "$STUBS" \
                "$PROGS/printf_step" "$PROG_TIMEOUT" "$steps" "$variant" > /dev/null
        done
        w20=$(awk '$1 == "rgpu:" && $3 == "calls" && $4 == "waited" { print $2 }' \
            "$WORK/printf-waits-$variant-20.rgpu.err")
        w60=$(awk '$1 == "rgpu:" && $3 == "calls" && $4 == "waited" { print $2 }' \
            "$WORK/printf-waits-$variant-60.rgpu.err")
        if [ -n "$w20" ] && [ -n "$w60" ] && [ $((w60 - w20)) -eq 4 ]; then
            say "printf_step $variant: $((w60 - w20)) waits in 40 steps: PASS"
        else
            say "printf_step $variant: ${w20:-?} waits in 20 steps, ${w60:-?} in 60: FAIL"
            log_file "printf_step $variant, 60 steps, stderr" \
                "$WORK/printf-waits-$variant-60.rgpu.err"
        fi
    done
}

# --- training over emulated links (RGPU_TRAIN=1) -----------------------------

TRAIN_RGPUD_PID=
DELAY_PID=

# shellcheck disable=SC2317  # also called from cleanup
stop_train_helpers() {
    local p
    for p in $DELAY_PID $TRAIN_RGPUD_PID; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    DELAY_PID=
    TRAIN_RGPUD_PID=
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_line FILE TEXT PID: until FILE holds TEXT (10 s), while PID lives.
wait_line() {
    for _ in $(seq 100); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# start_train_rgpud: rgpud on TCP, as a user across a network reaches it,
# with a key made for this run (RGPU_KEY_FILE); sets TRAIN_SERVER.
start_train_rgpud() {
    local port log=$WORK/rgpud-tcp.log
    port=$(free_port) || return 1
    mkdir -m 700 "$WORK/keys" &&
        "$RGPUD" --key-dir "$WORK/keys" --new-client-key train > "$WORK/train.key" 2>> "$log" &&
        chmod 600 "$WORK/train.key" || return 1
    # shellcheck disable=SC2086  # RGPUD_ARGS is a word list
    LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$RGPUD" --foreground -v --listen "127.0.0.1:$port" --key-dir "$WORK/keys" \
        ${RGPUD_ARGS:-} >> "$log" 2>&1 &
    TRAIN_RGPUD_PID=$!
    wait_line "$log" "listening on 127.0.0.1:$port" "$TRAIN_RGPUD_PID" || return 1
    TRAIN_SERVER=127.0.0.1:$port
}

# start_delay ONE_WAY_MS: rgpu-delay in front of TRAIN_SERVER; sets LINK_SERVER.
start_delay() {
    local port log=$WORK/rgpu-delay.$1.log
    port=$(free_port) || return 1
    "$BUILD/bench/rgpu-delay" --listen "127.0.0.1:$port" --to "$TRAIN_SERVER" \
        --delay-ms "$1" > "$log" 2>&1 &
    DELAY_PID=$!
    wait_line "$log" "listening on" "$DELAY_PID" || return 1
    LINK_SERVER=127.0.0.1:$port
}

run_train() {
    local tb launcher=$BUILD/launcher/rgpu link label n=0 left rtt jsons=() native
    local warmup=${RGPU_TRAIN_WARMUP:-10} steps=${RGPU_TRAIN_STEPS:-50}
    local models=${RGPU_TRAIN_MODELS:-gpt-small,gpt-amp,convnet,gpt-bf16,resnet}
    local per=${RGPU_TRAIN_TIMEOUT:-120} deadline=$((SECONDS + ${RGPU_TRAIN_BUDGET:-210}))
    local slow_steps=${RGPU_TRAIN_SLOW_STEPS:-20} link_steps threads=${RGPU_TRAIN_THREADS:-4}
    local trainlog=$OUTDIR/train-logs.txt
    tb=$(cd "$(dirname "$0")/../.." && pwd)/bench/train_bench.py
    say ""
    say "== training steps over emulated links: $models; $warmup + $steps steps ($warmup + $slow_steps from 10 ms RTT), mean ms per step; $threads PyTorch CPU threads per worker"
    [ -x "$BUILD/bench/rgpu-delay" ] || { say "(no $BUILD/bench/rgpu-delay: skipped)"; return; }
    [ -x "$launcher" ] || { say "(no $launcher: skipped)"; return; }
    if ! start_train_rgpud; then
        say "(rgpud on TCP did not start: skipped; see logs.txt)"
        log_file "rgpud on TCP" "$WORK/rgpud-tcp.log"
        stop_train_helpers
        return
    fi
    : > "$trainlog"
    local torch=yes
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        > /dev/null 2>&1 || torch=no
    [ $torch = yes ] || say "(PyTorch with CUDA is not importable here: only the links' round trips)"
    if [ $torch = yes ] && [ "${RGPU_TRAIN_NATIVE_ONCE:-0}" = 1 ]; then
        timeout -k 10 $((deadline - SECONDS)) python3 "$tb" compare --models "$models" \
            --label native --warmup "$warmup" --steps "$steps" --timeout "$per" --threads "$threads" \
            --json "$WORK/train-native.json" --log "$trainlog" > "$WORK/train-native.out" 2>&1
        cat "$WORK/train-native.out" >> "$LOGS"
    fi
    for link in ${RGPU_TRAIN_LINKS:-direct 0 0.5 5}; do
        n=$((n + 1))
        left=$((deadline - SECONDS))
        link_steps=$steps
        if [ "$link" != direct ] && awk -v d="$link" 'BEGIN { exit !(2 * d >= 10) }'; then
            link_steps=$slow_steps
        fi
        if [ "$link" = direct ]; then
            label=direct
            LINK_SERVER=$TRAIN_SERVER
        else
            label="$(awk -v d="$link" 'BEGIN { printf "%g ms", 2 * d }')"
            if ! start_delay "$link"; then
                say "$label: rgpu-delay did not start (see logs.txt)"
                log_file "rgpu-delay $link" "$WORK/rgpu-delay.$link.log"
                stop_train_helpers_delay
                continue
            fi
        fi
        # The round trip a program sees on this link (the launcher's probe).
        rtt=$(RGPU_KEY_FILE=$WORK/train.key timeout 60 "$launcher" info --server "$LINK_SERVER" \
                  2>&1 | awk '/^round trip/ { sub(/^round trip +/, ""); print; exit }')
        say "link $label (${LINK_SERVER}${DELAY_PID:+ via rgpu-delay -> $TRAIN_SERVER}): round trip ${rtt:-unknown}"
        if [ $torch = yes ] && [ "$left" -ge 30 ]; then
            # Native again beside each link's runs (RGPU_TRAIN_NATIVE_ONCE=1: the
            # first pass's numbers): the host's speed drifts by tens of percent
            # between minutes, and a ratio is only as good as its pair.
            native=()
            [ "${RGPU_TRAIN_NATIVE_ONCE:-0}" = 1 ] && native=(--no-native)
            [ "${RGPU_TRAIN_NATIVE_ONCE:-0}" = 1 ] && [ -s "$WORK/train-native.json" ] &&
                native=(--native-from "$WORK/train-native.json")
            RGPU_KEY_FILE=$WORK/train.key timeout -k 10 "$left" python3 "$tb" compare \
                --models "$models" --label "$label" --warmup "$warmup" --steps "$link_steps" \
                --timeout "$((per < left ? per : left))" --repeat "${RGPU_TRAIN_REPEAT:-1}" \
                --threads "$threads" \
                "${native[@]}" \
                --rgpu "$launcher run --server $LINK_SERVER --" \
                --json "$WORK/train-$n.json" --log "$trainlog" > "$WORK/train-$n.out" 2>&1
            echo "compare over $label: exit status $?" >> "$WORK/train-$n.out"
            cat "$WORK/train-$n.out" >> "$LOGS"
            jsons+=("$WORK/train-$n.json")
        elif [ $torch = yes ]; then
            say "$label: skipped, ${left}s left of RGPU_TRAIN_BUDGET"
        fi
        stop_train_helpers_delay
    done
    if [ ${#jsons[@]} -gt 0 ]; then
        say "ratio = rgpu / native; waits/step and unwaited: requests per step that waited"
        say "for rgpud's reply / did not; CPU n/r: CPU ms per step of the busiest thread"
        say "of the native and the rgpu process (train-logs: the six busiest); losses identical: every logged loss, exactly"
        python3 "$tb" table "${jsons[@]}" | tee -a "$SUMMARY"
        say "(workers' output and rgpu's per-call tables: $trainlog)"
    fi
    stop_train_helpers
    # Where each session's time went (rgpud says it as a session ends), in
    # the order of the runs: the link probes' sessions and the workers'.
    { echo "===== rgpud's sessions, in order"
      grep -E "session: [0-9]+ requests" "$WORK/rgpud-tcp.log"; } >> "$trainlog"
    log_file "rgpud on TCP" "$WORK/rgpud-tcp.log"
}

# shellcheck disable=SC2317
stop_train_helpers_delay() {
    if [ -n "$DELAY_PID" ]; then
        kill "$DELAY_PID" 2>/dev/null
        wait "$DELAY_PID" 2>/dev/null
    fi
    DELAY_PID=
}

# The stub libraries to preload, colon-separated.
stub_preload() {
    local n list=
    for n in librgpu-client.so.0 libcuda.so.1 libcudart.so.13 libcublasLt.so.13 \
             libcublas.so.13 libcudnn.so.9; do
        [ -e "$STUBS/$n" ] && list=$list${list:+:}$STUBS/$n
    done
    echo "$list"
}

gpu_name() {
    local g
    g=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    echo "${g:-unknown (nvidia-smi failed)}"
}

# --- main ------------------------------------------------------------------

# What rgpud refused or warned about during the run, counted by kind (the
# sandbox's refused system calls, sessions it killed, handles and pointers
# the checks turned away): a legitimate program should cause none.
# The TCP rgpud of RGPU_TRAIN counts too (rgpud-tcp.log).
rgpud_warnings() {
    local logs=("$WORK/rgpud.log")
    [ -f "$WORK/rgpud-tcp.log" ] && logs+=("$WORK/rgpud-tcp.log")
    say ""
    say "== rgpud warnings and errors (count, line without pid)"
    if ! grep -Ehq ': (warning|error): |sandbox: ' "${logs[@]}"; then
        say "(none)"
        return
    fi
    grep -Eh ': (warning|error): |sandbox: ' "${logs[@]}" |
        sed -E 's/^rgpud\[[0-9]+\]: //; s/session [0-9]+/session N/g; s/[0-9]+ active/N active/' |
        sort | uniq -c | sort -rn | head -n 30 | tee -a "$SUMMARY"
}

main() {
    mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
    : > "$SUMMARY"
    : > "$LOGS"
    trap cleanup EXIT
    trap 'exit 2' INT TERM

    say "rgpu GPU test, $(date -u '+%Y-%m-%d %H:%M:%SZ') on $(hostname)"
    say "gpu: $(gpu_name)"
    check_build
    start_daemon
    if [ "${RGPU_PROGS:-1}" = 0 ]; then
        :
    elif [ -d "$PROGS" ]; then
        run_progs "$PROGS" "test programs"
        # The same programs built with nvcc's default static runtime.
        if [ "${RGPU_STATIC_PROGS:-1}" != 0 ] && [ -d "$PROGS/static" ]; then
            run_progs "$PROGS/static" "test programs built with -cudart static" static
        fi
    else
        say "== no test programs in $PROGS"
    fi
    [ "${RGPU_NVCC_PROGS:-1}" = 0 ] || run_nvcc_progs
    [ "${RGPU_CUDA12:-1}" = 0 ] || run_cuda12
    [ "${RGPU_MINOR:-1}" = 0 ] || run_minor
    [ "${RGPU_IPC_FILES:-1}" = 0 ] || run_ipc_files
    [ "${RGPU_MULTIGPU:-1}" = 0 ] || run_multigpu
    [ "${RGPU_FRAMEWORKS:-1}" = 0 ] || run_frameworks
    [ "${RGPU_SMI:-1}" = 0 ] || run_rgpu_smi
    [ "${RGPU_CUDNN_WAITS:-1}" = 0 ] || run_cudnn_waits
    [ "${RGPU_JAX_DIAG:-0}" = 0 ] || run_jax_diag
    if [ $((ITEMS_PASSED + ITEMS_FAILED + ITEMS_SKIPPED)) -gt 0 ]; then
        say ""
        say "issue-11 items: $ITEMS_PASSED passed, $ITEMS_FAILED failed, $ITEMS_SKIPPED skipped"
    fi
    [ "${RGPU_PRINTF_WAITS:-1}" = 0 ] || [ ! -x "$PROGS/printf_step" ] || run_printf_waits
    [ "${RGPU_BENCH:-1}" = 0 ] || run_bench
    [ -n "${RGPU_LADDER:-}" ] && run_ladder
    [ -n "${RGPU_PROFILE:-}" ] && run_profile
    [ "${RGPU_TRAIN:-0}" = 0 ] || run_train
    # Device "rgpu" (issue 16): nanoGPT through the op server vs native.
    if [ "${RGPU_DEVICE:-0}" != 0 ]; then
        say ""
        say "== device rgpu: tests/gpu/rgpu_device_check.sh"
        RGPU_STUB_SERVER=$SERVER bash "$GPU_DIR/rgpu_device_check.sh" "$BUILD_ARG" 2>&1 |
            tee -a "$LOGS"
    fi

    kill -0 "$DAEMON_PID" 2>/dev/null || say "warning: rgpud died during the run"
    stop_daemon
    rgpud_warnings
    log_file "rgpud log" "$WORK/rgpud.log"
    say ""
    say "logs: $LOGS"
    exit 0
}

main
