"""The PyTorch backend's device time on a GPU, checked against the kernels' own times.

For each model: a level-1 profile (`--torch-device cuda`: a pair of CUDA events at every module's
boundaries) and a level-2 profile (torch.profiler with the CUDA activity: each kernel under the module
whose op launched it). For every leaf module (no module inside it), its median device time between
its events at level 1 beside the median sum of its kernels' durations at level 2; the ratio kernels /
events is the share of the module's device time that its kernels kept the GPU busy (under 1: gaps
where the device waited for the host to launch the next kernel). Also each level's cost: the
profiled run's host time (up to its synchronization) against the plain runs interleaved with it.

    python benchmarks/torch_cuda.py [--models resnet50,bert-base] [--batch 32] [--runs 20]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

import numpy as np
import torch

import layerperf


def _median_per_layer(prof: Any) -> dict[str, float]:
    return {la.name: float(np.median(prof.durations_ns(i))) for i, la in enumerate(prof.layers)
            if len(prof.durations_ns(i))}


def _kernels_per_module(prof: Any) -> dict[str, float]:
    """The median over runs of each module's kernels' summed durations (ns)."""
    per_run: dict[str, list[float]] = defaultdict(list)
    for run in prof.runs:
        sums: dict[str, float] = defaultdict(float)
        for s in run.spans:
            la = prof.layers[s.layer]
            if la.domain == "cuda" and la.parent:
                sums[la.parent] += s.dur_ns
        for k, v in sums.items():
            per_run[k].append(v)
    return {k: float(np.median(v)) for k, v in per_run.items()}


def _cost(prof: Any) -> str:
    plain, hooked = np.median(prof.latency_ns), np.median(prof.profiled_latency_ns)
    return f"{hooked / 1e6:.3f} ms profiled vs {plain / 1e6:.3f} ms plain, x{hooked / plain:.3f}"


def check(model: str, batch: int, runs: int) -> None:
    zoo: dict[str, Any] = {"batch": batch}
    l1 = layerperf.profile(model, backend="torch", torch_device="cuda", runs=runs, warmup=5, **zoo)
    l2 = layerperf.profile(model, backend="torch", torch_device="cuda", runs=runs, warmup=5, level=2, **zoo)
    events = _median_per_layer(l1)
    kernels = _kernels_per_module(l2)
    parents = {la.parent for la in l1.layers}
    leaves = [la.name for la in l1.layers if la.name not in parents and la.name in kernels]
    ratios = np.array([kernels[n] / events[n] for n in leaves])
    run_events = float(np.median([r.dur_ns for r in l1.runs]))
    run_kernels = float(np.median([sum(s.dur_ns for s in r.spans if l2.layers[s.layer].domain == "cuda")
                                   for r in l2.runs]))
    print(f"\n{model}, batch {batch}, {runs} runs each, {torch.cuda.get_device_name()}")
    print(f"  level 1 (events): {_cost(l1)}")
    print(f"  level 2 (kernels): {_cost(l2)}")
    print(f"  run's device time (events) {run_events / 1e6:.3f} ms; its kernels' total {run_kernels / 1e6:.3f} ms "
          f"(x{run_kernels / run_events:.3f})")
    print(f"  {len(leaves)} leaf modules with kernels: kernels / events median x{np.median(ratios):.3f}, "
          f"p10 x{np.percentile(ratios, 10):.3f}, p90 x{np.percentile(ratios, 90):.3f}")
    top = sorted(leaves, key=lambda n: -events[n])[:8]
    print(f"  {'module':<36} {'events':>10} {'kernels':>10}  ratio")
    for n in top:
        print(f"  {n:<36} {events[n] / 1e3:8.1f}us {kernels[n] / 1e3:8.1f}us  x{kernels[n] / events[n]:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert-base")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_cuda.py: needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    print(f"torch {torch.__version__}, layerperf {layerperf.__version__}")
    for model in args.models.split(","):
        check(model, args.batch, args.runs)


if __name__ == "__main__":
    main()
