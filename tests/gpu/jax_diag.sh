# shellcheck shell=bash
# tests/gpu/jax_diag.sh -- sourced by tests/gpu/run.sh (RGPU_JAX_DIAG=1)
#
# Which part of rgpu JAX's wrong answers come from, in one short run:
# tests/gpu/frameworks/jax_check.py's parts "basics matmul loops" (the
# matmul's inputs to the device and back, one elementwise kernel, one
# reduction; the matmuls; fori_loop, scan, while_loop) natively, then
# through rgpu under settings that each take one suspect away:
#
#   rgpu                    as a user runs it (client log at debug level,
#                           RGPU_STATS=1: kept in $OUT/jax-diag-rgpu.log)
#   RGPU_SYNC=blocking      every call waits for its reply: nothing runs ahead
#   no preallocation        XLA_PYTHON_CLIENT_PREALLOCATE=false: no region
#                           of 75% of the GPU, so a device range is unlikely
#                           to overlap the client's own memory
#   no autotuning           --xla_gpu_autotune_level=0: no candidate kernels
#                           loaded, run and unloaded before the real ones
#   RGPU_SYNC=strict        synchronises and copies wait
#   no Triton gemm          --xla_gpu_enable_triton_gemm=false: cuBLAS
#                           matmuls instead of XLA's TMA kernels
#   no command buffers      --xla_gpu_enable_command_buffer= (no CUDA graphs)
#
# One line each: "jax-diag LABEL: OK|FAIL (how it ended), N checks, F
# failed, S s", the first failing checks under it; under the first rgpu
# line, the client log's lines that name a suspect (overlapping
# addresses, export tables, refusals, failures), counted.  Everything also
# goes to $OUT/summary.txt; each run's output to logs.txt when it failed.
# RGPU_JAX_DIAG_BUDGET (90 s) bounds the whole part, RGPU_JAX_DIAG_TIMEOUT
# (40 s) one run: settings left when the budget is spent are skipped.
#
# Uses run.sh's helpers and settings (say, run_as, log_file, stub_preload,
# PYTHON, LAUNCHER, SERVER, STUBS, WORK, GPU_DIR, OUTDIR).

JAX_DIAG_PARTS="basics matmul loops"

# jax_diag_run TAG ENV...: jax_check.py's parts through rgpu with ENV
# (VAR=value words) added, or natively for TAG native; prints the exit status.
jax_diag_run() {
    local tag=$1 limit=$2
    shift 2
    local script=$GPU_DIR/frameworks/jax_check.py
    # shellcheck disable=SC2086  # the parts are words
    if [ "$tag" = native ]; then
        run_as "jax-diag-$tag" "$limit" env -u RGPU_SERVER "$@" "$PYTHON" "$script" \
            $JAX_DIAG_PARTS
    elif [ -x "$LAUNCHER" ]; then
        run_as "jax-diag-$tag" "$limit" env RGPU_LOG=debug "$@" \
            "$LAUNCHER" run --server "$SERVER" -- "$PYTHON" "$script" $JAX_DIAG_PARTS
    else
        run_as "jax-diag-$tag" "$limit" env RGPU_LOG=debug "$@" LD_PRELOAD="$(stub_preload)" \
            RGPU_SERVER="$SERVER" LD_LIBRARY_PATH="$STUBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$PYTHON" "$script" $JAX_DIAG_PARTS
    fi
}

# jax_diag_line LABEL TAG RC SECONDS: the summary line of one run.
jax_diag_line() {
    local label=$1 tag=$2 rc=$3 secs=$4 out=$WORK/jax-diag-$2.out checks failed word
    checks=$(grep -cE '^(ok|FAIL) ' "$out" 2>/dev/null)
    failed=$(grep -cE '^FAIL ' "$out" 2>/dev/null)
    case $rc in
        0) word=OK ;;
        77) word="SKIP ($(sed -n 's/^SKIP: //p' "$out" | head -n 1))" ;;
        *) word="FAIL ($(status_word "$rc"))" ;;
    esac
    say "jax-diag $label: $word, ${checks:-0} checks, ${failed:-0} failed, ${secs} s"
    grep -E '^FAIL ' "$out" 2>/dev/null | head -n 3 | cut -c1-300 | sed 's/^/    /' |
        tee -a "$SUMMARY"
    if [ "$rc" != 0 ]; then
        log_file "jax-diag $label stdout" "$out"
        log_tail "jax-diag $label stderr" "$WORK/jax-diag-$tag.err" 60
    fi
}

# What the client said in the first rgpu run that points at a suspect.
jax_diag_suspects() {
    local err=$WORK/jax-diag-rgpu.err
    cp "$err" "$OUTDIR/jax-diag-rgpu.log" 2>/dev/null
    grep -E 'overlaps this process|export table|not supported|refused|failed|warning|error' \
        "$err" 2>/dev/null | sed -E 's/^rgpu\[[0-9]+\]: //; s/0x[0-9a-f]+/ADDR/g' |
        sort | uniq -c | sort -rn | head -n 12 | sed 's/^/    client log: /' | tee -a "$SUMMARY"
}

run_jax_diag() {
    local deadline=$((SECONDS + ${RGPU_JAX_DIAG_BUDGET:-90})) per=${RGPU_JAX_DIAG_TIMEOUT:-40}
    local flags=${XLA_FLAGS:-} i label tag left limit start rc
    local labels=("native" "rgpu" "RGPU_SYNC=blocking" "no preallocation" "no autotuning"
                  "RGPU_SYNC=strict" "no Triton gemm" "no command buffers")
    local tags=(native rgpu blocking noprealloc noautotune strict nogemm nocmdbuf)
    local envs=("" "RGPU_STATS=1" "RGPU_SYNC=blocking" "XLA_PYTHON_CLIENT_PREALLOCATE=false"
                "XLA_FLAGS=$flags --xla_gpu_autotune_level=0" "RGPU_SYNC=strict"
                "XLA_FLAGS=$flags --xla_gpu_enable_triton_gemm=false"
                "XLA_FLAGS=$flags --xla_gpu_enable_command_buffer=")
    say ""
    say "== jax-diag: jax_check.py $JAX_DIAG_PARTS, natively and through rgpu under settings" \
        "that each take one suspect away (budget ${RGPU_JAX_DIAG_BUDGET:-90} s)"
    for i in "${!tags[@]}"; do
        label=${labels[$i]}
        tag=${tags[$i]}
        left=$((deadline - SECONDS))
        if [ "$left" -lt 10 ]; then
            say "jax-diag $label: SKIP (${left}s left of RGPU_JAX_DIAG_BUDGET)"
            continue
        fi
        limit=$((per < left ? per : left))
        start=$SECONDS
        # shellcheck disable=SC2086  # an empty setting adds no word
        rc=$(jax_diag_run "$tag" "$limit" ${envs[$i]:+"${envs[$i]}"})
        jax_diag_line "$label" "$tag" "$rc" $((SECONDS - start))
        if [ "$tag" = native ] && [ "$rc" = 77 ]; then
            return      # no JAX here: nothing to compare with
        fi
        [ "$tag" = rgpu ] && jax_diag_suspects
    done
}
