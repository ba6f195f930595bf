"""The temporal breakdown: how the device's time went, from its first activity's start to its last's end.

``idle`` is the part of that span no activity covers (on any stream), ``compute`` the union of the
computation kernels, ``non_compute`` the rest of the busy time (copies, sets, communication, other) —
Holistic Trace Analysis's figures. With ``ProfilerStep#N`` annotations, the same per step, an
activity counted in the step that launched it.

A fold over the activities by start (``blocks("ts_ns")``): per span (the whole trace, each step) two
carried :class:`~layerperf.analysis.gpu.intervals.Union` s, of all activities and of the computation
ones — each the interval still open, the closed length, a count and the least start and largest end.
Memory: a few numbers per step, whatever the trace's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.intervals import COMPUTATION, KINDS, Union, Windows, kind_codes, step_time
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable

_COMPUTE = KINDS.index(COMPUTATION)


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


class _Span:
    """The unions one breakdown needs, carried across blocks."""

    def __init__(self) -> None:
        self.busy, self.compute = Union(), Union()

    def add(self, start: np.ndarray, end: np.ndarray, compute: np.ndarray) -> None:
        self.busy.add(start, end)
        self.compute.add(start[compute], end[compute])

    def result(self, label: str) -> Breakdown:
        if not self.busy.count:
            return Breakdown(label, 0.0, 0.0, 0.0, 0.0, 0)
        span, busy, compute = self.busy.span_ns, self.busy.total_ns, self.compute.total_ns
        return Breakdown(label, span, span - busy, compute, busy - compute, self.busy.count)


def temporal(kernels: KernelTable | Activities, steps: Sequence[tuple[float, float]] = (),
             step_names: Sequence[str] = ()) -> Temporal:
    """The breakdown of all of ``kernels`` and of those launched in each ``steps`` window (ns)."""
    whole, per, windows = _Span(), [_Span() for _ in steps], Windows(steps)
    for block in activities(kernels).blocks("ts_ns"):
        start = block.ts_ns
        end = start + block.dur_ns
        compute = kind_codes(block) == _COMPUTE
        whole.add(start, end, compute)
        if per:
            for k, rows in windows.split(step_time(block)):
                per[k].add(start[rows], end[rows], compute[rows])
    names = list(step_names) or [f"step {k + 1}" for k in range(len(per))]
    return Temporal(whole.result("whole trace"),
                    tuple(span.result(name) for span, name in zip(per, names, strict=False)))
