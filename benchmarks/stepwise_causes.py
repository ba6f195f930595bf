"""Where the stepwise executor's per-node times part from the in-situ ones: each suspected cause in
isolation, side by side, passes interleaved round by round so the host's drift hits every variant.

One process per model and thread count (ONNX Runtime's global pool is set once per process); the
real session (profiled, the optimized graph's nodes timed by ONNX Runtime's profiler) and every
stepwise executor share that pool. Per round: one in-situ run, then one pass of each variant, in an
order that rotates. Variants:

- plain: each call returns outputs its node's own session allocated; pool workers stopped after a call
- bound: inputs and outputs pre-bound (IOBinding), outputs in buffers reused as an arena would
- bound+spin: bound, pool workers left spinning between calls (the pool kept warm)
- bound+flush: bound, 32 MiB written between nodes (outside the timed call): how much cache state matters

Each variant's call overhead is calibrated on an empty Identity node called the same way, ten times
over 50 calls, and its spread reported. Ratios of medians and of 10th percentiles (the low end, less
touched by preemption on a busy host) are both given. A yardstick loop (bench's speed check) is timed before every
node of every pass; node calls next to a slowed reading are set aside (the "checked" columns).

    python benchmarks/stepwise_causes.py --model resnet50 --threads 1 [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import onnxruntime.capi._pybind_state as ort_state

from layerperf.analysis.summary import spearman
from layerperf.backends.base import RunPlan
from layerperf.backends.ort.counting import _optimized
from layerperf.backends.ort.measure import prepare_feed
from layerperf.backends.ort.stepwise import StepwiseExecutor, calibration_model
from layerperf.bench.measure import SLOW_FACTOR, yardstick_ns
from layerperf.models.skeleton import read_skeleton
from layerperf.models.source import open_model
from layerperf.readers.ort import split_runs

VARIANTS = {"plain": (False, True), "bound": (True, True), "bound+spin": (True, False), "bound+flush": (True, True)}
FLUSH = np.zeros(32 << 20, np.uint8)
# Each side's 10th percentile per node as well as its median: on a busy host the low end of a node's
# times is the part preemption did not reach, so causes show there that the median's noise hides.
LOW_PERCENTILE = 10


def calibrate(bind: bool, spin_stop: bool, repeats: int = 10, calls: int = 50) -> list[float]:
    """Median ns of an empty call, ``repeats`` times over ``calls`` calls each."""
    ex = StepwiseExecutor(calibration_model(), ["empty"], global_threads=True, bind=bind, spin_stop=spin_stop)
    feed = {"x": np.zeros(1, np.float32)}
    for _ in range(3):
        ex.run_pass(feed)
    return [float(np.median([ex.run_pass(feed)[1][0] for _ in range(calls)])) for _ in range(repeats)]


def insitu_session(path: Path, threads: int, prefix: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.use_per_session_threads = False
    so.enable_profiling = True
    so.profile_file_prefix = str(prefix)
    so.log_severity_level = 3
    so.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def one_config(model: str, threads: int, rounds: int) -> dict[str, Any]:
    """One configuration, in a temporary folder removed when it ends (the optimized model can be GBs)."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="causes-") as tmp:
        try:
            return _one_config(model, threads, rounds, Path(tmp))
        finally:
            os.chdir(here)


def prepared(model: str, threads: int, tmp: Path) -> tuple[Any, dict[str, Any], Any, list[str], list[str]]:
    """The model's source, feed and optimized graph (its weights in ``tmp``, the working directory after), the
    global pool at ``threads``, and the profiler's own node order and op types (of a warm-up run)."""
    src = open_model(model)
    feed = prepare_feed(src, RunPlan(), "CPUExecutionProvider")
    ort_state.set_global_thread_pool_sizes(threads, 1)
    optimized = _optimized(str(src.path), {"opt_level": "all", "provider": "CPUExecutionProvider"},
                           src.data_dir, tmp)
    real = insitu_session(src.path, threads, tmp / "prof")
    for _ in range(3):
        real.run(None, feed)
    os.chdir(tmp)
    warm = split_runs(json.loads(Path(real.end_profiling()).read_text()))[-1].nodes
    return src, feed, optimized, [n.name for n in warm], [n.op_type for n in warm]


def _one_config(model: str, threads: int, rounds: int, tmp: Path) -> dict[str, Any]:
    """In-situ runs and each stepwise variant, interleaved round by round, in ``tmp``."""
    src, feed, optimized, order, ops = prepared(model, threads, tmp)
    real = insitu_session(src.path, threads, tmp / "prof2")
    for _ in range(3):
        real.run(None, feed)
    skeleton = read_skeleton(src.path)
    executors = {v: StepwiseExecutor(optimized, order, global_threads=True, data_dir=tmp, original=skeleton,
                                     bind=b, spin_stop=s) for v, (b, s) in VARIANTS.items()}
    for ex in executors.values():
        for _ in range(3):
            ex.run_pass(feed)
    calib = {v: calibrate(b, s) for v, (b, s) in VARIANTS.items()}
    times: dict[str, list[list[int]]] = {v: [] for v in VARIANTS}
    slow: dict[str, list[list[bool]]] = {v: [] for v in VARIANTS}
    reference = [float("inf")]

    def timed(v: str) -> None:
        marks: list[float] = []

        def before(i: int) -> None:
            if v == "bound+flush":
                FLUSH[::64] += 1
            y = yardstick_ns()
            reference[0] = min(reference[0], y)
            marks.append(y)

        _, t = executors[v].run_pass(feed, before, None)
        marks.append(yardstick_ns())
        times[v].append(t)
        slow[v].append([max(marks[i], marks[i + 1]) > SLOW_FACTOR * reference[0] for i in range(len(t))])

    for r in range(rounds):
        seq: list[Callable[[], Any]] = [lambda: real.run(None, feed)]
        names = list(VARIANTS)
        names = names[r % len(names):] + names[:r % len(names)]
        seq += [lambda v=v: timed(v) for v in names]  # type: ignore[misc]
        for f in seq:
            f()
    events = json.loads(Path(real.end_profiling()).read_text())
    insitu_runs = split_runs(events)[3:]
    insitu = np.array([[n.dur_us * 1e3 for n in run.nodes] for run in insitu_runs])
    return {"model": model, "threads": threads, "rounds": rounds, "order": order, "ops": ops,
            "insitu_ns": insitu.tolist(), "times_ns": times, "slow": slow, "calibration_ns": calib}


def report(res: dict[str, Any]) -> None:
    insitu = np.median(np.array(res["insitu_ns"]), axis=0)
    insitu_low = np.percentile(np.array(res["insitu_ns"]), LOW_PERCENTILE, axis=0)
    ops = res["ops"]
    print(f"{res['model']} threads={res['threads']} rounds={res['rounds']} nodes={len(insitu)} "
          f"in-situ sum {insitu.sum() / 1e6:.2f} ms (load {os.getloadavg()[0]:.2f})")
    print(f"  {'variant':12s} {'call µs':>8s} {'±sd':>6s} {'sum ms':>8s} {'ratio':>6s} {'rank':>6s} {'>20%':>5s}"
          f" {'checked ratio':>13s} {'rank':>6s} {'slowed':>7s} {'p10 ratio':>9s} {'rank':>6s}"
          "  largest p10 excess by op (ms)")
    for v in VARIANTS:
        cal = np.array(res["calibration_ns"][v])
        call = float(np.median(cal))
        t = np.array(res["times_ns"][v], dtype=float)
        s = np.array(res["slow"][v], dtype=bool)
        step = np.maximum(np.median(t, axis=0) - call, 0)
        masked = np.where(s, np.nan, t)
        checked = np.maximum(np.nanmedian(np.where(np.all(s, axis=0), t, masked), axis=0) - call, 0)
        off = int(np.sum(np.abs(step - insitu) > 0.2 * np.maximum(insitu, 1)))
        low = np.maximum(np.percentile(t, LOW_PERCENTILE, axis=0) - call, 0)
        excess: dict[str, float] = {}
        for op, a, b in zip(ops, low, insitu_low, strict=True):
            excess[op] = excess.get(op, 0.0) + (a - b) / 1e6
        top = sorted(excess.items(), key=lambda kv: -abs(kv[1]))[:3]
        print(f"  {v:12s} {call / 1e3:8.1f} {cal.std() / 1e3:6.2f} {step.sum() / 1e6:8.2f} "
              f"{step.sum() / insitu.sum():6.3f} {spearman(step, insitu) or 0:6.3f} {off:5d}"
              f" {checked.sum() / insitu.sum():13.3f} {spearman(checked, insitu) or 0:6.3f} {s.mean():7.1%}"
              f" {low.sum() / insitu_low.sum():9.3f} {spearman(low, insitu_low) or 0:6.3f}  "
              + ", ".join(f"{op} {d:+.2f}" for op, d in top))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args()
    res = one_config(args.model, args.threads, args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(res))
    report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
