"""What an ONNX Runtime profile's node events are worth: each distinct node's row identity, FLOPs, bytes and
integer operations, from the shapes the profiler recorded (:mod:`layerperf.readers.ort` reads the events)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from layerperf import cost as cost_model
from layerperf.cost.onnx import elementwise
from layerperf.data.calls import TableBuilder, shape_str
from layerperf.data.tensor import TensorInfo, ort_type_to_dtype
from layerperf.readers.tef import json_value, text
from layerperf.util.arrays import grown


def listed_tensors(value: Any) -> list[tuple[str, Any]] | None:
    """``input_type_shape``/``output_type_shape`` (``[{"float": [1, 3, 8, 8]}, ...]``) as
    (ONNX Runtime's element type, dims) pairs; None when the value is not of that form."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict) or len(item) != 1:
            return None
        ((elem_type, dims),) = item.items()
        out.append((str(elem_type), dims))
    return out


def tensor_info(name: str, elem_type: str, dims: Any) -> TensorInfo:
    """One listed tensor as a TensorInfo; its shape None unless the dims are sane sizes."""
    ok = isinstance(dims, list) and all(type(d) is int and 0 <= d < 1 << 40 for d in dims)
    return TensorInfo(name, tuple(dims) if ok else None, ort_type_to_dtype(elem_type))


# Elementwise ops cost per output element whatever their attributes; Conv and MatMul read their
# dimensions off the shapes. (Pooling, Gemm and Gelu, say, need attributes the profile lacks.)
_ATTRIBUTE_DEPENDENT = frozenset(("Gelu",))
# Quantization ops work per element whatever their attributes (axis, saturate).
_QUANTIZATION = frozenset(("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"))
# ONNX Runtime's quantized elementwise ops (com.microsoft): every input is recorded, none pre-packed.
_CONTRIB = frozenset(("QLinearAdd", "QLinearMul"))


def _shape_only(op_type: str) -> bool:
    return op_type in ("Conv", "MatMul") or op_type in _QUANTIZATION or op_type in _CONTRIB or (
        ("", op_type) in elementwise.TABLE and op_type not in _ATTRIBUTE_DEPENDENT)


def _tensors(value: Any, prefix: str) -> tuple[str, list[TensorInfo]] | None:
    """``[{"float": [1, 3, 8, 8]}, ...]`` -> ("1x3x8x8;...", TensorInfos); None when not that shape."""
    listed = listed_tensors(value)
    if listed is None:
        return None
    return (";".join(shape_str(dims) for _, dims in listed),
            [tensor_info(f"{prefix}{i}", elem_type, dims) for i, (elem_type, dims) in enumerate(listed)])


class Costs:
    """Per distinct (node, op, provider, shapes): its row identity, FLOPs, bytes, integer operations.

    What the shapes give — their text, FLOPs, bytes, integer operations — is worked out once per distinct
    (op, provider, shapes), not once per node: the layers of a transformer repeat those, and a profile
    whose shapes change every step names hundreds of thousands of nodes."""

    def __init__(self, builder: TableBuilder, node_name: Callable[[str], str]) -> None:
        self.builder = builder
        self.node_name = node_name  # a node event's name -> its node's
        self._flops, self._bytes = np.full(0, np.nan), np.full(0, np.nan)  # per identity code, grown by doubling
        self.int_ops: dict[int, float] = {}
        self.counters: dict[int, dict[str, float]] = {}
        self.touched: set[int] = set()  # identities worked out since the last part took them (see part)
        self._shaped: dict[tuple[Any, ...], tuple[str, str, float, float, float]] = {}

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """FLOPs and bytes per identity code (NaN: unknown)."""
        return self._flops, self._bytes

    def _shapes(self, op: str, prov: str, ins: Any, outs: Any) -> tuple[str, str, float, float, float]:
        key = (op, prov, ins, outs)
        got = self._shaped.get(key)
        if got is None:
            got = self._shaped[key] = _shape_figures(op, ins, outs)
        return got

    def make(self, key: tuple[Any, ...]) -> int:
        name, op_type, provider, ins, outs, counts = key
        op, prov = text(op_type), text(provider)
        in_text, out_text, flops, nbytes, int_ops = self._shapes(op, prov, ins, outs)
        ident = self.builder.ident(self.node_name(name), op, prov, in_text, out_text)
        if ident >= self._flops.size:
            size = max(ident + 1, 2 * self._flops.size, 64)
            self._flops, self._bytes = grown(self._flops, size, np.nan), grown(self._bytes, size, np.nan)
        self._flops[ident], self._bytes[ident] = flops, nbytes
        self.touched.add(ident)
        if int_ops == int_ops:
            self.int_ops[ident] = int_ops
        counters = json_value(counts)
        if isinstance(counters, dict):
            self.counters[ident] = {str(k): float(v) for k, v in counters.items()
                                    if type(v) in (int, float) and math.isfinite(v)}
        return ident


def _shape_figures(op: str, ins: Any, outs: Any) -> tuple[str, str, float, float, float]:
    """Shapes' texts, FLOPs, bytes and integer operations (NaN: unknown) of an ``op`` node's recorded shapes."""
    got_in = _tensors(json_value(ins), "in")
    got_out = _tensors(json_value(outs), "out")
    flops = nbytes = int_ops = math.nan
    if got_in is not None and got_out is not None:
        cost = cost_model.of("com.microsoft" if op in _CONTRIB else "", op, got_in[1], got_out[1])
        if cost.flops is not None and _shape_only(op):
            flops = float(cost.flops)
        if cost.int_ops is not None and _shape_only(op):
            int_ops = float(cost.int_ops)
        if cost.bytes is not None:
            nbytes = float(cost.bytes)
    return got_in[0] if got_in else "", got_out[0] if got_out else "", flops, nbytes, int_ops
