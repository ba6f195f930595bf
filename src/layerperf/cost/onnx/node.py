"""What an ONNX cost function sees of one node (:class:`Node`), and the helpers they share."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from layerperf.cost.shapes import Shape, ShapeUnknown
from layerperf.data.tensor import TensorInfo


@dataclass(frozen=True, slots=True)
class Node:
    """What a cost function sees of one node: its attributes and the tensors around it."""

    op_type: str
    domain: str
    attrs: dict[str, object]
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]

    # -- tensors -------------------------------------------------------------------------------
    def has(self, i: int) -> bool:
        """Whether optional input ``i`` is present (None marks an omitted one)."""
        return _present(self.inputs, i)

    def has_out(self, i: int) -> bool:
        return _present(self.outputs, i)

    def shape(self, i: int) -> Shape:
        """Static shape of input ``i``; raises ShapeUnknown when absent or not static."""
        return _static_shape(self.inputs, i)

    def out_shape(self, i: int = 0) -> Shape:
        """Static shape of output ``i``; raises ShapeUnknown when absent or not static."""
        return _static_shape(self.outputs, i)

    def out_shape_or(self, fallback: Callable[[], Shape], i: int = 0) -> Shape:
        """Output ``i``'s shape when the caller knows it, else ``fallback()`` computed from inputs.

        Output shapes reported at run time are the ground truth (they settle auto_pad, ceil_mode,
        NCHWc padding), so they win; the formula covers graphs without value_info.
        """
        try:
            return self.out_shape(i)
        except ShapeUnknown:
            return fallback()

    def numel(self, i: int) -> int:
        return math.prod(self.shape(i))

    def with_inputs(self, order: Sequence[int | None]) -> Node:
        """A view whose inputs are this node's inputs picked in ``order`` (None: omitted).

        Lets quantized variants (QLinearConv: x, x_scale, x_zp, w, ...) reuse the float formulas.
        """
        picked = tuple(self.inputs[i] if i is not None and i < len(self.inputs) else None for i in order)
        return replace(self, inputs=picked)

    # -- attributes ----------------------------------------------------------------------------
    def attr_int(self, name: str, default: int) -> int:
        value = self.attrs.get(name, default)
        if not isinstance(value, (int, float)):
            raise ShapeUnknown(f"attribute {name} is not a number")
        return int(value)

    def attr_float(self, name: str, default: float) -> float:
        value = self.attrs.get(name, default)
        if not isinstance(value, (int, float)):
            raise ShapeUnknown(f"attribute {name} is not a number")
        return float(value)

    def attr_ints(self, name: str, default: Sequence[int] | None = None) -> list[int] | None:
        value = self.attrs.get(name)
        if value is None:
            return None if default is None else list(default)
        if not isinstance(value, (list, tuple)):
            raise ShapeUnknown(f"attribute {name} is not a list")
        return [int(v) for v in value]

    def attr_str(self, name: str, default: str) -> str:
        value = self.attrs.get(name, default)
        # get_attribute_value yields bytes; callers are asked to decode, but be lenient.
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)


def _present(tensors: tuple[TensorInfo | None, ...], i: int) -> bool:
    # None marks an omitted optional input; a TensorInfo named "" is present but unnamed
    # (the ORT backend builds those when it has no graph node to take names from).
    return i < len(tensors) and tensors[i] is not None


def _static_shape(tensors: tuple[TensorInfo | None, ...], i: int) -> Shape:
    t = tensors[i] if i < len(tensors) else None
    if t is None or not t.is_static or t.shape is None:
        raise ShapeUnknown(f"shape of tensor #{i} is not static")
    return tuple(int(d) for d in t.shape)


FlopsFn = Callable[[Node], int]
"""A cost function: FLOPs of one node; raises ShapeUnknown when it cannot tell."""

BytesFn = Callable[[Node], int]
"""An override of the bytes a node reads; raises ShapeUnknown when it cannot tell."""

OpKey = tuple[str, str]  # (domain, op_type), domain "" for ai.onnx


def total_bytes(tensors: Sequence[TensorInfo | None]) -> int | None:
    """Sum of nbytes over the present tensors, each distinct name once; None if any is unknown.

    A tensor fed twice to one node (``Mul(x, x)``) is fetched from memory once, so it counts once.
    """
    seen: set[str] = set()
    total = 0
    for t in tensors:
        if t is None:
            continue
        if t.name:
            if t.name in seen:
                continue
            seen.add(t.name)
        n = t.nbytes
        if n is None:
            return None
        total += n
    return total


def itemsize(t: TensorInfo | None) -> int:
    if t is None:
        raise ShapeUnknown("tensor missing")
    return t.itemsize
