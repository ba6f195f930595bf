"""Per-node counters: the cost of a counter-group read at a node boundary, and the stepwise executor's
fidelity against the in-situ profile, side by side for each model in one run.

The boundary is measured twice: by hand (two raw reads and their delta, as a boundary once did it)
and through the perf-counter collector (its start and stop: the two raw reads, kept; the delta waits
until the pass is over).

    python benchmarks/counters.py [--models resnet50,bert-base] [--events task-clock,page-faults]
        [--threads 1,2] [--skip-read-cost]

Each model's line gives the host's 1-minute load (``uptime``) when it ended; the fidelity is against
the in-situ runs that alternated with the timed stepwise passes (``layerperf profile``'s own), the
profile's separately measured in-situ medians beside it ("vs profile runs"); "off" counts the layers
more than 20% off; "ceiling" the in-situ runs' rank correlation with themselves (even against odd
runs: the noise ceiling of the rank correlation); "no views" the rank correlation over the layers that
are not view ops (Reshape, Squeeze...: on either side their time is per-node cost, not work) and the in-situ
runs' own over those layers; "busy" the timed pass pairs that waited for a CPU or
ran slowed; the last column the stepwise task-clock summed over the layers over the same count sampled
in situ, and their rank correlation.
"""

from __future__ import annotations

import argparse
import os
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
    ap.add_argument("--threads", default="0", help="intra-op threads, comma-separated (0: ONNX Runtime's default)")
    ap.add_argument("--skip-read-cost", action="store_true", help="only the fidelity table")
    args = ap.parse_args()
    events = args.events.split(",")
    if not args.skip_read_cost:
        _read_costs(events)
    _fidelity(args, events)
    return 0


def _read_costs(events: list[str]) -> None:
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


def _fidelity(args: argparse.Namespace, events: list[str]) -> None:
    print(f"\nstepwise vs in-situ ({args.runs} in-situ runs, {args.passes} stepwise passes per group)")
    print(f"{'model':12s} {'thr':>3s} {'in-situ sum ms':>15s} {'stepwise sum ms':>16s} {'time ratio':>11s} "
          f"{'rank corr':>10s} {'ceiling':>8s} {'no views (ceil)':>16s} {'off':>7s} {'busy':>6s} "
          f"{'vs profile runs':>16s} {'call µs':>8s} "
          f"{'load':>5s}"
          f"  task-clock stepwise/sampled in situ (rank)")
    for threads in (int(t) for t in args.threads.split(",")):
        for model in args.models.split(","):
            prof = layerperf.profile(model, warmup=5, runs=args.runs, events=events, passes=args.passes,
                                     latency=False, threads=threads)
            fid = summary(prof)["fidelity"]
            call_us = prof.extra["counters"]["call_overhead_ns"] / 1e3
            busy = f"{fid['passes_disturbed']}/{fid['timing_passes']}" if fid.get("timing_passes") else "-"
            print(f"{model:12s} {threads:3d} {fid['insitu_sum_us'] / 1e3:15.2f} {fid['stepwise_sum_us'] / 1e3:16.2f} "
                  f"{_num(fid['time_ratio'])} {_num(fid['rank_correlation'], 10)} "
                  f"{_num(fid.get('insitu_rank_ceiling'), 8)} "
                  f"{_num(fid.get('rank_correlation_without_views'), 8)} "
                  f"({_num(fid.get('insitu_rank_ceiling_without_views'), 5).strip():>5s}) "
                  f"{len(fid['flagged_layers']):3d}/{len(prof.layers):<3d} {busy:>6s} "
                  f"{_num(fid['profile_time_ratio'], 7)}/{_num(fid['profile_rank_correlation'], 5).strip():5s} "
                  f"{call_us:11.1f} {os.getloadavg()[0]:5.2f}  {_sampled(fid)}", flush=True)


def _sampled(fid: dict[str, object]) -> str:
    got = fid.get("insitu_counts")
    tc = got["by_label"].get("task-clock") if isinstance(got, dict) else None
    return f"{_num(tc['stepwise_over_insitu'], 5)} ({_num(tc['rank_correlation'], 5).strip()})" if tc else "-"


def _num(x: float | None, width: int = 11) -> str:
    return f"{x:{width}.3f}" if x is not None else f"{'?':>{width}s}"


if __name__ == "__main__":
    sys.exit(main())
