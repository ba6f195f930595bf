"""Turn ONNX Runtime's node events and optimized graph into Profile layers and runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx

from layerperf.backends.ort_names import nodes_by_name
from layerperf.backends.ort_trace import NodeEvent, RunEvents, memory_figures, tensor_infos
from layerperf.cost import Cost, is_known, node_cost
from layerperf.cost.graph import attributes
from layerperf.cost.layout import Channels, has_blocked, real_channels, real_view
from layerperf.data import Layer, Run, Span
from layerperf.tensor import TensorInfo, onnx_elem_to_dtype


def _param_bytes(inputs: tuple[Any, ...], initializers: dict[str, TensorInfo]) -> int:
    # Not ONNX Runtime's parameter_size: it leaves out weights a kernel has pre-packed (a Gemm's
    # transposed weight reads as 0), so count the optimized graph's initializers the node consumes.
    return sum(t.nbytes or 0 for t in inputs if t is not None and t.name in initializers)


def initializer_infos(model: onnx.ModelProto | None) -> dict[str, TensorInfo]:
    if model is None:
        return {}
    return {i.name: TensorInfo(i.name, tuple(i.dims), onnx_elem_to_dtype(i.data_type))
            for i in model.graph.initializer}


def _event_tensors(ev: NodeEvent, graph_node: onnx.NodeProto | None, initializers: dict[str, TensorInfo],
                   ) -> tuple[tuple[TensorInfo | None, ...], tuple[TensorInfo | None, ...]]:
    in_names = list(graph_node.input) if graph_node is not None else []
    out_names = list(graph_node.output) if graph_node is not None else []
    return (tensor_infos(ev.args.get("input_type_shape"), in_names, initializers),
            tensor_infos(ev.args.get("output_type_shape"), out_names))


def make_layer(ev: NodeEvent, graph_node: onnx.NodeProto | None, initializers: dict[str, TensorInfo],
               channels: Channels | None = None) -> Layer:
    inputs, outputs = _event_tensors(ev, graph_node, initializers)
    if channels and graph_node is not None:
        inputs, outputs = real_view(graph_node, inputs, outputs, channels)
    domain = graph_node.domain if graph_node is not None else ""
    op_type = ev.op_type or (graph_node.op_type if graph_node is not None else "")
    attrs = attributes(graph_node) if graph_node is not None else {}
    cost = node_cost(op_type, domain, attrs, inputs, outputs)
    return Layer(
        name=ev.name, op_type=op_type, domain=domain, provider=ev.provider,
        inputs=tuple(t for t in inputs if t is not None), outputs=tuple(t for t in outputs if t is not None),
        param_bytes=_param_bytes(inputs, initializers), flops=cost.flops,
        bytes_read=cost.bytes_read, bytes_written=cost.bytes_written, memory=memory_figures(ev.args),
        int_ops=cost.int_ops, padded_flops=cost.padded_flops,
    )


def _graph_nodes(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                 model: onnx.ModelProto | None) -> dict[str, onnx.NodeProto]:
    observed = [(ev.name, ev.op_type or None) for ev in runs[0][1].nodes] if runs else None
    return nodes_by_name(optimized.graph, model.graph if model is not None else None, observed) \
        if optimized is not None else {}


def layout_channels(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                    model: onnx.ModelProto | None = None,
                    original: Mapping[str, TensorInfo] | None = None) -> Channels:
    """Real channel counts of the tensors an NCHWc layout padded, from the shapes the first run
    recorded; ``original`` holds the original model's tensors (``model`` as in
    :func:`build_layers_and_runs`)."""
    if not has_blocked(optimized) or not runs or optimized is None:
        return Channels()
    graph_nodes = _graph_nodes(runs, optimized, model)
    initializers = initializer_infos(optimized)
    recorded: dict[str, TensorInfo] = dict(initializers)
    for ev in runs[0][1].nodes:
        node = graph_nodes.get(ev.name)
        if node is not None:
            ins, outs = _event_tensors(ev, node, initializers)
            recorded.update({t.name: t for t in (*ins, *outs) if t is not None and t.name and t.name not in recorded})
    return real_channels(optimized, recorded, original)


def build_layers_and_runs(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                          origin_ns: int, model: onnx.ModelProto | None = None,
                          channels: Channels | None = None) -> tuple[list[Layer], list[Run]]:
    """Layers in first-seen execution order; runs as spans relative to ``origin_ns``.

    ``model`` (the model as given to ONNX Runtime) lets unnamed nodes of the optimized graph be found
    under the names the profiler gives them. ``channels`` (:func:`layout_channels`) gives the real
    counts of channels an NCHWc layout padded.
    """
    graph_nodes = _graph_nodes(runs, optimized, model)
    initializers = initializer_infos(optimized)
    index: dict[str, int] = {}
    layers: list[Layer] = []
    out_runs: list[Run] = []
    last_event: dict[str, NodeEvent] = {}
    for session_ns, run in runs:
        base = session_ns - origin_ns
        spans = []
        for ev in run.nodes:
            if ev.name not in index:
                index[ev.name] = len(layers)
                layers.append(make_layer(ev, graph_nodes.get(ev.name), initializers, channels))
            last_event[ev.name] = ev
            spans.append(Span(index[ev.name], base + ev.ts_us * 1000, ev.dur_us * 1000, ev.tid))
        out_runs.append(Run(base + run.ts_us * 1000, run.dur_us * 1000, spans))
    for layer in layers:  # arena figures settle after warm-up: keep the last run's
        layer.memory = memory_figures(last_event[layer.name].args)
    return layers, out_runs


def graph_summary(model: onnx.ModelProto | None) -> dict[str, Any]:
    """Graph inputs, outputs and initializer sizes of the executed graph (for memory analysis)."""
    if model is None:
        return {}
    inits = initializer_infos(model)
    return {
        "inputs": [i.name for i in model.graph.input if i.name not in inits],
        "outputs": [o.name for o in model.graph.output],
        "initializers": {name: t.nbytes or 0 for name, t in inits.items()},
    }


def unknown_cost_ops(layers: list[Layer]) -> list[str]:
    """Op types whose FLOPs and integer operations the cost model does not know, for the warning."""
    return sorted({f"{layer.domain + '.' if layer.domain else ''}{layer.op_type}" for layer in layers
                   if not is_known(layer.op_type, layer.domain)})


__all__ = ["Cost", "build_layers_and_runs", "graph_summary", "layout_channels", "make_layer", "unknown_cost_ops"]
