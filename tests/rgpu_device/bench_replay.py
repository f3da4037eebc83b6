"""What the op server's own work costs, without a client, a socket or a
second process competing for the CPU:

    tests/rgpu_device/run.sh replay [--against REV] [--steps N] [--repeat R]

A tiny-nanoGPT session (bench_client.py's "tiny": 5 + 1 + N steps) is
recorded once: a working-tree op server on PyTorch's CPU device, with
Executor.run_batch wrapped to write each frame's requests to a file.
Those frames are then run again into a fresh Executor in one process, R
times for the working tree's python/ and, with --against, REV's
(alternating), and the best wall time of each is printed, with the part
spent inside the ATen operators (where the revision measures it:
Executor.operator_ns) and the rest, the op server's own work.  Replay
errors are counted and fail the run: the frames must mean the same to
both revisions.  A benchmark that reports numbers, not a test.
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bench_client  # noqa: E402  (its Server, client and revision export)

RECORDER = """
import pickle, sys
import rgpu_opserver
out = open(sys.argv.pop(1), "ab")
run_batch = rgpu_opserver.Executor.run_batch
def recording(self, ops):
    pickle.dump(ops, out)
    out.flush()
    return run_batch(self, ops)
rgpu_opserver.Executor.run_batch = recording
sys.argv[0] = "rgpu_opserver"
sys.exit(rgpu_opserver.main())
"""


def record(path, steps):
    """Frames of one tiny-nanoGPT session, into path."""
    folder = tempfile.mkdtemp(prefix="rgpu-replay-")
    addr = "unix:" + os.path.join(folder, "ops.sock")
    pydir = os.path.join(REPO, "python")
    server = subprocess.Popen(
        [sys.executable, "-c", RECORDER, path, "--listen", addr, "--device", "cpu",
         "--group", "none"],
        env=dict(os.environ, PYTHONPATH=pydir, OMP_NUM_THREADS="1"),
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "log"), "w"),
        start_new_session=True)
    try:
        deadline = time.time() + 60
        while not os.path.exists(addr[5:]):
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit("replay: the recording op server did not start:\n" +
                                 open(os.path.join(folder, "log")).read())
            time.sleep(0.1)
        child = subprocess.run(
            [sys.executable, os.path.join(HERE, "bench_client.py"), "--child", "tiny", str(steps)],
            env=dict(os.environ, PYTHONPATH=pydir, RGPU_OP_SERVER=addr), input="\n\n",
            capture_output=True, text=True, timeout=300)
        if child.returncode != 0:
            raise SystemExit(f"replay: the recorded client failed:\n{child.stderr}")
    finally:
        os.killpg(server.pid, 9)
        server.wait()


def replay_child(pydir, path, repeat):
    """In a child process with pydir first on sys.path: the best of repeat
    replays, as one JSON line."""
    sys.path.insert(0, pydir)
    import torch
    import rgpu_opserver
    torch.set_num_threads(1)
    with open(path, "rb") as f:
        frames = []
        while True:
            try:
                frames.append(pickle.load(f))
            except EOFError:
                break
    best = None
    for _ in range(repeat):
        copies = pickle.loads(pickle.dumps(frames))     # the executor may keep what it is given
        ex = rgpu_opserver.Executor(torch, "cpu")
        errors = 0
        began = time.perf_counter()
        for ops in copies:
            ex.run_batch(ops)
            if ex.error is not None:
                errors += 1
                ex.error = None
        wall = time.perf_counter() - began
        operators = getattr(ex, "operator_ns", None)
        run = {"wall": wall, "operators": None if operators is None else operators / 1e9,
               "errors": errors, "frames": len(frames)}
        if best is None or wall < best["wall"]:
            best = run
    print(json.dumps(best))


def replay(pydir, path, repeat):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", pydir, path,
                          str(repeat)], env=dict(os.environ, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", metavar="REV")
    ap.add_argument("--steps", type=int, default=100, help="timed steps of the recorded session")
    ap.add_argument("--repeat", type=int, default=8, help="replays per revision (the best counts)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return replay_child(args.child[0], args.child[1], int(args.child[2]))
    variants = [("working tree", os.path.join(REPO, "python"))]
    if args.against:
        variants.insert(0, (args.against, bench_client.export_revision(args.against)))
    path = os.path.join(tempfile.mkdtemp(prefix="rgpu-replay-"), "frames.pickle")
    record(path, args.steps)
    steps = args.steps + 7          # warm-up, the loss read and the counting step included
    print(f"a recorded tiny-nanoGPT session ({steps} steps) replayed into the op server's "
          f"Executor, best of {args.repeat}; ms per step")
    print("| revision | wall | inside the operators | the op server's own | replay errors |")
    print("|---|---|---|---|---|")
    results = {}
    for name, pydir in variants:
        r = results[name] = replay(pydir, path, args.repeat)
        ops = "-" if r["operators"] is None else f"{r['operators'] * 1e3 / steps:.2f}"
        own = "-" if r["operators"] is None else f"{(r['wall'] - r['operators']) * 1e3 / steps:.2f}"
        print(f"| {name} | {r['wall'] * 1e3 / steps:.2f} | {ops} | {own} | {r['errors']} |")
    if args.against:
        old, new = results[args.against], results["working tree"]
        print(f"working tree / {args.against}: wall {new['wall'] / old['wall']:.2f}")
    return 1 if any(r["errors"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
