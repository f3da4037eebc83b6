#!/bin/bash
# What kernels print and assert, through rgpu on the fake GPU backend:
#
#   device-output.sh <build-dir> <device_printf> <device_printf_compressed> <device_assert>
#
# - device_printf: the kernels' lines reach stdout at each synchronise
#   (device, context, stream, event, a copy to the host), after the host's
#   lines printed before it and before those printed after, complete (4000
#   lines of one kernel) and formatted; with stdout line-buffered, fully
#   buffered ("buffered": rgpu flushes the program's buffer first), and
#   with RGPU_SYNC=strict;
# - device_printf_compressed (its fatbin's entries zstd-compressed): the
#   same output, rgpu reading the compressed image to know that its
#   kernels print (no output comes unforeseen); and ("exit") output that a
#   launch which did not wait brought, still written before the program
#   ends;
# - device_assert: the assert's message on stderr, once, in CUDA's format;
#   cudaErrorAssert and CUDA_ERROR_ASSERT, sticky, on stdout.
set -u
build=$1
printf_prog=$2
compressed_prog=$3
assert_prog=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-devout.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

lines=4000
{
    cat <<'EOF'
host: before the kernels
host: between the kernels
k_print 1: block [2,0,0] thread [3,0,0] of grid 3 block 4: value 10
k_print 2: block [1,0,0] thread [7,0,0] of grid 2 block 8: value 20
ok cudaDeviceSynchronize after two kernels
host: after cudaDeviceSynchronize
k_print 3: block [0,0,0] thread [1,0,0] of grid 1 block 2: value 30
ok cuCtxSynchronize
host: after cuCtxSynchronize
ok cudaStreamCreate
k_print 4: block [1,0,0] thread [0,0,0] of grid 2 block 1: value 40
ok cudaStreamSynchronize
host: after cudaStreamSynchronize
ok cudaEventCreateWithFlags
ok cudaEventRecord
k_print 5: block [0,0,0] thread [2,0,0] of grid 1 block 3: value 50
ok cudaEventSynchronize
host: after cudaEventSynchronize
ok cudaMalloc
ok cudaMemset
k_print 6: block [3,0,0] thread [3,0,0] of grid 4 block 4: value 60
ok cudaMemcpy to the host
host: after cudaMemcpy to the host
EOF
    for ((i = 0; i < lines; i++)); do printf 'k_lines: line %05d of %d\n' "$i" "$lines"; done
    cat <<'EOF'
ok cudaDeviceSynchronize after k_lines
host: after k_lines
k_formats: -42 3735928559 deadbeef -1234567890123 3.142 3.14e+00 0.5 Z text   -42|-42  |
ok cudaDeviceSynchronize after k_formats
host: done
ok cudaEventDestroy
ok cudaStreamDestroy
ok cudaFree
EOF
} >"$tmp/printf.expected"

cat >"$tmp/assert.expected" <<'EOF'
ok a context
host: thread 6 of k_assert fails its assert
ok the launch -> cudaSuccess
k_assert: thread 6 is about to fail its assert
ok cudaDeviceSynchronize -> cudaErrorAssert
ok cudaPeekAtLastError -> cudaErrorAssert
ok cudaGetLastError -> cudaErrorAssert
ok cudaMalloc (sticky) -> cudaErrorAssert
ok a launch after the assert -> cudaErrorAssert
ok cuCtxSynchronize -> CUDA_ERROR_ASSERT
host: cudaDeviceSynchronize says cudaErrorAssert
EOF

# run NAME PROG [ENV...] -- [ARGS...]: run through rgpu into $tmp/NAME.{out,err}.
run() {
    local name=$1 prog=$2
    shift 2
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$here/run-prog.sh" "$build" "$prog" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"
}

ok() { echo "ok: $*"; }
bad() {
    echo "FAIL: $*"
    fail=1
}

# same NAME EXPECTED: the run's stdout is exactly EXPECTED.
same() {
    if cmp -s "$2" "$tmp/$1.out"; then
        ok "$1: stdout as expected ($(wc -l <"$2") lines)"
    else
        bad "$1: stdout differs from what CUDA prints"
        diff "$2" "$tmp/$1.out" | head -20 | sed 's/^/    /'
        sed 's/^/    stderr: /' "$tmp/$1.err" | tail -20
    fi
}

for mode in line buffered strict; do
    case $mode in
        line) run "printf-$mode" "$printf_prog" RGPU_SYNC=lazy -- ;;
        buffered) run "printf-$mode" "$printf_prog" RGPU_SYNC=lazy -- buffered ;;
        strict) run "printf-$mode" "$printf_prog" RGPU_SYNC=strict -- ;;
    esac || bad "printf-$mode: the program failed"
    same "printf-$mode" "$tmp/printf.expected"
done

run compressed "$compressed_prog" RGPU_SYNC=lazy -- || bad "compressed: the program failed"
same compressed "$tmp/printf.expected"
if grep -q "a kernel printed where no kernel that may print was pending" "$tmp/compressed.err"; then
    bad "compressed: rgpu did not see in the compressed image that its kernels print"
else
    ok "compressed: rgpu knew from the compressed image that its kernels print"
fi

run exit "$compressed_prog" RGPU_SYNC=lazy -- exit || bad "exit: the program failed"
if grep -qx 'k_print 7: block \[0,0,0\] thread \[0,0,0\] of grid 1 block 1: value 70' "$tmp/exit.out"; then
    ok "exit: output that came after the last call that waited reached stdout before the end"
else
    bad "exit: the kernel's line never reached stdout"
    sed 's/^/    /' "$tmp/exit.out" "$tmp/exit.err"
fi

run assert "$assert_prog" RGPU_SYNC=lazy -- || bad "assert: the program failed"
same assert "$tmp/assert.expected"
msg='device_output\.cuh:[0-9]+: void k_assert\(int\): block: \[1,0,0\], thread: \[2,0,0\] Assertion `v != bad` failed\.'
n=$(grep -Ec "^$msg\$" "$tmp/assert.err")
if [ "$n" = 1 ]; then
    ok "assert: its message on stderr: $(grep -E "^$msg\$" "$tmp/assert.err")"
else
    bad "assert: $n lines on stderr in CUDA's format, wanted 1"
    sed 's/^/    /' "$tmp/assert.err"
fi
if grep -q 'Assertion' "$tmp/assert.out"; then
    bad "assert: the message went to stdout"
fi
exit $fail
