"""The op server's wire: length-prefixed msgpack frames, the hello and the
key authentication, shared by the client (rgpu) and the server (rgpu.server).

A frame is a 4-byte little-endian length followed by that many bytes of
msgpack.  Every frame is at most MAX_FRAME bytes (both sides refuse a larger
one before reading it); tensor bytes travel as msgpack binaries, split into
chunks of at most CHUNK bytes.

The hello follows rgpud's scheme (docs/security.md), with its own message
names and protocol number:

    hello     client -> server  ["hello", PROTO, client_name, client_nonce(32)]
    challenge server -> client  ["challenge", server_nonce(32)]   (TCP with keys)
    auth      client -> server  ["auth", key_id, mac(32)]
              mac = HMAC-SHA256(key, "rgpu-client" | client_nonce | server_nonce)
    welcome   server -> client  ["welcome", PROTO, status, info, message, proof]
              proof = HMAC-SHA256(key, "rgpu-server" | server_nonce | client_nonce),
              None without a key; status 0 is OK, anything else a refusal
              (1 authentication, 2 protocol version, 3 the server failed).

Key files are rgpud's: one line "rgpu-key-1 NAME HEX64", private to their
owner (mode 0600 or stricter).
"""
import hashlib
import hmac
import os
import re
import socket
import stat
import struct

import msgpack

PROTO = 1
MAX_FRAME = 256 << 20          # the hard cap on one frame, both directions
CHUNK = 64 << 20               # tensor bytes per frame, well under MAX_FRAME
NONCE_LEN = 32
KEY_LEN = 32
KEY_MAGIC = "rgpu-key-1"
MAC_CLIENT = b"rgpu-client"
MAC_SERVER = b"rgpu-server"
STATUS_OK, STATUS_AUTH, STATUS_VERSION, STATUS_SERVER, STATUS_BUSY = 0, 1, 2, 3, 4
_KEY_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")


class WireError(Exception):
    """The connection broke or carried something the protocol does not allow."""


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack(body):
    return msgpack.unpackb(body, raw=False, strict_map_key=True)


def send_frame(sock, obj):
    body = pack(obj)
    if len(body) > MAX_FRAME:
        raise WireError(f"frame of {len(body)} bytes exceeds the cap of {MAX_FRAME}")
    sock.sendall(struct.pack("<I", len(body)) + body)


def _array_header(n):
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def send_batch(sock, seq, packed_ops, want_reply):
    """The frame ["batch", seq, [op, ...], want_reply] of operations each
    already encoded: their bytes concatenated under msgpack's headers."""
    parts = [b"", b"\x94" + pack("batch") + pack(seq) + _array_header(len(packed_ops))]
    parts += packed_ops
    parts.append(b"\xc3" if want_reply else b"\xc2")
    length = sum(len(p) for p in parts)
    if length > MAX_FRAME:
        raise WireError(f"frame of {length} bytes exceeds the cap of {MAX_FRAME}")
    parts[0] = struct.pack("<I", length)
    sock.sendall(b"".join(parts))


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("connection closed" if got == 0 else "connection closed mid-frame")
        got += k
    return buf


def recv_frame(sock, max_frame=MAX_FRAME):
    (length,) = struct.unpack("<I", _recv_exact(sock, 4))
    if length > max_frame:
        raise WireError(f"frame of {length} bytes exceeds the cap of {max_frame}")
    body = _recv_exact(sock, length)
    try:
        # The frame's length bounds every container msgpack builds from it.
        return unpack(bytes(body))
    except Exception as e:          # msgpack raises several types
        raise WireError(f"undecodable frame: {e}") from None


# ---- keys ------------------------------------------------------------------------

def key_id_valid(key_id):
    return isinstance(key_id, str) and bool(_KEY_ID.match(key_id))


def load_key(path):
    """(key_id, secret) from a key file that is this user's own and private;
    raises OSError/ValueError saying why not (rgpud's rules)."""
    flags = os.O_RDONLY
    for name in ("O_CLOEXEC", "O_NOFOLLOW", "O_NOCTTY"):     # not on Windows
        flags |= getattr(os, name, 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"key file {path} is not a regular file")
        if not hasattr(os, "geteuid"):
            pass        # Windows: no owner or mode bits to check; the ACLs decide
        elif st.st_uid != os.geteuid():
            raise ValueError(f"key file {path} belongs to uid {st.st_uid}, not to this user "
                             f"(uid {os.geteuid()})")
        elif st.st_mode & 0o077:
            raise ValueError(f"key file {path} is readable by others (mode "
                             f"{st.st_mode & 0o7777:04o}): chmod 600 it")
        text = os.read(fd, 255).decode("ascii", "replace")
    finally:
        os.close(fd)
    parts = text.split()
    if (len(parts) < 3 or parts[0] != KEY_MAGIC or not key_id_valid(parts[1])
            or not re.fullmatch(r"[0-9a-fA-F]{64}", parts[2])):
        raise ValueError(f"key file {path} is not '{KEY_MAGIC} KEY_ID HEX64'")
    return parts[1], bytes.fromhex(parts[2])


def client_key_path():
    env = os.environ.get("RGPU_KEY_FILE")
    if env:
        return env
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and xdg.startswith("/"):
        return os.path.join(xdg, "rgpu", "key")
    return os.path.join(os.path.expanduser("~"), ".config", "rgpu", "key")


def mac(secret, label, first_nonce, second_nonce):
    return hmac.new(secret, label + first_nonce + second_nonce, hashlib.sha256).digest()


# ---- addresses -------------------------------------------------------------------

def parse_addr(addr):
    """("unix", path) or ("tcp", (host, port)) from unix:PATH, /PATH, HOST:PORT
    or [IPV6]:PORT."""
    if addr.startswith("unix:"):
        return "unix", addr[5:]
    if addr.startswith("/"):
        return "unix", addr
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)", addr) or re.fullmatch(r"([^:\[\]]+):(\d+)", addr)
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"address '{addr}': use unix:PATH, HOST:PORT or [IPV6]:PORT")
    return "tcp", (m.group(1), int(m.group(2)))


def connect(addr, timeout=30.0):
    kind, where = parse_addr(addr)
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(where)
        except OSError:
            sock.close()
            raise
    else:
        sock = socket.create_connection(where, timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(None)
    return kind, sock


def client_handshake(sock, tcp, client_name):
    """Says hello, answers a challenge with the user's key, checks the
    server's proof; returns the welcome's info dict or raises WireError."""
    nonce = os.urandom(NONCE_LEN)
    send_frame(sock, ["hello", PROTO, client_name, nonce])
    msg = recv_frame(sock, 1 << 20)
    expected_proof = None
    if isinstance(msg, list) and msg[:1] == ["challenge"]:
        if len(msg) != 2 or not isinstance(msg[1], bytes) or len(msg[1]) != NONCE_LEN:
            raise WireError("malformed challenge")
        try:
            key_id, secret = load_key(client_key_path())
        except (OSError, ValueError) as e:
            send_frame(sock, ["auth", "", None])
            raise WireError(f"this op server requires a key, and none is usable: {e}") from None
        send_frame(sock, ["auth", key_id, mac(secret, MAC_CLIENT, nonce, msg[1])])
        expected_proof = mac(secret, MAC_SERVER, msg[1], nonce)
        del secret
        msg = recv_frame(sock, 1 << 20)
    elif tcp and os.environ.get("RGPU_INSECURE_TCP") != "1":
        raise WireError("the op server on a TCP address asked for no key; refusing it "
                        "(RGPU_INSECURE_TCP=1 allows it on a trusted network)")
    if not (isinstance(msg, list) and len(msg) == 6 and msg[0] == "welcome"):
        raise WireError("the server did not answer with a welcome")
    _, proto, status, info, message, proof = msg
    if status != STATUS_OK:
        raise WireError(f"the op server refused this client: {message}")
    if proto != PROTO:
        raise WireError(f"the op server speaks protocol {proto}, this client {PROTO}: "
                        "install the same rgpu on both machines")
    if expected_proof is not None and not (isinstance(proof, bytes)
                                           and hmac.compare_digest(proof, expected_proof)):
        raise WireError("the op server did not prove that it holds this client's key")
    return info if isinstance(info, dict) else {}
