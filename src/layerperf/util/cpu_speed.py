"""Two readings of how freely this process ran: the time its threads waited for a CPU, and how fast a
fixed pure-Python loop runs right now (a yardstick of the CPU's speed).

On a virtual machine the host may run another tenant on the same physical core, and nothing inside the
machine shows it as waiting: the yardstick, timed between measurements, takes about twice as long.
Another process of this machine taking the CPU shows as waiting instead. ``layerperf bench`` and the
ONNX Runtime counting passes set aside what ran while either reading says the CPU was not theirs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

YARDSTICK_ITERATIONS = 500
SLOW_FACTOR = 1.3  # a yardstick this much slower than full speed: the CPU is slowed


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


def yardstick_ns(clock: Callable[[], int] = time.perf_counter_ns) -> float:
    """Best of two timings of a fixed pure-Python loop: how fast this CPU runs right now."""
    best = math.inf
    for _ in range(2):
        t0 = clock()
        x = 0
        for i in range(YARDSTICK_ITERATIONS):
            x += i
        best = min(best, clock() - t0)
    return best
