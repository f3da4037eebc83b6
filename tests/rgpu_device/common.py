"""Shared by the rgpu device tests: an op server on PyTorch's CPU device, and
comparisons of rgpu results with the same code run on the CPU device."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYDIR = os.path.join(REPO, "python")


HERE = os.path.dirname(os.path.abspath(__file__))


class OpServer:
    """rgpu-opserver --device cpu on a private Unix socket (or ADDR), with
    its session sandbox (the module RGPU_OPSERVER_SANDBOX names; run.sh sets
    it).  module: probe_opserver runs it with the test's planted flaw."""

    def __init__(self, addr=None, extra=(), env=None, module="rgpu_opserver"):
        self.dir = tempfile.mkdtemp(prefix="rgpu-opserver-")
        os.chmod(self.dir, 0o700)
        self.addr = addr or "unix:" + os.path.join(self.dir, "ops.sock")
        self.log = open(os.path.join(self.dir, "server.log"), "w+")
        r, w = os.pipe()
        full_env = dict(os.environ, PYTHONPATH=PYDIR + os.pathsep + HERE)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--listen", self.addr, "--device", "cpu",
             "--ready-fd", str(w), *extra],
            pass_fds=(w,), stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
            start_new_session=True)
        os.close(w)
        ready = b""
        deadline = time.time() + 60
        while time.time() < deadline and not ready.endswith(b"\n"):
            chunk = os.read(r, 64)
            if not chunk:
                break
            ready += chunk
        os.close(r)
        if ready != b"ready\n":
            self.stop()
            raise RuntimeError("the op server did not start:\n" + self.output())

    def output(self):
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        """Ends the listener and every session it forked (its process group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.log.close()


def assert_same(test, cpu, rg, exact=False, what="result"):
    """rg (computed on rgpu) equals cpu (the same code on the CPU device):
    device, shape, dtype, strides and values."""
    if isinstance(cpu, torch.Tensor):
        test.assertIsInstance(rg, torch.Tensor, what)
        test.assertEqual(rg.device, torch.device("rgpu", 0), what)
        test.assertEqual(rg.shape, cpu.shape, what)
        test.assertEqual(rg.dtype, cpu.dtype, what)
        if cpu.numel() > 1:
            test.assertEqual(rg.stride(), cpu.stride(), f"{what}: strides")
        back = rg.detach().cpu()
        if exact or not (cpu.is_floating_point() or cpu.is_complex()):
            test.assertTrue(torch.equal(back, cpu.detach()) or
                            (cpu.is_floating_point() and torch.allclose(back, cpu.detach(), 0, 0,
                                                                         equal_nan=True)),
                            f"{what}: {back} != {cpu}")
        else:
            torch.testing.assert_close(back, cpu.detach(), rtol=1e-5, atol=1e-6, msg=what)
    elif isinstance(cpu, (list, tuple)):
        test.assertEqual(len(rg), len(cpu), what)
        for i, (a, b) in enumerate(zip(cpu, rg)):
            assert_same(test, a, b, exact, f"{what}[{i}]")
    else:
        test.assertEqual(rg, cpu, what)
