"""A stepwise executor: the ONNX Runtime-optimized graph run one node at a time.

Each node gets its own InferenceSession (optimizations off: the graph is already optimized), and
tensors are handed from node to node as OrtValues, never copied through numpy. That gives a
boundary around every node where a caller's collectors (:mod:`layerperf.collectors`) read counters
— exact per-node attribution with stock ONNX Runtime. Sessions are built during the first pass,
when the element types of every input are known from the OrtValues themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from layerperf.analysis.memory.live import is_view
from layerperf.backends.ort import bound
from layerperf.backends.ort.names import nodes_by_name
from layerperf.backends.ort.session import ORT_ERRORS, Session, elem_type, to_ortvalue
from layerperf.errors import LayerperfError
from layerperf.models import extdata

if TYPE_CHECKING:
    from layerperf.collectors import Collector

# Plain passes before calls are bound: the first builds the sessions; a second shows the shapes repeat.
PLAIN_PASSES = 2

Hook = Callable[[int], None]  # called with the node's position, right before / right after it runs


@dataclass(slots=True)
class _Step:
    node: onnx.NodeProto
    inputs: list[str]  # runtime (non-initializer) inputs
    outputs: list[str]
    name: str  # as the profiler names it (an unnamed node's generated name)
    call: Callable[[dict[str, Any]], Any] | None = None
    session: Session | None = None


def _fast_call(sess: Session, outputs: list[str]) -> Callable[[dict[str, Any]], Any]:
    """The session's call on C-level OrtValues.

    The public ``run_with_ort_values`` re-validates every input's ownership on each call, which
    costs ~50 µs — more than many nodes take. The binding it wraps costs ~4 µs; use it where this
    ONNX Runtime has it, the public method otherwise.
    """
    inner = getattr(sess, "_sess", None)
    if inner is not None and hasattr(inner, "run_with_ort_values") and hasattr(ort.OrtValue, "_get_c_value"):
        run_options = sess.quiet._get_c_value() if hasattr(sess.quiet, "_get_c_value") else None
        run = inner.run_with_ort_values

        def call(args: dict[str, Any]) -> Any:
            try:
                return run(args, outputs, run_options)
            except ORT_ERRORS as exc:  # the public methods of Session do this; this one bypasses them
                raise sess.failure(exc) from None

        return call
    public = sess.run_with_ort_values
    return lambda args: [v._get_c_value() if hasattr(v, "_get_c_value") else v
                         for v in public(outputs, {k: ort.OrtValue(v) for k, v in args.items()})]


def _planned(step: _Step) -> bound.Step:
    """A step as the buffer plan sees it: an ONNX view op's one output may share its input's memory, and
    a kernel that adds into one of its inputs may write its output there."""
    node = step.node
    one = len(step.outputs) == 1
    view = is_view(node.op_type, node.domain) and one
    source = node.input[0] if view and node.input and node.input[0] in step.inputs else None
    at = bound.IN_PLACE_INPUTS.get((node.domain, node.op_type))
    # a Sum that is also another input of the node (y = x + conv(x)) is still read while the output is written
    if (source is None and one and at is not None and len(node.input) > at and node.input[at] in step.inputs
            and list(node.input).count(node.input[at]) == 1):
        return bound.Step(step.inputs, step.outputs, node.input[at], in_place=True)
    return bound.Step(step.inputs, step.outputs, source)


def _one_node_model(node: onnx.NodeProto, inputs: list[str], types: Mapping[str, int],
                    inits: dict[str, onnx.TensorProto], model: onnx.ModelProto) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node], node.name or node.op_type,
        [helper.make_tensor_value_info(name, types[name], None) for name in inputs],
        [helper.make_empty_tensor_value_info(name) for name in node.output if name],
        [inits[name] for name in dict.fromkeys(node.input) if name in inits])
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)


class StepwiseExecutor:
    """Run ``model`` (already optimized) node by node in ``order`` (node names, execution order).

    Weights in external data stay there: ``data_dir`` is the directory their locations are relative to.
    """

    def __init__(self, model: onnx.ModelProto, order: Sequence[str], *, provider: str = "CPUExecutionProvider",
                 threads: int = 0, global_threads: bool = False, data_dir: Path | None = None,
                 original: onnx.ModelProto | None = None, bind: bool = True, spin_stop: bool = True) -> None:
        self.model = model
        self.provider = provider
        # names as the profiler gives them, unnamed nodes included: ``order`` is the profiler's own
        # execution order when it covers every node, else ``original`` (the model before optimization) tells
        by_name = nodes_by_name(model.graph, original.graph if original is not None else None,
                                [(name, None) for name in order])
        missing = [name for name in order if name not in by_name]
        if missing:
            raise LayerperfError(f"stepwise execution: nodes {missing[:3]} are not in the optimized graph")
        self._inits = {i.name: i for i in model.graph.initializer}
        self.steps = [self._step(by_name[name], name) for name in order]
        self._so = ort.SessionOptions()
        self._so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self._so.intra_op_num_threads = threads
        self._so.log_severity_level = 3
        # Pool workers otherwise spin-wait after each node, and that CPU time would land on the
        # next node's counts.
        if spin_stop:
            self._so.add_session_config_entry("session.force_spinning_stop", "1")
        if global_threads:
            self._so.use_per_session_threads = False
        extdata.use_folder(self._so, data_dir)
        self._last_use = self._last_uses()
        # pre-bound calls (:mod:`.bound`) once a plain pass has shown every tensor; None: plain calls
        self._bind = bind
        self._tensors: dict[str, bound.TensorShape | None] = {}
        self.bound: bound.BoundPass | None = None
        self._plain_passes = 0

    def _step(self, node: onnx.NodeProto, name: str) -> _Step:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            raise LayerperfError(f"stepwise execution does not support control-flow node '{node.name}' "
                                 f"({node.op_type})", hint="profile without --events")
        inputs = [i for i in dict.fromkeys(node.input) if i and i not in self._inits]
        return _Step(node, inputs, [out for out in node.output if out], name)

    def _last_uses(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            for name in step.inputs:
                last[name] = i
        return last

    def _call(self, step: _Step, values: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
        if step.call is None:
            types = {name: elem_type(values[name].data_type()) for name in step.inputs}
            one = _one_node_model(step.node, step.inputs, types, self._inits, self.model)
            sess = Session(one.SerializeToString(), self._so, self.provider,
                           what=f"node '{step.name}' ({step.node.op_type})")
            step.call = _fast_call(sess, step.outputs)
            step.session = sess
        return step.call

    def _bound_pass(self) -> bound.BoundPass | None:
        """The bound calls, planned on the first call after a complete plain pass; None where a tensor is
        no plain numpy-typed one (then every pass stays plain)."""
        if not self._bind or self.bound is not None:
            return self.bound
        tensors = {k: t for k, t in self._tensors.items() if t is not None}
        written = {name for step in self.steps for name in step.outputs}
        if self._plain_passes < PLAIN_PASSES or tensors.keys() != written:
            return None
        sessions = [s.session for s in self.steps if s.session is not None]
        outputs = {o.name for o in self.model.graph.output}
        self.bound = bound.BoundPass(sessions, [_planned(s) for s in self.steps], tensors, self._last_use, outputs)
        return self.bound

    def _saw(self, names: list[str], results: Any) -> None:
        """Keep each output's shape and type; a tensor that changed between passes is never bound."""
        for name, value in zip(names, results, strict=True):
            now = bound.seen(value)
            if name in self._tensors and self._tensors[name] != now:
                now = None
            self._tensors[name] = now

    def run_pass(self, feed: dict[str, Any], before: Hook | None = None, after: Hook | None = None, *,
                 collector: Collector | None = None) -> tuple[dict[str, ort.OrtValue], list[int]]:
        """One pass over every node; returns graph-output values and each node's wall time in ns.

        ``collector`` is called around the pass and at each node's boundaries (its start and stop are
        the ``before`` and ``after`` hooks then), with the node's position in ``order``.
        """
        if collector is not None:
            if before or after:
                raise ValueError("run_pass takes hooks or a collector, not both")
            before, after = collector.start, collector.stop
            collector.begin_pass()
        values = {k: (v if isinstance(v, ort.OrtValue) else to_ortvalue(np.asarray(v)))._get_c_value()
                  for k, v in feed.items()}
        outputs = {o.name for o in self.model.graph.output}
        bound_pass = self._bound_pass()
        if bound_pass is not None:
            times = self._run_bound(bound_pass, values, before, after)
            got = {name: bound_pass.output(name) if name in bound_pass.arrays else ort.OrtValue(values[name])
                   for name in outputs}
        else:
            times = self._run_plain(values, outputs, before, after)
            got = {k: ort.OrtValue(v) for k, v in values.items() if k in outputs}
        if collector is not None:
            collector.end_pass()
        return got, times

    def _run_bound(self, bound_pass: bound.BoundPass, values: dict[str, Any], before: Hook | None,
                   after: Hook | None) -> list[int]:
        bound_pass.feed(values)
        times = []
        clock = time.perf_counter_ns
        call = bound_pass.call
        for i in range(len(self.steps)):
            if before:
                before(i)
            t0 = clock()
            call(i)
            t1 = clock()
            if after:
                after(i)
            times.append(t1 - t0)
        return times

    def _run_plain(self, values: dict[str, Any], outputs: set[str], before: Hook | None,
                   after: Hook | None) -> list[int]:
        times = []
        clock = time.perf_counter_ns
        for i, step in enumerate(self.steps):
            call = self._call(step, values)
            args = {name: values[name] for name in step.inputs}
            if before:
                before(i)
            t0 = clock()
            results = call(args)
            t1 = clock()
            if after:
                after(i)
            times.append(t1 - t0)
            values.update(zip(step.outputs, results, strict=True))
            if self._bind:
                self._saw(step.outputs, results)
            for name in step.inputs:  # free what no later node reads
                if self._last_use.get(name) == i and name not in outputs:
                    values.pop(name, None)
        self._plain_passes += 1
        return times


def calibration_model() -> onnx.ModelProto:
    """An Identity on one float: what a stepwise call costs when the node itself does nothing."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="empty")], "empty", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
