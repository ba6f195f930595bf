"""The timing loop: warm up until timings settle, then samples of enough calls to last ``min_time``.

A sample is ``loops`` back-to-back calls timed together with ``time.perf_counter_ns``; its figure is
the time per call. The loop knows nothing about ONNX Runtime: it times a ``call()``.

On a shared machine another process can take the CPU in the middle of a sample. Such a sample
measures the other process, not the op, so each sample also reads how long this process's threads
waited in the kernel's run queue (``/proc/self/task/*/schedstat``); a sample whose threads waited
more than ``max_wait_fraction`` of its duration is *disturbed*, set aside and replaced.

Some slow-downs are invisible from inside: on a virtual machine the host may run another tenant on
the same physical core, and the CPU then runs at a fraction of its speed without any waiting being
recorded. So between every two samples a fixed pure-Python loop is timed as a yardstick of the
CPU's speed. Given time to spend on it (``speed_wait_s``), a sample is *slowed* when a reading
around it — just before, just after, or one slot further either way, since slow-downs come in
bursts of a few milliseconds — is more than ``SLOW_FACTOR`` times the full-speed yardstick (the
best this machine has shown, :mod:`layerperf.bench.speed`, or faster in this run); slowed samples
are set aside and replaced too, for up to ``speed_wait_s`` beyond the usual budget. Readings are
never used to adjust a timing.

Nothing is dropped silently: set-aside samples are kept in :class:`Samples` and counted in every
report. When fewer clean samples than asked come within the budget, the figures stand on those
that came (a median of a few full-speed samples says more than one of many slowed ones), and
with fewer than ``MIN_SAMPLES`` of them on every sample taken, flagged.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from layerperf.errors import InputError
from layerperf.util.cpu_speed import SLOW_FACTOR, YARDSTICK_ITERATIONS, run_queue_wait_ns, yardstick_ns
from layerperf.util.gc_pause import gc_paused

Clock = Callable[[], int]
__all__ = ["SLOW_FACTOR", "YARDSTICK_ITERATIONS", "run_queue_wait_ns", "yardstick_ns"]  # their home before util

MIN_SAMPLES = 3  # the fewest samples a figure stands on
# `layerperf bench`'s defaults. 100 samples of >= 1 ms span a third of a second or more: a median over
# a few samples of a tenth of a second follows the host's short swings (benchmarks/bench_repeat.py).
DEFAULT_SAMPLES = 100
DEFAULT_SPEED_WAIT_S = 5.0  # the host's slow stretches seen here last up to a few seconds


@dataclass(frozen=True, slots=True)
class MeasureOptions:
    """How long and how carefully to measure."""

    samples: int = DEFAULT_SAMPLES
    min_time_ms: float = 1.0  # each sample runs enough calls to last at least this long
    warmup_max_s: float = 2.0  # warm-up stops here even if timings have not settled
    settle_window: int = 5  # warm-up batches per window compared
    settle_tolerance: float = 0.05  # windows' medians within this fraction: settled
    max_wait_fraction: float | None = 0.05  # None: keep every sample, check nothing
    max_samples_factor: int = 4  # take at most samples * factor samples looking for clean ones
    speed_wait_s: float = 0.0  # > 0: set slowed samples aside, sampling this much longer for clean ones
    speed_reference_ns: float | None = None  # the full-speed yardstick; None: the fastest seen in this run

    def validate(self) -> None:
        if self.samples < MIN_SAMPLES:
            raise InputError(f"--samples must be at least {MIN_SAMPLES}, got {self.samples}")
        if not 0 < self.min_time_ms < math.inf:
            raise InputError(f"--min-time must be a positive, finite time, got {self.min_time_ms} ms")
        if not 0 <= self.warmup_max_s < math.inf:
            raise InputError(f"the warm-up limit must be a finite 0 s or more, got {self.warmup_max_s}")
        if not 0 <= self.speed_wait_s < math.inf:
            raise InputError(f"--speed-wait must be a finite 0 s or more, got {self.speed_wait_s}")


@dataclass(frozen=True, slots=True)
class Samples:
    """The samples of one measurement of a call, raw: per-call times in ns, one per sample, in the order
    taken, those set aside, and how they were taken. (A profile's per-layer times are the timing
    collector's, :class:`layerperf.collectors.timer.Timing`; whole runs' are
    :class:`layerperf.backends.common.RunTimes`.)"""

    per_call_ns: tuple[float, ...]  # the samples the statistics use
    disturbed_ns: tuple[float, ...]  # samples set aside because a thread waited for a CPU
    loops: int  # calls per sample
    warmup_batches: int
    warmup_settled: bool
    warmup_s: float
    used_disturbed: bool = False  # too few clean samples: per_call_ns includes disturbed ones
    wait_checked: bool = True  # False where schedstat is unavailable or the check is off
    yardstick_ns: tuple[float, ...] = ()  # the reference loop's time before each sample taken, and after the last
    slowed_ns: tuple[float, ...] = ()  # samples set aside because the CPU ran slowed around them
    slowed_used: bool = False  # too few full-speed samples: per_call_ns includes slowed ones
    speed_reference_ns: float | None = None  # the full-speed yardstick the samples were held to
    requested: int = 0  # samples asked for; per_call_ns has fewer when only that many came clean

    @property
    def slowed(self) -> int:
        return len(self.slowed_ns)


def loops_for(per_call_ns: float, min_time_ms: float) -> int:
    """Calls per sample so that a sample lasts at least ``min_time_ms``."""
    return max(1, math.ceil(min_time_ms * 1e6 / max(per_call_ns, 1.0)))


def _batch(call: Callable[[], object], loops: int, clock: Clock) -> float:
    t0 = clock()
    for _ in range(loops):
        call()
    return (clock() - t0) / loops


def estimate(call: Callable[[], object], min_time_ms: float, clock: Clock) -> float:
    """A first per-call time: single calls until ``min_time_ms`` has passed (at least 3 calls)."""
    times: list[float] = []
    start = clock()
    while len(times) < 3 or clock() - start < min_time_ms * 1e6:
        times.append(_batch(call, 1, clock))
    return statistics.median(times)


def settled(batches: list[float], window: int, tolerance: float) -> bool:
    """Whether the median of the last ``window`` batches is within ``tolerance`` of the window before."""
    if len(batches) < 2 * window:
        return False
    last = statistics.median(batches[-window:])
    before = statistics.median(batches[-2 * window:-window])
    return abs(last - before) <= tolerance * before


def warm_up(call: Callable[[], object], loops: int, opts: MeasureOptions,
            clock: Clock) -> tuple[list[float], bool, float]:
    """Batches of ``loops`` calls until timings settle or the time limit; (batches, settled, seconds)."""
    batches: list[float] = []
    start = clock()
    limit_ns = opts.warmup_max_s * 1e9
    while True:
        batches.append(_batch(call, loops, clock))
        if settled(batches, opts.settle_window, opts.settle_tolerance):
            return batches, True, (clock() - start) / 1e9
        if clock() - start >= limit_ns:
            return batches, False, (clock() - start) / 1e9


GUARD = 1  # readings this many slots from a slowed one set a sample aside too: slow-downs come in bursts


def slow_readings(readings: Sequence[float], reference_ns: float) -> list[bool]:
    """Per yardstick reading, whether it shows the CPU slowed: more than SLOW_FACTOR x ``reference_ns``."""
    return [r > SLOW_FACTOR * reference_ns for r in readings]


def slowed_between(slow: Sequence[bool], before: int, after: int) -> bool:
    """Whether what ran between readings ``before`` and ``after`` (indices into ``slow``) ran slowed: a
    slow reading from GUARD slots before it to GUARD slots after it. Bench's samples and the dataset
    collector's runs are both judged so."""
    return any(slow[max(0, before - GUARD):after + 1 + GUARD])


@dataclass(slots=True)
class _Taken:
    """Samples in the order taken, between yardstick readings: reading ``i`` came just before sample ``i``."""

    checking: bool = False  # set samples aside when the CPU ran slowed
    reference: float = math.inf  # the full-speed yardstick
    values: list[float] = field(default_factory=list)
    disturbed: list[bool] = field(default_factory=list)
    readings: list[float] = field(default_factory=list)
    slow: list[bool] = field(default_factory=list)  # per reading, against the reference
    decided: int = 0  # samples whose readings (up to GUARD slots after them when checking) are all in
    good: int = 0  # decided samples neither disturbed nor slowed

    def read(self, y: float) -> None:
        """Add a reading; the fastest yet (when checking) becomes the reference and every sample is judged again."""
        self.readings.append(y)
        if self.checking and y < self.reference:
            self.reference = y
            self.slow = slow_readings(self.readings, y)
            self.decided = self.good = 0
        else:
            self.slow.append(y > SLOW_FACTOR * self.reference)
        lag = GUARD if self.checking else 0  # a slowed sample is known only once the next readings are in
        ready = max(0, min(len(self.values), len(self.readings) - 1 - lag))
        self.good += sum(self.clean(i) for i in range(self.decided, ready))
        self.decided = ready

    def add(self, value: float, disturbed: bool, after: float) -> None:
        self.values.append(value)
        self.disturbed.append(disturbed)
        self.read(after)

    def slowed(self, i: int) -> bool:
        """Whether the CPU ran slowed around sample ``i``: a slow reading from GUARD slots before to after it."""
        return slowed_between(self.slow, i, i + 1)

    def clean(self, i: int) -> bool:
        return not self.disturbed[i] and not self.slowed(i)


def _take(call: Callable[[], object], loops: int, opts: MeasureOptions, clock: Clock,
          waited: Callable[[], int | None], ruler: Callable[[Clock], float]) -> tuple[_Taken, bool]:
    check = opts.max_wait_fraction is not None and waited() is not None
    budget = opts.samples * max(1, opts.max_samples_factor)
    s = _Taken(checking=opts.speed_wait_s > 0)
    if s.checking:  # the remembered full speed, or a first look at this run's own
        s.reference = min(opts.speed_reference_ns or math.inf, *(ruler(clock) for _ in range(10)))
    s.read(ruler(clock))
    deadline = clock() + opts.speed_wait_s * 1e9
    while s.good < opts.samples and (len(s.values) < budget or clock() < deadline):
        w0 = waited() if check else 0
        per_call = _batch(call, loops, clock)
        w1 = waited() if check else 0
        bad = check and ((w1 or 0) - (w0 or 0)) > (opts.max_wait_fraction or 0) * per_call * loops
        s.add(per_call, bad, ruler(clock))
    return s, check


def measure(call: Callable[[], object], opts: MeasureOptions, *, clock: Clock = time.perf_counter_ns,
            waited: Callable[[], int | None] = run_queue_wait_ns,
            ruler: Callable[[Clock], float] = yardstick_ns) -> Samples:
    """Warm up, size the samples, take them. The garbage collector is paused while timing."""
    with gc_paused():  # a collection inside a sample would be charged to the op
        loops = loops_for(estimate(call, opts.min_time_ms, clock), opts.min_time_ms)
        batches, ok, warm_s = warm_up(call, loops, opts, clock)
        # Cold first calls made the estimate pessimistic: size the samples from the settled timings.
        loops = loops_for(statistics.median(batches[-opts.settle_window:]), opts.min_time_ms)
        s, checked = _take(call, loops, opts, clock, waited, ruler)
    n = len(s.values)
    clean = [i for i in range(n) if s.clean(i)]
    slowed = [i for i in range(n) if not s.disturbed[i] and s.slowed(i)]
    disturbed = [i for i in range(n) if s.disturbed[i]]
    if len(clean) >= MIN_SAMPLES:
        used = clean[:opts.samples]
        fallback = False
    else:  # too few clean samples to stand on: every sample taken, flagged
        used = list(range(n))
        fallback = True
    return Samples(per_call_ns=tuple(s.values[i] for i in used), disturbed_ns=tuple(s.values[i] for i in disturbed),
                   loops=loops, warmup_batches=len(batches), warmup_settled=ok, warmup_s=warm_s,
                   used_disturbed=fallback and bool(disturbed), wait_checked=checked, yardstick_ns=tuple(s.readings),
                   slowed_ns=tuple(s.values[i] for i in slowed), slowed_used=fallback and bool(slowed),
                   speed_reference_ns=s.reference if s.checking and s.reference < math.inf else None,
                   requested=opts.samples)
