"""Whole-model latency with and without layerperf's in-situ profiling, side by side in one run.

Two sessions of the same model and options live side by side: one plain, one with the profiling
layerperf uses (ONNX Runtime's own profiler). Runs alternate between them one by one so that drift
and noise on a shared machine hit both alike; the figure is the ratio of medians.

    python benchmarks/overhead.py [--models resnet50,bert-base] [--runs 100] [--threads 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from layerperf.backends import onnxruntime as backend
from layerperf.modelsrc import open_model


def timed(sess, feed, n: int) -> list[int]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        sess.run(None, feed)
        out.append(time.perf_counter_ns() - t0)
    return out


def compare(model: str, runs: int, threads: int, block: int = 1) -> tuple[float, float, float]:
    source = open_model(model)
    opts = backend.ProfileOptions(runs=runs, threads=threads)
    feed = backend.prepare_feed(source, opts)
    with tempfile.TemporaryDirectory() as tmp:
        plain = backend.create_session(source, backend.session_options(opts), opts.provider)
        profiled = backend.create_session(
            source, backend.session_options(opts, profile_prefix=Path(tmp) / "p"), opts.provider)
        timed(plain, feed, 5)
        timed(profiled, feed, 5)
        a: list[int] = []
        b: list[int] = []
        while len(a) < runs:
            a += timed(plain, feed, block)
            b += timed(profiled, feed, block)
        Path(profiled.end_profiling()).unlink()
    med_a, med_b = float(np.median(a)) / 1e6, float(np.median(b)) / 1e6
    return med_a, med_b, med_b / med_a


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,bert-base")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    print(f"{'model':12s} {'plain ms':>10s} {'profiled ms':>12s} {'ratio':>7s}  (median of {args.runs} runs each,"
          f" interleaved)")
    worst = 0.0
    for model in args.models.split(","):
        plain, profiled, ratio = compare(model, args.runs, args.threads)
        worst = max(worst, ratio)
        print(f"{model:12s} {plain:10.2f} {profiled:12.2f} {ratio:7.3f}")
    print(f"worst overhead: {100 * (worst - 1):+.1f}% (goal <= 5%; MegEngine documents ~8% for its profiler)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
