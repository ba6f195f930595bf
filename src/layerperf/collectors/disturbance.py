"""Whether a pass ran with the CPU to itself: the time its threads waited for a CPU and the CPU's speed
(:mod:`layerperf.util.cpu_speed`) read before and after it.

The counting passes of a stepwise executor are compared, layer by layer, with in-situ runs taken in
between them; a pass or run that waited for a CPU or ran on a slowed one says more about the host than
about the layers, so a pair where either did is set aside (:func:`kept`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from layerperf.util.cpu_speed import SLOW_FACTOR, run_queue_wait_ns, yardstick_ns

# A pass whose threads waited for a CPU more than this share of its wall time was disturbed. Not 0:
# a thread woken for a parallel section waits a few µs for its CPU even on an idle host.
WAIT_SHARE = 0.02
MIN_KEPT = 3  # the fewest undisturbed pairs a comparison stands on; fewer: every pair is used


@dataclass(frozen=True, slots=True)
class Mark:
    """One reading between passes."""

    wall_ns: int
    waited_ns: int | None
    yardstick_ns: float


def mark() -> Mark:
    y = yardstick_ns()
    return Mark(time.perf_counter_ns(), run_queue_wait_ns(), y)


def disturbed(a: Mark, b: Mark, full_speed_ns: float) -> bool:
    """Whether what ran between readings ``a`` and ``b`` waited for a CPU or ran slowed."""
    wall = b.wall_ns - a.wall_ns
    waited = (b.waited_ns - a.waited_ns) if a.waited_ns is not None and b.waited_ns is not None else 0
    slow = max(a.yardstick_ns, b.yardstick_ns) > SLOW_FACTOR * full_speed_ns
    return slow or (wall > 0 and waited > WAIT_SHARE * wall)


def pairs_disturbed(marks: Sequence[Mark]) -> list[bool]:
    """For marks taken before a reference run, between it and its pass, and after the pass (3 per pair,
    the third shared with the next pair's first): whether each pair was disturbed. Full speed is the
    fastest yardstick seen."""
    full = min(m.yardstick_ns for m in marks)
    return [disturbed(marks[i], marks[i + 1], full) or disturbed(marks[i + 1], marks[i + 2], full)
            for i in range(0, len(marks) - 2, 2)]


def kept(disturbed_pairs: Sequence[bool]) -> list[bool]:
    """Which pairs a comparison uses: the undisturbed ones, or all when fewer than :data:`MIN_KEPT` are."""
    clean = [not d for d in disturbed_pairs]
    return clean if sum(clean) >= MIN_KEPT else [True] * len(disturbed_pairs)
