"""Kernels CUDA chooses (python/rgpu/cuda_choices.py): batch_norm on rgpu
tensors runs cuDNN's batch normalisation where PyTorch would for CUDA
tensors, on a server with cuDNN.

Rule: the client's rule against the choice this PyTorch makes itself for
fake CUDA tensors (no GPU needed, but a PyTorch built with cuDNN), over
shapes, dtypes, modes and flags on both sides of each limit.

CudnnServer: training runs against tests/rgpu_device/cudnn_opserver.py, an
op server on PyTorch's CPU device that says it has cuDNN and serves cuDNN's
two batch-normalisation operators with PyTorch's own kernel: the losses
match the CPU device's, the server counts the cuDNN calls, and the
autograd graph asked for cuDNN's backward; with cudnn.enabled off on the
client, none is sent."""
import os
import sys
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PYDIR, OpServer  # noqa: E402

sys.path.insert(0, PYDIR)
SERVER = None


def setUpModule():
    global SERVER, rgpu, cuda_choices
    SERVER = OpServer(module="cudnn_opserver")
    os.environ["RGPU_OP_SERVER"] = SERVER.addr
    import rgpu
    import rgpu.cuda_choices as cuda_choices
    rgpu.reset()


def tearDownModule():
    rgpu.reset()
    SERVER.stop()


class _Ops(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


class Rule(unittest.TestCase):
    def pytorch_choice(self, shape, dtype, wdtype, weight, bias, stats, training, eps, enabled,
                       channels_last):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            x = torch.empty(shape, dtype=dtype, device="cuda")
            if channels_last:
                x = x.to(memory_format=torch.channels_last)
            c = shape[1]
            per = [torch.empty(c, dtype=wdtype, device="cuda") if on else None
                   for on in (weight, bias, stats, stats)]
            ops = _Ops()
            # PyTorch reads the global flag (the argument does not count).
            saved, torch.backends.cudnn.enabled = torch.backends.cudnn.enabled, enabled
            try:
                with ops:
                    torch.batch_norm(x, *per, training, 0.1, eps, not enabled)
            finally:
                torch.backends.cudnn.enabled = saved
        chosen = {"cudnn_batch_norm", "native_batch_norm"} & set(ops.names)
        self.assertEqual(len(chosen), 1, ops.names)
        return chosen.pop() == "cudnn_batch_norm"

    def test_batch_norm_rule_is_pytorchs(self):
        if not torch.backends.cudnn.is_available():
            self.skipTest("this PyTorch has no cuDNN to compare with")
        f32, f16, bf16, f64 = torch.float32, torch.float16, torch.bfloat16, torch.float64
        base = dict(shape=(4, 3, 5, 5), dtype=f32, wdtype=f32, weight=True, bias=True, stats=True,
                    training=True, eps=1e-5, enabled=True, channels_last=False)
        cases = [{}, {"training": False}, {"shape": (4, 3)}, {"shape": (4, 3, 5)},
                 {"shape": (4, 3, 2, 2, 2)}, {"channels_last": True},
                 {"dtype": f16}, {"dtype": f16, "wdtype": f16}, {"dtype": bf16},
                 {"dtype": bf16, "wdtype": bf16}, {"dtype": f64, "wdtype": f64},
                 {"wdtype": f64}, {"weight": False}, {"bias": False},
                 {"weight": False, "bias": False}, {"stats": False},
                 {"enabled": False}, {"eps": 1e-12}, {"eps": 0.0},
                 {"shape": (880801, 2, 1, 1)}, {"shape": (880802, 2, 1, 1)},
                 {"shape": (65535, 2, 1, 1), "training": False},
                 {"shape": (65536, 2, 1, 1), "training": False}]
        for case in cases:
            a = dict(base, **case)
            with self.subTest(**case):
                meta = torch.empty(a["shape"], dtype=a["dtype"], device="meta")
                per = [torch.empty(a["shape"][1], dtype=a["wdtype"], device="meta") if on else None
                       for on in (a["weight"], a["bias"], a["stats"], a["stats"])]
                ours = cuda_choices.cudnn_batch_norm_fits(meta, *per, a["training"], a["eps"],
                                                          a["enabled"])
                self.assertEqual(ours, self.pytorch_choice(**a))


class Net(nn.Sequential):
    classes = 5

    def __init__(self):
        super().__init__(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.BatchNorm1d(32), nn.Linear(32, 5))


class CudnnServer(unittest.TestCase):
    def train(self, d, steps=8, eval_at=6):
        torch.manual_seed(0)
        model = Net().to(d)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        g = torch.Generator().manual_seed(1)
        losses = []
        for i in range(steps):
            if i == eval_at:
                model.eval()
            x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g)
            loss = F.cross_entropy(model(x.to(d)), y.to(d))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        stats = [model[1].running_mean.cpu(), model[4].running_var.cpu()]
        return losses, stats

    def calls(self):
        return rgpu._session.get().request(["cudnn_calls"])

    def compare(self):
        cpu, cpu_stats = self.train("cpu")
        before = self.calls()
        rg, rg_stats = self.train("rgpu")
        after = self.calls()
        for i, (a, b) in enumerate(zip(cpu, rg)):
            self.assertLessEqual(abs(a - b), 1e-5 * abs(a), f"step {i}: cpu {a} rgpu {b}")
        for a, b in zip(cpu_stats, rg_stats):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
        return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}

    def test_batch_norm_runs_cudnns_kernel(self):
        sent = self.compare()
        # Two BatchNorm2d (4-d input) go to cuDNN in all 8 steps; their
        # backward only in the 6 training steps (in evaluation mode CUDA's
        # backward is PyTorch's own).  BatchNorm1d's 2-d input never goes.
        self.assertEqual(sent.get("cudnn_batch_norm"), 2 * 8, sent)
        self.assertEqual(sent.get("cudnn_batch_norm_backward"), 2 * 6, sent)

    def test_cudnn_disabled_on_the_client(self):
        torch.backends.cudnn.enabled = False
        try:
            sent = self.compare()
        finally:
            torch.backends.cudnn.enabled = True
        self.assertEqual(sent, {}, sent)

    def test_channels_last_convolutions(self):
        # cuDNN (and PyTorch's CPU kernels) give channels-last results for
        # channels-last arguments; the meta device gives contiguous ones.
        torch.manual_seed(2)
        conv = nn.Conv2d(3, 4, 3, padding=1).to(memory_format=torch.channels_last)
        x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last).requires_grad_()
        conv_r = nn.Conv2d(3, 4, 3, padding=1).to("rgpu").to(memory_format=torch.channels_last)
        conv_r.load_state_dict(conv.state_dict())
        x_r = x.detach().to("rgpu").requires_grad_()
        y, y_r = conv(x), conv_r(x_r)
        self.assertTrue(y_r.is_contiguous(memory_format=torch.channels_last))
        self.assertEqual(y_r.stride(), y.stride())
        y.square().sum().backward()
        y_r.square().sum().backward()
        for want, got in ((y, y_r), (x.grad, x_r.grad), (conv.weight.grad, conv_r.weight.grad)):
            self.assertEqual(got.stride(), want.stride())
            torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-5)

    def test_no_grad_and_inference(self):
        x = torch.randn(4, 3, 6, 6)
        bn = nn.BatchNorm2d(3)
        want = bn(x)
        bn_r = nn.BatchNorm2d(3).to("rgpu")
        for mode in (torch.no_grad, torch.inference_mode):
            with self.subTest(mode=mode.__name__), mode():
                got = bn_r(x.to("rgpu")).cpu()
                torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
                bn_r.running_mean.copy_(torch.zeros(3))
                bn_r.running_var.copy_(torch.ones(3))


if __name__ == "__main__":
    unittest.main()
