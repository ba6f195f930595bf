"""Level 2's op rows: from the profiler's events of a run, each aten op called with no aten op running
(``aten::conv2d``, not the ``aten::convolution`` inside it) put under the innermost module range
holding it (:mod:`.ranges`), and on a GPU each kernel under the module of the op that launched it;
then the layers and runs of a level-2 profile from its runs (:func:`assemble`).

The k-th such call in one module's forward is ``layer1.0.conv1/aten::conv2d`` (``#k`` from the second
call on), its parent that module. An op row's inputs and work come from a run that recorded the ops'
arguments (:mod:`.op_replay`). A module's own work is on its op rows at this level: its figures stay
unknown there, so nothing is counted twice. Both the backend's level 2 (:mod:`.level2`) and
:mod:`layerperf.torch` at level 2 make their rows here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from layerperf.backends.torch.cuda import kernels
from layerperf.backends.torch.op_replay import OpCost, op_cost, op_inputs
from layerperf.backends.torch.ranges import cpu_marks, mark_layer
from layerperf.data.profile import Layer, Run, Span
from layerperf.data.tensor import TensorInfo

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


def attributed(events: Any, layers: list[Layer], origin_ns: int, run_ev: Any = None) -> _Attributed:
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
    return _Attributed(spans, ops + kernel_ops(events, module_of, base / 1000))


def kernel_ops(events: Any, module_of: dict[int, str | None], base_us: float) -> list[_Op]:
    """On a GPU (none on the CPU): each kernel under the module of the op that launched it (the op called
    with no aten op running that it descends from), as an op layer ``module/kernel`` whose op type is
    the kernel's name (see backends/torch/cuda.py)."""
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


def assemble(modules: list[Layer], timed: list[Recorded],
             described: Sequence[Recorded] = ()) -> tuple[list[Layer], list[Run], list[str]]:
    """The layers (modules, then op rows as first seen) and runs of a level-2 profile from its ``timed``
    runs; an op row's inputs and work from the first run that recorded shapes (``described`` runs
    first, which are not among the profile's runs), unknown for an op no such run called. With its
    warnings: level 2's note (:data:`LEVEL2_NOTE`), then what could not be placed or costed."""
    origin = timed[0].start_ns if timed else 0
    layers = [replace(m, flops=None, bytes_read=None, bytes_written=None, int_ops=None) for m in modules]
    shaped: dict[str, _Op] = {}
    for rec in described:
        for op in attributed(rec.events, modules, 0, rec.run_ev).ops:
            shaped.setdefault(op.key, op)
    op_index: dict[str, int] = {}
    runs = []
    unknown: set[str] = set()
    undescribed = 0
    for rec in timed:
        got = attributed(rec.events, modules, rec.start_ns - origin, rec.run_ev)
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
    notes = [LEVEL2_NOTE]
    if unknown:
        notes.append("level 2: FLOPs or integer operations unknown for aten ops whose recorded arguments could not "
                     f"be replayed nor their parts costed: {', '.join(sorted(unknown))}")
    if undescribed:
        notes.append(f"level 2: {undescribed} op row(s) did not run in the run that recorded shapes (the model "
                     "took another path): their inputs and work are unknown")
    return layers, runs, notes
