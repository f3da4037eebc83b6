"""The op server's session sandbox: a client that has taken its session over
gains little.

probe_opserver.py plants the flaw (a request that runs what an intruder
would inside the session).  Each attempt -- a shell, a fork, execve, a
file opened for writing, a Unix or TCP connection -- must kill the session without a
trace (no file, no connection, no shell's mark), the listener must say so
and serve the next client; reading outside the Python's and PyTorch's
folders fails (Landlock, where the kernel has it) and the session goes on;
the session is under seccomp with no new privileges; and a real workload
(PyTorch's CPU kernels, threads, autograd, an optimiser) runs with no
system call refused.  A control run with --no-sandbox shows each attempt
succeeding, so every check here can fail."""
import ctypes
import ctypes.util
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PYDIR, OpServer  # noqa: E402

sys.path.insert(0, PYDIR)
import rgpu_wire as wire  # noqa: E402
from test_opserver import Raw  # noqa: E402

LANDLOCK_CREATE_RULESET = 444        # the same number on every architecture
LANDLOCK_CREATE_RULESET_VERSION = 1


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)


class Attacker:
    """Where a connection from the session would land: a Unix socket and a
    TCP port, both listening."""

    def __init__(self, folder):
        self.path = os.path.join(folder, "attacker.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        self.unix.listen(4)
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(4)
        self.port = self.tcp.getsockname()[1]

    def reached(self, timeout=0.5):
        ready, _, _ = select.select([self.unix, self.tcp], [], [], timeout)
        return bool(ready)

    def close(self):
        self.unix.close()
        self.tcp.close()


def ask_probe(server, what, arg=None):
    """(error, result) of the probe, or None when the session died under it."""
    c = Raw(server.addr)
    try:
        return c.ask(["probe", what, arg])
    except (wire.WireError, OSError, AssertionError):
        return None
    finally:
        c.close()


class ProbeCases:
    """What both runs try; sandboxed (True) or not decides what must happen."""

    sandboxed = True
    extra = ()

    @classmethod
    def setUpClass(cls):
        cls.server = OpServer(module="probe_opserver", extra=cls.extra)
        cls.work = tempfile.mkdtemp(prefix="rgpu-sandbox-")
        cls.attacker = Attacker(cls.work)

    @classmethod
    def tearDownClass(cls):
        cls.attacker.close()
        cls.server.stop()

    def mark(self, name):
        return os.path.join(self.work, name)

    def count(self, pattern):
        return len(re.findall(pattern, self.server.output()))

    def kills(self):
        return self.count(r"session \d+ killed by the sandbox"), \
            self.count("killing the session for a forbidden system call")

    def attempt(self, what, arg, logged=True):
        """The probe, which must kill a sandboxed session (the listener saying
        so, and serving the next client) and succeed in an unconfined one.
        logged: the session's trap handler names the call first.  Not so for
        execve, killed at once by the listener's filter, which sessions
        inherit; nor for os.system, whose posix_spawn blocks every signal
        around its clone, so that the kernel kills without the handler."""
        before = self.kills()
        outcome = ask_probe(self.server, what, arg)
        if not self.sandboxed:
            self.assertIsNotNone(outcome, f"{what}: the unconfined session died")
            self.assertIsNone(outcome[0], f"{what}: {outcome[0]}")
            return
        self.assertIsNone(outcome, f"{what}: the session survived with {outcome}")
        expected = (before[0] + 1, before[1] + logged)
        deadline = time.monotonic() + 10
        while self.kills() != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.kills(), expected, self.server.output())
        c = Raw(self.server.addr)
        try:
            self.assertIsNone(c.ask(["sync"])[0])
        finally:
            c.close()

    def test_shell(self):
        self.attempt("system", f"echo owned > {self.mark('shell')}", logged=False)
        self.assertEqual(os.path.exists(self.mark("shell")), not self.sandboxed)

    def test_fork(self):
        self.attempt("fork", self.mark("forked"))
        self.assertEqual(os.path.exists(self.mark("forked")), not self.sandboxed)

    def test_exec(self):
        if not self.sandboxed:
            self.skipTest("an unconfined exec would replace the session: the shell case shows it")
        self.attempt("exec", f"echo owned > {self.mark('exec')}", logged=False)
        self.assertFalse(os.path.exists(self.mark("exec")))

    def test_file_write(self):
        self.attempt("write", self.mark("written"))
        self.assertEqual(os.path.exists(self.mark("written")), not self.sandboxed)

    def test_unix_connect(self):
        self.attempt("connect", self.attacker.path)
        self.assertEqual(self.attacker.reached(), not self.sandboxed)

    def test_tcp_connect(self):
        self.attempt("tcp", self.attacker.port)
        self.assertEqual(self.attacker.reached(), not self.sandboxed)

    def test_read_outside(self):
        if landlock_abi() < 1:
            self.skipTest("this kernel has no Landlock")
        secret = self.mark("secret")
        with open(secret, "w") as f:
            f.write("the server user's secret\n")
        err, data = ask_probe(self.server, "read", secret)
        if self.sandboxed:
            self.assertIsNotNone(err, "the session read a file outside its folders")
            self.assertRegex(err[1], "PermissionError")
        else:
            self.assertIsNone(err)
            self.assertIn(b"secret", data)


class Sandboxed(ProbeCases, unittest.TestCase):
    def test_session_is_confined(self):
        err, status = ask_probe(self.server, "status")
        self.assertIsNone(err)
        self.assertRegex(status, r"Seccomp:\s+2")
        self.assertRegex(status, r"NoNewPrivs:\s+1")
        err, limits = ask_probe(self.server, "limits")
        self.assertIsNone(err)
        # rgpud's session limits: 4096 files, 64 GiB of private writable memory.
        self.assertRegex(limits, r"Max open files\s+4096\s+4096")
        self.assertRegex(limits, r"Max data size\s+%d\s+%d" % (64 << 30, 64 << 30))

    def test_workload_has_no_refused_calls(self):
        code = textwrap.dedent("""
            import torch, rgpu
            torch.manual_seed(0)
            x = torch.randn(300, 300, device="rgpu")
            assert (x @ x).relu().sum().item() > 0
            conv = torch.nn.Conv2d(3, 8, 3).to("rgpu")
            net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                      torch.nn.Linear(64, 10)).to("rgpu")
            opt = torch.optim.AdamW(net.parameters())
            for _ in range(3):
                loss = torch.nn.functional.cross_entropy(
                    net(torch.randn(32, 64, device="rgpu")),
                    torch.randint(0, 10, (32,), device="rgpu"))
                loss.backward()
                opt.step()
                opt.zero_grad()
            conv(torch.randn(2, 3, 16, 16, device="rgpu")).softmax(-1).sum().item()
            torch.linalg.inv(torch.eye(4, device="rgpu") + 1).cpu()
            torch.nonzero(x > 2).shape
            torch.use_deterministic_algorithms(True)
            (x + 1).sum().item()
            print("workload OK")
        """)
        env = dict(os.environ, PYTHONPATH=PYDIR, RGPU_OP_SERVER=self.server.addr)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertIn("workload OK", out.stdout, out.stderr)
        refused = [line for line in self.server.output().splitlines()
                   if "refused system call" in line]
        self.assertEqual(refused, [], "system calls the workload needed were refused")


class Unsandboxed(ProbeCases, unittest.TestCase):
    """The control: the same attempts succeed without the sandbox."""

    sandboxed = False
    extra = ("--no-sandbox",)

    def test_session_is_not_confined(self):
        err, status = ask_probe(self.server, "status")
        self.assertIsNone(err)
        self.assertRegex(status, r"NoNewPrivs:\s+0")
        self.assertIn("sessions run unconfined", self.server.output())


class CudalessClient(unittest.TestCase):
    """cudaless.py, the stand-in for a client with PyTorch's CPU-only wheel:
    a driver library on the loader's path loads in a plain process and not
    under it, and the program still runs (and says so)."""

    def test_driver_unreachable(self):
        if landlock_abi() < 1:
            self.skipTest("this kernel has no Landlock")
        folder = tempfile.mkdtemp(prefix="rgpu-cudaless-")
        # Any shared object will do as the "driver": the loader finds it by name.
        source = ctypes.util.find_library("z") or ctypes.util.find_library("m")
        with open(_resolve(source), "rb") as f, open(os.path.join(folder, "libcuda.so.1"), "wb") as g:
            g.write(f.read())
        probe = os.path.join(folder, "probe.py")
        with open(probe, "w") as f:
            f.write("import ctypes\ntry:\n    ctypes.CDLL('libcuda.so.1')\n    print('driver loaded')\n"
                    "except OSError:\n    print('driver refused')\n")
        env = dict(os.environ, LD_LIBRARY_PATH=folder)
        plain = subprocess.run([sys.executable, probe], env=env, capture_output=True, text=True)
        self.assertIn("driver loaded", plain.stdout, plain.stderr)
        wrapped = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__),
                                                                "cudaless.py"), probe],
                                 env=env, capture_output=True, text=True, timeout=120)
        self.assertIn("driver refused", wrapped.stdout, wrapped.stderr)
        self.assertRegex(wrapped.stdout, r"cudaless client: OK \(Landlock ABI \d+: [1-9]")


def _resolve(name):
    """A library's file from its soname, through the loader's cache."""
    if os.path.isabs(name):
        return name
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        if line.strip().startswith(name + " ") and "=> " in line:
            return line.rsplit("=> ", 1)[1]
    raise unittest.SkipTest(f"cannot find {name}")


if __name__ == "__main__":
    unittest.main()
