"""A small character-level GPT, trained from scratch: rgpu's example of an
unmodified PyTorch training script.

    python3 train.py [--steps 200] [--log-every 20] [--layers 4] [--heads 4]
                     [--embed 128] [--block 64] [--batch 32] [--seed 1337]
                     [--data FILE] [--device cuda|rgpu|cpu]

The text is data.txt beside this file (written on first use from a fixed
seed, so it needs no download).  Every --log-every steps it prints
`step N loss L time_ms T`; the last line gives the mean step time.  With a
fixed seed and deterministic settings, runs on the same GPU print the same
losses, natively or through rgpu.

--device rgpu runs it on rgpu's PyTorch device (the rgpu Python package and
an op server named by RGPU_OP_SERVER, which `rgpu run` sets): tensors live
on the op server's GPU, the script itself runs here on any PyTorch.
"""
import argparse
import math
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WORDS = ("the gpu is far away but the model does not mind it trains all the same "
         "while the laptop keeps the editor and the files and the network carries "
         "every kernel launch and every copy to a card in another room").split()


def make_text(path, n_words=60000, seed=7):
    """A deterministic corpus: sentences drawn from a small vocabulary."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_words // 12):
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
        lines.append(sentence.capitalize() + ".")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


class Block(nn.Module):
    def __init__(self, embed, heads, block):
        super().__init__()
        self.ln1 = nn.LayerNorm(embed)
        self.attn = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.ln2 = nn.LayerNorm(embed)
        self.mlp = nn.Sequential(nn.Linear(embed, 4 * embed), nn.GELU(), nn.Linear(4 * embed, embed))
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, embed, heads, layers, block):
        super().__init__()
        self.tok = nn.Embedding(vocab, embed)
        self.pos = nn.Embedding(block, embed)
        self.blocks = nn.Sequential(*[Block(embed, heads, block) for _ in range(layers)])
        self.ln = nn.LayerNorm(embed)
        self.head = nn.Linear(embed, vocab, bias=False)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        logits = self.head(self.ln(self.blocks(x)))
        # The loss in fp32 also under autocast (bench/train_bench.py's AMP model).
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embed", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data.txt"))
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    if args.device.startswith("rgpu"):
        import rgpu  # noqa: F401  (registers the device)

    # Deterministic kernels, so that two runs on one GPU agree step by step.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)

    if not os.path.exists(args.data):
        make_text(args.data)
    text = open(args.data).read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    model = GPT(len(chars), args.embed, args.heads, args.layers, args.block).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    times = []
    wall_from, waits_from = None, None
    for step in range(1, args.steps + 1):
        if step == min(11, args.steps):     # after warm-up: whole steps, batches included
            server_from = _rgpu_server_cpu(args.device)
            wall_from, waits_from = time.perf_counter(), _rgpu_waits(args.device)
            cpu_from = time.process_time()
        ix = torch.randint(len(data) - args.block - 1, (args.batch,), generator=gen)
        x = torch.stack([data[i:i + args.block] for i in ix]).to(args.device)
        y = torch.stack([data[i + 1:i + args.block + 1] for i in ix]).to(args.device)
        t0 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.log_every == 0 or step == args.steps:
            value = loss.item()     # waits for the step
            times.append(time.perf_counter() - t0)
            print(f"step {step} loss {value:.6f} time_ms {times[-1] * 1e3:.2f}", flush=True)
    print(f"mean_step_ms {sum(times) / len(times) * 1e3:.2f}")
    counted = args.steps - min(11, args.steps) + 1
    print(f"wall_ms_per_step {(time.perf_counter() - wall_from) / counted * 1e3:.2f} "
          f"(steps {min(11, args.steps)}..{args.steps})")
    # This process's CPU time, all its threads (the backward pass runs on
    # one of PyTorch's): what the script and PyTorch cost here.
    print(f"cpu_ms_per_step {(time.process_time() - cpu_from) / counted * 1e3:.2f}")
    if waits_from is not None:
        print(f"rgpu_waits_per_step {(_rgpu_waits(args.device) - waits_from) / counted:.2f}")
        # The op server session's CPU time (one more wait, not counted above).
        print(f"server_cpu_ms_per_step "
              f"{(_rgpu_server_cpu(args.device) - server_from) / counted * 1e3:.2f}")


def _rgpu_server_cpu(device):
    """The op server session's CPU seconds so far (device rgpu), else None."""
    if not device.startswith("rgpu"):
        return None
    return torch.rgpu.server_cpu_time()


def _rgpu_waits(device):
    """Requests that waited for the op server so far (device rgpu), else None."""
    if not device.startswith("rgpu"):
        return None
    import rgpu
    return rgpu.stats()["waits"]


if __name__ == "__main__":
    main()
