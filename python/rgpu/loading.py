"""torch.load(..., map_location="rgpu").

A checkpoint saved from CUDA or the CPU names its storages' devices; a
map_location sends them elsewhere.  PyTorch moves each storage itself, as
an UntypedStorage of the target device, which a device written in Python
does not have: rgpu tensors keep their data on the server and PyTorch sees
only wrappers.  So where map_location names rgpu (a string, a
torch.device, or a dict whose targets are all rgpu), the file is loaded
onto the CPU and every tensor of the result moves to rgpu afterwards, as
PyTorch would have placed it: parameters stay parameters, tensors that
shared a storage (tied weights) share one on rgpu, nn.Modules move whole.  Every other
map_location is PyTorch's own.
"""
import torch
import torch.nn as nn
from torch.utils._pytree import tree_map

from .session import RgpuError

_torch_load = torch.serialization.load


def _is_rgpu(location):
    if isinstance(location, torch.device):
        return location.type == "rgpu"
    return isinstance(location, str) and location.split(":", 1)[0] == "rgpu"


def _maps_to_rgpu(map_location):
    """Whether map_location sends everything to rgpu (True), nothing
    (False); a dict sending only some of it there raises."""
    if isinstance(map_location, dict):
        targets = [_is_rgpu(v) for v in map_location.values()]
        if any(targets) and not all(targets):
            raise RgpuError("rgpu: torch.load with a map_location that sends some devices to "
                            "rgpu and others elsewhere is not supported; load with "
                            "map_location='cpu' and move the tensors you want with .to('rgpu')")
        return bool(targets) and all(targets)
    return _is_rgpu(map_location)


def _to_rgpu(obj):
    # Tensors that shared a storage in the file (tied weights: two entries
    # of a state dict) share one on rgpu: each storage goes up once, whole,
    # and its tensors become views of it.
    storages = {}       # (data_ptr, dtype) of a loaded storage -> (its rgpu copy, it)

    def storage_on_rgpu(x):
        s = x.untyped_storage()
        key = (s.data_ptr(), x.dtype)
        entry = storages.get(key)
        if entry is None:
            flat = torch.empty(0, dtype=x.dtype).set_(s, 0, (s.nbytes() // x.element_size(),))
            entry = storages[key] = (flat.to("rgpu"), s)     # s kept: its address stays its own
        return entry[0]

    def move(x):
        if isinstance(x, nn.Module):
            return x.to("rgpu")
        if not isinstance(x, torch.Tensor) or x.device.type != "cpu":
            return x
        if x.layout != torch.strided or x.untyped_storage().nbytes() == 0:
            twin = x.detach().to("rgpu")
        else:
            twin = storage_on_rgpu(x).as_strided(x.size(), x.stride(), x.storage_offset())
        if isinstance(x, nn.Parameter):
            return nn.Parameter(twin, requires_grad=x.requires_grad)
        return twin.requires_grad_(True) if x.requires_grad else twin
    return tree_map(move, obj)


def load(f, map_location=None, *args, **kwargs):
    if not _maps_to_rgpu(map_location):
        return _torch_load(f, map_location, *args, **kwargs)
    return _to_rgpu(_torch_load(f, "cpu", *args, **kwargs))


def install():
    """torch.load and torch.serialization.load become load above."""
    load.__doc__ = (_torch_load.__doc__ or "") + "\n" + __doc__
    torch.load = load
    torch.serialization.load = load
