"""Per-node counters: the cost of a counter-group read at a node boundary, and the stepwise executor's
fidelity against the in-situ profile, side by side for each model in one run.

The boundary is measured twice: by hand (two raw reads and their delta, as a boundary once did it)
and through the perf-counter collector (its start and stop: the two raw reads, kept; the delta waits
until the pass is over).

    python benchmarks/counters.py [--models resnet50,bert-base] [--events task-clock,page-faults]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import layerperf
from layerperf.analysis.summary import summary
from layerperf.counters import CounterSet


def read_cost_us(events: list[str], threads: str, n: int = 10000) -> tuple[float, float, int]:
    """Median µs of one raw read, and of a whole boundary (read before + read after + delta)."""
    with CounterSet(events, threads=threads) as cs:
        cs.enable()
        clock = time.perf_counter_ns
        raw = []
        for _ in range(n):
            t0 = clock()
            cs.read_raw()
            raw.append(clock() - t0)
        boundary = []
        for _ in range(n):
            t0 = clock()
            a = cs.read_raw()
            b = cs.read_raw()
            cs.reading(b) - cs.reading(a)
            boundary.append(clock() - t0)
        return float(np.median(raw)) / 1e3, float(np.median(boundary)) / 1e3, len(cs.threads)


def collector_cost_us(events: list[str], threads: str, n: int = 10000) -> float:
    """Median µs of one layer's boundary through the PerfCounters collector: start + stop."""
    from layerperf.collectors.perf import PerfCounters

    with CounterSet(events, threads=threads) as cs:
        cs.enable()
        collector = PerfCounters(cs)
        clock = time.perf_counter_ns
        took = []
        collector.begin_pass()
        for _ in range(n):
            t0 = clock()
            collector.start(0)
            collector.stop(0)
            took.append(clock() - t0)
        collector.end_pass()
        return float(np.median(took)) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert-base")
    ap.add_argument("--events", default="task-clock,page-faults")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    events = args.events.split(",")

    import onnxruntime as ort  # a session's pool threads make "all" a realistic thread count

    from layerperf.backends.ort.stepwise import calibration_model

    so = ort.SessionOptions()
    _keep = ort.InferenceSession(calibration_model().SerializeToString(), so, providers=["CPUExecutionProvider"])
    print(f"counter-group read, events {events}")
    for threads in ("self", "all"):
        raw, boundary, n = read_cost_us(events, threads)
        collected = collector_cost_us(events, threads)
        print(f"  threads={threads:4s} ({n} threads): one read {raw:6.2f} µs; node boundary (2 reads + delta) "
              f"{boundary:6.2f} µs; collector boundary (start + stop) {collected:6.2f} µs")
    del _keep

    print(f"\nstepwise vs in-situ ({args.runs} in-situ runs, {args.passes} stepwise passes)")
    print(f"{'model':12s} {'in-situ sum ms':>15s} {'stepwise sum ms':>16s} {'time ratio':>11s} {'rank corr':>10s}"
          f" {'call overhead µs':>17s}")
    for model in args.models.split(","):
        prof = layerperf.profile(model, warmup=5, runs=args.runs, events=events, passes=args.passes, latency=False)
        fid = summary(prof)["fidelity"]
        call_us = prof.extra["counters"]["call_overhead_ns"] / 1e3
        print(f"{model:12s} {fid['insitu_sum_us'] / 1e3:15.2f} {fid['stepwise_sum_us'] / 1e3:16.2f} "
              f"{fid['time_ratio']:11.3f} {fid['rank_correlation']:10.3f} {call_us:17.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
