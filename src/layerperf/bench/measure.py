"""The timing loop: warm up until timings settle, then samples of enough calls to last ``min_time``.

A sample is ``loops`` back-to-back calls timed together with ``time.perf_counter_ns``; its figure is
the time per call. The loop knows nothing about ONNX Runtime: it times a ``call()``.

On a shared machine another process can take the CPU in the middle of a sample. Such a sample
measures the other process, not the op, so each sample also reads how long this process's threads
waited in the kernel's run queue (``/proc/self/task/*/schedstat``); a sample whose threads waited
more than ``max_wait_fraction`` of its duration is *disturbed*, set aside and replaced. Nothing is
dropped silently: disturbed samples are kept in :class:`Timing` and counted in every report, and
when too few clean samples come within the budget every sample taken is used, with a warning.

Some slow-downs are invisible from inside: on a virtual machine the host may run another tenant on
the same physical core, and the CPU then runs at a fraction of its speed without any waiting being
recorded. So before each sample a fixed pure-Python loop is timed as a yardstick of the CPU's speed
at that moment; its figures are reported (never used to adjust a timing) so that runs taken at
different speeds can be told apart. Given the full-speed yardstick (``speed_reference_ns``, the best
this machine has shown: :mod:`layerperf.bench.speed`) and time to wait (``speed_wait_s``), a sample
is not taken while the yardstick is more than ``SLOW_FACTOR`` times slower: the loop waits for the
speed to come back, counting the skipped slots, and once the wait is used up it takes the samples
anyway and says so (``Timing.slowed_used``).
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], int]


@dataclass(frozen=True, slots=True)
class MeasureOptions:
    """How long and how carefully to measure."""

    samples: int = 30
    min_time_ms: float = 1.0  # each sample runs enough calls to last at least this long
    warmup_max_s: float = 2.0  # warm-up stops here even if timings have not settled
    settle_window: int = 5  # warm-up batches per window compared
    settle_tolerance: float = 0.05  # windows' medians within this fraction: settled
    max_wait_fraction: float | None = 0.05  # None: keep every sample, check nothing
    max_samples_factor: int = 4  # take at most samples * factor samples looking for clean ones
    speed_wait_s: float = 0.0  # how long to wait, in all, for the CPU's full speed; 0: do not wait
    speed_reference_ns: float | None = None  # the full-speed yardstick; None: the fastest seen in this run

    def validate(self) -> None:
        from layerperf.errors import InputError

        if self.samples < 3:
            raise InputError(f"--samples must be at least 3, got {self.samples}")
        if not self.min_time_ms > 0:
            raise InputError(f"--min-time must be positive, got {self.min_time_ms} ms")
        if self.warmup_max_s < 0:
            raise InputError(f"the warm-up limit must be 0 s or more, got {self.warmup_max_s}")
        if not self.speed_wait_s >= 0:
            raise InputError(f"--speed-wait must be 0 s or more, got {self.speed_wait_s}")


@dataclass(frozen=True, slots=True)
class Timing:
    """Raw timings of one measurement. Per-call times in ns, one per sample, in the order taken."""

    per_call_ns: tuple[float, ...]  # the samples the statistics use
    disturbed_ns: tuple[float, ...]  # samples set aside because a thread waited for a CPU
    loops: int  # calls per sample
    warmup_batches: int
    warmup_settled: bool
    warmup_s: float
    used_disturbed: bool = False  # too few clean samples: per_call_ns includes disturbed ones
    wait_checked: bool = True  # False where schedstat is unavailable or the check is off
    yardstick_ns: tuple[float, ...] = ()  # the reference loop's time before each sample taken
    slowed: int = 0  # sample slots skipped while the CPU ran slowed (waiting for its full speed)
    slowed_used: bool = False  # the wait ran out: samples were taken with the CPU slowed
    speed_reference_ns: float | None = None  # the full-speed yardstick the samples were held to


def run_queue_wait_ns() -> int | None:
    """Total time this process's threads have waited for a CPU (schedstat field 2), or None."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that exited meanwhile
    return total


YARDSTICK_ITERATIONS = 500
SLOW_FACTOR = 1.3  # a yardstick this much slower than full speed: the CPU is slowed


def yardstick_ns(clock: Clock = time.perf_counter_ns) -> float:
    """Best of two timings of a fixed pure-Python loop: how fast this CPU runs right now."""
    best = math.inf
    for _ in range(2):
        t0 = clock()
        x = 0
        for i in range(YARDSTICK_ITERATIONS):
            x += i
        best = min(best, clock() - t0)
    return best


def loops_for(per_call_ns: float, min_time_ms: float) -> int:
    """Calls per sample so that a sample lasts at least ``min_time_ms``."""
    return max(1, math.ceil(min_time_ms * 1e6 / max(per_call_ns, 1.0)))


def _batch(call: Callable[[], None], loops: int, clock: Clock) -> float:
    t0 = clock()
    for _ in range(loops):
        call()
    return (clock() - t0) / loops


def estimate(call: Callable[[], None], min_time_ms: float, clock: Clock) -> float:
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


def warm_up(call: Callable[[], None], loops: int, opts: MeasureOptions,
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


@dataclass(slots=True)
class _Samples:
    clean: list[float] = field(default_factory=list)
    disturbed: list[float] = field(default_factory=list)
    order: list[tuple[bool, float]] = field(default_factory=list)  # (disturbed, value) as taken
    yardstick: list[float] = field(default_factory=list)
    slowed: int = 0
    slowed_used: bool = False
    reference: float = math.inf


def _take(call: Callable[[], None], loops: int, opts: MeasureOptions, clock: Clock,
          waited: Callable[[], int | None], ruler: Callable[[Clock], float]) -> tuple[_Samples, bool]:
    s = _Samples()
    check = opts.max_wait_fraction is not None and waited() is not None
    budget = opts.samples * max(1, opts.max_samples_factor)
    reference = opts.speed_reference_ns or math.inf
    if opts.speed_wait_s > 0:  # a first look at this run's own speed
        reference = min(reference, *(ruler(clock) for _ in range(10)))
    wait_until = clock() + opts.speed_wait_s * 1e9
    while len(s.clean) < opts.samples and len(s.order) < budget:
        y = ruler(clock)
        reference = min(reference, y)
        s.reference = reference
        if opts.speed_wait_s > 0 and y > SLOW_FACTOR * reference:
            if clock() < wait_until:
                s.slowed += 1
                time.sleep(0.001)
                continue
            s.slowed_used = True
        s.yardstick.append(y)
        w0 = waited() if check else 0
        per_call = _batch(call, loops, clock)
        w1 = waited() if check else 0
        bad = check and ((w1 or 0) - (w0 or 0)) > (opts.max_wait_fraction or 0) * per_call * loops
        (s.disturbed if bad else s.clean).append(per_call)
        s.order.append((bad, per_call))
    return s, check


def measure(call: Callable[[], None], opts: MeasureOptions, *, clock: Clock = time.perf_counter_ns,
            waited: Callable[[], int | None] = run_queue_wait_ns,
            ruler: Callable[[Clock], float] = yardstick_ns) -> Timing:
    """Warm up, size the samples, take them. The garbage collector is paused while timing."""
    gc_was_on = gc.isenabled()
    gc.disable()  # a collection inside a sample would be charged to the op
    try:
        loops = loops_for(estimate(call, opts.min_time_ms, clock), opts.min_time_ms)
        batches, ok, warm_s = warm_up(call, loops, opts, clock)
        # Cold first calls made the estimate pessimistic: size the samples from the settled timings.
        loops = loops_for(statistics.median(batches[-opts.settle_window:]), opts.min_time_ms)
        s, checked = _take(call, loops, opts, clock, waited, ruler)
    finally:
        if gc_was_on:
            gc.enable()
    use_all = len(s.clean) < opts.samples
    used = [v for _, v in s.order] if use_all else s.clean
    return Timing(per_call_ns=tuple(used), disturbed_ns=tuple(s.disturbed), loops=loops,
                  warmup_batches=len(batches), warmup_settled=ok, warmup_s=warm_s, used_disturbed=use_all,
                  wait_checked=checked, yardstick_ns=tuple(s.yardstick), slowed=s.slowed,
                  slowed_used=s.slowed_used,
                  speed_reference_ns=s.reference if opts.speed_wait_s > 0 and s.reference < math.inf else None)
