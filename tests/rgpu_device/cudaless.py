"""Runs a Python program as a client that cannot reach any CUDA driver: the
nearest this project gets to device rgpu's client with PyTorch's CPU-only
wheel on a machine that has a GPU.

    python3 tests/rgpu_device/cudaless.py SCRIPT [ARGS...]

PyPI's Linux wheel of PyTorch is its CUDA build (its CUDA runtime
libraries come along and are linked at import), and the CPU-only wheel is
neither on PyPI nor small enough to carry to the GPU machine.  So this
takes the CUDA build and removes what makes a GPU reachable from it:

  - Landlock (the kernel, unprivileged): every file stays readable but the
    NVIDIA driver's libraries (libcuda.so*, libnvidia-*.so*, libcudadebugger,
    in the loader's folders, CUDA's, and the Python's nvidia packages) and
    the GPU's device nodes (/dev/nvidia*, /dev/dri); loading libcuda.so.1 is
    checked to fail before the program starts;
  - CUDA_VISIBLE_DEVICES is empty.

Then it checks that torch.cuda.is_available() is False, runs SCRIPT as
__main__, and at the end that no driver library is mapped into the process
and no device node is open.  Its last line says what held:

    cudaless client: OK (Landlock ABI N: M driver files and device nodes
    unreachable; torch.cuda.is_available() False; no driver library mapped)

What it does not show: the CPU-only wheel's own build (the CUDA runtime
libraries of the CUDA wheel are in this process, mapped and never used),
nor another OS.  Without Landlock (an old kernel) it says so and runs with
the empty CUDA_VISIBLE_DEVICES only; the line then begins "cudaless client:
WEAK".
"""
import ctypes
import fnmatch
import glob
import os
import runpy
import stat
import subprocess
import sys

DRIVER_FILES = ("libcuda.so*", "libcudadebugger.so*", "libnvidia-*.so*", "libnvcuvid.so*",
                "libnvoptix.so*")
DEVICE_NODES = ("nvidia*", "dri")
# Landlock: the syscalls (one number on every architecture) and the rights.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
EXECUTE, READ_FILE, READ_DIR = 1 << 0, 1 << 2, 1 << 3
READ_ALL = EXECUTE | READ_FILE | READ_DIR
PR_SET_NO_NEW_PRIVS = 38
O_PATH = getattr(os, "O_PATH", 0o10000000)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def driver_folders():
    """(folder, whether to look beneath it) where a driver library could be:
    the loader's cache and paths, CUDA's folders, the Python's nvidia
    packages."""
    folders = {}
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            if "=> /" in line:
                folders[os.path.dirname(line.rsplit("=> ", 1)[1])] = False
    except OSError:
        pass
    for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") + [
            "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/lib64", "/lib", "/usr/local/lib", "/usr/local/nvidia/lib",
            "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"]:
        if p:
            folders.setdefault(p, False)
    for cuda in glob.glob("/usr/local/cuda*"):
        folders[cuda] = True
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry, "nvidia")):
            folders[os.path.join(entry, "nvidia")] = True
    return folders


def hidden_files():
    """(device, inode) -> path of every driver library and device node."""
    hidden = {}

    def note(path):
        try:
            st = os.stat(path)
        except OSError:
            return
        hidden[(st.st_dev, st.st_ino)] = path

    def look(root, names):
        for name in names:
            if any(fnmatch.fnmatch(name, p) for p in DRIVER_FILES):
                note(os.path.join(root, name))

    for folder, beneath in driver_folders().items():
        if beneath:
            for root, _, names in os.walk(folder):
                look(root, names)
        else:
            try:
                look(folder, os.listdir(folder))
            except OSError:
                pass
    for pattern in DEVICE_NODES:
        for path in glob.glob(os.path.join("/dev", pattern)):
            note(path)
    return hidden


class Ruleset:
    def __init__(self):
        attr = ctypes.c_uint64(READ_ALL)
        self.fd = _libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        self.rules = 0

    def allow(self, path, access):
        try:
            fd = os.open(path, O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= EXECUTE | READ_FILE
            rule = PathBeneath(access, fd)
            if _libc.syscall(ADD_RULE, self.fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0) == 0:
                self.rules += 1
        finally:
            os.close(fd)

    def restrict(self):
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                _libc.syscall(RESTRICT_SELF, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        os.close(self.fd)


def allow_all_but(ruleset, hidden):
    """Every file and folder readable but the hidden ones: whole trees where
    nothing is hidden, file by file along the folders that hold one."""
    holding = set()
    for path in hidden.values():
        folder = os.path.dirname(os.path.realpath(path))
        while folder not in holding:
            holding.add(folder)
            if folder == "/":
                break
            folder = os.path.dirname(folder)

    def walk(folder):
        if folder not in holding:
            ruleset.allow(folder, READ_ALL)
            return
        ruleset.allow(folder, READ_DIR)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for e in entries:
            try:
                st = os.stat(e.path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in hidden:
                continue
            if not stat.S_ISDIR(st.st_mode):
                ruleset.allow(e.path, READ_ALL)     # a symlink's rule is its target's
            elif not e.is_symlink():
                walk(e.path)
            # A link to a folder gets nothing: the folder has its own rules
            # under its real path (a rule through the link would cover all
            # beneath it).

    walk("/")


def confine():
    """Landlock's ABI and how many files it hid, or (0, why not)."""
    abi = _libc.syscall(CREATE_RULESET, None, 0, RULESET_VERSION)
    if abi < 1:
        return 0, "this kernel has no Landlock"
    hidden = hidden_files()
    ruleset = Ruleset()
    allow_all_but(ruleset, hidden)
    ruleset.restrict()
    for path in hidden.values():
        # A hidden folder (/dev/nvidia-caps) may still be listed (its
        # parent's READ_DIR covers the folders beneath); what it holds may
        # not be opened.
        for name in unreadable_targets(path):
            try:
                os.close(os.open(name, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                continue
            raise SystemExit(f"cudaless client: FAIL: {name} is still readable")
    return abi, len(hidden)


def unreadable_targets(path):
    """What must not open: the file itself, or every file in the folder."""
    if not os.path.isdir(path):
        return [path]
    try:
        return [os.path.join(path, n) for n in os.listdir(path)
                if not os.path.isdir(os.path.join(path, n))]
    except OSError:
        return []


def check_at_end():
    """Driver libraries mapped, device nodes open: both must be none."""
    with open("/proc/self/maps") as f:
        mapped = sorted({line.split()[-1] for line in f if "/" in line
                         and any(fnmatch.fnmatch(os.path.basename(line.split()[-1]), p)
                                 for p in DRIVER_FILES)})
    nodes = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("/dev/nvidia", "/dev/dri")):
            nodes.append(target)
    return mapped, nodes


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    abi, hidden = confine()
    if abi:
        try:
            ctypes.CDLL("libcuda.so.1")
            raise SystemExit("cudaless client: FAIL: libcuda.so.1 still loads")
        except OSError:
            pass
    import torch
    if torch.cuda.is_available():
        raise SystemExit("cudaless client: FAIL: torch.cuda.is_available() is True")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        mapped, nodes = check_at_end()
        if mapped or nodes:
            print(f"cudaless client: FAIL: mapped {mapped}, open {nodes}", flush=True)
        elif abi:
            print(f"cudaless client: OK (Landlock ABI {abi}: {hidden} driver files and device "
                  "nodes unreachable; torch.cuda.is_available() False; no driver library "
                  "mapped)", flush=True)
        else:
            print(f"cudaless client: WEAK ({hidden}; only CUDA_VISIBLE_DEVICES empty; "
                  "torch.cuda.is_available() False; no driver library mapped)", flush=True)


if __name__ == "__main__":
    main()
