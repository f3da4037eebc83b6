"""Two small training runs besides nanoGPT, for comparing a device with
another step by step (tests/gpu/rgpu_device_check.sh: --device cuda against
--device rgpu on a GPU machine).

    python3 train_models.py --model cnn|lstm|rnn [--steps 50] [--device cuda|rgpu|cpu]

cnn:  convolutions without bias, BatchNorm, ReLU, dropout, pooling, a linear
      head; SGD with Nesterov momentum and weight decay, a step learning-rate
      schedule, gradient clipping; eval mode for the last quarter of the
      steps (BatchNorm's running statistics, no dropout).
lstm: an embedding, a two-layer LSTM (batch_first), a linear head; Adam with
      AMSGrad, gradient clipping.
rnn:  the same with nn.RNN (tanh), which PyTorch's CPU device can also run
      for rgpu (LSTM and GRU take CUDA's fused cells on rgpu).

Deterministic settings and fixed seeds; each step prints `step N loss L`.
Batches come from a CPU generator of their own, and the device's generator
is seeded after the model is made, so that dropout draws alike on two
devices whose generators are alike (CUDA natively and through rgpu).
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Sequential):
    classes = 10

    def __init__(self):
        super().__init__(
            nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Dropout(0.1),
            nn.Conv2d(32, 64, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class Recurrent(nn.Module):
    classes = 50

    def __init__(self, cell):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.rnn = cell(32, 64, num_layers=2, batch_first=True)
        self.out = nn.Linear(64, 50)

    def forward(self, x):
        return self.out(self.rnn(self.emb(x))[0])


def batches(model, steps):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        if model == "cnn":
            yield (torch.randn(32, 3, 16, 16, generator=g),
                   torch.randint(0, 10, (32,), generator=g))
        else:
            s = torch.randint(0, 50, (16, 33), generator=g)
            yield s[:, :-1], s[:, 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("cnn", "lstm", "rnn"), required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    if args.device.startswith("rgpu"):
        import rgpu  # noqa: F401  (registers the device)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(0)
    if args.model == "cnn":
        model = Cnn().to(args.device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4,
                              nesterov=True)
        sched = torch.optim.lr_scheduler.StepLR(opt, max(1, args.steps // 4), 0.5)
    else:
        model = Recurrent(nn.LSTM if args.model == "lstm" else nn.RNN).to(args.device)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, amsgrad=True)
        sched = None
    torch.manual_seed(5)
    for step, (x, y) in enumerate(batches(args.model, args.steps), 1):
        if args.model == "cnn" and step == args.steps - args.steps // 4 + 1:
            model.eval()
        out = model(x.to(args.device))
        loss = F.cross_entropy(out.reshape(-1, model.classes), y.to(args.device).reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if sched is not None:
            sched.step()
        print(f"step {step} loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
