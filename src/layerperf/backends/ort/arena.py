"""ONNX Runtime's side of the memory profile: a fresh session, its first runs, sampled.

The first run of a session allocates tensor by tensor and the second allocates the planned memory
pattern, so both are run: together they show the arena's growth from what the session held
before running. Resident memory is sampled throughout when ``sample_rate`` > 0.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from layerperf.backends.base import RunPlan
from layerperf.backends.ort.measure import create_session, session_options
from layerperf.backends.ort.options import OrtOptions
from layerperf.collectors.rss_sampler import RssSampler, RunWindows, per_node
from layerperf.data.memory_report import ArenaRun, RuntimeMemory
from layerperf.models.source import ModelSource
from layerperf.readers.ort import RunEvents, memory_figures, split_runs

SAMPLED_RUNS = 2


def _arena_run(run: RunEvents, index: dict[str, int], n_layers: int) -> ArenaRun:
    cols: dict[str, list[int | None]] = {k: [None] * n_layers for k in
                                         ("mem_bytes_in_use", "mem_in_use_peak", "mem_arena_held")}
    for ev in run.nodes:
        if ev.name in index:
            figures = memory_figures(ev.args)
            for key, col in cols.items():
                col[index[ev.name]] = figures.get(key)
    return ArenaRun(tuple(cols["mem_bytes_in_use"]), tuple(cols["mem_in_use_peak"]), tuple(cols["mem_arena_held"]))


def _before(run: RunEvents, key: str, delta: str) -> int | None:
    figures = memory_figures(run.nodes[0].args) if run.nodes else {}
    return figures[key] - figures.get(delta, 0) if key in figures else None


def _windows(run: RunEvents, index: dict[str, int], origin_ns: int) -> RunWindows:
    nodes = [ev for ev in run.nodes if ev.name in index]
    return RunWindows(origin_ns + run.ts_us * 1000, origin_ns + (run.ts_us + run.dur_us) * 1000,
                      tuple(origin_ns + ev.ts_us * 1000 for ev in nodes), tuple(index[ev.name] for ev in nodes))


def measure(source: ModelSource, plan: RunPlan, options: OrtOptions, feed: dict[str, Any],
            layer_names: Sequence[str], sample_rate: int) -> RuntimeMemory:
    """Run a fresh profiled session twice; arena figures per layer and RSS every ``sample_rate`` nodes."""
    index = {name: i for i, name in enumerate(layer_names)}
    with tempfile.TemporaryDirectory(prefix="layerperf-mem-") as tmp:
        so = session_options(options.opt_level, plan.threads, profile_prefix=Path(tmp) / "mem")
        sess = create_session(source, so, options.provider)
        origin = sess.get_profiling_start_time_ns()
        sampler = RssSampler() if sample_rate else None
        with sampler or contextlib.nullcontext():
            for _ in range(SAMPLED_RUNS):
                sess.run(None, feed)
        trace = Path(sess.end_profiling())
        runs = split_runs(json.loads(trace.read_text()))
    arena = tuple(_arena_run(run, index, len(layer_names)) for run in runs)
    first = runs[0] if runs else RunEvents(0, 0)
    rt = RuntimeMemory(arena_runs=arena, sample_rate=sample_rate,
                       arena_in_use_before_bytes=_before(first, "mem_bytes_in_use", "mem_in_use_delta"),
                       arena_held_before_bytes=_before(first, "mem_arena_held", "mem_arena_held_delta"))
    if sampler is None:
        return rt
    samples = per_node(sampler.times_ns, sampler.rss_bytes, sampler.baseline_bytes,
                       [_windows(run, index, origin) for run in runs], sample_rate)
    return replace(rt, rss_baseline_bytes=sampler.baseline_bytes, rss_hwm_bytes=sampler.hwm_bytes,
                   rss_samples=tuple(samples))
