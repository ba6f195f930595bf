"""The model's own channel counts of the tensors a blocked layout pads (ONNX Runtime's NCHWc).

At opt level ``all`` ONNX Runtime's NCHWc transformer stores activations as [N, C', H, W] with C'
the channel count rounded up to its block (8 channels with AVX2, 16 with AVX-512), and pads Conv
weights with zero filters to [C'out, C'in/group, kh, kw]. The padded channels are work of the
layout, not of the model, so the cost model counts FLOPs on the real count. The real count of
each blocked tensor comes from the graph, in this order:

1. ReorderInput: the plain tensor it reorders (whose stored shape is the model's);
   ReorderOutput's ``channels`` attribute: the count of the tensor it restores.
2. Ops that keep the channel count carry it forward and back: pools, Upsample, a depthwise Conv,
   a Conv's Sum input (input 3) and its output, elementwise ops between blocked tensors; a Concat
   of blocked tensors has the sum of its inputs' counts.
3. The original model's shapes: ONNX Runtime names an NCHWc node ``<tensor>_nchwc`` after the
   model's tensor it computes, whose channel count is taken when it fits (not above the stored
   count, less than one block of 16 below it).
4. The Conv's weights: the transformer pads them with zeros, so their nonzero values number
   C_out * C_in/group * kh * kw for the real counts (the input's count being known).

A blocked tensor none of these settles keeps its stored count (:attr:`Channels.unresolved`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from layerperf.data.tensor import TensorInfo

NCHWC = "com.microsoft.nchwc"
MAX_BLOCK = 16  # the widest NCHWc block (AVX-512): padding adds fewer channels than this
_KEEP_CHANNELS = frozenset(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Upsample"))


@dataclass(frozen=True, slots=True)
class Channels:
    """Real channel counts of blocked tensors (those settled), and the blocked tensors left unsettled."""

    real: dict[str, int] = field(default_factory=dict)
    unresolved: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.real)


def has_blocked(model: onnx.ModelProto | None) -> bool:
    """Whether the graph runs any node in the NCHWc layout."""
    return model is not None and any(n.domain == NCHWC for n in model.graph.node)


def blocked_tensors(model: onnx.ModelProto) -> list[str]:
    """Tensors stored in the blocked layout: outputs of NCHWc nodes (ReorderOutput aside) and of the
    standard ops ONNX Runtime lets run on them (elementwise, Concat), in graph order."""
    blocked: dict[str, None] = {}
    for node in model.graph.node:
        if node.domain == NCHWC:
            if node.op_type != "ReorderOutput":
                blocked.update(dict.fromkeys(o for o in node.output if o))
        elif any(i in blocked for i in node.input) and node.op_type != "Shape":
            blocked.update(dict.fromkeys(o for o in node.output if o))
    return list(blocked)


class _Groups:
    """Union-find over tensor names: tensors that must have the same channel count."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.value: dict[str, int] = {}

    def find(self, name: str) -> str:
        root = self.parent.setdefault(name, name)
        while root != self.parent[root]:
            root = self.parent[root]
        self.parent[name] = root
        return root

    def union(self, names: Iterable[str]) -> None:
        roots = [self.find(n) for n in names]
        if not roots:
            return
        first = roots[0]
        for root in roots[1:]:
            if root != first:
                self.parent[root] = first
                if root in self.value:
                    self.value.setdefault(first, self.value.pop(root))

    def get(self, name: str) -> int | None:
        return self.value.get(self.find(name))

    def set(self, name: str, channels: int) -> bool:
        root = self.find(name)
        if root in self.value:
            return False
        self.value[root] = channels
        return True


def _channels_of(info: TensorInfo | None, channels_last: bool = False) -> int | None:
    if info is None or not info.is_static or info.shape is None or len(info.shape) < 2:
        return None
    return int(info.shape[-1] if channels_last else info.shape[1])


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def _is_depthwise(node: onnx.NodeProto, weights: Mapping[str, onnx.TensorProto]) -> bool:
    w = weights.get(node.input[1]) if len(node.input) > 1 else None
    group = _attr(node, "group", 1)
    return w is not None and len(w.dims) == 4 and group > 1 and w.dims[1] == 1 and group == w.dims[0]


def _link(model: onnx.ModelProto, blocked: set[str], shapes: Mapping[str, TensorInfo],
          weights: Mapping[str, onnx.TensorProto], groups: _Groups) -> None:
    """Rules 1 and 2: unite tensors of equal count, and seed the counts the graph states."""
    for node in model.graph.node:
        ins = [i for i in node.input if i in blocked]
        if node.domain == NCHWC and node.op_type == "ReorderInput":
            known = _channels_of(shapes.get(node.input[0]), bool(_attr(node, "channels_last", 0)))
            if known is not None:
                groups.set(node.output[0], known)
        elif node.domain == NCHWC and node.op_type == "ReorderOutput":
            stated = _attr(node, "channels", 0)
            if stated > 0 and node.input and node.input[0]:
                groups.set(node.input[0], stated)
        elif node.domain == NCHWC and node.op_type == "Conv":
            tied = [node.output[0]] + ([node.input[3]] if len(node.input) > 3 and node.input[3] else [])
            if _is_depthwise(node, weights) and node.input[0] in blocked:
                tied.append(node.input[0])
            groups.union(tied)
        elif node.domain == NCHWC and node.op_type in _KEEP_CHANNELS:
            groups.union([node.input[0], node.output[0]])
        elif node.domain != NCHWC and ins and node.op_type not in ("Concat", "Shape") and node.output:
            groups.union([*ins, node.output[0]])


def _sum_concats(model: onnx.ModelProto, blocked: set[str], groups: _Groups) -> None:
    """A Concat of blocked tensors has the sum of their counts, once all of them are known."""
    changed = True
    while changed:
        changed = False
        for node in model.graph.node:
            if node.op_type != "Concat" or node.domain == NCHWC or not node.output or node.output[0] not in blocked:
                continue
            parts = [groups.get(i) for i in node.input if i]
            if parts and None not in parts:
                changed |= groups.set(node.output[0], sum(p for p in parts if p is not None))


def _fits(real: int | None, stored: int | None) -> bool:
    return real is not None and real > 0 and (stored is None or stored - MAX_BLOCK < real <= stored)


def _by_name(model: onnx.ModelProto, original: Mapping[str, TensorInfo], shapes: Mapping[str, TensorInfo],
             groups: _Groups) -> None:
    """Rule 3: an NCHWc node named after the model tensor it computes takes that tensor's count."""
    for node in model.graph.node:
        if node.domain != NCHWC or node.op_type.startswith("Reorder") or not node.name.endswith("_nchwc"):
            continue
        info = original.get(node.name[: -len("_nchwc")])
        real = _channels_of(info) if info is not None and info.shape is not None and len(info.shape) == 4 else None
        out = node.output[0]
        if real is not None and _fits(real, _channels_of(shapes.get(out))):
            groups.set(out, real)


def _weights_count(node: onnx.NodeProto, weights: Mapping[str, onnx.TensorProto], blocked: set[str],
                   groups: _Groups) -> int | None:
    """Rule 4: the Conv's real output count from the nonzero weights, C_out * C_in/group * kh * kw.

    ONNX Runtime stores the weights reordered into its blocks, so which filter a value belongs to
    is the kernel's business; their count is not. Padded filters and padded input channels are
    zeros; a model whose own weights hold exact zeros gives no exact quotient, and no count.
    """
    w = weights.get(node.input[1]) if len(node.input) > 1 else None
    if w is None or len(w.dims) != 4 or not (w.raw_data or w.float_data):
        return None
    x = node.input[0]
    grouped = _attr(node, "group", 1) > 1
    per_group = groups.get(x) if x in blocked and not grouped else int(w.dims[1])
    if per_group is None or per_group <= 0:
        return None
    taps = per_group * int(w.dims[2]) * int(w.dims[3])
    nonzero = int(np.count_nonzero(numpy_helper.to_array(w)))
    real = nonzero // taps
    return real if nonzero % taps == 0 and _fits(real, int(w.dims[0])) else None


def _by_weights(model: onnx.ModelProto, weights: Mapping[str, onnx.TensorProto], blocked: set[str],
                groups: _Groups) -> bool:
    """Rule 4 for every Conv output still unsettled whose input count is known; whether any was settled."""
    changed = False
    for node in model.graph.node:
        if node.domain == NCHWC and node.op_type == "Conv" and groups.get(node.output[0]) is None:
            real = _weights_count(node, weights, blocked, groups)
            if real is not None:
                changed |= groups.set(node.output[0], real)
    return changed


def real_channels(model: onnx.ModelProto | None, shapes: Mapping[str, TensorInfo],
                  original: Mapping[str, TensorInfo] | None = None) -> Channels:
    """The real channel count of every blocked tensor of ``model`` (an optimized graph).

    ``shapes`` are the tensors' stored shapes (recorded at run time, or inferred); ``original``
    the original model's tensors, for rule 3.
    """
    if model is None or not has_blocked(model):
        return Channels()
    blocked = blocked_tensors(model)
    blocked_set = set(blocked)
    weights = {i.name: i for i in model.graph.initializer}
    groups = _Groups()
    _link(model, blocked_set, shapes, weights, groups)
    _sum_concats(model, blocked_set, groups)
    if original:
        _by_name(model, original, shapes, groups)
        _sum_concats(model, blocked_set, groups)
    while _by_weights(model, weights, blocked_set, groups):  # each settled Conv gives the next its input
        _sum_concats(model, blocked_set, groups)
    real = {name: c for name in blocked if (c := groups.get(name)) is not None}
    return Channels(real, tuple(name for name in blocked if name not in real))


def real_view(node: onnx.NodeProto, inputs: tuple[TensorInfo | None, ...], outputs: tuple[TensorInfo | None, ...],
              channels: Channels) -> tuple[tuple[TensorInfo | None, ...], tuple[TensorInfo | None, ...]]:
    """The node's tensors with ``real_shape`` set where their stored channel count is padded.

    An NCHWc Conv's weights [C'out, C'in/group, kh, kw] and bias [C'out] get the real counts of its
    output and (for an ungrouped Conv on a blocked input) its input.
    """
    if not channels:
        return inputs, outputs
    real = channels.real
    ins = tuple(_with_channels(t, real.get(name)) for t, name in zip(inputs, node.input, strict=False))
    ins = ins + inputs[len(ins):]
    outs = tuple(_with_channels(t, real.get(name)) for t, name in zip(outputs, node.output, strict=False))
    outs = outs + outputs[len(outs):]
    if node.domain == NCHWC and node.op_type == "Conv" and len(ins) > 1:
        ins = _real_conv_params(node, ins, real)
    return ins, outs


def _with_channels(t: TensorInfo | None, real: int | None, axis: int = 1) -> TensorInfo | None:
    if t is None or real is None or not t.is_static or t.shape is None or len(t.shape) <= axis:
        return t
    if t.shape[axis] == real:
        return t
    shape = (*t.shape[:axis], real, *t.shape[axis + 1:])
    return TensorInfo(t.name, t.shape, t.dtype, shape)


def _real_conv_params(node: onnx.NodeProto, ins: tuple[TensorInfo | None, ...],
                      real: Mapping[str, int]) -> tuple[TensorInfo | None, ...]:
    out_real = real.get(node.output[0])
    in_real = real.get(node.input[0])
    w = ins[1]
    if w is not None and w.is_static and w.shape is not None and len(w.shape) == 4:
        grouped = _attr(node, "group", 1) > 1
        per_group_in = in_real if in_real is not None and not grouped else int(w.shape[1])
        shape = (out_real if out_real is not None else int(w.shape[0]), per_group_in, *w.shape[2:])
        w = TensorInfo(w.name, w.shape, w.dtype, shape if shape != w.shape else None)
    b = _with_channels(ins[2], out_real, axis=0) if len(ins) > 2 else None
    return (ins[0], w, *((b,) if len(ins) > 2 else ()), *ins[3:])
