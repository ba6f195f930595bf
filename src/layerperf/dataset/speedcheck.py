"""Which measured runs of a profile ran while the CPU was slowed: bench's speed check, between runs.

On a virtual machine the host can slow a core for seconds (another tenant on the same physical core),
invisibly from inside. ``layerperf bench`` reads a yardstick — a fixed pure-Python loop
(:func:`layerperf.bench.measure.yardstick_ns`) — between its samples and sets aside those taken
slowed. The collector does the same between a profile's measured runs: :class:`SpeedRecorder` is the
run plan's ``between_runs`` hook; :meth:`SpeedRecorder.verdict` judges each run by the readings around
it against the full-speed yardstick (the one this machine remembers, :mod:`layerperf.bench.speed`, or
the fastest reading of this profile) with bench's rule (:func:`~layerperf.bench.measure.slowed_between`).
Slowed runs are set aside from the per-layer statistics; where too few full-speed runs remain, the
statistics stand on every run and the configuration is flagged (``slowed_used``), never silently.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from layerperf.bench import speed
from layerperf.bench.measure import MIN_SAMPLES, slow_readings, slowed_between, yardstick_ns

FIRST_LOOK = 5  # readings before the first run that only help find this profile's full speed


@dataclass(frozen=True, slots=True)
class SpeedVerdict:
    """The speed check of one profile's runs: the runs the statistics use (indices into Profile.runs), how
    many were taken slowed and set aside, whether too few full-speed runs came (``slowed_used``: every
    run used, flagged), the full-speed yardstick held to and the median reading, in ns."""

    used: tuple[int, ...]
    slowed: int
    slowed_used: bool
    reference_ns: float | None
    median_reading_ns: float | None


@dataclass(slots=True)
class SpeedRecorder:
    """The ``between_runs`` hook that reads the yardstick: ``self(n)`` with 0 before a loop's first run,
    then with the runs that loop made so far. A backend may run several loops (ONNX Runtime splits long
    measurements over sessions): each starts again at 0, and its runs follow the previous loop's."""

    ruler: Callable[[], float] = yardstick_ns
    readings: list[float] = field(default_factory=list)
    first_look: list[float] = field(default_factory=list)
    bounds: list[tuple[int, int]] = field(default_factory=list)  # per run: readings before and after it
    _done: int = 0

    def __call__(self, done: int) -> None:
        if done == 0 and not self.first_look:
            self.first_look = [self.ruler() for _ in range(FIRST_LOOK)]
        self.readings.append(self.ruler())
        if done == 0:
            self._done = 0
            return
        before, after = len(self.readings) - 2, len(self.readings) - 1
        self.bounds += [(before, after)] * (done - self._done)
        self._done = done

    def verdict(self, runs: int, remembered_ns: float | None = None) -> SpeedVerdict:
        """Judge ``runs`` runs (those of the profile; a run with no readings around it counts as full speed)."""
        if not self.readings:
            return SpeedVerdict(tuple(range(runs)), 0, False, None, None)
        reference = min(remembered_ns or math.inf, *self.readings, *self.first_look)
        slow = slow_readings(self.readings, reference)
        slowed = {i for i in range(runs) if i < len(self.bounds) and slowed_between(slow, *self.bounds[i])}
        clean = [i for i in range(runs) if i not in slowed]
        fallback = len(clean) < min(MIN_SAMPLES, runs)
        return SpeedVerdict(used=tuple(range(runs)) if fallback else tuple(clean), slowed=len(slowed),
                            slowed_used=fallback and bool(slowed), reference_ns=reference,
                            median_reading_ns=statistics.median(self.readings))

    def remember(self, verdict: SpeedVerdict) -> None:
        """Keep this profile's full speed for the next ones (bench's file), unless it ran slowed throughout."""
        if len(self.readings) >= 5 and not verdict.slowed_used:
            speed.remember(sorted(self.readings)[len(self.readings) // 10])
