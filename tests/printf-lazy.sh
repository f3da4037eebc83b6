#!/bin/bash
# Synchronises wait after kernels that may printf, and only then; what
# those print comes where CUDA prints it:
#
#   printf-lazy.sh <build-dir> <printf_step> <printf_step_compressed>
#
# printf_step without arguments (tests/progs/printf_step.cu) launches a
# module's printing kernels (pm_print; pm_via, which prints through a
# device function) and its silent ones (pm_mate; pm_finite, an assert),
# through the runtime and through the driver.  Each kernel's line must
# come before the host's line that follows the call that synchronised with
# it, under RGPU_SYNC=strict (every synchronise waits) and lazy, with the
# runtime's fatbin stored plainly and zstd-compressed.  Under lazy, the
# stream synchronise after the silent kernels alone goes without waiting
# (RGPU_STATS), and no output came unforeseen (rgpu's log).  The steps
# that launch only silent kernels: tests/step-roundtrips.sh.
set -u
build=$1
plain=$2
compressed=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rgpu-printf.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

cat >"$tmp/expected" <<'EOF'
ok cudaStreamCreate
ok cudaStreamCreateWithFlags
ok cudaEventCreateWithFlags
ok cudaMalloc
ok cudaMemset
host: before the kernels
pm_print 1: value 10
ok cudaStreamSynchronize after pm_print
host: after pm_print
pm_via 2: value 20
ok cudaStreamSynchronize after pm_via
host: after pm_via, which prints through a device function
ok cudaStreamSynchronize after the silent kernels
host: after the silent kernels
pm_print 3: value 30
ok cudaMemcpy to the host
host: after a copy to the host
ok cudaEventRecord
ok cudaStreamWaitEvent
pm_print 4: value 40
ok cudaStreamSynchronize of a stream waiting for it
host: after a synchronise of another stream that waited for it
ok cudaEventRecord
pm_print 5: value 50
ok cudaEventSynchronize
host: after cudaEventSynchronize
ok cuModuleLoadData
ok cuModuleGetFunction pm_print
ok cuModuleGetFunction pm_via
ok cuModuleGetFunction pm_mate
ok cuModuleGetFunction pm_finite
ok cuLaunchKernel pm_print
pm_print 6: value 60
ok cuStreamSynchronize
host: after the driver's pm_print
ok cuLaunchKernel pm_via
pm_via 7: value 70
ok cuCtxSynchronize
host: after the driver's pm_via
ok cuModuleUnload
pm_print 8: value 80
ok cudaDeviceSynchronize
host: done
ok cudaEventDestroy
ok cudaStreamDestroy
ok cudaStreamDestroy
ok cudaFree
EOF

ok() { echo "ok: $*"; }
bad() {
    echo "FAIL: $*"
    fail=1
}

for prog in "$plain" "$compressed"; do
    for mode in strict lazy; do
        name="$(basename "$prog")-$mode"
        if ! RGPU_SYNC=$mode RGPU_STATS=1 "$here/run-prog.sh" "$build" "$prog" \
            >"$tmp/$name.out" 2>"$tmp/$name.err"; then
            bad "$name: the program failed"
        fi
        if cmp -s "$tmp/expected" "$tmp/$name.out"; then
            ok "$name: every kernel's line before the host's next line"
        else
            bad "$name: stdout differs from what CUDA prints"
            diff "$tmp/expected" "$tmp/$name.out" | head -20 | sed 's/^/    /'
            tail -20 "$tmp/$name.err" | sed 's/^/    stderr: /'
        fi
        [ "$mode" = lazy ] || continue
        # rgpu: WAITED UNWAITED NAME: of the four stream synchronises, the
        # one after the silent kernels goes without waiting.
        unwaited=$(awk '$1 == "rgpu:" && $4 == "cudaStreamSynchronize" { print $3 }' \
            "$tmp/$name.err")
        if [ "${unwaited:-0}" = 1 ]; then
            ok "$name: the synchronise after the silent kernels did not wait"
        else
            bad "$name: ${unwaited:-no} cudaStreamSynchronize went without waiting, wanted 1"
            grep 'rgpu: .*Synchronize' "$tmp/$name.err" | sed 's/^/    /'
        fi
        if grep -q 'a kernel printed where no kernel that may print was pending' "$tmp/$name.err"
        then
            bad "$name: output came that rgpu did not foresee"
        fi
    done
done
exit $fail
