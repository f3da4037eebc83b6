"""rgpu: PyTorch's device "rgpu", whose tensors live on a remote GPU.

    import torch, rgpu
    x = torch.randn(4096, 4096, device="rgpu")
    print((x @ x).relu().sum().item())

Importing this package registers the device (PyTorch's PrivateUse1 backend,
renamed "rgpu") and its module torch.rgpu.  Operations run on the op server
named by RGPU_OP_SERVER (HOST:PORT or unix:PATH); `rgpu run` sets it.
docs/rgpu-device.md describes the design.
"""
import torch

__version__ = "0.1.0"

_MIN_TORCH = (2, 6)


def _check_torch():
    import torch.utils.backend_registration as registration
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < _MIN_TORCH or not hasattr(registration, "_setup_privateuseone_for_python_backend"):
        raise ImportError(f"rgpu needs PyTorch {_MIN_TORCH[0]}.{_MIN_TORCH[1]} or newer "
                          f"(this is {torch.__version__})")


_check_torch()

from torch.utils.backend_registration import _setup_privateuseone_for_python_backend  # noqa: E402

from . import session as _session  # noqa: E402
from .session import RgpuError  # noqa: E402


class _DeviceModule:
    """torch.rgpu: what PyTorch and programs ask of a device's module."""

    RgpuError = RgpuError

    @staticmethod
    def is_available():
        try:
            _session.get()
            return True
        except RgpuError:
            return False

    @staticmethod
    def is_initialized():
        return _session.current() is not None

    @staticmethod
    def _lazy_init():
        _session.get()

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def set_device(device):
        index = torch.device("rgpu", device).index if isinstance(device, int) else \
            torch.device(device).index
        if index not in (None, 0):
            raise RgpuError(f"rgpu: device {index} does not exist (the op server serves one)")

    class device:
        """with torch.rgpu.device(0): ... (the one device; any other index
        raises)."""

        def __init__(self, device):
            _DeviceModule.set_device(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    @staticmethod
    def synchronize(device=None):
        """Waits until the server has run everything sent so far; raises the
        first error among it."""
        _session.get().request(["sync"])

    @staticmethod
    def manual_seed(seed):
        # torch.manual_seed calls this too: without a session yet, the seed
        # waits for the connection instead of making one.
        _session.seed(int(seed))

    manual_seed_all = manual_seed

    @staticmethod
    def _is_in_bad_fork():
        return _session.in_bad_fork()

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.float16, torch.bfloat16]

    @staticmethod
    def memory_stats(device=None):
        return _session.get().request(["memory"])

    @staticmethod
    def memory_allocated(device=None):
        return _DeviceModule.memory_stats().get("allocated_bytes.all.current", 0)

    @staticmethod
    def max_memory_allocated(device=None):
        return _DeviceModule.memory_stats().get("allocated_bytes.all.peak", 0)

    @staticmethod
    def memory_reserved(device=None):
        return _DeviceModule.memory_stats().get("reserved_bytes.all.current", 0)

    @staticmethod
    def empty_cache():
        _session.get().enqueue(["empty_cache"])

    @staticmethod
    def get_device_name(device=None):
        return _session.get().info.get("device_name", "rgpu")

    @staticmethod
    def server_cpu_time():
        """The op server session's CPU time so far, in seconds (all its
        threads); waits for the server."""
        return _session.get().request(["cpu_time"])

    @staticmethod
    def server_info():
        """What the op server said about itself at hello (torch version, device)."""
        return dict(_session.get().info)

    @staticmethod
    def stats():
        """Requests that waited for the server, frames and operations sent
        (frees not counted), of which calls sent as a plan's number and
        values (planned), and plans sent, so far in this session."""
        s = _session.current()
        return {k: getattr(s, k) if s else 0
                for k in ("waits", "frames", "ops", "planned", "plans")}


device_module = _DeviceModule()
_setup_privateuseone_for_python_backend("rgpu", backend_module=device_module)

from . import tensor as _tensor  # noqa: E402
from . import autocast as _autocast  # noqa: E402,F401


def _fallback(op, *args, **kwargs):
    # Operations that reach the rgpu backend without an rgpu tensor among
    # their arguments: the factories (torch.empty/zeros/randn(..., device="rgpu")).
    return _tensor.dispatch(op, args, kwargs)


_lib = torch.library.Library("_", "IMPL")
_lib.fallback(_fallback, "PrivateUse1")

# Factories whose generic kernels make an empty tensor and resize it through
# an out= argument: a wrapper's sizes cannot change, so these run whole.
# copy_ is here too: torch.tensor(..., device="rgpu") copies with Python
# dispatch turned off, and PyTorch's fallback trampoline cannot serve it.
_WHOLE_FACTORIES = ("copy_", "arange", "arange.start", "arange.start_step", "linspace",
                    "linspace.Tensor_Tensor", "linspace.Tensor_Scalar", "linspace.Scalar_Tensor",
                    "logspace", "eye", "eye.m", "randperm", "range", "range.step",
                    "tril_indices", "triu_indices")
_aten_lib = torch.library.Library("aten", "IMPL")


def _whole(op):
    return lambda *args, **kwargs: _tensor.dispatch(op, args, kwargs)


for _name in _WHOLE_FACTORIES:
    _base, _, _overload = _name.partition(".")
    _op = getattr(getattr(torch.ops.aten, _base), _overload or "default")
    _aten_lib.impl(_name, _whole(_op), "PrivateUse1")

# Operators whose CUDA kernel PyTorch chooses by the tensors' device
# (batch_norm's cuDNN kernel) make CUDA's choice on rgpu tensors too.
from . import cuda_choices as _cuda_choices  # noqa: E402
_cuda_choices.install(_aten_lib)

# Pinned batches (DataLoader(pin_memory=True)) and checkpoints loaded with
# map_location="rgpu", which PyTorch serves through C++ hooks a device
# written in Python lacks.
from . import pinning as _pinning  # noqa: E402
from . import loading as _loading  # noqa: E402
_pinning.install(_aten_lib)
_loading.install()

# Optimisers and clip_grad_norm_ take their foreach (multi-tensor) forms
# for rgpu tensors as they do for CUDA's: a handful of operators per step
# instead of several per parameter.  They choose by the tensors' type.
import torch.optim.optimizer as _optimizer  # noqa: E402
import torch.utils._foreach_utils as _foreach_utils  # noqa: E402

for _types in (_optimizer._foreach_supported_types, _foreach_utils._foreach_supported_types):
    if _tensor.RgpuTensor not in _types:
        _types.append(_tensor.RgpuTensor)

RgpuTensor = _tensor.RgpuTensor
synchronize = device_module.synchronize
reset = _session.reset


def stats():
    return device_module.stats()
