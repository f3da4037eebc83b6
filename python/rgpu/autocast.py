"""torch.autocast("rgpu", dtype=...): CUDA's autocast rules, applied on the
client.

PyTorch ships autocast kernels for CUDA but none for a Python backend, so
this module registers a handler for the AutocastPrivateUse1 key on each
operator CUDA's autocast handles, and lets every other operator fall
through.  (A Python fallback cannot serve this key: PyTorch routes calls
with Python tensor subclasses among their arguments to per-operator
registrations only.)  It follows CUDA's policy (the same operator lists): matrix products and
convolutions run in the autocast dtype, reductions, losses and
normalisations in float32, multi-input operations in their widest type.
Autocast is only ever casts in front of an operator, so the server, running
the cast operators and then the operator, computes what CUDA's autocast
computes.
"""
import torch

from .tensor import RgpuTensor

_KEY = torch._C.DispatchKey.AutocastPrivateUse1

LOWER = {
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "_convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
    "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "linalg_vecdot",
}
FP32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa",
}
FP32_SET_DTYPE = {"prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
                  "sum"}
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler",
           "index_put", "scatter_add", "tensordot", "cat", "stack"}
BANNED = {"binary_cross_entropy"}


def _eligible(x):
    return isinstance(x, RgpuTensor) and x.is_floating_point() and x.dtype != torch.float64


def _cast(value, dtype):
    if _eligible(value) and value.dtype != dtype:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _widest(values):
    widest = None
    for v in values:
        items = v if isinstance(v, (list, tuple)) else [v]
        for x in items:
            if _eligible(x):
                widest = x.dtype if widest is None else torch.promote_types(widest, x.dtype)
    return widest


def _autocast(op, name, args, kwargs):
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
        if name in BANNED:
            raise RuntimeError(f"{op.name()} is unsafe to autocast (as on CUDA): use "
                               "binary_cross_entropy_with_logits")
        if name in LOWER:
            dtype = torch.get_autocast_dtype("rgpu")
            args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
        elif name in FP32:
            args = _cast(args, torch.float32)
            kwargs = {k: _cast(v, torch.float32) for k, v in kwargs.items()}
        elif name in FP32_SET_DTYPE:
            has_dtype = any(a.name == "dtype" for a in op._schema.arguments)
            if has_dtype and kwargs.get("dtype") is None and args and _eligible(args[0]):
                kwargs = dict(kwargs, dtype=torch.float32)
        elif name in PROMOTE:
            dtype = _widest(list(args) + list(kwargs.values()))
            if dtype is not None:
                args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
        return op(*args, **kwargs)


def _handler(op, name):
    return lambda *args, **kwargs: _autocast(op, name, args, kwargs)


_lib = torch.library.Library("aten", "IMPL")
for _name in sorted(LOWER | FP32 | FP32_SET_DTYPE | PROMOTE | BANNED):
    _packet = getattr(torch.ops.aten, _name, None)
    if _packet is None:
        continue                        # not in this PyTorch
    for _overload in _packet.overloads():
        _op = getattr(_packet, _overload)
        if any(a.is_out for a in _op._schema.arguments):
            continue                    # out= forms are not autocast on CUDA either
        _lib.impl(_name if _overload == "default" else f"{_name}.{_overload}",
                  _handler(_op, _name), "AutocastPrivateUse1")
_fallthrough = torch.library.Library("_", "IMPL")
_fallthrough.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
