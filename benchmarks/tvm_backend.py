"""Figures for the TVM backend (README "TVM"): compile and cache times, full MetaSchedule tuning of
zoo models (tasks, trials, time), tuned vs untuned vs ONNX Runtime latency, and the instrument hook's
overhead (profiled vs plain VM runs, interleaved) at levels 1 and 2. (Not named tvm.py: a script of that
name, run as one, would shadow the tvm package.)

    PYTHONPATH=src python benchmarks/tvm_backend.py --steps hook-cost,compile --models resnet18,mobilenet_v2
    PYTHONPATH=src python benchmarks/tvm_backend.py --steps tune,latency --models resnet18 --trials-per-task 8
    PYTHONPATH=src python benchmarks/tvm_backend.py --steps overhead --models resnet50 --runs 40
    PYTHONPATH=src python benchmarks/tvm_backend.py --steps per-op --models resnet18 --trials-per-task 8 --runs 10

Prints one JSON object per measurement, one line each, with the host's load beside it, so a run on a
shared machine can be read as it goes. The tuning databases and builds go where ``layerperf profile
--backend tvm --tune`` keeps them ($LAYERPERF_CACHE/tvm): a later profile or ``layerperf compare``
of the same model, target and threads reuses them. Needs apache-tvm (and psutil, cloudpickle,
xgboost for tuning): ``pip install 'layerperf[tvm]'``.
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
from layerperf.backends.tvm.build import Build, build, database_digest
from layerperf.backends.tvm.cache import UNTUNED
from layerperf.backends.tvm.device import runnable_target
from layerperf.backends.tvm.driver import tuning_dir
from layerperf.backends.tvm.importer import import_onnx
from layerperf.backends.tvm.instrument import Runner, hook_overhead
from layerperf.backends.tvm.pipeline import tunable_module
from layerperf.backends.tvm.runtime import set_threads
from layerperf.models.inputs import make_feed, onnx_input_specs
from layerperf.models.source import open_model

SIZES = {"resnet18": {"image_size": 224}, "mobilenet_v2": {"image_size": 224}, "bert-base": {"seq_len": 128},
         "resnet50": {"image_size": 224}}
TARGET = "llvm"


def emit(**fields: Any) -> None:
    print(json.dumps({**fields, "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)


def load(name: str) -> onnx.ModelProto:
    """The zoo model as ``layerperf profile`` loads it (same bytes, so the same tuning database)."""
    return onnx.load(str(open_model(name, **SIZES.get(name, {})).path))


def inputs_of(model: onnx.ModelProto) -> list[np.ndarray]:
    """The inputs ``layerperf profile`` feeds (seed 0)."""
    feed = make_feed(model, onnx_input_specs(model))
    return [feed[s.name] for s in onnx_input_specs(model)]


def shapes_of(model: onnx.ModelProto) -> dict[str, list[int]]:
    """The input shapes the model is imported with, as ``layerperf profile`` imports it."""
    return {s.name: list(a.shape) for s, a in zip(onnx_input_specs(model), inputs_of(model), strict=True)}


def compile_figures(name: str, model: onnx.ModelProto, pipeline: str, root: Path, threads: int) -> Build:
    t0 = time.perf_counter()
    import_onnx(model, shapes_of(model))
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = build(model, target=TARGET, pipeline=pipeline, shapes=shapes_of(model), cache_root=root, num_cores=threads)
    total_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = build(model, target=TARGET, pipeline=pipeline, shapes=shapes_of(model), cache_root=root,
                  num_cores=threads)
    emit(what="compile", model=name, pipeline=pipeline, import_s=round(import_s, 2),
         compile_s=round(b.info.compile_s, 2), build_and_cache_s=round(total_s, 2),
         cached_load_s=round(time.perf_counter() - t0, 2), from_cache=again.from_cache,
         calls=len(b.cmap.sites), kernels=len(b.cmap.kernels()), nodes=len(model.graph.node),
         coverage=b.cmap.coverage(), warnings=list(b.cmap.warnings))
    return b


def tune_figures(name: str, model: onnx.ModelProto, per_task: int, strategy: str, threads: int) -> None:
    """A full tuning into the database ``layerperf profile --tune`` uses for this model and threads."""
    _, target = runnable_target(TARGET, threads)
    work_dir = tuning_dir(model, shapes_of(model), TARGET, "default", threads)
    mod = tunable_module(import_onnx(model, shapes_of(model)).mod, target)
    tasks = tuning.extract(mod, target)

    def progress(what: str, done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            emit(what="tune_progress", model=name, done=done, total=total)

    t0 = time.perf_counter()
    try:
        result = tuning.tune_tasks(tasks, target, work_dir, per_task, search=tuning.Search(strategy),
                                   progress=progress)
    except tuning.TuningInterrupted as exc:  # a time limit's SIGINT: what was measured is kept, say so
        emit(what="tune_interrupted", model=name, tasks=len(tasks), trials_per_task=per_task,
             tune_s=round(time.perf_counter() - t0, 1), message=str(exc))
        return
    emit(what="tune", model=name, strategy=strategy, tasks=result.tasks, trials_per_task=per_task,
         trials=result.trials_run, records=result.records, tune_s=round(result.tune_s, 1),
         tuned_now=len(result.tuned), skipped=len(result.skipped), work_dir=str(work_dir))


def ort_session(model: onnx.ModelProto, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in session.get_inputs()], inputs_of(model), strict=True))
    session.run(None, feed)
    return lambda: session.run(None, feed)


def latency_figures(name: str, model: onnx.ModelProto, threads: int, runs: int, untuned_runs: int) -> None:
    """Tuned TVM and ONNX Runtime, runs alternating one by one; the untuned build alone (slow)."""
    work_dir = tuning_dir(model, shapes_of(model), TARGET, "default", threads)
    shapes = shapes_of(model)
    plain = build(model, target=TARGET, shapes=shapes, num_cores=threads)
    ort_run = ort_session(model, threads)
    times: dict[str, list[int]] = {"onnxruntime": [], "tvm_tuned": []}
    tuned = build(model, target=TARGET, shapes=shapes, database_dir=work_dir, num_cores=threads) \
        if database_digest(work_dir) != UNTUNED else None
    if tuned is not None:
        emit(what="tuned_build", model=name, compile_s=round(tuned.info.compile_s, 2), cached=tuned.from_cache,
             schedule=tuned.info.schedule)
        runner = Runner(tuned.executable, tuned.device, inputs_of(model), tuned.cmap)
        for _ in range(3):
            runner.plain()
            ort_run()
        for _ in range(runs):
            times["tvm_tuned"].append(_timed(runner.plain))
            times["onnxruntime"].append(_timed(ort_run))
    else:
        times["onnxruntime"] = [_timed(ort_run) for _ in range(runs)]
    slow = Runner(plain.executable, plain.device, inputs_of(model), plain.cmap)
    times["tvm_untuned"] = [_timed(slow.plain) for _ in range(untuned_runs)]
    medians = {k: round(float(np.median(v)) / 1e6, 3) for k, v in times.items() if v}
    emit(what="latency", model=name, threads=threads, runs=runs, untuned_runs=untuned_runs, median_ms=medians,
         tuned_speedup=round(medians["tvm_untuned"] / medians["tvm_tuned"], 1) if "tvm_tuned" in medians else None,
         tuned_vs_ort=round(medians["tvm_tuned"] / medians["onnxruntime"], 2) if "tvm_tuned" in medians else None)


def _timed(call: Any) -> int:
    t0 = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - t0


def overhead_figures(name: str, model: onnx.ModelProto, threads: int, runs: int) -> None:
    """The hook's cost on a real model (tuned when its database is there), levels 1 and 2, interleaved."""
    work_dir = tuning_dir(model, shapes_of(model), TARGET, "default", threads)
    tuned = database_digest(work_dir) != UNTUNED
    b = build(model, target=TARGET, shapes=shapes_of(model), database_dir=work_dir if tuned else None,
              num_cores=threads)
    runner = Runner(b.executable, b.device, inputs_of(model), b.cmap)
    for _ in range(3):
        runner.plain()
    for level in (1, 2):
        o = hook_overhead(runner, level, runs)
        emit(what="hook_overhead", model=name, tuned=tuned, level=level, runs=runs, threads=threads,
             plain_ms=round(o.plain_median_ns / 1e6, 3), profiled_ms=round(o.profiled_median_ns / 1e6, 3),
             ratio=round(o.ratio, 4), per_call_ns=round(o.per_call_ns), calls=o.calls, hooked=o.hooked_calls)


def per_op_figures(name: str, model: onnx.ModelProto, threads: int, runs: int, untuned_runs: int,
                   per_task: int) -> None:
    """``layerperf profile --backend tvm`` untuned and tuned (the database the tune step made: ``--tune``
    asks as many trials per task, so nothing is tuned again): per op type, time per run."""
    import layerperf

    _, target = runnable_target(TARGET, threads)
    n_tasks = len(tuning.extract(tunable_module(import_onnx(model, shapes_of(model)).mod, target), target))
    for tune, n in ((0, untuned_runs), (n_tasks * per_task, runs)):
        prof = layerperf.profile(name, backend="tvm", threads=threads, runs=n, warmup=1, tune=tune,
                                 **SIZES.get(name, {}))
        per_type: dict[str, float] = {}
        for r in prof.records():
            per_type[r.op_type] = per_type.get(r.op_type, 0.0) + (r.median_us or 0.0) * r.calls / max(r.runs, 1)
        emit(what="per_op", model=name, tune=tune, tuning_state=prof.metadata.options.get("tuning_state"),
             runs=n, threads=threads, layers=len(prof.layers),
             latency_ms=round(float(np.median(prof.latency_ns)) / 1e6, 3) if prof.latency_ns else None,
             per_op_type_ms={k: round(v / 1e3, 3) for k, v in sorted(per_type.items(), key=lambda kv: -kv[1])})


def memory_figures(name: str, b: Build, model: onnx.ModelProto) -> None:
    runner = Runner(b.executable, b.device, inputs_of(model), b.cmap)
    sizes, _ = runner.allocations()
    mem = memory.summarize(*memory.events(b.main, sizes))
    mib = 2**20
    emit(what="memory", model=name, allocated_MiB=round(mem.allocated_bytes / mib, 2),
         peak_allocated_MiB=round(mem.peak_allocated_bytes / mib, 2),
         peak_used_MiB=round(mem.peak_used_bytes / mib, 2), blocks=mem.blocks, tensors=mem.tensors)


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


STEPS = ("hook-cost", "compile", "tune", "latency", "overhead", "per-op")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default="hook-cost,compile", help=f"comma-separated, of: {', '.join(STEPS)}")
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--pipelines", default="default,unfused", help="for the compile step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--untuned-runs", type=int, default=3)
    ap.add_argument("--trials-per-task", type=int, default=8)
    ap.add_argument("--strategy", default="evolutionary", choices=("evolutionary", "replay-trace"))
    args = ap.parse_args()
    steps = set(args.steps.split(","))
    emit(what="threads", tvm_threads=set_threads(args.threads), cpus=os.cpu_count())
    if "hook-cost" in steps:
        hook_cost(400)
    for name in [m for m in args.models.split(",") if m]:
        model = load(name)
        if "compile" in steps:
            root = Path(tempfile.mkdtemp(prefix="tvm-bench-"))
            for pipeline in args.pipelines.split(","):
                b = compile_figures(name, model, pipeline, root, args.threads)
                if pipeline == "default":
                    memory_figures(name, b, model)
        if "tune" in steps:
            tune_figures(name, model, args.trials_per_task, args.strategy, args.threads)
        if "latency" in steps:
            latency_figures(name, model, args.threads, args.runs, args.untuned_runs)
        if "overhead" in steps:
            overhead_figures(name, model, args.threads, args.runs)
        if "per-op" in steps:
            per_op_figures(name, model, args.threads, args.runs, args.untuned_runs, args.trials_per_task)


if __name__ == "__main__":
    main()
