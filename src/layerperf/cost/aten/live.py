"""The aten namespace on a call that ran: its torch tensors as the table sees them.

torch is imported here, inside the functions, and nowhere else in the cost model: the trace reader
costs recorded calls (:mod:`.recorded`) where torch is not installed.
"""

from __future__ import annotations

from typing import Any

from layerperf.cost import aten
from layerperf.cost.aten.call import AtenCall
from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo


def cost(func: Any, args: Any, kwargs: Any, out: Any) -> Cost:
    """FLOPs, integer operations and bytes of one aten op call (``func`` an OpOverload, ``out`` what it
    returned), by the aten table; where the table has no formula, torch.utils.flop_counter's (matrix
    products, attention kernels)."""
    from torch.utils.flop_counter import flop_registry

    formula = flop_registry.get(func.overloadpacket)
    asked = None if formula is None else (lambda: int(formula(*args, **kwargs, out_val=out)))
    return aten.cost(call(func, args, kwargs, out), asked)


def call(func: Any, args: Any, kwargs: Any, out: Any) -> AtenCall:
    """The call as the aten table sees it: tensors as TensorInfo named by identity (a tensor passed twice
    is read once), lists as tuples, the results by position."""
    results = out if isinstance(out, tuple | list) else (out,)
    return AtenCall(func.overloadpacket.__name__, tuple(_value(a) for a in args),
                    {k: _value(v) for k, v in (kwargs or {}).items()},
                    tuple(_result(r) for r in _flat(results)), func._overloadname, is_view(func))


def is_view(func: Any) -> bool:
    """Whether an aten op moves no data: every result is an alias of an argument it does not write (its
    schema's ``Tensor(a)``: ``t``, ``view``, ``expand``, ``transpose``, ``detach``...), or it only changes
    metadata or allocates without writing (:data:`~layerperf.cost.aten.METADATA_INPLACE`: ``_unsafe_view``
    is a view whose alias the schema does not record; ``empty`` is an allocation)."""
    if func.overloadpacket.__name__ in aten.METADATA_INPLACE:
        return True
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def info(name: str, t: Any) -> TensorInfo:
    """A torch tensor's name, shape and element type."""
    return TensorInfo(name, tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch."))


def _value(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return info(f"#{id(value)}", value)
    if isinstance(value, tuple | list):
        return tuple(_value(v) for v in value)
    return value


def _result(value: Any) -> TensorInfo | None:
    import torch

    return info(f"#{id(value)}", value) if isinstance(value, torch.Tensor) else None


def _flat(values: Any) -> list[Any]:
    """Results with nested lists (a list of tensors among them) flattened, positions otherwise kept."""
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, tuple | list) else [v])
    return out
