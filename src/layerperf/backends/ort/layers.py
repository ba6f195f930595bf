"""Turn ONNX Runtime's node events and optimized graph into Profile layers and runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx

from layerperf import cost as cost_model
from layerperf.backends.ort.scope import Scoped, graph_initializers, graph_node, scoped_nodes
from layerperf.cost.onnx.graph import attributes
from layerperf.cost.onnx.layout import Channels, has_blocked, real_channels, real_view
from layerperf.data.cost import Cost
from layerperf.data.extension import OrtNodeMemory
from layerperf.data.nesting import CONTROL_FLOW_OPS
from layerperf.data.profile import GraphSummary, Layer, Run, Span
from layerperf.data.tensor import TensorInfo
from layerperf.readers.ort import NodeEvent, RunEvents, memory_figures, tensor_infos


def _param_bytes(inputs: tuple[Any, ...], initializers: dict[str, TensorInfo]) -> int:
    # Not ONNX Runtime's parameter_size: it leaves out weights a kernel has pre-packed (a Gemm's
    # transposed weight reads as 0), so count the optimized graph's initializers the node consumes.
    return sum(t.nbytes or 0 for t in inputs if t is not None and t.name in initializers)


def initializer_infos(model: onnx.ModelProto | None) -> dict[str, TensorInfo]:
    if model is None:
        return {}
    return graph_initializers(model.graph)


def _event_tensors(ev: NodeEvent, graph_node: onnx.NodeProto | None, initializers: dict[str, TensorInfo],
                   ) -> tuple[tuple[TensorInfo | None, ...], tuple[TensorInfo | None, ...]]:
    in_names = list(graph_node.input) if graph_node is not None else []
    out_names = list(graph_node.output) if graph_node is not None else []
    return (tensor_infos(ev.args.get("input_type_shape"), in_names, initializers),
            tensor_infos(ev.args.get("output_type_shape"), out_names))


def make_layer(ev: NodeEvent, graph_node: onnx.NodeProto | None, initializers: dict[str, TensorInfo],
               channels: Channels | None = None) -> Layer:
    inputs, outputs = _event_tensors(ev, graph_node, initializers)
    return node_layer(ev.name, ev.op_type, graph_node, inputs, outputs, initializers, channels, ev.provider,
                      ev.parent, OrtNodeMemory.from_figures(memory_figures(ev.args)))


def node_layer(name: str, op_type: str | None, graph_node: onnx.NodeProto | None,
               inputs: tuple[TensorInfo | None, ...], outputs: tuple[TensorInfo | None, ...],
               initializers: dict[str, TensorInfo], channels: Channels | None = None, provider: str = "",
               parent: str | None = None, extension: OrtNodeMemory | None = None) -> Layer:
    """A layer of the optimized graph from its node and tensors (as recorded at run time, or inferred):
    its cost from the cost model on the real (unpadded) view of an NCHWc layout's tensors."""
    if channels and graph_node is not None:
        inputs, outputs = real_view(graph_node, inputs, outputs, channels)
    domain = graph_node.domain if graph_node is not None else ""
    op_type = op_type or (graph_node.op_type if graph_node is not None else "")
    attrs = attributes(graph_node) if graph_node is not None else {}
    cost = cost_model.of(domain, op_type, inputs, outputs, attrs)
    return Layer(
        name=name, op_type=op_type, domain=domain, provider=provider,
        inputs=tuple(t for t in inputs if t is not None), outputs=tuple(t for t in outputs if t is not None),
        param_bytes=_param_bytes(inputs, initializers), flops=cost.flops,
        bytes_read=cost.bytes_read, bytes_written=cost.bytes_written, int_ops=cost.int_ops,
        padded_flops=cost.padded_flops, parent=parent, extension=extension,
    )


def _top_level(runs: list[tuple[int, RunEvents]]) -> list[NodeEvent]:
    return [ev for ev in runs[0][1].nodes if ev.parent is None] if runs else []


def layout_channels(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                    model: onnx.ModelProto | None = None,
                    original: Mapping[str, TensorInfo] | None = None) -> Channels:
    """Real channel counts of the tensors an NCHWc layout padded, from the shapes the first run
    recorded; ``original`` holds the original model's tensors (``model`` as in
    :func:`build_layers_and_runs`)."""
    if not has_blocked(optimized) or not runs or optimized is None:
        return Channels()
    top = _top_level(runs)
    graph_nodes = scoped_nodes(optimized, model, [(ev.name, ev.op_type or None) for ev in top])
    initializers = initializer_infos(optimized)
    recorded: dict[str, TensorInfo] = dict(initializers)
    for ev in top:
        scope = graph_node(ev, graph_nodes)
        if scope is not None:
            ins, outs = _event_tensors(ev, scope[0], initializers)
            recorded.update({t.name: t for t in (*ins, *outs) if t is not None and t.name and t.name not in recorded})
    return real_channels(optimized, recorded, original)


def build_layers_and_runs(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                          origin_ns: int, model: onnx.ModelProto | None = None,
                          channels: Channels | None = None) -> tuple[list[Layer], list[Run]]:
    """Layers in first-seen execution order; runs as spans relative to ``origin_ns``.

    ``model`` (the model as given to ONNX Runtime) lets unnamed nodes of the optimized graph be found
    under the names the profiler gives them. A layer shows its first call's shapes; when its shapes
    change from call to call (a loop body over a growing tensor), its FLOPs and bytes are the mean
    over its calls. A control-flow layer's FLOPs become its body's (:func:`body_flops`). ``channels``
    (:func:`layout_channels`) gives the real counts of channels an NCHWc layout padded.
    """
    observed = [(ev.name, ev.op_type or None) for ev in _top_level(runs)] if runs else None
    graph_nodes = scoped_nodes(optimized, model, observed)
    initializers = initializer_infos(optimized)
    index: dict[str, int] = {}
    layers: list[Layer] = []
    scopes: list[Scoped | None] = []
    variants: list[_Variants] = []
    out_runs: list[Run] = []
    last_event: dict[str, NodeEvent] = {}
    for session_ns, run in runs:
        base = session_ns - origin_ns
        spans = []
        for ev in run.nodes:
            if ev.name not in index:
                index[ev.name] = len(layers)
                scopes.append(graph_node(ev, graph_nodes))
                node, inits = scopes[-1] or (None, initializers)
                layers.append(make_layer(ev, node, inits, channels))
                variants.append(_Variants())
            variants[index[ev.name]].add(ev)
            last_event[ev.name] = ev
            spans.append(Span(index[ev.name], base + ev.ts_us * 1000, ev.dur_us * 1000, ev.tid))
        out_runs.append(Run(base + run.ts_us * 1000, run.dur_us * 1000, spans))
    for layer, scope, calls in zip(layers, scopes, variants, strict=True):
        # the arena's figures settle after warm-up: the last call's
        layer.extension = OrtNodeMemory.from_figures(memory_figures(last_event[layer.name].args))
        if len(calls.events) > 1:
            _mean_cost(layer, calls, scope or (None, initializers), channels)
    body_flops(layers, out_runs)
    return layers, out_runs


@dataclass(slots=True)
class _Variants:
    """The distinct shapes one layer's calls were recorded with (an event of each) and their counts."""

    events: list[NodeEvent] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def add(self, ev: NodeEvent) -> None:
        shapes = _shapes(ev)
        for i, seen in enumerate(self.events):
            if _shapes(seen) == shapes:
                self.counts[i] += 1
                return
        self.events.append(ev)
        self.counts.append(1)


def _shapes(ev: NodeEvent) -> tuple[Any, Any]:
    return ev.args.get("input_type_shape"), ev.args.get("output_type_shape")


def _mean_cost(layer: Layer, calls: _Variants, scope: Scoped | tuple[None, dict[str, TensorInfo]],
               channels: Channels | None) -> None:
    node, inits = scope
    costs = [make_layer(ev, node, inits, channels) for ev in calls.events]
    n = sum(calls.counts)

    def mean(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            return None
        return round(sum(v * c for v, c in zip(known, calls.counts, strict=True)) / n)

    layer.flops = mean([c.flops for c in costs])
    layer.bytes_read = mean([c.bytes_read for c in costs])
    layer.bytes_written = mean([c.bytes_written for c in costs])
    layer.int_ops = mean([c.int_ops for c in costs])


def body_flops(layers: list[Layer], runs: list[Run]) -> None:
    """A control-flow layer's FLOPs per call: its body nodes' FLOPs over the calls they made
    (a Loop's body N times, an If's branch taken), averaged over its calls; unknown when any body
    node's are or no body node was recorded. Innermost parents first: a nested Loop counts as body."""
    calls = [0] * len(layers)
    for run in runs:
        for span in run.spans:
            calls[span.layer] += 1
    index = {layer.name: i for i, layer in enumerate(layers)}
    children: dict[int, list[int]] = {}
    for i, layer in enumerate(layers):
        if layer.parent is not None and layer.parent in index:
            children.setdefault(index[layer.parent], []).append(i)
    for p in sorted(children, key=lambda i: -_depth(layers, index, i)):
        kids = children[p]
        known = all(layers[k].flops is not None for k in kids) and calls[p] > 0
        total = sum((layers[k].flops or 0) * calls[k] for k in kids)
        layers[p].flops = round(total / calls[p]) if known else None


def _depth(layers: list[Layer], index: dict[str, int], i: int) -> int:
    d = 0
    while (parent := layers[i].parent) is not None and parent in index:
        i, d = index[parent], d + 1
    return d


def graph_summary(model: onnx.ModelProto | None) -> GraphSummary | None:
    """Graph inputs, outputs and initializer sizes of the executed graph (for memory analysis)."""
    if model is None:
        return None
    inits = initializer_infos(model)
    return GraphSummary(inputs=tuple(i.name for i in model.graph.input if i.name not in inits),
                        outputs=tuple(o.name for o in model.graph.output),
                        initializers={name: t.nbytes or 0 for name, t in inits.items()})


def unknown_cost_ops(layers: list[Layer]) -> list[str]:
    """Op types whose FLOPs and integer operations the cost model does not know, for the warning.

    A control-flow layer whose FLOPs its body gave is known; one whose body's are unknown (or was
    not recorded) is listed as ``Loop (body)``.
    """
    parents = {layer.parent for layer in layers if layer.parent is not None}
    out = set()
    for layer in layers:
        op = f"{layer.domain + '.' if layer.domain else ''}{layer.op_type}"
        if layer.name in parents or layer.op_type in CONTROL_FLOW_OPS:
            if layer.flops is None:
                out.add(f"{op} (body)")
        elif not cost_model.covers(layer.domain, layer.op_type):
            out.add(op)
    return sorted(out)


__all__ = ["Cost", "build_layers_and_runs", "graph_summary", "initializer_infos", "layout_channels", "make_layer",
           "node_layer", "unknown_cost_ops"]
