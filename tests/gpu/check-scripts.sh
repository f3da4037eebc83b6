#!/bin/bash
# tests/gpu/check-scripts.sh [NVCC]   -- meson test gpu-scripts
#
# The GPU machine's scripts run only there, so here they are kept from
# rotting: run.sh and bench-compare.sh parse; the Python scripts compile;
# a framework script without its packages skips (exit 77, a "SKIP:" line)
# rather than crashing; a check that raises is reported as FAIL and the
# script goes on to fail at the end; and with NVCC, cufft_check.cu and
# curand_check.cu build as run.sh builds them, warnings as errors.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

for f in "$here/run.sh" "$here/bench-compare.sh" "$here/rgpu_device_check.sh" "$here/cuda12_check.sh" "$here/multigpu_check.sh" "$here/ipc_files_check.sh" "$here/pack-build.sh" "$here/jax_diag.sh"; do
    bash -n "$f" || fail "bash -n $f"
done

for f in "$here/ladder.py" "$here"/frameworks/*.py; do
    python3 -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$f" ||
        fail "python3 cannot compile $f"
done

# -S: no site-packages, so numpy, torch, cupy, triton and jax are missing.
for f in "$here"/frameworks/*_check.py; do
    python3 -S "$f" > "$tmp/out" 2> "$tmp/err" < /dev/null
    rc=$?
    if [ $rc != 77 ] || ! grep -q '^SKIP: .* is not installed' "$tmp/out"; then
        fail "$(basename "$f") without its packages: exit $rc, output:"
        cat "$tmp/out" "$tmp/err"
    fi
done

# The checks' own bookkeeping (no NumPy needed for these parts).
PYTHONPATH=$here/frameworks python3 -S - > "$tmp/out" 2> "$tmp/err" <<'PY'
from checks import Checks
c = Checks()
c.result("first", True)
def boom():
    raise ValueError("boom\nsecond line")
c.section("second", boom)
c.result("third", True)
c.finish()
PY
rc=$?
printf 'ok first\nFAIL second: ValueError: boom\nok third\n3 checks, 1 failed\n' > "$tmp/want"
if [ $rc != 1 ] || ! cmp -s "$tmp/out" "$tmp/want" || ! grep -q 'Traceback' "$tmp/err"; then
    fail "checks.py bookkeeping: exit $rc, output:"
    diff "$tmp/want" "$tmp/out"
fi

nvcc=${1:-}
if [ -n "$nvcc" ]; then
    for spec in cufft_check:cufft curand_check:curand; do
        name=${spec%%:*}
        "$nvcc" -Xcompiler -Wall,-Wextra,-Werror -o "$tmp/$name" "$here/$name.cu" \
            "-l${spec#*:}" || fail "nvcc $name.cu"
    done
else
    echo "no nvcc: cufft_check.cu and curand_check.cu not built"
fi

[ $failures = 0 ] && echo "gpu scripts: all checks passed"
exit $((failures > 0))
