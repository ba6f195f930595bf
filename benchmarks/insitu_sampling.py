"""The in-situ sampling route against the stepwise executor: per-node task-clock of the real session's
own threads, sampled (:mod:`layerperf.counters.sampling`) and laid over ONNX Runtime's profiler node
intervals, beside the stepwise executor's per-node task-clock (``layerperf.profile(events=...)``), both
held to the in-situ node times of the profiler (runs without sampling, alternating with the sampled
ones, which also gives the sampling's overhead).

    python benchmarks/insitu_sampling.py --model resnet50 --threads 1 [--runs 30] [--period-us 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import onnxruntime.capi._pybind_state as ort_state

from layerperf.analysis.summary import spearman
from layerperf.backends.base import RunPlan
from layerperf.backends.ort.measure import prepare_feed
from layerperf.counters import resolve
from layerperf.counters.sampling import SampledGroup, attribute
from layerperf.models.source import open_model
from layerperf.readers.ort import split_runs


def sampled_route(model: str, threads: int, runs: int, period_ns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sampling-") as tmp:
        return _sampled_route(model, threads, runs, period_ns, Path(tmp))


def _sampled_route(model: str, threads: int, runs: int, period_ns: int, tmp: Path) -> dict[str, Any]:
    """Sampled and plain runs alternating on one profiled session (its files in ``tmp``)."""
    src = open_model(model)
    feed = prepare_feed(src, RunPlan(), "CPUExecutionProvider")
    ort_state.set_global_thread_pool_sizes(threads, 1)
    so = ort.SessionOptions()
    so.use_per_session_threads = False
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp / "p")
    so.log_severity_level = 3
    so.add_session_config_entry("session.force_spinning_stop", "1")
    sess = ort.InferenceSession(str(src.path), so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, feed)
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    group = SampledGroup([resolve("task-clock")], tids, period_ns)
    per_run: list[dict[int, Any]] = []
    walls: dict[str, list[int]] = {"sampled": [], "plain": []}
    for _ in range(runs):
        for sampled in (True, False):
            if sampled:
                group.enable()
                group.mark(time.time_ns())
            t0 = time.perf_counter_ns()
            sess.run(None, feed)
            walls["sampled" if sampled else "plain"].append(time.perf_counter_ns() - t0)
            if sampled:
                group.mark(time.time_ns())
                group.disable()
                per_run.append(group.take())
    group.close()
    origin = sess.get_profiling_start_time_ns()
    runs_ev = split_runs(json.loads(Path(sess.end_profiling()).read_text()))[3:]
    order = [n.name for n in runs_ev[0].nodes]
    index = {name: i for i, name in enumerate(order)}
    sampled_runs, plain_runs = runs_ev[0::2], runs_ev[1::2]
    counts = np.zeros((len(per_run), len(order)))
    outside = np.zeros(len(per_run))
    for r, (samples, run) in enumerate(zip(per_run, sampled_runs, strict=True)):
        intervals = sorted((index[n.name], origin + n.ts_us * 1000, origin + (n.ts_us + n.dur_us) * 1000)
                           for n in run.nodes if n.parent is None)
        intervals.sort(key=lambda x: x[1])
        for thread in samples.values():
            got, out = attribute(thread, intervals, len(order), 1)
            counts[r] += [g[0] for g in got]
            outside[r] += out[0]
    insitu = np.array([[n.dur_us * 1e3 for n in run.nodes if n.parent is None] for run in plain_runs])
    return {"order": order, "sampled_ns": counts.tolist(), "outside_ns": outside.tolist(),
            "insitu_ns": insitu.tolist(), "walls": walls}


STEPWISE = """
import json, sys
import numpy as np
import layerperf
prof = layerperf.profile(sys.argv[1], warmup=3, runs=int(sys.argv[3]), events=["task-clock"], passes=5,
                         threads=int(sys.argv[2]), latency=False)
print(json.dumps([[layer.name for layer in prof.layers],
                  [float(np.median(layer.counters["task-clock"])) for layer in prof.layers],
                  list(prof.counters.stepwise_median_ns)]))
"""


def stepwise_route(model: str, threads: int, runs: int) -> tuple[list[str], list[float], list[float]]:
    """Per layer: name, median task-clock and time of the stepwise executor (``layerperf.profile``, in a
    process of its own: this one's global thread pool is set)."""
    out = subprocess.run([sys.executable, "-c", STEPWISE, model, str(threads), str(runs)], capture_output=True,
                         text=True, check=True)
    names, counts, times = json.loads(out.stdout.splitlines()[-1])
    return names, counts, times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--period-us", type=float, default=50.0)
    ap.add_argument("--stepwise", action="store_true", help="the stepwise route too (a worker process)")
    args = ap.parse_args()
    res = sampled_route(args.model, args.threads, args.runs, int(args.period_us * 1e3))
    insitu = np.median(np.array(res["insitu_ns"]), axis=0)
    sampled = np.array(res["sampled_ns"])
    med = np.median(sampled, axis=0)
    se = sampled.std(axis=0, ddof=1) / np.sqrt(len(sampled)) if len(sampled) > 1 else np.zeros_like(med)
    walls = {k: float(np.median(v)) for k, v in res["walls"].items()}
    big = insitu > 0.01 * insitu.sum()
    print(f"{args.model} threads={args.threads} runs={args.runs} period={args.period_us:g} µs "
          f"nodes={len(insitu)} load {os.getloadavg()[0]:.2f}")
    print(f"  sampling overhead: run median {walls['sampled'] / 1e6:.2f} ms sampled vs {walls['plain'] / 1e6:.2f} ms "
          f"plain, x{walls['sampled'] / walls['plain']:.3f}")
    print(f"  sampled task-clock: sum {med.sum() / 1e6:.2f} ms vs in-situ wall sum {insitu.sum() / 1e6:.2f} ms "
          f"(ratio {med.sum() / insitu.sum():.3f}), rank corr vs in-situ wall {spearman(med, insitu):.3f}; "
          f"between nodes {np.median(res['outside_ns']) / 1e6:.2f} ms a run; median relative standard error of a "
          f"layer's median {np.median(se[big] / np.maximum(med[big], 1)):.1%} (layers >1% of the run)")
    if args.stepwise:
        names, counts, times = stepwise_route(args.model, args.threads, args.runs)
        at = {n: i for i, n in enumerate(res["order"])}
        pick = [at.get(n) for n in names]
        ok = [i for i, p in enumerate(pick) if p is not None]
        s_counts = np.array([counts[i] for i in ok])
        s_times = np.array([times[i] for i in ok])
        ref = np.array([insitu[pick[i]] for i in ok])  # type: ignore[index]
        smp = np.array([med[pick[i]] for i in ok])  # type: ignore[index]
        print(f"  stepwise task-clock: sum {s_counts.sum() / 1e6:.2f} ms (ratio to in-situ wall "
              f"{s_counts.sum() / ref.sum():.3f}), rank corr vs in-situ wall {spearman(s_counts, ref):.3f}; "
              f"stepwise time ratio {np.nansum(s_times) / ref.sum():.3f}")
        print(f"  sampled vs stepwise task-clock: ratio {smp.sum() / s_counts.sum():.3f}, "
              f"rank corr {spearman(smp, s_counts):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
