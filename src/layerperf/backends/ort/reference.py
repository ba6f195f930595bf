"""In-situ runs inside the counting worker: the real session, profiled, run between the stepwise
executor's timed passes so that a host's drift hits both, and its node times read back per layer.

It is the reference the stepwise executor's per-layer times are held to (the fidelity the summary
and the layer table report): same model, same optimization level, same thread pool (the worker's
global one), the same inputs, each run next to a stepwise pass. After those, :meth:`InSituRuns.sample`
runs it again with software events sampled on every thread of the worker
(:mod:`layerperf.counters.sampling`), and the samples are laid over the profiler's node intervals: the
same counts, taken in the real run, to hold the stepwise counts to.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from layerperf.backends.ort.measure import OPT_LEVELS, SPIN_STOP_KEY
from layerperf.backends.ort.session import Session
from layerperf.counters import EventSpec
from layerperf.counters.group import list_threads
from layerperf.counters.sampling import SampledGroup, Samples, attribute
from layerperf.models import extdata
from layerperf.readers.ort import split_runs

WARMUP_RUNS = 2
SAMPLED_RUNS = 20
# A sample every 500 µs of a thread's CPU time. Each costs this VM some 13 µs (a timer interrupt leaves
# the guest): every 50 µs it added x1.45 to a resnet50 run and a third to its counts; every 500 µs
# x1.01-1.12 and, over 30 runs, a layer's median known to 1% (resnet50, bert-base) - 8% (mobilenet_v2,
# whose layers take tens of µs) (benchmarks/insitu_sampling.py).
SAMPLE_PERIOD_NS = 500_000


class InSituRuns:
    """The real session on ``model_path``, profiled; :meth:`run` runs it once, :meth:`node_ns` reads each
    layer's time in every run since the warm-up, in ``order``."""

    def __init__(self, model_path: str, opts: dict[str, Any], data_dir: Path, feed: dict[str, Any]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="layerperf-insitu-")
        so = ort.SessionOptions()
        so.graph_optimization_level = OPT_LEVELS[opts["opt_level"]]
        so.use_per_session_threads = False  # the worker's global pool, the stepwise executor's too
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(self._tmp.name) / "insitu")
        so.log_severity_level = 3
        # as the profiled runs with latency on: workers stop spinning when a run returns
        so.add_session_config_entry(SPIN_STOP_KEY, "1")
        model: str | bytes = model_path
        if Path(model_path).parent != data_dir:
            model = Path(model_path).read_bytes()
            extdata.use_folder(so, data_dir)
        self._sess = Session(model, so, opts["provider"], what=model_path)
        self._feed = feed
        self._sampled: list[dict[int, Samples]] = []
        for _ in range(WARMUP_RUNS):
            self.run()

    def run(self) -> None:
        self._sess.run(None, self._feed)

    def sample(self, specs: Sequence[EventSpec], runs: int = SAMPLED_RUNS,
               period_ns: int = SAMPLE_PERIOD_NS) -> None:
        """``runs`` more runs with ``specs`` (software events, task-clock first: it sets the period)
        sampled on every thread; raises CounterError where they cannot be."""
        group = SampledGroup(specs, list_threads(), period_ns)
        try:
            for _ in range(runs):
                group.enable()
                group.mark(time.time_ns())
                self.run()
                group.mark(time.time_ns())
                group.disable()
                self._sampled.append(group.take())
        finally:
            group.close()

    def finish(self, order: Sequence[str], n_events: int) -> tuple[list[list[float]], list[np.ndarray]]:
        """Per layer of ``order``, its time in each run after the warm-up but the sampled ones (NaN where
        a run lacks it); and per sampled run, the counts each layer got, ``[layer][event]``. The
        session's profiling ends here."""
        origin = self._sess.get_profiling_start_time_ns()
        events = json.loads(Path(self._sess.end_profiling()).read_text())
        self._tmp.cleanup()
        runs = split_runs(events)[WARMUP_RUNS:]
        timed, sampled = runs[:len(runs) - len(self._sampled)], runs[len(runs) - len(self._sampled):]
        index = {name: i for i, name in enumerate(order)}
        per_run = []
        for run in timed:
            took: dict[str, float] = {}
            for node in run.nodes:
                if node.parent is None:
                    took[node.name] = took.get(node.name, 0.0) + node.dur_us * 1e3
            per_run.append(took)
        counts = []
        for run, samples in zip(sampled, self._sampled, strict=True):
            intervals = sorted(((index[n.name], origin + n.ts_us * 1000, origin + (n.ts_us + n.dur_us) * 1000)
                                for n in run.nodes if n.parent is None and n.name in index), key=lambda x: x[1])
            got = np.zeros((len(order), n_events))
            for thread in samples.values():
                got += np.asarray(attribute(thread, intervals, len(order), n_events)[0])
            ran = np.zeros(len(order), bool)
            ran[[slot for slot, _, _ in intervals]] = True
            got[~ran] = np.nan  # a layer this run did not record: unknown, not 0
            counts.append(got)
        return [[r.get(name, math.nan) for r in per_run] for name in order], counts
