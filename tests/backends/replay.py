"""A toy backend: an ONNX graph replayed node by node with numpy, through layerperf's Backend protocol.

It proves the interface needs nothing else: it imports only layerperf's public pieces (the protocol,
the shared backend parts, the collectors, the cost model, the model and input helpers, the Profile)
and is registered with one line, ``layerperf.backends.register("replay", "backends.replay:ReplayBackend")``.
Its layers are the graph's nodes in the graph's (topological) order; their shapes and dtypes are the
values numpy computed; their timings come from the timing collector, counters and memory from the
collector driver. An op it has no kernel for is refused, in one line, before anything runs. It
measures single operators too (:class:`ReplaySingleOp`): ``layerperf bench OP --backend replay``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
from onnx import numpy_helper

from backends.replay_ops import KERNELS, Kernel
from layerperf import cost as cost_model
from layerperf.backends import base
from layerperf.backends.base import Availability, NodeGraph, PreparedOp, RunPlan, option
from layerperf.backends.common import CORE_PLAN_FIELDS, RunTimes, interleaved, profile_metadata, unknown_flops_warnings
from layerperf.collectors import Collector, Collectors
from layerperf.collectors.timer import Timing
from layerperf.cost.onnx.graph import attributes
from layerperf.data.profile import GraphSummary, Layer, Measurement, Profile
from layerperf.data.tensor import TensorInfo
from layerperf.errors import BackendError
from layerperf.models import extdata
from layerperf.models.inputs import make_feed, onnx_input_specs
from layerperf.models.source import ModelSource, open_model

DTYPES = ("float32", "float64")


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    replay_dtype: str = field(default="float32", metadata=option(
        "precision numpy computes the model's floating-point tensors in (default float32)", choices=DTYPES))


@dataclass(slots=True)
class _Step:
    node: onnx.NodeProto
    kernel: Kernel
    attrs: dict[str, Any]


def _nothing(layer: int) -> None:
    pass


def check_ops(model: onnx.ModelProto) -> None:
    """BackendError naming the first node the replay backend has no kernel for."""
    missing = [n for n in model.graph.node if n.domain not in ("", "ai.onnx") or n.op_type not in KERNELS]
    if missing:
        n = missing[0]
        raise BackendError(f"the replay backend has no kernel for op type '{n.op_type}' (node '{n.name}')",
                           hint="it runs " + ", ".join(sorted(KERNELS)))


class Replayer:
    """The graph's nodes, run in order on numpy arrays; weights and floats in ``dtype``."""

    def __init__(self, model: onnx.ModelProto, dtype: str) -> None:
        check_ops(model)
        self.dtype = np.dtype(dtype)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.weights = {i.name: self.cast(numpy_helper.to_array(i)) for i in model.graph.initializer}
        self.steps = [_Step(n, KERNELS[n.op_type], attributes(n)) for n in model.graph.node]

    def cast(self, arr: np.ndarray) -> np.ndarray:
        return arr.astype(self.dtype) if np.issubdtype(arr.dtype, np.floating) else arr

    def run(self, feed: dict[str, np.ndarray], collector: Collector | None = None) -> dict[str, np.ndarray]:
        """One pass; every value it computed, by name. ``collector`` sees each node's boundaries."""
        values: dict[str, Any] = {**self.weights, **feed}
        start, stop = (collector.start, collector.stop) if collector else (_nothing, _nothing)
        if collector:
            collector.begin_pass()
        for i, step in enumerate(self.steps):
            args = [values[name] if name else None for name in step.node.input]
            start(i)
            try:
                outs = step.kernel(args, step.attrs, self.opset)
            except (ValueError, TypeError, IndexError, NotImplementedError, np.linalg.LinAlgError) as exc:
                raise BackendError(f"replay: node '{step.node.name}' ({step.node.op_type}) failed: {exc}") from None
            stop(i)
            values.update(zip(step.node.output, outs, strict=False))
        if collector:
            collector.end_pass()
        return values


def _info(name: str, value: np.ndarray | None) -> TensorInfo | None:
    return None if value is None else TensorInfo(name, tuple(int(d) for d in value.shape), value.dtype.name)


def _layer(step: _Step, values: dict[str, np.ndarray], weights: dict[str, np.ndarray]) -> Layer:
    node = step.node
    ins = [_info(n, values[n]) if n else None for n in node.input]
    outs = [_info(n, values.get(n)) if n else None for n in node.output]
    cost = cost_model.of(node.domain, node.op_type, ins, outs, step.attrs)
    return Layer(name=node.name, op_type=node.op_type, domain=node.domain, provider="numpy",
                 inputs=tuple(t for t in ins if t is not None), outputs=tuple(t for t in outs if t is not None),
                 param_bytes=sum(weights[n].nbytes for n in dict.fromkeys(node.input) if n in weights),
                 flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written, int_ops=cost.int_ops)


def _timed(runner: Replayer, feed: dict[str, np.ndarray], plan: RunPlan,
           progress: Callable[[str, int, int], None] | None) -> tuple[Timing, RunTimes]:
    """The measured passes, each timed by the collector; with ``plan.latency`` a plain pass before each,
    timed whole (the profiler-off latency)."""
    timing = Timing()
    done = (lambda n: progress("profiled runs", n, plan.runs)) if progress else None
    plain, _ = interleaved((lambda: runner.run(feed)) if plan.latency else None, lambda: runner.run(feed, timing),
                           plan.runs, done=done, between=plan.between_runs)
    return timing, plain


def _warnings(layers: list[Layer], plan: RunPlan) -> list[str]:
    unknown = (layer.op_type for layer in layers if not cost_model.covers(layer.domain, layer.op_type))
    out = unknown_flops_warnings(unknown)
    if plan.threads:
        out.append("--threads is not applied by the replay backend: numpy's BLAS picks its own threads")
    return out


class ReplayBackend:
    name: ClassVar[str] = "replay"
    summary: ClassVar[str] = "a toy backend for the tests: the ONNX graph replayed node by node in numpy"
    model_suffixes: ClassVar[tuple[str, ...]] = ()
    options_type: ClassVar[type] = ReplayOptions

    def availability(self) -> Availability:
        return Availability(True, np.__version__)

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Collectors) -> Profile:
        source = open_model(model, **plan.zoo_options)
        check_ops(source.proto)  # before reading any weight
        full = _with_weights(source)
        runner = Replayer(full, options.replay_dtype)
        specs = onnx_input_specs(full)
        feed = {k: runner.cast(v) for k, v in make_feed(full, specs, plan.shapes, plan.inputs_file, plan.seed).items()}
        values = runner.run(feed)  # untimed: the shapes and dtypes every node really produced
        layers = [_layer(step, values, runner.weights) for step in runner.steps]
        for _ in range(plan.warmup):
            runner.run(feed)
        timing, plain = _timed(runner, feed, plan, collectors.progress)
        run_list = timing.runs()
        prof = Profile(
            metadata=profile_metadata(source, plan, self.name, np.__version__, "numpy", options,
                                      plan_fields=CORE_PLAN_FIELDS),
            layers=layers, runs=run_list, latency_ns=plain.wall_ns,
            profiled_latency_ns=[r.dur_ns for r in run_list] if plain.wall_ns else [],
            graph=GraphSummary(tuple(s.name for s in specs), tuple(o.name for o in full.graph.output),
                               {k: v.nbytes for k, v in runner.weights.items()}),
            measurement=Measurement(latency="interleaved" if plain.wall_ns else "off", inputs=[
                {"name": k, "shape": list(v.shape), "dtype": v.dtype.name} for k, v in feed.items()]),
            warnings=_warnings(layers, plan))
        # Counters and memory: the collector driver runs the passes they need, through one function.
        collectors.driver(len(layers)).run(lambda c: runner.run(feed, c)).fill(prof)
        return prof

    def single_op(self) -> ReplaySingleOp:
        return ReplaySingleOp()


class ReplaySingleOp:
    """One node replayed alone: the single-operator capability, in a few lines of numpy."""

    def prepare(self, model: onnx.ModelProto, feed: Mapping[str, np.ndarray], *, threads: int,
                options: ReplayOptions) -> PreparedOp:
        runner = Replayer(model, options.replay_dtype)  # an op it has no kernel for: a BackendError, an InputError
        fed = {k: runner.cast(v) for k, v in feed.items()}
        values = runner.run(fed)
        outputs = tuple(TensorInfo(o.name, tuple(int(d) for d in values[o.name].shape), values[o.name].dtype.name)
                        for o in model.graph.output)
        kernels = tuple(base.Kernel(n.name or n.op_type, n.op_type, "numpy") for n in model.graph.node)
        return PreparedOp(call=lambda: runner.run(fed), outputs=outputs, kernels=kernels, keep=(runner, fed))

    def node_graph(self, source: ModelSource, feed: Mapping[str, np.ndarray], options: ReplayOptions) -> NodeGraph:
        graph = source.proto  # replayed as written: no optimization, nodes by their own names
        return NodeGraph(graph, {n.name: n for n in graph.graph.node if n.name})

    def values(self, model: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray], *,
               options: ReplayOptions, data_dir: Path | None, what: str) -> dict[str, np.ndarray]:
        full = onnx.ModelProto()
        full.CopyFrom(model)
        if data_dir is not None:  # the weights layerperf's own copy keeps in their file
            for t in full.graph.initializer:
                t.CopyFrom(extdata.loaded(t, data_dir))
        runner = Replayer(full, options.replay_dtype)
        values = runner.run({k: runner.cast(v) for k, v in feed.items()})
        return {name: values[name] for name in names}


def _with_weights(source: ModelSource) -> onnx.ModelProto:
    """The model with every weight's values (layerperf's own copy of it keeps large ones in the file)."""
    return onnx.load(str(source.path))
