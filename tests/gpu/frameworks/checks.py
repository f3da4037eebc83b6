"""What the framework checks share (tests/gpu/frameworks/*_check.py).

Each check script runs on the GPU machine twice, natively and through rgpu,
and tests/gpu/run.sh compares the two stdouts byte for byte.  So stdout
carries only what must not vary between runs: "ok NAME" or "FAIL NAME:
DETAILS" per check (the convention of tests/progs/check.h), versions, device
names, and hashes of numbers that a seeded generator makes deterministically.
Measured errors go to stderr.

Each result is checked against a reference computed on the CPU (NumPy, or
PyTorch on the CPU) with a tolerance relative to the reference's largest
magnitude: max |got - want| <= atol + rtol * max |want|.

Exit status: 0 when every check passed, 1 when one failed, 77 (skip) when a
package the script needs is not installed.  RGPU_CHECK_TIMEOUT (seconds)
arms a watchdog that dumps every thread's Python stack to stderr and exits,
so that a hang shows where it was.
"""
import atexit
import faulthandler
import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import traceback

SKIP = 77


def first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def need(*names):
    """Import the named modules; exit with SKIP, saying which, if one is not
    installed.  Any other import error is a failure, not a skip: a package
    that is there but cannot load (natively or through rgpu) is a bug."""
    mods = []
    for name in names:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as e:
            print(f"SKIP: {name} is not installed ({first_line(e)})", flush=True)
            sys.exit(SKIP)
        except Exception as e:  # noqa: BLE001 - any import failure is reported
            print(f"FAIL import {name}: {type(e).__name__}: {first_line(e)}", flush=True)
            traceback.print_exc()
            sys.exit(1)
    return mods[0] if len(mods) == 1 else mods


def fresh_cache(var):
    """Point the cache variable var at a new empty folder (removed at exit)
    unless the caller set it: a kernel cache left by the native run would
    let the rgpu run skip compiling and loading what the native run did."""
    if os.environ.get(var):
        return
    d = tempfile.mkdtemp(prefix="rgpu-check-")
    os.environ[var] = d
    atexit.register(shutil.rmtree, d, True)


def watchdog():
    limit = float(os.environ.get("RGPU_CHECK_TIMEOUT", "0") or 0)
    if limit > 0:
        faulthandler.dump_traceback_later(limit, exit=True)


def digest(array):
    """A short hash of an array's bytes (C order), for numbers that must be
    identical natively and through rgpu."""
    import numpy as np
    a = np.ascontiguousarray(array)
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]


class Checks:
    def __init__(self):
        self.count = 0
        self.failed = []
        watchdog()

    @staticmethod
    def say(text):
        """A line for stdout: it must be the same natively and through rgpu."""
        print(text, flush=True)

    @staticmethod
    def detail(text):
        print(text, file=sys.stderr, flush=True)

    def result(self, name, ok, why=""):
        self.count += 1
        if ok:
            print(f"ok {name}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL {name}: {why}", flush=True)
        return ok

    @staticmethod
    def shape_of_wrong(got, want, diff, bad):
        """What a wrong result looks like, in one line: how much of it is
        zeros, NaN or wrong, where the first wrong element is, and the
        first values of both (all zeros, a stale buffer and a garbled one
        read differently)."""
        import numpy as np
        flat_got, flat_want = got.ravel(), want.ravel()
        n = max(flat_got.size, 1)
        first = int(np.argmax(bad.ravel())) if bad.any() else -1
        return (f"{100.0 * np.count_nonzero(flat_got == 0) / n:.0f}% zeros, "
                f"{100.0 * np.count_nonzero(np.isnan(flat_got)) / n:.0f}% NaN, "
                f"{100.0 * np.count_nonzero(bad) / n:.0f}% wrong, first wrong at {first}; "
                f"got {np.array2string(flat_got[:4], precision=4)} "
                f"want {np.array2string(flat_want[:4], precision=4)}")

    def close(self, name, got, want, rtol, atol=0.0):
        """got (any array-like, already on the host) against want."""
        import numpy as np
        got = np.asarray(got)
        want = np.asarray(want)
        if got.shape != want.shape:
            return self.result(name, False, f"shape {got.shape}, want {want.shape}")
        diff = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
        err = float(np.max(diff)) if diff.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        if np.isnan(diff).any():
            err = float("nan")
        tol = atol + rtol * scale
        bad = ~(diff <= tol)               # NaN counts as wrong
        self.detail(f"{name}: max error {err:.3g}, max |ref| {scale:.3g}, "
                    f"relative {err / scale if scale else err:.3g}; "
                    + self.shape_of_wrong(got, want, diff, bad))
        ok = err <= tol    # False for NaN
        return self.result(name, ok, f"max error {err:.3g} of max |ref| {scale:.3g}, "
                                     f"tolerance rtol {rtol:g} atol {atol:g}; "
                                     + self.shape_of_wrong(got, want, diff, bad))

    def equal(self, name, got, want):
        import numpy as np
        got = np.asarray(got)
        want = np.asarray(want)
        ok = got.shape == want.shape and bool(np.array_equal(got, want))
        if not ok and got.shape == want.shape:
            bad = got != want
            return self.result(name, ok, self.shape_of_wrong(got, want, bad, bad))
        return self.result(name, ok, f"got {got.ravel()[:4]}..., want {want.ravel()[:4]}...")

    def within(self, name, value, low, high):
        self.detail(f"{name}: {value:.6g}")
        return self.result(name, low <= value <= high, f"{value:.6g} not in [{low:g}, {high:g}]")

    def section(self, name, fn, *args):
        """Run one group of checks; an exception fails it and the script goes on."""
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - any failure is reported and survived
            self.result(name, False, f"{type(e).__name__}: {first_line(e)}")
            traceback.print_exc()

    def finish(self):
        self.say(f"{self.count} checks, {len(self.failed)} failed")
        sys.stdout.flush()
        sys.exit(1 if self.failed else 0)
