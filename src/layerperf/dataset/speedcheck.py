"""Which measured runs of a profile ran while the CPU was slowed: bench's speed check, between runs.

On a virtual machine the host can slow a core for seconds (another tenant on the same physical core),
invisibly from inside. ``layerperf bench`` reads a yardstick — a fixed pure-Python loop
(:func:`layerperf.bench.measure.yardstick_ns`) — between its samples and sets aside those taken
slowed. The collector does the same between a profile's measured runs: :class:`SpeedRecorder` is the
run plan's ``between_runs`` hook; :meth:`SpeedRecorder.verdict` judges each run by the readings around
it against the full-speed yardstick (the one this machine remembers, :mod:`layerperf.bench.speed`, or
the fastest reading of this profile) with bench's rule (:func:`~layerperf.bench.measure.slowed_between`).
Slowed runs are set aside from the per-layer statistics, and so are disturbed ones — runs during
which this process's threads waited for a CPU (``/proc/self/task/*/schedstat``) more than bench allows
a sample: another process had the CPU; where too few clean runs remain, the statistics stand on every
run and the configuration is flagged (``slowed_used``, ``disturbed_used``), never silently.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from layerperf.bench import speed
from layerperf.bench.measure import (
    MIN_SAMPLES,
    MeasureOptions,
    run_queue_wait_ns,
    slow_readings,
    slowed_between,
    yardstick_ns,
)

FIRST_LOOK = 5  # readings before the first run that only help find this profile's full speed
MAX_WAIT_FRACTION = MeasureOptions().max_wait_fraction or 0.05  # bench's: a run that waited longer is disturbed


@dataclass(frozen=True, slots=True)
class SpeedVerdict:
    """The speed check of one profile's runs: the runs the statistics use (indices into Profile.runs), how
    many were taken slowed and how many disturbed (this process's threads waited for a CPU more than
    bench's ``max_wait_fraction`` of the time around them: another process had it), both set aside;
    whether too few clean runs came and the statistics use every run (``slowed_used`` where slowed runs
    are among them: flagged; ``disturbed_used`` where disturbed ones are), the full-speed yardstick held
    to and the median reading, in ns."""

    used: tuple[int, ...]
    slowed: int
    slowed_used: bool
    reference_ns: float | None
    median_reading_ns: float | None
    disturbed: int = 0
    disturbed_used: bool = False


@dataclass(slots=True)
class SpeedRecorder:
    """The ``between_runs`` hook that reads the yardstick, the clock and this process's run-queue wait:
    ``self(n)`` with 0 before a loop's first run, then with the runs that loop made so far. A backend may
    run several loops (ONNX Runtime splits long measurements over sessions): each starts again at 0, and
    its runs follow the previous loop's."""

    ruler: Callable[[], float] = yardstick_ns
    waited: Callable[[], int | None] = run_queue_wait_ns
    clock: Callable[[], int] = time.perf_counter_ns
    readings: list[float] = field(default_factory=list)
    first_look: list[float] = field(default_factory=list)
    bounds: list[tuple[int, int]] = field(default_factory=list)  # per run: readings before and after it
    stamps: list[tuple[int, int | None]] = field(default_factory=list)  # per reading: (clock, waited) before it
    _done: int = 0

    def __call__(self, done: int) -> None:
        if done == 0 and not self.first_look:
            self.first_look = [self.ruler() for _ in range(FIRST_LOOK)]
        self.stamps.append((self.clock(), self.waited()))
        self.readings.append(self.ruler())
        if done == 0:
            self._done = 0
            return
        before, after = len(self.readings) - 2, len(self.readings) - 1
        self.bounds += [(before, after)] * (done - self._done)
        self._done = done

    def _disturbed(self, before: int, after: int) -> bool:
        (t0, w0), (t1, w1) = self.stamps[before], self.stamps[after]
        if w0 is None or w1 is None or t1 <= t0:
            return False
        return (w1 - w0) > MAX_WAIT_FRACTION * (t1 - t0)

    def verdict(self, runs: int, remembered_ns: float | None = None) -> SpeedVerdict:
        """Judge ``runs`` runs (those of the profile; a run with no readings around it counts as clean)."""
        if not self.readings:
            return SpeedVerdict(tuple(range(runs)), 0, False, None, None)
        reference = min(remembered_ns or math.inf, *self.readings, *self.first_look)
        slow = slow_readings(self.readings, reference)
        judged = [i for i in range(runs) if i < len(self.bounds)]
        slowed = {i for i in judged if slowed_between(slow, *self.bounds[i])}
        disturbed = {i for i in judged if i not in slowed and self._disturbed(*self.bounds[i])}
        clean = [i for i in range(runs) if i not in slowed and i not in disturbed]
        fallback = len(clean) < min(MIN_SAMPLES, runs)
        return SpeedVerdict(used=tuple(range(runs)) if fallback else tuple(clean), slowed=len(slowed),
                            slowed_used=fallback and bool(slowed), reference_ns=reference,
                            median_reading_ns=statistics.median(self.readings), disturbed=len(disturbed),
                            disturbed_used=fallback and bool(disturbed))

    def remember(self, verdict: SpeedVerdict) -> None:
        """Keep this profile's full speed for the next ones (bench's file), unless it ran slowed throughout."""
        if len(self.readings) >= 5 and not verdict.slowed_used:
            speed.remember(sorted(self.readings)[len(self.readings) // 10])
