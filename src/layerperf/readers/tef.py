"""Any Trace Event Format file: complete events (``"ph": "X"``) and ``B``/``E`` pairs become rows.

Nested events get self time: their duration minus the time of the events directly inside them on
the same thread (the overlap, so an event that spills past its parent's end takes only its share).
What an event's arguments say about it is read when present under the names the producers this
package knows use: ``op_name``/``op_type``, ``provider``, ``in_shapes``/``input_type_shape``/
``Input Dims``, ``flops``, ``bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np
import orjson

from layerperf.optable import Interner, OpTable, TableBuilder, shape_str
from layerperf.readers.jsonfile import EventStream

# Events that describe the trace rather than time an op: metadata, counters, instants, flows, async.
ROW_PHASES = ("X", "B", "E")


def floats(values: list[Any]) -> np.ndarray:
    """float64 array of JSON values: numbers and numeric strings; anything else is NaN."""
    try:
        out = np.asarray(values, dtype=np.float64)
        if out.shape == (len(values),):
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    return np.asarray([num(v) for v in values], dtype=np.float64)


def num(value: Any) -> float:
    if isinstance(value, bool):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def shapes_text(value: Any) -> str:
    """A list of shapes in any of the forms producers write, as ``1x3x8x8;8x3x3x3``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    parts = []
    for item in value:
        if isinstance(item, dict):  # ONNX Runtime: {"float": [1, 3, 8, 8]}
            parts.append(";".join(shape_str(v) for v in item.values()))
        elif isinstance(item, list):  # PyTorch: [1, 3, 8, 8]; [] for an argument that is no tensor
            parts.append(shape_str(item) if item else "")
        else:
            parts.append("?")
    return ";".join(parts).rstrip(";")


def first_arg(args: dict[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = args.get(key)
        if value is not None:
            return value
    return None


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

    def add(self, thread: Any, ts_us: Any, dur_us: Any, ident: Any, flops: Any, nbytes: Any) -> None:
        """Append rows, dropping those without a finite start and a duration >= 0."""
        ts, dur = floats(ts_us), floats(dur_us)
        # beyond ~126 years in µs the ns arithmetic would overflow int64: no trace means that
        keep = (dur >= 0) & (dur < MAX_US) & (np.abs(ts) < MAX_US)
        columns = (self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes)
        values = (np.asarray(thread, dtype=np.int64), ts, dur, np.asarray(ident, dtype=np.int64),
                  floats(flops), floats(nbytes))
        for column, value in zip(columns, values, strict=True):
            column.append(value[keep])

    def joined(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(c) if c else np.zeros(0) for c in
                     (self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes))


# -- columns of a chunk, read at C speed ------------------------------------------------------------
# A Python loop over a million events doing a dozen lookups each is seconds; map(dict.get, ...) does
# the same lookups in C, a column at a time, and a row's identity is resolved once per distinct key.

EMPTY: dict[str, Any] = {}


def objects(events: list[Any]) -> list[dict[str, Any]]:
    """The events that are JSON objects (all of them, in a well-formed trace)."""
    if all(map(dict.__instancecheck__, events)):
        return events
    return [ev for ev in events if type(ev) is dict]


def column(events: list[dict[str, Any]], key: str) -> list[Any]:
    return list(map(dict.get, events, repeat(key)))


def arg_dicts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    args = column(events, "args")
    if all(map(dict.__instancecheck__, args)):
        return args
    return [a if type(a) is dict else EMPTY for a in args]


def first_of(dicts: list[dict[str, Any]], keys: Sequence[str]) -> list[Any]:
    """Per dict, the value of the first of ``keys`` that is present and not null."""
    out = column(dicts, keys[0])
    for key in keys[1:]:
        missing = out.count(None)
        if missing == len(out):
            out = column(dicts, key)
        elif missing:
            out = [v if v is not None else d.get(key) for v, d in zip(out, dicts, strict=True)]
    return out


def _hashable(value: Any) -> Any:
    return value if value is None or type(value) in (str, int, float, bool) else orjson.dumps(value)


def keyed(values: list[Any]) -> list[Any]:
    """Values usable as dict keys: lists and objects by their JSON text."""
    try:
        hash(tuple(values))
        return values
    except TypeError:
        return list(map(_hashable, values))


def thread_codes(threads: Interner, events: list[dict[str, Any]]) -> list[int]:
    pairs = list(zip(keyed(column(events, "pid")), keyed(column(events, "tid")), strict=True))
    return threads.codes(pairs)


class Idents:
    """Row identity codes of events from a hashable head (name, type...) and raw tails (shapes).

    A node's shapes rarely change between calls, so each head remembers the tails it was first seen
    with and a call with the same ones costs an equality test; other tails are keyed by their JSON
    text. ``make(head + tails)`` resolves a combination seen for the first time.
    """

    def __init__(self, make: Callable[[tuple[Any, ...]], int]) -> None:
        self.make = make
        self.heads: dict[tuple[Any, ...], int] = {}
        self.first: list[tuple[tuple[Any, ...], int]] = []  # per head: its first tails, their code
        self.full: dict[tuple[Any, ...], int] = {}

    def _head(self, head: tuple[Any, ...], tails: tuple[Any, ...]) -> int:
        h = self.heads.get(head)
        if h is None:
            h = self.heads[head] = len(self.first)
            self.first.append((tails, self._full(head, tails)))
        return h

    def _full(self, head: tuple[Any, ...], tails: tuple[Any, ...]) -> int:
        key = head + tuple(_hashable(t) for t in tails)
        code = self.full.get(key)
        if code is None:
            code = self.full[key] = self.make(key)
        return code

    def codes(self, heads: list[tuple[Any, ...]], tails: list[tuple[Any, ...]]) -> list[int]:
        try:
            found = list(map(self.heads.get, heads))
        except TypeError:  # an unhashable name or type
            heads = [tuple(map(_hashable, h)) for h in heads]
            found = list(map(self.heads.get, heads))
        hs: list[int] = [self._head(head, tail) if h is None else h
                         for h, head, tail in zip(found, heads, tails, strict=True)] if None in found \
            else found  # type: ignore[assignment]
        first = self.first
        refs = [first[h] for h in hs]
        if all(map(_same_tails, tails, refs)):
            return [ref[1] for ref in refs]
        return [ref[1] if tail == ref[0] else self._full(head, tail)
                for head, tail, ref in zip(heads, tails, refs, strict=True)]


def _same_tails(tails: tuple[Any, ...], ref: tuple[tuple[Any, ...], int]) -> bool:
    return tails == ref[0]


def _loads(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, bytes) else value


def _generic_key(builder: TableBuilder) -> Callable[[tuple[Any, ...]], int]:
    def make(key: tuple[Any, ...]) -> int:
        name, cat, op_type, provider, ins, outs = key
        return builder.ident(text(name), text(op_type) or text(cat), text(provider), shapes_text(_loads(ins)),
                             shapes_text(_loads(outs)))
    return make


IN_KEYS = ("in_shapes", "input_type_shape", "Input Dims")
OUT_KEYS = ("out_shapes", "output_type_shape", "Output Dims")


def collect(events: list[Any], threads: Interner, idents: Idents, out: Slices,
            open_b: dict[Any, list[dict[str, Any]]]) -> None:
    """Add the X events (and completed B/E pairs) of one chunk to ``out``."""
    events = objects(events)
    phases = column(events, "ph")
    timed = [ev for ev, ph in zip(events, phases, strict=True) if ph == "X"]
    if len(timed) < len(events):
        timed.extend(_pairs(events, phases, open_b))
    args = arg_dicts(timed)
    heads = list(zip(column(timed, "name"), column(timed, "cat"), first_of(args, ("op_type", "op_name")),
                     column(args, "provider"), strict=True))
    tails = list(zip(first_of(args, IN_KEYS), first_of(args, OUT_KEYS), strict=True))
    out.add(thread_codes(threads, timed), column(timed, "ts"), column(timed, "dur"), idents.codes(heads, tails),
            column(args, "flops"), column(args, "bytes"))


def _pairs(events: list[dict[str, Any]], phases: list[Any], open_b: dict[Any, list[dict[str, Any]]]) -> list[Any]:
    """B/E pairs closed in this chunk as X events (the B's fields, both events' args)."""
    done = []
    for ev, ph in zip(events, phases, strict=True):
        if ph == "B":
            open_b.setdefault(_thread_key(ev), []).append(ev)
        elif ph == "E":
            stack = open_b.get(_thread_key(ev))
            if stack:
                begin = stack.pop()
                dur = num(ev.get("ts")) - num(begin.get("ts"))
                done.append({**begin, "ph": "X", "dur": dur, "args": {**_args(begin), **_args(ev)}})
    return done


def _thread_key(ev: dict[str, Any]) -> tuple[Any, Any]:
    return _hashable(ev.get("pid")), _hashable(ev.get("tid"))


def _args(ev: dict[str, Any]) -> dict[str, Any]:
    args = ev.get("args")
    return args if isinstance(args, dict) else {}


def parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Index of the event each event is directly nested in on its thread, -1 for none.

    Events become brackets — an open at their start, a close at their end — sorted by thread and
    time (at one instant closes before opens, so back-to-back events are siblings, and the longer of
    two events starting together opens first). An open's parent is the nearest earlier open one
    level up, found level by level with searchsorted: numpy work, no Python loop per event.
    """
    n = start.size
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    dur = end - start
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((-dur, start, thread))] = np.arange(n)
    zero = dur == 0
    # token columns: event, thread, time, kind (0 close, 1 open, 2 close of a zero-length event), tiebreak
    ev = np.concatenate([np.arange(n), np.arange(n)])
    t_thread = np.concatenate([thread, thread])
    t_time = np.concatenate([start, end])
    kind = np.concatenate([np.ones(n, dtype=np.int8), np.where(zero, 2, 0).astype(np.int8)])
    tie = np.concatenate([rank, -rank])
    order = np.lexsort((tie, kind, t_time, t_thread))
    is_open = kind[order] == 1
    depth = np.cumsum(np.where(is_open, 1, -1))
    open_pos = np.flatnonzero(is_open)
    open_depth = depth[open_pos]
    open_ev = ev[order][open_pos]
    by_depth = np.argsort(open_depth, kind="stable")
    levels = open_depth[by_depth]
    bounds = np.searchsorted(levels, np.arange(levels[-1] + 2))
    for d in range(2, int(levels[-1]) + 1):
        up = by_depth[bounds[d - 1]:bounds[d]]
        here = by_depth[bounds[d]:bounds[d + 1]]
        if not up.size or not here.size:
            continue
        k = np.searchsorted(open_pos[up], open_pos[here]) - 1
        ok = k >= 0
        parent[open_ev[here[ok]]] = open_ev[up[k[ok]]]
    return parent


def self_times(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Duration minus the part of each direct child that lies inside it (ns in, ns out)."""
    return nested_self_times(parents(thread, start, end), start, end)


def nested_self_times(parent: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`self_times` given each event's parent (from :func:`parents`)."""
    child = np.flatnonzero(parent >= 0)
    p = parent[child]
    overlap = np.clip(np.minimum(end[child], end[p]) - start[child], 0, None)
    inner = np.bincount(p, weights=overlap.astype(np.float64), minlength=start.size)
    return np.clip((end - start) - inner, 0, None)


def to_ns(us: list[float] | np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(us, dtype=np.float64) * 1e3).astype(np.int64)


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> OpTable:
    """Every timed event of a Trace Event Format file, with self time."""
    builder = TableBuilder()
    threads = Interner()
    idents = Idents(_generic_key(builder))
    slices = Slices()
    open_b: dict[Any, list[dict[str, Any]]] = {}
    n_events = 0
    for chunk in stream.chunks():
        n_events += len(chunk)
        collect(chunk, threads, idents, slices, open_b)
    return build(builder, slices, {"format": "tef", "events": n_events, **(meta or {})})


def build(builder: TableBuilder, slices: Slices, meta: dict[str, Any]) -> OpTable:
    thread, ts_us, dur_us, ident, flops, nbytes = slices.joined()
    start = to_ns(ts_us)
    end = start + to_ns(dur_us)
    self_ns = self_times(thread.astype(np.int64), start, end)
    builder.extend(ident.astype(np.int32), self_ns / 1e3, incl_us=(end - start) / 1e3, flops=flops,
                   bytes_=nbytes)
    return builder.build(meta)
