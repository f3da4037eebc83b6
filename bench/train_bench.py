#!/usr/bin/env python3
"""Training-step benchmark: stock PyTorch, natively and through rgpu.

    python3 bench/train_bench.py worker --model MODEL [--warmup 10] [--steps 50] ...
    python3 bench/train_bench.py compare [--models gpt-small,gpt-amp,convnet]
            [--rgpu "build/launcher/rgpu run --server 127.0.0.1:9714 --"]
            [--rgpu-env NAME=VALUE ...] [--label "1 ms"] [--json OUT] [--log FILE]
            [--native-from JSON] [--no-native] [--timeout S] [size options]
    python3 bench/train_bench.py table JSON...

Models (sizes are options; defaults below):
  gpt-small  character-level GPT, fp32, launch-bound: 4 layers, d=128, 4 heads,
             batch 32 x block 64, vocabulary 65
  gpt-amp    GPT with bf16 autocast, GPU-bound: 6 layers, d=768, 12 heads,
             batch 16 x block 256
  convnet    3 x (conv 3x3, batch norm, ReLU, pooling) + linear on 32x32 images,
             batch 64, fp32 (cuDNN)
  gpt-bf16   a GPT written apart from the example's (fused attention through
             scaled_dot_product_attention, tied embeddings, GELU tanh), bf16
             autocast: 6 layers, d=768, 12 heads, batch 16 x block 256,
             vocabulary 4096
  resnet     a ResNet-18-like image model (basic residual blocks, batch norm),
             fp32, batch 32 of 3x112x112 images: a 4.8 MiB pageable batch
             copied every step

Each step does what a training loop fed by a DataLoader does: builds the
batch on the CPU (from a seeded CPU generator), copies it with .to("cuda"),
runs forward, backward and an AdamW step; every 10th step reads the loss
(loss.item()), which is logged.  The time of a step is wall clock over whole
steps, batch building and copy included: after --warmup steps, the mean
over --steps steps (both multiples of 10, so that the measured span starts
and ends at a loss read, where the GPU has caught up).

`worker` runs one model in this process and prints, last, one JSON line:
model, mode (rgpu when rgpu's client library is loaded, else native),
step_ms, cpu_ms (the CPU time per measured step of this process's busiest
thread name: a step whose cpu_ms is near its step_ms is bound by the
program's own side), cpu_threads (the same for the six busiest thread
names; a pool's threads share a name and are added up), steps,
waits_per_step and unwaited_per_step (requests that waited
for rgpud's reply, and that did not, per measured step: rgpu_stats_totals
from librgpu-client.so.0; null natively), and the logged losses.

`compare` runs, for each model, a native worker (plain python3) and an rgpu
worker (the --rgpu command prefix in front of python3, with RGPU_STATS=1 so
that rgpu's per-call table lands in the --log file), and prints:
  model | RTT (--label) | native ms | rgpu ms | ratio (rgpu / native) |
  waits/step | unwaited/step | CPU ms per step of the busiest thread of the
  native and the rgpu process | losses identical (exactly; otherwise the largest absolute
  difference)
`--native-from` takes the native runs from an earlier --json file instead
of running them again (one native run for several links).  `--repeat N`
runs N pairs (native, then rgpu) per model and shows the pair of median
ratio, every pair's ratio after its losses.  `table` prints
the rows of several --json files as one table.

Each worker gives PyTorch --threads (4) CPU threads, natively and through
rgpu alike.  The benchmark runs the program, rgpud and rgpu-delay on one
machine; with its own choice (every core) PyTorch's pool, spinning after
each batch it builds, took the cores rgpud and rgpu-delay run on, which a
client on a machine of its own does not (on the H100: the pool's threads
used 220-300 ms of CPU per 25 ms resnet step).

Deterministic settings (seed, deterministic algorithms, CUBLAS_WORKSPACE_CONFIG,
cuDNN deterministic) make the fp32 runs' losses comparable bit for bit on
one GPU.  Needs CUDA; nothing from rgpu is imported.
"""
import argparse
import ctypes
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time

MODELS = ("gpt-small", "gpt-amp", "convnet", "gpt-bf16", "resnet")
DEFAULTS = {
    "gpt-small": dict(layers=4, embed=128, heads=4, batch=32, block=64, amp=False),
    "gpt-amp": dict(layers=6, embed=768, heads=12, batch=16, block=256, amp=True),
    "convnet": dict(batch=64, image=32, width=32, amp=False),
    "gpt-bf16": dict(layers=6, embed=768, heads=12, batch=16, block=256, amp=True,
                     vocab=4096),
    "resnet": dict(batch=32, image=112, width=64, amp=False, classes=100),
}
VOCAB = 65
LOG_EVERY = 10


# ---- the worker ------------------------------------------------------------------

def rgpu_totals_reader():
    """rgpu_stats_totals from an already loaded librgpu-client.so.0, or None
    (a native run: the library is not there, and must not be loaded)."""
    try:
        lib = ctypes.CDLL("librgpu-client.so.0", mode=os.RTLD_NOLOAD)
        fn = lib.rgpu_stats_totals
    except (OSError, AttributeError):
        return None
    fn.restype = None
    fn.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)]

    def read():
        w, u = ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)
        fn(ctypes.byref(w), ctypes.byref(u))
        return w.value, u.value
    return read


def make_corpus(n_chars, seed):
    """A deterministic text over exactly VOCAB characters: sentences of words
    drawn from a fixed random lexicon, so that there is something to learn."""
    alphabet = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                " .,;:!?'-\n012")
    assert len(alphabet) == VOCAB
    rng = random.Random(seed)
    lexicon = ["".join(rng.choice(alphabet[:26]) for _ in range(rng.randint(2, 9)))
               for _ in range(400)]
    out, size = [], 0
    while size < n_chars:
        words = [rng.choice(lexicon) for _ in range(rng.randint(4, 14))]
        words[0] = words[0].capitalize()
        s = " ".join(words) + rng.choice(".,;:!?") + rng.choice(" \n'-012")
        out.append(s)
        size += len(s)
    text = "".join(out)[:n_chars]
    # Every character occurs, so the vocabulary is all VOCAB of them.
    text = alphabet + text
    return [alphabet.index(c) for c in text]


def build_gpt(torch, cfg):
    """The GPT of examples/nanogpt (one definition of the model: explicit
    attention, deterministic backward), at the configured size."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "nanogpt",
                        "train.py")
    spec = importlib.util.spec_from_file_location("nanogpt_train", path)
    nanogpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nanogpt)
    return nanogpt.GPT(VOCAB, cfg["embed"], cfg["heads"], cfg["layers"], cfg["block"])


def gpt_batches(torch, cfg, seed):
    data = torch.tensor(make_corpus(200000, seed), dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    block, batch = cfg["block"], cfg["batch"]

    def next_batch():
        ix = torch.randint(len(data) - block - 1, (batch,), generator=gen).tolist()
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + block + 1] for i in ix])
        return x, y
    return next_batch


def build_convnet(torch, cfg):
    nn = torch.nn
    w = cfg["width"]

    def stage(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True)]

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *stage(3, w), nn.MaxPool2d(2),
                *stage(w, 2 * w), nn.MaxPool2d(2),
                *stage(2 * w, 4 * w), nn.AdaptiveAvgPool2d(1))
            self.fc = nn.Linear(4 * w, 10)

        def forward(self, x, y):
            logits = self.fc(self.features(x).flatten(1))
            return torch.nn.functional.cross_entropy(logits.float(), y)

    return ConvNet()


def build_gpt_bf16(torch, cfg):
    """A GPT defined here, apart from examples/nanogpt, as a user would write
    one today: fused attention (scaled_dot_product_attention, causal),
    pre-norm blocks, GELU (tanh), tied input and output embeddings."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads) \
                .permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self, vocab, d, heads, layers, block):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.position = nn.Parameter(torch.zeros(block, d))
            nn.init.normal_(self.position, std=0.02)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.norm = nn.LayerNorm(d)
            for m in self.modules():            # GPT-2's initialisation
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

        def forward(self, idx, targets):
            x = self.embed(idx) + self.position[:idx.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            logits = self.norm(x) @ self.embed.weight.t()
            return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    return Gpt(cfg["vocab"], cfg["embed"], cfg["heads"], cfg["layers"], cfg["block"])


def token_batches(torch, cfg, seed):
    """Token sequences over cfg["vocab"] ids with something to learn: words
    of 1 to 4 tokens from a fixed lexicon, drawn with Zipf-like frequencies."""
    rng = random.Random(seed)
    vocab = cfg["vocab"]
    lexicon = [[rng.randrange(vocab) for _ in range(rng.randint(1, 4))] for _ in range(3000)]
    weights = [1.0 / (i + 1) for i in range(len(lexicon))]
    tokens = []
    while len(tokens) < 300000:
        for w in rng.choices(lexicon, weights, k=1000):
            tokens.extend(w)
    data = torch.tensor(tokens, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    block, batch = cfg["block"], cfg["batch"]

    def next_batch():
        ix = torch.randint(len(data) - block - 1, (batch,), generator=gen).tolist()
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + block + 1] for i in ix])
        return x, y
    return next_batch


def build_resnet(torch, cfg):
    """ResNet-18's shape (a 7x7 stem, four stages of two basic residual
    blocks, 64 to 512 channels), written here."""
    nn = torch.nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.skip = nn.Sequential()
            if stride != 1 or cin != cout:
                self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))

    class ResNet(nn.Module):
        def __init__(self, w, classes):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], w
            for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
                layers += [Basic(cin, cout, 1 if i == 0 else 2), Basic(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x, y):
            h = self.layers(self.stem(x)).mean(dim=(2, 3))
            return torch.nn.functional.cross_entropy(self.fc(h), y)

    return ResNet(cfg["width"], cfg["classes"])


def image_batches(torch, cfg, seed):
    """cfg["classes"] (10) classes, each a fixed random pattern; an image is
    its class's pattern plus noise."""
    gen = torch.Generator().manual_seed(seed)
    n, classes = cfg["image"], cfg.get("classes", 10)
    protos = torch.randn(classes, 3, n, n, generator=gen)
    batch = cfg["batch"]

    def next_batch():
        y = torch.randint(classes, (batch,), generator=gen)
        x = protos[y] + 0.8 * torch.randn(batch, 3, n, n, generator=gen)
        return x, y
    return next_batch


def thread_cpu_ns():
    """CPU time of each thread of this process so far, in ns, by thread id:
    {tid: (name, ns)} from /proc (empty where there is none)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        # The main thread apart: pools of threads share its name.
        out[tid] = (name + " (main)" if tid == str(os.getpid()) else name, ns)
    return out


def cpu_per_thread_name(before, after, steps):
    """ms of CPU per step that each thread spent between the two samples,
    the threads of one name added up (a pool's workers share one), the
    busiest six names."""
    by_name = {}
    for tid, (name, ns) in after.items():
        ms = (ns - before.get(tid, (name, 0))[1]) / 1e6 / steps
        by_name[name] = by_name.get(name, 0.0) + ms
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:6]
    return {name: round(ms, 2) for name, ms in top}


def worker(args):
    # Deterministic kernels, set before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    totals = rgpu_totals_reader()
    import torch
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    cfg = dict(DEFAULTS[args.model])
    for k in ("layers", "embed", "heads", "batch", "block", "image", "width"):
        v = getattr(args, k)
        if v is not None and k in cfg:
            cfg[k] = v
    if args.warmup % LOG_EVERY or args.steps % LOG_EVERY or args.steps <= 0:
        sys.exit(f"train_bench: --warmup and --steps must be multiples of {LOG_EVERY} "
                 f"(and --steps > 0)")

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)

    if args.model == "gpt-bf16":
        model = build_gpt_bf16(torch, cfg)
        next_batch = token_batches(torch, cfg, args.seed)
    elif args.model.startswith("gpt"):
        model = build_gpt(torch, cfg)
        next_batch = gpt_batches(torch, cfg, args.seed)
    elif args.model == "resnet":
        model = build_resnet(torch, cfg)
        next_batch = image_batches(torch, cfg, args.seed)
    else:
        model = build_convnet(torch, cfg)
        next_batch = image_batches(torch, cfg, args.seed)
    dev = args.device
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    amp = cfg.get("amp", False)
    batch_bytes = []

    def step(n):
        x, y = next_batch()
        if not batch_bytes:
            batch_bytes.append(x.nbytes + y.nbytes)
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=amp):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if n % LOG_EVERY == 0:
            value = loss.item()
            losses.append(value)
            print(f"step {n} loss {value!r}", flush=True)

    losses = []
    total = args.warmup + args.steps
    for n in range(1, args.warmup + 1):
        step(n)
    if dev == "cuda":
        torch.cuda.synchronize()
    before = totals() if totals else None
    t0 = time.perf_counter()
    c0 = thread_cpu_ns()
    for n in range(args.warmup + 1, total + 1):
        step(n)
    wall = time.perf_counter() - t0
    threads = cpu_per_thread_name(c0, thread_cpu_ns(), args.steps)
    after = totals() if totals else None

    result = {
        "model": args.model,
        "mode": "rgpu" if totals else "native",
        "step_ms": wall * 1000.0 / args.steps,
        "cpu_ms": max(threads.values()) if threads else None,
        "cpu_threads": threads,
        "steps": args.steps,
        "warmup": args.warmup,
        "waits_per_step": (after[0] - before[0]) / args.steps if totals else None,
        "unwaited_per_step": (after[1] - before[1]) / args.steps if totals else None,
        "losses": losses,
        "loss_steps": list(range(LOG_EVERY, total + 1, LOG_EVERY)),
        "config": dict(cfg, threads=torch.get_num_threads()),
        "batch_bytes": batch_bytes[0] if batch_bytes else None,
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else dev,
        "torch": torch.__version__,
    }
    print(json.dumps(result), flush=True)


# ---- compare and table -----------------------------------------------------------

def worker_argv(args, model):
    argv = [sys.executable, os.path.abspath(__file__), "worker", "--model", model,
            "--warmup", str(args.warmup), "--steps", str(args.steps), "--seed", str(args.seed),
            "--lr", str(args.lr), "--threads", str(args.threads)]
    for k in ("layers", "embed", "heads", "batch", "block", "image", "width"):
        v = getattr(args, k)
        if v is not None:
            argv += ["--" + k, str(v)]
    return argv


def run_worker(argv, env, timeout, log, title):
    """Run a worker in its own process group (a timeout ends the launcher and
    everything under it); its result, or None and a reason."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, start_new_session=True)

    def end_group():
        out, err = "", ""
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = p.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                pass
        return out, err

    try:
        out, err = p.communicate(timeout=timeout)
        why = None if p.returncode == 0 else f"exit {p.returncode}"
    except subprocess.TimeoutExpired:
        out, err = end_group()
        why = f"timeout ({timeout:g} s)"
    except KeyboardInterrupt:        # SIGINT, or SIGTERM (compare's handler)
        end_group()
        raise
    if log:
        with open(log, "a") as f:
            f.write(f"===== {title}: {' '.join(shlex.quote(a) for a in argv)}\n")
            f.write(f"----- {why or 'ok'}, {time.perf_counter() - t0:.1f} s; stdout\n{out}")
            f.write(f"----- stderr\n{err}\n")
    result = None
    for line in reversed((out or "").splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    if result is None and why is None:
        why = "no result line"
    if result is None:
        # The exception's last line or rgpu's own complaint, not a backtrace.
        lines = [l.strip() for l in (err or "").splitlines() if l.strip()]
        telling = [l for l in lines if "rgpu[" in l or "Error" in l or "error" in l]
        last = (telling or lines or [""])[-1][:200]
        why = (why or "failed") + (": " + last if last else "")
    return result, why


def compare_losses(a, b):
    """('yes' | 'no' | '-', largest absolute difference or None)."""
    if not a or not b:
        return "-", None
    # Runs of different lengths (--steps) are compared over the steps both
    # logged: the same steps, from the same seed.
    n = min(len(a["losses"]), len(b["losses"]))
    la, lb = a["losses"][:n], b["losses"][:n]
    if n == 0:
        return "-", None
    diff = max(abs(x - y) for x, y in zip(la, lb))
    word = "yes" if la == lb else "no"
    if len(a["losses"]) != len(b["losses"]):
        word += f" (first {n})"
    return word, diff


def make_row(model, label, native, rgpu, native_why, rgpu_why):
    same, diff = compare_losses(native, rgpu)
    ratio = None
    if native and rgpu and native["step_ms"] > 0:
        ratio = rgpu["step_ms"] / native["step_ms"]
    return {"model": model, "label": label, "native": native, "rgpu": rgpu,
            "native_error": native_why, "rgpu_error": rgpu_why, "ratio": ratio,
            "losses_identical": same, "max_abs_diff": diff}


HEADER = (f"{'model':10} {'batch':>9} {'RTT':>8} {'native ms':>10} {'rgpu ms':>10} {'ratio':>7} "
          f"{'waits/step':>10} {'unwaited':>9} {'CPU n/r':>11}  losses identical")


def format_row(r):
    def ms(res):
        return f"{res['step_ms']:10.2f}" if res else f"{'-':>10}"
    rg = r["rgpu"]
    waits = f"{rg['waits_per_step']:10.1f}" if rg and rg.get("waits_per_step") is not None \
        else f"{'-':>10}"
    unw = f"{rg['unwaited_per_step']:9.1f}" if rg and rg.get("unwaited_per_step") is not None \
        else f"{'-':>9}"
    ratio = f"{r['ratio']:7.2f}" if r["ratio"] is not None else f"{'-':>7}"

    def cpu(res):
        return f"{res['cpu_ms']:.1f}" if res and res.get("cpu_ms") is not None else "-"
    cpus = f"{cpu(r['native']) + '/' + cpu(rg):>11}"
    same = r["losses_identical"]
    if same.startswith("no"):
        same += f" (max abs diff {r['max_abs_diff']:.3g})"
    if len(r.get("ratios") or ()) > 1:
        same += f"  (ratios of {len(r['ratios'])} pairs: " + \
            ", ".join(f"{x:.2f}" for x in r["ratios"]) + ")"
    errors = [f"{k}: {r[k + '_error']}" for k in ("native", "rgpu") if r.get(k + "_error")]
    if errors:
        same += "  [" + "; ".join(errors) + "]"
    size = (r["native"] or rg or {}).get("batch_bytes")
    batch = f"{size / 1024:7.0f} K" if size else f"{'-':>9}"
    return (f"{r['model']:10} {batch} {r['label']:>8} {ms(r['native'])} {ms(rg)} {ratio} {waits} "
            f"{unw} {cpus}  {same}")


def compare(args):
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            sys.exit(f"train_bench: unknown model '{m}' (one of {', '.join(MODELS)})")
    prefix = shlex.split(args.rgpu) if args.rgpu else []
    native_rows = {}
    if args.native_from:
        with open(args.native_from) as f:
            for r in json.load(f)["rows"]:
                native_rows[r["model"]] = (r["native"], r.get("native_error"))
    env_native = dict(os.environ)
    for k in [k for k in env_native if k.startswith("RGPU_")]:
        del env_native[k]
    env_rgpu = dict(os.environ, RGPU_STATS="1")
    for kv in args.rgpu_env:
        k, _, v = kv.partition("=")
        env_rgpu[k] = v

    def on_term(signum, frame):
        raise KeyboardInterrupt
    # `timeout` around compare sends SIGTERM: end the worker's process group
    # too, keeping the rows done so far.
    signal.signal(signal.SIGTERM, on_term)

    def save(rows):
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"label": args.label, "rows": rows}, f, indent=1)

    print(HEADER, flush=True)
    rows = []
    try:
        run_models(args, models, prefix, native_rows, env_native, env_rgpu, rows, save)
    except KeyboardInterrupt:
        print(f"(interrupted after {len(rows)} of {len(models)} models)", flush=True)
        save(rows)
        return 130
    save(rows)
    return 0 if all(r["native"] or args.no_native for r in rows) else 1


def run_models(args, models, prefix, native_rows, env_native, env_rgpu, rows, save):
    for m in models:
        argv = worker_argv(args, m)
        pairs = []
        for i in range(args.repeat):
            tag = f" (pair {i + 1} of {args.repeat})" if args.repeat > 1 else ""
            if m in native_rows:
                native, nwhy = native_rows[m]
            elif args.no_native:
                native, nwhy = None, None
            else:
                native, nwhy = run_worker(argv, env_native, args.timeout, args.log,
                                          f"{m} native{tag}")
            rgpu, rwhy = None, None
            if prefix:
                rgpu, rwhy = run_worker(prefix + argv, env_rgpu, args.timeout, args.log,
                                        f"{m} rgpu {args.label}{tag}")
            pairs.append(make_row(m, args.label, native, rgpu, nwhy, rwhy))
        row = median_pair(pairs)
        rows.append(row)
        save(rows)
        print(format_row(row), flush=True)


def median_pair(pairs):
    """Of --repeat pairs (native run, then rgpu run), the one whose ratio is
    the median, with every pair's ratio beside it: the host's speed drifts
    between minutes, and one pair's ratio can be off by tens of percent."""
    measured = sorted((p for p in pairs if p["ratio"] is not None), key=lambda p: p["ratio"])
    if not measured:
        return pairs[0]
    row = dict(measured[(len(measured) - 1) // 2])
    row["ratios"] = [p["ratio"] for p in measured]
    return row


def table(files):
    print(HEADER)
    for path in files:
        try:
            with open(path) as f:
                rows = json.load(f)["rows"]
        except (OSError, ValueError, KeyError) as e:
            print(f"({path}: {e})")
            continue
        for r in rows:
            print(format_row(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--warmup", type=int, default=10, help="steps before timing (default 10)")
        p.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
        p.add_argument("--seed", type=int, default=1337)
        p.add_argument("--lr", type=float, default=1e-3)
        p.add_argument("--threads", type=int, default=4,
                       help="PyTorch CPU threads of each worker (default 4; 0: PyTorch's own "
                            "choice, every core)")
        g = p.add_argument_group("model sizes (default: each model's own)")
        for k in ("layers", "embed", "heads", "block"):
            g.add_argument("--" + k, type=int, help="GPT " + k)
        g.add_argument("--batch", type=int, help="batch size")
        g.add_argument("--image", type=int, help="convnet image side (default 32)")
        g.add_argument("--width", type=int, help="convnet first layer's channels (default 32)")

    w = sub.add_parser("worker", help="run one model here, print one JSON line")
    w.add_argument("--model", required=True, choices=MODELS)
    w.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cuda (default); cpu only to try a model without a GPU")
    common(w)

    c = sub.add_parser("compare", help="native vs rgpu workers, one table")
    c.add_argument("--models", default=",".join(MODELS))
    c.add_argument("--rgpu", default="", help="command prefix for the rgpu runs, e.g. "
                   "\"build/launcher/rgpu run --server 127.0.0.1:9714 --\"")
    c.add_argument("--rgpu-env", action="append", default=[], metavar="NAME=VALUE",
                   help="more environment for the rgpu runs (RGPU_STATS=1 is set)")
    c.add_argument("--label", default="-", help="the link, for the RTT column")
    c.add_argument("--native-from", help="take the native runs from this --json file")
    c.add_argument("--no-native", action="store_true", help="run no native workers")
    c.add_argument("--timeout", type=float, default=600, help="seconds per worker")
    c.add_argument("--repeat", type=int, default=1,
                   help="pairs of runs (native, then rgpu) per model; the row is the pair "
                        "of median ratio, every pair's ratio beside it (default 1)")
    c.add_argument("--json", help="write the rows here")
    c.add_argument("--log", help="append each worker's stdout and stderr here")
    common(c)

    t = sub.add_parser("table", help="the rows of several --json files, one table")
    t.add_argument("files", nargs="+")

    args = ap.parse_args()
    if args.cmd == "worker":
        worker(args)
    elif args.cmd == "compare":
        sys.exit(compare(args))
    else:
        table(args.files)


if __name__ == "__main__":
    main()
