"""rgpu-opserver: runs the operations of rgpu tensors with this host's PyTorch.

    rgpu-opserver [--listen ADDR] [--device cuda|cpu] [--group NAME]
                  [--key-dir DIR] [--insecure-tcp-no-auth] [--max-frame BYTES]
                  [--hello-timeout S] [--session-memory-limit SIZE]
                  [--sandbox-audit | --no-sandbox]
    rgpu-opserver --check [--device cuda|cpu]

ADDR is unix:PATH (the default, /run/rgpu/opserver.sock) or HOST:PORT.  One
process is forked per client, as rgpud does; it keeps that client's
storages in a table (freed when the client frees them, all at once when the
client goes) and checks every handle, size and offset the client sends.
On a Unix socket the kernel's peer credentials decide who gets in (this
server's user, root, members of --group, default "rgpu" where it exists); on
TCP the client proves that it holds a key from --key-dir (rgpud's keys and
scheme).  Each session is confined as rgpud's are (daemon/sandbox.c, loaded
from librgpu-opsandbox.so) once its device is ready and before it reads an
operation.  docs/rgpu-device.md describes the protocol and the sandbox.
"""
import argparse
import ctypes
import gc
import grp
import io
import os
import re
import signal
import socket
import stat
import struct
import sys
import time

MIN_PYTHON = (3, 8)
MIN_TORCH = (2, 0)
DEFAULT_LISTEN = "unix:/run/rgpu/opserver.sock"
DEFAULT_KEY_DIR = "/etc/rgpu/clients"
SO_PEERGROUPS = 59
MAX_DIMS = 64
MAX_DEPTH = 16
MAX_SIZE = 1 << 50
MAX_SID = 1 << 53
MAX_VIEWS = 1 << 14            # views a session keeps built (Executor.views)
MAX_LAYOUTS = 1 << 16          # distinct layouts a session keeps interned (Executor.layouts)
MAX_PLANS = 1 << 16            # plans a session keeps (numbers 0 .. MAX_PLANS-1)
MAX_PLAN_VALUES = 1 << 20      # values one call of a plan takes
_WIRE_SCALARS = frozenset((bool, int, float, str))      # msgpack's, as it decodes them
_OP_NAME = re.compile(r"^aten::([a-z_][a-z0-9_]*)(?:\.([A-Za-z0-9_]+))?$")
# Operators a client may not call: files, the server's output, raw storage,
# and changes to a tensor's own metadata (which the storage table could not
# follow).
_REFUSED = {"from_file", "_print", "set_", "resize_", "resize_as_", "as_strided_", "_resize_output_",
            "swap_", "_pin_memory", "pin_memory", "share_memory_", "_share_memory_",
            "record_stream", "_nested_tensor_from_mask"}
# Families of operators that make or read tensors other than plain strided
# ones (sparse, nested, MKL-DNN's opaque ones, packed weights), which rgpu
# does not carry, and PyTorch's test operators: refused by name, since
# their inputs are checked less (an "_unsafe" sparse constructor trusts its
# indices).
_REFUSED_FAMILY = re.compile(r"sparse|nested|mkldnn|fbgemm|prepack|^_test_")
# Operators that lay a view over their argument's storage with sizes,
# strides and an offset from their arguments: the view must lie inside
# the storage.  as_strided checks that itself, _reshape_alias does not.
_STRIDED_VIEWS = {"as_strided", "as_strided_copy", "as_strided_scatter", "_reshape_alias",
                  "_reshape_alias_copy"}


def log(msg):
    print(f"rgpu-opserver[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    log(msg)
    sys.exit(1)


# ---- start-up: the Python environment --------------------------------------------------

def check_environment(device):
    """Imports what the server needs, each failure said in words; returns
    (torch, info)."""
    if sys.version_info < MIN_PYTHON:
        fail(f"needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is {sys.version.split()[0]} "
             f"({sys.executable})")
    try:
        import msgpack  # noqa: F401
    except ImportError:
        fail(f"needs the Python package msgpack in {sys.executable} (pip install msgpack, or "
             "apt install python3-msgpack); name another interpreter with RGPU_OPSERVER_PYTHON")
    try:
        import torch
    except Exception as e:
        fail(f"needs PyTorch in {sys.executable}, and importing it failed: {e} (pip install "
             "torch; name another interpreter with RGPU_OPSERVER_PYTHON)")
    version = tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2])
    if version < MIN_TORCH:
        fail(f"needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer; {sys.executable} has "
             f"{torch.__version__}")
    info = {"torch": torch.__version__, "device": device, "python": sys.version.split()[0]}
    if device == "cuda":
        info.update(_probe_cuda())
    else:
        info["device_name"] = "cpu"
    return torch, info


def _probe_cuda():
    """Asks a child process whether CUDA works, so that this process, which
    forks the sessions, never initialises CUDA itself."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            import torch
            if not torch.cuda.is_available():
                msg = "no usable CUDA device (torch.cuda.is_available() is False)"
            else:
                # cuDNN's version (0: none): the client makes the choices
                # PyTorch makes for CUDA tensors by it (rgpu/cuda_choices.py).
                cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else 0
                msg = f"OK {cudnn or 0} " + torch.cuda.get_device_name(0)
        except Exception as e:
            msg = f"CUDA failed: {e}"
        os.write(w, msg.encode()[:4000])
        os._exit(0)
    os.close(w)
    msg = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        msg += chunk
    os.close(r)
    os.waitpid(pid, 0)
    text = msg.decode(errors="replace")
    if not text.startswith("OK "):
        fail(f"--device cuda: {text or 'the CUDA probe died'} (use --device cpu to serve "
             "PyTorch's CPU device)")
    cudnn, _, name = text[3:].partition(" ")
    return {"device_name": name, "cudnn": int(cudnn) if cudnn.isdigit() else 0}


# ---- the sandbox ----------------------------------------------------------------------

SANDBOX_LIB = "librgpu-opsandbox.so"


class Sandbox:
    """rgpud's sandbox (daemon/sandbox.c), built as librgpu-opsandbox.so
    (daemon/opserver_sandbox.c) and called through ctypes."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.rgpu_opserver_sandbox_session.argtypes = [ctypes.c_uint64, ctypes.c_int,
                                                      ctypes.c_int, ctypes.c_char_p]
        lib.rgpu_opserver_sandbox_listener.argtypes = []
        lib.rgpu_opserver_parse_size.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
        self.lib, self.path = lib, path

    def parse_size(self, text):
        out = ctypes.c_uint64()
        if self.lib.rgpu_opserver_parse_size(text.encode(), ctypes.byref(out)) != 0:
            return None
        return out.value

    def listener(self):
        return self.lib.rgpu_opserver_sandbox_listener() == 0

    def session(self, memory, confine, audit, read_paths):
        return self.lib.rgpu_opserver_sandbox_session(
            memory, int(confine), int(audit), ":".join(read_paths).encode()) == 0


def load_sandbox(opts):
    """The sandbox module, from --sandbox-lib, RGPU_OPSERVER_SANDBOX or
    beside this file; None with --no-sandbox when there is none."""
    path = opts.sandbox_lib or os.environ.get("RGPU_OPSERVER_SANDBOX") or \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), SANDBOX_LIB)
    try:
        return Sandbox(path)
    except OSError as e:
        if opts.no_sandbox:
            return None
        fail(f"cannot load the session sandbox {path}: {e} (rgpu-server installs it beside "
             "this program, a build tree has it as BUILD/daemon/" + SANDBOX_LIB + "; "
             "--sandbox-lib names it; --no-sandbox runs sessions unconfined)")


def session_memory(opts):
    """--session-memory-limit in bytes; 0 for rgpud's default."""
    if opts.session_memory_limit is None:
        return 0
    size = opts.sandbox.parse_size(opts.session_memory_limit) if opts.sandbox else None
    if size is None:
        fail(f"--session-memory-limit {opts.session_memory_limit}: not a size (64G, 512M, 1T, "
             "unlimited)" if opts.sandbox else "--session-memory-limit needs the sandbox module")
    return size


def module_folders(torch):
    """What a session's Python reads modules from after the sandbox: the
    absolute entries of sys.path, this file's folder and PyTorch's.  Not
    the working directory that `python -m` puts first, which may be
    anything (the modules it served are imported already)."""
    here = os.path.dirname(os.path.abspath(__file__))
    cwd = os.getcwd()
    folders = {here, os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))}
    folders.update(p for p in sys.path if os.path.isabs(p) and p != cwd)
    return sorted(p for p in folders if p != "/" and ":" not in p and os.path.exists(p))


def open_device(torch, device):
    """What the session's device needs that the sandbox forbids once it is
    on: the CUDA context and cuBLAS's handle are made now.  Modules
    imported later are read, never compiled to files."""
    sys.dont_write_bytecode = True
    if device == "cuda":
        torch.cuda.init()
        x = torch.ones(8, 8, device="cuda")
        (x @ x).sum().item()


# ---- the listener ---------------------------------------------------------------------

def resolve_group(name):
    if name == "none":
        return None
    if name is None:
        try:
            gid = grp.getgrnam("rgpu").gr_gid
        except KeyError:
            return None
        return gid if os.geteuid() == 0 or gid in os.getgroups() else None
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        if name.isdigit():
            return int(name)
        fail(f"--group {name}: no such group")


def check_key_dir(path):
    try:
        st = os.lstat(path)
    except OSError as e:
        fail(f"TCP needs client keys, but the key directory {path}: {e.strerror} (make one "
             "with rgpud --new-client-key NAME, or name another with --key-dir, or listen on "
             "a Unix socket)")
    _check_private(path, st, True)
    for name in os.listdir(path):
        if not name.startswith("."):
            _check_private(os.path.join(path, name), os.lstat(os.path.join(path, name)), False)


def _check_private(path, st, is_dir):
    kind_ok = stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        fail(f"{path} is not a {'directory' if is_dir else 'regular file'}")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        fail(f"{path} must belong to this server's user (uid {os.geteuid()}) and be private to "
             f"it (mode {'0700' if is_dir else '0600'}), but is uid {st.st_uid} mode "
             f"{st.st_mode & 0o7777:04o}: refusing to start")


def listen(addr, gid):
    from rgpu_wire import parse_addr
    kind, where = parse_addr(addr)
    if kind == "unix":
        if os.path.lexists(where):
            if not stat.S_ISSOCK(os.lstat(where).st_mode):
                fail(f"{where} exists and is not a socket: not touching it")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(where)
                fail(f"another server answers at {where}")
            except OSError:
                os.unlink(where)        # left by a server that died
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(where)
        except OSError as e:
            fail(f"cannot listen on {where}: {e.strerror} (the socket's directory must exist and "
                 "be writable; elsewhere give --listen unix:PATH)")
        finally:
            os.umask(old)
        if gid is not None:
            os.chown(where, -1, gid)
            os.chmod(where, 0o660)
    else:
        host, port = where
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            fail(f"cannot listen on {addr}: {e.strerror}")
    sock.listen(64)
    return kind, sock


# ---- the listener's bounds on connections ----------------------------------------------

class Admission:
    """Bounds on the processes clients can make the listener fork, as
    rgpud's (docs/security.md, "The limits"): a connection costs a session
    process from its accept, long before it is let in.  So at most
    max_startups connections not let in yet from all sources, and
    per_source from one source (an IPv4 address, an IPv6 /64, a Unix
    socket's uid); beyond, a connection is closed at accept, with no
    process.  A connection accepted while max_sessions clients are let in
    gets a busy welcome from a short-lived process that counts as a
    startup.  So the listener never has more than max_sessions +
    max_startups children.  A session tells the listener it let its client
    in by writing its pid to a pipe the listener reads at each accept."""

    WARN_EVERY_S = 10

    def __init__(self, max_sessions, max_startups, per_source):
        self.max_sessions, self.max_startups, self.per_source = \
            max_sessions, max_startups, per_source
        self.starting = {}          # pid -> source, not let in yet
        self.let_in = set()         # pids of sessions whose client is in
        self.per = {}               # source -> its startups
        self.ended = []             # pids reaped (SIGCHLD), not yet forgotten
        self.warned = {}            # source -> when its refusal was last logged
        self.report_r, self.report_w = os.pipe()
        os.set_blocking(self.report_r, False)

    def source_of(self, conn, kind):
        if kind == "unix":
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return "uid " + str(struct.unpack("3i", creds)[1])
        import ipaddress
        host = conn.getpeername()[0]
        addr = ipaddress.ip_address(host.split("%")[0])
        if addr.version == 4:
            return str(addr)
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.ip_network(f"{addr}/64", strict=False))

    def _update(self):
        while self.ended:
            pid = self.ended.pop()
            self.let_in.discard(pid)
            self._stop_starting(pid)
        try:
            data = os.read(self.report_r, 4096)
        except BlockingIOError:
            data = b""
        for (pid,) in struct.iter_unpack("<i", data[:len(data) - len(data) % 4]):
            if pid in self.starting:
                self._stop_starting(pid)
                self.let_in.add(pid)

    def _stop_starting(self, pid):
        source = self.starting.pop(pid, None)
        if source is not None:
            self.per[source] -= 1
            if not self.per[source]:
                del self.per[source]

    def decide(self, source):
        """"start", "busy" or a reason to close the connection at once."""
        self._update()
        if len(self.starting) >= self.max_startups:
            return (f"{self.max_startups} connections not let in yet, from all sources "
                    "(--max-startups)")
        if self.per.get(source, 0) >= self.per_source:
            return f"{self.per_source} connections not let in yet (--per-source-startups)"
        return "busy" if len(self.let_in) >= self.max_sessions else "start"

    def started(self, pid, source):
        self.starting[pid] = source
        self.per[source] = self.per.get(source, 0) + 1

    def warn(self, source, what):
        """Logs what of source at most once per WARN_EVERY_S: a flood of
        refused connections does not flood the log."""
        now = time.monotonic()
        if now - self.warned.get(source, -1e9) >= self.WARN_EVERY_S:
            self.warned[source] = now
            if len(self.warned) > 4096:
                self.warned.clear()
            log(f"{source}: {what} (logged once per {self.WARN_EVERY_S} s)")

    def report_let_in(self):
        """In a session, as its client is let in."""
        try:
            os.write(self.report_w, struct.pack("<i", os.getpid()))
        except OSError:
            pass

    def in_session(self):
        """In a new session: the listener's end of the pipe is not its own."""
        os.close(self.report_r)


# ---- one client ------------------------------------------------------------------------

class Refused(Exception):
    pass


def authenticate(conn, kind, opts, wire):
    """The hello: returns the client's nonce and our proof (None without a
    key), or raises Refused with the reason the client is told."""
    msg = wire.recv_frame(conn, 1 << 16)
    if not (isinstance(msg, list) and len(msg) == 4 and msg[0] == "hello"):
        raise Refused("the client did not say hello")
    _, proto, name, nonce = msg
    if proto != wire.PROTO:
        raise Refused(f"this op server speaks protocol {wire.PROTO}, the client "
                      f"({str(name)[:80]}) {proto}: install the same rgpu on both machines",
                      wire.STATUS_VERSION)
    if not isinstance(nonce, bytes) or len(nonce) != wire.NONCE_LEN:
        raise Refused("malformed hello")
    if kind == "unix":
        return "uid " + str(_check_peer(conn, opts.gid)), None
    if opts.insecure_tcp_no_auth:
        return "unauthenticated", None
    server_nonce = os.urandom(wire.NONCE_LEN)
    wire.send_frame(conn, ["challenge", server_nonce])
    msg = wire.recv_frame(conn, 1 << 16)
    if not (isinstance(msg, list) and len(msg) == 3 and msg[0] == "auth"):
        raise Refused("this op server requires a key, and the client did not answer its "
                      "challenge")
    _, key_id, mac = msg
    if not key_id or not isinstance(mac, bytes):
        raise Refused("this op server requires a key: set RGPU_KEY_FILE (or keep it in "
                      "~/.config/rgpu/key); rgpud --new-client-key NAME on the server makes one")
    try:
        if not wire.key_id_valid(key_id):
            raise ValueError("not a valid key name")
        file_id, secret = wire.load_key(os.path.join(opts.key_dir, key_id))
        if file_id != key_id:
            raise ValueError("the file names another key")
    except (OSError, ValueError) as e:
        log(f"key '{str(key_id)[:64]}': {e}")
        raise Refused(f"authentication failed for key '{str(key_id)[:64]}'")
    import hmac
    good = hmac.compare_digest(wire.mac(secret, wire.MAC_CLIENT, nonce, server_nonce), mac)
    proof = wire.mac(secret, wire.MAC_SERVER, server_nonce, nonce) if good else None
    del secret
    if not good:
        log(f"key '{key_id}': wrong MAC")
        raise Refused(f"authentication failed for key '{key_id}'")
    return f"key {key_id}", proof


def _check_peer(conn, gid):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, pgid = struct.unpack("3i", creds)
    if uid in (os.geteuid(), 0):
        return uid
    if gid is not None:
        if pgid == gid:
            return uid
        try:
            raw = conn.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * 256)
            if gid in struct.unpack(f"{len(raw) // 4}I", raw):
                return uid
        except OSError:
            pass
        raise Refused(f"uid {uid} is not in the allowed group (the op server lets in its own "
                      "user, root and that group's members)")
    raise Refused(f"uid {uid} is not this op server's user (uid {os.geteuid()}) or root, and "
                  "no group is allowed (--group)")


def log_session_end(pid, status):
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS:
        log(f"session {pid} killed by the sandbox (SIGSYS: a forbidden system call, named in "
            "its log line above and in the kernel's audit log, type=1326)")
    elif os.WIFSIGNALED(status):
        log(f"session {pid} killed by signal {os.WTERMSIG(status)} "
            f"({signal.strsignal(os.WTERMSIG(status))})")
    elif os.WEXITSTATUS(status) not in (0, 2):
        log(f"session {pid} ended with exit code {os.WEXITSTATUS(status)}")


_admission = None


def reap_sessions(signum=None, frame=None):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if _admission is not None:
            _admission.ended.append(pid)    # forgotten at the next accept
        log_session_end(pid, status)


class HelloTimeout(OSError):
    pass


def _hello_deadline(signum, frame):
    raise HelloTimeout("did not finish its hello in time")


def within_hello_deadline(opts, fn, *args):
    """fn(*args), ended by HelloTimeout after --hello-timeout seconds in
    all: a client that sends its hello a byte at a time does not keep a
    process either."""
    signal.signal(signal.SIGALRM, _hello_deadline)
    signal.setitimer(signal.ITIMER_REAL, opts.hello_timeout)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def refuse_busy(conn, opts):
    """Every session slot is taken: the client hears so in a welcome (read
    its hello first, as it sends that before it reads anything)."""
    import rgpu_wire as wire
    why = (f"the op server serves at most {opts.max_sessions} sessions (--max-sessions); "
           "try again later")
    try:
        conn.settimeout(opts.hello_timeout)
        within_hello_deadline(opts, wire.recv_frame, conn, 1 << 16)
        wire.send_frame(conn, ["welcome", wire.PROTO, wire.STATUS_BUSY, {}, why, None])
    except (OSError, wire.WireError):
        pass
    return 2


def serve_client(conn, kind, opts, info, admission=None):
    import rgpu_wire as wire
    # A client that connects and says nothing does not keep a process.
    conn.settimeout(opts.hello_timeout)
    try:
        who, proof = within_hello_deadline(opts, authenticate, conn, kind, opts, wire)
    except Refused as e:
        status = e.args[1] if len(e.args) > 1 else wire.STATUS_AUTH
        log(f"refusing a client: {e.args[0]}")
        try:
            wire.send_frame(conn, ["welcome", wire.PROTO, status, {}, e.args[0], None])
        except OSError:
            pass
        return 2
    except (OSError, wire.WireError) as e:
        log(f"client gone during its hello: {e}")
        return 0
    import torch
    try:
        session = Executor(torch, opts.device)
        open_device(torch, opts.device)
    except Exception as e:
        return refuse_session(conn, wire, f"the op server's device failed: {e}")
    # What PyTorch and the server made so far lives as long as the session:
    # out of the collector's sight, whose full passes over it otherwise cost
    # more than decoding the frames (ten times, for frames of small calls).
    gc.freeze()
    account = SessionAccount(opts.profile_lines)
    if opts.profile_lines:
        session.operator_table = {}
    # Confined before the first operation is read, as rgpud's sessions are.
    if opts.sandbox is not None and not opts.sandbox.session(
            opts.session_memory, not opts.no_sandbox, opts.sandbox_audit, module_folders(torch)):
        return refuse_session(conn, wire, "the op server could not confine this session "
                                          "(its log says why)")
    if admission is not None:
        admission.report_let_in()
    wire.send_frame(conn, ["welcome", wire.PROTO, wire.STATUS_OK, info, f"let in: {who}", proof])
    conn.settimeout(None)
    log(f"client let in ({who})")
    try:
        return serve_frames(conn, session, wire, opts, account)
    finally:
        account.log_end(session)


def serve_frames(conn, session, wire, opts, account):
    try:
        while True:
            account.waiting()
            msg = wire.recv_frame(conn, opts.max_frame)
            account.running()
            if msg == ["bye"]:
                return 0
            if not (isinstance(msg, list) and len(msg) == 4 and msg[0] == "batch"
                    and isinstance(msg[2], list)):
                log("the client sent a frame the protocol does not allow; ending its session")
                return 2
            _, seq, ops, want_reply = msg
            account.frames += 1
            account.operations += len(ops)
            result = session.run_batch(ops)
            if want_reply:
                error, session.error = session.error, None
                wire.send_frame(conn, ["reply", seq, error, result])
    except wire.WireError as e:
        if str(e) != "connection closed":
            log(f"ending the session: {e}")
            return 2
        return 0
    except OSError as e:
        log(f"client connection: {e}")
        return 0


class SessionAccount:
    """Where a session's time went, logged as it ends: running the
    client's frames or waiting for the next one.  A session that mostly
    runs bounds the client's steps (the op server is the slower side);
    one that mostly waits is bound by the client or the link.  With
    RGPU_OPSERVER_PROFILE=N (--profile N) the running is also profiled,
    and the N functions that took most time themselves are logged."""

    def __init__(self, profile_lines):
        self.frames = self.operations = 0
        self.run_s = self.wait_s = 0.0
        self.started = self.mark = time.perf_counter()
        self.cpu_from = time.process_time()
        self.in_frame = False
        self.profiler = None
        self.profile_lines = profile_lines
        if profile_lines:
            # Imported before the session is confined, which may forbid
            # reading the modules later.
            import cProfile
            import pstats
            self.pstats = pstats
            self.profiler = cProfile.Profile()

    def _lap(self):
        now = time.perf_counter()
        spent, self.mark = now - self.mark, now
        return spent

    def waiting(self):
        if self.in_frame:
            self.run_s += self._lap()
            if self.profiler is not None:
                self.profiler.disable()
        self.in_frame = False

    def running(self):
        self.wait_s += self._lap()
        self.in_frame = True
        if self.profiler is not None:
            self.profiler.enable()

    def log_end(self, session):
        """The profiles first, if any: the session line is the last."""
        self.waiting()
        if self.profiler is not None:
            out = io.StringIO()
            self.pstats.Stats(self.profiler, stream=out).sort_stats("tottime").print_stats(
                self.profile_lines)
            for line in out.getvalue().splitlines():
                if line.strip():
                    log(f"profile: {line}")
        if session.operator_table:
            log("operators: the operators' own time (all of it, not profiled), the largest first:")
            ranked = sorted(session.operator_table.items(), key=lambda kv: -kv[1][0])
            for name, (ns, calls) in ranked[:self.profile_lines]:
                log(f"operators: {name:48s} {calls:8d} calls {ns / 1e6:9.1f} ms "
                    f"{ns / calls / 1e3:8.1f} us a call")
        log(f"session: {self.frames} frames, {self.operations} operations in "
            f"{time.perf_counter() - self.started:.2f} s; running them {self.run_s:.2f} s, "
            f"waiting for the client {self.wait_s:.2f} s; CPU "
            f"{time.process_time() - self.cpu_from:.2f} s; the operators themselves "
            f"{session.operator_ns / 1e9:.2f} s")


def refuse_session(conn, wire, message):
    log(f"refusing a client: {message}")
    try:
        wire.send_frame(conn, ["welcome", wire.PROTO, wire.STATUS_SERVER, {}, message, None])
    except OSError:
        pass
    return 3


# ---- the session's storages and operations --------------------------------------------

class BadInput(Exception):
    pass


class Executor:
    def __init__(self, torch, device):
        self.torch = torch
        # The device as results name it: "cuda" is cuda:0 (its current
        # index) once a tensor lives there.
        self.device = torch.empty(0, device=device).device
        self.Tensor, self.strided = torch.Tensor, torch.strided
        self.table = {}            # storage id -> UntypedStorage on self.device
        self.error = None          # the first error since the last answer
        self.failed = set()        # ids promised by operations that failed
        self.next_server_sid = -1
        torch.set_grad_enabled(False)
        self.dtypes = {str(d).split(".")[1]: d for d in (
            torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8,
            torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64,
            torch.complex128)}
        self.itemsize = {d: torch.empty(0, dtype=d).element_size() for d in self.dtypes.values()}
        self.operators = {}        # name -> resolved operator, for names already checked
        # Views already built and checked, by what the wire said of them:
        # a training step names the same parameters and optimiser states
        # laid out the same way every time.  A storage's views go with it.
        self.views = {}            # sid -> {Layout: tensor}
        self.nviews = 0            # views in self.views
        # Results the client believes empty that a kernel filled (register):
        # sid -> {layout: tensor}, until the storage is freed.
        self.substitutes = {}
        self.plans = {}            # number -> Plan (op_plan)
        self.layouts = {}          # (dtype name, sizes, strides, offset) -> Layout
        # Time spent inside the operators (the rest of running is rgpu's
        # own work), and with --profile the same by operator name:
        # name -> [ns, calls].
        self.operator_ns = 0
        self.operator_table = None
        # The requests: ["new", ...] is op_new's, and so on.
        self.handlers = {name[3:]: getattr(self, name) for name in dir(self)
                         if name.startswith("op_")}

    def run_batch(self, ops):
        result = None
        for op in ops:
            try:
                result = self.run_op(op)
            except Exception as e:          # every failure is the client's to hear about
                result = None
                self.failed.update(_promised_ids(op))
                self.note_error(_op_label(op), e)
        return result

    def note_error(self, label, e):
        if self.error is None:
            self.error = [label, f"{type(e).__name__}: {e}"[:2000]]

    def run_op(self, op):
        if type(op) is not list or not op or type(op[0]) is not str:
            raise BadInput("malformed operation")
        handler = self.handlers.get(op[0])
        if handler is None:
            raise BadInput(f"unknown request '{op[0][:40]}'")
        return handler(*op[1:])

    def run_operator(self, name, call, args, kwargs):
        """call(*args, **kwargs), its time counted as the operators' own."""
        began = time.perf_counter_ns()
        try:
            return call(*args, **kwargs)
        finally:
            spent = time.perf_counter_ns() - began
            self.operator_ns += spent
            if self.operator_table is not None:
                entry = self.operator_table.get(name)
                if entry is None:
                    entry = self.operator_table[name] = [0, 0]
                entry[0] += spent
                entry[1] += 1

    # -- storages
    def storage(self, sid):
        if not isinstance(sid, int) or isinstance(sid, bool):
            raise BadInput("a tensor handle must be an integer")
        s = self.table.get(sid)
        if s is None:
            if sid in self.failed:
                raise BadInput(f"tensor handle {sid} is the result of an operation that failed")
            raise BadInput(f"unknown tensor handle {sid} (never made, or freed)")
        return s

    def _new_sid(self, sid):
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 < sid < MAX_SID:
            raise BadInput("a new tensor handle must be a positive integer")
        if sid in self.table:
            raise BadInput(f"tensor handle {sid} is already in use")
        return sid

    def _bytes_view(self, sid, offset, n):
        s = self.storage(sid)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (offset, n)) \
                or offset < 0 or n < 0 or offset + n > s.nbytes():
            raise BadInput(f"byte range out of tensor handle {sid}'s storage")
        return self.torch.empty(0, dtype=self.torch.uint8, device=self.device).set_(
            s, offset, (n,), (1,))

    def op_new(self, sid, nbytes):
        self._new_sid(sid)
        if not isinstance(nbytes, int) or not 0 <= nbytes <= MAX_SIZE:
            raise BadInput("bad storage size")
        self.table[sid] = self.torch.UntypedStorage(nbytes, device=self.device)

    def op_write(self, sid, offset, data):
        if not isinstance(data, bytes):
            raise BadInput("write without bytes")
        view = self._bytes_view(sid, offset, len(data))
        if data:
            view.copy_(self.torch.frombuffer(bytearray(data), dtype=self.torch.uint8))

    def op_read(self, sid, offset, n):
        view = self._bytes_view(sid, offset, n).cpu()
        return ctypes.string_at(view.data_ptr(), n) if n else b""

    def op_free(self, sid):
        if isinstance(sid, int) and sid in self.failed:
            self.failed.discard(sid)
            return
        self.storage(sid)
        self.drop(sid)

    def drop(self, sid):
        """Forgets storage sid, which is in the table, with its views."""
        del self.table[sid]
        views = self.views.pop(sid, None)
        if views is not None:
            self.nviews -= len(views)
        if self.substitutes:
            self.substitutes.pop(sid, None)

    def op_frees(self, sids):
        """Frees each storage of a list; the first bad id is the error."""
        if type(sids) is not list:
            raise BadInput("malformed frees")
        first = None
        table, failed = self.table, self.failed
        for sid in sids:
            if type(sid) is int and sid in table and sid not in failed:
                self.drop(sid)          # op_free's common case, its checks made here
                continue
            try:
                self.op_free(sid)
            except BadInput as e:
                first = first or e
        if first is not None:
            raise first

    def op_seed(self, seed):
        if not isinstance(seed, int):
            raise BadInput("a seed is an integer")
        self.torch.manual_seed(seed)

    def op_flags(self, flags):
        # Six from clients before cudnn.enabled travelled; seven now.
        if not (isinstance(flags, list) and len(flags) in (6, 7)
                and all(isinstance(f, bool) for f in flags)):
            raise BadInput("malformed flags")
        t = self.torch
        # The eager setting only: torch.use_deterministic_algorithms also
        # imports the compiler (torch._inductor) to set its flag, which makes
        # cache folders, and the op server compiles nothing.
        t._C._set_deterministic_algorithms(flags[0], warn_only=flags[1])
        t.backends.cudnn.deterministic, t.backends.cudnn.benchmark = flags[2], flags[3]
        t.backends.cuda.matmul.allow_tf32, t.backends.cudnn.allow_tf32 = flags[4], flags[5]
        t.backends.cudnn.enabled = flags[6] if len(flags) == 7 else True

    def op_sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def op_memory(self):
        if self.device.type != "cuda":
            return {}
        return {k: v for k, v in self.torch.cuda.memory_stats().items() if isinstance(v, int)}

    def op_cpu_time(self):
        """This session's CPU time so far in seconds, all its threads (the
        client's step-time measurements set it against its own)."""
        return time.process_time()

    def op_empty_cache(self):
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()

    # -- operators
    def resolve(self, name):
        func = self.operators.get(name) if isinstance(name, str) else None
        if func is None:
            func = self.operators[name] = self._resolve(name)
        return func

    def _resolve(self, name):
        m = _OP_NAME.match(name) if isinstance(name, str) else None
        if not m:
            raise BadInput(f"not an ATen operator name: {str(name)[:80]}")
        base, overload = m.group(1), m.group(2) or "default"
        if base in _REFUSED or _REFUSED_FAMILY.search(base):
            raise BadInput(f"{name} is not allowed through rgpu")
        # Only a name the dispatcher has registered: getattr on torch.ops
        # would also reach Python attributes (aten::__class__.__init__).
        registered = f"aten::{base}" + ("" if overload == "default" else f".{overload}")
        if registered not in aten_operators(self.torch):
            raise NotImplementedError(f"this server's PyTorch ({self.torch.__version__}) has no "
                                      f"operator {name}")
        func = getattr(getattr(self.torch.ops.aten, base), overload)
        if not (isinstance(func, self.torch._ops.OpOverload)
                and func._schema.name == f"aten::{base}"):
            raise BadInput(f"{name} is not an ATen operator")
        if any("Storage" in str(a.type) for a in func._schema.arguments):
            raise BadInput(f"{name} takes a storage, which is not allowed through rgpu")
        # Operators that change a tensor's own sizes, strides or storage (the
        # argument tensors are views the session keeps); detach_ only
        # touches autograd, which the session does not run.
        if (self.torch.Tag.inplace_view in func.tags and base != "detach_") \
                or base == "set_data":
            raise BadInput(f"{name} changes a tensor's metadata in place, which is not allowed "
                           "through rgpu")
        return func

    def decode(self, x, depth=0, nslots=None):
        """An argument from the wire; with nslots (a plan's template), its
        slots {"S": ...} and {"F": ...} too, as Slot placeholders."""
        if depth > MAX_DEPTH:
            raise BadInput("arguments nested too deeply")
        kind = type(x)
        if kind is dict:
            if len(x) != 1:
                raise BadInput("malformed argument")
            (tag, v), = x.items()
            if nslots is not None:
                if tag in ("S", "F"):
                    return self.slot(tag, v, nslots)
                if tag == "T":
                    raise BadInput("a plan names its tensors through slots")
            return self.tensor(v) if tag == "T" else self.decode_tagged(tag, v)
        if kind is list:
            return [self.decode(v, depth + 1, nslots) for v in x]
        if x is None or kind in _WIRE_SCALARS:
            return x
        raise BadInput(f"argument of type {kind.__name__} not allowed")

    def slot(self, tag, v, nslots):
        """A template's slot: a tensor of the layout given whose storage id,
        or a float, is the slot's value in each call."""
        if tag == "F":
            if not (type(v) is int and 0 <= v < nslots):
                raise BadInput("malformed float slot")
            return Slot(v, None)
        if not (type(v) is list and len(v) == 5 and type(v[0]) is int and 0 <= v[0] < nslots):
            raise BadInput("malformed tensor slot")
        index, dtype, size, stride, offset = v
        # Well formed; whether it fits its storage is checked when a call
        # names the storage.
        return Slot(index, self.layout(dtype, size, stride, offset, "a tensor slot"))

    def layout(self, dtype, size, stride, offset, what):
        """The Layout of a dtype name, sizes, strides and offset from the
        wire: checked to be well formed the first time, then the same
        object each time (until MAX_LAYOUTS distinct ones were seen; the
        views kept under an older one stay valid, under it)."""
        try:
            key = (dtype, tuple(size), tuple(stride), offset)
            found = self.layouts.get(key)
        except TypeError:               # not a sequence, or an unhashable value
            key = found = None
        if found is not None:
            return found
        d = self.dtype(dtype)
        extent = layout_extent(size, stride, offset, self.itemsize[d], what)
        if key is None:                 # layout_extent refuses what made it so
            raise BadInput(f"malformed sizes or strides for {what}")
        if len(self.layouts) >= MAX_LAYOUTS:
            self.layouts.clear()
        found = self.layouts[key] = Layout(dtype, d, key[1], key[2], offset, extent)
        return found

    def dtype(self, name):
        d = self.dtypes.get(name) if isinstance(name, str) else None
        if d is None:
            raise BadInput(f"unknown dtype {str(name)[:40]}")
        return d

    def decode_tagged(self, tag, v):
        t = self.torch
        if tag == "T":
            return self.tensor(v)
        if tag == "C":
            if not (isinstance(v, list) and len(v) == 2 and isinstance(v[1], (bool, int, float))):
                raise BadInput("malformed scalar tensor")
            return t.tensor(v[1], dtype=self.dtype(v[0]))
        if tag == "D":
            if v == "rgpu":
                return self.device
            if v in ("cpu", "meta"):
                return t.device(v)
            raise BadInput("unknown device")
        if tag == "dt":
            return self.dtype(v)
        if tag == "mf":
            if v not in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
                raise BadInput("unknown memory format")
            return getattr(t, v)
        if tag == "ly":
            if v != "strided":
                raise BadInput("only strided tensors")
            return t.strided
        if tag == "z":
            if not (isinstance(v, list) and len(v) == 2 and all(isinstance(p, (int, float)) for p in v)):
                raise BadInput("malformed complex")
            return complex(v[0], v[1])
        raise BadInput(f"unknown argument tag {str(tag)[:20]}")

    def tensor(self, v):
        if not (type(v) is list and len(v) == 5):
            raise BadInput("malformed tensor")
        sid, dtype, size, stride, offset = v
        if type(sid) is not int:
            self.storage(sid)           # raises
        layout = self.layout(dtype, size, stride, offset, f"tensor handle {sid}")
        views = self.views.get(sid)
        cached = views.get(layout) if views is not None else None
        return cached if cached is not None else self.new_view(sid, layout)

    def new_view(self, sid, layout):
        """Storage sid laid out as layout (a Layout), where no view is kept:
        the kernel's own result when the client's storage stands for one of
        another shape (register), else a view checked to lie inside the
        storage; kept from then on."""
        subs = self.substitutes.get(sid) if self.substitutes else None
        t = subs.get(layout) if subs is not None else None
        if t is None:
            s = self.storage(sid)
            if layout.extent > s.nbytes():
                raise BadInput(f"view outside the storage of tensor handle {sid}")
            base = self.kept_on(sid, s, layout.dtype)
            if base is None:
                t = self.set_view(s, layout.dtype, layout.size, layout.stride, layout.offset)
            else:
                t = base.as_strided(layout.size, layout.stride, layout.offset)
        self.keep_view(sid, layout, t)
        return t

    def kept_on(self, sid, s, d):
        """A kept view of storage sid, of dtype d, on s itself (not a
        substitute): a view of it is made by as_strided, which costs about
        half of an empty tensor set to the storage (on the CPU device)."""
        kept = self.views.get(sid)
        if kept:
            cdata = s._cdata
            for t in kept.values():
                if t.dtype is d and t.untyped_storage()._cdata == cdata:
                    return t
        return None

    def keep_view(self, sid, layout, t):
        """Keeps t as storage sid's view laid out as layout (a Layout),
        until the storage is freed."""
        if self.nviews >= MAX_VIEWS:
            self.views.clear()
            self.nviews = 0
        views = self.views.get(sid)
        if views is None:
            views = self.views[sid] = {}
        if layout not in views:
            self.nviews += 1
        views[layout] = t

    def view(self, s, d, size, stride, offset, what):
        check_layout(size, stride, offset, self.itemsize[d], s.nbytes(), what)
        return self.set_view(s, d, size, stride, offset)

    def set_view(self, s, d, size, stride, offset):
        """A tensor over storage s laid out so, already checked to lie in it."""
        return self.torch.empty(0, dtype=d, device=self.device).set_(s, offset, size, stride)

    def check_strided_view(self, base, func, a, k):
        """The view an as_strided-like operator will lay over its argument's
        storage lies inside it."""
        names = [arg.name for arg in func._schema.arguments]
        given = dict(zip(names, a), **k)
        t = given.get("self")
        if not isinstance(t, self.torch.Tensor):
            return                      # the operator's own checks refuse it
        offset = given.get("storage_offset")
        check_layout(given.get("size"), given.get("stride"),
                     t.storage_offset() if offset is None else offset, t.element_size(),
                     t.untyped_storage().nbytes(), f"the view {base} would make")

    def check_result(self, r, name):
        """A tensor result is a plain strided tensor on this device lying
        inside its storage, before anything reads it: a view made with
        unchecked sizes is refused, never copied from."""
        t = self.torch
        if not isinstance(r, t.Tensor):
            raise BadInput(f"{name}: the client expected a tensor result")
        if r.layout != t.strided or r.is_nested or r.is_quantized or r.dtype not in self.itemsize:
            raise BadInput(f"{name}: its result is not a plain strided tensor of a dtype rgpu "
                           "carries")
        if r.device != self.device:
            raise BadInput(f"{name}: its result is on {r.device}, not on this server's device")
        check_layout(tuple(r.size()), r.stride(), r.storage_offset(), r.element_size(),
                     r.untyped_storage().nbytes(), "the result of " + name)

    def op_call(self, name, args, kwargs, outs):
        func = self.operators.get(name) if type(name) is str else None
        if func is None:
            func = self.resolve(name)
        if type(args) is not list or type(kwargs) is not dict:
            raise BadInput("malformed call")
        a = self.decode(args)
        k = {str(key): self.decode(val) for key, val in kwargs.items()}
        base = func._schema.name[len("aten::"):]
        if base in _STRIDED_VIEWS:
            self.check_strided_view(base, func, a, k)
        result = self.run_operator(name, func, a, k)
        flat = list(_flatten(result)) if isinstance(result, (list, tuple)) else [result]
        if outs == "wait":
            return self.describe(result, args, kwargs, name)
        if not isinstance(outs, list) or len(outs) != len(flat):
            raise BadInput(f"{name}: the client expected {len(outs) if isinstance(outs, list) else '?'} "
                           f"results, the operator gave {len(flat)}")
        for spec, r in zip(outs, flat):
            if spec is not None:
                self.register(spec, r, name)
        return None

    def register(self, spec, r, name):
        if not (isinstance(spec, list) and len(spec) == 6):
            raise BadInput("malformed result description")
        sid, dtype, size, stride, offset, nbytes = spec
        self._new_sid(sid)
        self.check_result(r, name)
        d = self.dtype(dtype)
        if type(nbytes) is not int or not 0 <= nbytes <= MAX_SIZE:
            raise BadInput("bad storage size")
        s = r.untyped_storage()
        layout = self.layout(dtype, size, stride, offset, f"the result of {name}")
        if (r.dtype == d and r.storage_offset() == offset and s.nbytes() >= nbytes
                and list(r.size()) == size and list(r.stride()) == stride):
            self.table[sid] = s
            self.keep_result(sid, layout, r)
            return
        # The server's kernel laid its result out otherwise than the meta
        # kernel said: copy it into the layout the client knows.
        s = self.torch.UntypedStorage(nbytes, device=self.device)
        view = self.view(s, d, size, stride, offset, f"result of {name}")
        if list(r.size()) == size:
            view.copy_(r)
        else:
            # Another shape than the meta kernel's: an auxiliary result that
            # only the operator's own backward reads, which the kernel makes
            # as it pleases (cuDNN batch normalisation's reserve; on the CPU,
            # EmbeddingBag's bags and native_batch_norm's statistics in
            # evaluation mode, left empty).  The client's storage holds zeros
            # of the shape it knows; the calls that name the storage laid
            # out so get the kernel's own result, as they would natively.
            view.zero_()
            self.substitutes.setdefault(sid, {})[layout] = r
        self.table[sid] = s

    def keep_result(self, sid, layout, r):
        """A result is also the view the next call naming its storage laid
        out as the result is (layout) would build, unless a flag of it would
        not carry over."""
        if not (r.is_conj() or r.is_neg()):
            self.keep_view(sid, layout, r)

    # -- plans: a call kept under a number, then run with new values
    def op_plan(self, number, name, args, kwargs, outs, nvalues):
        """Keeps a call's template (a call with numbered slots for its
        storage ids and floats) as plan `number`, checked as a call is."""
        if type(number) is not int or not 0 <= number < MAX_PLANS:
            raise BadInput("bad plan number")
        self.plans.pop(number, None)
        if type(nvalues) is not int or not 0 <= nvalues <= MAX_PLAN_VALUES:
            raise BadInput("bad number of plan values")
        try:
            self.plans[number] = self.make_plan(name, args, kwargs, outs, nvalues)
        except Exception as e:
            # Its calls fail as it did, each with its results marked failed.
            out_slots = [spec[0] for spec in outs if type(spec) is list and spec
                         and type(spec[0]) is int and 0 <= spec[0] < nvalues] \
                if type(outs) is list else []
            self.plans[number] = FailedPlan(str(name)[:120], f"{type(e).__name__}: {e}"[:500],
                                            nvalues, out_slots)
            raise

    def make_plan(self, name, args, kwargs, outs, nvalues):
        func = self.resolve(name)
        if type(args) is not list or type(kwargs) is not dict or type(outs) is not list:
            raise BadInput("malformed plan")
        a = self.decode(args, 0, nvalues)
        k = {str(key): self.decode(val, 0, nvalues) for key, val in kwargs.items()}
        fills = []
        _find_slots(a, fills)
        _find_slots(k, fills)
        specs = [None if spec is None else self.out_slot(spec, nvalues) for spec in outs]
        base = func._schema.name[len("aten::"):]
        return Plan(name, func, a, k, fills, specs, nvalues,
                    base if base in _STRIDED_VIEWS else None)

    def out_slot(self, spec, nvalues):
        """A template's new storage: (slot, dtype, dtype name, sizes,
        strides, offset, nbytes, Layout), the layout inside nbytes."""
        if not (type(spec) is list and len(spec) == 6 and type(spec[0]) is int
                and 0 <= spec[0] < nvalues):
            raise BadInput("malformed result description")
        index, dtype, size, stride, offset, nbytes = spec
        layout = self.layout(dtype, size, stride, offset, "a result")
        if type(nbytes) is not int or not 0 <= nbytes <= MAX_SIZE:
            raise BadInput("bad storage size")
        if layout.extent > nbytes:
            raise BadInput("view outside the storage of a result")
        return (index, layout.dtype, dtype, layout.size, layout.stride, offset, nbytes, layout)

    def op_runs(self, flat):
        """Calls of plans: [number, its values..., number, its values...].
        Each call's failure is noted and its results marked failed; the
        calls after it still run."""
        if type(flat) is not list:
            raise BadInput("malformed runs")
        i, n = 0, len(flat)
        while i < n:
            number = flat[i]
            plan = self.plans.get(number) if type(number) is int else None
            if plan is None:
                raise BadInput(f"no plan {str(number)[:20]}")
            end = i + 1 + plan.nvalues
            if end > n:
                raise BadInput(f"a call of {plan.name} without all its values")
            values = flat[i + 1:end]
            i = end
            try:
                self.run_plan(plan, values)
            except Exception as e:      # every failure is the client's to hear about
                self.failed.update(v for v in (values[i] for i in plan.out_slots())
                                   if type(v) is int and 0 < v < MAX_SID)
                self.note_error(plan.name, e)

    def run_plan(self, plan, values):
        """One call of a plan: its slots filled from values, the operator
        run, its results registered.  The hot path of a training step (a
        few hundred calls a step): the slot lookups are written out here."""
        if type(plan) is FailedPlan:
            raise BadInput(f"its plan failed ({plan.error})")
        try:
            for container, key, index in plan.float_fills:
                v = values[index]
                if type(v) is not float:
                    raise BadInput(f"a float slot of {plan.name} holds a {type(v).__name__}")
                container[key] = v
            views = self.views
            for container, key, index, layout in plan.tensor_fills:
                sid = values[index]
                if type(sid) is not int:
                    raise BadInput("a tensor handle must be an integer")
                kept = views.get(sid)
                t = kept.get(layout) if kept is not None else None
                container[key] = t if t is not None else self.new_view(sid, layout)
            if plan.strided_view is not None:
                self.check_strided_view(plan.strided_view, plan.func, plan.args, plan.kwargs)
            result = self.run_operator(plan.name, plan.call, plan.args, plan.kwargs)
        finally:
            for container, key in plan.places:
                container[key] = None       # the template keeps no storage alive
        if plan.one_tensor and type(result) is self.Tensor:
            flat = (result,)
        else:
            flat = list(_flatten(result)) if isinstance(result, (list, tuple)) else [result]
        outs = plan.outs
        if len(flat) != len(outs):
            raise BadInput(f"{plan.name}: the client expected {len(outs)} results, the "
                           f"operator gave {len(flat)}")
        for spec, r in zip(outs, flat):
            if spec is not None:
                self.register_planned(spec, values[spec[0]], r, plan.name)

    def lies_as_planned(self, r, spec):
        """r is a plain strided tensor on this device laid out as the plan's
        out_slot spec says, in a storage of at least its nbytes."""
        return (type(r) is self.Tensor and r.dtype is spec[1] and r.layout is self.strided
                and r.device == self.device and r.storage_offset() == spec[5]
                and r.size() == spec[3] and r.stride() == spec[4]
                and r.untyped_storage().nbytes() >= spec[6])

    def register_planned(self, spec, sid, r, name):
        """register() for a plan's result, whose described layout was
        checked when the plan was made: a result laid out so, in a storage
        of at least nbytes, lies inside it."""
        if (type(sid) is int and 0 < sid < MAX_SID and sid not in self.table
                and self.lies_as_planned(r, spec)):
            self.table[sid] = r.untyped_storage()
            self.keep_result(sid, spec[7], r)
            return
        self._new_sid(sid)
        _, _, dtype, size, stride, offset, nbytes, _ = spec
        self.register([sid, dtype, list(size), list(stride), offset, nbytes], r, name)

    def describe(self, result, args, kwargs, name):
        """A waited-for call's results for the client: values as they are,
        tensors as aliases of an argument's storage or as new storages."""
        t = self.torch
        by_ptr = {}
        for x in _flatten([args, list(kwargs.values())]):
            if isinstance(x, dict) and "T" in x:
                sid = x["T"][0]
                s = self.table.get(sid)
                if s is not None and s.nbytes() > 0:
                    by_ptr.setdefault(s.data_ptr(), sid)

        def one(r):
            if isinstance(r, (list, tuple)):
                return [one(v) for v in r]
            if isinstance(r, t.Tensor):
                if r.device != self.device and r.layout == t.strided:
                    r = r.to(self.device)
                self.check_result(r, name)
                s = r.untyped_storage()
                desc = [str(r.dtype).split(".")[1], list(r.size()), list(r.stride()),
                        r.storage_offset(), s.nbytes()]
                sid = by_ptr.get(s.data_ptr()) if s.nbytes() > 0 else None
                if sid is not None:
                    return {"R": ["alias", sid] + desc}
                sid = self.next_server_sid
                self.next_server_sid -= 1
                self.table[sid] = s
                return {"R": ["new", sid] + desc}
            if isinstance(r, complex):
                return {"z": [r.real, r.imag]}
            if r is None or isinstance(r, (bool, int, float, str)):
                return r
            if isinstance(r, t.dtype):
                return str(r).split(".")[1]
            raise BadInput(f"cannot send a result of type {type(r).__name__}")
        return one(result)


class Slot:
    """A template's slot: value `index` of each call, a storage id of a
    tensor laid out as layout (a Layout) says, or a float (layout None)."""

    __slots__ = ("index", "layout")

    def __init__(self, index, layout):
        self.index, self.layout = index, layout


class Layout:
    """A layout the wire named: dtype (its name and the torch dtype),
    sizes, strides, offset (elements), and extent, the bytes of storage it
    reaches (so that a view's bounds check is one comparison).  One object
    per distinct layout (Executor.layout), so the caches of views are keyed
    by identity."""

    __slots__ = ("dtype_name", "dtype", "size", "stride", "offset", "extent")

    def __init__(self, dtype_name, dtype, size, stride, offset, extent):
        self.dtype_name, self.dtype, self.size, self.stride = dtype_name, dtype, size, stride
        self.offset, self.extent = offset, extent


class Plan:
    """A call kept by op_plan: the operator, its decoded arguments with
    Slot placeholders, where those are (fills: container, key, slot), each
    result's out_slot or None, and how many values a call takes.  The fills
    are also kept split, as run_plan reads them: float_fills (container,
    key, value index), tensor_fills (container, key, value index, Layout)
    and places (container, key)."""

    __slots__ = ("name", "func", "call", "args", "kwargs", "fills", "outs", "nvalues",
                 "strided_view", "float_fills", "tensor_fills", "places", "one_tensor")

    def __init__(self, name, func, args, kwargs, fills, outs, nvalues, strided_view):
        self.name, self.func, self.args, self.kwargs = name, func, args, kwargs
        self.fills, self.outs, self.nvalues, self.strided_view = fills, outs, nvalues, strided_view
        self.call = getattr(func, "_op", func)      # the operator without its Python wrapper
        self.float_fills = tuple((c, k, slot.index) for c, k, slot in fills
                                 if slot.layout is None)
        self.tensor_fills = tuple((c, k, slot.index, slot.layout)
                                  for c, k, slot in fills if slot.layout is not None)
        self.places = tuple((c, k) for c, k, _ in fills)
        # A single tensor result is taken as it is, without flattening.
        self.one_tensor = len(outs) == 1

    def out_slots(self):
        return [o[0] for o in self.outs if o is not None]


class FailedPlan:
    """A plan whose definition failed: each of its calls fails too."""

    __slots__ = ("name", "error", "nvalues", "slots")

    def __init__(self, name, error, nvalues, slots):
        self.name, self.error, self.nvalues, self.slots = name, error, nvalues, slots

    def out_slots(self):
        return self.slots


def _find_slots(container, fills):
    """(container, key, slot) for each Slot in a decoded template."""
    for key, v in (container.items() if type(container) is dict else enumerate(container)):
        if type(v) is Slot:
            fills.append((container, key, v))
        elif type(v) is list:
            _find_slots(v, fills)


def check_layout(size, stride, offset, itemsize, nbytes, what):
    """sizes, strides and an offset from the wire are checked integers, and
    the elements they reach lie inside a storage of nbytes (an empty view
    too: its offset may not point past the storage)."""
    if layout_extent(size, stride, offset, itemsize, what) > nbytes:
        raise BadInput(f"view outside the storage of {what}")


def layout_extent(size, stride, offset, itemsize, what):
    """The bytes of storage a layout from the wire reaches (an empty
    view's: up to its offset), once its sizes, strides and offset are
    checked integers."""
    if not (type(size) in (list, tuple) and type(stride) in (list, tuple)
            and len(size) == len(stride) <= MAX_DIMS
            and type(offset) is int and 0 <= offset < MAX_SIZE):
        raise BadInput(f"malformed sizes or strides for {what}")
    end, empty = offset + 1, False
    for n, st in zip(size, stride):
        if not (type(n) is int and type(st) is int and 0 <= n < MAX_SIZE and 0 <= st < MAX_SIZE):
            raise BadInput(f"malformed sizes or strides for {what}")
        if n == 0:
            empty = True
        end += (n - 1) * st
    return (offset if empty else end) * itemsize


_aten_operators = None


def aten_operators(torch):
    """Every aten:: operator name the dispatcher has (with its overload)."""
    global _aten_operators
    if _aten_operators is None:
        _aten_operators = frozenset(n for n in torch._C._dispatch_get_all_op_names()
                                    if n.startswith("aten::"))
    return _aten_operators


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _flatten(v)
    else:
        yield x


def _promised_ids(op):
    """The new ids an operation would have made (nothing else may claim them)."""
    if not isinstance(op, list) or len(op) < 2:
        return []
    if op[0] == "new" and isinstance(op[1], int) and 0 < op[1] < MAX_SID:
        return [op[1]]
    if op[0] == "call" and len(op) == 5 and isinstance(op[4], list):
        return [spec[0] for spec in op[4] if isinstance(spec, list) and spec
                and isinstance(spec[0], int) and 0 < spec[0] < MAX_SID]
    return []


def _op_label(op):
    if isinstance(op, list) and len(op) > 1 and op[0] == "call" and isinstance(op[1], str):
        return op[1][:120]
    if isinstance(op, list) and len(op) > 2 and op[0] == "plan" and isinstance(op[2], str):
        return op[2][:120]
    return str(op[0])[:40] if isinstance(op, list) and op else "request"


# ---- main -------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="rgpu-opserver", description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default=DEFAULT_LISTEN)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--group", default=None)
    ap.add_argument("--key-dir", default=DEFAULT_KEY_DIR)
    ap.add_argument("--insecure-tcp-no-auth", action="store_true")
    ap.add_argument("--max-frame", type=int, default=None)
    ap.add_argument("--hello-timeout", type=float, default=10.0,
                    help="seconds a client has for its hello (default 10)")
    ap.add_argument("--max-sessions", type=_positive, default=64, metavar="N",
                    help="clients let in at once (default 64); the next one is told the "
                         "op server is busy")
    ap.add_argument("--max-startups", type=_positive, default=64, metavar="N",
                    help="connections not let in yet, from all sources (default 64); more "
                         "are closed at once")
    ap.add_argument("--per-source-startups", type=_positive, default=8, metavar="N",
                    help="connections not let in yet from one address (an IPv6 /64) or "
                         "uid (default 8); more are closed at once")
    ap.add_argument("--check", action="store_true",
                    help="check the Python environment and the device, then exit")
    ap.add_argument("--session-memory-limit", default=None, metavar="SIZE",
                    help="private writable memory of a session (RLIMIT_DATA), as rgpud's "
                         "(default 64G; 512M, 1T, unlimited)")
    ap.add_argument("--sandbox-audit", action="store_true",
                    help="sandbox on, but a forbidden system call fails and is logged instead "
                         "of killing the session")
    ap.add_argument("--no-sandbox", action="store_true",
                    help="sessions unconfined (debugging only)")
    ap.add_argument("--sandbox-lib", default=None, metavar="PATH",
                    help=f"the sandbox module (default: RGPU_OPSERVER_SANDBOX, else "
                         f"{SANDBOX_LIB} beside this program)")
    ap.add_argument("--profile", type=int, metavar="N", dest="profile_lines",
                    default=_env_int("RGPU_OPSERVER_PROFILE"),
                    help="profile each session's running and log, as it ends, the N functions "
                         "that took most time themselves (RGPU_OPSERVER_PROFILE; slows the "
                         "session down)")
    ap.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive number")
    return n


def _env_int(name):
    text = os.environ.get(name, "")
    try:
        return max(int(text), 0) if text else 0
    except ValueError:
        fail(f"{name} must be a number of lines, not '{text[:40]}'")


def main(argv=None):
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    # Deterministic cuBLAS where the client asks for deterministic algorithms.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # No compiled-kernel caches: a session may write no file, and a cache
    # shared by every client of this user would let one plant code for
    # another (the driver's for PTX, PyTorch's for NVRTC kernels).
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    os.environ["USE_PYTORCH_KERNEL_CACHE"] = "0"
    torch, info = check_environment(opts.device)
    import rgpu_wire as wire
    opts.max_frame = min(opts.max_frame or wire.MAX_FRAME, wire.MAX_FRAME)
    opts.sandbox = load_sandbox(opts)
    opts.session_memory = session_memory(opts)
    if opts.check:
        print(f"rgpu-opserver: OK: Python {info['python']}, PyTorch {info['torch']}, "
              f"device {opts.device} ({info['device_name']}), session sandbox "
              f"{opts.sandbox.path if opts.sandbox else 'none (--no-sandbox)'}")
        return 0
    kind = wire.parse_addr(opts.listen)[0]
    opts.gid = resolve_group(opts.group) if kind == "unix" else None
    if kind == "tcp":
        if opts.insecure_tcp_no_auth:
            log(f"!!! --insecure-tcp-no-auth: listening on TCP {opts.listen} WITHOUT "
                f"AUTHENTICATION. Anyone who can reach this port can run code as uid "
                f"{os.geteuid()}. Use this only on a network where every host is trusted. !!!")
        else:
            check_key_dir(opts.key_dir)
    kind, lsock = listen(opts.listen, opts.gid)
    if opts.no_sandbox:
        log("--no-sandbox: sessions run unconfined; a client that takes over its session can "
            "do anything this user can")
    elif not opts.sandbox.listener():
        fail("cannot confine the listener (the line above says why)")
    global _admission
    _admission = admission = Admission(opts.max_sessions, opts.max_startups,
                                       opts.per_source_startups)
    signal.signal(signal.SIGCHLD, reap_sessions)
    log(f"listening on {opts.listen}, device {opts.device} ({info['device_name']}), "
        f"PyTorch {info['torch']}, protocol {wire.PROTO}")
    if opts.ready_fd is not None:
        os.write(opts.ready_fd, b"ready\n")
        os.close(opts.ready_fd)
    while True:
        try:
            conn, _ = lsock.accept()
        except InterruptedError:
            continue
        try:
            source = admission.source_of(conn, kind)
        except (OSError, ValueError) as e:
            log(f"a connection whose peer is unknown ({e}): closed")
            conn.close()
            continue
        verdict = admission.decide(source)
        if verdict not in ("start", "busy"):
            admission.warn(source, f"{verdict}: closing its connections at once")
            conn.close()
            continue
        try:
            pid = os.fork()
        except OSError as e:
            log(f"cannot start a session: {e}")
            conn.close()
            continue
        if pid == 0:
            lsock.close()
            admission.in_session()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            rc = 1
            try:
                rc = (serve_client(conn, kind, opts, info, admission) if verdict == "start"
                      else refuse_busy(conn, opts))
            finally:
                os._exit(rc)
        admission.started(pid, source)
        if verdict == "busy":
            admission.warn(source, f"{len(admission.let_in)} sessions let in, the cap "
                                   "(--max-sessions): refusing its clients")
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
