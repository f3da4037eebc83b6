#!/bin/bash
# tests/train-bench-models.sh   -- meson test train-bench-models
#
# bench/train_bench.py runs only on the GPU machine, so here each of its
# models is kept from rotting: a few steps of each, shrunk, on PyTorch's
# CPU device (worker --device cpu), must print a result line whose losses
# are finite (and, for the GPTs, whose loss falls: the image models learn
# too slowly for 20 steps of a tiny batch to show it); and the default sizes must keep what docs/benchmarks.md
# promises of them (resnet's pageable batch at least 4 MiB a step, gpt-bf16's
# vocabulary 4096).  Skips (77) without the PyTorch setup.sh installs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${RGPU_TORCH_PYTHON:-${RGPU_TORCH_VENV:-/opt/rgpu-torch}/bin/python}
tb=$here/../bench/train_bench.py
if ! "$py" -c "import torch" 2>/dev/null; then
    echo "SKIP: no Python with PyTorch at $py (./setup.sh installs one)"
    exit 77
fi
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
failures=0

# MODEL FALLS SIZE-OPTIONS...: 20 steps on the CPU; the result line's
# checks (FALLS: 1 when the loss must fall).
check_model() {
    local model=$1 falls=$2 out
    shift 2
    out=$("$py" "$tb" worker --model "$model" --device cpu --warmup 0 --steps 20 "$@" 2>&1)
    if ! printf '%s\n' "$out" | tail -1 | FALLS=$falls "$py" -c '
import json, math, os, sys
r = json.loads(sys.stdin.read())
l = r["losses"]
assert len(l) == 2 and all(math.isfinite(x) for x in l), l
assert os.environ["FALLS"] == "0" or l[1] < l[0], "the loss did not fall: %r" % l
assert r["batch_bytes"] > 0
print("ok - %s: losses %s, batch %d bytes" % (r["model"], l, r["batch_bytes"]))'; then
        echo "FAIL - $model:"
        printf '%s\n' "$out" | tail -20
        failures=$((failures + 1))
    fi
}

check_model gpt-small 1 --layers 1 --embed 32 --block 16 --batch 4
check_model gpt-amp 1 --layers 1 --embed 32 --heads 2 --block 16 --batch 4
check_model gpt-bf16 1 --layers 1 --embed 64 --heads 2 --block 32 --batch 4
check_model convnet 0 --batch 8 --width 8
check_model resnet 0 --batch 4 --width 8 --image 32

# The default sizes, as documented.
if ! "$py" - "$tb" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tb", sys.argv[1])
tb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tb)
r = tb.DEFAULTS["resnet"]
batch = r["batch"] * 3 * r["image"] ** 2 * 4
assert batch >= 4 << 20, "resnet's batch is %d bytes, under 4 MiB" % batch
g = tb.DEFAULTS["gpt-bf16"]
assert (g["vocab"], g["layers"], g["embed"], g["heads"], g["block"], g["batch"], g["amp"]) == \
    (4096, 6, 768, 12, 256, 16, True), g
assert set(tb.MODELS) == set(tb.DEFAULTS)
print("ok - default sizes: resnet's batch %.1f MiB, gpt-bf16 %r" % (batch / 2 ** 20, g))
PY
then
    echo "FAIL - default sizes"
    failures=$((failures + 1))
fi
# --repeat: the row shown is the pair of median ratio, every ratio beside it.
if ! "$py" - "$tb" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tb", sys.argv[1])
tb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tb)
def run(ms):
    return {"step_ms": ms, "losses": [1.0], "waits_per_step": 0.1, "unwaited_per_step": 9.0}
pairs = [tb.make_row("convnet", "10 ms", run(n), run(r) if r else None, None, None)
         for n, r in ((4.0, 6.0), (4.0, 4.4), (5.0, 6.0), (4.0, None))]   # the last: rgpu failed
row = tb.median_pair(pairs)
assert [round(x, 6) for x in row["ratios"]] == [1.1, 1.2, 1.5] and round(row["ratio"], 6) == 1.2, row
line = tb.format_row(row)
assert "ratios of 3 pairs: 1.10, 1.20, 1.50" in line and "   1.20 " in line, line
assert tb.median_pair(pairs[3:])["ratio"] is None
print("ok - --repeat keeps the pair of median ratio: " + line)
PY
then
    echo "FAIL - --repeat"
    failures=$((failures + 1))
fi
[ $failures -eq 0 ]
