"""Shapes as every namespace's cost functions use them: static-shape arithmetic (broadcasting, sliding
windows, matrix products) and :class:`ShapeUnknown`, which a cost function raises when it cannot tell."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

Shape = tuple[int, ...]
View = TypeVar("View")


class ShapeUnknown(Exception):
    """Raised inside a cost function when a shape or attribute it needs is not known statically.

    Cost functions raise instead of returning None so that each one stays a straight line of
    arithmetic; :func:`guarded` turns it into None (unknown).
    """


def guarded(fn: Callable[[View], int], view: View) -> int | None:
    """``fn(view)`` as an int; None where it raises ShapeUnknown or the call is malformed.

    A malformed call (attribute lengths or ranks that disagree with its shapes, an attribute of an
    unexpected type) must not abort a whole profile: its cost is simply unknown.
    """
    try:
        return int(fn(view))
    except ShapeUnknown:
        return None
    except (ArithmeticError, IndexError, KeyError, TypeError, ValueError):
        return None


def broadcast(*shapes: Shape) -> Shape:
    """Numpy-style multidirectional broadcast of static shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeUnknown(f"shapes {shapes} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


# -- convolution / pooling windows ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Window:
    """The sliding-window attributes of Conv and the pools, with ONNX defaults filled in."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]  # begins then ends, as in the ONNX attribute
    auto_pad: str
    ceil_mode: bool

    @property
    def effective_kernel(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations, strict=True))


def window_out(in_spatial: Sequence[int], w: Window) -> tuple[int, ...]:
    """Output spatial size of a Conv or pool over ``in_spatial`` (ONNX formulas)."""
    out = []
    for axis, (size, k_eff, s) in enumerate(zip(in_spatial, w.effective_kernel, w.strides, strict=True)):
        if w.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // s))
            continue
        total_pad = 0 if w.auto_pad == "VALID" else w.pads[axis] + w.pads[axis + len(in_spatial)]
        span = size + total_pad - k_eff
        if span < 0:
            raise ShapeUnknown("window larger than the padded input")
        n = (-(-span // s) if w.ceil_mode else span // s) + 1
        # ceil_mode: a last window starting inside the end padding is dropped (ONNX/PyTorch rule).
        if w.ceil_mode and (n - 1) * s >= size + (0 if w.auto_pad == "VALID" else w.pads[axis]):
            n -= 1
        out.append(n)
    return tuple(out)


def conv_transpose_out(in_spatial: Sequence[int], w: Window, output_padding: Sequence[int],
                       output_shape: Sequence[int] | None) -> tuple[int, ...]:
    """Output spatial size of ConvTranspose (ONNX formula; ``output_shape`` wins when given)."""
    if output_shape:
        return tuple(output_shape[-len(in_spatial):])
    out = []
    for axis, (size, k_eff, s) in enumerate(zip(in_spatial, w.effective_kernel, w.strides, strict=True)):
        if w.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(size * s)
            continue
        pads = 0 if w.auto_pad == "VALID" else w.pads[axis] + w.pads[axis + len(in_spatial)]
        out.append(s * (size - 1) + output_padding[axis] + k_eff - pads)
    return tuple(out)


# -- matrix products -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MatMulDims:
    """A batched matrix product out[batch..., M, N] = sum_K a[batch..., M, K] * b[batch..., K, N]."""

    batch: Shape
    m: int
    k: int
    n: int
    out_shape: Shape

    @property
    def macs(self) -> int:
        return math.prod(self.batch) * self.m * self.k * self.n


def matmul_dims(a: Shape, b: Shape) -> MatMulDims:
    """numpy.matmul semantics: a 1-D operand gains then loses a unit dim; batch dims broadcast."""
    if not a or not b:
        raise ShapeUnknown("MatMul of a scalar")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    k_b, n = b2[-2], b2[-1]
    if k != k_b:
        raise ShapeUnknown(f"MatMul inner dims differ: {a} x {b}")
    batch = broadcast(a2[:-2], b2[:-2])
    out = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(b) > 1 else ()))
    return MatMulDims(batch, m, k, n, out)


def transposed(shape: Shape, trans: bool, trans_batch: bool) -> Shape:
    """Shape of a FusedMatMul operand after its transpose attributes.

    ``transBatch`` moves dim 0 in front of the last two dims ([d0, b.., x, y] -> [b.., d0, y]);
    ``trans`` swaps the last two; with both, dim 0 ends up last (ORT's FusedMatMul definition).
    """
    if len(shape) < 2:
        return shape
    s = shape
    if trans_batch and len(s) > 2:
        s = (*s[1:-1], s[0], s[-1])
    if trans:
        s = (*s[:-2], s[-1], s[-2])
    return s
