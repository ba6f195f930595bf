"""Plain and profiled runs taken in alternation, so that both see the same host state.

Measuring the plain latency after the profiled runs let drift on a shared machine (another
process, a throttled vCPU) land on one side only: the overhead ratio then read below 1. Taking the
two in small alternating blocks spreads drift over both, and the ratio of their medians is the
profiler's cost alone.

Each run is read on two clocks: wall time, and the calling thread's CPU time. On a busy host the
thread is preempted for part of a run, which wall time counts and CPU time does not; their ratio
says how busy the host was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], int]

# Runs per side before switching. One keeps the two sides closest in time; a session's first run
# after the other one ran sees the other's weights in cache, but so does every run on both sides.
BLOCK_RUNS = 1


@dataclass(slots=True)
class Timings:
    """Per call: wall time and the calling thread's CPU time, in ns."""

    wall_ns: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)

    def take(self, call: Callable[[], object], n: int, clock: Clock, cpu_clock: Clock) -> None:
        for _ in range(n):
            c0, t0 = cpu_clock(), clock()
            call()
            t1, c1 = clock(), cpu_clock()
            self.wall_ns.append(t1 - t0)
            self.cpu_ns.append(c1 - c0)


def timed(call: Callable[[], object], n: int, clock: Clock = time.perf_counter_ns) -> list[int]:
    """Wall time of ``n`` calls in ns, one reading per call."""
    out = Timings()
    out.take(call, n, clock, clock)
    return out.wall_ns


def interleaved(plain: Callable[[], object], profiled: Callable[[], object], runs: int, *,
                block: int = BLOCK_RUNS, clock: Clock = time.perf_counter_ns,
                cpu_clock: Clock = time.thread_time_ns) -> tuple[Timings, Timings]:
    """``runs`` timed calls of each, alternating blocks of ``block``: (plain, profiled) timings."""
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    plain_t, profiled_t = Timings(), Timings()
    while len(profiled_t.wall_ns) < runs:
        n = min(block, runs - len(profiled_t.wall_ns))
        plain_t.take(plain, n, clock, cpu_clock)
        profiled_t.take(profiled, n, clock, cpu_clock)
    return plain_t, profiled_t
