"""The ONNX Runtime backend: per-node timings taken in situ by ONNX Runtime's own profiler.

Timings come from the real optimized graph running in the real thread pool. The profiler stops
recording at ``max_events`` (1,000,000 by default in ONNX Runtime), so long measurements are split
across sessions sized to stay under it, and every run is checked to be present — none is lost
silently. Whole-model latency is measured with the profiler off on a plain session kept alive
beside the profiled ones, its runs alternating with theirs (see :mod:`layerperf.backends.common`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from layerperf.backends.common import BLOCK_RUNS, interleaved
from layerperf.backends.ort.session import Session
from layerperf.data.profile import Measurement
from layerperf.errors import InputError, LayerperfError
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
from layerperf.backends.ort import ORT_MAX_EVENTS  # noqa: E402

# Events per run beyond one per node: model_run and the executor's own span, with room to spare.
_SESSION_EVENTS_PER_RUN = 4
_SESSION_EVENTS_FIXED = 64


@dataclass(frozen=True, slots=True)
class ProfileOptions:
    """How to profile. ``threads=0`` keeps ONNX Runtime's default intra-op thread count."""

    warmup: int = 10
    runs: int = 100
    threads: int = 0
    opt_level: str = "all"
    provider: str = "CPUExecutionProvider"
    shapes: tuple[str, ...] = ()
    inputs_file: str | None = None
    seed: int = 0
    latency: bool = True
    max_events: int = ORT_MAX_EVENTS

    def validate(self) -> None:
        if self.runs < 1:
            raise InputError(f"--runs must be at least 1, got {self.runs}")
        if self.warmup < 0:
            raise InputError(f"--warmup must be 0 or more, got {self.warmup}")
        if self.threads < 0:
            raise InputError(f"--threads must be 0 (runtime default) or more, got {self.threads}")
        if self.opt_level not in OPT_LEVELS:
            raise InputError(f"unknown --opt-level '{self.opt_level}'", hint="one of: " + ", ".join(OPT_LEVELS))
        available = ort.get_available_providers()
        if self.provider not in available:
            raise InputError(f"execution provider '{self.provider}' is not available in this ONNX Runtime",
                             hint="available: " + ", ".join(available))


# Set on both sessions while their runs alternate: a pool's workers otherwise keep spinning for a
# while after its run returns, taking CPU from the other session's run (x1.2-1.9 on a loaded 2-core
# host, mobilenet_v2 with 2 threads). Spinning is restarted by the next run of the same session.
SPIN_STOP_KEY = "session.force_spinning_stop"


def session_options(opts: ProfileOptions, *, profile_prefix: Path | None = None,
                    optimized_path: Path | None = None, spin_stop: bool = False) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[opts.opt_level]
    so.intra_op_num_threads = opts.threads
    so.log_severity_level = 3  # the NCHWc serialization warning is expected; keep stderr clean
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_prefix)
    if optimized_path is not None:
        so.optimized_model_filepath = str(optimized_path)
    if spin_stop:
        so.add_session_config_entry(SPIN_STOP_KEY, "1")
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


def timed_runs(sess: ort.InferenceSession, feed: dict[str, Any], warmup: int, runs: int) -> list[int]:
    """Run ``warmup`` untimed and ``runs`` timed inferences; wall time of each timed one in ns."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        sess.run(None, feed)
    out = []
    for _ in range(runs):
        t0 = clock()
        sess.run(None, feed)
        out.append(clock() - t0)
    return out


@dataclass(slots=True)
class Measured:
    """What the sessions gave: runs of node events with their absolute origin, wall times of the
    profiled runs and of the plain runs interleaved with them, and the thread pool really used."""

    runs: list[tuple[int, RunEvents]] = field(default_factory=list)  # (session start ns, events)
    wall_ns: list[int] = field(default_factory=list)
    latency_ns: list[int] = field(default_factory=list)  # plain session, alternating with wall_ns
    # the calling thread's CPU time in the interleaved runs (plain, profiled)
    latency_cpu_ns: list[int] = field(default_factory=list)
    profiled_cpu_ns: list[int] = field(default_factory=list)
    optimized: onnx.ModelProto | None = None
    intra_op_threads: int | None = None
    block_runs: int = BLOCK_RUNS

    def setup(self, feed: dict[str, Any]) -> Measurement:
        """How latency was taken, the threads really used, the inputs fed."""
        return Measurement(
            latency="interleaved" if self.latency_ns else "off",
            block_runs=self.block_runs if self.latency_ns else None,
            spinning_stopped_between_runs=bool(self.latency_ns),
            intra_op_threads=self.intra_op_threads,
            intra_op_threads_source="OS threads the session started + the calling thread"
            if self.intra_op_threads is not None else None,
            pool_workers_seen=pool_workers(r for _, r in self.runs),
            inputs=[{"name": k, "shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)}
                    for k, v in feed.items()])


def _chunk_capacity(opts: ProfileOptions, n_nodes: int) -> int:
    per_run = n_nodes + _SESSION_EVENTS_PER_RUN
    capacity = (opts.max_events - _SESSION_EVENTS_FIXED) // per_run - opts.warmup
    if capacity < 1:
        raise InputError(f"a run of {n_nodes} nodes plus {opts.warmup} warm-up runs does not fit "
                         f"ONNX Runtime's profiler limit of {opts.max_events} events")
    return capacity


def _profiled_chunk(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any], runs: int,
                    workdir: Path, index: int, m: Measured, plain: ort.InferenceSession | None) -> None:
    so = session_options(opts, profile_prefix=workdir / f"ort{index}", spin_stop=plain is not None)
    sess, threads = counted_session(source, so, opts.provider)
    if m.intra_op_threads is None:
        m.intra_op_threads = threads
    origin = sess.get_profiling_start_time_ns()
    _timed_chunk(sess, plain, feed, opts.warmup, runs, m)
    trace_path = Path(sess.end_profiling())
    events = json.loads(trace_path.read_text())
    trace_path.unlink()
    all_runs = split_runs(events)
    if len(all_runs) != opts.warmup + runs:
        raise LayerperfError(f"ONNX Runtime's profiler recorded {len(all_runs)} of {opts.warmup + runs} runs",
                             hint="lower --runs or raise max_events")
    m.runs += [(origin, r) for r in all_runs[opts.warmup:]]


def optimized_graph(source: ModelSource, opts: ProfileOptions) -> onnx.ModelProto:
    """The graph ONNX Runtime runs under ``opts`` (its optimized model), read back without its weights
    but for those of blocked (NCHWc) convolutions, whose zeros tell the real channel counts of a
    blocked layout (:mod:`layerperf.cost.layout`).

    It comes from a session of its own that never runs and is released at once: a session that
    writes its optimized model keeps the weights it pre-packs besides their packed copies (bert-base:
    0.3 GB more for as long as it lives); this one pre-packs nothing (pre-packing is the kernels'
    business, the graph is the same). ONNX Runtime writes the weights to a file of their own, one
    by one, instead of copying them all into one message first.
    """
    with tempfile.TemporaryDirectory(prefix="layerperf-opt-") as tmp:
        path = Path(tmp) / "optimized.onnx"
        so = session_options(opts, optimized_path=path)
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.data")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                    str(INLINE_LIMIT_BYTES))
        so.add_session_config_entry("session.disable_prepacking", "1")
        release()  # what the sessions before it freed
        create_session(source, so, opts.provider)
        release()
        model = onnx.load(str(path), load_external_data=False)
        _read_blocked_conv_weights(model, Path(tmp))
    return model


def _read_blocked_conv_weights(model: onnx.ModelProto, data_dir: Path) -> None:
    from layerperf.cost.layout import NCHWC
    from layerperf.models import extdata

    wanted = {n.input[1] for n in model.graph.node if n.domain == NCHWC and n.op_type == "Conv" and len(n.input) > 1}
    for t in model.graph.initializer:
        if t.name in wanted and t.data_location == onnx.TensorProto.EXTERNAL:
            t.CopyFrom(extdata.loaded(t, data_dir))


def _timed_chunk(sess: ort.InferenceSession, plain: ort.InferenceSession | None, feed: dict[str, Any],
                 warmup: int, runs: int, m: Measured) -> None:
    """Warm-up, then the timed runs of a profiled session, alternating with ``plain`` when given."""
    if plain is None:
        m.wall_ns += timed_runs(sess, feed, warmup, runs)
        return
    timed_runs(sess, feed, warmup, 0)
    plain_t, profiled_t = interleaved(lambda: plain.run(None, feed), lambda: sess.run(None, feed), runs,
                                      block=m.block_runs)
    m.latency_ns += plain_t.wall_ns
    m.wall_ns += profiled_t.wall_ns
    m.latency_cpu_ns += plain_t.cpu_ns
    m.profiled_cpu_ns += profiled_t.cpu_ns


def plain_session(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any]) -> ort.InferenceSession:
    """The profiler-off session whose runs alternate with the profiled ones, warmed up."""
    sess = create_session(source, session_options(opts, spin_stop=True), opts.provider)
    timed_runs(sess, feed, opts.warmup, 0)
    return sess


def _estimated_nodes(model: onnx.ModelProto) -> int:
    # Before the first session the optimized graph is unknown; layout passes add a few reorder
    # nodes to the original count, so size the first chunk generously and use real counts after.
    return len(model.graph.node) * 5 // 4 + 16


def _has_subgraphs(model: onnx.ModelProto) -> bool:
    """Whether any node runs a subgraph (Loop, If, Scan...): its events per run are unknown until run."""
    graph_types = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in graph_types for n in model.graph.node for a in n.attribute)


def measure(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any],
            progress: Callable[[int], None] | None = None) -> Measured:
    """Profiled runs, split over as many sessions as ONNX Runtime's event limit requires; with
    ``opts.latency``, plain runs alternating with them on one profiler-off session kept alive. Then
    the optimized graph, from a session of its own once those are gone (:func:`optimized_graph`)."""
    m = Measured()
    plain = plain_session(source, opts, feed) if opts.latency else None
    capacity = _chunk_capacity(opts, _estimated_nodes(source.proto))
    if _has_subgraphs(source.proto):  # a loop's body may record any number of events: measure one run first
        capacity = 1
    with tempfile.TemporaryDirectory(prefix="layerperf-ort-") as tmp:
        done = index = 0
        while done < opts.runs:
            n = min(capacity, opts.runs - done)
            _profiled_chunk(source, opts, feed, n, Path(tmp), index, m, plain)
            capacity = _chunk_capacity(opts, max(max(len(r.nodes), r.events) for _, r in m.runs))
            done, index = done + n, index + 1
            if progress:
                progress(done)
    del plain  # gone before the next session is made
    m.optimized = optimized_graph(source, opts)  # after the measured sessions: it may hold conv weights
    return m


def prepare_feed(source: ModelSource, opts: ProfileOptions) -> dict[str, np.ndarray]:
    sess = create_session(source, session_options(ProfileOptions(opt_level="disable")), opts.provider)
    specs = input_specs(sess)
    return make_feed(source.proto, specs, opts.shapes, opts.inputs_file, opts.seed)
