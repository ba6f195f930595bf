"""Figures for the TVM backend's phase-1 notes: import, compile, cache and mapping per zoo model and
pipeline; memory; a short random-search tuning; the instrument hook's overhead, interleaved.

    TVM_NUM_THREADS=2 PYTHONPATH=src python benchmarks/tvm_phase1.py [--models resnet18,...] [--tune-trials 1]

Prints one JSON object per measurement (one line each), so a run on a shared machine can be read
as it goes. Needs apache-tvm (and psutil, cloudpickle, xgboost for the tuning part).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from layerperf.backends.tvm import memory, tuning
from layerperf.backends.tvm.build import Build, build
from layerperf.backends.tvm.cache import model_digest
from layerperf.backends.tvm.device import runnable_target
from layerperf.backends.tvm.importer import import_onnx
from layerperf.backends.tvm.instrument import Runner, hook_overhead
from layerperf.backends.tvm.pipeline import tunable_module
from layerperf.backends.tvm.runtime import set_threads
from layerperf.models import zoo

SIZES = {"resnet18": {"image_size": 224}, "mobilenet_v2": {"image_size": 224}, "bert-base": {"seq_len": 128},
         "resnet50": {"image_size": 224}}


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def inputs_of(model: onnx.ModelProto) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out.append(rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else
                   rng.integers(0, 100, shape).astype(dtype))
    return out


def compile_figures(name: str, model: onnx.ModelProto, pipeline: str, root: Path, target: str) -> Build:
    t0 = time.perf_counter()
    import_onnx(model)
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = build(model, target=target, pipeline=pipeline, cache_root=root)
    total_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = build(model, target=target, pipeline=pipeline, cache_root=root)
    emit(what="compile", model=name, pipeline=pipeline, import_s=round(import_s, 2),
         compile_s=round(b.info.compile_s, 2), build_and_cache_s=round(total_s, 2),
         cached_load_s=round(time.perf_counter() - t0, 2), from_cache=again.from_cache,
         calls=len(b.cmap.sites), kernels=len(b.cmap.kernels()), nodes=len(model.graph.node),
         coverage=b.cmap.coverage(), warnings=list(b.cmap.warnings))
    return b


def run_figures(name: str, model: onnx.ModelProto, b: Build, runs: int, label: str) -> Runner:
    runner = Runner(b.executable, b.device, inputs_of(model), b.cmap)
    sizes, _ = runner.allocations()
    mem = memory.summarize(*memory.events(b.main, sizes))
    mib = 2**20
    emit(what="memory", model=name, build=label, allocated_MiB=round(mem.allocated_bytes / mib, 2),
         peak_allocated_MiB=round(mem.peak_allocated_bytes / mib, 2),
         peak_used_MiB=round(mem.peak_used_bytes / mib, 2), blocks=mem.blocks, tensors=mem.tensors,
         peak_call=mem.peak_call)
    for level in (1, 2):
        o = hook_overhead(runner, level, runs)
        emit(what="hook_overhead", model=name, build=label, level=level, runs=runs,
             plain_ms=round(o.plain_median_ns / 1e6, 3), profiled_ms=round(o.profiled_median_ns / 1e6, 3),
             ratio=round(o.ratio, 4), per_call_ns=round(o.per_call_ns), calls=o.calls, hooked=o.hooked_calls)
    return runner


def tune_figures(name: str, model: onnx.ModelProto, target: str, root: Path, per_task: int, strategy: str) -> Path:
    spec, tgt = runnable_target(target)
    mod = tunable_module(import_onnx(model).mod, tgt)
    work_dir = tuning.database_dir(model_digest(model.SerializeToString()), spec.key(), "default", root)
    result = tuning.tune(mod, tgt, work_dir, per_task, search=tuning.Search(strategy))
    emit(what="tune", model=name, strategy=strategy, tasks=result.tasks, trials_per_task=per_task,
         trials=result.trials_run, records=result.records, tune_s=round(result.tune_s, 1))
    return work_dir


def chain(n: int = 200) -> onnx.ModelProto:
    """``n`` Relu/Neg nodes on a 1x8 tensor: kernels that take next to no time, so a run's time is the
    VM's and the hook's."""
    h, tp = onnx.helper, onnx.TensorProto
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(h.make_node("Relu" if i % 2 == 0 else "Neg", [prev], [out], name=f"n{i}"))
        prev = out
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", tp.FLOAT, [1, 8])],
                         [h.make_tensor_value_info("y", tp.FLOAT, [1, 8])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=9)


def hook_cost(runs: int) -> None:
    """The hook's own cost per VM call, on :func:`chain` (unfused: one kernel per node)."""
    model = chain()
    b = build(model, pipeline="unfused", use_cache=False)
    runner = Runner(b.executable, b.device, inputs_of(model), b.cmap)
    for level in (1, 2):
        o = hook_overhead(runner, level, runs)
        emit(what="hook_cost", level=level, calls=o.calls, hooked=o.hooked_calls, runs=runs,
             plain_us=round(o.plain_median_ns / 1e3, 1), profiled_us=round(o.profiled_median_ns / 1e3, 1),
             per_call_ns=round(o.per_call_ns))


def ort_latency(model: onnx.ModelProto, threads: int, runs: int) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in session.get_inputs()], inputs_of(model), strict=True))
    session.run(None, feed)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        session.run(None, feed)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times)) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert-base")
    ap.add_argument("--pipelines", default="default,unfused")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tune", default="resnet18", help="models to tune briefly (comma-separated, '' for none)")
    ap.add_argument("--tune-trials", type=int, default=1, help="trials per task")
    ap.add_argument("--strategy", default="replay-trace")
    ap.add_argument("--skip-untuned-runs", default="bert-base,resnet50")
    args = ap.parse_args()
    threads = int(os.environ.get("TVM_NUM_THREADS", "2"))
    emit(what="threads", tvm_threads=set_threads(threads), cpus=os.cpu_count(), load=os.getloadavg())
    target = f"llvm -num-cores={threads}"
    root = Path(tempfile.mkdtemp(prefix="tvm-phase1-"))
    hook_cost(400)
    for name in [m for m in args.models.split(",") if m]:
        model = zoo.build(name, **SIZES[name])
        for pipeline in args.pipelines.split(","):
            b = compile_figures(name, model, pipeline, root, target)
            if pipeline == "default" and name not in args.skip_untuned_runs.split(","):
                run_figures(name, model, b, args.runs, "untuned")
        emit(what="onnxruntime", model=name, threads=threads, median_ms=round(ort_latency(model, threads, 20), 3))
        if name in args.tune.split(","):
            work_dir = tune_figures(name, model, target, root, args.tune_trials, args.strategy)
            affinity = os.sched_getaffinity(0)
            tuned = build(model, target=target, database_dir=work_dir, cache_root=root)
            emit(what="tuned_build", model=name, compile_s=round(tuned.info.compile_s, 2), schedule=tuned.info.schedule)
            run_figures(name, model, tuned, max(args.runs, 20), f"tuned ({args.strategy}, {args.tune_trials}/task)")
            emit(what="affinity", before=sorted(affinity), after=sorted(os.sched_getaffinity(0)))


if __name__ == "__main__":
    main()
