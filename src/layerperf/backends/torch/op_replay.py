"""An op call's recorded arguments (torch.profiler's ``record_shapes``), read back: its tensor inputs as
:class:`~layerperf.data.tensor.TensorInfo` (:func:`op_inputs`), and its work (:func:`op_cost`).

An op's FLOPs, integer operations and bytes are level 1's (:mod:`.record`): the op is replayed once on
meta tensors of its recorded shapes, strides and dtypes with its recorded scalar arguments, under the
dispatch mode that counts level 1's modules, so the profiler's ``with_flops`` (which saves every op's
arguments as it runs) is not needed. An op that cannot be rebuilt (a list of tensors, an argument the
profiler did not record, a list of tensors whose element types are not known) is costed as the ops it
called, or left unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from layerperf.backends.torch.record import Seen, add_op, counting_mode
from layerperf.cost.aten import NO_ARITHMETIC
from layerperf.data.tensor import TensorInfo

# torch.profiler names an argument's element type by its C++ name (``input_dtypes``)
_CPP_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "int": "int32", "long int": "int64",
    "long": "int64", "bool": "bool", "unsigned short": "uint16", "unsigned int": "uint32",
    "unsigned long": "uint64", "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
}
TENSOR_LIST = "TensorList"
_NOT_TENSORS = frozenset(("", "Scalar", "ScalarList", TENSOR_LIST, "GenericList", "None"))


def op_inputs(ev: Any, key: str) -> tuple[TensorInfo, ...]:
    """An op call's tensor arguments as the profiler recorded them (``record_shapes``: ``input_shapes``
    and ``input_dtypes``), named ``<row>:in<k>`` by position; scalars are left out. A list of tensors
    gives its tensors in order, ``<row>:in<k>.<j>`` (:func:`_listed`). A type name not known here is kept
    as the profiler wrote it."""
    shapes = getattr(ev, "input_shapes", None) or []
    dtypes = getattr(ev, "input_dtypes", None) or []
    out: list[TensorInfo] = []
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=False)):
        if dtype == TENSOR_LIST:
            out.extend(TensorInfo(f"{key}:in{k}.{j}", piece[0], piece[1] or "unknown")
                       for j, piece in enumerate(_listed(ev, k)))
            continue
        if dtype in _NOT_TENSORS or not isinstance(shape, list | tuple):
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        out.append(TensorInfo(f"{key}:in{k}", tuple(shape), _CPP_DTYPES.get(dtype, dtype)))
    return tuple(out)


# one tensor of a recorded list: dims, element type, strides, identity (None: not recorded)
Listed = tuple[tuple[int, ...], str | None, tuple[int, ...] | None, int | None]


def _listed(ev: Any, k: int) -> list[Listed]:
    """The tensors of argument ``k``, a list of tensors, as (dims, element type, strides, identity):
    torch.profiler records a list's dims and strides as a list per tensor (``structured_input_shapes``,
    where ``input_shapes`` has ``[]``) and no element type nor identity, which
    :func:`.quiet_profiler.events_with_links` adds from its event tree (``list_tensors``; None each where
    it could not). [] where the dims were not recorded."""
    shapes = _at(getattr(ev, "structured_input_shapes", None), k)
    if not isinstance(shapes, list | tuple) or not all(_ints(s) for s in shapes):
        return []
    described = _per_tensor(_at(getattr(ev, "list_tensors", None), k), len(shapes))
    strides = _per_tensor(_at(getattr(ev, "structured_input_strides", None), k), len(shapes))
    out: list[Listed] = []
    for shape, about, stride in zip(shapes, described, strides, strict=True):
        dtype, ident = about if isinstance(about, tuple) and len(about) == 2 else (None, None)
        out.append((tuple(shape), dtype, tuple(stride) if _ints(stride) and len(stride) == len(shape) else None,
                    ident))
    return out


def _per_tensor(values: Any, n: int) -> list[Any]:
    """One value per tensor of a list of ``n``: None each where not recorded so."""
    return list(values) if isinstance(values, list | tuple) and len(values) == n else [None] * n


def _at(values: Any, k: int) -> Any:
    return values[k] if isinstance(values, list | tuple) and k < len(values) else None


# the c10 enums torch.profiler records as their integer values
_SCALAR_TYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
                 "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16")
_MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")


def _rebuilt(ev: Any) -> list[list[Any]]:
    """The recorded arguments of one op call, position by position: a tensor as a meta tensor of its
    shape, strides and dtype (a copy of a transposed view moves bytes, of a contiguous one none), a
    scalar or list as recorded, None where the profiler recorded nothing (an absent optional, or what it
    does not keep: a string); a list of tensors as a list of meta tensors (:func:`_listed`); [] if a
    tensor cannot be rebuilt (one in a list whose element type was not recorded)."""
    import torch

    shapes = list(getattr(ev, "input_shapes", None) or [])
    dtypes = list(getattr(ev, "input_dtypes", None) or [])
    strides = list(getattr(ev, "structured_input_strides", None) or [])
    strides += [None] * (len(shapes) - len(strides))
    values = list(getattr(ev, "concrete_inputs", None) or [])
    values += [None] * (len(shapes) - len(values))
    out: list[Any] = []
    for k, (shape, dtype, stride, value) in enumerate(zip(shapes, dtypes, strides, values, strict=False)):
        if dtype == TENSOR_LIST:
            pieces = _meta_list(_listed(ev, k))
            if pieces is None:
                return []
            out.append(pieces)
        elif dtype in ("Scalar", "ScalarList"):
            out.append(value)
        elif dtype in _NOT_TENSORS:
            out.append(None)
        else:
            tensor = _meta(shape, getattr(torch, _CPP_DTYPES.get(dtype, ""), None), stride)
            if tensor is None:
                return []
            out.append(tensor)
    return [out] if len(out) == len(shapes) else []


def _meta_list(listed: list[Listed]) -> list[Any] | None:
    """A recorded list of tensors (:func:`_listed`) as meta tensors, one tensor listed twice as one (read
    once, as level 1 counts it); None if the list was not recorded or a tensor's element type is unknown."""
    import torch

    made: dict[Any, Any] = {}
    pieces = []
    for j, (shape, dtype, stride, ident) in enumerate(listed):
        key = ("tensor", ident) if ident is not None else ("piece", j)
        if key not in made:
            made[key] = _meta(shape, getattr(torch, dtype or "", None), stride)
        pieces.append(made[key])
    return pieces if pieces and all(p is not None for p in pieces) else None


def _meta(shape: Any, dtype: Any, stride: Any) -> Any:
    """A meta tensor of these dims, element type and strides (contiguous where the strides are not
    recorded); None if the type is no torch element type or the dims are not integers."""
    import torch

    if not isinstance(dtype, torch.dtype) or not _ints(shape):
        return None
    if _ints(stride) and len(stride) == len(shape):
        return torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device="meta")
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def _ints(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(d, int) for d in value)


def _as(value: Any, arg: Any) -> Any:
    """A recorded value as schema argument ``arg`` takes it (an enum recorded as its integer)."""
    import torch

    kind = str(arg.type).removesuffix("?")
    if kind == "Device":  # not recorded, and the replay runs on meta tensors wherever the op ran
        return torch.device("meta") if value is None and not str(arg.type).endswith("?") else value
    if isinstance(value, int) and not isinstance(value, bool):
        if kind == "ScalarType" and 0 <= value < len(_SCALAR_TYPES):
            return getattr(torch, _SCALAR_TYPES[value])
        if kind == "MemoryFormat" and 0 <= value < len(_MEMORY_FORMATS):
            return getattr(torch, _MEMORY_FORMATS[value])
        if kind == "Layout" and value == 0:
            return torch.strided
    return value


def _replay(ev: Any) -> Seen | None:
    """One op call's work counted as level 1 counts a module's ops (:func:`.record.add_op`): the op run
    once on meta tensors with its recorded arguments, matched to the overload whose schema has as many
    arguments; an argument recorded as nothing takes its default. None if no overload accepts them."""
    import torch

    packet = getattr(torch.ops.aten, ev.name.removeprefix("aten::"), None)
    rebuilt = _rebuilt(ev)
    if packet is None or not rebuilt:
        return None
    values = rebuilt[0]
    for name in packet.overloads():
        schema = getattr(packet, name)._schema
        if len(schema.arguments) != len(values):
            continue
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for arg, value in zip(schema.arguments, values, strict=True):
            if value is None and arg.has_default_value():
                value = arg.default_value
            (kwargs.__setitem__(arg.name, _as(value, arg)) if arg.kwarg_only else args.append(_as(value, arg)))
        seen = Seen("", "", None)
        try:
            with torch.no_grad(), counting_mode(lambda f, a, k, o, seen=seen: add_op(seen, f, a, k, o)):
                getattr(packet, name)(*args, **kwargs)
        except Exception:  # not this overload, or no meta kernel: the next, or unknown
            continue
        return seen
    return None


ALLOCATORS = frozenset(("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_"))
# ops that pick their kernel as they run (attention: flash, memory-efficient or the math path): costed as
# the op they called, which the profiler recorded, where it is known; a replay on meta tensors would take
# the math path, whose bytes (the scores materialised) the flash kernel never moves
RUN_TIME_CHOICE = frozenset(("scaled_dot_product_attention",))


@dataclass(frozen=True, slots=True)
class OpCost:
    """An op call's work: FLOPs, integer operations, bytes read and written (None: unknown)."""

    flops: int | None
    int_ops: int | None
    bytes_read: int | None
    bytes_written: int | None


def op_cost(ev: Any) -> OpCost:
    """What one op call did (see the module's docstring): replayed, else the sum of the ops it called
    (each costed so), else unknown — but 0 FLOPs and integer operations for an op that only moves data.
    An op that picks its kernel as it runs (:data:`RUN_TIME_CHOICE`) is the op it called, where known."""
    name = ev.name.removeprefix("aten::")
    called = [c for c in getattr(ev, "cpu_children", None) or [] if c.name.removeprefix("aten::") not in ALLOCATORS]
    if name in RUN_TIME_CHOICE and called:  # the kernel that ran, not the one a replay would choose
        parts = _summed([op_cost(c) for c in called])
        if parts.flops is not None:
            return parts
    seen = _replay(ev)
    if seen is not None:
        return OpCost(seen.flops, seen.int_ops, seen.bytes_read, seen.bytes_written)
    if name in NO_ARITHMETIC:  # moves data in its own kernel; what it moved is not known (a list of tensors
        # whose element types were not recorded)
        return OpCost(0, 0, None, None)
    if called:
        return _summed([op_cost(c) for c in called])
    return OpCost(None, None, None, None)


def _summed(parts: list[OpCost]) -> OpCost:
    """The parts' work added up, each figure unknown where any part's is."""
    return OpCost(*(None if any(getattr(p, f) is None for p in parts) else sum(getattr(p, f) for p in parts)
                    for f in ("flops", "int_ops", "bytes_read", "bytes_written")))
