"""Turn ONNX Runtime's node events and optimized graph into Profile layers and runs."""

from __future__ import annotations

from typing import Any

import onnx

from layerperf.backends.ort_names import nodes_by_name
from layerperf.backends.ort_trace import NodeEvent, RunEvents, memory_figures, tensor_infos
from layerperf.cost import Cost, is_known, node_cost
from layerperf.cost.graph import attributes
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


def make_layer(ev: NodeEvent, graph_node: onnx.NodeProto | None, initializers: dict[str, TensorInfo]) -> Layer:
    in_names = list(graph_node.input) if graph_node is not None else []
    out_names = list(graph_node.output) if graph_node is not None else []
    inputs = tensor_infos(ev.args.get("input_type_shape"), in_names, initializers)
    outputs = tensor_infos(ev.args.get("output_type_shape"), out_names)
    domain = graph_node.domain if graph_node is not None else ""
    op_type = ev.op_type or (graph_node.op_type if graph_node is not None else "")
    attrs = attributes(graph_node) if graph_node is not None else {}
    cost = node_cost(op_type, domain, attrs, inputs, outputs)
    return Layer(
        name=ev.name, op_type=op_type, domain=domain, provider=ev.provider,
        inputs=tuple(t for t in inputs if t is not None), outputs=tuple(t for t in outputs if t is not None),
        param_bytes=_param_bytes(inputs, initializers), flops=cost.flops,
        bytes_read=cost.bytes_read, bytes_written=cost.bytes_written, memory=memory_figures(ev.args),
    )


def build_layers_and_runs(runs: list[tuple[int, RunEvents]], optimized: onnx.ModelProto | None,
                          origin_ns: int, model: onnx.ModelProto | None = None) -> tuple[list[Layer], list[Run]]:
    """Layers in first-seen execution order; runs as spans relative to ``origin_ns``.

    ``model`` (the model as given to ONNX Runtime) lets unnamed nodes of the optimized graph be found
    under the names the profiler gives them.
    """
    observed = [(ev.name, ev.op_type or None) for ev in runs[0][1].nodes] if runs else None
    graph_nodes = nodes_by_name(optimized.graph, model.graph if model is not None else None, observed) \
        if optimized is not None else {}
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
                layers.append(make_layer(ev, graph_nodes.get(ev.name), initializers))
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
    """Op types whose FLOPs the cost model does not know, for the user-facing warning."""
    return sorted({f"{layer.domain + '.' if layer.domain else ''}{layer.op_type}" for layer in layers
                   if not is_known(layer.op_type, layer.domain)})


__all__ = ["Cost", "build_layers_and_runs", "graph_summary", "make_layer", "unknown_cost_ops"]
