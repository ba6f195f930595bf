"""The temporal breakdown: how the device's time went, from its first activity's start to its last's end.

``idle`` is the part of that span no activity covers (on any stream), ``compute`` the union of the
computation kernels, ``non_compute`` the rest of the busy time (copies, sets, communication, other) —
Holistic Trace Analysis's figures. With ``ProfilerStep#N`` annotations, the same per step, an
activity counted in the step that launched it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.intervals import COMPUTATION, kinds, step_time, union_ns, windows_of
from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class Breakdown:
    """One span's split (ns): ``span_ns`` = ``idle_ns`` + ``compute_ns`` + ``non_compute_ns``."""

    label: str
    span_ns: float
    idle_ns: float
    compute_ns: float
    non_compute_ns: float
    activities: int

    def share(self, part_ns: float) -> float | None:
        return part_ns / self.span_ns if self.span_ns > 0 else None


@dataclass(frozen=True, slots=True)
class Temporal:
    """The whole trace's breakdown and, where the trace marks steps, each step's."""

    whole: Breakdown
    steps: tuple[Breakdown, ...]


def breakdown(kernels: KernelTable, rows: np.ndarray, label: str) -> Breakdown:
    start = kernels.ts_ns[rows]
    end = start + kernels.dur_ns[rows]
    if not rows.size:
        return Breakdown(label, 0.0, 0.0, 0.0, 0.0, 0)
    span = float(end.max() - start.min())
    busy = union_ns(start, end)
    compute = kinds(kernels)[rows] == COMPUTATION
    compute_ns = union_ns(start[compute], end[compute])
    return Breakdown(label, span, span - busy, compute_ns, busy - compute_ns, int(rows.size))


def temporal(kernels: KernelTable, steps: Sequence[tuple[float, float]] = (),
             step_names: Sequence[str] = ()) -> Temporal:
    """The breakdown of all of ``kernels`` and of those launched in each ``steps`` window (ns)."""
    whole = breakdown(kernels, np.arange(len(kernels)), "whole trace")
    per = windows_of(step_time(kernels), steps)
    names = list(step_names) or [f"step {k + 1}" for k in range(len(per))]
    return Temporal(whole, tuple(breakdown(kernels, rows, name) for rows, name in zip(per, names, strict=False)))
