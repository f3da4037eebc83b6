"""examples/nanogpt/train.py for 20 steps on --device rgpu (an op server on
PyTorch's CPU device) and on --device cpu: every step's loss must agree
within 1e-5.  The rgpu run is a client that cannot reach a CUDA driver
(cudaless.py), as one with PyTorch's CPU-only wheel."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, PYDIR, REPO, OpServer  # noqa: E402

STEPS = 20
TOLERANCE = 1e-5
TRAIN = os.path.join(REPO, "examples", "nanogpt", "train.py")


def losses(device, env, data):
    wrapper = [os.path.join(HERE, "cudaless.py")] if device == "rgpu" else []
    out = subprocess.run([sys.executable, *wrapper, TRAIN, "--device", device, "--steps",
                          str(STEPS), "--log-every", "1", "--data", data],
                         env=env, capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        sys.exit(f"FAIL: train.py --device {device} exited {out.returncode}:\n{out.stderr[-3000:]}")
    found = [float(v) for v in re.findall(r"^step \d+ loss (\S+)", out.stdout, re.M)]
    if len(found) != STEPS:
        sys.exit(f"FAIL: train.py --device {device} logged {len(found)} losses:\n{out.stdout}")
    if wrapper:
        said = re.findall(r"^cudaless client: .*", out.stdout, re.M)
        if not said or not re.match(r"cudaless client: (OK|WEAK)", said[-1]):
            sys.exit(f"FAIL: the rgpu client was not CUDA-less: {said or out.stdout[-2000:]}")
        print(said[-1])
    return found


# One CPU thread for PyTorch everywhere: on a busy machine its thread pool
# spins for cores that others hold (a step took 7.9 s with the pool, 0.9 s
# without), and both sides compute alike.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def main():
    server = OpServer(env=ONE_THREAD)
    try:
        data = os.path.join(tempfile.mkdtemp(prefix="rgpu-nanogpt-"), "data.txt")
        env = dict(os.environ, PYTHONPATH=PYDIR, RGPU_OP_SERVER=server.addr, **ONE_THREAD)
        cpu = losses("cpu", env, data)
        rgpu = losses("rgpu", env, data)
    finally:
        server.stop()
    worst = max(abs(a - b) for a, b in zip(cpu, rgpu))
    for step, (a, b) in enumerate(zip(cpu, rgpu), 1):
        print(f"step {step:2d} cpu {a:.6f} rgpu {b:.6f}")
    print(f"largest difference {worst:.2e} (allowed {TOLERANCE:.0e})")
    if worst > TOLERANCE or cpu[-1] >= cpu[0]:
        print("FAIL: the losses differ" if worst > TOLERANCE else "FAIL: the loss did not fall")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
