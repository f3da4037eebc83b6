"""rgpu-opserver on PyTorch's CPU device that says it has cuDNN, for
test_cuda_choices.py.

The client sends cuDNN's batch normalisation (aten::cudnn_batch_norm and
its backward) where CUDA would run it, which only a CUDA server can run.
To test the client's side on a machine without a GPU, this module gives
those two operators CPU kernels made of PyTorch's own batch normalisation
(what native_batch_norm computes, with cuDNN's result layout: empty saved
statistics in evaluation mode, and a reserve of 16 bytes which the
backward checks it gets back, where the meta kernel says the reserve is
empty), counts their calls, and says in its hello that it has cuDNN.

    ["cudnn_calls"]   -> {operator name: calls so far in this session}

Test code only: the op server itself has no such request."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import rgpu_opserver  # noqa: E402

_calls = {}
_lib = None
RESERVE_BYTES = 16


def _count(name):
    _calls[name] = _calls.get(name, 0) + 1


def _cudnn_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    import torch
    _count("cudnn_batch_norm")
    out, mean, invstd = torch.ops.aten.native_batch_norm(
        input, weight, bias, running_mean, running_var, training, momentum, eps)
    if not training:
        mean, invstd = mean.new_empty(0), invstd.new_empty(0)
    # A reserve of its own, as cuDNN may make (the meta kernel says empty):
    # the backward must get this one back.
    return out, mean, invstd, torch.arange(RESERVE_BYTES, dtype=torch.uint8)


def _cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean,
                               save_var, eps, reserve):
    import torch
    _count("cudnn_batch_norm_backward")
    if not torch.equal(reserve, torch.arange(RESERVE_BYTES, dtype=torch.uint8)):
        raise RuntimeError(f"cudnn_batch_norm_backward: not the forward's reserve ({reserve})")
    return torch.ops.aten.native_batch_norm_backward(
        grad_output, input, weight, running_mean, running_var, save_mean, save_var, True, eps,
        [True, True, True])


def _register_kernels():
    global _lib
    import torch
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("cudnn_batch_norm", _cudnn_batch_norm, "CPU")
    _lib.impl("cudnn_batch_norm_backward", _cudnn_batch_norm_backward, "CPU")


def op_cudnn_calls(self):
    return dict(_calls)


_check_environment = rgpu_opserver.check_environment


def check_environment(device):
    torch, info = _check_environment(device)
    _register_kernels()
    info["cudnn"] = 91900
    return torch, info


rgpu_opserver.check_environment = check_environment
rgpu_opserver.Executor.op_cudnn_calls = op_cudnn_calls

if __name__ == "__main__":
    sys.exit(rgpu_opserver.main())
