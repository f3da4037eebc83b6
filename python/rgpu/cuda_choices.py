"""Operators whose CUDA kernel PyTorch chooses above the backend.

A few composite operators pick their kernel by asking whether the input is
a CUDA tensor: batch_norm runs cuDNN's batch normalisation on CUDA tensors
and PyTorch's own kernel (native_batch_norm) on every other device.  An
rgpu tensor is not a CUDA tensor, so such an operator would reach the
server already decomposed for "another device", and a model would run
other kernels than it runs on CUDA: the same arithmetic summed in another
order, losses that drift apart over a training run.

Here such an operator gets a kernel of its own for rgpu tensors, at the
level where PyTorch decomposes it (AutogradPrivateUse1: the autograd graph
then records what CUDA's would).  The kernel makes CUDA's choice from what
the op server said of itself at hello (its device; its cuDNN) and the
client's arguments, and calls the operator CUDA would call; where CUDA
would not choose otherwise, or the server is not a CUDA device, PyTorch's
own decomposition runs as before.  The rules are PyTorch's;
tests/rgpu_device/test_cuda_choices.py compares them with the choices of
this client's PyTorch on fake CUDA tensors, so that a PyTorch whose rule
moved fails a test rather than a model.

Results laid out otherwise: cuDNN's convolutions give channels-last
results for channels-last arguments, where the meta device, which gives
rgpu its results' layouts, gives contiguous ones; the server would then
copy each result into the layout the client expects.  RESULT_LAYOUTS lays
the meta results out as CUDA's (a mistaken guess costs that copy, never
a wrong value).

Not covered (docs/rgpu-device.md, "Kernels CUDA chooses"):
scaled_dot_product_attention chooses its fused kernels through a dispatch
stub that only C++ can fill for a new device, so on rgpu it runs as its
mathematical decomposition (the same results within rounding, more
memory for long sequences); LSTM and GRU run PyTorch's fused cells where
CUDA runs cuDNN's RNN.
"""
import torch
from torch._prims_common import suggest_memory_format

from . import session as _session

aten = torch.ops.aten

# The largest batch cuDNN's spatial batch normalisation takes, training and
# evaluating, as PyTorch holds it to.
_CUDNN_BN_MAX_BATCH_TRAINING = 880801
_CUDNN_BN_MAX_BATCH_EVAL = 65535
_INT32_MAX = (1 << 31) - 1


def server_has_cudnn():
    """Whether the op server runs CUDA with cuDNN (its hello said so)."""
    return bool(_session.get().info.get("cudnn"))


def cudnn_batch_norm_fits(input, weight, bias, running_mean, running_var, training, eps,
                          cudnn_enabled):
    """Whether PyTorch would run batch_norm through cuDNN, were these
    arguments CUDA tensors (cudnn_enabled: torch.backends.cudnn.enabled)."""
    if not cudnn_enabled or weight is None or bias is None:
        return False
    if running_mean is None or running_var is None:
        if running_mean is not None or running_var is not None or not training:
            return False
    if input.dim() < 3 or input.numel() == 0 or input.numel() >= _INT32_MAX:
        return False
    if torch.bfloat16 in (input.dtype, weight.dtype):
        return False
    if input.dtype == torch.float16 and weight.dtype != torch.float32:
        return False
    limit = _CUDNN_BN_MAX_BATCH_TRAINING if training else _CUDNN_BN_MAX_BATCH_EVAL
    # cuDNN's smallest epsilon is 0 since cuDNN 8.
    return input.size(0) <= limit and eps >= 0


def _features_match(input, *tensors):
    """Each defined per-channel tensor has the input's channel count (else
    PyTorch's decomposition raises its own error)."""
    c = input.size(1) if input.dim() >= 2 else -1
    return all(t is None or t.numel() == c for t in tensors)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    # PyTorch decides by torch.backends.cudnn.enabled, whatever the
    # cudnn_enabled argument says.
    if (cudnn_batch_norm_fits(input, weight, bias, running_mean, running_var, training, eps,
                              torch.backends.cudnn.enabled)
            and _features_match(input, weight, bias, running_mean, running_var)
            and server_has_cudnn()):
        def contiguous(t):
            return None if t is None else t.contiguous()
        return aten.cudnn_batch_norm(
            input.contiguous(memory_format=suggest_memory_format(input)), contiguous(weight),
            contiguous(bias), contiguous(running_mean), contiguous(running_var), training,
            momentum, eps)[0]
    return aten.batch_norm.default.decompose(input, weight, bias, running_mean, running_var,
                                             training, momentum, eps, cudnn_enabled)


# ---- result layouts: what CUDA's kernels lay out otherwise than the meta device

def _cudnn_conv_memory_format(input, weight):
    """The memory format of cuDNN's convolution results for these arguments
    (channels-last when either is), or None where the meta device's
    contiguous results are CUDA's too."""
    if not torch.backends.cudnn.enabled or torch.float64 in (input.dtype, weight.dtype) \
            or not server_has_cudnn():
        return None
    formats = (suggest_memory_format(input), suggest_memory_format(weight))
    if weight.dim() == 4 and torch.channels_last in formats:
        return torch.channels_last
    if weight.dim() == 5 and torch.channels_last_3d in formats:
        return torch.channels_last_3d
    return None


def _laid_out(t, memory_format):
    if t is None or memory_format is None or t.is_contiguous(memory_format=memory_format):
        return t
    return t.contiguous(memory_format=memory_format)


def convolution_layout(args, out):
    """convolution(input, weight, ...) on meta tensors gave out."""
    return _laid_out(out, _cudnn_conv_memory_format(args[0], args[1]))


def convolution_backward_layout(args, outs):
    """convolution_backward(grad_output, input, weight, ...) gave outs:
    the input's and the weight's gradients take the forward's format."""
    grad_input, grad_weight, grad_bias = outs
    memory_format = _cudnn_conv_memory_format(args[1], args[2])
    return (_laid_out(grad_input, memory_format), _laid_out(grad_weight, memory_format),
            grad_bias)


# operator -> fix(meta arguments, meta results) -> meta results laid out as
# CUDA's kernels lay them out (tensor.py's _plan applies it).
RESULT_LAYOUTS = {
    aten.convolution.default: convolution_layout,
    aten.convolution_backward.default: convolution_backward_layout,
}


def install(lib):
    """Registers the kernels above in lib (a torch.library.Library of aten,
    IMPL) for rgpu tensors."""
    lib.impl("batch_norm", batch_norm, "AutogradPrivateUse1")
