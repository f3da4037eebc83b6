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

An operator called again on arguments laid out as before (a training loop's
every step) costs little: the meta device's answer is kept (a plan, keyed by
the operator and its arguments' layouts), and the server keeps the plan's
call too, so that the call travels as the plan's number and its storage ids
(docs/rgpu-device.md, "Plans").
"""
import copy
import ctypes
import itertools

import torch
import rgpu_wire as wire
from rgpu_wire import CHUNK
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from . import session as _session
from .cuda_choices import RESULT_LAYOUTS as _RESULT_LAYOUTS
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

# Operations that change a tensor's own size or storage: refused by name
# rather than computed wrongly (a tensor's storage on the server has a
# fixed size).
_METADATA_MUTATORS = ("set_", "resize_", "resize_as_", "_resize_output_", "swap_")
# Operations that lay a tensor over its storage anew in place (nn.RNN's
# batch_first output is transposed so): only the client's wrapper changes.
_VIEW_MUTATORS = ("as_strided_", "detach_", "squeeze_", "unsqueeze_", "swapaxes_", "swapdims_",
                  "t_", "transpose_")


class Storage:
    """One block of server memory of nbytes; meta is its twin on the meta
    device, which the meta kernels see (so views of one Storage share one
    meta storage), made when first needed: a planned call never needs it."""

    __slots__ = ("session", "sid", "nbytes", "_meta")

    def __init__(self, session, sid, nbytes):
        self.session = session
        self.sid = sid
        self.nbytes = nbytes
        self._meta = None

    @property
    def meta(self):
        if self._meta is None:
            self._meta = torch.UntypedStorage(self.nbytes, device=META)
        return self._meta

    def __del__(self):
        s = getattr(self, "session", None)
        if s is not None:
            s.enqueue_free(self.sid)


class RgpuTensor(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl
    # Its Storage and its layout's number (_layout_id); slots, since every
    # operator's result gets them.
    __slots__ = ("_rs", "_lid")

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
        r._lid = _layout_id(dtype, size, stride, offset, storage.nbytes)
        return r

    # x.data = y (nn.Module.half() and .to(dtype) do it to parameters) gives
    # x y's sizes, strides and dtype: x then lives in y's storage too.
    @property
    def data(self):
        return torch.Tensor.data.__get__(self)

    @data.setter
    def data(self, new):
        if not isinstance(new, RgpuTensor):
            raise RgpuError("rgpu: an rgpu tensor's .data can only be another rgpu tensor")
        torch.Tensor.data.__set__(self, new)
        self._rs, self._lid = new._rs, new._lid

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
        return dispatch(func, args, kwargs or _NO_KWARGS)


def _rebuild_on_rgpu(cpu_tensor, requires_grad):
    t = cpu_tensor.to(DEVICE)
    if requires_grad:
        t.requires_grad_(True)
    return t


torch.serialization.add_safe_globals([_rebuild_on_rgpu])


def _dtype_name(dtype):
    return str(dtype).split(".", 1)[1]


# Each distinct layout (dtype, sizes, strides, offset, storage bytes) a
# tensor can have gets a number, which the tensor keeps: a plan's key holds
# its arguments' numbers instead of their sizes and strides.  Numbers are
# never reused, so a tensor numbered before the table was last emptied only
# misses a plan, never finds another layout's.
_layouts = {}
_LAYOUTS_MAX = 1 << 16
_layout_numbers = itertools.count(1)


def _layout_id(dtype, size, stride, offset, nbytes):
    key = (dtype, tuple(size), tuple(stride), offset, nbytes)
    lid = _layouts.get(key)
    if lid is None:
        if len(_layouts) >= _LAYOUTS_MAX:
            _layouts.clear()
        lid = _layouts[key] = next(_layout_numbers)
    return lid


# ---- moving bytes -----------------------------------------------------------------

def _cpu_bytes(t):
    """The bytes of a CPU tensor's elements in row-major order."""
    t = t.contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def _write_storage(session, sid, byte_offset, data):
    for start in range(0, len(data), CHUNK):
        piece = data[start:start + CHUNK]
        session.enqueue(["write", sid, byte_offset + start, piece], len(piece))


def new_storage(session, nbytes):
    sid = session.new_sid()
    session.enqueue(["new", sid, nbytes])
    return Storage(session, sid, nbytes)


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
    for done in range(0, nbytes, CHUNK):
        n = min(CHUNK, nbytes - done)
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

class _Uncacheable(Exception):
    pass


_SCALARS = (bool, int, float, complex, str, type(None), torch.dtype, torch.device,
            torch.memory_format, torch.layout)
_SLOT_SHIFT = 40        # a tensor's part of a key: its layout number | storage index << 40
_INTS = {int}
_TENSORS = {RgpuTensor}
_TAGGED = frozenset(_SCALARS)
_NO_KWARGS = {}
_NO_STORAGES = ()
_default_dtype = torch.get_default_dtype


def _collect(args, kwargs, floats=None):
    """The RgpuTensors among the arguments (each occurrence, in order), their
    distinct Storages, and a key that identifies everything the meta
    kernels look at (None when an argument cannot be part of a key).  With
    floats (a list, for an operator whose results' layout no float decides)
    the key holds only that an argument is a float, and its value goes into
    floats: an optimiser's step sizes change every step."""
    tensors, index, parts = [], {}, []
    try:
        for a in args:                  # _key_of, its commonest cases inline
            kind = type(a)
            if kind is RgpuTensor:
                rs = a._rs
                si = index.get(rs)
                if si is None:
                    si = index[rs] = len(index)
                tensors.append(a)
                parts.append(a._lid | si << _SLOT_SHIFT)
            elif kind is int:
                parts.append(a)
            else:
                parts.append(_key_of(a, tensors, index, floats))
        key = tuple(parts)
        if kwargs:
            key = (key, tuple([(k, _key_of(v, tensors, index, floats))
                               for k, v in kwargs.items()]))
        key = (key, _default_dtype())
    except _Uncacheable:
        key = None
        tensors.clear()
        index.clear()
        for x in tree_flatten((args, kwargs))[0]:
            if isinstance(x, RgpuTensor):
                index.setdefault(x._rs, len(index))
                tensors.append(x)
    return key, tensors, list(index)


def _key_of(x, tensors, index, floats):
    """One argument's part of a plan's key (its tensors noted on the way):
    a tensor is its layout's number and which of the call's storages it
    lies in (so that a key also says which arguments share a storage), an
    int itself, any other scalar its type and value (1, 1.0 and True are
    equal keys), a list of ints their tuple.  An argument's position has one
    type in an operator's schema, so a tensor's number and an int never
    meet; only a Scalar takes an int, a float or a bool."""
    kind = type(x)
    if kind is int:
        return x
    if kind is RgpuTensor or isinstance(x, RgpuTensor):
        si = index.get(x._rs)
        if si is None:
            si = index[x._rs] = len(index)
        tensors.append(x)
        return x._lid | si << _SLOT_SHIFT
    if kind is float and floats is not None:
        floats.append(x)
        return float
    if kind in _TAGGED:
        return (kind, x)
    if kind is list or kind is tuple:
        types = set(map(type, x))
        if types == _INTS:              # sizes, dims: the commonest lists
            return tuple(x)
        if types == _TENSORS:           # a foreach operator's lists
            parts = []
            for t in x:
                rs = t._rs
                si = index.get(rs)
                if si is None:
                    si = index[rs] = len(index)
                parts.append(t._lid | si << _SLOT_SHIFT)
            tensors += x
            return (kind, tuple(parts))
        return (kind, tuple([_key_of(v, tensors, index, floats) for v in x]))
    if isinstance(x, torch.Tensor):
        return ("cpu", x.dtype, x.size(), x.stride(), x.device)
    if isinstance(x, _SCALARS):
        return (kind, x)
    raise _Uncacheable


# A plan's results, each a tuple whose first item says what it is:
_VALUE, _SAME, _VIEW, _NEW = range(4)
#   (_VALUE, value)                         a value, not a tensor
#   (_SAME, i)                              the i-th tensor argument itself (in place, out=)
#   (_VIEW, si, sizes, strides, offset, dtype, layout number, contiguous)
#                                           a view of the si-th argument storage
#   (_NEW, g, ...)                          the same, in new storage group g


class _Plan:
    """What an operator's call gives, from the meta device, for arguments
    laid out as its key says: its results (above), the bytes of each new
    storage group (groups), whether the server must hear of the call (a
    pure view needs nothing from it), and, once made, the call's template:
    the call with its storage ids (and floats the key left out) as numbered
    slots, which the server keeps as a plan of its own (session.run_plan)."""

    __slots__ = ("spec", "results", "send", "single", "groups", "outs", "template", "view")

    def __init__(self, spec, results, groups, send):
        self.spec, self.results, self.groups, self.send = spec, results, groups, send
        self.single = spec.is_leaf()
        # A call that only views an argument (view, t, transpose, detach,
        # expand: most calls of a training step): its one result.
        self.view = results[0] if self.single and not send and results[0][0] == _VIEW else None
        # The wire's description of each result: (group, dtype, sizes,
        # strides, offset, nbytes) for the first result of a new group, else None.
        self.outs, seen = [], set()
        for d in results:
            if d[0] == _NEW and d[1] not in seen:
                seen.add(d[1])
                self.outs.append((d[1], _dtype_name(d[5]), list(d[2]), list(d[3]), d[4],
                                  groups[d[1]]))
            else:
                self.outs.append(None)
        self.template = None            # None: not made yet; False: the call cannot have one


# Plans are kept by operator (_Operator.plans) and key.  A training loop
# repeats the same operators on tensors laid out the same way, so the meta
# kernels run once per distinct call.  At most _PLANS_MAX in all.
_plans_kept = 0
_PLANS_MAX = 1 << 16
_WAIT = object()


def _keep_plan(op, key, plan):
    global _plans_kept
    if _plans_kept >= _PLANS_MAX:
        for other in _operators.values():
            other.plans.clear()
        _plans_kept = 0
    op.plans[key] = plan
    _plans_kept += 1


def _all_plans():
    """(operator name, plan) for every plan kept (for tests)."""
    return [(op.name, plan) for op in _operators.values() for plan in op.plans.values()]


class _Operator:
    """What the dispatcher needs to know of an operator, found once (its
    object's hash is Python code: operators are looked up by id), and its
    plans by key."""

    __slots__ = ("func", "name", "mutator", "special", "needs_data", "unusual", "floats_free",
                 "plans")

    def __init__(self, func):
        self.func = func                # kept, so that its id stays its own
        self.name = _op_name(func)
        base = self.name.split("::")[-1].split(".")[0]
        self.mutator = base in _METADATA_MUTATORS
        self.special = _SPECIAL.get(func) or (_view_in_place if base in _VIEW_MUTATORS else None)
        self.needs_data = func in _NEEDS_DATA
        self.unusual = self.mutator or self.special is not None or self.needs_data
        self.plans = {}
        # Operators whose results are laid out by their tensors and the
        # scalars' types alone, never by a float's value: PyTorch's
        # pointwise ones (mul, add, addcdiv_, lerp_, where...) and the
        # foreach ones, which apply such an operator to lists of tensors.
        self.floats_free = (torch.Tag.pointwise in getattr(func, "tags", ())
                            or self.name.startswith("aten::_foreach_"))


_operators = {}                 # id(operator) -> _Operator


def _operator(func):
    op = _operators.get(id(func))
    if op is None:
        op = _operators[id(func)] = _Operator(func)
    return op


def dispatch(func, args, kwargs):
    op = _operators.get(id(func)) or _operator(func)
    if op.unusual:
        if op.special is not None:
            result = op.special(func, args, kwargs)
            if result is not NotImplemented:
                return result
        if op.mutator:
            raise NotImplementedError(f"rgpu: {op.name} changes a tensor's sizes or storage "
                                      "in place, which rgpu tensors do not support")
    floats = [] if op.floats_free else None
    # _collect, its commonest cases inline: every operator of every step
    # comes here.
    tensors, index, parts = [], {}, []
    try:
        for a in args:
            kind = type(a)
            if kind is RgpuTensor:
                rs = a._rs
                si = index.get(rs)
                if si is None:
                    si = index[rs] = len(index)
                tensors.append(a)
                parts.append(a._lid | si << _SLOT_SHIFT)
            elif kind is int:
                parts.append(a)
            else:
                parts.append(_key_of(a, tensors, index, floats))
        key = tuple(parts)
        if kwargs:
            key = (key, tuple([(k, _key_of(v, tensors, index, floats))
                               for k, v in kwargs.items()]))
        key = (key, _default_dtype())
        plan = op.plans.get(key)
    except _Uncacheable:
        key, tensors, storages = _collect(args, kwargs, floats)
        plan = None
    else:
        storages = list(index)
    if plan is not None and plan.view is not None:
        # Only a view of an argument: its wrapper (_result, inline).
        d = plan.view
        rs = storages[d[1]]
        if rs.session.dead:
            _ended(rs.session)
        if d[7]:
            r = _make_wrapper(RgpuTensor, d[2], dtype=d[5], device=DEVICE)
        else:
            r = _make_wrapper(RgpuTensor, d[2], strides=d[3], storage_offset=d[4], dtype=d[5],
                              device=DEVICE)
        r._rs = rs
        r._lid = d[6]
        return r
    session = storages[0].session if storages else _session.get()
    if op.needs_data:
        return _call_waiting(session, func, args, kwargs)
    if plan is None:
        plan = _plan(func, op.name, args, kwargs, tensors, storages)
        if plan is _WAIT:
            return _call_waiting(session, func, args, kwargs)
        if key is not None and not any(d[0] == _VALUE and isinstance(d[1], torch.Tensor)
                                       for d in plan.results):
            _keep_plan(op, key, plan)
        else:
            key = None                # a plan used once gets no template
    return _execute(plan, session, op.name, args, kwargs, tensors, storages, floats,
                    key is not None)


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
        layout = _RESULT_LAYOUTS.get(func)
        if layout is not None:
            mout = layout(margs, mout)
    except NotImplementedError:
        return _WAIT
    except RuntimeError as e:
        # A shape that depends on the data: the meta kernel says so in
        # one of these ways (repeat_interleave with a tensor of repeats:
        # "cannot repeat_interleave a meta tensor without output_size").
        if "data-dependent" in str(e) or "a meta tensor without" in str(e) \
                or "DynamicOutputShape" in type(e).__name__ \
                or "DataDependent" in type(e).__name__:
            return _WAIT
        raise

    flat, spec = tree_flatten(mout)
    results, fresh, groups = [], {}, []
    for o in flat:
        if not isinstance(o, torch.Tensor) or o.device.type != "meta":
            results.append((_VALUE, o))
            continue
        size, stride, offset = tuple(o.size()), o.stride(), o.storage_offset()
        same = by_meta_arg.get(id(o))
        if same is not None:          # an in-place or out= result: the argument itself
            t = tensors[same]
            if (size, stride, offset) != (tuple(t.size()), t.stride(), t.storage_offset()):
                raise NotImplementedError(f"rgpu: {name} would resize an rgpu tensor in place, "
                                          "which rgpu tensors do not support")
            results.append((_SAME, same))
            continue
        key = o.untyped_storage()._cdata
        if key in by_meta_storage:    # a view of an argument's storage
            kind, index = _VIEW, by_meta_storage[key]
            nbytes = storages[index].nbytes
        else:                         # new memory: the server allocates it
            kind, index = _NEW, fresh.get(key)
            if index is None:
                index = fresh[key] = len(groups)
                groups.append(o.untyped_storage().nbytes())
            nbytes = groups[index]
        # A dense tensor at offset 0 is made without its strides (cheaper).
        plain = offset == 0 and stride == torch.empty(size, device=META).stride()
        results.append((kind, index, size, stride, offset, o.dtype,
                        _layout_id(o.dtype, size, stride, offset, nbytes), plain))
    # A view needs nothing from the server; anything else goes there (a
    # call without tensor results may be a check that raises).
    send = bool(fresh) or func._schema.is_mutable or \
        not any(r[0] != _VALUE for r in results)
    return _Plan(spec, results, groups, send)


_make_wrapper = torch.Tensor._make_wrapper_subclass


def _result(d, rs):
    """The RgpuTensor a plan's _VIEW or _NEW result d describes, on rs."""
    if d[7]:
        r = _make_wrapper(RgpuTensor, d[2], dtype=d[5], device=DEVICE)
    else:
        r = _make_wrapper(RgpuTensor, d[2], strides=d[3], storage_offset=d[4], dtype=d[5],
                          device=DEVICE)
    r._rs = rs
    r._lid = d[6]
    return r


def _ended(session):
    raise RgpuError(f"rgpu: this tensor belongs to an op server session that has ended "
                    f"({session.dead or 'another session began since'})")


def _execute(plan, session, name, args, kwargs, tensors, storages, floats, planned):
    for rs in storages:
        if rs.session is not session:
            _ended(rs.session)
    if session.dead:
        _ended(session)
    if plan.groups:
        sids = session.sids
        fresh = [Storage(session, next(sids), nbytes) for nbytes in plan.groups]
    else:
        fresh = _NO_STORAGES
    if plan.single:
        d = plan.results[0]
        kind = d[0]
        result = d[1] if kind == _VALUE else tensors[d[1]] if kind == _SAME else \
            _result(d, storages[d[1]] if kind == _VIEW else fresh[d[1]])
    else:
        results = []
        for d in plan.results:
            kind = d[0]
            if kind == _VALUE:
                results.append(d[1])
            elif kind == _SAME:
                results.append(tensors[d[1]])
            else:
                results.append(_result(d, storages[d[1]] if kind == _VIEW else fresh[d[1]]))
        result = tree_unflatten(results, plan.spec)
    if plan.send:
        try:
            if planned and plan.template is None:
                plan.template = _template(plan, name, args, kwargs, tensors, fresh, floats)
            if planned and plan.template:
                values = [t._rs.sid for t in tensors]
                if fresh:
                    values += [rs.sid for rs in fresh]
                if floats:
                    values += floats
                session.run_plan(plan, values)
            else:
                _send_plain(plan, session, name, args, kwargs, fresh)
        except BaseException:
            for rs in fresh:
                rs.session = None       # never made on the server: nothing to free
            raise
    return result


def _send_plain(plan, session, name, args, kwargs, fresh):
    """Queues the call encoded in full (CPU arguments uploaded first)."""
    enc = _Encoder()
    op = ["call", name, enc(list(args)), {k: enc(v) for k, v in kwargs.items()},
          _wire_outs(plan, [rs.sid for rs in fresh])]
    session.enqueue(op)
    del enc                 # the CPU arguments' uploads are freed after the call


def _wire_outs(plan, sids):
    return [None if o is None else [sids[o[0]]] + list(o[1:]) for o in plan.outs]


# A plan's template is the call with slots where its values go: each
# tensor argument {"S": [slot, dtype, sizes, strides, offset]} (its storage
# id is the slot's value), each float the key left out {"F": slot}, each
# new storage's id the slot in its outs entry.  A call's values are its
# tensor arguments' storage ids in order, then its new storages' ids, then
# its floats.

class _TemplateEncoder(_Encoder):
    """The arguments with slots for the tensors' storage ids and the floats
    the key left out; CPU tensors (their values are not in the plan's key)
    make a call template-less."""

    def __init__(self, first_float, floats):
        super().__init__()
        self.tensors = 0
        self.first_float = first_float
        self.floats = 0 if floats is not None else None

    def __call__(self, x):
        if isinstance(x, RgpuTensor):
            spec = x._spec()["T"]
            spec[0] = self.tensors
            self.tensors += 1
            return {"S": spec}
        if type(x) is float and self.floats is not None:
            self.floats += 1
            return {"F": self.first_float + self.floats - 1}
        if isinstance(x, torch.Tensor):
            raise _Uncacheable
        return super().__call__(x)


def _template(plan, name, args, kwargs, tensors, fresh, floats):
    """(name, args, kwargs, outs, number of values) with slots, checked
    against this call's plain encoding; False when the call cannot have one."""
    enc = _TemplateEncoder(len(tensors) + len(fresh), floats)
    try:
        targs, tkwargs = enc(list(args)), {k: enc(v) for k, v in kwargs.items()}
    except _Uncacheable:
        return False
    if enc.tensors != len(tensors) or enc.floats != (None if floats is None else len(floats)):
        return False
    touts = _wire_outs(plan, [len(tensors) + g for g in range(len(fresh))])
    template = (name, targs, tkwargs, touts, len(tensors) + len(fresh) + len(floats or ()))
    # The template with this call's values in its slots, as the server
    # fills it, must be the call's plain encoding.
    values = [t._rs.sid for t in tensors] + [rs.sid for rs in fresh] + list(floats or ())
    filled = ["call", name, _fill(targs, values), {k: _fill(v, values) for k, v in tkwargs.items()},
              [None if o is None else [values[o[0]]] + o[1:] for o in touts]]
    plain = ["call", name, _Encoder()(list(args)), {k: _Encoder()(v) for k, v in kwargs.items()},
             _wire_outs(plan, [rs.sid for rs in fresh])]
    if wire.pack(filled) != wire.pack(plain):
        return False
    return template


def _fill(x, values):
    """A template's argument with values in its slots."""
    if isinstance(x, list):
        return [_fill(v, values) for v in x]
    if isinstance(x, dict):             # a one-key tagged value
        if "S" in x:
            return {"T": [values[x["S"][0]]] + x["S"][1:]}
        if "F" in x:
            return values[x["F"]]
    return x


def _call_waiting(session, func, args, kwargs):
    """Runs func on the server and waits for its results' description."""
    name = _operator(func).name
    enc = _Encoder()
    wargs, wkwargs = enc(list(args)), {k: enc(v) for k, v in kwargs.items()}
    by_sid = {rs.sid: rs for rs in _collect(args, kwargs)[2]}
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
            rs = Storage(session, sid, nbytes)
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


def _view_in_place(func, args, kwargs):
    """transpose_, squeeze_...: the meta device lays the tensor's meta twin
    out anew, and the tensor takes that layout (its storage, and the
    server, are untouched)."""
    x = args[0]
    if not isinstance(x, RgpuTensor):
        return NotImplemented
    m = x._meta_view()
    func(m, *args[1:], **kwargs)
    size, stride, offset = tuple(m.size()), m.stride(), m.storage_offset()
    try:
        with torch._C._DisableTorchDispatch():
            aten.as_strided_.default(x, size, stride, offset)
    except RuntimeError as e:
        # as_strided_ past the elements the tensor reached when it was made.
        raise NotImplementedError(f"rgpu: {_op_name(func)} cannot lay this rgpu tensor out "
                                  f"so ({e})") from None
    x._lid = _layout_id(x.dtype, size, stride, offset, x._rs.nbytes)
    return x


def _decomposed(func, args, kwargs):
    """An operator PyTorch normally decomposes before rgpu sees it, which
    reaches rgpu whole under torch.inference_mode (no autograd key to
    decompose at): decomposed here, as anywhere else."""
    return func.decompose(*args, **kwargs)


_SPECIAL = {
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
    # tensor.to(...), .cpu(): to another device they are copies to the
    # CPU, which an ordinary operation on the meta device cannot be.
    aten.to.dtype_layout: _decomposed,
    aten.to.device: _decomposed,
    aten.to.other: _decomposed,
    aten.to.dtype: _decomposed,
}
