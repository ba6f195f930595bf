"""Level 2: the modules and, inside each, the aten ops it calls, from torch.profiler
(``record_shapes=True, with_flops=True``).

Each hooked run goes under a profiler session of its own, so the plain runs it alternates with carry
no profiler. The hooks mark each module's forward with a profiler range (``layerperf::<layer>``), so
modules and ops come from one clock, and an op's module is the range it was recorded under
(``cpu_parent``). An op layer is the k-th call of one aten op directly inside one module's forward:
``layer1.0.conv1/aten::conv2d`` (``#k`` from the second call on), its parent that module; its
FLOPs are the profiler's over the op's whole call tree (None where the profiler knows no formula for
an op that computes). A module's own work is on its op rows at this level: its FLOPs and bytes stay
unknown there, so nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from layerperf.backends.base import RunPlan
from layerperf.backends.torch.record import NO_ARITHMETIC, Recorder
from layerperf.profile_data import Layer, Profile, Run, Span
from layerperf.tensor import TensorInfo, is_float_dtype, is_integer_dtype

if TYPE_CHECKING:
    from layerperf.backends.torch.driver import Session
    from layerperf.collectors import Collectors

MARK = "layerperf::"
RUN_MARK = "layerperf::run"
LEVEL2_NOTE = ("level 2: a module's own work is on its aten op rows; its FLOPs, integer operations and bytes are "
               "left unknown so nothing counts twice")


@dataclass(slots=True)
class _Op:
    key: str
    op: str
    parent: str | None
    start_ns: int
    dur_ns: int
    tid: int
    flops: int | None
    domain: str = "aten"  # "cuda" for a kernel
    inputs: tuple[TensorInfo, ...] = ()
    int_ops: int | None = None


def _marks(index: dict[int, int] | None) -> tuple[Callable[..., None], Callable[..., None]]:
    """A profiler range per layer call (``layerperf::<layer>``); ``index`` None: layers made as they run."""
    import torch

    # torch's C++ range object (0.6 µs a range under the profiler here) rather than the profiler's
    # enter/exit ops, which are dispatcher calls recorded with their arguments (21 µs a range)
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    stack: list[Any] = []
    names = {i: f"{MARK}{i}" for i in (index or {}).values()}

    def name_of(i: int) -> str:
        name = names.get(i)
        if name is None:
            name = names[i] = f"{MARK}{i}"
        return name

    if fast is not None:
        def start(i: int) -> None:
            r = fast(name_of(i))
            r.__enter__()
            stack.append(r)

        def stop(i: int) -> None:
            stack.pop().__exit__(None, None, None)

        return start, stop
    enter, leave = torch.ops.profiler._record_function_enter_new, torch.ops.profiler._record_function_exit

    def start_op(i: int) -> None:
        stack.append(enter(name_of(i), None))

    def stop_op(i: int) -> None:
        leave(stack.pop())

    return start_op, stop_op


def _subtree_flops(ev: Any) -> int:
    return int(ev.flops or 0) + sum(_subtree_flops(c) for c in ev.cpu_children)


def _ops(events: Any, layers: list[Layer], origin_ns: int) -> tuple[list[tuple[int, int, int, int]], list[_Op]]:
    """Module spans (layer, start, dur, tid) and op calls of one run, times from ``origin_ns``."""
    run = next(e for e in events if e.name == RUN_MARK)
    base = origin_ns - int(run.time_range.start * 1000)
    spans, ops = [], []
    counts: dict[tuple[str | None, str], int] = {}
    for ev in events:
        start, dur = base + int(ev.time_range.start * 1000), int((ev.time_range.end - ev.time_range.start) * 1000)
        if ev.name.startswith(MARK) and ev.name != RUN_MARK:
            spans.append((int(ev.name[len(MARK):]), start, dur, int(ev.thread)))
            continue
        parent = ev.cpu_parent
        if parent is None or not parent.name.startswith(MARK) or not ev.name.startswith("aten::"):
            continue
        module = None if parent.name == RUN_MARK else layers[int(parent.name[len(MARK):])].name
        k = counts.get((module, ev.name), 0)
        counts[(module, ev.name)] = k + 1
        key = f"{module}/{ev.name}" if module else ev.name
        key += f"#{k}" if k else ""
        inputs = op_inputs(ev, key)
        flops, int_ops = _work(ev, inputs)
        ops.append(_Op(key, ev.name, module, start, dur, int(ev.thread), flops, inputs=inputs, int_ops=int_ops))
    return spans, ops + _kernel_ops(events, layers, base)


# torch.profiler names an argument's element type by its C++ name (``input_dtypes``)
_CPP_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "int": "int32", "long int": "int64",
    "long": "int64", "bool": "bool", "unsigned short": "uint16", "unsigned int": "uint32",
    "unsigned long": "uint64", "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
}
_NOT_TENSORS = frozenset(("", "Scalar", "ScalarList", "TensorList", "GenericList", "None"))


def op_inputs(ev: Any, key: str) -> tuple[TensorInfo, ...]:
    """An op call's tensor arguments as the profiler recorded them (``record_shapes``: ``input_shapes``
    and ``input_dtypes``), named ``<row>:in<k>`` by position; scalars and lists are left out. A type
    name not known here is kept as the profiler wrote it."""
    shapes = getattr(ev, "input_shapes", None) or []
    dtypes = getattr(ev, "input_dtypes", None) or []
    out = []
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=False)):
        if dtype in _NOT_TENSORS or not isinstance(shape, list | tuple):
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        out.append(TensorInfo(f"{key}:in{k}", tuple(shape), _CPP_DTYPES.get(dtype, dtype)))
    return tuple(out)


def _work(ev: Any, inputs: tuple[TensorInfo, ...]) -> tuple[int | None, int | None]:
    """(FLOPs, integer operations) of one op call: the profiler's count over its call tree, as FLOPs for
    an op with a floating-point tensor argument and as integer operations for one on integer tensors
    only; 0 of both for an op that only moves data; None where the profiler has no formula and the op
    computes, or the arguments' types are not known."""
    counted = _subtree_flops(ev)
    if ev.name.removeprefix("aten::") in NO_ARITHMETIC:
        return counted, 0
    dtypes = [t.dtype for t in inputs]
    integer = bool(dtypes) and all(is_integer_dtype(d) for d in dtypes)
    floating = any(is_float_dtype(d) or d.startswith("complex") for d in dtypes)
    known = counted if counted else None  # the profiler's 0 is "no formula", not a count
    if integer:
        return 0, known if known is not None else _integer_count(ev.name.removeprefix("aten::"), inputs)
    return known, 0 if floating else None


def _integer_count(name: str, inputs: tuple[TensorInfo, ...]) -> int | None:
    """:func:`.record.integer_count` from the recorded inputs: an elementwise op's output is their
    broadcast shape (the profiler records no outputs)."""
    import math

    import numpy as np

    from layerperf.backends.torch.record import INT_ELEMENTWISE, INT_PER_INPUT

    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    shapes = [tuple(d for d in t.shape if isinstance(d, int)) for t in inputs if t.shape is not None]
    if not shapes or [len(x) for x in shapes] != [len(t.shape or ()) for t in inputs]:
        return None  # a dimension not known as a number
    if base in INT_PER_INPUT:
        return math.prod(shapes[0])
    if base in INT_ELEMENTWISE:
        try:
            return math.prod(np.broadcast_shapes(*shapes))
        except ValueError:
            return None
    return None


def _kernel_ops(events: Any, layers: list[Layer], base: int) -> list[_Op]:
    """On a GPU (none on the CPU): each kernel under the module whose op launched it, as an op layer
    ``module/kernel`` whose op type is the kernel's name (see backends/torch/cuda.py)."""
    from layerperf.backends.torch.cuda import kernels, module_of

    out: list[_Op] = []
    counts: dict[tuple[str | None, str], int] = {}
    for k in kernels(events, module_of(MARK, [layer.name for layer in layers])):
        n = counts.get((k.module, k.name), 0)
        counts[(k.module, k.name)] = n + 1
        key = (f"{k.module}/{k.name}" if k.module else k.name) + (f"#{n}" if n else "")
        out.append(_Op(key, k.name, k.module, base + int(k.start_us * 1000), int(k.dur_us * 1000), k.stream, None,
                       "cuda"))
    return out


def profile_ops(session: Session, rec: Recorder, layers: list[Layer], plan: RunPlan, collectors: Collectors,
                meta: dict[str, Any], device: str = "cpu") -> Profile:
    """The level-2 profile: hooked runs each under torch.profiler, plain runs between them; on a GPU
    (``device`` "cuda") the kernels too, each under its module."""
    import torch
    from torch.profiler import ProfilerActivity

    from layerperf.backends.interleave import Timings
    from layerperf.backends.torch import driver
    from layerperf.backends.torch.hooks import module_hooks
    from layerperf.backends.torch.profiler import Session as torch_profile

    index = session.index(rec)
    start, stop = _marks(index)
    plain, wall, cpu = Timings(), [], []
    per_run: list[tuple[int, int, Any]] = []
    for r in range(plan.runs):
        if plan.latency:
            plain.take(session.call, 1, time.perf_counter_ns, time.thread_time_ns)
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device == "cuda" else [])]
        with torch_profile(activities=activities, record_shapes=True, with_flops=True) as prof, \
                module_hooks(index, start, stop):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            with torch.autograd.profiler.record_function(RUN_MARK):
                session.call()
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        wall.append(t1 - t0)
        cpu.append(c1 - c0)
        per_run.append((t0, t1 - t0, prof.events()))
        if collectors.progress:
            collectors.progress("profiled runs (level 2)", r + 1, plan.runs)
    all_layers, runs = _assemble(layers, per_run)
    loaded = session.model
    # cost nesting stays "inclusive": a module's work is all on the op rows under it (its own figures
    # unknown), so totals count the rows that are no parent
    prof_out = Profile(metadata=meta, layers=all_layers, runs=runs, latency_ns=plain.wall_ns,
                       profiled_latency_ns=wall if plain.wall_ns else [], latency_cpu_ns=plain.cpu_ns,
                       profiled_cpu_ns=cpu if plain.cpu_ns else [], graph=driver.graph_summary(loaded, rec),
                       measurement=driver.measurement(loaded, plan, bool(plain.wall_ns)),
                       warnings=[*driver.warnings(loaded, rec), LEVEL2_NOTE])
    return prof_out


def _assemble(modules: list[Layer], per_run: list[tuple[int, int, Any]]) -> tuple[list[Layer], list[Run]]:
    origin = per_run[0][0] if per_run else 0
    layers = [replace(m, flops=None, bytes_read=None, bytes_written=None, int_ops=None) for m in modules]
    op_index: dict[str, int] = {}
    runs = []
    for t0, dur, events in per_run:
        mod_spans, ops = _ops(events, modules, t0 - origin)
        spans = [Span(i, s, d, tid) for i, s, d, tid in mod_spans]
        for op in ops:
            i = op_index.get(op.key)
            if i is None:
                i = op_index[op.key] = len(layers)
                layers.append(Layer(name=op.key, op_type=op.op, domain=op.domain,
                                    provider="cuda" if op.domain == "cuda" else "cpu", flops=op.flops,
                                    int_ops=op.int_ops, inputs=op.inputs, parent=op.parent))
            spans.append(Span(i, op.start_ns, op.dur_ns, op.tid))
        spans.sort(key=lambda s: s.start_ns)
        runs.append(Run(t0 - origin, dur, spans))
    return layers, runs
