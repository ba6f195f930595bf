"""FLOPs and bytes of aten operators from what a PyTorch profiler trace records of their inputs.

A trace made with ``record_shapes=True`` gives each op's ``Input Dims``, ``Input type`` and, for scalar
arguments, ``Concrete Inputs`` (a convolution's stride, padding, dilation and groups). torch 2.x writes
no ``flops`` argument at all, even with ``with_flops=True``, so layerperf derives the work of the ops
that do the arithmetic from these, with the ONNX cost model's formulas (:mod:`layerperf.cost`: one
multiply-add = 2 FLOPs, a bias one add per output element), and the bytes they read and write from the
tensors' dims and element types (the output's shape follows from the inputs).

Which op gets the figure: the one the user called (``aten::conv2d``, ``aten::linear``); its backend
children (``aten::convolution`` → ``aten::_convolution`` → ``aten::mkldnn_convolution``; ``aten::addmm``
under ``aten::linear``) would count the same work again, so the reader keeps a figure only on the
outermost op that has one (:func:`outermost`).
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np

# PyTorch's names of element types in "Input type", as numpy-style names
_DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
           "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
           "unsigned char": "uint8", "bool": "bool"}
CONVS = frozenset(("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"))
MATMULS = {"aten::mm": "MatMul", "aten::bmm": "MatMul", "aten::addmm": "Gemm", "aten::linear": "Gemm"}
DERIVED = CONVS | frozenset(MATMULS)
NAN2 = (math.nan, math.nan)


def _ints(text: str) -> list[int]:
    """A concrete input written ``[1, 1]`` or ``1`` as a list of ints."""
    value = json.loads(text)
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


@functools.lru_cache(maxsize=4096)
def aten_cost(name: str, input_dims: bytes, input_types: bytes, concrete: bytes) -> tuple[float, float]:
    """(FLOPs, bytes read + written) of one call of an aten op from its recorded ``Input Dims``, ``Input
    type`` and ``Concrete Inputs`` (raw JSON; ``b""`` when absent); NaN where unknown."""
    try:
        dims = [tuple(int(d) for d in shape) for shape in json.loads(input_dims)]
        types = [str(t) for t in json.loads(input_types)] if input_types else []
        scalars = [str(c) for c in json.loads(concrete)] if concrete else []
        if name in CONVS:
            return _conv(name, dims, types, scalars)
        if name in MATMULS:
            return _matmul(name, dims, types)
    except (ValueError, TypeError, IndexError, ZeroDivisionError):
        pass
    return NAN2


def _dtype(types: list[str], i: int) -> str | None:
    """The element type of input ``i``; the first recorded tensor type when that one is missing."""
    t = _DTYPES.get(types[i]) if i < len(types) else None
    return t or next((_DTYPES[x] for x in types if x in _DTYPES), None)


def _cost(op_type: str, attrs: dict[str, object], ins: list[tuple[int, ...]], out: tuple[int, ...],
          dtype: str | None) -> tuple[float, float]:
    from layerperf.cost import node_cost
    from layerperf.data.tensor import TensorInfo

    cost = node_cost(op_type, "", attrs, [TensorInfo(f"in{i}", d, dtype or "float32") for i, d in enumerate(ins)],
                     [TensorInfo("out", out, dtype or "float32")])
    flops = math.nan if cost.flops is None else float(cost.flops)
    moved = math.nan if dtype is None or cost.bytes is None else float(cost.bytes)
    return flops, moved


def _conv(name: str, dims: list[tuple[int, ...]], types: list[str], scalars: list[str]) -> tuple[float, float]:
    """conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups); convolution and _convolution
    (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)."""
    x, w = dims[0], dims[1]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return NAN2
    if name in ("aten::convolution", "aten::_convolution"):
        if json.loads(scalars[6].lower()):  # transposed: not this formula
            return NAN2
        group = _ints(scalars[8])[0]
    else:
        group = _ints(scalars[6])[0]
    stride, pad, dilation = (_spread(_ints(scalars[k]), spatial) for k in (3, 4, 5))
    out = (x[0], w[0], *((n + 2 * p - d * (k - 1) - 1) // s + 1
                         for n, k, s, p, d in zip(x[2:], w[2:], stride, pad, dilation, strict=True)))
    if min(out) <= 0 or w[1] * group != x[1]:
        return NAN2
    ins = [x, w] + ([dims[2]] if len(dims) > 2 and dims[2] else [])
    attrs: dict[str, object] = {"strides": stride, "pads": pad + pad, "dilations": dilation, "group": group}
    return _cost("Conv", attrs, ins, out, _dtype(types, 0))


def _spread(values: list[int], n: int) -> list[int]:
    """A per-dimension list; one value stands for every dimension."""
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError("wrong number of values")
    return values


def _matmul(name: str, dims: list[tuple[int, ...]], types: list[str]) -> tuple[float, float]:
    if name == "aten::linear":  # input [..., K], weight [N, K], bias [N]: a Gemm over the flattened rows
        x, w = dims[0], dims[1]
        if len(w) != 2 or not x or x[-1] != w[1]:
            return NAN2
        rows = math.prod(x[:-1])
        ins = [(rows, x[-1]), w] + ([dims[2]] if len(dims) > 2 and dims[2] else [])
        return _cost("Gemm", {"transB": 1}, ins, (rows, w[0]), _dtype(types, 0))
    if name == "aten::addmm":  # bias, a, b
        if len(dims) < 3 or len(dims[1]) != 2 or len(dims[2]) != 2:
            return NAN2
        return _cost("Gemm", {}, [dims[1], dims[2], dims[0]], (dims[1][0], dims[2][1]), _dtype(types, 1))
    if len(dims) < 2 or len(dims[0]) != len(dims[1]) or len(dims[0]) not in (2, 3):  # mm, bmm: a, b
        return NAN2
    return _cost("MatMul", {}, [dims[0], dims[1]], dims[0][:-1] + dims[1][-1:], _dtype(types, 0))


def outermost(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """``values`` (one per event, NaN unknown) with NaN wherever an enclosing event (``parent`` chain, -1 at
    the top) has a known value: the work of a call is counted on the outermost op that has it, not again on
    the backend ops it dispatches to."""
    known = ~np.isnan(values)
    covered = np.zeros(values.size, dtype=bool)
    at = parent.copy()
    while (live := at >= 0).any():
        covered[live] |= known[at[live]]
        at[live] = parent[at[live]]
    return np.where(covered, np.nan, values)


def of_args(name: str, args: Any) -> tuple[float, float]:
    """:func:`aten_cost` of a decoded event's arguments."""
    if name not in DERIVED or not args.input_dims:
        return NAN2
    return aten_cost(name, bytes(args.input_dims), bytes(args.input_type), bytes(args.concrete_inputs))
