"""Cost of one CounterSet.read(), next to a bare os.read of one perf fd.

    python benchmarks/counter_read.py [--idle-threads 3] [--repeat 10000]

Software events only, so it runs on any Linux box (VMs without a PMU included). Idle threads stand
in for an inference runtime's thread pool: CounterSet reads one group per thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

from layerperf.counters import CounterSet, abi

EVENTS = ["task-clock", "page-faults", "minor-faults", "cpu-clock"]


def median_us(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of fn() in microseconds, timed call by call."""
    for _ in range(min(repeat, 1000)):  # warm caches and the branch predictor first
        fn()
    clock = time.perf_counter_ns
    samples = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return statistics.median(samples) / 1000


def bare_fd() -> int:
    """One enabled task-clock counter on this thread, read format plain (8 bytes)."""
    attr = abi.new_attr(abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_TASK_CLOCK)
    attr.exclude_kernel = 1
    attr.exclude_hv = 1
    return abi.perf_event_open(attr, 0, -1)


def start_idle_threads(n: int) -> threading.Event:
    stop = threading.Event()
    for _ in range(n):
        threading.Thread(target=stop.wait, daemon=True).start()
    return stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-threads", type=int, default=3, help="extra idle threads (default 3)")
    parser.add_argument("--repeat", type=int, default=10000, help="reads per measurement (default 10000)")
    args = parser.parse_args()
    stop = start_idle_threads(args.idle_threads)

    fd = bare_fd()
    bare = median_us(lambda: os.read(fd, 8), args.repeat)
    os.close(fd)

    with CounterSet(EVENTS[:1], threads="self") as one:
        one.enable()
        leader, size = one._groups[0].leader, one._stride
        bare_group = median_us(lambda: os.read(leader, size), args.repeat)
    print(f"median of {args.repeat} calls, microseconds; {len(threading.enumerate())} threads in process")
    print(f"bare os.read of one fd: {bare:.2f} us (plain format), {bare_group:.2f} us (group format)")
    columns = [("events", 6), ("threads", 7), ("read()", 8), ("read_raw()", 10)]
    columns += [("read()/thread", 13), ("x bare", 7)]
    print(" ".join(f"{title:>{width}}" for title, width in columns))
    for threads in ("self", "all"):
        for n in (1, 2, 4):
            with CounterSet(EVENTS[:n], threads=threads) as cs:
                cs.enable()
                cost = median_us(cs.read, args.repeat)
                raw = median_us(cs.read_raw, args.repeat)
                rows = len(cs.threads)
            print(f"{n:>6} {rows:>7} {cost:>8.2f} {raw:>10.2f} {cost / rows:>13.2f} {cost / bare:>7.1f}")
    stop.set()


if __name__ == "__main__":
    main()
