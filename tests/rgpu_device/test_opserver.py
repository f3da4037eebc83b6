"""rgpu-opserver against hostile and unauthorised clients, at the wire level:
every handle, range and name a client sends is checked, a bad request gets
an error and the session goes on, a frame the protocol does not allow ends
that session only, and TCP needs rgpud's key scheme."""
import ast
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PYDIR, OpServer  # noqa: E402

sys.path.insert(0, PYDIR)
import msgpack  # noqa: E402
import rgpu_wire as wire  # noqa: E402


class _Shell:
    """A pickle that runs a shell command where it is unpickled."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class Raw:
    """A client that speaks the wire directly."""

    def __init__(self, addr, tcp=False):
        _, self.sock = wire.connect(addr)
        try:
            self.info = wire.client_handshake(self.sock, tcp, "raw test client")
        except BaseException:
            self.sock.close()
            raise
        self.seq = 0

    def ask(self, *ops):
        self.seq += 1
        wire.send_frame(self.sock, ["batch", self.seq, list(ops), True])
        reply = wire.recv_frame(self.sock)
        assert reply[0] == "reply" and reply[1] == self.seq, reply
        return reply[2], reply[3]

    def close(self):
        self.sock.close()


def tensor(sid, size, stride=None, offset=0, dtype="float32"):
    stride = stride or [1] * len(size)
    return {"T": [sid, dtype, size, stride, offset]}


class HostileClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = OpServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.c = Raw(self.server.addr)

    def tearDown(self):
        self.c.close()

    def assertRefused(self, op, pattern):
        err, _ = self.c.ask(op)
        self.assertIsNotNone(err, f"{op} was accepted")
        self.assertRegex(err[1], pattern)
        # ... and the session goes on
        err, data = self.c.ask(["new", 999, 4], ["write", 999, 0, b"abcd"], ["read", 999, 0, 4])
        self.assertIsNone(err)
        self.assertEqual(data, b"abcd")
        self.c.ask(["free", 999])

    def test_round_trip(self):
        err, data = self.c.ask(["new", 1, 8], ["write", 1, 0, struct.pack("<2f", 1.5, 2.5)],
                               ["call", "aten::mul_.Scalar", [tensor(1, [2])], {"other": 2}, [None]],
                               ["read", 1, 0, 8])
        self.assertIsNone(err)
        self.assertEqual(struct.unpack("<2f", data), (3.0, 5.0))

    def test_unknown_and_freed_handles(self):
        self.assertRefused(["read", 12345, 0, 4], "unknown tensor handle 12345")
        self.c.ask(["new", 5, 16])
        self.c.ask(["free", 5])
        self.assertRefused(["call", "aten::neg", [tensor(5, [4])], {}, [None]],
                           "unknown tensor handle 5")
        self.assertRefused(["free", 5], "unknown tensor handle 5")

    def test_ranges(self):
        self.c.ask(["new", 7, 16])
        self.assertRefused(["read", 7, 8, 16], "byte range out")
        self.assertRefused(["write", 7, -1, b"x"], "byte range out")
        self.assertRefused(["call", "aten::neg", [tensor(7, [5])], {}, [None]], "outside the storage")
        self.assertRefused(["call", "aten::neg", [tensor(7, [2], [3], 2)], {}, [None]],
                           "outside the storage")
        self.assertRefused(["call", "aten::neg", [tensor(7, [-1])], {}, [None]], "malformed sizes")
        self.assertRefused(["call", "aten::neg", [tensor(7, [2], dtype="object")], {}, [None]],
                           "unknown dtype")
        self.assertRefused(["new", 7, 4], "already in use")
        self.assertRefused(["new", -3, 4], "positive integer")
        self.assertRefused(["new", 8, 1 << 60], "bad storage size")

    def test_names(self):
        self.assertRefused(["call", "aten::from_file", ["/etc/passwd"], {}, [None]], "not allowed")
        self.assertRefused(["call", "aten::_print", ["spam"], {}, [None]], "not allowed")
        self.assertRefused(["call", "os::system", ["true"], {}, [None]], "not an ATen operator")
        self.assertRefused(["call", "aten::no_such_op", [], {}, [None]], "has no operator")
        self.assertRefused(["call", "aten::set_.source_Storage", [], {}, [None]], "not allowed")
        self.assertRefused(["__init__"], "unknown request")
        self.assertRefused(["call", "aten::neg", [{"X": 1}], {}, [None]], "unknown argument tag")
        self.assertRefused(["call", "aten::neg", [{"D": "cuda:7"}], {}, [None]], "unknown device")

    def test_views_laid_by_arguments(self):
        # as_strided-like operators take sizes, strides and an offset from
        # the wire: the view must lie inside the storage (_reshape_alias does
        # not check itself; _reshape_alias_copy read past the storage).
        self.c.ask(["new", 30, 16], ["write", 30, 0, struct.pack("<4f", 1, 2, 3, 4)])
        t = tensor(30, [4])
        new = [[31, "float32", [2, 2], [2, 1], 0, 16]]
        for op in (["call", "aten::_reshape_alias", [t, [1 << 20], [1]], {}, [None]],
                   ["call", "aten::_reshape_alias_copy", [t, [1 << 28], [1]], {},
                    [[32, "float32", [1 << 28], [1], 0, 1 << 30]]],
                   ["call", "aten::as_strided", [t, [4], [1], 1], {}, [None]],
                   ["call", "aten::as_strided", [t, [4], [1]], {"storage_offset": 9}, [None]],
                   ["call", "aten::as_strided_scatter", [t, tensor(30, [4]), [8], [1], 0], {},
                    [[33, "float32", [4], [1], 0, 16]]]):
            self.assertRefused(op, "outside the storage")
        err, data = self.c.ask(["call", "aten::_reshape_alias_copy", [t, [2, 2], [2, 1]], {}, new],
                               ["read", 31, 0, 16])
        self.assertIsNone(err)
        self.assertEqual(struct.unpack("<4f", data), (1, 2, 3, 4))
        # An empty view may not point past its storage either.
        self.assertRefused(["call", "aten::neg", [tensor(30, [0], [1], 100)], {}, [None]],
                           "outside the storage")

    def test_results_checked_before_use(self):
        # Whatever an operator returns is a strided tensor on the server's
        # device, inside its storage, before it is kept or copied from.
        self.assertRefused(["call", "aten::empty.memory_format", [[4]], {"device": {"D": "meta"}},
                            [[40, "float32", [4], [1], 0, 16]]], "not on this server's device")
        import torch
        import rgpu_opserver
        ex = rgpu_opserver.Executor(torch, "cpu")
        outside = torch.ops.aten._reshape_alias(torch.zeros(4), [1 << 20], [1])
        with self.assertRaisesRegex(rgpu_opserver.BadInput, "outside the storage"):
            ex.register([41, "float32", [1 << 20], [1], 0, 4 << 20], outside, "aten::x")
        self.assertNotIn(41, ex.table)
        with self.assertRaisesRegex(rgpu_opserver.BadInput, "outside the storage"):
            ex.describe(outside, [], {}, "aten::x")

    def test_views_go_with_their_storage(self):
        # The session keeps the views it built; a storage freed and its id
        # made again must not be reached through the old ones.
        out = [[61, "float32", [2], [1], 0, 8]]
        err, data = self.c.ask(["new", 60, 8], ["write", 60, 0, struct.pack("<2f", 1, 2)],
                               ["call", "aten::neg", [tensor(60, [2])], {}, out],
                               ["read", 61, 0, 8])
        self.assertEqual(struct.unpack("<2f", data), (-1, -2))
        err, data = self.c.ask(["free", 61], ["free", 60], ["new", 60, 8],
                               ["write", 60, 0, struct.pack("<2f", 5, 6)],
                               ["call", "aten::neg", [tensor(60, [2])], {}, out],
                               ["read", 61, 0, 8])
        self.assertIsNone(err)
        self.assertEqual(struct.unpack("<2f", data), (-5, -6))

    def test_metadata_changes_refused(self):
        # Operators that change a tensor's own sizes, strides or storage
        # would change the views the session keeps.
        self.c.ask(["new", 62, 16])
        for name in ("aten::t_", "aten::transpose_", "aten::unsqueeze_", "aten::squeeze_",
                     "aten::swapdims_", "aten::set_data", "aten::resize_as_"):
            self.assertRefused(["call", name, [tensor(62, [2, 2], [2, 1])], {}, [None]],
                               "changes a tensor's metadata|not allowed")
        err, _ = self.c.ask(["call", "aten::detach_", [tensor(62, [4])], {}, [None]])
        self.assertIsNone(err)

    def test_operator_families_refused(self):
        for name in ("aten::_sparse_coo_tensor_unsafe", "aten::_nested_view_from_buffer",
                     "aten::fbgemm_linear_fp16_weight", "aten::to_mkldnn",
                     "aten::_wrapped_linear_prepack", "aten::_test_string_default"):
            self.assertRefused(["call", name, [], {}, [None]], "not allowed")

    def test_python_attributes_are_no_operators(self):
        # torch.ops.aten also has Python attributes; only names the
        # dispatcher registered are operators.
        for name in ("aten::__class__.__init__", "aten::__getattr__.default", "aten::name.upper",
                     "aten::_dir", "aten::add._op", "aten::__dict__"):
            self.assertRefused(["call", name, [], {}, [None]], "has no operator|not an ATen")
        # ... while ATen's own dunder operators work.
        err, data = self.c.ask(["new", 50, 2], ["write", 50, 0, b"\x01\x00"],
                               ["call", "aten::__and__.Tensor",
                                [tensor(50, [2], dtype="bool"), tensor(50, [2], dtype="bool")], {},
                                [[51, "bool", [2], [1], 0, 2]]], ["read", 51, 0, 2])
        self.assertIsNone(err)
        self.assertEqual(data, b"\x01\x00")

    def test_nothing_from_the_wire_is_unpickled(self):
        marker = os.path.join(self.server.dir, "unpickled")
        payload = pickle.dumps(_Shell(f"touch {marker}"))
        ext = msgpack.ExtType(1, payload)
        for op in (["call", "aten::neg", [payload], {}, [None]],
                   ["call", "aten::neg", [], {"self": payload}, [None]],
                   ["call", "aten::neg", [{"T": payload}], {}, [None]],
                   ["call", "aten::neg", [{"C": ["float32", payload]}], {}, [None]],
                   ["call", "aten::neg", [ext], {}, [None]],
                   ["call", payload, [], {}, [None]],
                   ["call", "aten::neg", [{"dt": payload}], {}, [None]],
                   ["seed", payload], ["flags", [payload] * 6], [payload],
                   ["probe", "system", f"touch {marker}"]):
            err, _ = self.c.ask(op)
            self.assertIsNotNone(err, f"{op} was accepted")
        self.assertFalse(os.path.exists(marker))

    def test_server_code_neither_unpickles_nor_evaluates(self):
        # The op server and the wire turn msgpack into Python values and
        # nothing else: no pickle, marshal or torch.load, no eval or exec.
        forbidden_modules = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "copyreg"}
        forbidden_names = {"eval", "exec", "compile", "__import__"}
        forbidden_attrs = {"load", "loads", "jit", "serialization", "_load", "import_module"}
        for module in ("rgpu_opserver.py", "rgpu_wire.py"):
            with open(os.path.join(PYDIR, module)) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    names = {(node.module or "").split(".")[0]}
                elif isinstance(node, ast.Name):
                    names = {node.id} & forbidden_names
                elif isinstance(node, ast.Attribute):
                    names = {node.attr} & forbidden_attrs
                else:
                    continue
                self.assertFalse(names & (forbidden_modules | forbidden_names | forbidden_attrs),
                                 f"{module} line {node.lineno}: {names}")

    # -- plans: a call kept under a number, then run with values in its slots
    def plan_add(self, number, alpha=1):
        """plan `number`: add(slot 0, slot 1, alpha) into a new storage (slot
        2), all float32 [2]."""
        return ["plan", number, "aten::add.Tensor",
                [{"S": [0, "float32", [2], [1], 0]}, {"S": [1, "float32", [2], [1], 0]}],
                {"alpha": alpha}, [[2, "float32", [2], [1], 0, 8]], 3]

    def floats(self, sid):
        err, data = self.c.ask(["read", sid, 0, 8])
        self.assertIsNone(err)
        return struct.unpack("<2f", data)

    def test_plan_runs(self):
        self.c.ask(["new", 70, 8], ["write", 70, 0, struct.pack("<2f", 1, 2)],
                   ["new", 71, 8], ["write", 71, 0, struct.pack("<2f", 10, 20)])
        err, _ = self.c.ask(self.plan_add(3), ["runs", [3, 70, 71, 72, 3, 72, 72, 73]])
        self.assertIsNone(err)
        self.assertEqual(self.floats(72), (11, 22))
        self.assertEqual(self.floats(73), (22, 44))
        # A float slot, and a number given again replaces its plan.
        err, _ = self.c.ask(["plan", 3, "aten::mul.Scalar", [{"S": [0, "float32", [2], [1], 0]},
                                                             {"F": 2}], {},
                             [[1, "float32", [2], [1], 0, 8]], 3],
                            ["runs", [3, 70, 74, 2.5]], ["frees", [72, 73]])
        self.assertIsNone(err)
        self.assertEqual(self.floats(74), (2.5, 5))
        self.assertRefused(["read", 72, 0, 8], "unknown tensor handle 72")

    def test_plans_checked_when_made(self):
        self.c.ask(["new", 80, 8])
        s = {"S": [0, "float32", [2], [1], 0]}
        out = [[1, "float32", [2], [1], 0, 8]]
        for op, pattern in (
                (["plan", -1, "aten::neg", [s], {}, out, 2], "bad plan number"),
                (["plan", 1 << 16, "aten::neg", [s], {}, out, 2], "bad plan number"),
                (["plan", True, "aten::neg", [s], {}, out, 2], "bad plan number"),
                (["plan", 1, "aten::neg", [s], {}, out, -2], "bad number of plan values"),
                (["plan", 1, "aten::neg", [s], {}, out, 1 << 40], "bad number of plan values"),
                (["plan", 1, "aten::_print", ["x"], {}, [None], 0], "not allowed"),
                (["plan", 1, "aten::t_", [s], {}, [None], 1], "changes a tensor's metadata"),
                (["plan", 1, "os::system", ["true"], {}, [None], 0], "not an ATen operator"),
                (["plan", 1, "aten::neg", [{"S": [2, "float32", [2], [1], 0]}], {}, out, 2],
                 "malformed tensor slot"),
                (["plan", 1, "aten::neg", [{"S": [0, "float32", [-2], [1], 0]}], {}, out, 2],
                 "malformed sizes"),
                (["plan", 1, "aten::neg", [{"S": [0, "object", [2], [1], 0]}], {}, out, 2],
                 "unknown dtype"),
                (["plan", 1, "aten::neg", [{"S": [True, "float32", [2], [1], 0]}], {}, out, 2],
                 "malformed tensor slot"),
                (["plan", 1, "aten::mul.Scalar", [s, {"F": 7}], {}, out, 2], "malformed float slot"),
                (["plan", 1, "aten::neg", [tensor(80, [2])], {}, out, 2], "through slots"),
                (["plan", 1, "aten::neg", [s], {}, [[1, "float32", [4], [1], 0, 8]], 2],
                 "outside the storage"),
                (["plan", 1, "aten::neg", [s], {}, [[5, "float32", [2], [1], 0, 8]], 2],
                 "malformed result description")):
            self.assertRefused(op, pattern)

    def test_plan_calls_checked_when_run(self):
        self.c.ask(["new", 90, 8], ["new", 91, 4], self.plan_add(5))
        for values, pattern in (([90, 12345, 92], "unknown tensor handle 12345"),
                                ([90, 91, 92], "outside the storage"),
                                ([90, 90.0, 92], "must be an integer"),
                                ([90, True, 92], "must be an integer"),
                                ([90, 90, 90], "already in use"),
                                ([90, 90, 0], "positive integer"),
                                ([90, 90, -4], "positive integer")):
            self.assertRefused(["runs", [5] + values], pattern)
        self.c.ask(["plan", 6, "aten::mul.Scalar", [{"S": [0, "float32", [2], [1], 0]},
                                                   {"F": 2}], {},
                    [[1, "float32", [2], [1], 0, 8]], 3])
        self.assertRefused(["runs", [6, 90, 93, 2]], "float slot .* holds a int")
        self.assertRefused(["runs", [6, 90, 93, "2"]], "float slot .* holds a str")
        self.assertRefused(["runs", [7, 90]], "no plan 7")
        self.assertRefused(["runs", [5, 90, 90]], "without all its values")
        self.assertRefused(["runs", "5"], "malformed runs")
        self.assertRefused(["frees", 5], "malformed frees")

    def test_failed_calls_of_plans(self):
        # A call that fails marks its results failed; the calls after it run.
        self.c.ask(["new", 100, 8], ["write", 100, 0, struct.pack("<2f", 1, 2)], self.plan_add(8))
        err, _ = self.c.ask(["runs", [8, 100, 4444, 101, 8, 100, 100, 102]])
        self.assertRegex(err[1], "unknown tensor handle 4444")
        self.assertEqual(err[0], "aten::add.Tensor")
        self.assertEqual(self.floats(102), (2, 4))
        self.assertRefused(["read", 101, 0, 8], "result of an operation that failed")
        # A plan whose definition failed fails each of its calls, saying why.
        err, _ = self.c.ask(["plan", 9, "aten::neg", [{"S": [0, "float32", [2], [1], 0]}],
                             {"bogus": {"X": 1}}, [[1, "float32", [2], [1], 0, 8]], 2])
        self.assertRegex(err[1], "unknown argument tag")
        err, _ = self.c.ask(["runs", [9, 100, 103]])
        self.assertEqual(err[0], "aten::neg")
        self.assertRegex(err[1], "its plan failed .*unknown argument tag")
        err, _ = self.c.ask(["frees", [103, 101, 102]])
        self.assertIsNone(err)
        self.assertRefused(["frees", [100, 104]], "unknown tensor handle 104")
        self.assertRefused(["read", 100, 0, 8], "unknown tensor handle 100")

    def test_plan_keeps_no_storage(self):
        # The template's slots are emptied after each call: a storage freed
        # is not kept alive, nor reachable, through a plan.
        self.c.ask(["new", 110, 8], ["write", 110, 0, struct.pack("<2f", 3, 4)], self.plan_add(10),
                   ["runs", [10, 110, 110, 111]], ["frees", [110, 111]])
        self.assertRefused(["runs", [10, 110, 110, 112]], "unknown tensor handle 110")
        import torch
        import rgpu_opserver
        ex = rgpu_opserver.Executor(torch, "cpu")
        ex.run_batch([["new", 1, 8], self.plan_add(0), ["runs", [0, 1, 1, 2]]])
        self.assertIsNone(ex.error)
        plan = ex.plans[0]
        self.assertEqual([c[k] for c, k, _ in plan.fills], [None, None])

    def test_views_of_kept_results(self):
        # A view of a storage whose result is kept is made from that result
        # (as_strided): checked against the storage first, and never laid
        # over a substitute (the kernel's own result of another shape,
        # which has a storage of its own).
        import torch
        import rgpu_opserver
        ex = rgpu_opserver.Executor(torch, "cpu")
        ex.register([1, "float32", [4], [1], 0, 16], torch.arange(4.0), "aten::x")
        v = ex.tensor([1, "float32", [2], [2], 1])
        self.assertEqual(v.tolist(), [1.0, 3.0])
        self.assertEqual(v.untyped_storage()._cdata, ex.table[1]._cdata)
        with self.assertRaisesRegex(rgpu_opserver.BadInput, "outside the storage"):
            ex.tensor([1, "float32", [4], [1], 1])
        ex.register([2, "float32", [4], [1], 0, 16], torch.arange(1.0, 7.0), "aten::x")
        self.assertEqual(ex.tensor([2, "float32", [4], [1], 0]).tolist(), [1.0, 2, 3, 4, 5, 6])
        v = ex.tensor([2, "float32", [2], [1], 2])
        self.assertEqual(v.tolist(), [0.0, 0.0])          # the client's storage, zeroed
        self.assertEqual(v.untyped_storage()._cdata, ex.table[2]._cdata)

    def test_layouts_interned_and_bounded(self):
        # A layout is checked once and kept as one object; past the bound
        # the kept ones are dropped, and the views made under them still
        # read what they should.
        from unittest import mock
        import torch
        import rgpu_opserver
        ex = rgpu_opserver.Executor(torch, "cpu")
        ex.run_batch([["new", 1, 64], ["write", 1, 0, struct.pack("<16f", *range(16))]])
        self.assertIsNone(ex.error)
        self.assertIs(ex.layout("float32", [4], [1], 0, "x"), ex.layout("float32", [4], [1], 0, "x"))
        with mock.patch.object(rgpu_opserver, "MAX_LAYOUTS", 4):
            first = ex.tensor([1, "float32", [4], [1], 0])
            for k in range(10):
                self.assertEqual(ex.tensor([1, "float32", [2], [1], k]).tolist(), [k, k + 1.0])
            self.assertLessEqual(len(ex.layouts), 4)
            self.assertEqual(ex.tensor([1, "float32", [4], [1], 0]).tolist(), [0.0, 1, 2, 3])
            self.assertEqual(first.tolist(), [0.0, 1, 2, 3])
        for size in ([[1]], "x", [1.5], [-1]):
            with self.assertRaisesRegex(rgpu_opserver.BadInput, "malformed sizes or strides"):
                ex.tensor([1, "float32", size, [1], 0])
        with self.assertRaisesRegex(rgpu_opserver.BadInput, "outside the storage"):
            ex.tensor([1, "float32", [4], [1], 13])

    def test_result_count_checked(self):
        self.c.ask(["new", 20, 8])
        self.assertRefused(["call", "aten::neg", [tensor(20, [2])], {}, [None, None]],
                           "expected 2 results")

    def test_bad_frames_end_only_that_session(self):
        other = Raw(self.server.addr)
        try:
            self.c.sock.sendall(struct.pack("<I", wire.MAX_FRAME + 1))
            with self.assertRaises(wire.WireError):
                wire.recv_frame(self.c.sock)            # closed by the server
            err, _ = other.ask(["sync"])
            self.assertIsNone(err)
            bad = Raw(self.server.addr)
            wire.send_frame(bad.sock, {"not": "a batch"})
            with self.assertRaises(wire.WireError):
                wire.recv_frame(bad.sock)
            bad.close()
            again = Raw(self.server.addr)                   # the listener still serves
            self.assertIsNone(again.ask(["sync"])[0])
            again.close()
        finally:
            other.close()
        self.assertIn("ending the session", self.server.output())

    def test_silent_client_is_dropped(self):
        server = OpServer(extra=["--hello-timeout", "0.5"])
        try:
            _, sock = wire.connect(server.addr)
            sock.settimeout(10)
            self.assertEqual(sock.recv(1), b"")        # closed by the server, not left waiting
            sock.close()
        finally:
            server.stop()
        self.assertIn("client gone during its hello", server.output())

    def test_version_mismatch(self):
        _, sock = wire.connect(self.server.addr)
        wire.send_frame(sock, ["hello", wire.PROTO + 1, "future client", os.urandom(32)])
        msg = wire.recv_frame(sock)
        self.assertEqual(msg[2], wire.STATUS_VERSION)
        self.assertIn("protocol", msg[4])
        sock.close()


class UnixSocket(unittest.TestCase):
    def test_private_socket_and_peer_credentials(self):
        server = OpServer(extra=["--group", "none"])
        try:
            path = server.addr[5:]
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            Raw(server.addr).close()                    # our own user gets in
            if os.geteuid() == 0 and "FAKEROOTKEY" not in os.environ:
                # Another user cannot even connect; were the socket open to
                # it, the credential check would refuse it (below; it needs
                # real root, not fakeroot, which package builds run under).
                os.chmod(server.dir, 0o755)
                os.chmod(path, 0o666)
                # The client's module where that user can read it (the
                # source tree may sit in a private directory).
                shutil.copy(os.path.join(PYDIR, "rgpu_wire.py"), server.dir)
                os.chmod(os.path.join(server.dir, "rgpu_wire.py"), 0o644)
                code = ("import sys; sys.path.insert(0, %r); import rgpu_wire as w\n"
                        "k, s = w.connect(%r)\n"
                        "try:\n    w.client_handshake(s, False, 'nobody')\n"
                        "except w.WireError as e:\n    print(e)\n") % (server.dir, server.addr)
                out = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534",
                                      "--clear-groups", sys.executable, "-c", code],
                                     capture_output=True, text=True, timeout=60)
                self.assertIn("uid 65534 is not this op server's user", out.stdout + out.stderr,
                              out.stdout + out.stderr)
        finally:
            server.stop()


class Tcp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rgpu-opserver-keys-")
        self.keys = os.path.join(self.tmp, "clients")
        os.mkdir(self.keys, 0o700)
        self.secret = os.urandom(32)
        self.write_key(os.path.join(self.keys, "alice"), "alice", self.secret)
        self.client_key = os.path.join(self.tmp, "alice.key")
        self.write_key(self.client_key, "alice", self.secret)
        port = _free_port()
        self.addr = f"127.0.0.1:{port}"

    @staticmethod
    def write_key(path, name, secret):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, f"rgpu-key-1 {name} {secret.hex()}\n".encode())
        os.close(fd)

    def test_key_authentication(self):
        server = OpServer(addr=self.addr, extra=["--key-dir", self.keys])
        try:
            os.environ["RGPU_KEY_FILE"] = self.client_key
            c = Raw(self.addr, tcp=True)
            self.assertEqual(c.ask(["sync"])[0], None)
            c.close()
            wrong = os.path.join(self.tmp, "wrong.key")
            self.write_key(wrong, "alice", os.urandom(32))
            os.environ["RGPU_KEY_FILE"] = wrong
            with self.assertRaisesRegex(wire.WireError, "authentication failed for key 'alice'"):
                Raw(self.addr, tcp=True)
            os.environ["RGPU_KEY_FILE"] = os.path.join(self.tmp, "missing")
            with self.assertRaisesRegex(wire.WireError, "requires a key"):
                Raw(self.addr, tcp=True)
            os.chmod(self.client_key, 0o644)              # a key others can read is not used
            os.environ["RGPU_KEY_FILE"] = self.client_key
            with self.assertRaisesRegex(wire.WireError, "readable by others"):
                Raw(self.addr, tcp=True)
        finally:
            os.environ.pop("RGPU_KEY_FILE", None)
            server.stop()

    def test_client_refuses_a_server_without_keys(self):
        server = OpServer(addr=self.addr, extra=["--insecure-tcp-no-auth"])
        try:
            with self.assertRaisesRegex(wire.WireError, "asked for no key"):
                Raw(self.addr, tcp=True)
            os.environ["RGPU_INSECURE_TCP"] = "1"
            Raw(self.addr, tcp=True).close()
        finally:
            os.environ.pop("RGPU_INSECURE_TCP", None)
            server.stop()
        self.assertIn("WITHOUT AUTHENTICATION", server.output())

    def test_refuses_to_start_with_readable_keys(self):
        os.chmod(self.keys, 0o755)
        with self.assertRaisesRegex(RuntimeError, "private to it"):
            OpServer(addr=self.addr, extra=["--key-dir", self.keys])


class SessionAccounting(unittest.TestCase):
    """A session says, as it ends, where its time went; --profile adds
    where the running went, by function."""

    def run_session(self, server):
        c = Raw(server.addr)
        c.ask(["new", 1, 8], ["call", "aten::mul_.Scalar", [tensor(1, [2])], {"other": 2},
                              [None]])
        c.ask(["sync"])
        wire.send_frame(c.sock, ["bye"])
        c.close()
        deadline = time.time() + 30
        while time.time() < deadline and "session: " not in server.output():
            time.sleep(0.05)
        return server.output()

    def test_session_end_says_where_time_went(self):
        server = OpServer()
        try:
            out = self.run_session(server)
        finally:
            server.stop()
        self.assertRegex(out, r"session: 2 frames, 3 operations in [0-9.]+ s; running them "
                              r"[0-9.]+ s, waiting for the client [0-9.]+ s; CPU [0-9.]+ s; "
                              r"the operators themselves [0-9.]+ s")
        self.assertNotIn("profile:", out)
        self.assertNotIn("operators:", out)

    def test_profile_names_the_functions(self):
        server = OpServer(env={"RGPU_OPSERVER_PROFILE": "100"})
        try:
            out = self.run_session(server)
        finally:
            server.stop()
        self.assertRegex(out, r"session: 2 frames, 3 operations")
        self.assertRegex(out, r"profile: +ncalls +tottime")
        self.assertRegex(out, r"profile: .*rgpu_opserver.py:\d+\(run_op\)")
        # Each operator's own time, whole: the one call of aten::mul_.Scalar.
        self.assertRegex(out, r"operators: aten::mul_\.Scalar +1 calls +[0-9.]+ ms +[0-9.]+ us a call")

    def test_bad_profile_setting_is_refused(self):
        with self.assertRaisesRegex(RuntimeError, "RGPU_OPSERVER_PROFILE must be a number"):
            OpServer(env={"RGPU_OPSERVER_PROFILE": "lots"})


class Bounds(unittest.TestCase):
    """Connections cost the listener a process each from their accept: how
    many may wait to be let in, from one source and from all, how long a
    hello may take in all, and how many clients may be in at once."""

    def silent(self, server, n):
        socks = []
        for _ in range(n):
            socks.append(wire.connect(server.addr)[1])
        time.sleep(0.3)                 # accepted and forked
        return socks

    def assertClosedAtOnce(self, server):
        _, sock = wire.connect(server.addr)
        sock.settimeout(5)
        start = time.monotonic()
        try:
            self.assertEqual(sock.recv(1), b"")
        finally:
            sock.close()
        self.assertLess(time.monotonic() - start, 2)

    def let_in_again(self, server):
        deadline = time.time() + 10
        while True:
            try:
                c = Raw(server.addr)
                break
            except (OSError, wire.WireError):
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.assertIsNone(c.ask(["sync"])[0])
        c.close()

    def held_startups_refuse_more(self, bound):
        """Two silent connections fill the startups bound allows: a third
        is closed at once; once they go, a client gets in.  The log."""
        server = OpServer(extra=[bound, "2"])
        try:
            socks = self.silent(server, 2)
            self.assertClosedAtOnce(server)
            for sock in socks:
                sock.close()
            self.let_in_again(server)
        finally:
            server.stop()
        return server.output()

    def test_one_source_cannot_take_every_startup(self):
        self.assertRegex(self.held_startups_refuse_more("--per-source-startups"),
                         r"uid \d+: 2 connections not let in yet \(--per-source-startups\): "
                         r"closing its connections")

    def test_startups_from_all_sources_bounded(self):
        self.assertIn("2 connections not let in yet, from all sources (--max-startups)",
                      self.held_startups_refuse_more("--max-startups"))

    def test_hello_has_a_deadline_in_all(self):
        server = OpServer(extra=["--hello-timeout", "1"])
        try:
            _, sock = wire.connect(server.addr)
            hello = msgpack.packb(["hello", wire.PROTO, "slow client", os.urandom(32)])
            frame = struct.pack("<I", len(hello)) + hello
            start = time.monotonic()
            closed = False
            for byte in frame[:-1]:             # a byte every 0.3 s: each read is in time
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                time.sleep(0.3)
                if time.monotonic() - start > 6:
                    break
            sock.settimeout(5)
            if not closed:
                try:
                    self.assertEqual(sock.recv(1), b"")
                except ConnectionResetError:
                    pass
            self.assertLess(time.monotonic() - start, 4)
            sock.close()
            self.let_in_again(server)
        finally:
            server.stop()
        self.assertIn("did not finish its hello in time", server.output())

    def test_sessions_bounded_with_a_busy_answer(self):
        server = OpServer(extra=["--max-sessions", "1"])
        try:
            first = Raw(server.addr)
            self.assertIsNone(first.ask(["sync"])[0])
            with self.assertRaisesRegex(wire.WireError, r"serves at most 1 sessions "
                                                        r"\(--max-sessions\); try again later"):
                Raw(server.addr)
            self.assertIsNone(first.ask(["sync"])[0])     # the one let in goes on
            first.close()
            self.let_in_again(server)
        finally:
            server.stop()
        self.assertIn("the cap (--max-sessions): refusing its clients", server.output())

    def test_bad_bound_refused(self):
        with self.assertRaisesRegex(RuntimeError, "not a positive number"):
            OpServer(extra=["--max-sessions", "0"])


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    unittest.main()
