"""In-situ runs inside the counting worker: the real session, profiled, run between the stepwise
executor's timed passes so that a host's drift hits both, and its node times read back per layer.

It is the reference the stepwise executor's per-layer times are held to (the fidelity the summary
and the layer table report): same model, same optimization level, same thread pool (the worker's
global one), the same inputs, each run next to a stepwise pass.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort

from layerperf.backends.ort.measure import OPT_LEVELS, SPIN_STOP_KEY
from layerperf.backends.ort.session import Session
from layerperf.models import extdata
from layerperf.readers.ort import split_runs

WARMUP_RUNS = 2


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
        for _ in range(WARMUP_RUNS):
            self.run()

    def run(self) -> None:
        self._sess.run(None, self._feed)

    def node_ns(self, order: Sequence[str]) -> list[list[float]]:
        """Per layer of ``order``, its time in each run after the warm-up (NaN where a run lacks it); the
        session's profiling ends here."""
        events = json.loads(Path(self._sess.end_profiling()).read_text())
        self._tmp.cleanup()
        runs = split_runs(events)[WARMUP_RUNS:]
        per_run = []
        for run in runs:
            took: dict[str, float] = {}
            for node in run.nodes:
                if node.parent is None:
                    took[node.name] = took.get(node.name, 0.0) + node.dur_us * 1e3
            per_run.append(took)
        return [[r.get(name, math.nan) for r in per_run] for name in order]
