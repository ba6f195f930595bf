"""What the predictor knows of a layer and of the run it is in, as numbers.

A layer (:class:`Op`) is what the store's ``layers`` rows and a model's optimized graph both tell
without timing it: its op type, shapes, element types and work (FLOPs, integer operations, bytes,
weights). A run (:class:`RunFactors`) is a configuration's factors: backend, batch, intra-op threads,
optimization level, and the resource factors where the store has them — the CPU set's size,
ONNX Runtime's inter-op threads, a co-runner beside the run (on the same or other cores) and the
machine's cache sizes. :func:`feature_row` turns both into one row of :data:`FEATURES`; unknown is NaN,
which gradient-boosted trees route on their own, never 0.

The predicted quantity is time per unit of work (:func:`work`): µs per FLOP (integer operations
counted as FLOPs) where the layer has any, else µs per byte moved, else µs per call. Trees cannot
extrapolate, but a rate can: a layer larger than any the store holds is predicted at the rate of
the largest ones like it, not at their time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.data.layer import Layer

# ONNX's recurrent op types and their gates: X, W [dirs, gates x hidden, input], R [dirs, gates x hidden, hidden]
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OPT_LEVELS = ("disable", "basic", "extended", "all")

FEATURES = (
    "log2_flops", "log2_int_ops", "log2_bytes_read", "log2_bytes_written", "log2_param_bytes", "padded_ratio",
    "log2_intensity", "log2_in0_elems", "in0_rank", "in0_dim1", "log2_in0_last", "log2_in1_elems", "in1_dim1",
    "in1_window", "log2_out0_elems", "out0_dim1", "log2_out0_last", "inputs", "outputs", "in0_elem_bytes",
    "in0_integer", "log2_in0_first", "log2_hidden_over_input", "threads", "batch", "opt_level", "inter_op",
    "cpu_count", "corun", "corun_shared",
    "log2_l2_bytes", "log2_l3_bytes",
)

ELEM_BYTES = {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4, "float16": 2,
              "bfloat16": 2, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1}


@dataclass(frozen=True, slots=True)
class Op:
    """One layer as the predictor sees it: the store's ``layers`` columns of the same names (shapes and
    dtypes as text, ``1x64x56x56;64x64x3x3``), without the measurements."""

    name: str
    op_type: str
    domain: str
    in_shapes: str
    out_shapes: str
    in_dtypes: str
    out_dtypes: str
    flops: int | None
    int_ops: int | None
    bytes_read: int | None
    bytes_written: int | None
    param_bytes: int
    padded_flops: int | None

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Op:
        """From a ``layers`` row (a mapping of its column names)."""
        return cls(str(row["name"]), str(row["op_type"]), str(row["domain"] or ""), str(row["in_shapes"] or ""),
                   str(row["out_shapes"] or ""), str(row["in_dtypes"] or ""), str(row["out_dtypes"] or ""),
                   row["flops"], row["int_ops"], row["bytes_read"], row["bytes_written"], int(row["param_bytes"] or 0),
                   row["padded_flops"])

    @classmethod
    def of_layer(cls, layer: Layer) -> Op:
        """From a profile's or a graph's :class:`~layerperf.data.layer.Layer`."""
        return cls(layer.name, layer.op_type, layer.domain, layer.in_shapes, layer.out_shapes, layer.in_dtypes,
                   layer.out_dtypes, layer.flops, layer.int_ops, layer.bytes_read, layer.bytes_written,
                   layer.param_bytes, layer.flops_as_stored)

    def key(self, backend: str) -> str:
        """The op type a regressor is trained for: ``onnxruntime:com.microsoft.nchwc.Conv``."""
        return f"{backend}:{self.domain + '.' if self.domain else ''}{self.op_type}"


@dataclass(frozen=True, slots=True)
class RunFactors:
    """A configuration's factors, as the store's ``configs`` and ``machines`` rows give them (None: unknown,
    or the factor does not apply). ``inter_op`` None: sequential execution; ``cpu_count``: CPUs the run may
    use (its pinned set, else the machine's); ``corun``: a co-runner beside it, ``corun_shared``: on its
    CPUs."""

    backend: str
    batch: int | None
    threads: int
    opt_level: str | None = "all"
    inter_op: int | None = None
    cpu_count: int | None = None
    corun: bool = False
    corun_shared: bool = False
    l2_bytes: int | None = None
    l3_bytes: int | None = None


def is_recurrent(op: Op) -> bool:
    """Whether the layer is one of ONNX's recurrent ops (:data:`RECURRENT_GATES`)."""
    return op.op_type in RECURRENT_GATES and op.domain in ("", "ai.onnx")


def work(op: Op) -> tuple[float, str]:
    """The unit a layer's time is predicted per: (its FLOPs and integer operations, ``flop``), else (its
    bytes, ``byte``), else (1, ``call``)."""
    ops = (op.flops or 0) + (op.int_ops or 0)
    if ops > 0:
        return float(ops), "flop"
    moved = (op.bytes_read or 0) + (op.bytes_written or 0)
    if moved > 0:
        return float(moved), "byte"
    return 1.0, "call"


def _log2(value: float | None) -> float:
    return math.log2(1.0 + value) if value is not None and value >= 0 else math.nan


def shape_dims(text: str) -> list[list[int] | None]:
    """``1x64x56x56;64`` -> [[1, 64, 56, 56], [64]]; a shape with an unknown dim (``?``) is None."""
    out: list[list[int] | None] = []
    for item in text.split(";") if text else []:
        if item == "scalar":
            out.append([])
            continue
        try:
            out.append([int(d) for d in item.split("x")])
        except ValueError:
            out.append(None)
    return out


def _elems(shape: list[int] | None) -> float:
    return float(math.prod(shape)) if shape is not None else math.nan


def shape_at(shapes: list[list[int] | None], i: int) -> list[int] | None:
    return shapes[i] if i < len(shapes) else None


def _dim(shape: list[int] | None, i: int) -> float:
    return float(shape[i]) if shape is not None and -len(shape) <= i < len(shape) else math.nan


def _window(shape: list[int] | None) -> float:
    """A weight's spatial window (kh*kw of a conv's [out, in/group, kh, kw]); NaN below rank 3."""
    return float(math.prod(shape[2:])) if shape is not None and len(shape) >= 3 else math.nan


def _ratio(a: float, b: float) -> float:
    return math.log2(a / b) if a > 0 and b > 0 else math.nan


def _num(value: float | int | None) -> float:
    return float(value) if value is not None else math.nan


def _op_features(op: Op) -> list[float]:
    ins, outs = shape_dims(op.in_shapes), shape_dims(op.out_shapes)
    in0, in1, out0 = shape_at(ins, 0), shape_at(ins, 1), shape_at(outs, 0)
    ops = (op.flops or 0) + (op.int_ops or 0) if op.flops is not None or op.int_ops is not None else None
    moved = (op.bytes_read or 0) + (op.bytes_written or 0) if op.bytes_read is not None else None
    intensity = math.log2((ops + 1) / (moved + 1)) if ops is not None and moved is not None else math.nan
    padded = op.padded_flops / op.flops if op.flops and op.padded_flops is not None else math.nan
    dtype = op.in_dtypes.split(";")[0] if op.in_dtypes else ""
    return [
        _log2(op.flops), _log2(op.int_ops), _log2(op.bytes_read), _log2(op.bytes_written), _log2(op.param_bytes),
        padded, intensity, _log2(_elems(in0)), _num(len(in0)) if in0 is not None else math.nan, _dim(in0, 1),
        _log2(_dim(in0, -1)), _log2(_elems(in1)), _dim(in1, 1), _window(in1), _log2(_elems(out0)), _dim(out0, 1),
        _log2(_dim(out0, -1)), float(len(ins)), float(len(outs)), _num(ELEM_BYTES.get(dtype)),
        float(dtype.startswith(("int", "uint"))) if dtype else math.nan,
        _log2(_dim(in0, 0)),  # the batch mostly; a time-major recurrent layer's steps
        # a recurrent layer's weights read at every step over those read once for all steps (R over W: its
        # hidden size over its input size), which sets how much of its time the step-by-step part takes
        _ratio(_elems(shape_at(ins, 2)), _elems(in1)) if is_recurrent(op) else math.nan,
    ]


def _run_features(run: RunFactors) -> list[float]:
    level = OPT_LEVELS.index(run.opt_level) if run.opt_level in OPT_LEVELS else math.nan
    return [float(run.threads), _num(run.batch), level, -1.0 if run.inter_op is None else float(run.inter_op),
            _num(run.cpu_count), float(run.corun), float(run.corun_shared), _log2(run.l2_bytes),
            _log2(run.l3_bytes)]


def feature_row(op: Op, run: RunFactors) -> list[float]:
    """The layer's and the run's features, in :data:`FEATURES` order."""
    return _op_features(op) + _run_features(run)


def feature_matrix(rows: list[tuple[Op, RunFactors]]) -> np.ndarray:
    """:func:`feature_row` of each (op, run), as a float64 matrix (one row each)."""
    return np.array([feature_row(op, run) for op, run in rows], dtype=np.float64).reshape(len(rows), len(FEATURES))
