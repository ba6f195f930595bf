"""The sessions of an ONNX Runtime profile: their options, the profiled runs, the plain runs beside them.

Timings come from the real optimized graph running in the real thread pool, recorded by ONNX
Runtime's profiler. The profiler stops recording at ``max_events`` (1,000,000 by default in ONNX
Runtime), so long measurements are split across sessions sized to stay under it, and every run is
checked to be present — none is lost silently. Whole-model latency is measured with the profiler off
on a plain session kept alive beside the profiled ones, its runs alternating with theirs
(:func:`layerperf.backends.common.interleaved`). The optimized graph comes last, from a session of its
own. Each :class:`~layerperf.backends.ort.session.Session` here turns ONNX Runtime's failures into
one-line errors (:mod:`.session`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from layerperf.backends.base import RunPlan
from layerperf.backends.common import BLOCK_RUNS, RunTimes, interleaved
from layerperf.backends.ort.options import OrtOptions
from layerperf.backends.ort.session import Session
from layerperf.cost.onnx.layout import NCHWC
from layerperf.data.profile import Measurement
from layerperf.errors import InputError, LayerperfError
from layerperf.models import extdata
from layerperf.models.inputs import InputSpec, make_feed, ort_type_to_numpy
from layerperf.models.skeleton import INLINE_LIMIT_BYTES
from layerperf.models.source import ModelSource
from layerperf.readers.ort import RunEvents, pool_workers, split_runs
from layerperf.util.malloc_trim import release

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}

# Events per run beyond one per node: model_run and the executor's own span, with room to spare.
_SESSION_EVENTS_PER_RUN = 4
_SESSION_EVENTS_FIXED = 64


# Set on both sessions while their runs alternate: a pool's workers otherwise keep spinning for a
# while after its run returns, taking CPU from the other session's run (x1.2-1.9 on a loaded 2-core
# host, mobilenet_v2 with 2 threads). Spinning is restarted by the next run of the same session.
SPIN_STOP_KEY = "session.force_spinning_stop"


def session_options(opt_level: str, threads: int = 0, *, profile_prefix: Path | None = None,
                    optimized_path: Path | None = None, spin_stop: bool = False) -> ort.SessionOptions:
    """Session options at ``opt_level`` with ``threads`` intra-op threads (0: ONNX Runtime's default);
    profiling to files named ``profile_prefix``, the optimized graph saved at ``optimized_path``."""
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[opt_level]
    so.intra_op_num_threads = threads
    so.log_severity_level = 4  # its warnings (NCHWc serialization) and errors (reported in one line) kept off stderr
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_prefix)
    if optimized_path is not None:
        so.optimized_model_filepath = str(optimized_path)
    if spin_stop:
        so.add_session_config_entry(SPIN_STOP_KEY, "1")
    return so


def set_execution(so: ort.SessionOptions, options: OrtOptions) -> ort.SessionOptions:
    """``so`` with the execution mode and inter-op threads of ``options``: the sessions whose runs are
    timed run as asked; the others (inputs, the optimized graph, counting) need not."""
    if options.execution_mode == "parallel":
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        so.inter_op_num_threads = options.inter_op_threads
    return so


def create_session(source: ModelSource, so: ort.SessionOptions, provider: str) -> Session:
    """A session on the model; ONNX Runtime's refusals, loading or running, are one-line errors naming it."""
    return Session(source.path, so, provider, what=source.name if source.zoo else str(source.path))


def _os_threads() -> set[str] | None:
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:  # no procfs: the count stays unknown
        return None


def counted_session(source: ModelSource, so: ort.SessionOptions,
                    provider: str) -> tuple[ort.InferenceSession, int | None]:
    """A session and its intra-op thread count: the OS threads ONNX Runtime started while building
    it (its pool's workers) plus the calling thread, which runs work too. ``None`` without procfs.

    Counted, not predicted: ONNX Runtime's default (``intra_op_num_threads = 0``) follows rules that
    change between releases (physical cores; 1.32 ignores the process's CPU affinity).
    """
    before = _os_threads()
    sess = create_session(source, so, provider)
    after = _os_threads()
    return sess, (len(after - before) + 1 if before is not None and after is not None else None)


def input_specs(sess: ort.InferenceSession) -> list[InputSpec]:
    return [InputSpec(i.name, tuple(i.shape), ort_type_to_numpy(i.type)) for i in sess.get_inputs()]


def warm_up(sess: ort.InferenceSession, feed: dict[str, Any], runs: int) -> None:
    """``runs`` untimed inferences."""
    for _ in range(runs):
        sess.run(None, feed)


@dataclass(slots=True)
class Measured:
    """What the sessions gave: runs of node events with their absolute origin, the times of the
    profiled runs and of the plain runs interleaved with them, and the thread pool really used."""

    runs: list[tuple[int, RunEvents]] = field(default_factory=list)  # (session start ns, events)
    profiled: RunTimes = field(default_factory=RunTimes)
    plain: RunTimes = field(default_factory=RunTimes)  # the plain session, alternating with ``profiled``; empty: off
    optimized: onnx.ModelProto | None = None
    intra_op_threads: int | None = None
    block_runs: int = BLOCK_RUNS

    def setup(self, feed: dict[str, Any]) -> Measurement:
        """How latency was taken, the threads really used, the inputs fed."""
        latency = bool(self.plain.wall_ns)
        return Measurement(
            latency="interleaved" if latency else "off",
            block_runs=self.block_runs if latency else None,
            spinning_stopped_between_runs=latency,
            intra_op_threads=self.intra_op_threads,
            intra_op_threads_source="OS threads the session started + the calling thread"
            if self.intra_op_threads is not None else None,
            pool_workers_seen=pool_workers(r for _, r in self.runs),
            inputs=[{"name": k, "shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)}
                    for k, v in feed.items()])


def _chunk_capacity(max_events: int, warmup: int, n_nodes: int) -> int:
    per_run = n_nodes + _SESSION_EVENTS_PER_RUN
    capacity = (max_events - _SESSION_EVENTS_FIXED) // per_run - warmup
    if capacity < 1:
        raise InputError(f"a run of {n_nodes} nodes plus {warmup} warm-up runs does not fit "
                         f"ONNX Runtime's profiler limit of {max_events} events")
    return capacity


def _profiled_chunk(source: ModelSource, plan: RunPlan, options: OrtOptions, feed: dict[str, Any], runs: int,
                    workdir: Path, index: int, m: Measured, plain: ort.InferenceSession | None) -> None:
    so = set_execution(session_options(options.opt_level, plan.threads, profile_prefix=workdir / f"ort{index}",
                                       spin_stop=plain is not None), options)
    sess, threads = counted_session(source, so, options.provider)
    if m.intra_op_threads is None:
        m.intra_op_threads = threads
    origin = sess.get_profiling_start_time_ns()
    _timed_chunk(sess, plain, feed, plan.warmup, runs, m, plan.between_runs)
    trace_path = Path(sess.end_profiling())
    events = json.loads(trace_path.read_text())
    trace_path.unlink()
    all_runs = split_runs(events)
    if len(all_runs) != plan.warmup + runs:
        raise LayerperfError(f"ONNX Runtime's profiler recorded {len(all_runs)} of {plan.warmup + runs} runs",
                             hint="lower --runs or raise max_events")
    m.runs += [(origin, r) for r in all_runs[plan.warmup:]]


def optimized_graph(source: ModelSource, options: OrtOptions, threads: int = 0) -> onnx.ModelProto:
    """The graph ONNX Runtime runs under ``options`` (its optimized model), read back without its weights
    but for those of blocked (NCHWc) convolutions, whose zeros tell the real channel counts of a
    blocked layout (:mod:`layerperf.cost.onnx.layout`).

    It comes from a session of its own that never runs and is released at once: a session that
    writes its optimized model keeps the weights it pre-packs besides their packed copies (bert-base:
    0.3 GB more for as long as it lives); this one pre-packs nothing (pre-packing is the kernels'
    business, the graph is the same). ONNX Runtime writes the weights to a file of their own, one
    by one, instead of copying them all into one message first.
    """
    with tempfile.TemporaryDirectory(prefix="layerperf-opt-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        so = session_options(options.opt_level, threads, optimized_path=path)
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.data")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                    str(INLINE_LIMIT_BYTES))
        so.add_session_config_entry("session.disable_prepacking", "1")
        release()  # what the sessions before it freed
        create_session(source, so, options.provider)
        release()
        model = onnx.load(str(path), load_external_data=False)
        _read_blocked_conv_weights(model, Path(tmp))
    return model


def _read_blocked_conv_weights(model: onnx.ModelProto, data_dir: Path) -> None:
    wanted = {n.input[1] for n in model.graph.node if n.domain == NCHWC and n.op_type == "Conv" and len(n.input) > 1}
    for t in model.graph.initializer:
        if t.name in wanted and t.data_location == onnx.TensorProto.EXTERNAL:
            t.CopyFrom(extdata.loaded(t, data_dir))


def _timed_chunk(sess: ort.InferenceSession, plain: ort.InferenceSession | None, feed: dict[str, Any],
                 warmup: int, runs: int, m: Measured, between: Callable[[int], None] | None = None) -> None:
    """Warm-up, then the timed runs of a profiled session, alternating with ``plain`` when given
    (``between``: the run plan's hook between runs)."""
    warm_up(sess, feed, warmup)
    plain_t, profiled_t = interleaved(None if plain is None else lambda: plain.run(None, feed),
                                      lambda: sess.run(None, feed), runs, block=m.block_runs, between=between)
    m.plain.wall_ns += plain_t.wall_ns
    m.plain.cpu_ns += plain_t.cpu_ns
    m.profiled.wall_ns += profiled_t.wall_ns
    m.profiled.cpu_ns += profiled_t.cpu_ns


def plain_session(source: ModelSource, plan: RunPlan, options: OrtOptions,
                  feed: dict[str, Any]) -> ort.InferenceSession:
    """The profiler-off session whose runs alternate with the profiled ones, warmed up."""
    so = set_execution(session_options(options.opt_level, plan.threads, spin_stop=True), options)
    sess = create_session(source, so, options.provider)
    warm_up(sess, feed, plan.warmup)
    return sess


def _estimated_nodes(model: onnx.ModelProto) -> int:
    # Before the first session the optimized graph is unknown; layout passes add a few reorder
    # nodes to the original count, so size the first chunk generously and use real counts after.
    return len(model.graph.node) * 5 // 4 + 16


def _has_subgraphs(model: onnx.ModelProto) -> bool:
    """Whether any node runs a subgraph (Loop, If, Scan...): its events per run are unknown until run."""
    graph_types = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in graph_types for n in model.graph.node for a in n.attribute)


def measure(source: ModelSource, plan: RunPlan, options: OrtOptions, feed: dict[str, Any],
            progress: Callable[[int], None] | None = None) -> Measured:
    """Profiled runs, split over as many sessions as ONNX Runtime's event limit requires; with
    ``plan.latency``, plain runs alternating with them on one profiler-off session kept alive. Then
    the optimized graph, from a session of its own once those are gone (:func:`optimized_graph`)."""
    m = Measured()
    plain = plain_session(source, plan, options, feed) if plan.latency else None
    capacity = _chunk_capacity(options.max_events, plan.warmup, _estimated_nodes(source.proto))
    if _has_subgraphs(source.proto):  # a loop's body may record any number of events: measure one run first
        capacity = 1
    with tempfile.TemporaryDirectory(prefix="layerperf-ort-") as tmp:
        done = index = 0
        while done < plan.runs:
            n = min(capacity, plan.runs - done)
            _profiled_chunk(source, plan, options, feed, n, Path(tmp), index, m, plain)
            capacity = _chunk_capacity(options.max_events, plan.warmup,
                                       max(max(len(r.nodes), r.events) for _, r in m.runs))
            done, index = done + n, index + 1
            if progress:
                progress(done)
    del plain  # gone before the next session is made
    # after the measured sessions: it may hold conv weights
    m.optimized = optimized_graph(source, options, plan.threads)
    return m


def prepare_feed(source: ModelSource, plan: RunPlan, provider: str) -> dict[str, np.ndarray]:
    """The inputs of every run: ``plan``'s shapes and file, seeded random data for the rest."""
    sess = create_session(source, session_options("disable"), provider)
    specs = input_specs(sess)
    return make_feed(source.proto, specs, plan.shapes, plan.inputs_file, plan.seed)
