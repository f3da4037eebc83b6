"""The PyTorch ladder (issue 5): rungs of growing difficulty, each run in a
fresh process natively and through rgpu, compared by their printed results.

    python3 tests/gpu/ladder.py worker RUNG      # one rung, prints JSON
    python3 tests/gpu/ladder.py compare STUBDIR SERVER [RUNG...]

`compare` runs each rung natively and through rgpu — with RGPU_LAUNCHER set,
as `rgpu run --server SERVER -- python3 ...`; else with the stubs preloaded
directly (LD_PRELOAD, since PyTorch wheels carry DT_RPATH: docs/launcher.md) — and
prints a table: rung, pass/fail, max difference, native time, rgpu time.
"""
import json
import os
import subprocess
import sys
import time

RUNGS = ["devices", "memory", "matmul", "conv", "train", "graphs", "compile", "nanogpt",
         "mallocasync"]

# Environment a rung needs before torch is imported.
RUNG_ENV = {"mallocasync": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}}


def rung_devices(torch):
    p = torch.cuda.get_device_properties(0)
    return {"available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "name": p.name, "mem": p.total_memory, "cc": [p.major, p.minor],
            "sms": p.multi_processor_count}


def rung_memory(torch):
    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    y = (x * 2 + 1).sin()
    return {"sum": y.sum().item(), "max": y.max().item(), "mean": x.mean().item(),
            "back": x[:8].cpu().tolist()}


def rung_mallocasync(torch):
    """PyTorch's cudaMallocAsync allocator: the default pool and its attributes."""
    torch.manual_seed(0)
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    c = (a @ b).relu()
    total = c.double().sum().item()
    in_use = torch.cuda.memory_allocated()
    del a, b, c
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"backend": torch.cuda.get_allocator_backend(), "sum": total,
            "in_use_nonzero": in_use > 0, "after_free": torch.cuda.memory_allocated()}


def rung_matmul(torch):
    torch.manual_seed(0)
    a = torch.randn(256, 384, device="cuda")
    b = torch.randn(384, 128, device="cuda")
    out = {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out["fp32"] = (a @ b).double().sum().item()
    torch.backends.cuda.matmul.allow_tf32 = True
    out["tf32"] = (a @ b).double().sum().item()
    out["bf16"] = (a.bfloat16() @ b.bfloat16()).double().sum().item()
    lin = torch.nn.Linear(384, 64).cuda()
    out["linear"] = lin(a).double().sum().item()
    return out


def rung_conv(torch):
    torch.manual_seed(0)
    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.deterministic = True
    conv = torch.nn.Conv2d(3, 8, 3, padding=1).cuda()
    x = torch.randn(4, 3, 32, 32, device="cuda", requires_grad=True)
    y = conv(x)
    y.square().sum().backward()
    return {"y": y.double().sum().item(), "gx": x.grad.double().sum().item(),
            "gw": conv.weight.grad.double().sum().item()}


def rung_train(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device="cuda")
    t = torch.randint(0, 10, (32,), device="cuda")
    losses = []
    for _ in range(5):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses}


def rung_graphs(torch):
    x = torch.ones(1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2 + 1
    x.fill_(3)
    g.replay()
    return {"y": y.sum().item()}


def rung_compile(torch):
    torch.manual_seed(0)
    f = torch.compile(lambda a, b: (a * b).sin() + a.cos())
    a = torch.randn(4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    return {"r": f(a, b).double().sum().item()}


def rung_nanogpt(torch):
    """examples/nanogpt, 200 steps: every logged loss, and the step time."""
    import subprocess as sp
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "nanogpt", "train.py")
    out = sp.run([sys.executable, script, "--steps", "200", "--log-every", "20",
                  "--data", "/tmp/rgpu-nanogpt-data.txt"], capture_output=True, text=True,
                 env=dict(os.environ), check=True).stdout
    losses = [float(l.split()[3]) for l in out.splitlines() if l.startswith("step ")]
    mean = [float(l.split()[1]) for l in out.splitlines() if l.startswith("mean_step_ms")]
    return {"losses": losses, "_step_ms": mean[0] if mean else None}


def worker(rung):
    os.environ.update(RUNG_ENV.get(rung, {}))
    import torch
    t0 = time.perf_counter()
    result = globals()["rung_" + rung](torch)
    torch.cuda.synchronize()
    result["_seconds"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(result))


def numbers(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        yield float(v)
    elif isinstance(v, list):
        for e in v:
            yield from numbers(e)


def max_rel_diff(a, b):
    worst = 0.0
    for k in a:
        if k.startswith("_"):
            continue
        if k not in b:
            return float("inf")
        if not isinstance(a[k], (int, float, list)) or isinstance(a[k], bool):
            if a[k] != b[k]:
                return float("inf")
            continue
        for x, y in zip(numbers(a[k]), numbers(b[k])):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-12))
    return worst


def run_one(rung, env, timeout, prefix=()):
    try:
        p = subprocess.run(list(prefix) + [sys.executable, __file__, "worker", rung], env=env,
                           timeout=timeout, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), ""
    # The exception's message and rgpu's own lines, not the C++ backtrace.
    lines = [l for l in (p.stderr + p.stdout).splitlines()
             if "rgpu[" in l or "Error" in l or "error" in l][:40]
    return None, "\n".join(lines) or (p.stderr or p.stdout)[-1500:]


def compare(stubdir, server, rungs, launcher=None):
    stubs = [os.path.join(stubdir, n) for n in
             ("librgpu-client.so.0", "libcuda.so.1", "libcudart.so.13", "libcublasLt.so.13",
              "libcublas.so.13", "libcudnn.so.9") if os.path.exists(os.path.join(stubdir, n))]
    native = dict(os.environ)
    if launcher:
        # Through the launcher, as a user runs it: it sets the preloads.
        remote = dict(os.environ, RGPU_LOG=os.environ.get("RGPU_LADDER_LOG", "debug"))
    else:
        remote = dict(os.environ, LD_PRELOAD=":".join(stubs), RGPU_SERVER=server,
                      RGPU_LOG=os.environ.get("RGPU_LADDER_LOG", "debug"),
                      LD_LIBRARY_PATH=stubdir + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    print(f"{'rung':10} {'result':6} {'max rel diff':>13} {'native s':>9} {'rgpu s':>9}")
    failures = {}
    for rung in rungs:
        a, err_a = run_one(rung, native, 300)
        b, err_b = run_one(rung, remote, 300,
                           [launcher, "run", "--server", server, "--"] if launcher else [])
        if a is None or b is None:
            diff, ok = float("nan"), False
            failures[rung] = err_b or err_a
        else:
            diff = max_rel_diff(a, b)
            ok = diff <= 1e-4
        ta = f"{a['_seconds']:.3f}" if a else "-"
        tb = f"{b['_seconds']:.3f}" if b else "-"
        extra = ""
        if a and b and a.get("_step_ms") and b.get("_step_ms"):
            extra = f"   step ms: native {a['_step_ms']:.2f}, rgpu {b['_step_ms']:.2f}"
        print(f"{rung:10} {'PASS' if ok else 'FAIL':6} {diff:13.3g} {ta:>9} {tb:>9}{extra}", flush=True)
    for rung, err in failures.items():
        print(f"\n--- {rung}: why\n{err}")


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3], sys.argv[4:] or RUNGS, os.environ.get("RGPU_LAUNCHER"))
