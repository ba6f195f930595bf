"""One profile on PyTorch, start to end: the model and its inputs, one recorded pass (layers, shapes,
FLOPs), warm-up, hooked runs alternating with plain ones, then counters and memory through the
collector driver at the same module boundaries."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from layerperf import cost as cost_model
from layerperf.backends.base import RunPlan
from layerperf.backends.common import CORE_PLAN_FIELDS, RunTimes, interleaved, profile_metadata, unknown_flops_warnings
from layerperf.backends.torch import cuda as on_gpu
from layerperf.backends.torch.build import build_profile, graph_summary, unknown_ops_warnings
from layerperf.backends.torch.level2 import level2_runs
from layerperf.backends.torch.memory import allocation_report
from layerperf.backends.torch.models import TorchModel, load
from layerperf.backends.torch.options import TorchOptions
from layerperf.backends.torch.record import Recorder, Seen, input_names
from layerperf.backends.torch.runner import PLAIN, WARMUP, Runner
from layerperf.collectors.timer import Timing
from layerperf.data.metadata import Metadata
from layerperf.data.profile import Layer, Measurement, Profile
from layerperf.errors import InputError

if TYPE_CHECKING:
    from layerperf.collectors import Collector, Collectors

MODULE_DOMAIN = "torch.nn"  # a module's op type is its class name, never an ONNX op's


def profile(model: Any, plan: RunPlan, options: TorchOptions, collectors: Collectors) -> Profile:
    import torch

    options.validate()
    if plan.threads:
        torch.set_num_threads(plan.threads)
    loaded = load(model, plan)
    cuda = options.torch_device == "cuda"
    if cuda:  # see backends/torch/cuda.py
        loaded = on_gpu.to_device(loaded, "cuda")
    runner = Runner(loaded, synchronize=cuda)
    # the model's own code a row (level 1; at level 2 its ops are), but not an ONNX graph's interpreter
    rec = runner.record(root=options.level == 1 and loaded.onnx is None)
    weights = frozenset(i.name for i in loaded.onnx.graph.initializer) if loaded.onnx is not None else frozenset()
    layers = layers_from(rec, weights, "cuda" if cuda else "cpu")
    index = runner.index(rec)
    for _ in range(plan.warmup):
        runner.call(WARMUP)
    runner.stage = PLAIN  # the plain runs the profiled ones alternate with
    if options.level == 2:
        if collectors.counters or collectors.memory:
            raise InputError("perf counters and the memory profile run at --level 1 (modules) only")
        got = level2_runs(runner, rec, layers, plan, collectors.progress, options.torch_device)
        return build_profile(_metadata(loaded, plan, options), got.layers, got.runs, level=2, plain=got.plain,
                             profiled_cpu_ns=got.cpu_ns, graph=graph_summary(loaded, rec),
                             measurement=measurement(loaded, plan, bool(got.plain.wall_ns)),
                             warnings=[*warnings(loaded, rec), *got.warnings])
    if cuda:
        device_timing, plain = cuda_timed_runs(runner, index, plan, collectors.progress)
        runs = device_timing.runs()
        on_gpu.fill_memory(layers, allocator_pass(runner, index))
    else:
        timing, plain = timed_runs(runner, index, plan, collectors.progress)
        runs = timing.runs()
    prof = build_profile(_metadata(loaded, plan, options), layers, runs, level=1, plain=plain,
                         profiled_cpu_ns=runner.cpu_ns, graph=graph_summary(loaded, rec),
                         measurement=measurement(loaded, plan, bool(plain.wall_ns)), warnings=warnings(loaded, rec))
    if collectors.counters or collectors.memory:
        collectors.driver(len(layers)).run(lambda c: runner.hooked_pass(index, c, stage="counting pass")).fill(prof)
    if collectors.memory:  # what torch's allocator did, per module: one more pass under torch.profiler
        runner.stage = "memory pass"
        prof.memory = allocation_report(runner.call, index, prof, on_gpu.device_name("cuda") if cuda else "cpu")
    return prof


def timed_runs(runner: Runner, index: dict[int, int], plan: RunPlan,
               progress: Callable[[str, int, int], None] | None) -> tuple[Timing, RunTimes]:
    """``plan.runs`` hooked passes timed by the timing collector; with ``plan.latency`` a plain call
    before each (the profiler-off latency, see backends/common)."""
    timing = Timing()
    return timing, hooked_runs(runner, index, plan, timing, runner.call, progress, "profiled runs",
                               between=plan.between_runs)


def hooked_runs(runner: Runner, index: dict[int, int], plan: RunPlan, collector: Collector,
                plain_call: Callable[[], Any], progress: Callable[[str, int, int], None] | None,
                label: str, between: Callable[[int], None] | None = None) -> RunTimes:
    """``plan.runs`` passes with ``collector`` at the module boundaries, each after a ``plain_call()``
    timed with no hook installed when ``plan.latency`` (:func:`layerperf.backends.common.interleaved`);
    the plain times. The calling thread's CPU time of each hooked pass goes to ``runner.cpu_ns``.
    ``between``: the run plan's hook between runs, for the timed runs only."""
    done = (lambda n: progress(label, n, plan.runs)) if progress else None
    plain, hooked = interleaved(plain_call if plan.latency else None, lambda: runner.hooked_pass(index, collector),
                                plan.runs, done=done, between=between)
    runner.cpu_ns = hooked.cpu_ns
    return plain


def cuda_timed_runs(runner: Runner, index: dict[int, int], plan: RunPlan,
                    progress: Callable[[str, int, int], None] | None,
                    api: on_gpu.CudaApi | None = None) -> tuple[on_gpu.CudaEvents, RunTimes]:
    """``plan.runs`` hooked passes timed on the device; with ``plan.latency`` a plain call before each,
    timed on the host up to a synchronization (the device's work included)."""
    events = on_gpu.CudaEvents(api, allocator=False)
    sync = events.api.synchronize

    def synced() -> None:
        runner.call()
        sync()

    sync()
    return events, hooked_runs(runner, index, plan, events, synced, progress, "profiled runs (cuda)",
                               between=plan.between_runs)


def allocator_pass(runner: Runner, index: dict[int, int], api: on_gpu.CudaApi | None = None) -> on_gpu.CudaEvents:
    """One more pass, untimed, reading the caching allocator's counters at every module boundary."""
    events = on_gpu.CudaEvents(api, allocator=True)
    runner.hooked_pass(index, events, stage="allocator pass")
    return events


def layers_from(rec: Recorder, weights: frozenset[str] = frozenset(), provider: str = "cpu") -> list[Layer]:
    return [_layer(seen, rec.seen, weights, provider) for seen in rec.seen]


def _layer(seen: Seen, every: list[Seen], weights: frozenset[str], provider: str = "cpu") -> Layer:
    parent = every[seen.parent].path if seen.parent is not None else None
    if seen.domain is not None:  # an ONNX node: the ONNX cost model knows its op type
        cost = cost_model.of(seen.domain, seen.op_type, seen.inputs, seen.outputs, seen.attrs)
        return Layer(name=seen.path, op_type=seen.op_type, domain=seen.domain, provider=provider, inputs=seen.inputs,
                     outputs=seen.outputs, param_bytes=sum(t.nbytes or 0 for t in seen.inputs if t.name in weights),
                     flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written,
                     int_ops=cost.int_ops, parent=parent)
    flops, bytes_read, bytes_written, int_ops = seen.per_call()
    return Layer(name=seen.path, op_type=seen.op_type, domain=MODULE_DOMAIN, provider=provider,
                 inputs=seen.inputs, outputs=seen.outputs, param_bytes=seen.param_bytes, flops=flops,
                 bytes_read=bytes_read, bytes_written=bytes_written, int_ops=int_ops, parent=parent)


def measurement(model: TorchModel, plan: RunPlan, interleaved: bool) -> Measurement:
    import torch

    inputs = [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
              for n, t in input_names(model) if isinstance(t, torch.Tensor)]
    return Measurement(latency="interleaved" if interleaved else "off", block_runs=1 if interleaved else None,
                       intra_op_threads=torch.get_num_threads(),
                       intra_op_threads_source="set" if plan.threads else "torch default", inputs=inputs)


def warnings(model: TorchModel, rec: Recorder) -> list[str]:
    onnx_unknown = (s.op_type for s in rec.seen
                    if s.domain is not None and not cost_model.covers(s.domain, s.op_type))
    return [*model.warnings, *unknown_flops_warnings(onnx_unknown),
            *unknown_ops_warnings([s for s in rec.seen if s.domain is None])]


def _metadata(model: TorchModel, plan: RunPlan, options: TorchOptions) -> Metadata:
    import torch

    return profile_metadata(model.description, plan, "torch", torch.__version__, options.torch_device, options,
                            plan_fields=CORE_PLAN_FIELDS, omit=("torch_device",))
