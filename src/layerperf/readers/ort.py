"""ONNX Runtime's own profiler file (``SessionOptions.enable_profiling``) as an Calls.

A JSON array of events: per run a ``model_run`` Session event, and per executed node a
``<node>_kernel_time`` Node event whose args give ``op_name``, ``provider`` and the
``input_type_shape``/``output_type_shape`` seen at run time. Older releases wrap each kernel in
``<node>_fence_before``/``<node>_fence_after`` events, which time nothing and are skipped.
The nodes of a Loop, If or Scan body are node events within the parent's (:mod:`layerperf.nesting`):
they are named ``parent::node``, the parent's self time is its duration less theirs, and its FLOPs
per call are the sum of its body calls' (unknown when any of theirs is).

Bytes, FLOPs and integer operations come from :mod:`layerperf.cost` on the recorded shapes and
element types. The profile has no node attributes, so they are given only for op types whose cost
depends on shapes alone; the rest are unknown. ONNX Runtime leaves out inputs it pre-packed (a Gemm's
or a QLinearConv's weights, say), so those ops stay unknown too. The profile has no graph either: a
Conv that ran in the NCHWc layout (opt level all) counts the channels as stored, padding included
(``layerperf profile`` counts the real ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from layerperf.calls import Calls, Interner, TableBuilder, shape_str, with_outer
from layerperf.nesting import CONTROL_FLOW_OPS, body_sums, depths, enclosing, qualify, self_times
from layerperf.readers.decode import Args, Event, fields
from layerperf.readers.jsonfile import EventStream
from layerperf.readers.tef import Idents, Part, Slices, column, json_value, raw_key, remapped, text, thread_codes, to_ns

KERNEL_SUFFIX = "_kernel_time"
# Elementwise ops cost per output element whatever their attributes; Conv and MatMul read their
# dimensions off the shapes. (Pooling, Gemm and Gelu, say, need attributes the profile lacks.)
_ATTRIBUTE_DEPENDENT = frozenset(("Gelu",))


# Quantization ops work per element whatever their attributes (axis, saturate).
_QUANTIZATION = frozenset(("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"))
# ONNX Runtime's quantized elementwise ops (com.microsoft): every input is recorded, none pre-packed.
_CONTRIB = frozenset(("QLinearAdd", "QLinearMul"))


def _shape_only(op_type: str) -> bool:
    from layerperf.cost import ops_elementwise

    return op_type in ("Conv", "MatMul") or op_type in _QUANTIZATION or op_type in _CONTRIB or (
        ("", op_type) in ops_elementwise.TABLE and op_type not in _ATTRIBUTE_DEPENDENT)


def _tensors(value: Any, prefix: str) -> tuple[str, list[Any]] | None:
    """``[{"float": [1, 3, 8, 8]}, ...]`` -> ("1x3x8x8;...", TensorInfos); None when not that shape."""
    from layerperf.tensor import TensorInfo, ort_type_to_dtype

    if not isinstance(value, list):
        return None
    texts, infos = [], []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or len(item) != 1:
            return None
        ((dtype, dims),) = item.items()
        ok = isinstance(dims, list) and all(type(d) is int and 0 <= d < 1 << 40 for d in dims)
        texts.append(shape_str(dims))
        infos.append(TensorInfo(f"{prefix}{i}", tuple(dims) if ok else None, ort_type_to_dtype(str(dtype))))
    return ";".join(texts), infos


class _Costs:
    """Per distinct (node, op, provider, shapes): its row identity, FLOPs, bytes, integer operations."""

    def __init__(self, builder: TableBuilder) -> None:
        self.builder = builder
        self.figures: dict[int, tuple[float, float]] = {}
        self.int_ops: dict[int, float] = {}
        self.counters: dict[int, dict[str, float]] = {}

    def make(self, key: tuple[Any, ...]) -> int:
        from layerperf.cost import node_cost

        name, op_type, provider, ins, outs, counts = key
        op, prov = text(op_type), text(provider)
        got_in = _tensors(json_value(ins), "in")
        got_out = _tensors(json_value(outs), "out")
        flops = nbytes = int_ops = math.nan
        if got_in is not None and got_out is not None:
            cost = node_cost(op, "com.microsoft" if op in _CONTRIB else "", {}, got_in[1], got_out[1])
            if cost.flops is not None and _shape_only(op):
                flops = float(cost.flops)
            if cost.int_ops is not None and _shape_only(op):
                int_ops = float(cost.int_ops)
            if cost.bytes is not None:
                nbytes = float(cost.bytes)
        ident = self.builder.ident(name[: -len(KERNEL_SUFFIX)], op, prov, got_in[0] if got_in else "",
                                   got_out[0] if got_out else "")
        self.figures[ident] = (flops, nbytes)
        if int_ops == int_ops:
            self.int_ops[ident] = int_ops
        counters = json_value(counts)
        if isinstance(counters, dict):
            self.counters[ident] = {str(k): float(v) for k, v in counters.items()
                                    if type(v) in (int, float) and math.isfinite(v)}
        return ident


FIELDS = ("name", "pid", "tid", "ts", "dur", "args")
ARG_KEY = attrgetter("op_name", "provider", "input_type_shape", "output_type_shape", "layerperf_counters")


def _arg_key(args: Args) -> tuple[Any, ...]:
    return raw_key(*ARG_KEY(args))


def _kernels(events: list[Event]) -> list[Event]:
    return [ev for ev, cat, name in zip(events, column(events, "cat"), column(events, "name"), strict=True)
            if cat == "Node" and type(name) is str and name.endswith(KERNEL_SUFFIX)]


def part(stream: EventStream) -> Part:
    """Read a stretch of an ONNX Runtime profile; :func:`merge` turns parts read in order into the table."""
    builder = TableBuilder()
    costs = _Costs(builder)
    idents = Idents(costs.make, _arg_key)
    threads = Interner()
    slices = Slices()
    n_events = runs = 0
    for chunk in stream.chunks():
        n_events += len(chunk)
        runs += sum(1 for cat, name in zip(column(chunk, "cat"), column(chunk, "name"), strict=True)
                    if cat == "Session" and name == "model_run")
        nodes = _kernels(chunk)
        name, pid, tid, ts, dur, args = fields(nodes, FIELDS)
        codes = idents.codes(list(zip(name)), list(args))
        figures = np.asarray([costs.figures[c] for c in codes], dtype=np.float64).reshape(-1, 2)
        slices.add(thread_codes(threads, pid, tid), ts, dur, codes, figures[:, 0], figures[:, 1])
    return Part(builder.idents(), threads.values(), slices.joined(), {}, [], n_events, runs, costs.counters,
                costs.int_ops)


def merge(parts: Sequence[Part], meta: dict[str, Any] | None = None) -> Calls:
    builder = TableBuilder()
    threads = Interner()
    columns = [remapped(p, builder, threads) for p in parts]
    thread, ts_us, dur_us, ident, flops, nbytes = (np.concatenate([c[i] for c in columns]) for i in range(6))
    counters = _counter_columns(parts, builder, ident)
    int_ops = _int_ops_column(parts, builder, ident)
    self_us, ident, flops, parent = _nest(builder, thread, ts_us, dur_us, ident.astype(np.int64), flops)
    builder.extend(ident.astype(np.int32), self_us, incl_us=dur_us, flops=flops, bytes_=nbytes, int_ops=int_ops,
                   counters=counters)
    info = {"format": "ort", "events": sum(p.events for p in parts), "runs": sum(p.runs for p in parts),
            "inclusive_flops": True}
    table = builder.build({**info, **(meta or {})})
    return table if parent is None else with_outer(table, parent)  # rows are the calls, in order


def _nest(builder: TableBuilder, thread: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray, ident: np.ndarray,
          flops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Self time (µs), identity and FLOPs of each call once control-flow bodies are nested in their
    parents, and each call's enclosing call (None when nothing nests)."""
    flow_ident = np.asarray([t[1] in CONTROL_FLOW_OPS for t in builder.idents()], dtype=bool)
    flow = flow_ident[ident] if ident.size else np.zeros(0, dtype=bool)
    if not flow.any():
        return dur_us, ident, flops, None
    start = to_ns(ts_us)
    end = start + to_ns(dur_us)
    parent = enclosing(thread.astype(np.int64), start, end - start, flow)
    self_ns = self_times(parent, start, end)
    return self_ns / 1e3, _qualified(builder, ident, parent), body_sums(parent, flops, flow), parent


def _qualified(builder: TableBuilder, ident: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Identities of body calls renamed ``parent::node``, outermost first (a parent is renamed first)."""
    out = ident.copy()
    depth = depths(parent)
    for d in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == d)
        pairs, inverse = np.unique(np.stack([out[parent[rows]], ident[rows]]), axis=1, return_inverse=True)
        idents = builder.idents()
        codes = []
        for p, own in pairs.T.tolist():
            name, *rest = idents[own]
            codes.append(builder.ident(qualify(idents[p][0], name), *rest))
        out[rows] = np.asarray(codes, dtype=np.int64)[inverse.reshape(-1)]
    return out


def _int_ops_column(parts: Sequence[Part], builder: TableBuilder, ident: np.ndarray) -> np.ndarray:
    """Per row, its node's integer operations (NaN: unknown), from each part's per-identity figure."""
    values = np.full(len(builder.idents()), np.nan)
    for p in parts:
        codes = builder.ident_codes(p.idents)
        for local, count in p.ident_int_ops.items():
            values[codes[local]] = count
    return values[ident.astype(np.int64)] if ident.size else np.zeros(0)


def _counter_columns(parts: Sequence[Part], builder: TableBuilder, ident: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, the counts layerperf's drop-in session wrote for its node (NaN: not counted)."""
    per_ident: dict[int, dict[str, float]] = {}
    for p in parts:
        codes = builder.ident_codes(p.idents)
        for local, counts in p.ident_counters.items():
            per_ident[codes[local]] = counts
    labels = list(dict.fromkeys(label for counts in per_ident.values() for label in counts))
    columns = {}
    for label in labels:
        values = np.full(len(builder.idents()), np.nan)
        for code, counts in per_ident.items():
            values[code] = counts.get(label, np.nan)
        columns[label] = values[ident.astype(np.int64)]
    return columns


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> Calls:
    return merge([part(stream)], meta)
