# Shared by the single-program checks run.sh calls as one item each
# (cuda12_check.sh, minor_check.sh); sourced, after setting
#   tag    what each line starts with (cuda12_check)
#   build  the build dir; prog the program; cuda_lib the host's CUDA libraries
# It makes $tmp (removed on exit, with the rgpud started here) and gives
#   check NAME OK(0|1) [DETAIL FILE]   one line, ok or FAIL (and the detail)
#   start_rgpud NAME [ARGS...]         rgpud on $tmp/NAME.sock, log $tmp/NAME.log
#   through_rgpu SOCK TAG ARGS...      prog through rgpu: $tmp/TAG.out, .err
#   finish NATIVE_OUT                  the verdict line and exit status
tmp=$(mktemp -d "/tmp/rgpu-$tag.XXXXXX")
daemon=
failed=0
stop_rgpud() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    daemon=
}
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
    stop_rgpud
    rm -rf "$tmp"
}
trap cleanup EXIT

check() {
    if [ "$2" = 0 ]; then
        echo "$tag: $1: ok"
    else
        echo "$tag: $1: FAIL"
        [ -n "${3:-}" ] && sed 's/^/    /' "$3" | tail -n 30
        failed=1
    fi
}

start_rgpud() {
    local name=$1
    shift
    stop_rgpud
    LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$build/daemon/rgpud" --foreground -v --listen "unix:$tmp/$name.sock" --group none \
        "$@" > "$tmp/$name.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do [ -S "$tmp/$name.sock" ] && break; sleep 0.1; done
    [ -S "$tmp/$name.sock" ] || { check "rgpud started" 1 "$tmp/$name.log"; exit 1; }
}

through_rgpu() {
    local sock=$1 out=$2
    shift 2
    LD_LIBRARY_PATH="$build/stubs" RGPU_SERVER="unix:$tmp/$sock.sock" RGPU_LOG=info \
        timeout 60 "$prog" "$@" > "$tmp/$out.out" 2> "$tmp/$out.err"
}

finish() {
    echo "--- native output"
    cat "$1"
    if [ $failed = 0 ]; then
        echo "$tag: PASS"
        exit 0
    fi
    echo "--- rgpud log (end)"
    tail -n 40 "$tmp"/*.log
    echo "$tag: FAIL"
    exit 1
}
