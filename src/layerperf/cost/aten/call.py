"""What an aten cost function sees of one call: its arguments by position and keyword, its results.

The same view serves a call that ran (live tensors, :mod:`.live`) and one a PyTorch profiler trace
recorded (``Input Dims``, ``Input type``, ``Concrete Inputs``: :mod:`.recorded`). A tensor is a
:class:`~layerperf.data.tensor.TensorInfo` (its name tells tensors apart: one passed twice is the same
name), a list a tuple, anything else (a number, a bool, a string, None) as it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from layerperf.cost.shapes import Shape, ShapeUnknown
from layerperf.data.tensor import TensorInfo


@dataclass(frozen=True, slots=True)
class AtenCall:
    """One call of an aten op. ``op`` is the op's name without ``aten::`` and overload (``conv2d``,
    ``add_``); ``overload`` the overload's (``other``, ``dim``; "" when not recorded). ``outputs`` are
    the results by position (None for a result that is no tensor), or None when they were not recorded.
    ``alias`` says every result is an alias of an argument the op does not write (the op's schema
    says so; a recorded call cannot tell)."""

    op: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    outputs: tuple[TensorInfo | None, ...] | None = None
    overload: str = ""
    alias: bool = False

    @property
    def base(self) -> str:
        """The op an in-place form is of: ``relu`` for ``relu_`` (not ``__and__``'s dunders)."""
        name = self.op
        return name[:-1] if name.endswith("_") and not name.endswith("__") else name

    def arg(self, i: int, name: str, default: Any = None) -> Any:
        """Argument ``i`` by position, else by keyword ``name``, else ``default``."""
        return self.args[i] if len(self.args) > i else self.kwargs.get(name, default)

    def tensor(self, i: int) -> TensorInfo:
        """Positional argument ``i`` as a tensor; raises ShapeUnknown when it is none."""
        t = self.args[i] if i < len(self.args) else None
        if not isinstance(t, TensorInfo):
            raise ShapeUnknown(f"argument {i} is no tensor")
        return t

    def shape(self, i: int) -> Shape:
        """Static shape of positional argument ``i``; raises ShapeUnknown when it has none."""
        return static_shape(self.tensor(i))

    def numel(self, i: int) -> int:
        return math.prod(self.shape(i))

    def tensors(self) -> list[TensorInfo]:
        """Every tensor among the arguments, positional then keyword, lists flattened, in order."""
        return list(_leaves((self.args, tuple(self.kwargs.values()))))

    def results(self) -> list[TensorInfo]:
        """Every result that is a tensor, in order; raises ShapeUnknown when none were recorded."""
        if self.outputs is None:
            raise ShapeUnknown("results not recorded")
        return [t for t in self.outputs if t is not None]

    def result(self, i: int = 0) -> TensorInfo:
        """Result ``i`` by position; raises ShapeUnknown when it is none or was not recorded."""
        t = self.outputs[i] if self.outputs is not None and i < len(self.outputs) else None
        if t is None:
            raise ShapeUnknown(f"result {i} unknown")
        return t


def static_shape(t: TensorInfo) -> Shape:
    if not t.is_static or t.shape is None:
        raise ShapeUnknown(f"shape of {t.name} is not static")
    return tuple(int(d) for d in t.shape)


def _leaves(value: Any) -> Iterator[TensorInfo]:
    if isinstance(value, TensorInfo):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _leaves(v)
