"""The client's connection to the op server: a queue of operations sent in
batches, and the few requests that wait for an answer.

Operations that need no answer (calls whose results' shapes the client
already knows, copies to the server, frees, seeds) wait in a queue and go
out together in one frame when something waits (a read, a synchronisation),
when the queue is long, or when it holds many bytes.  The server runs them
in order; the first error among them comes back with the next answer and is
raised there, naming the operation.  The queue holds each operation already
msgpack-encoded, so that a frame is their concatenation.

A planned call (tensor.py) is sent once in full as a plan the server keeps
under a number of this session's; afterwards each call of it is the
number and the call's values (storage ids, floats), and consecutive such
calls travel as one flat list of numbers (a "runs" operation).  Storages
freed on the client go out as one list at the end of the next frame.
"""
import atexit
import itertools
import os
import threading
import time

import rgpu_wire as wire

BATCH_OPS = 512                # queued operations that make a frame go out
BATCH_BYTES = 8 << 20          # queued tensor bytes that make a frame go out
MAX_PLANS = 1 << 16            # plans a session's server keeps (numbers 0 .. MAX_PLANS-1)

# Forks seen by this process: a session made before the last fork belongs
# to the parent (its socket is the parent's).
_forks = 0


def _after_fork_in_child():
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RgpuError(RuntimeError):
    """An operation failed on the op server, or the op server is gone."""


class Session:
    def __init__(self, addr):
        self.addr = addr
        self.lock = threading.RLock()
        self.queue = []                 # encoded operations (bytes)
        self.queued = 0                 # operations queued, planned calls included
        self.queued_bytes = 0
        self.runs = None                # the planned calls after the queue, flat
        self.freed = []                 # storage ids the client let go
        self.plan_numbers = {}          # plan -> its number in this session
        self.sids = itertools.count(1)  # next() is atomic: no lock
        self.seq = 0
        self.dead = None                # why the session ended, once it has
        self.waits = 0                  # requests that waited for an answer
        self.frames = 0                 # frames sent
        self.ops = 0                    # operations sent
        self.planned = 0                # of which calls sent as a plan's number and values
        self.plans = 0                  # plans sent
        self.flags = None
        self.forks = _forks             # a forked child must not write to our socket
        kind, self.sock = _connect_waiting(addr)
        try:
            self.info = wire.client_handshake(self.sock, kind == "tcp",
                                              f"rgpu-python pid {os.getpid()}")
        except BaseException:
            self.sock.close()
            raise

    # ---- ids and the queue ----------------------------------------------------------

    def new_sid(self):
        return next(self.sids)

    def forked(self):
        return self.forks != _forks

    def check_alive(self):
        if self.forked():
            raise RgpuError("rgpu: this process was forked from the one that connected to the "
                            "op server; rgpu tensors cannot be used in a forked child (use "
                            "CPU tensors there, or the spawn start method)")
        if self.dead:
            raise RgpuError(f"rgpu: the op server session has ended ({self.dead})")

    def enqueue(self, op, nbytes=0):
        self.enqueue_packed(_pack(op), nbytes)

    def enqueue_packed(self, packed, nbytes=0):
        """Queues an operation already encoded (bytes or bytearray)."""
        self.check_alive()              # before the lock, which a fork may have left held
        with self.lock:
            self.check_alive()
            self._close_runs()
            self.queue.append(packed)
            self.queued += 1
            self.queued_bytes += nbytes
            if self.queued >= BATCH_OPS or self.queued_bytes >= BATCH_BYTES:
                self._send(want_reply=False)

    def run_plan(self, plan, values):
        """Queues a call of plan (its template, tensor.py) with values in its
        slots; the plan goes to the server first if this session has not
        sent it."""
        if self.dead or self.forks != _forks:
            self.check_alive()          # raises
        with self.lock:
            if self.dead:
                self.check_alive()
            number = self.plan_numbers.get(plan)
            if number is None:
                number = self._send_plan(plan)
            runs = self.runs
            if runs is None:
                runs = self.runs = []
            runs.append(number)
            runs += values
            self.planned += 1
            self.queued += 1
            if self.queued >= BATCH_OPS:
                self._send(want_reply=False)

    def _send_plan(self, plan):
        """Queues plan's definition under a new number.  When every number is
        taken, they are all given out again: the server replaces a plan
        whose number comes again, and only calls after it use it."""
        if len(self.plan_numbers) >= MAX_PLANS:
            self.plan_numbers.clear()
        number = len(self.plan_numbers)
        self._close_runs()
        self.queue.append(_pack(["plan", number, *plan.template]))
        self.queued += 1
        self.plans += 1
        self.plan_numbers[plan] = number
        return number

    def _close_runs(self):
        if self.runs is not None:
            self.queue.append(wire.pack(["runs", self.runs]))
            self.runs = None

    def enqueue_free(self, sid):
        """From a finaliser, possibly in another thread or at exit: never
        raises.  Every operation on the storage is queued already."""
        if self.dead or self.forks != _forks:
            return
        self.freed.append(sid)          # list.append is atomic

    def _send(self, want_reply, last=None):
        self._close_runs()
        ops = self.queue
        # The ids freed so far, taken so that a finaliser appending now (in
        # another thread) is not lost: it lands after them.
        n = len(self.freed)
        if n:
            freed = self.freed[:n]
            del self.freed[:n]
            ops.append(wire.pack(["frees", freed]))
        if last is not None:
            ops.append(last)
        sent = self.queued + (last is not None)
        self.queue = []
        self.queued = 0
        self.queued_bytes = 0
        self._sync_flags(ops)
        self.seq += 1
        try:
            wire.send_batch(self.sock, self.seq, ops, want_reply)
            self.frames += 1
            self.ops += sent
        except (OSError, wire.WireError) as e:
            self._die(f"sending to {self.addr}: {e}")

    def _sync_flags(self, ops):
        """The settings that change what the server's kernels compute travel
        with the first batch after they change."""
        from .flags import current_flags
        flags = current_flags()
        if flags != self.flags:
            self.flags = flags
            ops.insert(0, wire.pack(["flags", flags]))

    def _die(self, why):
        self.dead = why
        try:
            self.sock.close()
        except OSError:
            pass
        raise RgpuError(f"rgpu: lost the op server at {self.addr}: {why}")

    def flush(self):
        self.check_alive()              # before the lock, which a fork may have left held
        with self.lock:
            self.check_alive()
            if self.queue or self.runs or self.freed:
                self._send(want_reply=False)

    def request(self, op):
        """Sends the queue and op, waits for op's answer; raises the first error
        of anything queued before it or of op itself."""
        self.check_alive()
        with self.lock:
            self.check_alive()
            self._send(want_reply=True, last=_pack(op))
            self.waits += 1
            try:
                reply = wire.recv_frame(self.sock)
            except (OSError, wire.WireError) as e:
                self._die(f"waiting for an answer: {e}")
            if not (isinstance(reply, list) and len(reply) == 4 and reply[0] == "reply"
                    and reply[1] == self.seq):
                self._die("the server answered out of turn")
            _, _, error, result = reply
            if error is not None:
                opname, message = error
                raise RgpuError(f"rgpu: {opname} failed on the op server: {message}")
            return result

    def close(self):
        with self.lock:
            if self.dead or self.forked():
                return
            try:
                if self.queue or self.runs or self.freed:
                    self._send(want_reply=False)
                wire.send_frame(self.sock, ["bye"])
            except (OSError, wire.WireError, RgpuError):
                pass
            self.dead = "closed by the client"
            self.sock.close()


def _pack(op):
    """An operation encoded, or RgpuError at its call (the session goes on)."""
    try:
        return wire.pack(op)
    except (TypeError, ValueError, OverflowError) as e:
        raise RgpuError(f"rgpu: a request could not be encoded ({e})") from None


def _connect_waiting(addr):
    """Connects; while the socket is not there yet, waits up to
    RGPU_OP_SERVER_WAIT seconds (rgpu run sets it when it starts an op
    server in the background)."""
    try:
        wait = float(os.environ.get("RGPU_OP_SERVER_WAIT", "0"))
    except ValueError:
        wait = 0.0
    deadline = time.monotonic() + wait
    while True:
        try:
            return wire.connect(addr)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


_session = None
_session_lock = threading.Lock()


def server_addr():
    addr = os.environ.get("RGPU_OP_SERVER")
    if not addr:
        raise RgpuError("rgpu: no op server: set RGPU_OP_SERVER=HOST:PORT or unix:PATH "
                        "(rgpu run sets it), or start one with rgpu-opserver --listen ADDR")
    return addr


def get():
    """The process's session, connected on first use."""
    global _session, _pending_seed
    s = _session
    if s is not None and not s.dead:
        return s
    with _session_lock:
        if _session is None or _session.dead:
            try:
                _session = Session(server_addr())
            except (OSError, wire.WireError) as e:
                raise RgpuError(f"rgpu: cannot reach the op server at {server_addr()}: {e}") \
                    from None
            if _pending_seed is not None:
                _session.enqueue(["seed", _pending_seed])
                _pending_seed = None
        return _session


_pending_seed = None


def seed(value):
    """Seeds the server's generators: now if connected, else on connecting."""
    global _pending_seed
    s = _session
    if s is not None and not s.dead:
        s.enqueue(["seed", value])
    else:
        _pending_seed = value


def current():
    """The session if one was made, else None (never connects)."""
    return _session


def reset():
    """Ends the session; tensors made in it can no longer be used. The next
    operation connects again."""
    global _session
    with _session_lock:
        if _session is not None:
            _session.close()
        _session = None


def in_bad_fork():
    return _session is not None and _session.forked()


@atexit.register
def _close_at_exit():
    if _session is not None and not _session.dead:
        _session.close()
