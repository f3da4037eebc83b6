"""rgpu tensors: PyTorch tensors of device rgpu whose data lives on the op
server.

An RgpuTensor is a wrapper subclass: PyTorch sees its sizes, strides,
storage offset, dtype and device (rgpu:0), and every ATen operation on it
reaches __torch_dispatch__.  There the operation runs first on PyTorch's
meta device, on meta tensors laid out exactly like the arguments: that gives
the results' shapes, dtypes and strides, and which results alias which
arguments, without the server.  Then the operation is queued for the server
and the results are returned at once.  Only an operation the meta device
cannot describe (a data-dependent shape such as nonzero, a value such as
item) waits for the server's answer.

The server keeps storages, not tensors: each result that owns new memory
gets a storage id (chosen here, so nothing waits for one), and every tensor
argument travels as (storage id, dtype, sizes, strides, offset).  A view is
a new RgpuTensor on the same Storage, so in-place operations on views change
their bases exactly as on any device.  A Storage tells the server to free
its memory when the last tensor using it goes.
"""
import copy
import ctypes

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from . import session as _session
from .session import RgpuError

DEVICE = torch.device("rgpu", 0)
META = torch.device("meta")
aten = torch.ops.aten

# Operations the meta device cannot compute but whose results the server can:
# they wait for the server's answer.  (Any operation whose meta kernel raises
# NotImplementedError takes the same road.)
# _linalg_check_errors reads a result, as on CUDA, so that a failed
# factorisation raises at its call.
_NEEDS_DATA = {aten._local_scalar_dense.default, aten.equal.default, aten.is_nonzero.default,
               aten._linalg_check_errors.default}

# Operations that change a tensor's own sizes or storage: a wrapper's sizes
# are fixed, so these are refused by name rather than computed wrongly.
_METADATA_MUTATORS = ("set_", "resize_", "resize_as_", "as_strided_", "_resize_output_",
                      "swap_", "squeeze_", "unsqueeze_", "t_", "transpose_")


class Storage:
    """One block of server memory; meta is its twin on the meta device, which
    the meta kernels see (so views of one Storage share one meta storage)."""

    __slots__ = ("session", "sid", "meta")

    def __init__(self, session, sid, meta):
        self.session = session
        self.sid = sid
        self.meta = meta

    def __del__(self):
        s = getattr(self, "session", None)
        if s is not None:
            s.enqueue_free(self.sid)


class RgpuTensor(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, storage, like):
        """A tensor on storage laid out like `like` (a meta tensor)."""
        return cls._wrap(storage, like.size(), like.stride(), like.storage_offset(), like.dtype)

    def __init__(self, storage, like):
        pass

    @classmethod
    def _wrap(cls, storage, size, stride, offset, dtype):
        r = torch.Tensor._make_wrapper_subclass(cls, size, strides=stride, storage_offset=offset,
                                                dtype=dtype, device=DEVICE)
        r._rs = storage
        return r

    def _meta_view(self):
        return torch.empty(0, dtype=self.dtype, device=META).set_(
            self._rs.meta, self.storage_offset(), self.size(), self.stride())

    def _spec(self):
        rs = self._rs
        s = rs.session
        if s.dead:
            raise RgpuError(f"rgpu: this tensor belongs to an op server session that has "
                            f"ended ({s.dead})")
        return {"T": [rs.sid, _dtype_name(self.dtype), list(self.size()), list(self.stride()),
                      self.storage_offset()]}

    def __repr__(self, *, tensor_contents=None):
        # The values as the CPU prints them (one read), then what is rgpu's.
        text = repr(self.detach().to("cpu"))
        extra = f", device='{DEVICE}'"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return text[:-1] + extra + ")"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        # A copy of the data on the server; the Python attributes (the
        # parameter flag among them) copied, the storage record not.
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        if self.requires_grad:
            new.requires_grad_(True)
        for key, value in self.__dict__.items():
            if key != "_rs":
                setattr(new, key, copy.deepcopy(value, memo))
        memo[id(self)] = new
        return new

    def tolist(self):
        return self.detach().to("cpu").tolist()

    def __reduce_ex__(self, protocol):
        # torch.save goes through the CPU: the file holds a CPU tensor and the
        # rule to move it back to rgpu when loaded.
        return (_rebuild_on_rgpu, (self.detach().to("cpu"), self.requires_grad))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs or {})


def _rebuild_on_rgpu(cpu_tensor, requires_grad):
    t = cpu_tensor.to(DEVICE)
    if requires_grad:
        t.requires_grad_(True)
    return t


torch.serialization.add_safe_globals([_rebuild_on_rgpu])


def _dtype_name(dtype):
    return str(dtype).split(".", 1)[1]


# ---- moving bytes -----------------------------------------------------------------

def _cpu_bytes(t):
    """The bytes of a CPU tensor's elements in row-major order."""
    t = t.contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def _write_storage(session, sid, byte_offset, data):
    for start in range(0, len(data), _wire_chunk()):
        piece = data[start:start + _wire_chunk()]
        session.enqueue(["write", sid, byte_offset + start, piece], len(piece))


def _wire_chunk():
    from rgpu_wire import CHUNK
    return CHUNK


def new_storage(session, nbytes):
    sid = session.new_sid()
    session.enqueue(["new", sid, nbytes])
    return Storage(session, sid, torch.UntypedStorage(nbytes, device=META))


def upload(cpu_tensor):
    """A new contiguous RgpuTensor holding cpu_tensor's values."""
    s = _session.get()
    t = cpu_tensor.contiguous()
    rs = new_storage(s, t.numel() * t.element_size())
    _write_storage(s, rs.sid, 0, _cpu_bytes(t))
    like = torch.empty_like(t, device=META)
    return RgpuTensor(rs, like)


def download(t):
    """A contiguous CPU tensor with t's values; waits for the server."""
    if not (t.is_contiguous() and t.storage_offset() >= 0):
        t = dispatch(aten.clone.default, (t,), {"memory_format": torch.contiguous_format})
    s = t._rs.session
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return torch.empty(t.size(), dtype=t.dtype)
    start = t.storage_offset() * t.element_size()
    sid = t._spec()["T"][0]
    buf = bytearray(nbytes)
    for done in range(0, nbytes, _wire_chunk()):
        n = min(_wire_chunk(), nbytes - done)
        data = s.request(["read", sid, start + done, n])
        if not isinstance(data, bytes) or len(data) != n:
            raise RgpuError("rgpu: the op server sent a read of the wrong length")
        buf[done:done + n] = data
    return torch.frombuffer(buf, dtype=t.dtype).view(t.size())


def _copy_to_cpu(t, like=None, dtype=None):
    out = download(t)
    if like is not None:
        # .cpu() keeps a dense tensor's layout, as on CUDA.
        target = torch.empty_like(like, device="cpu", dtype=dtype or t.dtype)
        target.copy_(out)
        return target
    return out.to(dtype) if dtype is not None else out


# ---- encoding arguments -------------------------------------------------------------

class _Encoder:
    """Turns an operation's arguments into wire values; CPU tensors among
    them are uploaded first (temporaries, freed with the call)."""

    def __init__(self):
        self.temps = []

    def __call__(self, x):
        if isinstance(x, RgpuTensor):
            return x._spec()
        if isinstance(x, torch.Tensor):
            if x.device.type != "cpu":
                raise RgpuError(f"rgpu: cannot mix a {x.device.type} tensor with rgpu tensors")
            if x.dim() == 0 and not x.is_complex():
                return {"C": [_dtype_name(x.dtype), x.item()]}
            tmp = upload(x)
            self.temps.append(tmp)
            return tmp._spec()
        if isinstance(x, torch.device):
            if x.type == "rgpu":
                return {"D": "rgpu"}
            if x.type in ("cpu", "meta"):
                return {"D": x.type}
            raise RgpuError(f"rgpu: device {x} cannot be used with rgpu tensors")
        if isinstance(x, torch.dtype):
            return {"dt": _dtype_name(x)}
        if isinstance(x, torch.memory_format):
            return {"mf": str(x).split(".", 1)[1]}
        if isinstance(x, torch.layout):
            return {"ly": str(x).split(".", 1)[1]}
        if isinstance(x, complex):
            return {"z": [x.real, x.imag]}
        if isinstance(x, (list, tuple)):
            return [self(v) for v in x]
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, torch.Generator):
            raise RgpuError("rgpu: explicit generators are not supported on rgpu tensors; "
                            "seed with torch.manual_seed")
        raise RgpuError(f"rgpu: cannot send an argument of type {type(x).__name__}")


def _op_name(func):
    return func.name() if hasattr(func, "name") else str(func)


# ---- the dispatcher -----------------------------------------------------------------

def _session_of(args, kwargs):
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, RgpuTensor):
            return x._rs.session
    return _session.get()


class _Uncacheable(Exception):
    pass


_SCALARS = (bool, int, float, complex, str, type(None), torch.dtype, torch.device,
            torch.memory_format, torch.layout)


def _collect(args, kwargs):
    """The RgpuTensors among the arguments, their distinct Storages, and a
    key that identifies everything the meta kernels look at (None when an
    argument cannot be part of a key)."""
    tensors, storages, where = [], [], {}

    def walk(x):
        if isinstance(x, RgpuTensor):
            rs = x._rs
            si = where.get(id(rs))
            if si is None:
                si = where[id(rs)] = len(storages)
                storages.append(rs)
            tensors.append(x)
            return (x.dtype, tuple(x.size()), x.stride(), x.storage_offset(), si,
                    rs.meta.nbytes())
        if isinstance(x, (list, tuple)):
            return (type(x), tuple(walk(v) for v in x))
        if isinstance(x, torch.Tensor):
            return ("cpu", x.dtype, tuple(x.size()), x.stride(), x.device)
        if isinstance(x, _SCALARS):
            return (type(x), x)             # the type too: 1, 1.0 and True are equal keys
        raise _Uncacheable

    try:
        key = (tuple(walk(a) for a in args),
               tuple((k, walk(v)) for k, v in kwargs.items()), torch.get_default_dtype())
    except _Uncacheable:
        key = None
        tensors.clear()
        storages.clear()
        where.clear()
        for x in tree_flatten((args, kwargs))[0]:
            if isinstance(x, RgpuTensor):
                if id(x._rs) not in where:
                    where[id(x._rs)] = len(storages)
                    storages.append(x._rs)
                tensors.append(x)
    return key, tensors, storages


# Plans: what an operator's results are, from the meta device, by the key of
# its arguments.  A training loop repeats the same operators on tensors
# laid out the same way, so the meta kernels run once per distinct call.
_plans = {}
_PLANS_MAX = 1 << 16
_WAIT = object()


def dispatch(func, args, kwargs):
    special = _SPECIAL.get(func)
    if special is not None:
        result = special(func, args, kwargs)
        if result is not NotImplemented:
            return result
    name = _op_name(func)
    if name.split("::")[-1].split(".")[0] in _METADATA_MUTATORS:
        raise NotImplementedError(f"rgpu: {name} changes a tensor's sizes or storage in "
                                  "place, which rgpu tensors do not support")
    session = _session_of(args, kwargs)
    if func in _NEEDS_DATA:
        return _call_waiting(session, func, args, kwargs)
    key, tensors, storages = _collect(args, kwargs)
    plan = _plans.get((func, key)) if key is not None else None
    if plan is None:
        plan = _plan(func, name, args, kwargs, tensors, storages)
        if plan is _WAIT:
            return _call_waiting(session, func, args, kwargs)
        if key is not None and not any(d[0] == "value" and isinstance(d[1], torch.Tensor)
                                       for d in plan[1]):
            if len(_plans) >= _PLANS_MAX:
                _plans.clear()
            _plans[(func, key)] = plan
    return _execute(plan, session, name, args, kwargs, tensors, storages)


def _plan(func, name, args, kwargs, tensors, storages):
    """Runs func on the meta device; describes each result as a value, an
    argument itself (in place, out=), a view of an argument's storage, or
    new memory."""
    by_meta_arg = {}            # id(meta argument) -> index in tensors
    by_meta_storage = {}        # meta storage -> index in storages
    index_of = {id(t): i for i, t in reversed(list(enumerate(tensors)))}
    storage_index = {id(rs): i for i, rs in enumerate(storages)}

    def to_meta(x):
        if isinstance(x, RgpuTensor):
            m = x._meta_view()
            by_meta_arg[id(m)] = index_of[id(x)]
            by_meta_storage[m.untyped_storage()._cdata] = storage_index[id(x._rs)]
            return m
        if isinstance(x, torch.device) and x.type == "rgpu":
            return META
        return x

    margs, mkwargs = tree_map(to_meta, (args, kwargs))
    try:
        mout = func(*margs, **mkwargs)
    except NotImplementedError:
        return _WAIT
    except RuntimeError as e:
        if "data-dependent" in str(e) or "DynamicOutputShape" in type(e).__name__ \
                or "DataDependent" in type(e).__name__:
            return _WAIT
        raise

    flat, spec = tree_flatten(mout)
    results, fresh = [], {}
    for o in flat:
        if not isinstance(o, torch.Tensor) or o.device.type != "meta":
            results.append(("value", o))
            continue
        layout = (tuple(o.size()), o.stride(), o.storage_offset(), o.dtype)
        same = by_meta_arg.get(id(o))
        if same is not None:          # an in-place or out= result: the argument itself
            t = tensors[same]
            if layout[:3] != (tuple(t.size()), t.stride(), t.storage_offset()):
                raise NotImplementedError(f"rgpu: {name} would resize an rgpu tensor in place, "
                                          "which rgpu tensors do not support")
            results.append(("same", same))
            continue
        key = o.untyped_storage()._cdata
        if key in by_meta_storage:    # a view of an argument's storage
            results.append(("view", by_meta_storage[key]) + layout)
        else:                         # new memory: the server allocates it
            group = fresh.setdefault(key, len(fresh))
            results.append(("new", group) + layout + (o.untyped_storage().nbytes(),))
    # A view needs nothing from the server; anything else goes there (a
    # call without tensor results may be a check that raises).
    send = bool(fresh) or func._schema.is_mutable or \
        not any(r[0] != "value" for r in results)
    return spec, results, send


def _execute(plan, session, name, args, kwargs, tensors, storages):
    spec, descriptions, send = plan
    results, outs, fresh = [], [], {}
    for d in descriptions:
        kind = d[0]
        if kind == "value":
            results.append(d[1])
            outs.append(None)
        elif kind == "same":
            results.append(tensors[d[1]])
            outs.append(None)
        elif kind == "view":
            results.append(RgpuTensor._wrap(storages[d[1]], *d[2:]))
            outs.append(None)
        else:
            _, group, size, stride, offset, dtype, nbytes = d
            rs = fresh.get(group)
            if rs is None:
                rs = fresh[group] = Storage(session, session.new_sid(),
                                            torch.UntypedStorage(nbytes, device=META))
                outs.append([rs.sid, _dtype_name(dtype), list(size), list(stride), offset,
                             nbytes])
            else:
                outs.append(None)
            results.append(RgpuTensor._wrap(rs, size, stride, offset, dtype))
    if send:
        enc = _Encoder()
        wargs, wkwargs = enc(list(args)), {k: enc(v) for k, v in kwargs.items()}
        session.enqueue(["call", name, wargs, wkwargs, outs])
        del enc
    return tree_unflatten(results, spec)


def _call_waiting(session, func, args, kwargs):
    """Runs func on the server and waits for its results' description."""
    name = _op_name(func)
    enc = _Encoder()
    wargs, wkwargs = enc(list(args)), {k: enc(v) for k, v in kwargs.items()}
    by_sid = {}
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, RgpuTensor):
            by_sid[x._rs.sid] = x._rs
    result = session.request(["call", name, wargs, wkwargs, "wait"])
    del enc
    out = _decode_result(session, result, by_sid)
    if len(func._schema.returns) > 1 and isinstance(out, list):
        out = tuple(out)
    return out


def _decode_result(session, value, by_sid):
    if isinstance(value, list):
        return [_decode_result(session, v, by_sid) for v in value]
    if isinstance(value, dict) and "R" in value:
        kind, sid, dtype, size, stride, offset, nbytes = value["R"]
        dt = getattr(torch, dtype)
        if kind == "alias":
            rs = by_sid.get(sid)
            if rs is None:
                raise RgpuError("rgpu: the op server answered with an unknown alias")
        else:
            rs = Storage(session, sid, torch.UntypedStorage(nbytes, device=META))
        like = torch.empty(0, dtype=dt, device=META).set_(rs.meta, offset, size, stride)
        return RgpuTensor(rs, like)
    if isinstance(value, dict) and "z" in value:
        return complex(*value["z"])
    return value


# ---- operations that cross devices ---------------------------------------------------

def _to_copy(func, args, kwargs):
    x = args[0]
    device = kwargs.get("device")
    if device is None or torch.device(device).type == "rgpu":
        return NotImplemented       # stays on rgpu: an ordinary operation
    if torch.device(device).type != "cpu":
        raise RgpuError(f"rgpu: cannot copy an rgpu tensor to {device} directly; go through "
                        "the CPU")
    out = _copy_to_cpu(x, like=x._meta_view(), dtype=kwargs.get("dtype"))
    if kwargs.get("pin_memory"):
        out = out.pin_memory()
    return out


def _copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    if isinstance(dst, RgpuTensor) and isinstance(src, RgpuTensor):
        return NotImplemented
    if isinstance(src, RgpuTensor):                 # rgpu -> cpu
        dst.copy_(download(src))
        return dst
    if src.device.type != "cpu":
        raise RgpuError(f"rgpu: cannot copy from {src.device} to rgpu directly")
    if (src.dtype == dst.dtype and src.size() == dst.size() and dst.is_contiguous()
            and src.numel() > 0):
        # The common case, tensor.to("rgpu"): the bytes go straight into the
        # destination's storage, one message.
        session = dst._rs.session
        dst._spec()
        _write_storage(session, dst._rs.sid, dst.storage_offset() * dst.element_size(),
                       _cpu_bytes(src))
        return dst
    return NotImplemented       # an ordinary copy_, with src uploaded first


_SPECIAL = {
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
}
