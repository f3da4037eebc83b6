"""PyTorch on two GPUs, natively and through rgpu (tests/gpu/run.sh).

- Tensors made on cuda:0 and cuda:1, each where it was asked for, and a
  copy from one to the other (peer access or through the host, as PyTorch
  decides) that arrives unchanged.
- A model split over the two GPUs (its first half on cuda:0, its second on
  cuda:1, the activations and their gradients crossing between them)
  trained for 20 steps: the losses go to stdout, so native and rgpu runs
  must print the same ones, and they are checked against the same training
  on the CPU.
- torch.nn.DataParallel over both GPUs: 20 steps, each batch split between
  them and the gradients gathered on cuda:0, against the CPU.
- Each device's name and memory through torch.cuda (which PyTorch reads
  through NVML and CUDA): the two agree on how many GPUs there are.

On a machine with fewer than two GPUs it says "SKIP: one GPU" and exits 77.
See checks.py for the output convention.
"""
import os

# cuBLAS needs this for reproducible results with deterministic algorithms;
# it must be set before the library is loaded.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from checks import SKIP, Checks, need  # noqa: E402

torch = need("torch")
need("numpy")

c = Checks()
STEPS = 20


def header():
    ok = torch.cuda.is_available()
    c.result("torch.cuda.is_available", ok)
    if not ok:
        c.finish()
    n = torch.cuda.device_count()
    if n < 2:
        print(f"SKIP: one GPU ({n} visible)", flush=True)
        raise SystemExit(SKIP)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    c.say(f"torch {torch.__version__}, cuda {torch.version.cuda}, {n} GPUs")
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        c.say(f"cuda:{i} {p.name}, {p.total_memory >> 20} MiB, "
              f"compute capability {p.major}.{p.minor}")


def tensors():
    g = torch.Generator().manual_seed(1)
    host = torch.randn(1 << 20, generator=g)
    a = host.to("cuda:0")
    b = torch.ones(1 << 20, device="cuda:1")
    c.result("a tensor made for cuda:0 is on cuda:0", a.device == torch.device("cuda:0"),
             str(a.device))
    c.result("a tensor made for cuda:1 is on cuda:1", b.device == torch.device("cuda:1"),
             str(b.device))
    moved = a.to("cuda:1")
    c.result("a copy from cuda:0 lands on cuda:1", moved.device == torch.device("cuda:1"),
             str(moved.device))
    c.equal("the copy from cuda:0 to cuda:1 is unchanged", moved.cpu().numpy(),
            host.numpy())
    both = (moved + b).to("cuda:0")
    c.equal("arithmetic on cuda:1, back on cuda:0", both.cpu().numpy(), (host + 1).numpy())
    with torch.cuda.device(1):
        c.result("torch.cuda.device(1) makes cuda:1 current", torch.cuda.current_device() == 1,
                 str(torch.cuda.current_device()))
        inner = torch.zeros(4, device="cuda")
    c.result("a tensor made under torch.cuda.device(1) is on cuda:1",
             inner.device == torch.device("cuda:1"), str(inner.device))
    c.result("the current device is cuda:0 again", torch.cuda.current_device() == 0,
             str(torch.cuda.current_device()))
    free0, total0 = torch.cuda.mem_get_info(0)
    free1, total1 = torch.cuda.mem_get_info(1)
    c.result("each GPU reports its own memory", total0 > 0 and total1 > 0 and
             free0 <= total0 and free1 <= total1, f"{free0}/{total0}, {free1}/{total1}")


class Split(torch.nn.Module):
    """Two halves of an MLP on two devices (or both on one, for the CPU)."""

    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second
        self.a = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                     torch.nn.Linear(128, 128), torch.nn.ReLU()).to(first)
        self.b = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                     torch.nn.Linear(64, 10)).to(second)

    def forward(self, x):
        return self.b(self.a(x.to(self.first)).to(self.second))


def batches():
    g = torch.Generator().manual_seed(5)
    return (torch.randn(STEPS, 32, 64, generator=g),
            torch.randint(0, 10, (STEPS, 32), generator=g))


def train(model, out_device):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs, ys = batches()
    losses = []
    for step in range(STEPS):
        loss = torch.nn.functional.cross_entropy(model(xs[step]), ys[step].to(out_device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def split_model():
    torch.manual_seed(11)
    got = train(Split("cuda:0", "cuda:1"), "cuda:1")
    torch.manual_seed(11)
    want = train(Split("cpu", "cpu"), "cpu")
    c.say("split model losses: " + " ".join(f"{v:.6f}" for v in got))
    c.close("a model split over cuda:0 and cuda:1, 20 steps, against the CPU", got, want,
            1e-4)


def data_parallel():
    torch.manual_seed(13)
    net = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.Tanh(),
                              torch.nn.Linear(96, 10))
    ref = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.Tanh(),
                              torch.nn.Linear(96, 10))
    ref.load_state_dict(net.state_dict())
    dp = torch.nn.DataParallel(net.to("cuda:0"), device_ids=[0, 1])
    got = train(dp, "cuda:0")
    want = train(ref, "cpu")
    c.say("DataParallel losses: " + " ".join(f"{v:.6f}" for v in got))
    c.close("torch.nn.DataParallel over cuda:0 and cuda:1, 20 steps, against the CPU", got,
            want, 1e-4)


if __name__ == "__main__":
    header()
    c.section("tensors on two GPUs", tensors)
    c.section("model split over two GPUs", split_model)
    c.section("DataParallel", data_parallel)
    c.finish()
