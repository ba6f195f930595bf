"""Level 2: the modules and, inside each, the aten ops it calls, from torch.profiler.

Each hooked run goes under a profiler session of its own, so the plain runs it alternates with carry
no profiler. The run is one profiler range (``layerperf::run``) and each module call one inside it
(``layerperf::<layer>``, torch's C++ range object, :class:`Ranges`), opened and closed by the profiled
modules' own ``forward``s wrapped for the run (:func:`.hooks.forward_wrappers`, which leaves torch's
fast call path alone; global module hooks send every call through the slow one, 2-5% of the run under
the profiler). The profiler stamps the ranges on the clock and thread it stamps the ops with, so a
module's time is its range's, and an op's module is the innermost range holding it in the profiler's
own event tree: exact, with no second clock to map (stamps read from Python on the profiler's clock
were tried, and on a VM whose cores' time-stamp counters disagree they fell up to 3 µs off the ops).
An op layer is an aten op called with no aten op running (``aten::conv2d``, not the
``aten::convolution`` inside it), put under that module: the k-th such call in one module's forward
is ``layer1.0.conv1/aten::conv2d`` (``#k`` from the second call on), its parent that module.

The timed runs carry the profiler's default options. One untimed run records the ops' arguments
(``record_shapes``); an op's FLOPs, integer operations and bytes are level 1's (:mod:`.record`): the op
is replayed once on meta tensors of its recorded shapes, strides and dtypes with its recorded scalar
arguments, under the dispatch mode that counts level 1's modules (:func:`op_cost`), so the profiler's
``with_flops`` (which saves every op's arguments as it runs) is not needed. An op that cannot be
rebuilt (a list of tensors, an argument the profiler did not record) is costed as the ops it called,
or left unknown. A module's own work is on its op rows at this level: its figures stay unknown there,
so nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from layerperf.backends.base import RunPlan
from layerperf.backends.common import interleaved
from layerperf.backends.torch.record import Recorder, Seen
from layerperf.cost.aten import NO_ARITHMETIC
from layerperf.data.profile import Layer, Profile, Run, Span
from layerperf.data.tensor import TensorInfo

if TYPE_CHECKING:
    from layerperf.backends.torch.driver import Session
    from layerperf.collectors import Collectors
    from layerperf.data.metadata import Metadata

MARK = "layerperf::"
RUN_MARK = "layerperf::run"
RETURN_MARK = "layerperf::return"
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
    domain: str = "aten"  # "cuda" for a kernel
    inputs: tuple[TensorInfo, ...] = ()
    event: Any = None  # the profiler's event (an aten op's), for its cost


def _marks(index: dict[int, int] | None) -> tuple[Callable[..., None], Callable[..., None]]:
    """A profiler range per layer call (``layerperf::<layer>``); ``index`` None: layers made as they run.
    The memory pass's marks (:mod:`.memory`)."""
    # torch's C++ range object (0.6 µs a range under the profiler here) rather than the profiler's
    # enter/exit ops, which are dispatcher calls recorded with their arguments (21 µs a range)
    import threading

    import torch

    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    stacks: dict[int, list[tuple[int, Any]]] = {}  # per thread: a range opened on one is closed on it
    names = {i: f"{MARK}{i}" for i in (index or {}).values()}
    get_ident = threading.get_ident

    def name_of(i: int, stack: list[tuple[int, Any]]) -> str:
        # a module called inside its own call (recursion) gets ``layerperf::<layer>#<depth>``: torch's
        # event list folds a range into a parent of the same name when it is that parent's only child
        depth = sum(1 for j, _ in stack if j == i) if stack and stack[-1][0] == i else 0
        if depth:
            return f"{MARK}{i}#{depth}"
        name = names.get(i)
        if name is None:
            name = names[i] = f"{MARK}{i}"
        return name

    if fast is not None:
        def enter(name: str) -> Any:
            r = fast(name)
            r.__enter__()
            return r

        def leave(r: Any) -> None:
            r.__exit__(None, None, None)
    else:
        def enter(name: str) -> Any:
            return torch.ops.profiler._record_function_enter_new(name, None)

        leave = torch.ops.profiler._record_function_exit

    def start(i: int) -> None:
        stack = stacks.setdefault(get_ident(), [])
        stack.append((i, enter(name_of(i, stack))))

    def stop(i: int) -> None:
        stack = stacks.get(get_ident())
        if not stack or stack[-1][0] != i:
            return  # not opened on this thread (or already closed): nothing to close here
        leave(stack.pop()[1])

    return start, stop


def mark_layer(name: str) -> int | None:
    """The layer of a module range's name (``layerperf::12``, ``layerperf::12#1`` for a recursive call);
    None for another name (the run, a return mark, anything else)."""
    if not name.startswith(MARK):
        return None
    rest = name[len(MARK):].partition("#")[0]
    return int(rest) if rest.isdigit() else None


class Ranges:
    """Level 2's boundaries (a collector, see :mod:`layerperf.collectors.boundary`): each run a profiler
    range ``layerperf::run``, each module call a range ``layerperf::<layer>`` inside it (torch's C++
    range object, :func:`_marks`). The profiler stamps them on the clock it stamps the ops with, on the
    same thread, so an op's module is the innermost range holding it: its ancestor in the profiler's
    own event tree, with no clocks to align."""

    def __init__(self, index: dict[int, int] | None = None) -> None:
        import torch

        self.start, self.stop = _marks(index)
        self._range = getattr(torch._C._profiler, "_RecordFunctionFast", torch.autograd.profiler.record_function)
        self._run: list[Any] = []

    def begin_pass(self) -> None:
        r = self._range(RUN_MARK)
        r.__enter__()
        self._run.append(r)

    def end_pass(self) -> None:
        if self._run:
            self._run.pop().__exit__(None, None, None)

    def model_returned(self) -> None:
        """An empty range ``layerperf::return`` where the model returned (a run of a ``with`` block ends
        there or at its last row, whichever is later: its range closes only at the next model call)."""
        r = self._range(RETURN_MARK)
        r.__enter__()
        r.__exit__(None, None, None)


def cpu_marks(events: Any, name: str = RUN_MARK) -> list[Any]:
    """The profiler's events named ``name`` on the CPU, by start: the ranges themselves, not the copies
    that the CUDA activity adds on the GPU's timeline (gpu_user_annotation)."""
    from torch.autograd import DeviceType

    return sorted((e for e in events if e.name == name and e.device_type == DeviceType.CPU),
                  key=lambda e: e.time_range.start)



def _top_ops(events: Any, thread: int | None, lo: float, hi: float) -> list[Any]:
    """The aten ops called with no aten op running, on ``thread`` (None: any), starting within [lo, hi] µs,
    by start."""
    out = []
    for ev in events:
        if not ev.name.startswith("aten::") or thread is not None and ev.thread != thread \
                or not lo <= ev.time_range.start <= hi:
            continue
        up = ev.cpu_parent
        while up is not None and not up.name.startswith("aten::"):
            up = up.cpu_parent
        if up is None:
            out.append(ev)
    out.sort(key=lambda e: e.time_range.start)
    return out


@dataclass(slots=True)
class _Attributed:
    spans: list[tuple[int, int, int, int]]  # (layer, start, dur, tid) of the modules, times from the origin
    ops: list[_Op]


def _layer_of(ev: Any) -> int | None:
    """The layer of the innermost module range holding ``ev`` (its nearest ``layerperf::<layer>`` ancestor)."""
    up = ev.cpu_parent
    while up is not None:
        layer = mark_layer(up.name)
        if layer is not None:
            return layer
        up = up.cpu_parent
    return None


def _ops(events: Any, layers: list[Layer], origin_ns: int, run_ev: Any = None) -> _Attributed:
    """The modules' spans and the op calls of one run (``run_ev``: its ``layerperf::run`` range, default
    the first in ``events``), each op under the innermost module range holding it; times from
    ``origin_ns``."""
    from torch.autograd import DeviceType

    if run_ev is None:
        run_ev = cpu_marks(events)[0]
    lo, hi = run_ev.time_range.start, run_ev.time_range.end
    base = origin_ns - lo * 1000  # profiler ns -> the profile's time
    spans = []
    for e in events:
        layer = mark_layer(e.name) if e.device_type == DeviceType.CPU else None
        if layer is not None and lo <= e.time_range.start <= hi:
            a, b = e.time_range.start * 1000, e.time_range.end * 1000
            spans.append((layer, round(base + a), round(b - a), int(e.thread)))
    spans.sort(key=lambda sp: (sp[1], -sp[2]))
    ops: list[_Op] = []
    counts: dict[tuple[str | None, str], int] = {}
    module_of: dict[int, str | None] = {}
    for ev in _top_ops(events, None, lo, hi):
        i = _layer_of(ev)
        if i is None and ev.thread != run_ev.thread:
            continue  # another thread's op in no module range of this run (autograd's GPU thread runs the
            # backward's ops inside the rows' ranges; anything else there is not the run's)
        module = layers[i].name if i is not None else None
        module_of[id(ev)] = module
        k = counts.get((module, ev.name), 0)
        counts[(module, ev.name)] = k + 1
        key = (f"{module}/{ev.name}" if module else ev.name) + (f"#{k}" if k else "")
        a, b = ev.time_range.start * 1000, ev.time_range.end * 1000
        ops.append(_Op(key, ev.name, module, round(base + a), round(b - a), int(ev.thread),
                       inputs=op_inputs(ev, key), event=ev))
    return _Attributed(spans, ops + _kernel_ops(events, module_of, base / 1000))



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


# the c10 enums torch.profiler records as their integer values
_SCALAR_TYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
                 "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16")
_MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")


def _rebuilt(ev: Any) -> list[list[Any]]:
    """The recorded arguments of one op call, position by position: a tensor as a meta tensor of its
    shape, strides and dtype (a copy of a transposed view moves bytes, of a contiguous one none), a
    scalar or list as recorded, None where the profiler recorded nothing (an absent optional, or what it
    does not keep: a string, a list of tensors' types); [] if a tensor cannot be rebuilt."""
    import torch

    shapes = list(getattr(ev, "input_shapes", None) or [])
    dtypes = list(getattr(ev, "input_dtypes", None) or [])
    strides = list(getattr(ev, "structured_input_strides", None) or [])
    strides += [None] * (len(shapes) - len(strides))
    values = list(getattr(ev, "concrete_inputs", None) or [])
    values += [None] * (len(shapes) - len(values))
    out: list[Any] = []
    for shape, dtype, stride, value in zip(shapes, dtypes, strides, values, strict=False):
        if dtype in ("Scalar", "ScalarList"):
            out.append(value)
        elif dtype in _NOT_TENSORS:
            out.append(None)
        else:
            dt = getattr(torch, _CPP_DTYPES.get(dtype, ""), None)
            if not isinstance(dt, torch.dtype) or not _ints(shape):
                return []
            if _ints(stride) and len(stride) == len(shape):
                out.append(torch.empty_strided(tuple(shape), tuple(stride), dtype=dt, device="meta"))
            else:
                out.append(torch.empty(tuple(shape), dtype=dt, device="meta"))
    return [out] if len(out) == len(shapes) else []


def _ints(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(d, int) for d in value)


def _as(value: Any, arg: Any) -> Any:
    """A recorded value as schema argument ``arg`` takes it (an enum recorded as its integer)."""
    import torch

    kind = str(arg.type).removesuffix("?")
    if kind == "Device":  # not recorded, and the replay runs on meta tensors wherever the op ran
        return torch.device("meta") if value is None and not str(arg.type).endswith("?") else value
    if isinstance(value, int) and not isinstance(value, bool):
        if kind == "ScalarType" and 0 <= value < len(_SCALAR_TYPES):
            return getattr(torch, _SCALAR_TYPES[value])
        if kind == "MemoryFormat" and 0 <= value < len(_MEMORY_FORMATS):
            return getattr(torch, _MEMORY_FORMATS[value])
        if kind == "Layout" and value == 0:
            return torch.strided
    return value


def _replay(ev: Any) -> Seen | None:
    """One op call's work counted as level 1 counts a module's ops (:func:`.record.add_op`): the op run
    once on meta tensors with its recorded arguments, matched to the overload whose schema has as many
    arguments; an argument recorded as nothing takes its default. None if no overload accepts them."""
    import torch

    from layerperf.backends.torch.record import add_op, counting_mode

    packet = getattr(torch.ops.aten, ev.name.removeprefix("aten::"), None)
    rebuilt = _rebuilt(ev)
    if packet is None or not rebuilt:
        return None
    values = rebuilt[0]
    for name in packet.overloads():
        schema = getattr(packet, name)._schema
        if len(schema.arguments) != len(values):
            continue
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for arg, value in zip(schema.arguments, values, strict=True):
            if value is None and arg.has_default_value():
                value = arg.default_value
            (kwargs.__setitem__(arg.name, _as(value, arg)) if arg.kwarg_only else args.append(_as(value, arg)))
        seen = Seen("", "", None)
        try:
            with torch.no_grad(), counting_mode(lambda f, a, k, o, seen=seen: add_op(seen, f, a, k, o)):
                getattr(packet, name)(*args, **kwargs)
        except Exception:  # not this overload, or no meta kernel: the next, or unknown
            continue
        return seen
    return None


ALLOCATORS = frozenset(("empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_"))
# ops that pick their kernel as they run (attention: flash, memory-efficient or the math path): costed as
# the op they called, which the profiler recorded, where it is known; a replay on meta tensors would take
# the math path, whose bytes (the scores materialised) the flash kernel never moves
RUN_TIME_CHOICE = frozenset(("scaled_dot_product_attention",))


@dataclass(frozen=True, slots=True)
class OpCost:
    """An op call's work: FLOPs, integer operations, bytes read and written (None: unknown)."""

    flops: int | None
    int_ops: int | None
    bytes_read: int | None
    bytes_written: int | None


def op_cost(ev: Any) -> OpCost:
    """What one op call did (see the module's docstring): replayed, else the sum of the ops it called
    (each costed so), else unknown — but 0 FLOPs and integer operations for an op that only moves data.
    An op that picks its kernel as it runs (:data:`RUN_TIME_CHOICE`) is the op it called, where known."""
    name = ev.name.removeprefix("aten::")
    called = [c for c in getattr(ev, "cpu_children", None) or [] if c.name.removeprefix("aten::") not in ALLOCATORS]
    if name in RUN_TIME_CHOICE and called:  # the kernel that ran, not the one a replay would choose
        parts = _summed([op_cost(c) for c in called])
        if parts.flops is not None:
            return parts
    seen = _replay(ev)
    if seen is not None:
        return OpCost(seen.flops, seen.int_ops, seen.bytes_read, seen.bytes_written)
    if name in NO_ARITHMETIC:  # moves data in its own kernel; what it moved is not recorded (a list of tensors)
        return OpCost(0, 0, None, None)
    if called:
        return _summed([op_cost(c) for c in called])
    return OpCost(None, None, None, None)


def _summed(parts: list[OpCost]) -> OpCost:
    """The parts' work added up, each figure unknown where any part's is."""
    return OpCost(*(None if any(getattr(p, f) is None for p in parts) else sum(getattr(p, f) for p in parts)
                    for f in ("flops", "int_ops", "bytes_read", "bytes_written")))


def _kernel_ops(events: Any, module_of: dict[int, str | None], base_us: float) -> list[_Op]:
    """On a GPU (none on the CPU): each kernel under the module of the op that launched it (the op called
    with no aten op running that it descends from), as an op layer ``module/kernel`` whose op type is
    the kernel's name (see backends/torch/cuda.py)."""
    from layerperf.backends.torch.cuda import kernels

    def find(ev: Any) -> str | None:
        while ev is not None:
            if id(ev) in module_of:
                return module_of[id(ev)]
            ev = ev.cpu_parent
        return None

    out: list[_Op] = []
    counts: dict[tuple[str | None, str], int] = {}
    for k in kernels(events, find):
        n = counts.get((k.module, k.name), 0)
        counts[(k.module, k.name)] = n + 1
        key = (f"{k.module}/{k.name}" if k.module else k.name) + (f"#{n}" if n else "")
        out.append(_Op(key, k.name, k.module, round((base_us + k.start_us) * 1000), round(k.dur_us * 1000), k.stream,
                       "cuda"))
    return out


def profile_ops(session: Session, rec: Recorder, layers: list[Layer], plan: RunPlan, collectors: Collectors,
                meta: Metadata, device: str = "cpu") -> Profile:
    """The level-2 profile: one untimed run recording the ops' shapes, then hooked runs each under
    torch.profiler, plain runs between them; on a GPU (``device`` "cuda") the kernels too, each under
    its module."""
    from layerperf.backends.torch import driver

    run = Level2Run(session, session.index(rec), device)
    described = run(shapes=True)
    timed: list[Recorded] = []
    progress = collectors.progress
    done = (lambda n: progress("profiled runs (level 2)", n, plan.runs)) if progress else None
    plain, _ = interleaved(session.call if plan.latency else None, lambda: timed.append(run()), plan.runs, done=done,
                           between=plan.between_runs)
    wall = [got.dur_ns for got in timed]
    cpu = [got.cpu_ns for got in timed if got.cpu_ns is not None]  # a level-2 run of the CLI always reads it
    all_layers, runs, notes = _assemble(layers, timed, [described])
    loaded = session.model
    # cost nesting stays "inclusive": a module's work is all on the op rows under it (its own figures
    # unknown), so totals count the rows that are no parent
    return Profile(metadata=meta, layers=all_layers, runs=runs, latency_ns=plain.wall_ns,
                   profiled_latency_ns=wall if plain.wall_ns else [], latency_cpu_ns=plain.cpu_ns,
                   profiled_cpu_ns=cpu if plain.cpu_ns else [], graph=driver.graph_summary(loaded, rec),
                   measurement=driver.measurement(loaded, plan, bool(plain.wall_ns)),
                   warnings=[*driver.warnings(loaded, rec), LEVEL2_NOTE, *notes])


@dataclass(slots=True)
class Recorded:
    """One level-2 run as recorded: its start and duration (ns; the start on the profile's clock), the
    calling thread's CPU time in it, the profiler's events, whether the profiler recorded the ops'
    shapes in it, and its ``layerperf::run`` range (None: the first in ``events``)."""

    start_ns: int
    dur_ns: int
    cpu_ns: int | None  # None where not measured (an in-code run)
    events: Any
    shapes: bool
    run_ev: Any = None


class Level2Run:
    """One level-2 run of a session's model per call: under a torch.profiler session of its own (on a
    GPU with the device activity), the profiled modules' forwards wrapped to open a profiler range
    each (:class:`Ranges`). ``shapes``: the profiler records each op's arguments (``record_shapes``),
    which costs the run 3-5% more (benchmarks/torch_overhead.py: torch.profiler's default against
    record_shapes), so level 2 does it in one untimed run only."""

    def __init__(self, session: Session, index: dict[int, int], device: str = "cpu") -> None:
        from layerperf.backends.torch.profiler import activities

        self.session = session
        self.targets = session.targets(index)
        self.ranges = Ranges(index)
        self.activities = activities(device)

    def __call__(self, *, shapes: bool = False) -> Recorded:
        from layerperf.backends.torch.hooks import forward_wrappers
        from layerperf.backends.torch.profiler import Session as torch_profile
        from layerperf.backends.torch.profiler import events_with_links

        ranges = self.ranges
        with torch_profile(activities=self.activities, record_shapes=shapes) as prof, \
                forward_wrappers(self.targets, ranges.start, ranges.stop):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            ranges.begin_pass()
            try:
                self.session.call()
            finally:
                ranges.end_pass()
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        return Recorded(t0, t1 - t0, c1 - c0, events_with_links(prof), shapes)


def _assemble(modules: list[Layer], timed: list[Recorded],
              described: list[Recorded] = ()) -> tuple[list[Layer], list[Run], list[str]]:  # type: ignore[assignment]
    """The layers (modules, then op rows as first seen) and runs of a level-2 profile from its ``timed``
    runs; an op row's inputs and work from the first run that recorded shapes (``described`` runs
    first, which are not among the profile's runs), unknown for an op no such run called. With
    warnings on what could not be placed or costed."""
    origin = timed[0].start_ns if timed else 0
    layers = [replace(m, flops=None, bytes_read=None, bytes_written=None, int_ops=None) for m in modules]
    shaped: dict[str, _Op] = {}
    for rec in described:
        for op in _ops(rec.events, modules, 0, rec.run_ev).ops:
            shaped.setdefault(op.key, op)
    op_index: dict[str, int] = {}
    runs = []
    unknown: set[str] = set()
    undescribed = 0
    for rec in timed:
        got = _ops(rec.events, modules, rec.start_ns - origin, rec.run_ev)
        spans = [Span(i, s, d, tid) for i, s, d, tid in got.spans]
        if rec.shapes:
            for op in got.ops:
                shaped.setdefault(op.key, op)
        for op in got.ops:
            i = op_index.get(op.key)
            if i is None:
                i = op_index[op.key] = len(layers)
                info = shaped.get(op.key)
                cost = OpCost(None, None, None, None)
                if info is not None and info.event is not None:
                    cost = op_cost(info.event)
                    if cost.flops is None or cost.int_ops is None:
                        unknown.add(op.op)
                elif op.domain == "aten":
                    undescribed += 1
                layers.append(Layer(name=op.key, op_type=op.op, domain=op.domain,
                                    provider="cuda" if op.domain == "cuda" else "cpu", flops=cost.flops,
                                    int_ops=cost.int_ops, bytes_read=cost.bytes_read,
                                    bytes_written=cost.bytes_written,
                                    inputs=info.inputs if info is not None else (), parent=op.parent))
            spans.append(Span(i, op.start_ns, op.dur_ns, op.tid))
        spans.sort(key=lambda s: s.start_ns)
        runs.append(Run(rec.start_ns - origin, rec.dur_ns, spans))
    # a module with no op row and no module inside it ran no aten op (an Identity, a Dropout in eval):
    # its work is 0, counted, where a module with rows has its work on them
    holders = {layer.parent for layer in layers if layer.parent is not None}
    for k, m in enumerate(modules):
        if m.name not in holders:
            layers[k] = replace(layers[k], flops=0, int_ops=0, bytes_read=0, bytes_written=0)
    notes = []
    if unknown:
        notes.append("level 2: FLOPs or integer operations unknown for aten ops whose recorded arguments could not "
                     f"be replayed nor their parts costed: {', '.join(sorted(unknown))}")
    if undescribed:
        notes.append(f"level 2: {undescribed} op row(s) did not run in the run that recorded shapes (the model "
                     "took another path): their inputs and work are unknown")
    return layers, runs, notes
