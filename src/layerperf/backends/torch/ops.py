"""Level 2: the modules and, inside each, the aten ops it calls, from torch.profiler.

Each hooked run goes under a profiler session of its own, so the plain runs it alternates with carry
no profiler. A module's forward is timed as at level 1, at its boundaries, but on the profiler's own
clock (``torch._C._profiler._get_approximate_time``), and the run is one profiler range
(``layerperf::run``) with an empty range at each end read on both clocks: the two map the hooks'
times onto the profiler's (:class:`Stamps`, :func:`clock_map`). An op layer is an aten op called with
no aten op running (``aten::conv2d``, not the ``aten::convolution`` inside it), put under the innermost
module whose forward was running then: the k-th such call in one module's forward is
``layer1.0.conv1/aten::conv2d`` (``#k`` from the second call on), its parent that module.

Marking the modules as profiler ranges instead (as the memory pass does) would attribute ops with no
clocks to align, but a range per module call under the profiler cost level 2 more than torch.profiler
itself (see benchmarks/torch_overhead.py); the hooks are each profiled module's own ``forward``
wrapped for the run (:func:`.hooks.forward_wrappers`), which leaves torch's fast call path alone.

The map is checked against the ops themselves: a module boundary falls between two op calls, never
inside one, so the small offset left by the tick readings is pinned to the range where every
boundary does (:func:`_refine`); an op call a boundary still cuts is counted in the profile's warnings.

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
from typing import TYPE_CHECKING, Any, NamedTuple

from layerperf.backends.base import RunPlan
from layerperf.backends.torch.record import NO_ARITHMETIC, Recorder, Seen
from layerperf.profile_data import Layer, Profile, Run, Span
from layerperf.tensor import TensorInfo

if TYPE_CHECKING:
    from layerperf.backends.torch.driver import Session
    from layerperf.collectors import Collectors

MARK = "layerperf::"
RUN_MARK = "layerperf::run"
TICK_MARK = "layerperf::tick"
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


def profiler_clock() -> Callable[[], int]:
    """The clock torch.profiler stamps its events with (the CPU's time-stamp counter where it has one),
    read from Python; ``time.perf_counter_ns`` on a torch without it (the map is linear either way)."""
    import torch

    return getattr(torch._C._profiler, "_get_approximate_time", time.perf_counter_ns)


class Stamps:
    """Level 2's boundaries: the profiler's clock at every module's start and stop (a :class:`Timing`
    collector on it), and each run a profiler range (``layerperf::run``) holding, at its start and at
    its end, an empty range (``layerperf::tick``) read on the hooks' clock just before and just after:
    each tick is known on both clocks within the time between those reads (0.5-8 µs here), and two
    ticks map one clock onto the other (:func:`clock_map`), the map's error anywhere within the sum of
    their half-widths."""

    def __init__(self) -> None:
        import torch

        from layerperf.collectors.timing import Timing

        self.clock = profiler_clock()
        self.timing = Timing(self.clock)
        self.start, self.stop = self.timing.start, self.timing.stop
        # torch's C++ range object: stamped within a microsecond of the reads beside it; the profiler's
        # enter/exit ops (record_function) go through the dispatcher, 10-20 µs a call here
        self._range = getattr(torch._C._profiler, "_RecordFunctionFast", torch.autograd.profiler.record_function)
        self._run: list[Any] = []
        self.ticks: list[Ticks] = []
        self._first = (0.0, 0.0)

    def _tick(self) -> tuple[float, float]:
        """(midpoint, half-width) of the reads around an empty range, on the hooks' clock."""
        clock, r = self.clock, self._range(TICK_MARK)
        a = clock()
        r.__enter__()
        r.__exit__(None, None, None)
        b = clock()
        return (a + b) / 2, (b - a) / 2

    def begin_pass(self) -> None:
        r = self._range(RUN_MARK)
        r.__enter__()  # the profiler's first event on this thread in a session also sets up its queue
        self._run.append(r)
        self._first = self._tick()
        self.timing.begin_pass()

    def end_pass(self) -> None:
        self.timing.end_pass()
        (first, w0), (last, w1) = self._first, self._tick()
        self.ticks.append(Ticks(first, last, w0 + w1))
        self._run.pop().__exit__(None, None, None)

    def passes(self) -> list[tuple[Run, Ticks]]:
        """Each run on the hooks' clock (its start and duration, its modules' spans) with its ticks."""
        return list(zip(self.timing.runs(origin_ns=0), self.ticks, strict=True))


def clock_map(events: Any, ticks: Ticks) -> Callable[[float], float]:
    """Hooks' clock -> profiler time (ns since its trace start), linear through the run's two ticks as
    the profiler recorded them (``events``: the run's) and as the hooks' clock read them (``ticks``)."""
    marks = sorted((e for e in events if e.name == TICK_MARK), key=lambda e: e.time_range.start)
    if len(marks) < 2 or ticks.last <= ticks.first:
        raise ValueError("a level-2 run without its two ticks")
    p0, p1 = ((m.time_range.start + m.time_range.end) * 500 for m in (marks[0], marks[-1]))
    scale = (p1 - p0) / (ticks.last - ticks.first)
    a0 = ticks.first
    return lambda a: p0 + (a - a0) * scale


def _top_ops(events: Any, thread: int, lo: float, hi: float) -> list[Any]:
    """The aten ops called with no aten op running, on ``thread``, starting within [lo, hi] µs, by start."""
    out = []
    for ev in events:
        if not ev.name.startswith("aten::") or ev.thread != thread or not lo <= ev.time_range.start <= hi:
            continue
        up = ev.cpu_parent
        while up is not None and not up.name.startswith("aten::"):
            up = up.cpu_parent
        if up is None:
            out.append(ev)
    out.sort(key=lambda e: e.time_range.start)
    return out


class Ticks(NamedTuple):
    """A run's two ticks on the hooks' clock (see :class:`Stamps`): their midpoints, and the sum of their
    half-widths (how far the map through them can be off, at most)."""

    first: float
    last: float
    spread: float


MIN_ERROR_NS = 200.0  # the least error :func:`_refine` allows the map, however narrow the ticks


def _gaps(x: Any, starts: Any, ends: Any) -> tuple[Any, Any]:
    """Per boundary ``x``: the shifts [lo, hi] that put it between two op calls (op ``k`` runs from
    ``starts[k]`` to ``ends[k]``, in order, none overlapping): the gap it is in, or for one inside an op
    the gap before or after that op, whichever is nearer."""
    import numpy as np

    n, inf = len(starts), np.inf
    k = np.searchsorted(starts, x, side="right") - 1  # the last op starting at or before x
    kc, k1 = np.clip(k, 0, n - 1), np.clip(k + 1, 0, n - 1)
    prev_end = np.where(k >= 0, ends[kc] - x, -inf)
    next_start = np.where(k + 1 < n, starts[k1] - x, inf)
    inside = (k >= 0) & (x < ends[kc])
    before, after = starts[kc] - x, ends[kc] - x
    to_before = -before <= after
    before_prev = np.where(k - 1 >= 0, ends[np.clip(k - 1, 0, n - 1)] - x, -inf)
    lo = np.where(inside, np.where(to_before, before_prev, after), prev_end)
    hi = np.where(inside, np.where(to_before, before, next_start), next_start)
    return lo, hi


def _refine(bounds: list[float], starts: list[float], ends: list[float],
            error_ns: float = MIN_ERROR_NS) -> tuple[Callable[[float], float], int]:
    """The correction to apply to the module boundaries ``bounds`` (profiler ns, as the ticks mapped
    them, each within ``error_ns``) so that each falls between two op calls: a shift and a tilt (a
    drift across the run, from where in its reads each tick fell), each within the error, the tilt as
    small as places every boundary (tried in 200 steps each way) and the shift in the middle of what
    then does; with how many boundaries no such correction places so (0 then, and the correction none
    where there are any)."""
    import numpy as np

    x = np.asarray(bounds, dtype=float)
    st, en = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    if not len(x) or not len(st):
        return (lambda t: t), 0
    error = max(error_ns, MIN_ERROR_NS)
    mid = float((x.min() + x.max()) / 2)
    half = max(float(x.max() - x.min()) / 2, 1.0)
    steps = 200
    for j in sorted(range(-steps, steps + 1), key=abs):
        tilt = j * error / steps / half  # ns of drift per ns from the middle: at most the error at the ends
        moved = x + tilt * (x - mid)
        lo, hi = _gaps(moved, st, en)
        a, b = max(float(lo.max()), -error), min(float(hi.min()), error)
        if a <= b:
            shift = (a + b) / 2
            return (lambda t, tilt=tilt, shift=shift: t + tilt * (t - mid) + shift), 0
    k = np.searchsorted(st, x, side="right") - 1
    return (lambda t: t), int(np.sum((k >= 0) & (x < en[np.clip(k, 0, len(st) - 1)])))


@dataclass(slots=True)
class _Attributed:
    spans: list[tuple[int, int, int, int]]  # (layer, start, dur, tid) of the modules, times from the origin
    ops: list[_Op]
    cut: int  # op calls a module boundary cuts (the clocks' map could not place every boundary)


def _ops(events: Any, layers: list[Layer], stamped: tuple[Run, Ticks], origin_ns: int) -> _Attributed:
    """The modules' spans and the op calls of one run, each op under its module; times from ``origin_ns``."""
    run, ticks = stamped
    run_ev = next(e for e in events if e.name == RUN_MARK)
    to_prof = clock_map(events, ticks)
    base = origin_ns - run_ev.time_range.start * 1000  # profiler ns -> the profile's time
    tops = _top_ops(events, run_ev.thread, run_ev.time_range.start, run_ev.time_range.end)
    starts = [e.time_range.start * 1000 for e in tops]
    ends = [e.time_range.end * 1000 for e in tops]
    calls = [(s.layer, to_prof(s.start_ns), to_prof(s.start_ns + s.dur_ns)) for s in run.spans]
    error = to_prof(ticks.first + ticks.spread) - to_prof(ticks.first)
    fix, cut = _refine([t for _, t0, t1 in calls for t in (t0, t1)], starts, ends, error)
    calls = sorted(((i, fix(t0), fix(t1)) for i, t0, t1 in calls), key=lambda c: (c[1], -c[2]))
    tid = int(run_ev.thread)
    spans = [(i, round(base + t0), round(t1 - t0), tid) for i, t0, t1 in calls]
    ops: list[_Op] = []
    counts: dict[tuple[str | None, str], int] = {}
    module_of: dict[int, str | None] = {}
    open_: list[tuple[int, float, float]] = []
    nxt = 0
    for ev, a, b in zip(tops, starts, ends, strict=True):
        mid = (a + b) / 2
        while nxt < len(calls) and calls[nxt][1] <= mid:
            while open_ and open_[-1][2] < calls[nxt][1]:
                open_.pop()
            open_.append(calls[nxt])
            nxt += 1
        while open_ and open_[-1][2] < mid:
            open_.pop()
        module = layers[open_[-1][0]].name if open_ else None
        module_of[id(ev)] = module
        k = counts.get((module, ev.name), 0)
        counts[(module, ev.name)] = k + 1
        key = (f"{module}/{ev.name}" if module else ev.name) + (f"#{k}" if k else "")
        ops.append(_Op(key, ev.name, module, round(base + a), round(b - a), int(ev.thread),
                       inputs=op_inputs(ev, key), event=ev))
    return _Attributed(spans, ops + _kernel_ops(events, module_of, base / 1000), cut)


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


@dataclass(frozen=True, slots=True)
class OpCost:
    """An op call's work: FLOPs, integer operations, bytes read and written (None: unknown)."""

    flops: int | None
    int_ops: int | None
    bytes_read: int | None
    bytes_written: int | None


def op_cost(ev: Any) -> OpCost:
    """What one op call did (see the module's docstring): replayed, else the sum of the ops it called
    (each costed so), else unknown — but 0 FLOPs and integer operations for an op that only moves data."""
    seen = _replay(ev)
    if seen is not None:
        return OpCost(seen.flops, seen.int_ops, seen.bytes_read, seen.bytes_written)
    children = list(getattr(ev, "cpu_children", None) or [])
    if children:
        parts = [op_cost(c) for c in children]
        return OpCost(*(None if any(getattr(p, f) is None for p in parts) else sum(getattr(p, f) for p in parts)
                        for f in ("flops", "int_ops", "bytes_read", "bytes_written")))
    if ev.name.removeprefix("aten::") in NO_ARITHMETIC:
        return OpCost(0, 0, None, None)
    return OpCost(None, None, None, None)


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
                meta: dict[str, Any], device: str = "cpu") -> Profile:
    """The level-2 profile: one untimed run recording the ops' shapes, then hooked runs each under
    torch.profiler, plain runs between them; on a GPU (``device`` "cuda") the kernels too, each under
    its module."""
    from layerperf.backends.interleave import Timings
    from layerperf.backends.torch import driver

    run = Level2Run(session, session.index(rec), device)
    described = run(shapes=True)
    plain, wall, cpu = Timings(), [], []
    timed: list[Recorded] = []
    for r in range(plan.runs):
        if plan.latency:
            plain.take(session.call, 1, time.perf_counter_ns, time.thread_time_ns)
        got = run()
        assert got.cpu_ns is not None
        cpu.append(got.cpu_ns)
        wall.append(got.dur_ns)
        timed.append(got)
        if collectors.progress:
            collectors.progress("profiled runs (level 2)", r + 1, plan.runs)
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
    calling thread's CPU time in it, the profiler's events, its :class:`Stamps` (the run on the hooks'
    clock, its ticks), and whether the profiler recorded the ops' shapes in it."""

    start_ns: int
    dur_ns: int
    cpu_ns: int | None  # None where not measured (an in-code run)
    events: Any
    stamped: tuple[Run, Ticks]
    shapes: bool


class Level2Run:
    """One level-2 run of a session's model per call: under a torch.profiler session of its own (on a
    GPU with the device activity), the profiled modules' forwards wrapped to read :class:`Stamps` at
    their boundaries. ``shapes``: the profiler records each op's arguments (``record_shapes``), which
    costs the run 3-5% more (benchmarks/torch_overhead.py: torch.profiler's default against
    record_shapes), so level 2 does it in one untimed run only."""

    def __init__(self, session: Session, index: dict[int, int], device: str = "cpu") -> None:
        from torch.profiler import ProfilerActivity

        self.session = session
        self.targets = session.targets(index)
        self.stamps = Stamps()
        self.activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device == "cuda" else [])]

    def __call__(self, *, shapes: bool = False) -> Recorded:
        from layerperf.backends.torch.hooks import forward_wrappers
        from layerperf.backends.torch.profiler import Session as torch_profile

        stamps = self.stamps
        with torch_profile(activities=self.activities, record_shapes=shapes) as prof, \
                forward_wrappers(self.targets, stamps.start, stamps.stop):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            stamps.begin_pass()
            self.session.call()
            stamps.end_pass()
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        return Recorded(t0, t1 - t0, c1 - c0, prof.events(), (stamps.timing.last_run(), stamps.ticks[-1]), shapes)


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
        for op in _ops(rec.events, modules, rec.stamped, 0).ops:
            shaped.setdefault(op.key, op)
    op_index: dict[str, int] = {}
    runs, cut, calls = [], 0, 0
    unknown: set[str] = set()
    undescribed = 0
    for rec in timed:
        got = _ops(rec.events, modules, rec.stamped, rec.start_ns - origin)
        cut += got.cut
        calls += len(got.ops)
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
    notes = []
    if unknown:
        notes.append("level 2: FLOPs or integer operations unknown for aten ops whose recorded arguments could not "
                     f"be replayed nor their parts costed: {', '.join(sorted(unknown))}")
    if undescribed:
        notes.append(f"level 2: {undescribed} op row(s) did not run in the run that recorded shapes (the model "
                     "took another path): their inputs and work are unknown")
    if cut:
        notes.append(f"level 2: {cut} module boundar{'y' if cut == 1 else 'ies'} fell inside an op call on the "
                     f"profiler's clock (of {calls} op calls): those ops are under the module running at their "
                     "midpoint")
    return layers, runs, notes
