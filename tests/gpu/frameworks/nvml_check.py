"""NVML on the GPU, natively and through rgpu (tests/gpu/run.sh).

Reads NVML through ctypes (no pynvml needed): natively NVIDIA's
libnvidia-ml.so.1, through `rgpu run` the stub, whose calls the GPU host's
NVML answers.  stdout carries what must be identical both ways: the device
count, each GPU's name, UUID, PCI bus id, memory total, compute capability,
power limits, modes, and the driver, NVML and CUDA versions.  Readings that
move (temperature, power, load, memory in use, clocks) go to stderr.

Checks on the way: NVML and CUDA (libcuda through ctypes) agree on each
GPU's name, UUID, PCI bus id and memory; memory CUDA allocates shows as used
in NVML; a handle NVML never handed out is refused.  See checks.py for the
output convention; exit 77 when libnvidia-ml.so.1 is missing.
"""
import ctypes
import os
import sys

from checks import Checks, SKIP

NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
CU_ATTR_PCI_BUS_ID, CU_ATTR_PCI_DEVICE_ID, CU_ATTR_PCI_DOMAIN_ID = 33, 34, 50


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def load(name, what):
    try:
        return ctypes.CDLL(name)
    except OSError as e:
        print(f"SKIP: {name} is not installed ({what}: {e})", flush=True)
        sys.exit(SKIP)


nvml = load("libnvidia-ml.so.1", "NVML")
cuda = load("libcuda.so.1", "the CUDA driver")
nvml.nvmlErrorString.restype = ctypes.c_char_p
c = Checks()


def text(buf):
    """A C string: a ctypes buffer, or a char array field (bytes)."""
    raw = buf if isinstance(buf, bytes) else buf.value
    return raw.decode(errors="replace")


def call(fn, *args):
    """An NVML call's status, named in the log when it is not success."""
    rc = getattr(nvml, fn)(*args)
    if rc != NVML_SUCCESS:
        c.detail(f"{fn}: {rc} ({nvml.nvmlErrorString(rc).decode()})")
    return rc


def query(fn, ctype, *args):
    """The value an NVML getter writes last, or its failure as text."""
    v = ctype()
    rc = call(fn, *args, ctypes.byref(v))
    return v.value if rc == NVML_SUCCESS else f"status {rc}"


def pair(fn, ctype, *args):
    a, b = ctype(), ctype()
    rc = call(fn, *args, ctypes.byref(a), ctypes.byref(b))
    return f"{a.value} {b.value}" if rc == NVML_SUCCESS else f"status {rc}"


def string(fn, *args, size=96):
    buf = ctypes.create_string_buffer(size)
    rc = call(fn, *args, buf, ctypes.c_uint(size))
    return text(buf) if rc == NVML_SUCCESS else f"status {rc}"


def cuda_view(i):
    """CUDA's name, UUID (as NVML writes it), PCI bus id and memory of device i."""
    dev = ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    uuid = ctypes.create_string_buffer(16)
    total = ctypes.c_size_t()
    attrs = {}
    ok = cuda.cuDeviceGet(ctypes.byref(dev), i) == 0
    ok = ok and cuda.cuDeviceGetName(name, 256, dev) == 0
    ok = ok and cuda.cuDeviceGetUuid_v2(uuid, dev) == 0
    ok = ok and cuda.cuDeviceTotalMem_v2(ctypes.byref(total), dev) == 0
    for a in (CU_ATTR_PCI_BUS_ID, CU_ATTR_PCI_DEVICE_ID, CU_ATTR_PCI_DOMAIN_ID):
        v = ctypes.c_int()
        ok = ok and cuda.cuDeviceGetAttribute(ctypes.byref(v), a, dev) == 0
        attrs[a] = v.value
    if not ok:
        return None
    h = uuid.raw.hex()
    return {"name": text(name), "total": total.value,
            "uuid": f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}",
            "bus": f"{attrs[CU_ATTR_PCI_DOMAIN_ID]:08x}:{attrs[CU_ATTR_PCI_BUS_ID]:02x}:"
                   f"{attrs[CU_ATTR_PCI_DEVICE_ID]:02x}.0"}


def system():
    c.result("nvmlInit_v2", call("nvmlInit_v2") == NVML_SUCCESS)
    c.say(f"driver {string('nvmlSystemGetDriverVersion', size=80)}")
    c.say(f"nvml {string('nvmlSystemGetNVMLVersion', size=80)}")
    c.say(f"cuda driver {query('nvmlSystemGetCudaDriverVersion_v2', ctypes.c_int)}")


def device(i, handle):
    h = handle
    name = string("nvmlDeviceGetName", h)
    uuid = string("nvmlDeviceGetUUID", h)
    pci = PciInfo()
    rc = call("nvmlDeviceGetPciInfo_v3", h, ctypes.byref(pci))
    bus = text(pci.busId) if rc == NVML_SUCCESS else f"status {rc}"
    m1 = Memory()
    m2 = MemoryV2(version=ctypes.sizeof(MemoryV2) | (2 << 24))
    rc1 = call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(m1))
    rc2 = call("nvmlDeviceGetMemoryInfo_v2", h, ctypes.byref(m2))
    c.say(f"device {i}: {name}")
    c.say(f"  uuid {uuid}")
    c.say(f"  pci {bus} device id {pci.pciDeviceId:08x}")
    c.say(f"  memory total {m1.total if rc1 == 0 else rc1} (v2 {m2.total if rc2 == 0 else rc2}, "
          f"reserved {m2.reserved if rc2 == 0 else rc2})")
    c.say(f"  compute capability {pair('nvmlDeviceGetCudaComputeCapability', ctypes.c_int, h)}")
    c.say(f"  index {query('nvmlDeviceGetIndex', ctypes.c_uint, h)}, "
          f"minor {query('nvmlDeviceGetMinorNumber', ctypes.c_uint, h)}")
    c.say(f"  power limits {pair('nvmlDeviceGetPowerManagementLimitConstraints', ctypes.c_uint, h)}, "
          f"default {query('nvmlDeviceGetPowerManagementDefaultLimit', ctypes.c_uint, h)}, "
          f"enforced {query('nvmlDeviceGetEnforcedPowerLimit', ctypes.c_uint, h)}")
    c.say(f"  max clocks sm {query('nvmlDeviceGetMaxClockInfo', ctypes.c_uint, h, NVML_CLOCK_SM)} "
          f"mem {query('nvmlDeviceGetMaxClockInfo', ctypes.c_uint, h, NVML_CLOCK_MEM)}")
    c.say(f"  persistence {query('nvmlDeviceGetPersistenceMode', ctypes.c_int, h)}, "
          f"compute mode {query('nvmlDeviceGetComputeMode', ctypes.c_int, h)}, "
          f"ecc {pair('nvmlDeviceGetEccMode', ctypes.c_int, h)}, "
          f"mig {pair('nvmlDeviceGetMigMode', ctypes.c_uint, h)}")
    c.say(f"  vbios {string('nvmlDeviceGetVbiosVersion', h, size=32)}, "
          f"serial {string('nvmlDeviceGetSerial', h, size=32)}")
    u = Utilization()
    call("nvmlDeviceGetUtilizationRates", h, ctypes.byref(u))
    c.detail(f"device {i}: temperature {query('nvmlDeviceGetTemperature', ctypes.c_uint, h, NVML_TEMPERATURE_GPU)} C, "
             f"power {query('nvmlDeviceGetPowerUsage', ctypes.c_uint, h)} mW, "
             f"pstate P{query('nvmlDeviceGetPerformanceState', ctypes.c_int, h)}, "
             f"util {u.gpu}% mem {u.memory}%, used {m1.used >> 20} MiB, "
             f"sm clock {query('nvmlDeviceGetClockInfo', ctypes.c_uint, h, NVML_CLOCK_SM)} MHz, "
             f"fan {query('nvmlDeviceGetFanSpeed', ctypes.c_uint, h)}")
    cv = cuda_view(i)
    c.result(f"device {i}: CUDA describes it", cv is not None)
    if cv:
        c.result(f"device {i}: NVML's name is CUDA's", cv["name"] == name,
                 f"{name!r} vs {cv['name']!r}")
        c.result(f"device {i}: NVML's UUID is CUDA's", cv["uuid"] == uuid,
                 f"{uuid} vs {cv['uuid']}")
        c.result(f"device {i}: NVML's PCI bus id is CUDA's", cv["bus"].lower() == bus.lower(),
                 f"{bus} vs {cv['bus']}")
        # NVML counts memory the driver keeps for itself (on an H200, 0.4 %
        # more than cuDeviceTotalMem): at least CUDA's, within 2 %.
        c.result(f"device {i}: NVML's memory total covers CUDA's",
                 cv["total"] <= m1.total <= cv["total"] * 1.02,
                 f"{m1.total} vs {cv['total']}")
    again = ctypes.c_void_p()
    c.result(f"device {i}: handle by UUID",
             call("nvmlDeviceGetHandleByUUID", uuid.encode(), ctypes.byref(again)) == 0
             and again.value == h.value)
    again = ctypes.c_void_p()
    c.result(f"device {i}: handle by PCI bus id",
             call("nvmlDeviceGetHandleByPciBusId_v2", bus.encode(), ctypes.byref(again)) == 0
             and again.value == h.value)


def memory_follows_cuda(h):
    """64 MiB from cuMemAlloc shows as used; this process is listed (stderr
    only: in a PID namespace NVML names processes by the host's pids)."""
    ctx = ctypes.c_void_p()
    ptr = ctypes.c_ulonglong()
    dev = ctypes.c_int()
    size = 64 << 20
    before, after = Memory(), Memory()
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    c.result("cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0)
    cuda.cuCtxSetCurrent(ctx)
    call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(before))
    c.result("cuMemAlloc_v2 64 MiB", cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0)
    call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(after))
    c.result("NVML sees CUDA's 64 MiB", after.used >= before.used + size,
             f"used {before.used >> 20} MiB -> {after.used >> 20} MiB")
    procs = (ProcessInfo * 64)()
    n = ctypes.c_uint(64)
    rc = call("nvmlDeviceGetComputeRunningProcesses_v3", h, ctypes.byref(n), procs)
    mine = [p for p in procs[:n.value] if p.pid == os.getpid()] if rc == 0 else []
    c.detail(f"compute processes: status {rc}, {n.value} listed, this one "
             f"{'with %d MiB' % (mine[0].usedGpuMemory >> 20) if mine else 'not among them'}")
    cuda.cuMemFree_v2(ptr)


def main():
    c.section("system", system)
    count = ctypes.c_uint()
    c.result("nvmlDeviceGetCount_v2", call("nvmlDeviceGetCount_v2", ctypes.byref(count)) == 0)
    cuda_count = ctypes.c_int()
    c.result("cuInit", cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(cuda_count)) == 0)
    c.say(f"devices {count.value}")
    c.result("NVML counts the GPUs CUDA does", count.value == cuda_count.value,
             f"{count.value} vs {cuda_count.value}")
    handles = []
    for i in range(count.value):
        h = ctypes.c_void_p()
        if c.result(f"device {i}: handle", call("nvmlDeviceGetHandleByIndex_v2", i, ctypes.byref(h)) == 0):
            handles.append(h)
            c.section(f"device {i}", device, i, h)
    if handles:
        c.section("memory", memory_follows_cuda, handles[0])
    c.result("nvmlShutdown", call("nvmlShutdown") == NVML_SUCCESS)
    c.finish()


main()
