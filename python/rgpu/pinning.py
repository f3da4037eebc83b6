"""Page-locked ("pinned") CPU memory when rgpu is PyTorch's accelerator.

A training loop asks for pinned batches (DataLoader(pin_memory=True),
tensor.pin_memory()) so that a local GPU can copy them by DMA.  PyTorch
pins through the accelerator's C++ hooks, which a device written in Python
cannot provide, so without help these calls fail on a machine whose
accelerator is rgpu.  For rgpu, pinning has nothing to offer: a copy to
the server reads the tensor's bytes from ordinary memory and sends them.
So a request to pin for rgpu returns what pin_memory returns, a tensor of
its own with the same contents, made by an ordinary copy; is_pinned says
False for it, truthfully.  Pinning for another device (a CUDA GPU of the
same machine) is PyTorch's own, unchanged.
"""
import torch

_PIN = torch.ops.aten._pin_memory.default
_ORIGINAL = torch._C.DispatchKey.CompositeExplicitAutograd


def _for_rgpu(device):
    if device is None:
        accelerator = torch.accelerator.current_accelerator()
        return accelerator is not None and accelerator.type == "rgpu"
    return torch.device(device).type == "rgpu"


def _pin_memory(self, device=None):
    if _for_rgpu(device):
        return self.clone()
    return _PIN._op_dk(_ORIGINAL, self, device)


def install(lib):
    """Registers the kernel above in lib (a torch.library.Library of aten,
    IMPL) for CPU tensors."""
    lib.impl("_pin_memory", _pin_memory, "CPU")
