#!/bin/bash
# tests/gpu/multigpu_check.sh [BUILD_DIR]   -- on the GPU machine, from the repo root
#
# rgpud's GPUs on a real host (daemon/devices.c; CI does the same on the
# fake GPU in tests/devices.sh), each check natively and through a private
# rgpud on a Unix socket with the host's NVIDIA libraries:
#   - a subset, which works on one GPU too: rgpud --devices with the last
#     GPU's UUID; through rgpu, BUILD/tests/devlist must show in CUDA what
#     it shows natively with CUDA_VISIBLE_DEVICES=that UUID, NVML the same
#     GPU (by UUID and PCI bus id), the other GPUs not found by any road
#     and the ordinal past the count refused; `rgpu smi` lists that GPU
#     only, beside nvidia-smi --query-gpu natively;
#   - a bad --devices (an index past the count, a MIG UUID) stops rgpud;
#   - with two GPUs or more: every GPU served in the order given, reversed
#     ("1,0"), against native CUDA_VISIBLE_DEVICES=1,0 (identities and P2P
#     attributes per pair); the client's own CUDA_VISIBLE_DEVICES=1 against
#     the same natively; BUILD/tests/multidev N (per-thread devices, memory,
#     pointer attributes, peer copies, streams and events, cuBLAS and cuDNN
#     handles per device) natively and through rgpu, identical.  On one GPU
#     these say "skipped: one GPU".
# The PyTorch checks on two GPUs are tests/gpu/frameworks/torch_multigpu_check.py.
# One line per check, "multigpu_check: NAME: ok|FAIL|skipped: ...", then
# "multigpu_check: PASS" or "FAIL"; exits 0, 1 on a failure, 2 when
# something to run is missing.
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
# run.sh passes its library path (the toolkit's and PyTorch's wheels').
cuda_lib=${RGPU_CUDA_LIB:-${CUDA_HOME:-/usr/local/cuda}/lib64}
# The driver's own libcuda.so.1 and libnvidia-ml.so.1: devlist and
# multidev carry a run path to the stubs, which a native run must not
# reach, so the driver's folder goes on its library path explicitly.
driver_dir=$(dirname "$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }')")
native_path=$cuda_lib:$driver_dir
for f in "$build/daemon/rgpud" "$build/tests/devlist" "$build/tests/multidev" \
         "$build/launcher/rgpu"; do
    [ -x "$f" ] || { echo "multigpu_check: $f is missing"; exit 2; }
done

tmp=$(mktemp -d /tmp/rgpu-multigpu.XXXXXX)
daemon=
stop() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    daemon=
}
trap 'stop; rm -rf "$tmp"' EXIT
failed=0
say() { echo "multigpu_check: $*"; }
check() {       # NAME OK(0|1) [DETAIL FILE...]
    local name=$1 ok=$2
    shift 2
    if [ "$ok" = 0 ]; then
        say "$name: ok"
    else
        say "$name: FAIL"
        for f in "$@"; do sed 's/^/    /' "$f" | tail -n 30; done
        failed=1
    fi
}

# start ARGS...: a private rgpud with ARGS; 1 when it did not come up.
start() {
    stop
    rm -f "$tmp/rgpud.sock"
    LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$build/daemon/rgpud" --foreground -v --listen "unix:$tmp/rgpud.sock" --group none "$@" \
        > "$tmp/rgpud.log" 2>&1 &
    daemon=$!
    for _ in $(seq 300); do         # listing the GPUs takes a cuInit: up to 30 s
        [ -S "$tmp/rgpud.sock" ] && return 0
        kill -0 "$daemon" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}

# native OUT CVD PROG ARGS...: PROG on the real libraries, with
# CUDA_VISIBLE_DEVICES=CVD ("-": unset).
native() {
    local out=$1 cvd=$2
    shift 2
    if [ "$cvd" = - ]; then
        env -u RGPU_SERVER -u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$native_path" \
            timeout 120 "$@" > "$out" 2> "$out.err"
    else
        env -u RGPU_SERVER CUDA_VISIBLE_DEVICES="$cvd" LD_LIBRARY_PATH="$native_path" \
            timeout 120 "$@" > "$out" 2> "$out.err"
    fi
}

# remote OUT CVD PROG ARGS...: PROG through the rgpud started last.
remote() {
    local out=$1 cvd=$2
    shift 2
    if [ "$cvd" = - ]; then
        env -u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$build/stubs" \
            RGPU_SERVER="unix:$tmp/rgpud.sock" timeout 120 "$@" > "$out" 2> "$out.err"
    else
        env CUDA_VISIBLE_DEVICES="$cvd" LD_LIBRARY_PATH="$build/stubs" \
            RGPU_SERVER="unix:$tmp/rgpud.sock" timeout 120 "$@" > "$out" 2> "$out.err"
    fi
}

cuda_view() { grep -E '^(cuda|p2p) ' "$1"; }
cuda_ids() { awk '$1 == "cuda" && $3 ~ /^GPU-/' "$1"; }
nvml_as_cuda() { awk '$1 == "nvml" && $3 ~ /^GPU-/ { print "cuda", $2, $3, $4 }' "$1"; }

# same_view NAME NATIVE REMOTE: CUDA through rgpu as natively, NVML
# through rgpu naming the same GPUs in the same order, no FAIL line.
same_view() {
    local name=$1 n=$2 r=$3
    diff <(cuda_view "$n") <(cuda_view "$r") > "$tmp/d1"
    local a=$?
    diff <(cuda_ids "$r") <(nvml_as_cuda "$r") > "$tmp/d2"
    local b=$?
    ! grep -q '^FAIL' "$n" "$r"
    local c=$?
    check "$name" $((a | b | c)) "$tmp/d1" "$tmp/d2" "$r" "$r.err"
}

mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null)
mapfile -t buses < <(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null)
n=${#uuids[@]}
[ "$n" -gt 0 ] || { say "nvidia-smi lists no GPU"; exit 2; }
say "$n GPUs: ${uuids[*]}"
last=$((n - 1))

# ---- a subset of one GPU, by UUID (also on a one-GPU machine) -------------------------

absent_args=()
for i in "${!uuids[@]}"; do
    [ "$i" = "$last" ] || absent_args+=("${uuids[$i]}" "${buses[$i]}")
done
if start --devices "${uuids[$last]}"; then
    native "$tmp/n-subset" "${uuids[$last]}" "$build/tests/devlist"
    remote "$tmp/r-subset" - "$build/tests/devlist" "${absent_args[@]}"
    same_view "--devices ${uuids[$last]}: CUDA and NVML show GPU $last only, the rest absent" \
        "$tmp/n-subset" "$tmp/r-subset"
    grep -q "^cuda 1 devices" "$tmp/r-subset"
    check "--devices: one GPU, renumbered 0" $? "$tmp/r-subset"
    nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader \
        > "$tmp/smi.native" 2>&1
    sed 's/^/    native: /' "$tmp/smi.native"
    timeout 60 "$build/launcher/rgpu" smi --server "unix:$tmp/rgpud.sock" > "$tmp/smi.rgpu" 2>&1
    smi_rc=$?
    sed 's/^/    rgpu smi: /' "$tmp/smi.rgpu"
    bus=${buses[$last]}
    smi_ok=$smi_rc
    grep -qiF -- "$bus" "$tmp/smi.rgpu" || smi_ok=1
    for i in "${!buses[@]}"; do
        [ "$i" = "$last" ] || ! grep -qiF -- "${buses[$i]}" "$tmp/smi.rgpu" || smi_ok=1
    done
    check "rgpu smi under --devices lists GPU $last ($bus) only" $smi_ok "$tmp/smi.rgpu"
else
    check "rgpud --devices ${uuids[$last]} started" 1 "$tmp/rgpud.log"
fi
stop

# ---- bad settings stop rgpud -------------------------------------------------------------

for bad in "$n" "MIG-00000000-0000-0000-0000-000000000000"; do
    LD_LIBRARY_PATH="$cuda_lib" timeout 60 "$build/daemon/rgpud" --listen "unix:$tmp/bad.sock" \
        --group none --devices "$bad" > "$tmp/bad.log" 2>&1 < /dev/null
    rc=$?
    [ $rc = 1 ] && grep -q -- "--devices" "$tmp/bad.log"
    ok=$?
    check "--devices $bad refused at start ($(head -n 1 "$tmp/bad.log" | cut -c 1-200))" $ok \
        "$tmp/bad.log"
done

# ---- two GPUs or more ----------------------------------------------------------------------

if [ "$n" -lt 2 ]; then
    say "every GPU, reversed order: skipped: one GPU"
    say "client CUDA_VISIBLE_DEVICES: skipped: one GPU"
    say "multidev: skipped: one GPU"
else
    if start --devices 1,0; then
        native "$tmp/n-rev" 1,0 "$build/tests/devlist"
        remote "$tmp/r-rev" - "$build/tests/devlist"
        same_view "--devices 1,0 against native CUDA_VISIBLE_DEVICES=1,0" "$tmp/n-rev" "$tmp/r-rev"
    else
        check "rgpud --devices 1,0 started" 1 "$tmp/rgpud.log"
    fi
    if start; then
        native "$tmp/n-all" - "$build/tests/devlist"
        remote "$tmp/r-all" - "$build/tests/devlist"
        same_view "every GPU served, CUDA as natively" "$tmp/n-all" "$tmp/r-all"
        native "$tmp/n-cvd" 1 "$build/tests/devlist"
        remote "$tmp/r-cvd" 1 "$build/tests/devlist"
        diff <(cuda_view "$tmp/n-cvd") <(cuda_view "$tmp/r-cvd") > "$tmp/d"
        check "client CUDA_VISIBLE_DEVICES=1 as natively" $? "$tmp/d" "$tmp/r-cvd.err"
        m=$((n < 8 ? n : 8))
        native "$tmp/n-multidev" - "$build/tests/multidev" "$m"
        nrc=$?
        remote "$tmp/r-multidev" - "$build/tests/multidev" "$m"
        rrc=$?
        sed 's/^/    native: /' "$tmp/n-multidev"
        cmp -s "$tmp/n-multidev" "$tmp/r-multidev" && [ $nrc = 0 ] && [ $rrc = 0 ]
        check "multidev $m: native exit $nrc, rgpu exit $rrc, outputs identical" $? \
            "$tmp/r-multidev" "$tmp/r-multidev.err"
    else
        check "rgpud serving every GPU started" 1 "$tmp/rgpud.log"
    fi
    stop
fi

if [ $failed = 0 ]; then say PASS; else say FAIL; sed 's/^/    rgpud: /' "$tmp/rgpud.log" | tail -n 40; fi
exit $failed
