"""The runs of a trace as the report shows them: each run's extent and calls, which leading runs were a
warm-up, which steady runs are outliers, and the run drawn first.

A layerperf Profile records its measured runs (its warm-up runs were never measured). A foreign trace's
runs are its ``ProfilerStep#N`` events or the periods of its op sequence
(:func:`layerperf.analysis.trace_runs.find_runs`), its first ones often slower (caches, allocators,
autotuning): a 241.8 ms first step beside a 27.0 ms one is no "129 ms per run". One factor marks a figure
far from its median: a run :data:`FAR` times the steady runs' median or more (or 1/FAR or less), a call
FAR times its op's median or more (a call can only be slow: faster ones are the same work done well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from layerperf.analysis.trace_runs import find_runs, marked_by
from layerperf.data.calls import Calls
from layerperf.data.profile import Profile

if TYPE_CHECKING:
    from collections.abc import Sequence

FAR = 2.0  # a run or call at least this many times its median (or at most its inverse) is marked


def far(value: float, median: float) -> bool:
    """Whether ``value`` is far from ``median`` (:data:`FAR`); False when either is unknown or not > 0."""
    if not (value > 0 and median > 0):
        return False
    return value >= FAR * median or value * FAR <= median


@dataclass(frozen=True, slots=True)
class RunSet:
    """The runs of a trace: extents (ns on the table's clock), calls (rows of the table, by start; empty
    when the trace says how many runs it holds but its calls could not be split into them), the
    number of leading warm-up runs, the outlier runs among the others, and how they were found."""

    starts_ns: tuple[float, ...]
    ends_ns: tuple[float, ...]
    rows: tuple[np.ndarray, ...]
    warmup: int
    outliers: tuple[int, ...]
    how: str
    noun: str = "run"  # "step" when the trace's ProfilerStep events are the runs (trace_runs.marked_by)
    split: bool = True  # whether each run's calls are known (else one window: the whole trace)
    # calls in each run, where ``rows`` hold only the runs the page keeps (a trace too large to hold:
    # :mod:`.streamed`); empty: every run's rows are there
    sizes: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.starts_ns)

    def size(self, k: int) -> int:
        """Calls in run ``k``."""
        return self.sizes[k] if self.sizes else len(self.rows[k])

    @property
    def durations_ns(self) -> np.ndarray:
        return np.asarray(self.ends_ns, dtype=np.float64) - np.asarray(self.starts_ns, dtype=np.float64)

    @property
    def steady(self) -> list[int]:
        """The runs after the warm-up."""
        return list(range(self.warmup, len(self)))

    @property
    def median_ns(self) -> float:
        """The steady runs' median duration."""
        return float(np.median(self.durations_ns[self.warmup:])) if len(self) else float("nan")

    @property
    def representative(self) -> int:
        """The steady run of median duration (the lower middle one of an even count): drawn first."""
        durations = self.durations_ns
        steady = sorted(self.steady, key=lambda k: (durations[k], k))
        return steady[(len(steady) - 1) // 2] if steady else 0


def warmup_count(durations: Sequence[float]) -> int:
    """Leading runs each :data:`FAR` times or more the median of the runs after it (at most half the runs,
    and never the last): a cold start, not the steady state."""
    n, k = len(durations), 0
    while k < n - 1 and k < n // 2 and durations[k] >= FAR * float(np.median(durations[k + 1:])):
        k += 1
    return k


def outlier_runs(durations: Sequence[float], warmup: int) -> tuple[int, ...]:
    """Steady runs far from the steady runs' median (:func:`far`)."""
    steady = np.asarray(durations[warmup:], dtype=np.float64)
    if steady.size < 2:
        return ()
    median = float(np.median(steady))
    return tuple(warmup + i for i, d in enumerate(steady.tolist()) if far(d, median))


def made(starts: Sequence[float], ends: Sequence[float], rows: Sequence[np.ndarray], how: str, *,
         noun: str = "run", split: bool = True, warmups: bool = True, sizes: Sequence[int] = ()) -> RunSet:
    """The runs with these extents and calls, their warm-up and outliers found."""
    durations = [e - s for s, e in zip(starts, ends, strict=True)]
    warmup = warmup_count(durations) if warmups else 0
    return RunSet(tuple(map(float, starts)), tuple(map(float, ends)), tuple(rows), warmup,
                  outlier_runs(durations, warmup), how, noun, split, tuple(sizes))


def _ordered(calls: Calls, rows: np.ndarray) -> np.ndarray:
    return rows[np.argsort(calls.ts_ns[rows], kind="stable")]


def _extent(calls: Calls, rows: np.ndarray) -> tuple[float, float]:
    """From the first call's start to the last call's end."""
    ts = calls.ts_ns[rows]
    ends = ts + np.nan_to_num(calls.incl_ns[rows], nan=0.0)
    return float(np.nanmin(ts)), float(np.nanmax(ends))


def run_set(calls: Calls, profile: Profile | None) -> RunSet | None:
    """The runs of a trace's table (and of its Profile when it has one); None when its calls have no
    start times (nothing to place in time)."""
    if not calls.has_times:
        return None
    if profile is not None and profile.runs and len(calls) == sum(len(r.spans) for r in profile.runs):
        bounds = np.cumsum([0] + [len(r.spans) for r in profile.runs])
        rows = [_ordered(calls, np.arange(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        warmup = profile.metadata.plan.warmup
        how = "measured runs" + (f" ({warmup} warm-up runs before them were not measured)" if warmup else "")
        return made([float(r.start_ns) for r in profile.runs], [float(r.start_ns + r.dur_ns) for r in profile.runs],
                     rows, how, warmups=False)
    return _foreign(calls)


def _foreign(calls: Calls) -> RunSet:
    found = find_runs(calls)
    timed = _ordered(calls, np.flatnonzero(~np.isnan(calls.ts_ns)))
    if found.bounds_ns and len(found.windows) == len(found.bounds_ns):
        starts = [s for s, _ in found.bounds_ns]
        ends = [e for _, e in found.bounds_ns]
        return made(starts, ends, [_ordered(calls, w) for w in found.windows], found.how,
                    noun=marked_by(calls.meta)[1])
    if len(found.windows) >= 2:
        extents = [_extent(calls, w) for w in found.windows]
        return made([s for s, _ in extents], [e for _, e in extents], [_ordered(calls, w) for w in found.windows],
                     found.how)
    whole = _ordered(calls, found.windows[0]) if found.windows else timed
    start, end = _extent(calls, whole)
    how, split = one_window(found.how, found.count)
    return made([start], [end], [whole], how, split=split)


def one_window(how: str, said: int | None) -> tuple[str, bool]:
    """How a trace drawn as one window was found, and whether that window is its one run (not when the
    trace says it holds runs its calls do not divide into)."""
    split = not (said and said > 1)
    return (how, True) if split else (f"{how} ({said} runs said, drawn as one window)", False)
