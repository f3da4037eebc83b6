"""What an operation of device rgpu costs, on the client and on the op
server: the working tree against an older revision, in one run.

    tests/rgpu_device/run.sh bench [--against REV] [--iters N] [--steps S]
                                   [--repeat R] [--only mix|nanogpt|tiny]

Two workloads, each in a fresh client process against its own op server on
PyTorch's CPU device (the revision's own server and client; the working
tree's with its sandbox):

  mix      a fixed mix of 14 ATen operations on 8x8 tensors (matmul, add,
           relu, mul, sum, transpose+contiguous, a slice, an in-place add,
           cat, repeat, mean, softmax), N times; the tensors are tiny, so
           the cost is rgpu's own, not the kernels';
  nanogpt  examples/nanogpt/train.py's model (4 layers, d=128, batch 32 x
           block 64, AdamW), S steps after 5 of warm-up, the loss read at
           the end;
  tiny     the same model with d=16, batch 1 x block 8: the same operators
           on tensors so small that the CPU's arithmetic hardly counts, as a
           GPU's hardly counts for the client of a real model; 4*S steps.
           Also run on PyTorch's CPU device in the client's process
           ("native cpu"): its CPU time per step is PyTorch's own work for
           these operators, the yardstick for the client's.

For each: wall time, the client's CPU time (all its threads: PyTorch runs
a backward pass on a thread of its own) and the op server session's CPU
time (from /proc), per operation for the mix (operations counted on the
CPU device with a dispatch mode, so both revisions count the same) and per
step for nanoGPT, with the operators per step that reached rgpu's
dispatcher and the requests per step that went to the server.  With --against REV, REV's python/ (git archive) runs
too, the two alternating R times; the medians are printed, then the
ratios.  Wall times on a loaded machine swing; CPU times hold better.  The
op servers run with OMP_NUM_THREADS=1: PyTorch's CPU kernels would
otherwise wake their thread pool for some operations of 8x8 tensors
(softmax: 0.7 ms of CPU on a loaded machine), which measures OpenMP, not rgpu.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# ---- the client side (a child process) --------------------------------------------------

def _handshake(label):
    """Tells the parent where we are and waits for its go (it samples the
    server's CPU time in between)."""
    print(label, flush=True)
    sys.stdin.readline()


def mix_ops(torch, x, w, b):
    y = (x @ w + b).relu()
    z = y * 2 + 1
    s = z.sum()
    t = z.t().contiguous()
    u = z[:, :4]
    z.add_(1)
    v = torch.cat([z, u.repeat(1, 2)], 0)
    m = z.mean(dim=1)
    sm = z.softmax(-1)
    return s, t, v, m, sm


def count_aten_ops(torch, fn):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def child_mix(iters):
    import torch
    import rgpu  # noqa: F401
    cpu = [torch.randn(8, 8), torch.randn(8, 8), torch.randn(8)]
    ops = count_aten_ops(torch, lambda: mix_ops(torch, *[t.clone() for t in cpu]))
    x, w, b = (t.to("rgpu") for t in cpu)
    for _ in range(100):
        mix_ops(torch, x, w, b)
    torch.rgpu.synchronize()
    _handshake("warm")
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        mix_ops(torch, x, w, b)
    torch.rgpu.synchronize()
    wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"units": iters * ops, "ops_per_iter": ops, "wall": wall, "client": cpu_s}))
    _handshake("done")


def child_nanogpt(steps, shape=(128, 64, 32), device="rgpu"):
    import torch
    if device == "rgpu":
        import rgpu
    sys.path.insert(0, os.path.join(REPO, "examples", "nanogpt"))
    import train
    torch.manual_seed(1337)
    embed, block, batch = shape
    vocab = 40
    data = torch.randint(vocab, (20000,))
    model = train.GPT(vocab, embed, 4, 4, block).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)

    def step():
        ix = torch.randint(len(data) - block - 1, (batch,), generator=gen)
        x = torch.stack([data[i:i + block] for i in ix]).to(device)
        y = torch.stack([data[i + 1:i + block + 1] for i in ix]).to(device)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step()
    step().item()
    dispatched = count_dispatched(step) if device == "rgpu" else 0
    _handshake("warm")
    sent = rgpu.stats()["ops"] if device == "rgpu" else 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = step()
    loss.item()
    wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    sent = (rgpu.stats()["ops"] - sent) / steps if device == "rgpu" else 0
    print(json.dumps({"units": steps, "wall": wall, "client": cpu_s,
                      "dispatched": dispatched, "sent": sent}))
    _handshake("done")


def count_dispatched(fn):
    """Operators that reach rgpu's dispatcher in one call of fn."""
    from rgpu import tensor
    counted = [0]
    real = tensor.dispatch

    def counting(func, args, kwargs):
        counted[0] += 1
        return real(func, args, kwargs)
    tensor.dispatch = counting
    try:
        fn()
    finally:
        tensor.dispatch = real
    return counted[0]


TINY = (16, 8, 1)


def native_tiny(steps):
    """The tiny model on PyTorch's CPU device, in a child process: its CPU
    time per step."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "native-tiny",
                          str(steps)], input="\n\n", capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"), check=True)
    return json.loads(out.stdout.splitlines()[1])


# ---- the parent --------------------------------------------------------------------------

def session_cpu(listener_pid):
    """CPU seconds of the listener's children (the sessions) so far."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with open(f"/proc/{listener_pid}/task/{listener_pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return 0.0
    for pid in kids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


class Server:
    def __init__(self, pydir):
        self.dir = tempfile.mkdtemp(prefix="rgpu-bench-")
        self.addr = "unix:" + os.path.join(self.dir, "ops.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rgpu_opserver", "--listen", self.addr, "--device", "cpu",
             "--group", "none"],
            env=dict(os.environ, PYTHONPATH=pydir, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "log"), "w"), start_new_session=True)
        deadline = time.time() + 60
        while not os.path.exists(self.addr[5:]):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("bench: the op server did not start:\n" +
                                 open(os.path.join(self.dir, "log")).read())
            time.sleep(0.1)

    def stop(self):
        os.killpg(self.proc.pid, 9)
        self.proc.wait()


def run_child(pydir, server, workload, n):
    env = dict(os.environ, PYTHONPATH=pydir, RGPU_OP_SERVER=server.addr)
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", workload,
                              str(n)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        if child.stdout.readline().strip() != "warm":
            raise SystemExit(f"bench: the {workload} client failed")
        before = session_cpu(server.proc.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        result = json.loads(child.stdout.readline())
        child.stdout.readline()                 # "done"
        result["server"] = session_cpu(server.proc.pid) - before
        child.stdin.write("\n")
        child.stdin.flush()
    finally:
        child.wait(timeout=120)
    return result


def export_revision(rev):
    folder = tempfile.mkdtemp(prefix="rgpu-bench-rev-")
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "python"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return os.path.join(folder, "python")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", metavar="REV")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("mix", "nanogpt", "tiny"))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, n = args.child[0], int(args.child[1])
        if kind == "mix":
            return child_mix(n)
        if kind == "tiny":
            return child_nanogpt(n, TINY)
        if kind == "native-tiny":
            return child_nanogpt(n, TINY, "cpu")
        return child_nanogpt(n)

    variants = [("working tree", os.path.join(REPO, "python"))]
    if args.against:
        variants.insert(0, (args.against, export_revision(args.against)))
    workloads = [w for w in ("mix", "nanogpt", "tiny") if args.only in (None, w)]
    results = {(v, w): [] for v, _ in variants for w in workloads}
    steps = {"mix": args.iters, "nanogpt": args.steps, "tiny": 4 * args.steps}
    if "tiny" in workloads:
        results[("native cpu", "tiny")] = []
    for _ in range(args.repeat):
        for name, pydir in variants:
            server = Server(pydir)
            try:
                for w in workloads:
                    results[(name, w)].append(run_child(pydir, server, w, steps[w]))
            finally:
                server.stop()
        if "tiny" in workloads:
            results[("native cpu", "tiny")].append(dict(native_tiny(steps["tiny"]), server=0.0))

    print(f"device rgpu on the CPU op server, medians of {args.repeat} runs "
          f"(mix: {args.iters} x {results[(variants[0][0], 'mix')][0]['ops_per_iter'] if 'mix' in workloads else 0} "
          f"operations; nanogpt: {args.steps} steps)")
    print("| revision | workload | wall | client CPU | server CPU | ops/s (wall) "
          "| operators/step | requests/step |")
    print("|---|---|---|---|---|---|---|---|")
    medians = {}
    for (name, w), runs in results.items():
        unit, scale = ("us/op", 1e6) if w == "mix" else ("ms/step", 1e3)
        m = {k: statistics.median(r[k] / r["units"] for r in runs) * scale
             for k in ("wall", "client", "server")}
        medians[(name, w)] = m
        rate = f"{1e6 / m['wall']:.0f}" if w == "mix" else "-"
        counts = "| - | -" if w == "mix" or name == "native cpu" else \
            f"| {runs[0].get('dispatched', '?')} | {runs[0].get('sent', 0):.0f}"
        print(f"| {name} | {w} | {m['wall']:.1f} {unit} | {m['client']:.1f} {unit} | "
              f"{m['server']:.1f} {unit} | {rate} {counts} |")
    if "tiny" in workloads:
        native = medians[("native cpu", "tiny")]["client"]
        for name, _ in variants:
            print(f"tiny: {name}: client CPU / native CPU {medians[(name, 'tiny')]['client'] / native:.2f}")
    if args.against:
        for w in workloads:
            old, new = medians[(args.against, w)], medians[("working tree", w)]
            print(f"{w}: working tree / {args.against}: wall {new['wall'] / old['wall']:.2f}, "
                  f"client CPU {new['client'] / old['client']:.2f}, "
                  f"server CPU {new['server'] / old['server']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
