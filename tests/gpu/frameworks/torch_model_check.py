"""PyTorch's recurrent layers, CUDA tensors shared between processes and a
pinned-memory DataLoader, natively and through rgpu (tests/gpu/run.sh).

- An LSTM and a GRU trained for 20 steps with cuDNN enabled: the losses go
  to stdout (the same natively and through rgpu), and each run is checked
  against the same training on the CPU.
- torch.multiprocessing: a CUDA tensor sent through a queue to a spawned
  process, which reads it and writes into it; the parent sees the write
  (CUDA IPC: the two processes share the memory, nothing is copied).
- A DataLoader with pin_memory=True and two workers feeding a training
  loop: the batches arrive pinned, and the losses match the CPU's.

See checks.py for the output convention.
"""
import os

# cuBLAS needs this for reproducible results with deterministic algorithms;
# it must be set before the library is loaded.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from checks import Checks, need  # noqa: E402

torch = need("torch")
need("numpy")

c = Checks()
STEPS = 20


def header():
    ok = torch.cuda.is_available()
    c.result("torch.cuda.is_available", ok)
    if not ok:
        c.finish()
    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    c.say(f"torch {torch.__version__}, cuda {torch.version.cuda}, "
          f"cudnn {torch.backends.cudnn.version()}")


class SequenceModel(torch.nn.Module):
    """A recurrent layer over a sequence, then a linear head on the last step."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(input_size=16, hidden_size=32, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def sequence_data():
    g = torch.Generator().manual_seed(3)
    xs = torch.randn(STEPS, 8, 24, 16, generator=g)
    ys = torch.randint(0, 4, (STEPS, 8), generator=g)
    return xs, ys


def train_sequence(cell, device):
    torch.manual_seed(7)
    model = SequenceModel(cell).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xs, ys = sequence_data()
    losses = []
    for step in range(STEPS):
        x, y = xs[step].to(device), ys[step].to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def recurrent(cell):
    name = cell.__name__
    got = train_sequence(cell, "cuda")
    want = train_sequence(cell, "cpu")
    c.say(f"{name} losses: " + " ".join(f"{v:.5f}" for v in got))
    c.close(f"{name} 20 steps (cuDNN) against the CPU", got, want, 2e-3)


def child_doubles(queue, done):
    """In the spawned process: read the shared CUDA tensor, report its sum,
    and write into it."""
    t = queue.get()
    total = float(t.sum().item())
    t.mul_(2)
    torch.cuda.synchronize()
    done.put((t.device.type, total))


def shared_tensor():
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    t = torch.arange(1000, dtype=torch.float32, device="cuda")
    p = ctx.Process(target=child_doubles, args=(queue, done))
    p.start()
    queue.put(t)
    kind, total = done.get(timeout=120)
    p.join(timeout=60)
    c.result("multiprocessing child exited", p.exitcode == 0, f"exit code {p.exitcode}")
    c.result("multiprocessing child saw a CUDA tensor", kind == "cuda", kind)
    c.result("multiprocessing child read the parent's values", total == 499500.0, f"{total}")
    torch.cuda.synchronize()
    doubled = t.cpu()
    want = torch.arange(1000, dtype=torch.float32) * 2
    c.result("multiprocessing parent sees the child's write", torch.equal(doubled, want),
             f"{doubled[:4].tolist()}")


class Points(torch.utils.data.Dataset):
    """Deterministic samples: item i depends only on i, whichever worker makes it."""

    def __len__(self):
        return 20 * 32

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(1000 + i)
        x = torch.randn(64, generator=g)
        return x, (x[:8].sum() > 0).long()


def train_loader(device, pin):
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 2)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(Points(), batch_size=32, shuffle=False,
                                         num_workers=2, pin_memory=pin)
    losses, pinned = [], True
    for x, y in loader:
        pinned = pinned and x.is_pinned() and y.is_pinned()
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, pinned


def data_loader():
    got, pinned = train_loader("cuda", True)
    want, _ = train_loader("cpu", False)
    c.result("DataLoader batches are pinned", pinned)
    c.result("DataLoader fed 20 steps", len(got) == STEPS, f"{len(got)} steps")
    c.say("DataLoader losses: " + " ".join(f"{v:.5f}" for v in got))
    c.close("DataLoader pin_memory=True, 2 workers: losses against the CPU", got, want, 1e-4)


if __name__ == "__main__":
    header()
    torch.use_deterministic_algorithms(True)
    c.section("LSTM", recurrent, torch.nn.LSTM)
    c.section("GRU", recurrent, torch.nn.GRU)
    c.section("multiprocessing", shared_tensor)
    c.section("DataLoader", data_loader)
    c.finish()
