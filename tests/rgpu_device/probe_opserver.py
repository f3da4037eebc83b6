"""rgpu-opserver with a planted flaw, for test_sandbox.py.

The session sandbox is there for the day a client finds a way to run code
in its session (a flaw in a PyTorch kernel that checked arguments still
reach).  To test it without such a flaw, this module gives the op server
one more request, ["probe", WHAT, ARG], which does inside the session what
an intruder would, and then runs the op server as usual:

    system CMD   a shell command (os.system: a new process, execve)
    fork PATH    a new process (os.fork), which writes PATH
    exec CMD     execve in place
    write PATH   open a file for writing
    read PATH    read a file (Landlock decides)
    connect PATH a Unix socket, connected, a message sent
    tcp PORT     a TCP connection to 127.0.0.1:PORT
    status       /proc/self/status (Seccomp, NoNewPrivs)
    limits       /proc/self/limits

Test code only: the op server itself has no such request (test_opserver
checks that it refuses one)."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import rgpu_opserver  # noqa: E402


def _system(cmd):
    return os.system(cmd)


def _fork(path):
    pid = os.fork()
    if pid == 0:
        with open(path, "w") as f:
            f.write("written by a child of the session\n")
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _exec(cmd):
    os.execv("/bin/sh", ["sh", "-c", cmd])


def _write(path):
    with open(path, "w") as f:
        f.write("written by the session\n")
    return "written"


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"hello from the session")
    return "connected"


def _tcp(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"hello from the session")
    return "connected"


def _status(_):
    with open("/proc/self/status") as f:
        return f.read()


def _limits(_):
    with open("/proc/self/limits") as f:
        return f.read()


_PROBES = {"system": _system, "fork": _fork, "exec": _exec, "write": _write, "read": _read,
           "connect": _connect, "tcp": _tcp, "status": _status, "limits": _limits}


def op_probe(self, what, arg=None):
    return _PROBES[what](arg)


rgpu_opserver.Executor.op_probe = op_probe

if __name__ == "__main__":
    sys.exit(rgpu_opserver.main())
