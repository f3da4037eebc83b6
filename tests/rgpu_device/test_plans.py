"""Plans (docs/rgpu-device.md, "Plans"): an operator called again on
arguments laid out as before goes to the op server as its plan's number and
values.  Each test runs the same code on the CPU device and on rgpu and
compares, and checks from rgpu.stats() that the calls went out as plans, so
that a broken mechanism fails here rather than merely slows down: repeated
code sends no new plans and every call after the first round is planned; a
change of shape, dtype, aliasing or module mode gets its own plans and the
right results; a call that fails on the server fails as an unplanned one
does.  Then whole training runs (a CNN and an RNN besides nanoGPT's test)
against the CPU device."""
import os
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


def delta(before):
    after = rgpu.stats()
    return {k: after[k] - before[k] for k in after}


def step_mix(d, x, w, step):
    """One round of a training-like mix: matmul, views, in-place on a view,
    out=, a pointwise operator with new floats every round, reductions."""
    y = (x @ w).relu_()
    y[:, 1:3].mul_(0.5 + step)              # in place on a view
    z = torch.empty_like(y)
    torch.add(y, x[:, :y.shape[1]], alpha=2, out=z)
    w.addcdiv_(z[:w.shape[0]], z[:w.shape[0]].abs() + 1, value=-0.01 * (step + 1))
    return [y, z, z.sum(0), w.mean(), torch.cat([y, z]).softmax(-1)]


class Replay(unittest.TestCase):
    def rounds(self, fn, n, d, marks=None):
        """fn(d, i) for i < n, after one seed; with marks (a dict), the
        rgpu stats once the first round is on the server."""
        torch.manual_seed(0)
        out = []
        for i in range(n):
            if marks is not None and i == 1:
                torch.rgpu.synchronize()
                marks["after first"] = rgpu.stats()
            out.append(fn(d, i))
        return out

    def compare(self, cpu, rg):
        for i, (a, b) in enumerate(zip(cpu, rg)):
            assert_same(self, a, b, what=f"round {i}")

    def run_both(self, fn, n):
        cpu = self.rounds(fn, n, "cpu")
        rg = self.rounds(fn, n, "rgpu")
        self.compare(cpu, rg)
        return rg

    def test_replayed_many_times(self):
        cpu_x, cpu_w = torch.randn(6, 5), torch.randn(5, 4)
        state = {}

        def fn(d, i):
            if i == 0:
                state[d] = (cpu_x.to(d), cpu_w.clone().to(d))
            return step_mix(d, *state[d], i)
        cpu = self.rounds(fn, 40, "cpu")
        torch.rgpu.synchronize()
        first, marks = rgpu.stats(), {}
        rg = self.rounds(fn, 40, "rgpu", marks)
        torch.rgpu.synchronize()
        d = delta(marks["after first"])
        self.compare(cpu, rg)
        self.assertGreater(marks["after first"]["plans"] - first["plans"], 5, "no plans were sent")
        # The rounds repeat the first: no plan is sent again, and every call
        # but the final synchronisation is planned.
        self.assertEqual(d["plans"], 0, f"plans sent again: {d}")
        self.assertEqual(d["planned"], d["ops"] - 1, f"calls not planned: {d}")
        self.assertGreaterEqual(d["planned"], 39 * 10)

    def test_shape_dtype_and_aliasing_changes(self):
        # The same code on other shapes, dtypes and aliasing, interleaved:
        # each gets its own plans and its own results.
        cases = [((6, 5), torch.float32, False), ((3, 9), torch.float32, False),
                 ((6, 5), torch.float64, False), ((6, 5), torch.float32, True),
                 ((6, 5), torch.bfloat16, False)]

        def fn(d, i):
            shape, dtype, alias = cases[i % len(cases)]
            a = torch.arange(shape[0] * shape[1], dtype=dtype).reshape(shape).to(d) / 7
            b = a if alias else a.clone() + 1      # the same storage, or another
            b.add_(a, alpha=0.5)                   # in place: b is a when aliased
            out = a[:, :2] if alias else torch.empty_like(a)[:, :2]
            torch.mul(a[:, 1:3], b[:, :2], out=out)
            return [a, b, out, (a * 1.5 + b).sum(1)]
        before = rgpu.stats()
        self.run_both(fn, 3 * len(cases))
        torch.rgpu.synchronize()
        d = delta(before)
        self.assertGreater(d["planned"], 0, "nothing was planned")

    def test_train_and_eval_switches(self):
        # BatchNorm and dropout call other operators (or the same with other
        # arguments) in eval mode; switching back and forth must follow.
        def make(d):
            torch.manual_seed(3)
            return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.3),
                                 nn.Linear(8, 2)).to(d)
        models, xs = {}, torch.randn(10, 4, 6)

        def fn(d, i):
            if i == 0:
                models[d] = make(d)
                torch.manual_seed(4)            # dropout draws from here on both devices
            m = models[d]
            m.train(i % 3 != 2)
            y = m(xs[i].to(d))
            return [y, m[1].running_mean.clone(), m[1].running_var.clone()]
        self.run_both(fn, 10)

    def test_in_place_layout_changes(self):
        # transpose_, t_, squeeze_, unsqueeze_ lay a tensor out anew in place
        # (nn.RNN's batch_first output): the next planned calls see it.
        def fn(d, i):
            x = torch.arange(24.).reshape(2, 3, 4).to(d)
            v = x[1]
            v.t_()
            v.unsqueeze_(0)
            y = v * 2                              # laid out as v now is
            v.squeeze_(0)
            x.transpose_(0, 2)
            return [v, y, x + 1, x.contiguous()]
        self.run_both(fn, 3)
        with self.assertRaisesRegex(NotImplementedError, "as_strided_"):
            torch.zeros(8, device="rgpu")[2:4].as_strided_((8,), (1,), 0)

    def test_failures_in_planned_calls(self):
        # An index out of range fails on the server in a call whose plan was
        # made by an earlier, good call: the error names the operator at the
        # next wait, its result is refused, and the session goes on.
        x = torch.arange(8.).to("rgpu")
        good, bad = torch.tensor([1, 2]).to("rgpu"), torch.tensor([1, 99]).to("rgpu")
        self.assertEqual(x.index_select(0, good).tolist(), [1.0, 2.0])
        before = rgpu.stats()
        r = x.index_select(0, bad)
        self.assertEqual(delta(before)["planned"], 1, "the failing call was not planned")
        with self.assertRaisesRegex(rgpu.RgpuError, "aten::index_select failed on the op server"):
            torch.rgpu.synchronize()
        with self.assertRaisesRegex(rgpu.RgpuError, "result of an operation that failed"):
            r.cpu()
        self.assertEqual(x.index_select(0, good).tolist(), [1.0, 2.0])

    def test_plan_numbers_given_out_again(self):
        # When a session's plan numbers run out they are given out again and
        # the server replaces the plans: calls must still reach their own.
        from rgpu import session
        saved = session.MAX_PLANS
        session.MAX_PLANS = 3
        try:
            def fn(d, i):
                x = torch.arange(6.).to(d)
                return [x + i, x * 2, x - 1, x.neg(), x.exp(), x.sqrt(), x.sum()]
            before = rgpu.stats()
            self.run_both(fn, 4)
            torch.rgpu.synchronize()
            self.assertGreater(delta(before)["plans"], 12, "numbers were not given out again")
        finally:
            session.MAX_PLANS = saved

    def test_new_session_gets_the_plans_again(self):
        def fn(d, i):
            return [(torch.arange(5.).to(d) * 3).cumsum(0)]
        self.run_both(fn, 2)
        rgpu.reset()
        self.run_both(fn, 2)
        self.assertGreater(rgpu.stats()["plans"], 0)
        self.assertGreater(rgpu.stats()["planned"], 0)

    def test_module_half_and_double(self):
        # x.data = y (Module.half/double/to(dtype)) moves the parameter to
        # y's storage.
        def fn(d, i):
            torch.manual_seed(6)
            m = nn.Linear(4, 3).to(d).double()
            return [m.weight, m(torch.ones(2, 4, dtype=torch.float64).to(d))]
        self.run_both(fn, 2)

    def test_optimisers_take_foreach_forms(self):
        from torch.optim.optimizer import _default_to_fused_or_foreach
        p = torch.zeros(3, device="rgpu", requires_grad=True)
        self.assertEqual(_default_to_fused_or_foreach([p], False, False), (False, True))


class Training(unittest.TestCase):
    """Whole training runs on rgpu against the CPU device: the loss of
    every step within 1e-5 relative (the operators' kernels are the same;
    the optimisers' foreach forms and a few operator variants sum in
    another order), and the steady steps' calls planned."""

    def train(self, d, make_model, make_opt, batches, sched=None, eval_at=None, clip=None):
        torch.manual_seed(0)
        model = make_model().to(d)
        opt = make_opt(model.parameters())
        scheduler = sched(opt) if sched else None
        torch.manual_seed(5)            # dropout's draws, the same on both devices
        losses = []
        stats = []
        for i, (x, y) in enumerate(batches):
            if eval_at is not None and i == eval_at:
                model.eval()
            loss = F.cross_entropy(model(x.to(d)).reshape(-1, model.classes), y.to(d).reshape(-1))
            opt.zero_grad()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            if scheduler:
                scheduler.step()
            losses.append(loss.item())
            if d == "rgpu":
                stats.append(rgpu.stats())
        return losses, stats

    def compare(self, **kw):
        cpu, _ = self.train("cpu", **kw)
        rg, stats = self.train("rgpu", **kw)
        for i, (a, b) in enumerate(zip(cpu, rg)):
            self.assertLessEqual(abs(a - b), 1e-5 * abs(a), f"step {i}: cpu {a} rgpu {b}")
        # The last steps repeat: every call they sent was planned but the
        # batch's two copies to rgpu and the loss's read.
        last = {k: stats[-1][k] - stats[-4][k] for k in stats[-1]}
        self.assertEqual(last["plans"], 0, f"plans sent in steady steps: {last}")
        self.assertLessEqual(last["ops"] - last["planned"], 3 * 3, f"not planned: {last}")
        self.assertGreater(last["planned"], 3 * 20)

    def test_cnn_batchnorm_sgd(self):
        class Net(nn.Sequential):
            classes = 5

            def __init__(self):
                super().__init__(
                    nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                    nn.Dropout(0.1), nn.Conv2d(8, 8, 3, padding=1, stride=2, bias=False),
                    nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                    nn.Linear(32, 5))
        g = torch.Generator().manual_seed(1)
        batches = [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g))
                   for _ in range(14)]
        self.compare(make_model=Net, batches=batches, eval_at=10, clip=1.0,
                     make_opt=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9,
                                                        weight_decay=1e-4, nesterov=True),
                     sched=lambda o: torch.optim.lr_scheduler.StepLR(o, 4, 0.5))

    def test_rnn_adam(self):
        # nn.RNN, batch_first (its output is transposed in place).  LSTM and
        # GRU take CUDA's fused cells on rgpu, which PyTorch's CPU device
        # lacks: tests/gpu/rgpu_device_check.sh compares an LSTM on a GPU.
        class Net(nn.Module):
            classes = 20

            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(20, 8)
                self.rnn = nn.RNN(8, 16, num_layers=2, batch_first=True)
                self.out = nn.Linear(16, 20)

            def forward(self, x):
                return self.out(self.rnn(self.emb(x))[0])
        g = torch.Generator().manual_seed(2)
        seqs = [torch.randint(0, 20, (3, 8), generator=g) for _ in range(12)]
        self.compare(make_model=Net, batches=[(s[:, :-1], s[:, 1:]) for s in seqs], clip=1.0,
                     make_opt=lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True))


if __name__ == "__main__":
    unittest.main()
