"""One node of a real model as a one-node model, with the shapes, attributes and weights it has there.

The graph is the one the runtime executes at the requested optimization level (ONNX Runtime: saved
through ``optimized_model_filepath``, as ``layerperf profile`` sees it), so a node may be a fused or
NCHWc node of a contrib domain; the backend's single-operator capability gives it, with its nodes by
the names its profiles show (:meth:`layerperf.backends.base.SingleOp.node_graph`). That graph carries no
shapes for intermediate tensors, and onnx's shape inference does not know the contrib ops, so the
model is run once, by the same runtime, for the values of the node's inputs and outputs
(:meth:`~layerperf.backends.base.SingleOp.values`): that gives their exact shapes, and the node's
run-time inputs are fed the very values they had in the model (real activations, real indices and
masks). Inputs that are initializers in the graph stay initializers, with their real values. Weights in
external data stay in their files for the probing run; only the node's own are read in.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from layerperf import backends
from layerperf.backends.base import NodeGraph
from layerperf.bench.build import OneNode
from layerperf.bench.runtime import AS_WRITTEN, MOST_OPTIMIZED, GraphAt, runner, runtime_options
from layerperf.cost.onnx.graph import attributes, tensor_infos
from layerperf.cost.onnx.layout import has_blocked, real_channels, real_view
from layerperf.data.tensor import TensorInfo, onnx_elem_to_dtype
from layerperf.errors import InputError
from layerperf.models import extdata
from layerperf.models.inputs import make_feed, onnx_input_specs
from layerperf.models.source import ModelSource, open_model


def _names_hint(names: Sequence[str], name: str) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if close:
        return "did you mean " + ", ".join(close) + "?"
    return "nodes: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def find_node(graph_at: GraphAt, name: str, opt_level: str) -> onnx.NodeProto:
    """Node ``name`` of the graph run at ``opt_level``, or an InputError that says where it is.

    Names are those ``layerperf profile`` shows: a node's own, or for an unnamed node the one the
    runtime's profiler gives it (ONNX Runtime: ``<op_type>_<index>``, see :mod:`layerperf.backends.ort.names`).
    ``graph_at(level)``: the graph at a level; other levels than ``opt_level`` are asked for only to
    tell where a name is.
    """
    nodes = graph_at(opt_level).nodes
    if name in nodes:
        return nodes[name]
    names = list(nodes)
    if opt_level != AS_WRITTEN and name in graph_at(AS_WRITTEN).nodes:
        raise InputError(f"node '{name}' of the model is fused or renamed at --opt-level {opt_level}",
                         hint="drop --opt-level to measure it as written, or name a node of the optimized graph "
                              f"(`layerperf profile --opt-level {opt_level}` lists them): {_names_hint(names, name)}")
    if opt_level == AS_WRITTEN and name in graph_at(MOST_OPTIMIZED).nodes:  # a name copied from an optimized profile
        raise InputError(f"node '{name}' is not in the model as written but in the graph the runtime runs "
                         "after its optimizations", hint=f"pass --opt-level {MOST_OPTIMIZED}")
    hint = _names_hint(names, name)
    if opt_level != AS_WRITTEN:  # fusions rename nodes: the original names are there at "disable"
        hint += f"; `layerperf profile --opt-level {opt_level}` lists the names at this level"
    raise InputError(f"no node named '{name}' in the graph at --opt-level {opt_level} ({len(names)} nodes)",
                     hint=hint)


def one_node_model(model: onnx.ModelProto, node: onnx.NodeProto, values: dict[str, np.ndarray],
                   name: str | None = None, data_dir: Path | None = None) -> onnx.ModelProto:
    """``node`` alone, its weights read in from external data in ``data_dir`` where they are there."""
    inits = {i.name: i for i in model.graph.initializer}
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype),
                                                  values[n].shape)
                    for n in dict.fromkeys(node.input) if n and n not in inits]
    outputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype), values[n].shape)
               for n in node.output if n]
    kept = [extdata.loaded(inits[n], data_dir) if data_dir else inits[n]
            for n in dict.fromkeys(node.input) if n in inits]
    graph = helper.make_graph([node], f"bench_{name or node.name}", graph_inputs, outputs, kept)
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                             producer_name="layerperf-bench")


def _info(name: str, values: dict[str, np.ndarray], inits: dict[str, onnx.TensorProto]) -> TensorInfo | None:
    if not name:
        return None
    if name in inits:
        return TensorInfo(name, tuple(inits[name].dims), onnx_elem_to_dtype(inits[name].data_type))
    return TensorInfo(name, tuple(values[name].shape), str(values[name].dtype))


def _real_channels(source: ModelSource, feed: dict[str, np.ndarray], graph_model: onnx.ModelProto,
                   node: onnx.NodeProto, inputs: tuple[TensorInfo | None, ...], outputs: tuple[TensorInfo | None, ...],
                   ) -> tuple[tuple[TensorInfo | None, ...], tuple[TensorInfo | None, ...]]:
    """The node's tensors with the real channel counts of those an NCHWc layout padded (so its FLOPs
    are the model's work, as ``layerperf profile`` counts them)."""
    if not has_blocked(graph_model):
        return inputs, outputs
    given = {k: TensorInfo(k, tuple(v.shape), str(v.dtype)) for k, v in feed.items()}
    stored = {**tensor_infos(graph_model, given), **{t.name: t for t in (*inputs, *outputs) if t is not None}}
    channels = real_channels(graph_model, stored, tensor_infos(source.proto, given))
    return real_view(node, inputs, outputs, channels)


def extract_node(model: str | Path | onnx.ModelProto, node_name: str, *, opt_level: str = "disable",
                 shapes: Sequence[str] = (), provider: str = "CPUExecutionProvider", seed: int = 0,
                 inputs: str | Path | None = None, backend: str = backends.DEFAULT, **zoo_options: Any) -> OneNode:
    """Node ``node_name`` of ``model`` (as ``backend`` runs it at ``opt_level``) as a one-node model with
    its real data.

    The model runs once on ``inputs`` (an .npz of arrays by input name), seeded random data for the
    inputs it lacks, to record the values the node receives.
    """
    single_op = runner(backend)
    options = runtime_options(backend, opt_level, provider)
    source = open_model(model, **zoo_options)
    feed = make_feed(source.proto, onnx_input_specs(source.proto), shapes, inputs, seed)
    graphs: dict[str, NodeGraph] = {}

    def graph_at(level: str) -> NodeGraph:
        if level not in graphs:
            graphs[level] = single_op.node_graph(source, feed, runtime_options(backend, level, provider))
        return graphs[level]

    node = find_node(graph_at, node_name, opt_level)
    graph_model = graph_at(opt_level).model
    inits = {i.name: i for i in graph_model.graph.initializer}
    runtime = [n for n in node.input if n and n not in inits]
    values = single_op.values(graph_model, [*runtime, *(n for n in node.output if n)], feed, options=options,
                              data_dir=source.data_dir, what=source.name)
    one = one_node_model(graph_model, node, values, node_name, source.data_dir)
    ins, outs = _real_channels(source, feed, graph_model, node, tuple(_info(n, values, inits) for n in node.input),
                               tuple(_info(n, values, {}) for n in node.output))
    return OneNode(
        model=one, feed={n: values[n] for n in dict.fromkeys(runtime)}, op_type=node.op_type,
        domain=node.domain, opset=next((o.version for o in graph_model.opset_import if o.domain == node.domain), 1),
        attrs=attributes(node), inputs=ins, outputs=tuple(t for t in outs if t is not None),
        weights=tuple(n for n in dict.fromkeys(node.input) if n in inits), node_name=node_name,
        source={**source.describe(), "node": node_name, "opt_level": opt_level},
    )
