"""One profile on TVM, start to end: the model and its inputs, tuning when asked, the build (from the
cache when made before), one watched run (layers, tensors, work), warm-up, the hooked runs
alternating with plain ones, then counters and memory through the collector driver at the same
hook, and the VM's own allocations into the memory report."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from layerperf.analysis.memory.report import analyze_memory, with_allocations
from layerperf.backends.base import RunPlan
from layerperf.backends.common import CORE_PLAN_FIELDS, interleaved, profile_metadata, unknown_flops_warnings
from layerperf.backends.tvm import cache, cpp_log, memory, tuning
from layerperf.backends.tvm.build import Build, build
from layerperf.backends.tvm.device import runnable_target
from layerperf.backends.tvm.fold import fold_shapes
from layerperf.backends.tvm.importer import import_onnx
from layerperf.backends.tvm.instrument import Runner
from layerperf.backends.tvm.layers import LayerPlan, make_layers
from layerperf.backends.tvm.options import TvmOptions
from layerperf.backends.tvm.pipeline import tunable_module
from layerperf.backends.tvm.runtime import set_threads, versions
from layerperf.collectors.timer import Timing
from layerperf.cost import covers
from layerperf.data.memory_report import MemoryReport
from layerperf.data.metadata import Metadata
from layerperf.data.profile import GraphSummary, Measurement, Profile
from layerperf.models.inputs import make_feed, onnx_input_specs
from layerperf.models.source import ModelSource, open_model

if TYPE_CHECKING:
    from layerperf.collectors import Collectors

Progress = Callable[[str, int, int], None] | None


def profile(model: Any, plan: RunPlan, options: TvmOptions, collectors: Collectors) -> Profile:
    plan.validate()
    options.validate()
    source = open_model(model, **plan.zoo_options)
    full = onnx.load(str(source.path))  # the weights too: TVM compiles them in
    specs = onnx_input_specs(full)
    feed = make_feed(full, specs, plan.shapes, plan.inputs_file, plan.seed)
    shapes = {s.name: list(feed[s.name].shape) for s in specs}
    full = fold_shapes(full, shapes)  # exporters' shape arithmetic, which TVM's frontend refuses, as constants
    threads = set_threads(plan.threads)  # before anything starts TVM's pool
    tuned = _tune(full, shapes, options, threads, collectors.progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = build(full, target=options.target, pipeline=options.pipeline,
                     database_dir=tuned.work_dir if tuned else None, shapes=shapes, num_cores=threads)
    runner = Runner(made.executable, made.device, [feed[s.name] for s in specs], made.cmap)
    seen, returned = runner.observe()
    lp = make_layers(full, made.cmap, options.level, seen, runner.inputs, returned, made.schedules, made.spec.kind)
    for _ in range(plan.warmup):
        runner.plain()
    timing = Timing()
    progress = collectors.progress
    step = (lambda n: progress("profiled runs", n, plan.runs)) if progress else None
    plain, hooked = interleaved(runner.plain if plan.latency else None, lambda: runner.run_pass(timing, lp.layer_of),
                                plan.runs, done=step, between=plan.between_runs)
    runs = timing.runs()
    prof = Profile(
        metadata=_metadata(source, plan, options, made, tuned), layers=lp.layers, runs=runs,
        latency_ns=plain.wall_ns, profiled_latency_ns=hooked.wall_ns if plain.wall_ns else [],
        latency_cpu_ns=plain.cpu_ns, profiled_cpu_ns=hooked.cpu_ns if plain.cpu_ns else [],
        graph=GraphSummary(tuple(s.name for s in specs), tuple(o.name for o in full.graph.output), lp.weights),
        measurement=Measurement(latency="interleaved" if plain.wall_ns else "off",
                                block_runs=1 if plain.wall_ns else None, intra_op_threads=threads,
                                intra_op_threads_source="set" if plan.threads else "TVM default",
                                inputs=[{"name": k, "shape": list(v.shape), "dtype": v.dtype.name}
                                        for k, v in feed.items()]),
        warnings=_warnings(lp, made, options, [str(w.message) for w in caught]))
    if collectors.counters or collectors.memory:
        collectors.driver(len(lp.layers)).run(lambda c: runner.run_pass(c, lp.layer_of)).fill(prof)
    if collectors.memory:
        prof.memory = _vm_memory(runner, made, lp, prof)
    return prof


def tuning_dir(model: onnx.ModelProto, shapes: dict[str, list[int]], target: str, pipeline: str,
               num_cores: int) -> Path:
    """Where ``--tune`` keeps the database of ``model`` imported at ``shapes`` for ``target``."""
    spec, _ = runnable_target(target, num_cores)
    return tuning.database_dir(cache.model_digest(model.SerializeToString(), shapes), spec.key(), pipeline)


def _tune(model: onnx.ModelProto, shapes: dict[str, list[int]], options: TvmOptions, num_cores: int,
          progress: Progress) -> tuning.TuneResult | None:
    """``--tune``: the model's database made or completed to the trials asked; None untuned."""
    if not options.tune:
        return None
    _, target = runnable_target(options.target, num_cores)
    work_dir = tuning_dir(model, shapes, options.target, options.pipeline, num_cores)
    if progress:
        progress("tuning: extracting the tasks", 0, 1)
    with cpp_log.captured():  # the passes the build runs again, and says the same warnings of
        mod = tunable_module(import_onnx(model, shapes).mod, target, options.pipeline)
    return tuning.tune_total(mod, target, work_dir, options.tune,
                             search=tuning.Search(options.tune_strategy), progress=progress)


def tuning_state(made: Build) -> str:
    """What the metadata says of the schedules: ``untuned``, or the database applied."""
    return "untuned" if not made.tuned else f"tuned ({made.info.key.tuning})"


def _metadata(source: ModelSource, plan: RunPlan, options: TvmOptions, made: Build,
              tuned: tuning.TuneResult | None) -> Metadata:
    own = {**dataclasses.asdict(options), "target": made.spec.key(),
           "target_given": options.target, "tuning_state": tuning_state(made),
           "tuning_tasks": tuned.tasks if tuned else None,
           "tuning_trials_per_task": tuned.trials_per_task if tuned else None,
           "tuning_trials_run": tuned.trials_run if tuned else None,
           "tuning_records": tuned.records if tuned else None,
           "tuning_s": round(tuned.tune_s, 3) if tuned else None,
           "compile_s": round(made.info.compile_s, 3), "build_cached": made.from_cache,
           "tvm_ffi": versions()["tvm_ffi"]}
    return profile_metadata(source, plan, "tvm", str(versions()["tvm"]), made.spec.kind, own,
                            plan_fields=CORE_PLAN_FIELDS)


def _warnings(lp: LayerPlan, made: Build, options: TvmOptions, caught: list[str]) -> list[str]:
    out = unknown_flops_warnings(layer.op_type for layer in lp.layers if not covers(layer.domain, layer.op_type))
    if not made.tuned:
        out.append("untuned TVM build (default schedules): its kernels are not TVM's speed; tune them with "
                   "--tune TRIALS")
    out += [f"call map: {w}" for w in made.cmap.warnings]
    unmapped = made.cmap.unmapped()
    if unmapped:
        out.append(f"{len(unmapped)} ONNX nodes were found in no VM call (their work is in no row)")
    out += [f"TVM, compiling the model: {w}" for w in made.info.tvm_warnings]
    return out + caught


def _vm_memory(runner: Runner, made: Build, lp: LayerPlan, prof: Profile) -> MemoryReport:
    """The collectors' memory report with the VM's allocations and frees of one more run in it."""
    sizes, call_ns = runner.allocations()
    evs, _ = memory.events(made.main, sizes)
    spans = memory.layer_spans(made.cmap.sites, lp.layer_of, call_ns)
    allocs = memory.allocations(evs, call_ns, spans, [layer.name for layer in lp.layers])
    base = prof.memory if prof.memory is not None else analyze_memory(prof)
    return with_allocations(base, allocs)

