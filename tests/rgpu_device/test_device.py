"""The rgpu device against PyTorch's CPU device: every test runs the same code
on both and compares (common.assert_same).  The op server runs on PyTorch's
CPU device, so results are expected equal, not merely close."""
import copy
import io
import os
import signal
import sys
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PYDIR, OpServer, assert_same  # noqa: E402

sys.path.insert(0, PYDIR)
SERVER = None


def setUpModule():
    global SERVER, rgpu
    SERVER = OpServer()
    os.environ["RGPU_OP_SERVER"] = SERVER.addr
    import rgpu


def tearDownModule():
    rgpu.reset()
    SERVER.stop()


class Case(unittest.TestCase):
    def both(self, fn, exact=False, seed=None):
        results = []
        for dev in ("cpu", "rgpu"):
            if seed is not None:
                torch.manual_seed(seed)
            results.append(fn(dev))
        assert_same(self, results[0], results[1], exact)
        return results[1]


class Creation(Case):
    def test_factories(self):
        self.both(lambda d: torch.zeros(3, 4, device=d), exact=True)
        self.both(lambda d: torch.ones(2, 3, dtype=torch.int64, device=d), exact=True)
        self.both(lambda d: torch.full((2, 2), 7.5, device=d), exact=True)
        self.both(lambda d: torch.arange(1, 11, 3, device=d), exact=True)
        self.both(lambda d: torch.linspace(-1, 1, 9, device=d), exact=True)
        self.both(lambda d: torch.eye(3, 5, device=d), exact=True)
        self.both(lambda d: torch.tensor([[1, 2], [3, 4.5]], device=d), exact=True)
        self.both(lambda d: torch.zeros_like(torch.ones(2, 3, device=d)), exact=True)
        self.both(lambda d: torch.empty(5, 2, device=d).shape)

    def test_device_is_rgpu(self):
        x = torch.ones(2, device="rgpu")
        self.assertEqual(x.device, torch.device(type="rgpu", index=0))
        self.assertTrue(x.is_rgpu)
        self.assertTrue(torch.rgpu.is_available())
        self.assertEqual(torch.rgpu.device_count(), 1)
        self.assertIn("rgpu:0", repr(x))

    def test_server_cpu_time(self):
        before = torch.rgpu.server_cpu_time()
        x = torch.randn(256, 256, device="rgpu")
        for _ in range(20):
            x = (x @ x).tanh()
        x.sum().item()
        after = torch.rgpu.server_cpu_time()
        self.assertIsInstance(before, float)
        self.assertGreater(after, before)


class Copies(Case):
    def test_round_trip_dtypes(self):
        for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                      torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64):
            src = (torch.arange(24, dtype=torch.float64).reshape(2, 3, 4) - 7).to(dtype)
            self.both(lambda d: src.to(d), exact=True)

    def test_non_contiguous_both_ways(self):
        src = torch.arange(30.).reshape(5, 6)
        self.both(lambda d: src.t().to(d), exact=True)
        self.both(lambda d: src.to(d).t().contiguous(), exact=True)
        self.both(lambda d: src.to(d)[1::2, ::3], exact=True)
        r = src.to("rgpu").t()
        self.assertTrue(torch.equal(r.cpu(), src.t()))
        self.assertEqual(r.cpu().stride(), src.t().stride())   # .cpu() keeps the layout

    def test_copy_into_and_out_of(self):
        def f(d):
            dst = torch.zeros(4, 4, device=d)
            dst[1:3].copy_(torch.arange(8.).reshape(2, 4))
            dst[:, 0].copy_(torch.tensor(5.))
            out = torch.empty(4, 4)
            out.copy_(dst)
            return dst, out.to(d)
        self.both(f, exact=True)

    def test_large_copy(self):
        src = torch.randn(3 << 20)            # 12 MB: more than one batch of bytes
        self.both(lambda d: src.to(d) * 2, exact=True)

    def test_copies_in_inference_mode(self):
        # Under inference_mode tensor.to and .cpu reach rgpu undecomposed.
        x = torch.arange(6.).reshape(2, 3)
        with torch.inference_mode():
            r = (x.to("rgpu") * 2).t()
            for back in (r.cpu(), r.to("cpu"), r.to(torch.device("cpu"), torch.float64),
                         r.to(x), r.double().cpu()):
                self.assertEqual(back.device.type, "cpu")
                torch.testing.assert_close(back, (x * 2).t(), check_dtype=False)
            self.assertIs(r.to("rgpu"), r)

    def test_module_to(self):
        torch.manual_seed(0)
        m = nn.Linear(4, 3)
        r = nn.Linear(4, 3).to("rgpu")
        r.load_state_dict(m.state_dict())
        self.assertEqual(r.weight.device.type, "rgpu")
        self.assertIsInstance(r.weight, nn.Parameter)
        x = torch.randn(2, 4)
        assert_same(self, m(x), r(x.to("rgpu")))


class ViewsAndInPlace(Case):
    def test_view_shares_storage(self):
        def f(d):
            x = torch.arange(12., device=d).reshape(3, 4)
            v = x[1]
            v.add_(100)
            x.t()[0].mul_(-1)
            x.view(-1)[11] = 42
            y = x.unsqueeze(0).expand(2, 3, 4)
            return x, v, y, x.detach()
        self.both(f, exact=True)

    def test_repeated_calls_keep_aliasing(self):
        # The same operators on tensors laid out alike reuse the meta
        # device's answer; each call must still alias its own arguments.
        def f(d):
            outs = []
            for i in range(3):
                base = torch.zeros(4, 4, device=d)
                other = torch.ones(4, 4, device=d)
                base[1].add_(i + 1)
                base.t()[0].mul_(2)
                torch.add(base, other, out=other)
                outs += [base, other, base[2:].sum(0)]
            return outs
        self.both(f, exact=True)

    def test_in_place_and_out(self):
        def f(d):
            a = torch.arange(6., device=d)
            b = torch.ones(6, device=d)
            out = torch.empty(6, device=d)
            torch.add(a, b, alpha=2, out=out)
            a.clamp_(min=2).sqrt_()
            b[::2].zero_()
            return a, b, out
        self.both(f, exact=True)

    def test_setitem_and_dtype_view(self):
        def f(d):
            x = torch.zeros(6, device=d)
            x[::2] = 5
            x[torch.tensor([1, 3])] = torch.tensor(9.)
            return x, x.view(torch.int32)
        self.both(f, exact=True)

    def test_resize_in_place_refused(self):
        x = torch.ones(3, device="rgpu")
        with self.assertRaisesRegex(NotImplementedError, "resize"):
            x.resize_(10)
        with self.assertRaisesRegex(NotImplementedError, "rgpu"):
            torch.add(x, x, out=torch.empty(0, device="rgpu"))


class Math(Case):
    def test_broadcasting(self):
        a, b = torch.randn(3, 1), torch.randn(1, 4)
        self.both(lambda d: a.to(d) + b.to(d))
        self.both(lambda d: a.to(d) * torch.tensor(2.5))     # a CPU scalar tensor
        self.both(lambda d: torch.where(a.to(d) > 0, b.to(d), 0.))

    def test_reductions(self):
        x = torch.randn(4, 5, 6)
        self.both(lambda d: x.to(d).sum(dim=1))
        self.both(lambda d: x.to(d).mean())
        self.both(lambda d: x.to(d).max(dim=2))
        self.both(lambda d: x.to(d).argmax(dim=0), exact=True)
        self.both(lambda d: x.to(d).std(dim=-1))
        self.both(lambda d: x.to(d).cumsum(dim=1))
        self.both(lambda d: (x.to(d) > 0).any(dim=0), exact=True)
        self.both(lambda d: x.to(d).sort(dim=-1))
        self.both(lambda d: x.to(d).topk(3))

    def test_indexing(self):
        x = torch.randn(6, 5)
        idx = torch.tensor([4, 0, 2])
        self.both(lambda d: x.to(d)[idx], exact=True)
        self.both(lambda d: x.to(d)[idx.to(d)], exact=True)
        self.both(lambda d: x.to(d)[x.to(d) > 0], exact=True)             # data-dependent shape
        self.both(lambda d: x.to(d).nonzero(), exact=True)
        self.both(lambda d: torch.repeat_interleave(torch.arange(3, device=d),
                                                    idx.to(d)), exact=True)
        self.both(lambda d: torch.gather(x.to(d), 1, torch.tensor([[0], [1], [2], [3], [4], [0]], device=d)),
                  exact=True)
        self.both(lambda d: x.to(d).index_select(0, idx.to(d)), exact=True)
        self.both(lambda d: x.to(d).masked_fill(x.to(d) < 0, -1.), exact=True)
        self.both(lambda d: torch.zeros(6, device=d).index_add_(0, idx.to(d), torch.ones(3, device=d)),
                  exact=True)
        self.both(lambda d: torch.zeros(3, 5, device=d).scatter_(0, torch.tensor([[0, 1, 2, 0, 1]], device=d),
                                                                  x.to(d)[:1]), exact=True)

    def test_matmul(self):
        a, b = torch.randn(2, 3, 8), torch.randn(8, 5)
        self.both(lambda d: a.to(d) @ b.to(d))
        self.both(lambda d: torch.mm(a[0].to(d), b.to(d)))
        self.both(lambda d: torch.bmm(a.to(d), a.to(d).transpose(1, 2)))
        self.both(lambda d: torch.einsum("bij,jk->bik", a.to(d), b.to(d)))

    def test_softmax_and_losses(self):
        logits, target = torch.randn(8, 10), torch.randint(0, 10, (8,))
        self.both(lambda d: logits.to(d).softmax(-1))
        self.both(lambda d: F.log_softmax(logits.to(d), dim=1))
        self.both(lambda d: F.cross_entropy(logits.to(d), target.to(d)))
        self.both(lambda d: F.mse_loss(logits.to(d), logits.to(d).flip(0)))
        self.both(lambda d: F.binary_cross_entropy_with_logits(logits.to(d), (logits.to(d) > 0).float()))
        self.both(lambda d: F.nll_loss(F.log_softmax(logits.to(d), 1), target.to(d), reduction="sum"))

    def test_conv2d_and_friends(self):
        x, w = torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3)
        self.both(lambda d: F.conv2d(x.to(d), w.to(d), padding=1, stride=2))
        self.both(lambda d: F.max_pool2d(x.to(d), 2))
        self.both(lambda d: F.batch_norm(x.to(d), None, None, training=True))

    def test_embedding_bag(self):
        # Its CPU kernel fills auxiliary results (the bag of each index)
        # that the meta kernel says are empty: the backward gets them.
        idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5])
        for mode in ("sum", "mean", "max"):
            def f(d):
                torch.manual_seed(3)
                bag = nn.EmbeddingBag(10, 4, mode=mode).to(d)
                out = bag(idx.to(d), offsets.to(d))
                out.square().sum().backward()
                return out, bag.weight.grad
            with self.subTest(mode=mode):
                self.both(f)

    def test_complex(self):
        z = torch.tensor([1 + 2j, -3j])
        self.both(lambda d: z.to(d) * torch.tensor(2 - 1j), exact=True)
        self.both(lambda d: (z.to(d) * 1j).abs(), exact=True)

    def test_dtype_promotion(self):
        i = torch.arange(5)
        self.both(lambda d: i.to(d) + 1.5)
        self.both(lambda d: i.to(d) / 2)
        self.both(lambda d: i.to(d).half() + torch.ones(5, device=d))
        self.both(lambda d: (i.to(d) * True).dtype)
        self.both(lambda d: torch.ones(2, dtype=torch.bfloat16, device=d) * torch.tensor(3.))

    def test_values_that_wait(self):
        x = torch.arange(5., device="rgpu")
        self.assertEqual(x.sum().item(), 10.0)
        self.assertEqual(x.tolist(), [0.0, 1.0, 2.0, 3.0, 4.0])
        self.assertTrue(torch.equal(x, x.clone()))
        self.assertFalse(torch.equal(x, x + 1))
        self.assertTrue(bool((x >= 0).all()))


class Autograd(Case):
    def test_mlp(self):
        def f(d):
            torch.manual_seed(1)
            m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(d)
            x = torch.randn(5, 6).to(d)
            loss = F.cross_entropy(m(x), torch.tensor([0, 1, 2, 1, 0], device=d))
            loss.backward()
            return [loss] + [p.grad for p in m.parameters()]
        self.both(f)

    def test_cnn_and_optimiser(self):
        def f(d):
            torch.manual_seed(2)
            m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 5)).to(d)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
            losses = []
            for step in range(3):
                x = torch.randn(4, 3, 8, 8).to(d)
                y = torch.randint(0, 5, (4,)).to(d)
                loss = F.cross_entropy(m(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return losses + [p.detach() for p in m.parameters()] + [m[1].running_mean]
        self.both(f)

    def test_sgd_step_and_no_grad(self):
        def f(d):
            torch.manual_seed(3)
            w = torch.randn(4, 4).to(d).requires_grad_()
            opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
            for _ in range(2):
                (w * w).sum().backward()
                opt.step()
                opt.zero_grad()
            with torch.no_grad():
                y = w * 2
            self.assertFalse(y.requires_grad)
            return w.detach(), y
        self.both(f)

    def test_seed_before_connecting(self):
        rgpu.reset()
        torch.manual_seed(12)           # no session yet: applied when one is made
        a = torch.randn(8, device="rgpu")
        torch.manual_seed(12)
        self.assertTrue(torch.equal(a.cpu(), torch.randn(8)))

    def test_rng_reproducible(self):
        self.both(lambda d: torch.randn(50, device=d), exact=True, seed=7)
        self.both(lambda d: torch.rand(3, 4, device=d), exact=True, seed=8)
        self.both(lambda d: F.dropout(torch.ones(100, device=d), 0.5), exact=True, seed=9)
        torch.manual_seed(11)
        a = torch.randn(10, device="rgpu")
        torch.manual_seed(11)
        b = torch.randn(10, device="rgpu")
        self.assertTrue(torch.equal(a, b))

    def test_autocast(self):
        torch.manual_seed(4)
        lin = nn.Linear(8, 4)
        x = torch.randn(3, 8)
        r = nn.Linear(8, 4).to("rgpu")
        r.load_state_dict(lin.state_dict())
        with torch.autocast("rgpu", dtype=torch.bfloat16):
            y = r(x.to("rgpu"))
            s = y.softmax(-1)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertEqual(s.dtype, torch.float32)          # CUDA's rule: softmax in fp32
        want = F.linear(x.bfloat16(), lin.weight.bfloat16(), lin.bias.bfloat16())
        assert_same(self, want, y, exact=True)

    def test_deepcopy(self):
        m = nn.Linear(3, 2).to("rgpu")
        c = copy.deepcopy(m)
        self.assertIsInstance(c.weight, nn.Parameter)
        self.assertTrue(torch.equal(c.weight, m.weight))
        with torch.no_grad():
            c.weight.add_(1)
        self.assertFalse(torch.equal(c.weight, m.weight))     # its own storage

    def test_save_load(self):
        t = torch.randn(3, 4).to("rgpu")
        buf = io.BytesIO()
        torch.save({"t": t, "m": nn.Linear(2, 2).to("rgpu").state_dict()}, buf)
        buf.seek(0)
        back = torch.load(buf)
        assert_same(self, t.cpu(), back["t"], exact=True)
        self.assertEqual(back["m"]["weight"].device.type, "rgpu")

    def test_load_a_cpu_checkpoint_onto_rgpu(self):
        # A checkpoint saved elsewhere (here on the CPU: the file names the
        # device), loaded with map_location naming rgpu.
        torch.manual_seed(6)
        model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5))
        model[1].weight = model[0].weight                     # tied, as GPTs do
        opt = torch.optim.AdamW(model.parameters())
        model(torch.tensor([1, 2])).sum().backward()
        opt.step()
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3,
                    "p": nn.Parameter(torch.ones(2))}, buf)
        for where in ("rgpu", "rgpu:0", torch.device("rgpu", 0), {"cpu": "rgpu"}):
            with self.subTest(map_location=where):
                buf.seek(0)
                ck = torch.load(buf, map_location=where, weights_only=False)
                sd = ck["model"]
                self.assertEqual(ck["epoch"], 3)
                self.assertIsInstance(ck["p"], nn.Parameter)
                self.assertEqual(ck["p"].device.type, "rgpu")
                for k, v in sd.items():
                    assert_same(self, model.state_dict()[k], v, exact=True, what=k)
                with torch.no_grad():                          # tied: one storage still
                    sd["0.weight"][0, 0] = 7.0
                self.assertEqual(sd["1.weight"][0, 0].item(), 7.0)
                moment = ck["opt"]["state"][0]["exp_avg"]
                self.assertEqual(moment.device.type, "rgpu")
                back = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5)).to("rgpu")
                back.load_state_dict(sd)
        buf.seek(0)
        self.assertEqual(torch.load(buf, map_location="cpu")["model"]["0.weight"].device.type,
                         "cpu")
        buf.seek(0)
        with self.assertRaisesRegex(rgpu.RgpuError, "map_location='cpu'"):
            torch.load(buf, map_location={"cpu": "rgpu", "cuda:0": "cpu"})

    def test_pinned_batches(self):
        # DataLoader(pin_memory=True) pins for the accelerator, rgpu here.
        data = torch.utils.data.TensorDataset(torch.arange(24.).reshape(12, 2))
        got = [b.to("rgpu", non_blocking=True).sum().item() for b, in
               torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)]
        self.assertEqual(got, [28.0, 92.0, 156.0])
        x = torch.arange(6.).reshape(2, 3).t()
        p = x.pin_memory()
        self.assertTrue(torch.equal(p, x))
        self.assertNotEqual(p.data_ptr(), x.data_ptr())       # a tensor of its own
        self.assertFalse(p.is_pinned())
        with torch.rgpu.device(0):
            self.assertEqual(torch.rgpu.current_device(), 0)
        with self.assertRaises(rgpu.RgpuError):
            torch.rgpu.device(1)


class Errors(Case):
    def test_server_error_names_the_operation(self):
        # The meta device accepts it; the server's kernel refuses the matrix,
        # at the call (the error check reads the result, as on CUDA).
        a = -torch.eye(3, device="rgpu")
        with self.assertRaisesRegex(rgpu.RgpuError, "linalg.*failed on the op server.*positive"):
            torch.linalg.cholesky(a)
        self.assertEqual(torch.ones(2, device="rgpu").sum().item(), 2.0)   # and goes on

    def test_unsupported_operation(self):
        # An operator that this client has and the server does not.
        lib = torch.library.Library("rgputest", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: torch.empty_like(x), "Meta")
        y = torch.ops.rgputest.twice(torch.ones(3, device="rgpu"))
        with self.assertRaisesRegex(rgpu.RgpuError, "rgputest::twice.*not an ATen operator"):
            y.cpu()

    def test_generator_refused(self):
        g = torch.Generator().manual_seed(0)
        with self.assertRaisesRegex(rgpu.RgpuError, "generators"):
            torch.randn(3, device="rgpu", generator=g)

    def test_tensor_of_an_ended_session(self):
        x = torch.ones(3, device="rgpu")
        rgpu.reset()
        with self.assertRaisesRegex(rgpu.RgpuError, "session that has ended"):
            (x + 1).cpu()
        self.assertEqual(torch.ones(3, device="rgpu").sum().item(), 3.0)   # a new session

    def test_dead_server(self):
        own = OpServer()
        old = os.environ["RGPU_OP_SERVER"]
        try:
            rgpu.reset()
            os.environ["RGPU_OP_SERVER"] = own.addr
            x = torch.ones(3, device="rgpu")
            self.assertEqual(x.sum().item(), 3.0)
            os.killpg(own.proc.pid, signal.SIGKILL)
            own.proc.wait()
            with self.assertRaisesRegex(rgpu.RgpuError, "lost the op server"):
                (x * 2).sum().item()
            with self.assertRaisesRegex(rgpu.RgpuError, "ended"):
                x + 1
        finally:
            own.stop()
            rgpu.reset()
            os.environ["RGPU_OP_SERVER"] = old

    def test_forked_child(self):
        x = torch.ones(3, device="rgpu")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                (x + 1).sum().item()
                msg = b"used the parent's connection"
            except rgpu.RgpuError as e:
                msg = str(e).encode()
            os.write(w, msg)
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        said = os.read(r, 1000).decode()
        os.close(r)
        self.assertIn("forked child", said)
        self.assertEqual((x + 1).sum().item(), 6.0)     # the parent's session is intact

    def test_no_server(self):
        old = os.environ["RGPU_OP_SERVER"]
        try:
            rgpu.reset()
            os.environ["RGPU_OP_SERVER"] = "unix:/nonexistent/ops.sock"
            torch.manual_seed(5)        # seeds rgpu when it connects, needs no server now
            with self.assertRaisesRegex(rgpu.RgpuError, "cannot reach the op server"):
                torch.ones(1, device="rgpu")
            self.assertFalse(torch.rgpu.is_available())
        finally:
            os.environ["RGPU_OP_SERVER"] = old
            rgpu.reset()


class PlannedCalls(Case):
    """A call planned once goes out as its plan's number and values
    afterwards: each call must still carry its own storages and a pointwise
    operator's own floats (which its plan's key leaves out)."""

    def packed(self, name):
        from rgpu import tensor
        return [p.template for op, p in tensor._all_plans() if op == name]

    def test_floats_of_pointwise_operators(self):
        def f(d):
            x, outs = torch.ones(5, device=d), []
            for i in range(6):
                step = 0.1 * (i + 1) ** 1.5            # new floats every time, as Adam's
                x = x.mul(step).add(1.0 / (i + 3))
                x.addcdiv_(x, x + 1, value=-step)
                x = torch.where(x > 0.2, x, x * step)
                outs.append(x.clone())
            return outs
        self.both(f)
        self.assertTrue(any(self.packed("aten::addcdiv_")), "the planned call was never packed")

    def test_nan_and_infinite_floats(self):
        def f(d):
            x, outs = torch.arange(4., device=d), []
            for value in (2.0, float("nan"), 3.0, float("inf"), -1.5, float("nan")):
                y = x.mul(value)
                outs += [y.isnan(), y.isinf(), torch.nan_to_num(y, 0.0, 7.0, -7.0)]
            return outs
        self.both(f, exact=True)

    def test_storages_the_server_made(self):
        # nonzero waits and the server names its result's storage (an id of
        # its own); planned calls on such storages carry those ids too.
        def f(d):
            x, outs = torch.arange(10., device=d), []
            for k in range(3):
                idx = torch.nonzero(x > 3 + k).flatten()
                outs.append((x[idx] * 2.5 + 1).sum())
            return outs
        self.both(f)


class Batching(Case):
    def test_operations_do_not_wait(self):
        x = torch.randn(64, 64, device="rgpu")
        torch.rgpu.synchronize()
        before = rgpu.stats()
        for _ in range(50):
            x = (x @ x).tanh() * 0.5 + x.t()
        after = rgpu.stats()
        self.assertEqual(after["waits"], before["waits"], "an operation waited")
        self.assertLessEqual(after["frames"] - before["frames"], 2, "operations not batched")
        x.sum().item()
        self.assertEqual(rgpu.stats()["waits"], before["waits"] + 1)


if __name__ == "__main__":
    unittest.main()
