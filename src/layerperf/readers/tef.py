"""Any Trace Event Format file: complete events (``"ph": "X"``) and ``B``/``E`` pairs become rows.

Nested events get self time: their duration minus the time the events nested in them on the same
thread cover, each instant once (what an event runs past its parent's end is taken from the event around
the parent; :func:`layerperf.data.nesting.nest`).
What an event's arguments say about it is read when present under the names the producers this
package knows use: ``op_name``/``op_type``, ``provider``, ``in_shapes``/``input_type_shape``/
``Input Dims``, ``flops``, ``bytes``.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import orjson

from layerperf.data.calls import Calls, Interner, TableBuilder, int_id, shape_str, with_outer
from layerperf.data.nesting import nest
from layerperf.readers.decode import NOT_OBJECT, Args, Event, detached, fields, raw_value
from layerperf.readers.dropped import B_WITHOUT_E, E_WITHOUT_B, NOT_EVENT, Dropped, count_rejected
from layerperf.readers.stream import EventStream


def floats(values: list[Any] | np.ndarray) -> np.ndarray:
    """float64 array of JSON values: numbers and numeric strings (as :func:`num` reads each: a bool is no
    number); anything else is NaN."""
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    kinds = set(map(type, values))
    if kinds <= {int, float}:  # fromiter converts without looking for nested sequences: 1.3-3x asarray's speed
        try:
            return np.fromiter(values, dtype=np.float64, count=len(values))
        except OverflowError:
            pass
    elif kinds == {type(None)}:
        return np.full(len(values), np.nan)
    return np.fromiter(map(num, values), dtype=np.float64, count=len(values))


def ints(values: Sequence[int] | np.ndarray) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    return np.fromiter(values, dtype=np.int64, count=len(values))


def num(value: Any) -> float:
    if isinstance(value, bool):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def text(value: Any) -> str:
    """A name, type or provider as text: a value that is no string (an object, a list) as its JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, msgspec.Raw | bytes):  # kept by its JSON text as a key (_hashable)
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def shapes_text(value: Any) -> str:
    """A list of shapes in any of the forms producers write, as ``1x3x8x8;8x3x3x3`` (a list of tensors
    gives each of its tensors' in turn)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    parts = []
    for item in value:
        if isinstance(item, dict):  # ONNX Runtime: {"float": [1, 3, 8, 8]}
            parts.append(";".join(shape_str(v) for v in item.values()))
        elif isinstance(item, list) and item and all(isinstance(v, list) for v in item):
            parts.append(";".join(shape_str(v) for v in item))  # PyTorch's list of tensors: [[4, 8], [4, 8]]
        elif isinstance(item, list):  # PyTorch: [1, 3, 8, 8]; [] for an argument that is no tensor
            parts.append(shape_str(item) if item else "")
        else:
            parts.append("?")
    return ";".join(parts).rstrip(";")


MAX_US = 4e15


@dataclass
class Slices:
    """Timed events as columns: what nesting needs, plus each event's row identity."""

    thread: list[np.ndarray] = field(default_factory=list)
    ts_us: list[np.ndarray] = field(default_factory=list)
    dur_us: list[np.ndarray] = field(default_factory=list)
    ident: list[np.ndarray] = field(default_factory=list)
    flops: list[np.ndarray] = field(default_factory=list)
    nbytes: list[np.ndarray] = field(default_factory=list)
    dropped: Dropped = field(default_factory=Dropped)

    def add(self, thread: Any, ts_us: Any, dur_us: Any, ident: Any, flops: Any, nbytes: Any,
            names: Sequence[Any] | None = None) -> None:
        """Append rows, leaving out (and counting in ``dropped``, by reason) those without a finite
        start and a duration >= 0."""
        ts, dur = floats(ts_us), floats(dur_us)
        # beyond ~126 years in µs the ns arithmetic would overflow int64: no trace means that
        keep = (dur >= 0) & (dur < MAX_US) & (np.abs(ts) < MAX_US)
        every = bool(keep.all())
        if not every:
            bad = np.flatnonzero(~keep).tolist()
            count_rejected(self.dropped, [names[i] if names is not None else None for i in bad],
                           [ts_us[i] for i in bad], [dur_us[i] for i in bad])
        columns = (self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes)
        values = (ints(thread), ts, dur, ints(ident),
                  floats(flops), floats(nbytes))
        for column, value in zip(columns, values, strict=True):
            column.append(value if every else value[keep])

    def add_columns(self, columns: tuple[np.ndarray, ...]) -> None:
        """Append rows already filtered and converted (another part's :meth:`joined`)."""
        for column, value in zip((self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes),
                                 columns, strict=True):
            column.append(value)

    def joined(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(c) if c else np.zeros(0) for c in
                     (self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes))


# -- columns of a chunk, read at C speed ------------------------------------------------------------
# A Python loop over a million events doing a dozen lookups each is seconds; map(attrgetter) does
# the same lookups in C, a column at a time, and a row's identity is resolved once per distinct key.


def column(items: Sequence[Any], attr: str) -> list[Any]:
    """The field ``attr`` of every event (or Args). An absent raw JSON field is the empty (falsy) Raw."""
    return list(map(attrgetter(attr), items))


def first(*values: Any) -> Any:
    """The first value that is present: not null, and not an empty raw field."""
    for v in values:
        if v is not None and not (isinstance(v, (msgspec.Raw, bytes)) and not v):
            return v
    return None


def _hashable(value: Any) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    return bytes(value) if isinstance(value, msgspec.Raw) else orjson.dumps(value)


def keyed(values: Sequence[Any]) -> Sequence[Any]:
    """Values usable as dict keys: lists and objects by their JSON text."""
    try:
        hash(tuple(values))
        return values
    except TypeError:
        return list(map(_hashable, values))


def thread_codes(threads: Interner, pid: Sequence[Any], tid: Sequence[Any]) -> list[int] | np.ndarray:
    n = len(pid)
    if n and pid.count(pid[0]) == n and tid.count(tid[0]) == n:  # one thread (as the interner tells them)
        return np.full(n, threads.code((_hashable(pid[0]), _hashable(tid[0]))), dtype=np.int64)
    return threads.codes(zip(keyed(pid), keyed(tid), strict=True))


class Idents:
    """Row identity codes of events from a hashable head (name...) and their arguments.

    A node's arguments rarely change between calls, so each head remembers the arguments it was
    first seen with and a call with equal ones costs one comparison (of two decoded structs, in C);
    other arguments are keyed by ``arg_key(args)`` (hashable; shapes by their JSON text).
    ``make(head + arg_key(args))`` resolves a combination seen for the first time.
    """

    def __init__(self, make: Callable[[tuple[Any, ...]], int], arg_key: Callable[[Args], tuple[Any, ...]]) -> None:
        self.make = make
        self.arg_key = arg_key
        self.heads: dict[tuple[Any, ...], int] = {}
        self.first_args: list[Args] = []  # per head: the arguments it was first seen with
        self.first_codes: list[int] = []  # and their code
        self.full: dict[tuple[Any, ...], int] = {}

    def _head(self, head: Any, args: Args) -> int:
        h = self.heads.get(head)
        if h is None:
            h = self.heads[head] = len(self.first_args)
            self.first_args.append(detached(args))
            self.first_codes.append(self._full(head, args))
        return h

    def _full(self, head: Any, args: Args) -> int:
        key = (head if type(head) is tuple else (head,)) + self.arg_key(args)
        code = self.full.get(key)
        if code is None:
            code = self.full[key] = self.make(key)
        return code

    def codes(self, heads: list[Any], args: list[Args]) -> list[int]:
        """Per event, its identity's code; ``heads`` tuples, or single values (a name alone)."""
        try:
            found = list(map(self.heads.get, heads))
        except TypeError:  # an unhashable name or type
            heads = [tuple(map(_hashable, h)) if type(h) is tuple else _hashable(h) for h in heads]
            found = list(map(self.heads.get, heads))
        hs: list[int] = [self._head(head, a) if h is None else h
                         for h, head, a in zip(found, heads, args, strict=True)] if None in found \
            else found  # type: ignore[assignment]
        if not hs:
            return []
        pick = operator.itemgetter(*hs) if len(hs) > 1 else lambda values: (values[hs[0]],)
        same = list(map(operator.eq, args, pick(self.first_args)))
        codes = list(pick(self.first_codes))
        if all(same):
            return codes
        return [code if ok else self._full(head, a)
                for code, ok, head, a in zip(codes, same, heads, args, strict=True)]


def raw_key(*values: Any) -> tuple[Any, ...]:
    """Argument values as a hashable key: raw JSON by its bytes."""
    return tuple([bytes(v) if type(v) is msgspec.Raw else v if v is None or type(v) is str else _hashable(v)
                  for v in values])


def json_value(value: Any) -> Any:
    """The JSON value of a raw field (a Raw, or its bytes in a key); None for an absent one."""
    if isinstance(value, msgspec.Raw):
        return raw_value(value)
    if isinstance(value, bytes):
        return orjson.loads(value) if value else None
    return value


# What identifies a row (name, type, provider: hashable) and its shapes (raw JSON, under any of the
# names producers use), read with one C call per event; the first present name is picked per distinct
# combination, not per event.
EVENT_FIELDS = ("name", "cat", "pid", "tid", "ts", "dur", "args")
ARG_KEY = attrgetter("op_type", "op_name", "provider", "in_shapes", "input_type_shape", "input_dims",
                     "out_shapes", "output_type_shape", "output_dims")
ARG_FIGURES = ("flops", "bytes")


def _arg_key(args: Args) -> tuple[Any, ...]:
    return raw_key(*ARG_KEY(args))


def _generic_key(builder: TableBuilder) -> Callable[[tuple[Any, ...]], int]:
    def make(key: tuple[Any, ...]) -> int:
        name, cat, op_type, op_name, provider, *shapes = key
        return builder.ident(text(name), text(first(op_type, op_name)) or text(cat), text(provider),
                             shapes_text(json_value(first(*shapes[:3]))),
                             shapes_text(json_value(first(*shapes[3:]))))
    return make


def collect(events: list[Event], threads: Interner, idents: Idents, out: Slices,
            open_b: dict[Any, list[Event]], loose_e: list[Event]) -> None:
    """Add the X events (and completed B/E pairs) of one chunk to ``out``."""
    phases = column(events, "ph")
    timed = [ev for ev, ph in zip(events, phases, strict=True) if ph == "X"]
    if len(timed) < len(events):
        timed.extend(_pairs(events, phases, open_b, loose_e))
        count_not_objects(events, phases, out.dropped)
    add_timed(timed, threads, idents, out)


def count_not_objects(events: list[Event], phases: list[Any], dropped: Dropped) -> None:
    """Count the placeholders of array items that were not event objects (:data:`NOT_OBJECT`)."""
    n = phases.count(NOT_OBJECT)
    if n:
        dropped.add(NOT_EVENT, n, next(ev.name for ev, ph in zip(events, phases, strict=True) if ph == NOT_OBJECT))


def add_timed(timed: list[Event], threads: Interner, idents: Idents, out: Slices) -> None:
    name, cat, pid, tid, ts, dur, args = fields(timed, EVENT_FIELDS)
    flops, nbytes = fields(args, ARG_FIGURES)
    codes = idents.codes(list(zip(name, cat, strict=True)), list(args))
    out.add(thread_codes(threads, pid, tid), ts, dur, codes, flops, nbytes, name)


def _pairs(events: list[Event], phases: list[Any], open_b: dict[Any, list[Event]],
           loose_e: list[Event]) -> list[Event]:
    """B/E pairs closed in this chunk as X events (the B's fields, both events' args).

    An E with no B open on its thread goes to ``loose_e``: in a trace read in parts, its B may be
    in an earlier part (read whole, it is dropped).
    """
    done = []
    for ev, ph in zip(events, phases, strict=True):
        if ph == "B":
            open_b.setdefault(_thread_key(ev), []).append(ev)
        elif ph == "E":
            stack = open_b.get(_thread_key(ev))
            if stack:
                begin = stack.pop()
                dur = num(ev.ts) - num(begin.ts)
                done.append(msgspec.structs.replace(begin, ph="X", dur=dur, args=_merged(begin.args, ev.args)))
            else:
                loose_e.append(ev)
    return done


def _thread_key(ev: Event) -> tuple[Any, Any]:
    return _hashable(ev.pid), _hashable(ev.tid)


def _merged(begin: Args, end: Args) -> Args:
    """The B event's arguments, overridden by those the E event gives."""
    given = {f: v for f in Args.__struct_fields__ if (v := getattr(end, f)) is not None and
             not (isinstance(v, msgspec.Raw) and not v)}
    return msgspec.structs.replace(begin, **given)


def to_ns(us: list[float] | np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(us, dtype=np.float64) * 1e3).astype(np.int64)


@dataclass
class Part:
    """What one stretch of a trace's events gives, with row identities and threads local to it."""

    idents: list[tuple[str, str, str, str, str]]
    threads: list[Any]
    columns: tuple[np.ndarray, ...]  # Slices.joined(), codes into idents and threads
    open_b: dict[Any, list[Event]]
    loose_e: list[Event]
    events: int
    runs: int = 0
    ident_counters: dict[int, dict[str, float]] = field(default_factory=dict)  # per identity code
    ident_int_ops: dict[int, float] = field(default_factory=dict)  # per identity code, where known
    dropped: Dropped = field(default_factory=Dropped)  # events left out, by reason
    # read with a Reading: ``idents`` are those met since the process's earlier stretches, numbered from
    # ``ident_base`` on in the numbering of the process (``reading``) whose earlier parts hold the rest
    ident_base: int = 0
    reading: int = 0
    # (start µs, duration µs) of each run the trace marks (ONNX Runtime's model_run events), in file order
    run_windows: list[tuple[float, float]] = field(default_factory=list)


class Reading:
    """The identities met so far, numbered in the order met, kept for the next stretch a process reads (see
    :class:`layerperf.readers.ort.Reading`)."""

    def __init__(self) -> None:
        self.builder = TableBuilder()
        self.idents = Idents(_generic_key(self.builder), _arg_key)
        self.shipped = 0  # identities already in an earlier part
        self.process = os.getpid()

    def new_idents(self) -> tuple[list[tuple[str, str, str, str, str]], int]:
        """The identities met since the last call, and the code of the first (each part carries only those:
        a part per stretch carrying them all grew with stretches times identities)."""
        every, base = self.builder.idents(), self.shipped
        self.shipped = len(every)
        return every[base:], base


def part(stream: EventStream, slices: Slices | None = None, threads: Interner | None = None,
         reading: Reading | None = None) -> Part:
    """Read a stretch of events; :func:`merge` turns parts read in order into the table. ``slices`` and
    ``threads`` (given together) take the timed events as they come (a spill to disk, say): the part's
    columns are then what ``slices`` kept. ``reading``: what this process's earlier stretches worked out
    (the part's identities are then those its earlier parts did not carry, see :class:`Part`)."""
    reading = Reading() if reading is None else reading
    idents = reading.idents
    threads = Interner() if threads is None else threads
    slices = Slices() if slices is None else slices
    open_b: dict[Any, list[Event]] = {}
    loose_e: list[Event] = []
    n_events = 0
    for chunk in stream.chunks():
        n_events += len(chunk)
        collect(chunk, threads, idents, slices, open_b, loose_e)
    new, base = reading.new_idents()
    return Part(new, threads.values(), slices.joined(), open_b, loose_e, n_events, dropped=slices.dropped,
                ident_base=base, reading=reading.process)


def remapped(part: Part, builder: TableBuilder, threads: Interner) -> tuple[np.ndarray, ...]:
    """A part's columns with its identity and thread codes turned into ``builder``'s and ``threads``'."""
    thread, ts_us, dur_us, ident, flops, nbytes = part.columns
    ident_map = np.asarray(builder.ident_codes(part.idents), dtype=np.int64)
    thread_map = np.asarray(threads.codes(part.threads), dtype=np.int64)
    return (thread_map[thread.astype(np.int64)] if thread.size else thread, ts_us, dur_us,
            ident_map[ident.astype(np.int64)] if ident.size else ident, flops, nbytes)


def merge(parts: Sequence[Part], meta: dict[str, Any] | None = None, *, origin_us: float | None = None) -> Calls:
    """The table of parts read in file order; B/E pairs that span two parts are joined here."""
    builder = TableBuilder()
    threads = Interner()
    idents = Idents(_generic_key(builder), _arg_key)
    slices = Slices()
    carry: dict[Any, list[Event]] = {}
    for p in parts:
        slices.add_columns(remapped(p, builder, threads))
        slices.dropped.merge(p.dropped)
        loose: list[Event] = []
        if p.loose_e:
            add_timed(_pairs(p.loose_e, ["E"] * len(p.loose_e), carry, loose), threads, idents, slices)
        for ev in loose:
            slices.dropped.add(E_WITHOUT_B, 1, ev.name)
        for key, stack in p.open_b.items():
            carry.setdefault(key, []).extend(stack)
    for stack in carry.values():
        for ev in stack:
            slices.dropped.add(B_WITHOUT_E, 1, ev.name)
    info = {"format": "tef", "events": sum(p.events for p in parts), **(meta or {})}
    if slices.dropped:
        info["dropped"] = slices.dropped.doc()
    return build(builder, slices, threads.values(), info, origin_us)


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> Calls:
    """Every timed event of a Trace Event Format file, with self time."""
    return merge([part(stream)], meta)


def build(builder: TableBuilder, slices: Slices, threads: list[Any], meta: dict[str, Any],
          origin_us: float | None = None) -> Calls:
    """The table of the events in ``slices``, whose thread codes index ``threads`` ((pid, tid) keys); times
    from ``origin_us`` (default: the earliest start; a part of a trace takes the whole trace's)."""
    thread, ts_us, dur_us, ident, flops, nbytes = slices.joined()
    thread = thread.astype(np.int64)
    origin_us = earliest(ts_us) if origin_us is None else origin_us
    start = to_ns(ts_us - origin_us)
    end = start + to_ns(dur_us)
    self_ns, parent = nest(thread, start, end)
    pid, tid = thread_ids(threads, thread)
    builder.extend(ident.astype(np.int32), self_ns / 1e3, incl_us=(end - start) / 1e3, flops=flops,
                   bytes_=nbytes, ts_us=start / 1e3, pid=pid, tid=tid)
    table = builder.build({**meta, "ts_origin_us": origin_us})
    return table if parent is None else with_outer(table, parent)  # rows are the events, in order


def earliest(ts_us: np.ndarray) -> float:
    """The time origin of a trace whose clock has no meaningful zero (often the epoch): its first
    event's start (µs). Times relative to it keep their ns: an epoch time in ns is past the integers
    a float64 holds exactly (2**53), and ``to_ns`` of it would be off by up to 128 ns."""
    return float(ts_us.min()) if ts_us.size else 0.0


def run_windows(marks: list[tuple[float, float]], origin_us: float) -> list[tuple[int, int]]:
    """The runs a trace marks (a profiler's steps, ONNX Runtime's model_run events), (start µs, duration µs)
    each, as sorted (start, end) ns on the table's clock."""
    start_us, length_us = np.asarray(marks, dtype=np.float64).T
    start = to_ns(start_us - origin_us)
    return sorted(zip(start.tolist(), (start + to_ns(length_us)).tolist(), strict=True))


def thread_ids(threads: Sequence[tuple[Any, Any]], thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pid and tid columns (int64, -1 unknown) of rows whose thread codes index ``threads``."""
    pids = np.asarray([int_id(p) for p, _ in threads], dtype=np.int64)
    tids = np.asarray([int_id(t) for _, t in threads], dtype=np.int64)
    if not thread.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return pids[thread], tids[thread]


# what the streaming reader (:mod:`layerperf.readers.streaming`) joins B/E pairs across parts with
generic_key = _generic_key
arg_key = _arg_key
pairs = _pairs
