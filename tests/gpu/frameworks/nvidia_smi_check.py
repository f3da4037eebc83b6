"""nvidia-smi's query mode, natively and through rgpu (tests/gpu/run.sh).

`nvidia-smi --query-gpu=...` reads NVML from libnvidia-ml.so.1; under
`rgpu run` the stub is preloaded into it, so its answers come from the GPU
host through rgpu.  stdout carries the values that do not move (name, UUID,
PCI bus id, memory total, driver version, compute mode, persistence mode,
power limit), which must be identical both ways; the moving ones go to
stderr.  Exit 77 when nvidia-smi is not installed.  See checks.py.

Through rgpu it fails today, and tests/gpu/run.sh leaves it out of its
default list: NVIDIA's nvidia-smi looks up nvmlInternalGetExportTable, a
function of the driver's own libnvidia-ml.so.1 that nvml.h does not
declare, and stops with "Mismatch in versions between nvidia-smi and NVML"
when it is missing (measured with driver 580, docs/launcher.md).  Run it by
name (RGPU_FRAMEWORK_LIST=nvidia_smi) to see whether that still holds.
"""
import shutil
import subprocess
import sys

from checks import Checks, SKIP

STATIC = "index,name,uuid,pci.bus_id,memory.total,driver_version,compute_mode,persistence_mode,power.limit"
MOVING = "index,temperature.gpu,power.draw,utilization.gpu,memory.used,pstate,clocks.sm"

if not shutil.which("nvidia-smi"):
    print("SKIP: nvidia-smi is not installed", flush=True)
    sys.exit(SKIP)
c = Checks()


def query(fields):
    r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    c.result(f"nvidia-smi --query-gpu={fields.split(',')[1]}... exits 0", r.returncode == 0,
             f"exit {r.returncode}: {(r.stdout + r.stderr).strip()[:300]}")
    return r.stdout.strip().splitlines()


for line in query(STATIC):
    c.say(line)
for line in query(MOVING):
    c.detail(line)
c.finish()
