#!/usr/bin/env python3
"""A stand-in for rgpud that answers every hello with one fixed welcome.

    fake_rgpud.py SOCKET STATUS RUNTIME DRIVER MESSAGE

Listens on a Unix socket at SOCKET, and answers each connection's hello with
[2, 2, STATUS, RUNTIME, DRIVER, "fake", MESSAGE, nil] (common/rgpu_hello.h):
no challenge, as rgpud on a Unix socket, so the launcher's reactions to
welcomes that a real
daemon gives rarely (another protocol, another CUDA, no driver) can be
tested.  Runs until killed.  msgpack is written by hand: no module needed.
"""
import socket
import struct
import sys


def pack_int(v):
    if 0 <= v < 128:
        return bytes([v])
    if 0 <= v < 1 << 16:
        return b"\xcd" + struct.pack(">H", v)
    return b"\xce" + struct.pack(">I", v)


def pack_str(s):
    b = s.encode()
    if len(b) < 32:
        return bytes([0xA0 | len(b)]) + b
    return b"\xd9" + bytes([len(b)]) + b


def welcome(status, runtime, driver, message):
    body = b"\x98" + pack_int(2) + pack_int(2) + pack_int(status)
    body += pack_int(runtime) + pack_int(driver) + pack_str("fake") + pack_str(message)
    body += b"\xc0"
    return struct.pack(">I", len(body)) + body


def read_frame(conn):
    head = b""
    while len(head) < 4:
        chunk = conn.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack(">I", head)
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    path, status, runtime, driver, message = sys.argv[1:6]
    reply = welcome(int(status), int(runtime), int(driver), message)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    while True:
        conn, _ = srv.accept()
        with conn:
            if read_frame(conn) is not None:
                conn.sendall(reply)


if __name__ == "__main__":
    main()
