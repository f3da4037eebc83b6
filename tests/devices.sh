#!/bin/bash
# tests/devices.sh BUILD DEVLIST
#
# The GPUs a client sees (daemon/devices.c), on a fake host of 4 GPUs
# (RGPU_FAKEGPU_DEVICES=4), with tests/devlist.c printing what CUDA and
# NVML show:
#  - rgpud --devices (by index) and RGPUD_DEVICES (by UUID and UUID
#    prefix): CUDA through rgpu shows what the fake shows natively with the
#    same GPUs in CUDA_VISIBLE_DEVICES (identities, P2P attributes per
#    pair), NVML through rgpu the same GPUs in the same order (by UUID and
#    PCI bus id), and the GPUs left out are not found by any road;
#  - the client's CUDA_VISIBLE_DEVICES narrows the served GPUs as natively
#    (indices into them, UUIDs, an invalid entry ending the list, a GPU
#    named twice or an empty variable leaving none), and leaves NVML alone;
#  - a bad --devices stops rgpud with a message naming the problem;
#  - a served GPU gone when a session starts is refused at hello, clearly.
# Expectations come from the fake's native answers, never from constants.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BUILD DEVLIST" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
prog=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-devices.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
export RGPU_FAKEGPU_DEVICES=4
unset CUDA_VISIBLE_DEVICES RGPUD_DEVICES RGPU_FAKEGPU_DEVICES_FILE
fails=0
asan_rt=$(ldd "$build/stubs/libcuda.so.1" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')

ok() { echo "ok - $1"; }
fail() {
    echo "FAIL - $1"
    shift
    for f in "$@"; do sed 's/^/    /' "$f"; done
    fails=$((fails + 1))
}

# native CVD OUT [ARGS...]: devlist on the fake itself, CUDA_VISIBLE_DEVICES=CVD
# ("-": unset).
native() {
    local cvd=$1 out=$2
    shift 2
    if [ "$cvd" = - ]; then
        LD_PRELOAD=${asan_rt:-} LD_LIBRARY_PATH=$build/tests/fakegpu "$prog" "$@" >"$out" 2>&1
    else
        CUDA_VISIBLE_DEVICES=$cvd LD_PRELOAD=${asan_rt:-} LD_LIBRARY_PATH=$build/tests/fakegpu \
            "$prog" "$@" >"$out" 2>&1
    fi
}

# remote DEVICES CVD OUT [ARGS...]: devlist through rgpu, rgpud --devices
# DEVICES ("-": none), the client's CUDA_VISIBLE_DEVICES=CVD ("-": unset).
remote() {
    local devices=$1 cvd=$2 out=$3 dargs=
    shift 3
    [ "$devices" = - ] || dargs="--devices $devices"
    if [ "$cvd" = - ]; then
        RGPU_PROG_DAEMON_ARGS=$dargs "$here/run-prog.sh" "$build" "$prog" "$@" >"$out" 2>&1
    else
        RGPU_PROG_DAEMON_ARGS=$dargs "$here/run-prog.sh" "$build" /usr/bin/env \
            "CUDA_VISIBLE_DEVICES=$cvd" "$prog" "$@" >"$out" 2>&1
    fi
}

cuda_view() { grep -E '^(cuda|p2p) ' "$1"; }
nvml_view() { grep -E '^nvml ' "$1"; }
# NVML's GPUs written as CUDA's lines, to compare identities index by index.
nvml_as_cuda() { awk '$1 == "nvml" && $3 ~ /^GPU-/ { print "cuda", $2, $3, $4 }' "$1"; }
cuda_ids() { awk '$1 == "cuda" && $3 ~ /^GPU-/' "$1"; }

# The host, as NVML sees it natively (whatever CUDA_VISIBLE_DEVICES says).
native - "$tmp/host" || { fail "devlist natively" "$tmp/host"; exit 1; }
mapfile -t uuid < <(awk '$1 == "nvml" && $3 ~ /^GPU-/ { print $3 }' "$tmp/host")
mapfile -t pci < <(awk '$1 == "nvml" && $3 ~ /^GPU-/ { print $4 }' "$tmp/host")
if [ "${#uuid[@]}" -ne 4 ]; then
    fail "the fake host has 4 GPUs" "$tmp/host"
    exit 1
fi
absent() { for i in "$@"; do printf '%s %s ' "${uuid[$i]}" "${pci[$i]}"; done; }

# subset NAME DEVICES NATIVE_CVD ABSENT...: rgpud serving DEVICES matches
# the fake with NATIVE_CVD in CUDA, NVML shows the same GPUs, the rest are
# absent.  DEVICES "env:LIST" goes through RGPUD_DEVICES instead.
subset() {
    local name=$1 devices=$2 cvd=$3
    shift 3
    # shellcheck disable=SC2046  # UUID PCI pairs, one word each
    native "$cvd" "$tmp/n-$name" $(absent "$@")
    case $devices in
        env:*)
            # shellcheck disable=SC2046
            RGPUD_DEVICES=${devices#env:} remote - - "$tmp/r-$name" $(absent "$@") ;;
        *)
            # shellcheck disable=SC2046
            remote "$devices" - "$tmp/r-$name" $(absent "$@") ;;
    esac
    local status=$?
    if [ $status -ne 0 ] || grep -q '^FAIL' "$tmp/r-$name"; then
        fail "$name: devlist through rgpu (status $status)" "$tmp/r-$name"
    elif ! diff <(cuda_view "$tmp/n-$name") <(cuda_view "$tmp/r-$name") >"$tmp/d"; then
        fail "$name: CUDA through rgpu is the fake's with CUDA_VISIBLE_DEVICES=$cvd" "$tmp/d"
    elif ! diff <(cuda_ids "$tmp/r-$name") <(nvml_as_cuda "$tmp/r-$name") >"$tmp/d"; then
        fail "$name: NVML shows the GPUs CUDA shows, in its order" "$tmp/d"
    elif [ "$(grep -c '^absent .* ok$' "$tmp/r-$name")" -ne $# ]; then
        fail "$name: the GPUs left out are not found" "$tmp/r-$name"
    else
        ok "$name: $(cuda_ids "$tmp/r-$name" | wc -l) GPUs, CUDA and NVML agreeing, $# absent"
    fi
}

subset "by index" "2,0" "2,0" 1 3
subset "by UUID and prefix" "env:${uuid[3]:0:6},${uuid[1]}" "3,1" 0 2
subset "all" "all" "-"

# narrow NAME CLIENT_CVD NATIVE_CVD: the client's variable against rgpud
# --devices 2,0,3 is the fake's NATIVE_CVD; NVML stays the served three.
remote "2,0,3" - "$tmp/served" || fail "rgpud --devices 2,0,3" "$tmp/served"
narrow() {
    local name=$1 client=$2 cvd=$3
    native "$cvd" "$tmp/n-$name"
    remote "2,0,3" "$client" "$tmp/r-$name"
    local status=$?
    if [ $status -ne 0 ] || grep -q '^FAIL' "$tmp/r-$name"; then
        fail "client CUDA_VISIBLE_DEVICES=$client: devlist through rgpu (status $status)" \
            "$tmp/r-$name"
    elif ! diff <(cuda_view "$tmp/n-$name") <(cuda_view "$tmp/r-$name") >"$tmp/d"; then
        fail "client CUDA_VISIBLE_DEVICES='$client' is the fake's '$cvd'" "$tmp/d"
    elif ! diff <(nvml_view "$tmp/served") <(nvml_view "$tmp/r-$name") >"$tmp/d"; then
        fail "client CUDA_VISIBLE_DEVICES='$client' leaves NVML alone" "$tmp/d"
    else
        ok "client CUDA_VISIBLE_DEVICES='$client' ($name): $(head -1 "$tmp/r-$name")"
    fi
}
narrow index "1" "0"
narrow order "2,0" "3,2"
narrow blanks " 1 , 2" "0,3"
narrow "invalid entry ends the list" "0,7,1" "2"
narrow "uuid prefix" "${uuid[3]:0:6}" "3"
narrow "a GPU outside the subset" "${uuid[1]}" ""
narrow "named twice" "0,0" "2,2"
narrow empty "" ""
narrow mig "MIG-0123" ""

# Without --devices the client's variable is the fake's own.
for cvd in "3,1" "" "${uuid[2]}"; do
    native "$cvd" "$tmp/n"
    remote - "$cvd" "$tmp/r"
    if ! diff <(cuda_view "$tmp/n") <(cuda_view "$tmp/r") >"$tmp/d"; then
        fail "every GPU served, client CUDA_VISIBLE_DEVICES='$cvd'" "$tmp/d"
    else
        ok "every GPU served, client CUDA_VISIBLE_DEVICES='$cvd': $(head -1 "$tmp/r")"
    fi
done

# ---- a bad setting stops rgpud ------------------------------------------------------------

refused() {
    local what=$1 want=$2
    shift 2
    timeout 10 "$@" --listen "unix:$tmp/bad.sock" --lib-dir "$build/tests/fakegpu" \
        >"$tmp/bad" 2>&1 </dev/null
    local status=$?
    if [ $status -ne 1 ] || ! grep -q -- "$want" "$tmp/bad"; then
        fail "$what: rgpud refuses to start (status $status, wanted 1 and '$want')" "$tmp/bad"
    else
        ok "$what: $(head -1 "$tmp/bad" | sed 's/^rgpud\[[0-9]*\]: error: //')"
    fi
}
rgpud=$build/daemon/rgpud
refused "an index the host lacks" "there is no GPU 4" "$rgpud" --devices 1,4
refused "a GPU named twice" "twice" "$rgpud" --devices "1,${uuid[1]}"
refused "an unknown UUID" "no GPU of this host has UUID GPU-ffff" "$rgpud" --devices GPU-ffff
refused "an ambiguous UUID prefix" "several GPUs" "$rgpud" --devices GPU-3
refused "a MIG instance" "MIG instance" "$rgpud" --devices MIG-1234
refused "neither index nor UUID" "neither a GPU index nor" "$rgpud" --devices first
refused "no GPU at all" "names no GPU" "$rgpud" --devices ""
refused "RGPUD_DEVICES" "there is no GPU 9" env RGPUD_DEVICES=9 "$rgpud"

# ---- a served GPU gone when a session starts --------------------------------------------

echo 4 >"$tmp/count"
RGPU_FAKEGPU_DEVICES_FILE=$tmp/count RGPU_PROG_DAEMON_ARGS="--devices 3" \
    "$here/run-prog.sh" "$build" /bin/sh -c "echo 2 >'$tmp/count'; exec '$prog'" \
    >"$tmp/gone" 2>&1
if grep -q "refused the session: a GPU of the server's is missing: GPU ${uuid[3]} .*is not on this host any more" "$tmp/gone" &&
    ! grep -q 'rgpud died' "$tmp/gone"; then
    ok "a GPU gone at session start: refused at hello, rgpud serving on"
else
    fail "a GPU gone at session start is refused at hello" "$tmp/gone"
fi

exit $((fails > 0))
