"""The runs of a foreign trace (one not written by layerperf): how many, and which calls each holds.

Where the trace marks them, its marks are the runs: a PyTorch profiler trace's ``ProfilerStep#N``
events, an ONNX Runtime profile's ``model_run`` events (``meta["run_windows_ns"]``, from
:mod:`layerperf.readers.kineto` and :mod:`layerperf.readers.ort`). Otherwise a run is a period
of the op sequence: the smallest ``p`` such that the trace's calls, by start time, are the same ``p``
names over and over (``n % p == 0``); three forward calls of a CNN repeat its ops three times, whatever
op comes first. A trace that only counts its runs (``meta["runs"]``: ONNX Runtime's ``model_run`` events
where they overlap, runs called from several threads at once) is split by the period its count gives
when the sequence repeats that way. No period:
the trace is one run, unless it says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.calls import Calls

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class TraceRuns:
    """``count`` runs (None: unknown, the table has no start times), the rows of each (by start time; empty
    when the calls could not be split into them), where each starts and ends when the trace says, and
    ``how`` the count was found, for people."""

    count: int | None
    windows: tuple[np.ndarray, ...]
    how: str
    bounds_ns: tuple[tuple[float, float], ...] = ()

    @property
    def per_run(self) -> bool:
        """Whether figures can be given per run: the runs are known and more than one."""
        return self.count is not None and self.count > 1


def period(codes: np.ndarray, prefer: int | None = None) -> int | None:
    """The smallest ``p`` < n with ``codes`` the same ``p`` values repeated n / p times (``prefer`` runs
    tried first: the period a trace's own count of runs gives); None when there is none."""
    n = int(codes.size)
    if n < 2:
        return None
    candidates = [n // prefer] if prefer and prefer > 1 and n % prefer == 0 else []
    candidates += [p for p in range(1, n // 2 + 1) if n % p == 0]
    for p in candidates:
        if codes[p] == codes[0] and np.array_equal(codes[p:], codes[:-p]):
            return p
    return None


def find_runs(calls: Calls) -> TraceRuns:
    """The runs of ``calls`` (a foreign trace's table), as the module says."""
    said = calls.meta.get("runs")
    said = int(said) if said else None
    if not calls.has_times:
        return TraceRuns(said, (), "as the trace says" if said else "not in this trace")
    timed = np.flatnonzero(~np.isnan(calls.ts_ns))
    timed = timed[np.argsort(calls.ts_ns[timed], kind="stable")]
    marked = calls.meta.get("run_windows_ns")
    if marked:
        ts = calls.ts_ns[timed]  # by start: a window's calls are a slice, found by two binary searches
        windows = tuple(timed[np.searchsorted(ts, s, "left"):np.searchsorted(ts, e, "left")] for s, e in marked)
        return TraceRuns(len(marked), windows, marked_by(calls.meta)[0],
                         tuple((float(s), float(e)) for s, e in marked))
    p, how = by_sequence(calls.name.codes[timed], said)
    if p is not None:
        n = timed.size // p
        return TraceRuns(n, tuple(timed[k * p:(k + 1) * p] for k in range(n)), how)
    if said and said > 1:
        return TraceRuns(said, (), how)
    return TraceRuns(1, (timed,), how)


def marked_by(meta: Mapping[str, Any]) -> tuple[str, str]:
    """How a trace marks its runs (``meta["run_windows_ns"]``), for people, and what to call one: a PyTorch
    trace's ProfilerStep events are steps, ONNX Runtime's model_run events runs."""
    if meta.get("run_windows_by") == "model_run":
        return "its model_run events", "run"
    return "its ProfilerStep events", "step"


def by_sequence(codes: np.ndarray, said: int | None) -> tuple[int | None, str]:
    """The runs of a trace without ProfilerStep marks from its calls' name codes by start time (``said``:
    the runs the trace counts): the period that splits them (None: no split) and how they were found."""
    if said == 1:
        return None, "as the trace says: one run"
    p = period(codes, said)
    if p is not None and (said is None or codes.size // p == said):
        return p, f"its op sequence repeats {codes.size // p} times, every {p} calls"
    if said:
        return None, ("as the trace says; its op sequence does not repeat that many times, so its calls are not "
                      "split into runs")
    return None, ("its calls, by start, do not repeat as one sequence (a runtime call more in one pass is enough): "
                  "one run")
