"""An op call's recorded arguments (torch.profiler's ``record_shapes``), read back: its tensor inputs as
:class:`~layerperf.data.tensor.TensorInfo` (:func:`op_inputs`), and its work (:func:`op_cost`).

An op's FLOPs, integer operations and bytes are level 1's (:mod:`.record`): the op is replayed once on
meta tensors of its recorded shapes, strides and dtypes with its recorded scalar arguments, under the
dispatch mode that counts level 1's modules, so the profiler's ``with_flops`` (which saves every op's
arguments as it runs) is not needed. An op that cannot be rebuilt (a list of tensors, an argument the
profiler did not record) is costed as the ops it called, or left unknown.
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
_NOT_TENSORS = frozenset(("", "Scalar", "ScalarList", "TensorList", "GenericList", "None"))


def op_inputs(ev: Any, key: str) -> tuple[TensorInfo, ...]:
    """An op call's tensor arguments as the profiler recorded them (``record_shapes``: ``input_shapes``
    and ``input_dtypes``), named ``<row>:in<k>`` by position; scalars and lists are left out. A type
    name not known here is kept as the profiler wrote it."""
    shapes = getattr(ev, "input_shapes", None) or []
    dtypes = getattr(ev, "input_dtypes", None) or []
    out = []
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=False)):
        if dtype in _NOT_TENSORS or not isinstance(shape, list | tuple):
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        out.append(TensorInfo(f"{key}:in{k}", tuple(shape), _CPP_DTYPES.get(dtype, dtype)))
    return tuple(out)


# the c10 enums torch.profiler records as their integer values
_SCALAR_TYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
                 "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16")
_MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")


def _rebuilt(ev: Any) -> list[list[Any]]:
    """The recorded arguments of one op call, position by position: a tensor as a meta tensor of its
    shape, strides and dtype (a copy of a transposed view moves bytes, of a contiguous one none), a
    scalar or list as recorded, None where the profiler recorded nothing (an absent optional, or what it
    does not keep: a string, a list of tensors' types); [] if a tensor cannot be rebuilt."""
    import torch

    shapes = list(getattr(ev, "input_shapes", None) or [])
    dtypes = list(getattr(ev, "input_dtypes", None) or [])
    strides = list(getattr(ev, "structured_input_strides", None) or [])
    strides += [None] * (len(shapes) - len(strides))
    values = list(getattr(ev, "concrete_inputs", None) or [])
    values += [None] * (len(shapes) - len(values))
    out: list[Any] = []
    for shape, dtype, stride, value in zip(shapes, dtypes, strides, values, strict=False):
        if dtype in ("Scalar", "ScalarList"):
            out.append(value)
        elif dtype in _NOT_TENSORS:
            out.append(None)
        else:
            dt = getattr(torch, _CPP_DTYPES.get(dtype, ""), None)
            if not isinstance(dt, torch.dtype) or not _ints(shape):
                return []
            if _ints(stride) and len(stride) == len(shape):
                out.append(torch.empty_strided(tuple(shape), tuple(stride), dtype=dt, device="meta"))
            else:
                out.append(torch.empty(tuple(shape), dtype=dt, device="meta"))
    return [out] if len(out) == len(shapes) else []


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
    if name in NO_ARITHMETIC:  # moves data in its own kernel; what it moved is not recorded (a list of tensors)
        return OpCost(0, 0, None, None)
    if called:
        return _summed([op_cost(c) for c in called])
    return OpCost(None, None, None, None)


def _summed(parts: list[OpCost]) -> OpCost:
    """The parts' work added up, each figure unknown where any part's is."""
    return OpCost(*(None if any(getattr(p, f) is None for p in parts) else sum(getattr(p, f) for p in parts)
                    for f in ("flops", "int_ops", "bytes_read", "bytes_written")))
