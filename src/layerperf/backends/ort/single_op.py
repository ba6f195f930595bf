"""ONNX Runtime's single-operator capability: one node, as ``layerperf bench`` and ``calibrate`` time it.

A one-node model runs in a session bound once, so that a call is just the kernel: inputs are bound
as OrtValues made once from the feed, and outputs to buffers of the first run's shapes, so a timed
call (``run_with_iobinding``) allocates nothing and copies nothing in Python. The first run is
profiled by ONNX Runtime: that tells which kernels really ran (an optimization level can turn one
Conv into ReorderInput + NCHWc Conv + ReorderOutput) and on which provider. Profiling ends before
any timed call.

For one node of a real model: the graph ONNX Runtime executes at an optimization level (saved through
``optimized_model_filepath``, as ``layerperf profile`` sees it), its nodes named as its profiler names
them (:mod:`.names`), and the values the node's tensors take in one run of the model.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from layerperf.backends.base import Kernel, NodeGraph, PreparedOp
from layerperf.backends.ort.measure import create_session, session_options
from layerperf.backends.ort.names import Observed, has_unnamed, nodes_by_name
from layerperf.backends.ort.options import OrtOptions
from layerperf.backends.ort.scope import subgraphs
from layerperf.backends.ort.session import Session
from layerperf.data.tensor import TensorInfo
from layerperf.errors import InputError, first_line
from layerperf.models import extdata
from layerperf.models.inputs import ort_type_to_numpy
from layerperf.models.source import ModelSource
from layerperf.readers.ort import split_runs


class OrtSingleOp:
    """One operator, or one node of a model, on ONNX Runtime (see :class:`layerperf.backends.base.SingleOp`)."""

    def prepare(self, model: onnx.ModelProto, feed: Mapping[str, np.ndarray], *, threads: int,
                options: OrtOptions) -> PreparedOp:
        return prepare(model, feed, threads=threads, opt_level=options.opt_level, provider=options.provider)

    def node_graph(self, source: ModelSource, feed: Mapping[str, np.ndarray], options: OrtOptions) -> NodeGraph:
        graph_model, observed = observed_graph(source, options.opt_level, options.provider, feed)
        return NodeGraph(graph_model, nodes_by_name(graph_model.graph, source.proto.graph, observed))

    def values(self, model: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray], *,
               options: OrtOptions, data_dir: Path | None, what: str) -> dict[str, np.ndarray]:
        return probe(model, names, feed, options.provider, data_dir, what)


def one_node_options(threads: int, opt_level: str, profile_prefix: Path | None = None) -> ort.SessionOptions:
    """`layerperf profile`'s session options, for a one-node model run sequentially."""
    so = session_options(opt_level, threads, profile_prefix=profile_prefix)
    so.inter_op_num_threads = 1  # one node: nothing runs in parallel across nodes
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def _what(model: onnx.ModelProto) -> str:
    node = model.graph.node[0] if model.graph.node else None
    return "the model" if node is None else f"{node.domain + '.' if node.domain else ''}{node.op_type}"


def _kernels(trace_path: str) -> tuple[Kernel, ...]:
    path = Path(trace_path)
    try:
        events = json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)
    runs = split_runs(events)
    nodes = runs[0].nodes if runs else []
    return tuple(Kernel(n.name, n.op_type, n.provider) for n in nodes)


def _buffer(t: TensorInfo) -> ort.OrtValue | None:
    try:
        dtype = np.dtype(t.dtype)
    except TypeError:
        return None
    if dtype.kind not in "biufc" or t.shape is None or not t.is_static:
        return None
    return ort.OrtValue.ortvalue_from_shape_and_type([int(d) for d in t.shape], dtype)


def _session(model: onnx.ModelProto, so: ort.SessionOptions, provider: str) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(model.SerializeToString(), so, providers=[provider])
    except Exception as exc:  # ORT raises its own pybind types; any of them means "cannot build"
        reason = first_line(exc)
        missing = re.search(r"Could not find an implementation for \w+\((\d+)\)", reason)
        hint = (f"it may implement an older version of the op: pass --opset {int(missing.group(1)) - 1} or lower"
                if missing else None)
        raise InputError(f"ONNX Runtime cannot build {_what(model)} with these inputs: {reason}", hint=hint) from None


def prepare(model: onnx.ModelProto, feed: Mapping[str, np.ndarray], *, threads: int, opt_level: str,
            provider: str) -> PreparedOp:
    """Create the session, bind the tensors and run once; ONNX Runtime's refusals become InputError."""
    with tempfile.TemporaryDirectory(prefix="layerperf-bench-") as tmp:
        sess = _session(model, one_node_options(threads, opt_level, Path(tmp) / "first_run"), provider)
        values = {name: ort.OrtValue.ortvalue_from_numpy(arr) for name, arr in feed.items()}
        binding = sess.io_binding()
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        out_names = [o.name for o in sess.get_outputs()]
        for name in out_names:
            binding.bind_output(name, "cpu")
        quiet = ort.RunOptions()
        quiet.log_severity_level = 4  # a kernel's refusal becomes our InputError, not a log line too
        try:
            sess.run_with_iobinding(binding, quiet)
        except Exception as exc:
            raise InputError(f"ONNX Runtime cannot run {_what(model)} with these inputs: {first_line(exc)}") from None
        kernels = _kernels(sess.end_profiling())
    if not kernels:
        raise InputError(f"ONNX Runtime computed {_what(model)} away before running it (its inputs are constants)",
                         hint="give the data input with --input, or lower --opt-level")
    outputs = tuple(TensorInfo(name, tuple(v.shape()), ort_type_to_numpy(v.data_type()))
                    for name, v in zip(out_names, binding.get_outputs(), strict=True))
    # Buffers of our own, not the first run's: before 1.29, ONNX Runtime freed the OrtValues that
    # get_outputs() returned when their binding was cleared, and rebinding them crashed the process.
    produced = [_buffer(t) for t in outputs]
    binding.clear_binding_outputs()
    for name, value in zip(out_names, produced, strict=True):
        if value is None:  # strings and other non-numeric outputs: allocated by each run
            binding.bind_output(name, "cpu")
        else:
            binding.bind_ortvalue_output(name, value)  # later runs write into the same buffers
    run = sess.run_with_iobinding

    def call() -> None:
        run(binding)

    return PreparedOp(call=call, outputs=outputs, kernels=kernels, keep=(sess, binding, values, produced, feed))


def observed_graph(source: ModelSource, opt_level: str, provider: str,
                   feed: Mapping[str, np.ndarray]) -> tuple[onnx.ModelProto, Observed | None]:
    """The graph run at ``opt_level`` (the model itself at "disable") and, when it has unnamed nodes,
    the profiler's node events of one run of it (their names are the ones ``layerperf profile`` shows).

    External data stays unread: ONNX Runtime saves the optimized graph with the model's own data
    locations, which are relative to the model's directory as in the model itself.
    """
    if opt_level == "disable":
        return source.proto, None
    with tempfile.TemporaryDirectory(prefix="layerperf-bench-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        create_session(source, session_options(opt_level, optimized_path=path), provider)
        graph_model = onnx.load(str(path), load_external_data=False)
        if not has_unnamed(graph_model.graph):
            return graph_model, None
        sess = create_session(source, session_options(opt_level, profile_prefix=Path(tmp) / "names"), provider)
        sess.run(None, dict(feed))
        runs = split_runs(json.loads(Path(sess.end_profiling()).read_text()))
    # top-level nodes only: a control-flow body's run inside their parent
    return graph_model, [(n.name, n.op_type or None) for n in runs[0].nodes if n.parent is None] if runs else None


def _unread_inputs(graph: onnx.GraphProto, fed: set[str]) -> set[str]:
    """Graph inputs with no value (not fed, no initializer) that no node reads, in any subgraph either."""
    read: set[str] = set()
    stack = [graph]
    while stack:
        g = stack.pop()
        for node in g.node:
            read.update(node.input)
            stack.extend(subgraphs(node).values())
    valued = fed | {i.name for i in graph.initializer}
    return {i.name for i in graph.input if i.name not in valued and i.name not in read}


def probe(model: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray], provider: str,
          data_dir: Path | None = None, what: str = "the model") -> dict[str, np.ndarray]:
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
    # ONNX Runtime's saved optimized graph keeps inputs it folded away (``W__SHAPE``) with no value and no
    # node reading them; it would ask for them in the feed: left out while it runs
    inputs = list(graph.input)
    unread = _unread_inputs(graph, set(feed))
    if unread:
        del graph.input[:]
        graph.input.extend(i for i in inputs if i.name not in unread)
    so = one_node_options(0, "disable")
    try:
        with extdata.session_model(model, data_dir, so) as loadable:
            sess = Session(loadable, so, provider, what=what)
    finally:
        del graph.output[n_before:]
        if unread:
            del graph.input[:]
            graph.input.extend(inputs)
    values = sess.run(list(dict.fromkeys(names)), dict(feed))
    return dict(zip(dict.fromkeys(names), values, strict=True))
