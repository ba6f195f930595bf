"""One profile on PyTorch, start to end: the model and its inputs, one recorded pass (layers, shapes,
FLOPs), warm-up, hooked runs alternating with plain ones, then counters and memory through the
collector driver at the same module boundaries."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from layerperf import cost as cost_model
from layerperf.backends.base import RunPlan
from layerperf.backends.common import CORE_PLAN_FIELDS, RunTimes, interleaved, profile_metadata, unknown_flops_warnings
from layerperf.backends.torch import TorchOptions
from layerperf.backends.torch.hooks import module_hooks
from layerperf.backends.torch.models import TorchModel, forward_failed, load
from layerperf.backends.torch.record import Recorder, Seen, record
from layerperf.collectors.timer import Timing
from layerperf.data.metadata import Metadata
from layerperf.data.profile import CostNesting, GraphSummary, Layer, Measurement, Profile

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
        from layerperf.backends.torch import cuda as on_gpu

        loaded = on_gpu.to_device(loaded, "cuda")
    session = Session(loaded, synchronize=cuda)
    rec = session.record()
    weights = frozenset(i.name for i in loaded.onnx.graph.initializer) if loaded.onnx is not None else frozenset()
    layers = layers_from(rec, weights, "cuda" if cuda else "cpu")
    index = session.index(rec)
    for _ in range(plan.warmup):
        session.call()
    if options.level == 2:
        if collectors.counters or collectors.memory:
            from layerperf.errors import InputError

            raise InputError("perf counters and the memory profile run at --level 1 (modules) only")
        from layerperf.backends.torch.ops import profile_ops

        return profile_ops(session, rec, layers, plan, collectors, _metadata(loaded, plan, options),
                           options.torch_device)
    if cuda:
        device_timing, plain = on_gpu.timed_runs(session, index, plan, collectors.progress)
        runs = device_timing.runs()
        on_gpu.fill_memory(layers, on_gpu.allocator_pass(session, index))
    else:
        timing, plain = timed_runs(session, index, plan, collectors.progress)
        runs = timing.runs()
    prof = Profile(
        metadata=_metadata(loaded, plan, options), layers=layers, runs=runs, latency_ns=plain.wall_ns,
        profiled_latency_ns=[r.dur_ns for r in runs] if plain.wall_ns else [],
        latency_cpu_ns=plain.cpu_ns, profiled_cpu_ns=session.cpu_ns if plain.cpu_ns else [],
        graph=graph_summary(loaded, rec), measurement=measurement(loaded, plan, bool(plain.wall_ns)),
        warnings=warnings(loaded, rec), cost_nesting=CostNesting.SELF)
    if collectors.counters or collectors.memory:
        collectors.driver(len(layers)).run(lambda c: session.hooked_pass(index, c)).fill(prof)
    if collectors.memory:  # what torch's allocator did, per module: one more pass under torch.profiler
        from layerperf.backends.torch.memory import allocation_report

        prof.memory = allocation_report(session.call, index, prof, on_gpu.device_name("cuda") if cuda else "cpu")
    return prof


class Session:
    """The model, its inputs, and the calls the profile makes of it (in inference mode)."""

    def __init__(self, model: TorchModel, *, synchronize: bool = False) -> None:
        self.model = model
        self.cpu_ns: list[int] = []
        self.synchronize = synchronize  # on a GPU: a call returns once the device has finished it

    def call(self) -> Any:
        import torch

        with torch.inference_mode():
            out = self.model.module(*self.model.args, **self.model.kwargs)
        if self.synchronize:
            torch.cuda.synchronize()
        return out

    def record(self) -> Recorder:
        try:
            return record(self.model, self.call)
        except Exception as exc:  # the model's own forward: torch's message, in one line
            raise forward_failed(exc, self.model) from None

    def index(self, rec: Recorder) -> dict[int, int]:
        return dict(rec.order)

    def targets(self, index: dict[int, int]) -> list[tuple[Any, int]]:
        """The profiled modules (``index``: module id -> layer) with their layers, the model's own included."""
        return [(m, index[id(m)]) for m in self.model.module.modules() if id(m) in index]

    def hooked_pass(self, index: dict[int, int], collector: Collector,
                    context: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        """One call with ``collector`` at every module's boundaries."""
        with module_hooks(index, collector.start, collector.stop), context():
            collector.begin_pass()
            self.call()
            collector.end_pass()


def timed_runs(session: Session, index: dict[int, int], plan: RunPlan,
               progress: Callable[[str, int, int], None] | None) -> tuple[Timing, RunTimes]:
    """``plan.runs`` hooked passes timed by the timing collector; with ``plan.latency`` a plain call
    before each (the profiler-off latency, see backends/common)."""
    timing = Timing()
    return timing, hooked_runs(session, index, plan, timing, session.call, progress, "profiled runs",
                               between=plan.between_runs)


def hooked_runs(session: Session, index: dict[int, int], plan: RunPlan, collector: Collector,
                plain_call: Callable[[], Any], progress: Callable[[str, int, int], None] | None,
                label: str, between: Callable[[int], None] | None = None) -> RunTimes:
    """``plan.runs`` passes with ``collector`` at the module boundaries, each after a ``plain_call()``
    timed with no hook installed when ``plan.latency`` (:func:`layerperf.backends.common.interleaved`);
    the plain times. The calling thread's CPU time of each hooked pass goes to ``session.cpu_ns``.
    ``between``: the run plan's hook between runs, for the timed runs only."""
    done = (lambda n: progress(label, n, plan.runs)) if progress else None
    plain, hooked = interleaved(plain_call if plan.latency else None, lambda: session.hooked_pass(index, collector),
                                plan.runs, done=done, between=between)
    session.cpu_ns = hooked.cpu_ns
    return plain


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


def graph_summary(model: TorchModel, rec: Recorder) -> GraphSummary:
    from layerperf.backends.torch.record import _input_names

    params = {name: p.numel() * p.element_size() for name, p in model.module.named_parameters()}
    tops = [s for s in rec.seen if s.parent is None]
    outputs = tuple(t.name for t in tops[-1].outputs) if tops else ()
    return GraphSummary(tuple(n for n, _ in _input_names(model)), outputs, params)


def measurement(model: TorchModel, plan: RunPlan, interleaved: bool) -> Measurement:
    import torch

    from layerperf.backends.torch.record import _input_names

    inputs = [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
              for n, t in _input_names(model) if isinstance(t, torch.Tensor)]
    return Measurement(latency="interleaved" if interleaved else "off", block_runs=1 if interleaved else None,
                       intra_op_threads=torch.get_num_threads(),
                       intra_op_threads_source="set" if plan.threads else "torch default", inputs=inputs)


def warnings(model: TorchModel, rec: Recorder) -> list[str]:
    onnx_unknown = (s.op_type for s in rec.seen
                    if s.domain is not None and not cost_model.covers(s.domain, s.op_type))
    return [*model.warnings, *unknown_flops_warnings(onnx_unknown),
            *unknown_ops_warnings([s for s in rec.seen if s.domain is None])]


def unknown_ops_warnings(seen: list[Seen]) -> list[str]:
    """The aten ops that made a row's FLOPs or integer operations unknown (no flop_counter formula)."""
    out = unknown_flops_warnings((op for s in seen for op in s.unknown_ops),
                                 "aten ops (no formula in torch.utils.flop_counter nor in layerperf's cost model)")
    unknown_int = sorted({op for s in seen for op in s.unknown_int_ops})
    if unknown_int:
        out.append("integer operations unknown for aten ops on integer tensors (no torch.utils.flop_counter "
                   f"formula): {', '.join(unknown_int)}")
    return out


def _metadata(model: TorchModel, plan: RunPlan, options: TorchOptions) -> Metadata:
    import torch

    return profile_metadata(model.description, plan, "torch", torch.__version__, options.torch_device, options,
                            plan_fields=CORE_PLAN_FIELDS, omit=("torch_device",))
