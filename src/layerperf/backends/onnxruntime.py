"""The ONNX Runtime backend: per-node timings taken in situ by ONNX Runtime's own profiler.

Timings come from the real optimized graph running in the real thread pool. The profiler stops
recording at ``max_events`` (1,000,000 by default in ONNX Runtime), so long measurements are split
across sessions sized to stay under it, and every run is checked to be present — none is lost
silently. Whole-model latency is measured separately with the profiler off.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from layerperf.backends.ort_trace import RunEvents, split_runs
from layerperf.errors import InputError, LayerperfError
from layerperf.inputs import InputSpec, make_feed, ort_type_to_numpy
from layerperf.modelsrc import ModelSource

OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
ORT_MAX_EVENTS = 1_000_000
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

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["shapes"] = list(self.shapes)
        return d


def session_options(opts: ProfileOptions, *, profile_prefix: Path | None = None,
                    optimized_path: Path | None = None) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.graph_optimization_level = OPT_LEVELS[opts.opt_level]
    so.intra_op_num_threads = opts.threads
    so.log_severity_level = 3  # the NCHWc serialization warning is expected; keep stderr clean
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_prefix)
    if optimized_path is not None:
        so.optimized_model_filepath = str(optimized_path)
    return so


def create_session(source: ModelSource, so: ort.SessionOptions, provider: str) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(str(source.path), so, providers=[provider])
    except Exception as exc:  # ORT raises its own pybind exception types; any of them means "cannot load"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"ONNX Runtime cannot load {source.path}: {first}") from None


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
class Measurement:
    """What the profiled sessions gave: runs of node events with their absolute origin."""

    runs: list[tuple[int, RunEvents]] = field(default_factory=list)  # (session start ns, events)
    wall_ns: list[int] = field(default_factory=list)
    optimized: onnx.ModelProto | None = None


def _chunk_capacity(opts: ProfileOptions, n_nodes: int) -> int:
    per_run = n_nodes + _SESSION_EVENTS_PER_RUN
    capacity = (opts.max_events - _SESSION_EVENTS_FIXED) // per_run - opts.warmup
    if capacity < 1:
        raise InputError(f"a run of {n_nodes} nodes plus {opts.warmup} warm-up runs does not fit "
                         f"ONNX Runtime's profiler limit of {opts.max_events} events")
    return capacity


def _profiled_chunk(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any], runs: int,
                    workdir: Path, index: int, m: Measurement) -> None:
    optimized = workdir / "optimized.onnx" if m.optimized is None else None
    so = session_options(opts, profile_prefix=workdir / f"ort{index}", optimized_path=optimized)
    sess = create_session(source, so, opts.provider)
    origin = sess.get_profiling_start_time_ns()
    m.wall_ns += timed_runs(sess, feed, opts.warmup, runs)
    trace_path = Path(sess.end_profiling())
    events = json.loads(trace_path.read_text())
    trace_path.unlink()
    all_runs = split_runs(events)
    if len(all_runs) != opts.warmup + runs:
        raise LayerperfError(f"ONNX Runtime's profiler recorded {len(all_runs)} of {opts.warmup + runs} runs",
                             hint="lower --runs or raise max_events")
    m.runs += [(origin, r) for r in all_runs[opts.warmup:]]
    if optimized is not None:
        m.optimized = onnx.load(str(optimized), load_external_data=False)
        optimized.unlink()


def _estimated_nodes(model: onnx.ModelProto) -> int:
    # Before the first session the optimized graph is unknown; layout passes add a few reorder
    # nodes to the original count, so size the first chunk generously and use real counts after.
    return len(model.graph.node) * 5 // 4 + 16


def _has_subgraphs(model: onnx.ModelProto) -> bool:
    """Whether any node runs a subgraph (Loop, If, Scan...): its events per run are unknown until run."""
    graph_types = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in graph_types for n in model.graph.node for a in n.attribute)


def measure(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any],
            progress: Callable[[int], None] | None = None) -> Measurement:
    """Profiled runs, split over as many sessions as ONNX Runtime's event limit requires."""
    m = Measurement()
    capacity = _chunk_capacity(opts, _estimated_nodes(source.proto))
    if _has_subgraphs(source.proto):  # a loop's body may record any number of events: measure one run first
        capacity = 1
    with tempfile.TemporaryDirectory(prefix="layerperf-ort-") as tmp:
        done = index = 0
        while done < opts.runs:
            n = min(capacity, opts.runs - done)
            _profiled_chunk(source, opts, feed, n, Path(tmp), index, m)
            capacity = _chunk_capacity(opts, max(max(len(r.nodes), r.events) for _, r in m.runs))
            done, index = done + n, index + 1
            if progress:
                progress(done)
    return m


def unprofiled_latency(source: ModelSource, opts: ProfileOptions, feed: dict[str, Any]) -> list[int]:
    sess = create_session(source, session_options(opts), opts.provider)
    return timed_runs(sess, feed, opts.warmup, opts.runs)


def prepare_feed(source: ModelSource, opts: ProfileOptions) -> dict[str, np.ndarray]:
    sess = create_session(source, session_options(ProfileOptions(opt_level="disable")), opts.provider)
    specs = input_specs(sess)
    return make_feed(source.proto, specs, opts.shapes, opts.inputs_file, opts.seed)
