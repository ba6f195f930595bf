"""What profiling a PyTorch model costs: layerperf's levels beside torch.profiler, interleaved in one run.

Variants, each a call of the same module on the same inputs in inference mode, taken in turn (one
call of each per round, so drift on a shared machine hits all alike; the order rotates from round to
round, so no variant always follows the same one); each is timed around the model call alone (a
profiler session is opened and closed outside the timed span):

    plain       no profiling
    level1      layerperf level 1: forward hooks on every module, the timing collector at each boundary
    level2      a timed run of layerperf level 2 (backends/torch/level2.Level2Run): the profiled modules'
                forwards wrapped to read the profiler's clock, torch.profiler with its default
                options (shapes come from one untimed run with record_shapes=True, FLOPs and bytes
                from replaying each op once afterwards, not from with_flops)
    level2_shapes  that untimed run, timed here: level 2 with record_shapes=True
    api_level1  layerperf.torch's decorator (level 1) around the call: its hooks (forward, optimizer
                step, and the bookkeeping for backward rows) installed for the call, one run per call
    tp_default  torch.profiler, CPU activity, default options
    tp_shapes   torch.profiler with record_shapes=True, with_flops=True

Printed: median ms per variant and its ratio to plain (median over rounds of the per-round ratio).

With ``--device cuda`` the model and inputs are on the GPU and every variant's call ends with
``torch.cuda.synchronize()`` (timed up to it, so the device's work is in every figure); level 1 and the
decorator record a pair of CUDA events at each module's boundaries (backends/torch/cuda.py), level 2
and torch.profiler add the CUDA activity (kernels).

    python benchmarks/torch_overhead.py [--models resnet50,bert-base] [--threads 1,2] [--runs 20]
        [--image-size 224] [--seq-len 128] [--batch 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity

from layerperf.backends.base import RunPlan
from layerperf.backends.torch.hooks import module_hooks
from layerperf.backends.torch.level2 import Level2Run
from layerperf.backends.torch.models import load
from layerperf.backends.torch.quiet_profiler import QuietProfiler  # torch.profiler.profile, less kineto's stderr
from layerperf.backends.torch.runner import Runner
from layerperf.collectors.timer import Timing

VARIANTS = ("plain", "level1", "api_level1", "level2", "level2_shapes", "tp_default", "tp_shapes")


def _timed(call: Callable[[], Any]) -> int:
    t0 = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - t0


def variants(runner: Runner, index: dict[int, int], device: str = "cpu") -> dict[str, Callable[[], int]]:
    timing: Any = Timing()
    if device == "cuda":
        from layerperf.backends.torch.cuda import CudaEvents

        timing = CudaEvents(allocator=False)
    level2_run = Level2Run(runner, index, device)
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device == "cuda" else [])]

    def level1() -> int:
        with module_hooks(index, timing.start, timing.stop):
            timing.begin_pass()
            ns = _timed(runner.call)
            timing.end_pass()
        return ns

    def level2() -> int:
        return level2_run().dur_ns  # the run as level 2 times it: the model's call and the run range's ends

    def tp(**kw: Any) -> Callable[[], int]:
        def run() -> int:
            with QuietProfiler(activities=activities, **kw):
                return _timed(runner.call)
        return run

    import layerperf.torch as lt

    api_call = lt.profile(profile_device=device)(runner.call)  # never stopped: the profile is not built

    return {"plain": lambda: _timed(runner.call), "level1": level1, "api_level1": lambda: _timed(api_call),
            "level2": level2, "level2_shapes": lambda: level2_run(shapes=True).dur_ns,
            "tp_default": tp(), "tp_shapes": tp(record_shapes=True, with_flops=True)}


def bench(model: str, threads: int, runs: int, zoo: dict[str, int], device: str = "cpu") -> None:
    torch.set_num_threads(threads)
    loaded = load(model, RunPlan(zoo_options=zoo))
    if device == "cuda":
        from layerperf.backends.torch.cuda import to_device

        loaded = to_device(loaded, device)
    runner = Runner(loaded, synchronize=device == "cuda")
    rec = runner.record()
    index = runner.index(rec)
    calls = variants(runner, index, device)
    for call in calls.values():  # warm-up, every variant
        call()
    times: dict[str, list[int]] = {v: [] for v in VARIANTS}
    for r in range(runs):  # the order rotates: no variant always follows the same one (a profiler session
        for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:  # ending slows the next call)
            times[v].append(calls[v]())
    plain = np.asarray(times["plain"], dtype=float)
    print(f"\n{model} ({zoo}) on {device}, {threads} thread(s), {len(index)} modules hooked, {runs} rounds")
    for v in VARIANTS:
        t = np.asarray(times[v], dtype=float)
        print(f"  {v:<11} median {np.median(t) / 1e6:9.2f} ms   x{np.median(t / plain):.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert-base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = p.parse_args()
    print(f"torch {torch.__version__}"
          + (f", {torch.cuda.get_device_name()}" if args.device == "cuda" else ""))
    for model in args.models.split(","):
        zoo = {"seq_len": args.seq_len} if model.startswith(("bert", "gpt")) else {"image_size": args.image_size}
        zoo["batch"] = args.batch
        for threads in (int(t) for t in args.threads.split(",")):
            bench(model, threads, args.runs, zoo, args.device)


if __name__ == "__main__":
    main()
