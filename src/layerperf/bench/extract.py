"""One node of a real model as a one-node model, with the shapes, attributes and weights it has there.

The graph is the one ONNX Runtime executes at the requested optimization level (saved through
``optimized_model_filepath``, as ``layerperf profile`` sees it), so a node may be a fused or NCHWc
node of a contrib domain. ONNX Runtime's saved graph carries no shapes for intermediate tensors, and
onnx's shape inference does not know the contrib ops, so the model is run once with the node's
inputs and outputs added as graph outputs: that gives their exact shapes, and the node's run-time
inputs are fed the very values they had in the model (real activations, real indices and masks).
Inputs that are initializers in the graph stay initializers, with their real values. Weights in
external data stay in their files for the probing run; only the node's own are read in.
"""

from __future__ import annotations

import difflib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from layerperf.backends.ort.layers import attributes
from layerperf.backends.ort.measure import ProfileOptions, create_session
from layerperf.backends.ort.measure import session_options as ort_session_options
from layerperf.backends.ort.names import Observed, has_unnamed, nodes_by_name
from layerperf.backends.ort.session import Session
from layerperf.bench.build import OneNode
from layerperf.bench.runner import session_options
from layerperf.data.tensor import TensorInfo, onnx_elem_to_dtype
from layerperf.errors import InputError
from layerperf.models import extdata
from layerperf.models.inputs import InputSpec, make_feed
from layerperf.models.source import ModelSource, open_model
from layerperf.readers.ort import split_runs


def _input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        specs.append(InputSpec(vi.name, dims, onnx_elem_to_dtype(tt.elem_type)))
    return specs


def executed_graph(source: ModelSource, opt_level: str, provider: str) -> onnx.ModelProto:
    """The graph ONNX Runtime runs at ``opt_level`` (the model itself at "disable").

    External data stays unread: ONNX Runtime saves the optimized graph with the model's own data
    locations, which are relative to the model's directory as in the model itself.
    """
    if opt_level == "disable":
        return source.proto
    with tempfile.TemporaryDirectory(prefix="layerperf-bench-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        create_session(source, ort_session_options(ProfileOptions(opt_level=opt_level), optimized_path=path),
                       provider)
        model = onnx.load(str(path), load_external_data=False)
    if source.data_dir is not None:
        extdata.data_files(model, source.data_dir, str(source.path))
    return model


def observed_graph(source: ModelSource, opt_level: str, provider: str,
                   feed: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, Observed | None]:
    """The graph run at ``opt_level`` and, when it has unnamed nodes, the profiler's node events of one
    run of it (their names are the ones ``layerperf profile`` shows)."""
    if opt_level == "disable":
        return source.proto, None
    with tempfile.TemporaryDirectory(prefix="layerperf-bench-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        create_session(source, ort_session_options(ProfileOptions(opt_level=opt_level), optimized_path=path),
                       provider)
        graph_model = onnx.load(str(path), load_external_data=False)
        if not has_unnamed(graph_model.graph):
            return graph_model, None
        so = ort_session_options(ProfileOptions(opt_level=opt_level), profile_prefix=Path(tmp) / "names")
        sess = create_session(source, so, provider)
        sess.run(None, feed)
        runs = split_runs(json.loads(Path(sess.end_profiling()).read_text()))
    # top-level nodes only: a control-flow body's run inside their parent
    return graph_model, [(n.name, n.op_type or None) for n in runs[0].nodes if n.parent is None] if runs else None


def _names_hint(names: Sequence[str], name: str) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if close:
        return "did you mean " + ", ".join(close) + "?"
    return "nodes: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def find_node(source: ModelSource, graph: onnx.GraphProto, name: str, opt_level: str,
              provider: str, observed: Observed | None = None) -> onnx.NodeProto:
    """Node ``name`` of ``graph`` (the graph run at ``opt_level``), or an InputError that says where it is.

    Names are those ``layerperf profile`` shows: a node's own, or for an unnamed node the one ONNX
    Runtime's profiler gives it (``<op_type>_<index>``, see :mod:`layerperf.backends.ort.names`).
    """
    model_graph = source.proto.graph
    nodes = nodes_by_name(graph, model_graph, observed)
    if name in nodes:
        return nodes[name]
    names = list(nodes)
    if opt_level != "disable" and name in nodes_by_name(model_graph):
        raise InputError(f"node '{name}' of the model is fused or renamed at --opt-level {opt_level}",
                         hint="drop --opt-level to measure it as written, or name a node of the optimized graph "
                              f"(`layerperf profile --opt-level {opt_level}` lists them): {_names_hint(names, name)}")
    if opt_level == "disable":  # a name copied from an optimized profile: say which level has it
        optimized = executed_graph(source, "all", provider).graph
        if name in nodes_by_name(optimized, model_graph):
            raise InputError(f"node '{name}' is not in the model as written but in the graph ONNX Runtime runs "
                             "after its optimizations", hint="pass --opt-level all")
    hint = _names_hint(names, name)
    if opt_level != "disable":  # fusions rename nodes: the original names are there at "disable"
        hint += f"; `layerperf profile --opt-level {opt_level}` lists the names at this level"
    raise InputError(f"no node named '{name}' in the graph at --opt-level {opt_level} ({len(names)} nodes)",
                     hint=hint)


def probe(model: onnx.ModelProto, names: Sequence[str], feed: dict[str, np.ndarray],
          provider: str, data_dir: Path | None = None, what: str = "the model") -> dict[str, np.ndarray]:
    """The values tensors ``names`` take in one run of ``model`` (added as graph outputs, then removed);
    ``data_dir`` is where its external data lives, ``what`` names the model in an error."""
    graph = model.graph
    n_before = len(graph.output)
    present = {o.name for o in graph.output}
    extra = [n for n in dict.fromkeys(names) if n not in present]
    for name in extra:  # untyped: ONNX Runtime infers their types itself, contrib ops included
        vi = onnx.ValueInfoProto()
        vi.name = name
        graph.output.append(vi)
    so = session_options(0, "disable")
    try:
        with extdata.session_model(model, data_dir, so) as loadable:
            sess = Session(loadable, so, provider, what=what)
    finally:
        del graph.output[n_before:]
    values = sess.run(list(dict.fromkeys(names)), feed)
    return dict(zip(dict.fromkeys(names), values, strict=True))


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
    from layerperf.cost.graph import tensor_infos
    from layerperf.cost.layout import has_blocked, real_channels, real_view

    if not has_blocked(graph_model):
        return inputs, outputs
    given = {k: TensorInfo(k, tuple(v.shape), str(v.dtype)) for k, v in feed.items()}
    stored = {**tensor_infos(graph_model, given), **{t.name: t for t in (*inputs, *outputs) if t is not None}}
    channels = real_channels(graph_model, stored, tensor_infos(source.proto, given))
    return real_view(node, inputs, outputs, channels)


def extract_node(model: str | Path | onnx.ModelProto, node_name: str, *, opt_level: str = "disable",
                 shapes: Sequence[str] = (), provider: str = "CPUExecutionProvider", seed: int = 0,
                 inputs: str | Path | None = None, **zoo_options: Any) -> OneNode:
    """Node ``node_name`` of ``model`` (as run at ``opt_level``) as a one-node model with its real data.

    The model runs once on ``inputs`` (an .npz of arrays by input name), seeded random data for the
    inputs it lacks, to record the values the node receives.
    """
    source = open_model(model, **zoo_options)
    feed = make_feed(source.proto, _input_specs(source.proto), shapes, inputs, seed)
    graph_model, observed = observed_graph(source, opt_level, provider, feed)
    node = find_node(source, graph_model.graph, node_name, opt_level, provider, observed)
    inits = {i.name: i for i in graph_model.graph.initializer}
    runtime = [n for n in node.input if n and n not in inits]
    values = probe(graph_model, [*runtime, *(n for n in node.output if n)], feed, provider, source.data_dir,
                   source.name)
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
