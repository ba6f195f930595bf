"""A PyTorch (Kineto) trace's events sorted into CPU events and device activities, a chunk at a time.

What an event becomes — a row (``cpu_op``, a runtime call), a frame, a device activity or nothing — and
its row identity, provider and FLOPs derived from its recorded inputs depend only on its category, name,
device and recorded inputs, which repeat call after call. So each distinct combination is worked out once
(a :class:`_Kind`) and the events of a chunk are handled a column at a time: a million-event trace
costs a few dict lookups and numpy steps per event, not a Python loop with a dozen calls each (7 s).
Row identities are numbered in the order the events first name them, as an event-by-event reading
numbers them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.cost.aten import recorded
from layerperf.data.calls import Interner, TableBuilder, int_id
from layerperf.readers.decode import NOT_OBJECT, Event, KinetoEvent, detached_raw, fields, raw_value
from layerperf.readers.dropped import NOT_A_NUMBER, NOT_EVENT, Dropped, reason
from layerperf.readers.streaming import thread_key
from layerperf.readers.tef import MAX_US, column, floats, shapes_text, text
from layerperf.util.arrays import grown

ROW_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")
V1_CATS = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
           "Memset": "gpu_memset", "Python": "python_function"}
# CPU-side events that take part in nesting without being rows of their own
FRAME_CATS = ("user_annotation", "gpu_user_annotation", "python_function")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
NONE = -1
_SKIP, _DEVICE, _OP, _RUNTIME, _FRAME = range(5)
_UNSET = -2  # a kind whose row identity is not numbered yet (no usable event named it so far)
STEP_PREFIX = "ProfilerStep#"
# an annotation as read: name, whether on the GPU, start and duration in µs, its thread's key (thread_key)
Note = tuple[str, bool, float, float, int]


class Columns:
    """Columns gathered chunk by chunk as numpy arrays; :meth:`column` joins one."""

    NAMES: tuple[tuple[str, Any], ...] = ()

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name, _ in self.NAMES}
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def add(self, **columns: np.ndarray) -> None:
        for name, dtype in self.NAMES:
            self.parts[name].append(np.asarray(columns[name], dtype=dtype))
        self.rows += len(next(iter(columns.values())))

    def column(self, name: str) -> np.ndarray:
        parts = self.parts[name]
        dtype = dict(self.NAMES)[name]
        if len(parts) > 1:
            parts[:] = [np.concatenate(parts)]
        return parts[0] if parts else np.zeros(0, dtype=dtype)

    def clear(self) -> None:
        for parts in self.parts.values():
            parts.clear()
        self.rows = 0


class Cpu(Columns):
    """CPU events (rows and frames), in file order; ``ident`` -1 for a frame."""

    NAMES = (("thread", np.int64), ("ts_us", np.float64), ("dur_us", np.float64), ("ident", np.int64),
             ("is_op", np.bool_), ("flops", np.float64), ("bytes", np.float64), ("external", np.int64),
             ("correlation", np.int64))


class Device(Columns):
    """Device activities, in file order; their name, kind and device are their identity's."""

    NAMES = (("ts_us", np.float64), ("dur_us", np.float64), ("ident", np.int64), ("external", np.int64),
             ("correlation", np.int64), ("pid", np.int64), ("tid", np.int64), ("bytes", np.float64))


@dataclass
class _Kind:
    """What events of one (category, name, device, recorded inputs) are."""

    cls: int
    ident: tuple[str, str, str, str, str] | None  # the row identity, for rows and activities
    name: str
    flops: float = math.nan  # derived from the recorded inputs
    bytes: float = math.nan
    step: bool = False  # a ProfilerStep#N frame
    note: int = 0  # an annotation: 1 on the CPU, 2 on the GPU


def _kind(cat: Any, name_value: Any, device: Any, dims: Any, types: Any, concrete: Any,
          shapes: dict[bytes, str]) -> _Kind:
    """The rules of an event-by-event reading, for one combination (``shapes``: the text of each recorded
    ``Input Dims`` met so far: many ops share them)."""
    try:
        cat = V1_CATS.get(cat, cat)
    except TypeError:  # an unhashable category: nothing this reader reads
        return _Kind(_SKIP, None, text(name_value))
    name = text(name_value)
    if cat in DEVICE_CATS:
        provider = f"GPU {device}" if type(device) is int else "GPU"
        return _Kind(_DEVICE, (name, str(cat), provider, "", ""), name)
    if cat == "cpu_op" and name.startswith(STEP_PREFIX):
        cat = "user_annotation"  # PyTorch 1.8/1.9 recorded the step as an operator
    note = (2 if cat == "gpu_user_annotation" else 1) if cat in ANNOTATION_CATS else 0
    if cat in ROW_CATS:
        kind = _Kind(_OP if cat == "cpu_op" else _RUNTIME,
                     (name, name, "CPU", _shapes(dims, shapes), ""), name, note=note)
    elif cat in FRAME_CATS:
        # a step is the CPU's frame: Kineto copies it onto the GPU's timeline too, where it spans the step's
        # device work only (one more "step" per step, had it counted)
        kind = _Kind(_FRAME, None, name, step=name.startswith(STEP_PREFIX) and cat != "gpu_user_annotation",
                     note=note)
    else:
        return _Kind(_SKIP, None, name, note=note)
    kind.flops, kind.bytes = _derived(name, dims, types, concrete)
    return kind


def _shapes(dims: Any, known: dict[bytes, str]) -> str:
    key = bytes(dims)
    text_ = known.get(key)
    if text_ is None:
        text_ = known[key] = shapes_text(raw_value(dims))
    return text_


def _derived(name: str, dims: Any, types: Any, concrete: Any) -> tuple[float, float]:
    """FLOPs and bytes of an op call from what the trace recorded of its inputs (the cost model's aten
    namespace); NaN where unknown."""
    if not dims or not recorded.costed(name):
        return math.nan, math.nan
    cost = recorded.cost(name, bytes(dims), bytes(types), bytes(concrete))
    return (math.nan if cost.flops is None else float(cost.flops),
            math.nan if cost.bytes is None else float(cost.bytes))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return ("\x00unhashable", repr(value))


class Kinds:
    """Each event's kind, worked out once per distinct combination (see the module's docstring)."""

    def __init__(self) -> None:
        self.kinds: list[_Kind] = []
        self.first: dict[Any, tuple[Any, int]] = {}  # per head: the inputs first seen with it, their kind
        self.full: dict[Any, int] = {}
        self.shapes: dict[bytes, str] = {}  # recorded Input Dims -> their text
        # per kind, as arrays grown by doubling (a trace names a new ProfilerStep#N every step): class,
        # identity code (_UNSET, NONE), derived FLOPs and bytes, whether a step or an annotation
        self._cls = np.zeros(64, dtype=np.int64)
        self._codes = np.zeros(64, dtype=np.int64)
        self._flops = np.zeros(64, dtype=np.float64)
        self._bytes = np.zeros(64, dtype=np.float64)
        self._mark = np.zeros(64, dtype=bool)

    def of(self, heads: list[Any], inputs: list[Any]) -> np.ndarray:
        """Per event (``heads``: (category, name, device); ``inputs``: recorded inputs as raw JSON),
        its kind's index."""
        keys = heads  # what the heads are looked up by; the kinds are made from the heads as they are
        try:
            found = list(map(self.first.get, keys))
        except TypeError:
            keys = [tuple(map(_hashable, h)) for h in heads]
            found = list(map(self.first.get, keys))
        if None in found:
            for i, (h, f) in enumerate(zip(keys, found, strict=True)):
                if f is None:
                    f = self.first.get(h)
                    if f is None:
                        f = self.first[h] = (tuple(map(detached_raw, inputs[i])), self._full(heads[i], inputs[i]))
                    found[i] = f
        known: list[tuple[Any, int]] = found  # type: ignore[assignment]  # every head has one now
        firsts = [f[0] for f in known]
        out = [f[1] for f in known]
        if inputs != firsts:  # one C loop when every event's inputs are its head's first (no list of answers)
            out = [k if ok else self._full(heads[i], inputs[i])
                   for i, (k, ok) in enumerate(zip(out, map(operator.eq, inputs, firsts), strict=True))]
        return np.fromiter(out, dtype=np.int64, count=len(out))

    def _full(self, head: tuple[Any, Any, Any], inputs: tuple[Any, Any, Any]) -> int:
        (cat, name, device), (dims, types, concrete) = head, inputs
        key = (_hashable(cat), _hashable(name), _hashable(device), bytes(dims), bytes(types), bytes(concrete))
        k = self.full.get(key)
        if k is None:
            k = self.full[key] = len(self.kinds)
            kind = _kind(cat, name, device, dims, types, concrete, self.shapes)
            self.kinds.append(kind)
            if k >= self._cls.size:
                for attr in ("_cls", "_codes", "_flops", "_bytes", "_mark"):
                    old = getattr(self, attr)
                    setattr(self, attr, grown(old, 2 * old.size))
            self._cls[k], self._codes[k] = kind.cls, _UNSET if kind.ident is not None else NONE
            self._flops[k], self._bytes[k], self._mark[k] = kind.flops, kind.bytes, kind.step or bool(kind.note)
        return k

    def unnumber(self) -> None:
        """Forget the kinds' identity codes (a new stretch numbers its identities afresh), keeping the rest."""
        n = len(self.kinds)
        self._codes[:n][self._codes[:n] >= 0] = _UNSET

    def arrays(self) -> tuple[np.ndarray, ...]:
        """Per kind: class, identity code, derived FLOPs and bytes, whether a step or an annotation."""
        n = len(self.kinds)
        return self._cls[:n], self._codes[:n], self._flops[:n], self._bytes[:n], self._mark[:n]

    def number(self, kinds: list[int], builder: TableBuilder) -> None:
        """Number the identities of these kinds (in the order given: the events') not numbered yet."""
        for k in dict.fromkeys(kinds):
            if self._codes[k] == _UNSET:
                ident = self.kinds[k].ident
                assert ident is not None
                self._codes[k] = builder.ident(*ident)


def ids(values: list[Any]) -> np.ndarray:
    """int64 of ids: an int as it is, anything else (or beyond int64) -1."""
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    elif int not in kinds:
        return np.full(len(values), NONE, dtype=np.int64)
    return np.fromiter((v if type(v) is int and -(1 << 63) <= v < 1 << 63 else NONE for v in values),
                       dtype=np.int64, count=len(values))


def _mapped(func: Any, values: list[Any]) -> list[Any]:
    """``func`` of each value, worked out once per distinct value where they are ints or strings."""
    if set(map(type, values)) <= {int, str}:
        table = {v: func(v) for v in set(values)}
        return list(map(table.__getitem__, values))
    return list(map(func, values))


def _stream_id(tid: Any) -> int:
    """A device activity's thread: its stream, written ``7`` or (PyTorch 1.8) ``"stream 7"``."""
    if type(tid) is str and tid.startswith("stream "):
        tid = tid[len("stream "):]
    return int_id(tid)


def _plain(value: Any) -> Any:
    return None if isinstance(value, list | dict) else value


_FIELDS = ("pid", "tid", "ts", "dur", "args")
# an event's head and recorded inputs, each a tuple made in one C call per event (columns zipped cost twice that)
_HEAD = operator.attrgetter("cat", "name", "args.device")
_INPUTS = operator.attrgetter("input_dims", "input_type", "concrete_inputs")


def collect(events: Sequence[Event | KinetoEvent], kinds: Kinds, threads: Interner, builder: TableBuilder,
            cpu: Cpu, dev: Device, steps: list[tuple[float, float]], dropped: Dropped, notes: list[Note]) -> None:
    """Append the chunk's CPU events to ``cpu``, its device activities to ``dev``, the (start, duration)
    in µs of its ``ProfilerStep#N`` frames to ``steps`` and its annotations to ``notes``; count what is
    left out in ``dropped``."""
    phases = column(events, "ph")
    xs, where = events, None
    if phases.count("X") != len(events):
        where = [i for i, ph in enumerate(phases) if ph == "X"]
        xs = [events[i] for i in where]
    pid, tid, ts, dur, args = fields(xs, _FIELDS)
    heads = list(map(_HEAD, xs))
    kind = kinds.of(heads, list(map(_INPUTS, args)))
    cls, codes, _, _, marked = kinds.arrays()
    ts_us, dur_us = floats(ts), floats(dur)
    ok = (dur_us >= 0) & (dur_us < MAX_US) & (np.abs(ts_us) < MAX_US)
    klass = cls[kind] if kind.size else np.zeros(0, dtype=np.int64)
    if where is not None or not ok.all():
        _count_dropped(events, phases, where, ok, klass, ts, dur, heads, dropped)
    keep = ok & (klass != _SKIP)
    numbered = keep & ((klass == _DEVICE) | (klass == _OP) | (klass == _RUNTIME))
    if numbered.any() and (codes[kind[numbered]] == _UNSET).any():
        kinds.number(kind[numbered].tolist(), builder)
    _, codes, kflops, kbytes, marked = kinds.arrays()
    on_cpu = np.flatnonzero(keep & (klass != _DEVICE))
    on_dev = np.flatnonzero(keep & (klass == _DEVICE))
    if not (on_cpu.size or on_dev.size):
        return
    # the arguments' columns over every event, then taken apart: CPU events and activities share three
    external, correlation, moved = _external(args), ids(column(args, "correlation")), floats(column(args, "bytes"))
    if on_cpu.size:
        pick = on_cpu.tolist()
        pids, tids = [pid[i] for i in pick], [tid[i] for i in pick]
        try:
            thread = threads.codes(zip(pids, tids, strict=True))
        except TypeError:
            thread = threads.codes(zip(map(_plain, pids), map(_plain, tids), strict=True))
        if marked.any():  # steps and annotations are frames: CPU events, their threads just numbered
            _marks(kinds, kind[on_cpu], marked[kind[on_cpu]], ts_us[on_cpu], dur_us[on_cpu], steps, notes,
                   threads, thread)
        k = kind[on_cpu]
        flops, cpu_moved = floats(column([args[i] for i in pick], "flops")), moved[on_cpu]
        flops = np.where(np.isnan(flops), kflops[k], flops)
        cpu_moved = np.where(np.isnan(cpu_moved), kbytes[k], cpu_moved)
        cpu.add(thread=np.asarray(thread, dtype=np.int64), ts_us=ts_us[on_cpu], dur_us=dur_us[on_cpu],
                ident=codes[k], is_op=klass[on_cpu] == _OP, flops=flops, bytes=cpu_moved,
                external=external[on_cpu], correlation=correlation[on_cpu])
    if on_dev.size:
        pick = on_dev.tolist()
        dev.add(ts_us=ts_us[on_dev], dur_us=dur_us[on_dev], ident=codes[kind[on_dev]], external=external[on_dev],
                correlation=correlation[on_dev],
                pid=np.asarray(_mapped(int_id, [pid[i] for i in pick]), dtype=np.int64),
                tid=np.asarray(_mapped(_stream_id, [tid[i] for i in pick]), dtype=np.int64),
                bytes=moved[on_dev])


def _external(args: list[Any]) -> np.ndarray:
    """Each event's ``External id`` (``external id`` in PyTorch 1.8/1.9); -1: none."""
    ext = ids(column(args, "external_id"))
    missing = ext == NONE
    if missing.any():
        ext = np.where(missing, ids(column(args, "external_id_v1")), ext)
    return ext


def _marks(kinds: Kinds, kind: np.ndarray, marked: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray,
           steps: list[tuple[float, float]], notes: list[Note], threads: Interner, thread: list[int]) -> None:
    """The chunk's ProfilerStep frames and annotations (``marked``) among its CPU events, in file order
    (``thread``: each event's thread code in ``threads``)."""
    at = np.flatnonzero(marked).tolist()
    keys = [thread_key(v) for v in threads.picked(thread[i] for i in at)]
    for i, key in zip(at, keys, strict=True):
        kd = kinds.kinds[int(kind[i])]
        ts, dur = float(ts_us[i]), float(dur_us[i])
        if kd.note:
            notes.append((kd.name, kd.note == 2, ts, dur, key))
        if kd.step:
            steps.append((ts, dur))


def _count_dropped(events: Sequence[Event | KinetoEvent], phases: list[Any], where: list[int] | None, ok: np.ndarray,
                   klass: np.ndarray, ts: list[Any], dur: list[Any], heads: list[Any], dropped: Dropped) -> None:
    """Count, in file order, the items that are no event object and the events of a kind this reader reads
    whose start or duration is unusable."""
    found: list[tuple[int, str, Any]] = []
    if where is not None:
        found.extend((i, NOT_EVENT, events[i].name) for i, ph in enumerate(phases) if ph == NOT_OBJECT)
    for j in np.flatnonzero(~ok & (klass != _SKIP)).tolist():
        found.append((where[j] if where is not None else j, reason(ts[j], dur[j]) or NOT_A_NUMBER, heads[j][1]))
    for _, why, example in sorted(found, key=lambda f: f[0]):
        dropped.add(why, 1, example)
