"""Two readings of how freely this process ran: the time its threads waited for a CPU, and how fast a
fixed pure-Python loop runs right now (a yardstick of the CPU's speed).

On a virtual machine the host may run another tenant on the same physical core, and nothing inside the
machine shows it as waiting: the yardstick, timed between measurements, takes about twice as long.
Another process of this machine taking the CPU shows as waiting instead. ``layerperf bench`` and the
ONNX Runtime counting passes set aside what ran while either reading says the CPU was not theirs.
"""

from __future__ import annotations

import contextlib
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


def slowest_cpu_yardstick_ns(yardstick: Callable[[], float] | None = None) -> float:
    """The yardstick timed on each CPU this process may run on, this thread pinned to each in turn: the
    slowest CPU's reading (the calling thread's alone where it can't be pinned). A session's worker threads
    run on the other CPUs of the set, and the host may slow one vCPU and not another: timed on the calling
    thread alone, a mobilenet_v2 run at 2 threads read 6.8 ms in situ for a while where it reads 4.3, with
    the yardstick at full speed."""
    timed = yardstick or yardstick_ns
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return timed()
    if len(allowed) < 2:
        return timed()
    worst = 0.0
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})  # this thread only (Linux): the session's threads keep theirs
            worst = max(worst, timed())
    except OSError:
        return timed()
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, allowed)
    return worst


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
