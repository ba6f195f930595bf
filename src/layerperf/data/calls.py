"""Calls: the one columnar table every trace reader produces and every analysis consumes.

One row per op call (an event) as read, or per group once aggregated. String columns are stored
dictionary-encoded (:class:`Labels`): a million calls of a few hundred distinct ops cost a few int32
arrays, and grouping is integer work in numpy instead of hashing a million Python strings.
Unknown figures are NaN in the float columns, never 0.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.extension import TvmKernel
from layerperf.data.nesting import any_ancestor
from layerperf.util.arrays import dense

if TYPE_CHECKING:  # for annotations only: reading a trace needs none of the Profile's modules
    from layerperf.data.raw import RawProfile

STRING_COLUMNS = ("name", "op_type", "provider", "in_shapes", "out_shapes")
# how analysis groups rows, by the string columns each grouping compares
GROUPINGS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "type": ("op_type",),
    "provider": ("provider",),
    "shape": ("op_type", "in_shapes", "out_shapes"),
}


@dataclass(frozen=True, slots=True)
class Labels:
    """A string column: ``codes`` (int32, one per row) index into ``values`` (distinct strings)."""

    codes: np.ndarray
    values: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.codes.size)

    def __getitem__(self, row: int) -> str:
        return self.values[int(self.codes[row])]

    def tolist(self) -> list[str]:
        return [self.values[c] for c in self.codes.tolist()]

    def take(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.values)

    def mask(self, keep: Iterable[str]) -> np.ndarray:
        """Rows whose value is one of ``keep``."""
        wanted = set(keep)
        hit = np.fromiter((v in wanted for v in self.values), dtype=bool, count=len(self.values))
        return hit[self.codes] if self.values else np.zeros(len(self), dtype=bool)

    @staticmethod
    def of(strings: Sequence[str]) -> Labels:
        """Encode a plain sequence of strings (small tables and tests; readers use :class:`Interner`)."""
        table = {s: k for k, s in enumerate(dict.fromkeys(strings))}
        codes = np.fromiter(map(table.__getitem__, strings), dtype=np.int32, count=len(strings))
        return Labels(codes, tuple(table))


# The "left out" marks of Calls' time and thread columns (compared by identity, never filled).
_NO_FLOATS: np.ndarray = np.zeros(0, dtype=np.float64)
_NO_INTS: np.ndarray = np.zeros(0, dtype=np.int64)
_NO_FLOATS.flags.writeable = False
_NO_INTS.flags.writeable = False


@dataclass(frozen=True, slots=True)
class KernelTable:
    """One row per device activity. ``launcher`` is the name of the op it is device time of ("" when
    linked to none). Where the reader knows them (PyTorch traces): ``ts_ns`` the start on the table's
    clock, ``stream`` the device stream, ``correlation`` the id that ties it to the runtime call that
    launched it, ``launch_ts_ns``/``launch_dur_ns`` that call's start and duration, ``bytes`` what a
    copy or set moved, ``owner`` the row of the op call it is device time of (-1: none),
    ``launch_thread`` the thread that call ran on (a key of its process and thread id,
    :func:`layerperf.readers.streaming.thread_key`); NaN and -1 unknown, left out: unknown for every
    row. The GPU timeline views (:mod:`layerperf.analysis.gpu`) read them."""

    name: Labels
    kind: Labels
    device: Labels
    launcher: Labels
    dur_ns: np.ndarray  # float64
    ts_ns: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    stream: np.ndarray = field(default_factory=lambda: _NO_INTS)
    correlation: np.ndarray = field(default_factory=lambda: _NO_INTS)
    launch_ts_ns: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    launch_dur_ns: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    bytes: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    owner: np.ndarray = field(default_factory=lambda: _NO_INTS)
    launch_thread: np.ndarray = field(default_factory=lambda: _NO_INTS)

    def __post_init__(self) -> None:
        n = len(self)
        for column in ("ts_ns", "stream", "correlation", "launch_ts_ns", "launch_dur_ns", "bytes", "owner",
                       "launch_thread"):
            values = getattr(self, column)
            if values is _NO_FLOATS or values is _NO_INTS:
                object.__setattr__(self, column, np.full(n, np.nan if values is _NO_FLOATS else -1,
                                                         dtype=values.dtype))

    def __len__(self) -> int:
        return int(self.dur_ns.size)


@dataclass(frozen=True, slots=True)
class Annotations:
    """The user annotations of a trace (``record_function`` ranges, ``ProfilerStep#N``): one row each,
    ``gpu`` for their device-side copies (``gpu_user_annotation``), start on the table's clock, ``thread``
    the thread (or stream) it was recorded on, a key as :attr:`KernelTable.launch_thread`'s (-1: unknown;
    left out: unknown for every row)."""

    name: Labels
    gpu: np.ndarray  # bool
    ts_ns: np.ndarray  # float64
    dur_ns: np.ndarray  # float64
    thread: np.ndarray = field(default_factory=lambda: _NO_INTS)  # int64

    def __post_init__(self) -> None:
        if self.thread is _NO_INTS:
            object.__setattr__(self, "thread", np.full(len(self), -1, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.dur_ns.size)


@dataclass(frozen=True, slots=True)
class Calls:
    """Columns of op calls (or of aggregated groups of them). Times in ns; NaN = unknown.

    ``dur_ns`` is self time: the event's duration minus the time of events nested inside it.
    ``incl_ns`` is inclusive time (the whole duration). ``device_ns`` is time on an accelerator
    attributed to the op (PyTorch kernels linked to the op that launched them), ``device_incl_ns``
    the same for kernels launched anywhere under the op (itself and the calls nested in it). ``calls``
    is 1 for a row read from a trace and the group size after aggregation, where ``total_ns`` keeps
    the sum of self time whatever the aggregate function was. ``meta["inclusive_flops"]`` says a
    nested row's FLOPs count what ran inside it (ONNX Runtime control flow: a parent's are its
    body's), so its rates are over inclusive time, and a sum over a group counts nested calls once.

    ``outer`` (nested traces only) says, per grouping of :data:`GROUPINGS`, whether a row lies inside
    no other row of its own group, so that summing inclusive figures over a group counts nested
    calls once (an ``aten::clamp`` inside an ``aten::clamp``; every CPU op of a provider).

    ``ts_ns`` is when a call started, relative to the trace's time origin (``meta["ts_origin_us"]``
    says where that lies in the file's own clock), and ``pid``/``tid`` the process and thread it ran
    on: with ``incl_ns`` they place every call on a timeline (:mod:`layerperf.renderers.timeline`).
    They are NaN and -1 where unknown, and in aggregated rows, which are no single call. Left out
    when the table is made, they are unknown for every row.
    """

    name: Labels
    op_type: Labels
    provider: Labels
    in_shapes: Labels
    out_shapes: Labels
    dur_ns: np.ndarray  # float64
    total_ns: np.ndarray  # float64
    incl_ns: np.ndarray  # float64
    device_ns: np.ndarray  # float64, NaN where the trace has no device time
    calls: np.ndarray  # int64
    flops: np.ndarray  # float64
    bytes: np.ndarray  # float64
    int_ops: np.ndarray  # float64: integer operations (quantized kernels, integer tensors)
    counters: dict[str, np.ndarray] = field(default_factory=dict)  # label -> float64 per row
    meta: dict[str, Any] = field(default_factory=dict)  # what was read: format, source, events...
    device_incl_ns: np.ndarray | None = None  # float64; None: as device_ns (nothing nests)
    outer: dict[str, np.ndarray] = field(default_factory=dict)  # grouping -> bool per row; absent: all outer
    ts_ns: np.ndarray = field(default_factory=lambda: _NO_FLOATS)  # float64; NaN: unknown
    pid: np.ndarray = field(default_factory=lambda: _NO_INTS)  # int64; -1: unknown
    tid: np.ndarray = field(default_factory=lambda: _NO_INTS)  # int64; -1: unknown

    def __post_init__(self) -> None:
        # frozen: columns left out are set once, here
        if self.device_incl_ns is None:
            object.__setattr__(self, "device_incl_ns", self.device_ns.copy())
        n = len(self)
        for column, unknown in (("ts_ns", np.nan), ("pid", -1), ("tid", -1)):
            values = getattr(self, column)
            if values is _NO_FLOATS or values is _NO_INTS:
                object.__setattr__(self, column, np.full(n, unknown, dtype=values.dtype))
            elif values.shape != (n,):
                raise ValueError(f"{column}: {values.size} values for {n} rows")

    @property
    def device_incl(self) -> np.ndarray:
        """``device_incl_ns``, never None."""
        assert self.device_incl_ns is not None
        return self.device_incl_ns

    def __len__(self) -> int:
        return int(self.dur_ns.size)

    def take(self, rows: np.ndarray) -> Calls:
        """The table restricted to (and reordered by) ``rows``: indices or a boolean mask."""
        return Calls(
            name=self.name.take(rows), op_type=self.op_type.take(rows), provider=self.provider.take(rows),
            in_shapes=self.in_shapes.take(rows), out_shapes=self.out_shapes.take(rows),
            dur_ns=self.dur_ns[rows], total_ns=self.total_ns[rows], incl_ns=self.incl_ns[rows],
            device_ns=self.device_ns[rows], calls=self.calls[rows], flops=self.flops[rows],
            bytes=self.bytes[rows], int_ops=self.int_ops[rows], counters={k: v[rows] for k, v in self.counters.items()},
            meta=self.meta, device_incl_ns=self.device_incl[rows], outer={k: v[rows] for k, v in self.outer.items()},
            ts_ns=self.ts_ns[rows], pid=self.pid[rows], tid=self.tid[rows])

    def labels(self, column: str) -> Labels:
        if column not in STRING_COLUMNS:
            raise KeyError(column)
        labels: Labels = getattr(self, column)
        return labels

    @property
    def has_device(self) -> bool:
        return bool(self.device_ns.size) and not bool(np.isnan(self.device_ns).all())

    @property
    def has_times(self) -> bool:
        """Whether any row says when it started (rows read from a trace, not aggregated)."""
        return bool(self.ts_ns.size) and not bool(np.isnan(self.ts_ns).all())


class Interner:
    """Gives each distinct value a dense int code, in first-seen order."""

    __slots__ = ("_listed", "table")

    def __init__(self) -> None:
        self.table: dict[Any, int] = {}
        self._listed: list[Any] = []  # the values by code, as of the last :meth:`picked`

    def code(self, value: Any) -> int:
        table = self.table
        c = table.get(value)
        if c is None:
            c = table[value] = len(table)
        return c

    def codes(self, values: Iterable[Any]) -> list[int]:
        table = self.table
        values = list(values)
        if not table:  # each value hashed twice, not four times (an identity is a tuple of five strings)
            table.update(zip(dict.fromkeys(values), itertools.count()))
            return list(range(len(values))) if len(table) == len(values) else list(map(table.__getitem__, values))
        found = list(map(table.get, values))  # at C speed when every value is known already
        if None not in found:
            return found  # type: ignore[return-value]
        new = dict.fromkeys(itertools.compress(values, map(operator.is_, found, itertools.repeat(None))))
        table.update(zip(new, itertools.count(len(table))))  # the new values, first seen first
        return list(map(table.__getitem__, values))

    def values(self) -> list[Any]:
        return list(self.table)

    def picked(self, codes: Iterable[int]) -> list[Any]:
        """The values of these codes (the list of every value is made again only when values were added)."""
        if len(self._listed) != len(self.table):
            self._listed = list(self.table)
        return list(map(self._listed.__getitem__, codes))


class TableBuilder:
    """Accumulates rows chunk by chunk; ``build()`` makes the Calls.

    A row's identity — (name, op_type, provider, in_shapes, out_shapes) — is interned once per
    distinct tuple, so per row only an int code and its numbers are kept, as numpy arrays.
    """

    def __init__(self) -> None:
        self._ident = Interner()
        self._parts: dict[str, list[np.ndarray]] = {k: [] for k in _NUMERIC}
        self._counters: dict[str, list[tuple[int, np.ndarray]]] = {}
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def ident(self, name: str, op_type: str, provider: str, in_shapes: str, out_shapes: str) -> int:
        return self._ident.code((name, op_type, provider, in_shapes, out_shapes))

    def ident_codes(self, idents: Iterable[tuple[str, str, str, str, str]]) -> list[int]:
        return self._ident.codes(idents)

    def idents(self) -> list[tuple[str, str, str, str, str]]:
        """Every row identity so far, in code order."""
        return self._ident.values()

    def idents_of(self, codes: Iterable[int]) -> list[tuple[str, str, str, str, str]]:
        """The row identities of these codes."""
        return self._ident.picked(codes)

    def extend(self, keys: Sequence[int] | np.ndarray, dur_us: Any, *, incl_us: Any = None,
               device_us: Any = None, flops: Any = None, bytes_: Any = None, int_ops: Any = None,
               counters: dict[str, Any] | None = None, device_incl_us: Any = None, ts_us: Any = None,
               pid: Any = None, tid: Any = None) -> None:
        """Append rows: identity codes (from :meth:`ident`) and their figures in µs (None/NaN unknown);
        ``ts_us`` their start relative to the trace's time origin, ``pid``/``tid`` their process and
        thread (None/-1 unknown).

        Figures may be lists or arrays; anything numpy can't read as float64 (int64 for ids) raises
        TypeError or ValueError before anything is appended. Arrays of the right type may become the
        table's columns as they are (a million rows are 8 MB a column): leave them unchanged.
        """
        n = len(keys)
        given = {"keys": keys, "dur_us": dur_us, "incl_us": incl_us, "device_us": device_us,
                 "flops": flops, "bytes": bytes_, "int_ops": int_ops,
                 "device_incl_us": device_us if device_incl_us is None else device_incl_us, "ts_us": ts_us,
                 "pid": pid, "tid": tid}
        arrays = {}
        for column, values in given.items():
            dtype, unknown = _DTYPES.get(column, (np.float64, np.nan))
            arr = np.full(n, unknown, dtype=dtype) if values is None else np.asarray(values, dtype=dtype)
            if arr.shape != (n,):
                raise ValueError(f"{column}: {arr.shape[0] if arr.ndim else 0} values for {n} rows")
            arrays[column] = arr
        extra = {k: np.asarray(v, dtype=np.float64) for k, v in (counters or {}).items()}
        if any(v.shape != (n,) for v in extra.values()):
            raise ValueError("counter columns of the wrong length")
        for column, arr in arrays.items():
            self._parts[column].append(arr)
        for label, arr in extra.items():
            self._counters.setdefault(label, []).append((self._rows, arr))
        self._rows += n

    def build(self, meta: dict[str, Any] | None = None) -> Calls:
        idents = self._ident.values()
        col = {k: _joined(v, _DTYPES.get(k, (np.float64,))[0]) for k, v in self._parts.items()}
        keys = col["keys"]
        labels: dict[str, Labels] = {}
        by_column = list(zip(*idents, strict=True)) or [()] * len(STRING_COLUMNS)
        for string_column, values in zip(STRING_COLUMNS, by_column, strict=True):
            encode = Interner()
            per_ident = np.asarray(encode.codes(values), dtype=np.int32)
            codes = per_ident[keys] if idents else np.zeros(0, dtype=np.int32)
            labels[string_column] = Labels(codes, tuple(encode.values()))
        dur_ns: np.ndarray = np.multiply(col["dur_us"], 1e3)
        incl_ns: np.ndarray = np.multiply(col["incl_us"], 1e3)
        # A trace without nesting has inclusive time equal to self time.
        incl_ns = np.where(np.isnan(incl_ns), dur_ns, incl_ns)
        counters = {}
        for label, parts in self._counters.items():
            column = np.full(self._rows, np.nan)
            for start, arr in parts:
                column[start:start + arr.size] = arr
            counters[label] = column
        return Calls(name=labels["name"], op_type=labels["op_type"], provider=labels["provider"],
                       in_shapes=labels["in_shapes"], out_shapes=labels["out_shapes"],
                       dur_ns=dur_ns, total_ns=dur_ns.copy(), incl_ns=incl_ns,
                       device_ns=np.multiply(col["device_us"], 1e3), calls=np.ones(keys.size, dtype=np.int64),
                       flops=col["flops"], bytes=col["bytes"], int_ops=col["int_ops"], counters=counters,
                       meta=dict(meta or {}),
                       device_incl_ns=np.multiply(col["device_incl_us"], 1e3),
                       ts_ns=np.multiply(col["ts_us"], 1e3), pid=col["pid"], tid=col["tid"])


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    # one part (one extend, as most readers do) is the column as it is: a copy would be the peak's
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


_NUMERIC = ("keys", "dur_us", "incl_us", "device_us", "flops", "bytes", "int_ops", "device_incl_us", "ts_us",
            "pid", "tid")
# columns that are not float64 with NaN for unknown: their dtype and unknown value
_DTYPES: dict[str, tuple[Any, Any]] = {"keys": (np.int32, 0), "pid": (np.int64, -1), "tid": (np.int64, -1)}


def group_codes(table: Calls, grouping: str) -> np.ndarray:
    """One int64 code per row, equal for rows of one group of ``grouping`` (see :data:`GROUPINGS`)."""
    key = np.zeros(len(table), dtype=np.int64)
    for column in GROUPINGS[grouping]:
        labels = table.labels(column)
        # re-densified after each column, so the combined key never outgrows int64
        key = dense(key * max(len(labels.values), 1) + labels.codes)
    return key


def with_outer(table: Calls, parent: np.ndarray) -> Calls:
    """``table`` with its ``outer`` flags, given each row's enclosing row (``parent``, -1 for none):
    per grouping, a row is outer when no row around it belongs to its group."""
    if not (parent >= 0).any():
        return table
    return replace(table, outer={grouping: ~_same_around(parent, group_codes(table, grouping))
                                 for grouping in GROUPINGS})


def _same_around(parent: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Per row, whether a row around it has its group's code."""
    return any_ancestor(parent, lambda up, rows: code[up] == code[rows])


def from_profile(profile: RawProfile, meta: dict[str, Any] | None = None) -> Calls:
    """One row per measured call of every layer of a layerperf Profile (:meth:`Profile.calls`).

    A layer's counters hold one value per measured pass; when there is one per run, each call gets
    its run's value, otherwise every call gets the layer's median. A call's start is its span's
    (relative to the profile's origin), its thread the span's, its process ``metadata.pid``.
    """
    b = TableBuilder()
    idents = [b.ident(layer.name, layer.op_type, layer.provider, layer.in_shapes, layer.out_shapes)
              for layer in profile.layers]
    n_layers = len(profile.layers)
    flops = np.asarray([np.nan if la.flops is None else la.flops for la in profile.layers], dtype=np.float64)
    nbytes = np.asarray([np.nan if la.bytes is None else la.bytes for la in profile.layers], dtype=np.float64)
    int_ops = np.asarray([np.nan if la.int_ops is None else la.int_ops for la in profile.layers], dtype=np.float64)
    spans = [span for run in profile.runs for span in run.spans]
    run_of = [r for r, run in enumerate(profile.runs) for _ in run.spans]
    self_ns = profile.span_self_ns  # a control-flow layer's calls less their body's
    li = np.fromiter((s.layer for s in spans), dtype=np.int64, count=len(spans))
    ri = np.asarray(run_of, dtype=np.int64)
    counters = {}
    labels = list(dict.fromkeys(k for la in profile.layers for k in la.counters))
    for label in labels:
        per_run = np.full((n_layers, max(len(profile.runs), 1)), np.nan)
        for i, layer in enumerate(profile.layers):
            values = layer.counters.get(label) or []
            if len(values) == len(profile.runs):
                per_run[i, :len(values)] = values
            elif values:
                per_run[i, :] = float(np.median(values))
        counters[label] = per_run[li, ri] if li.size else np.zeros(0)
    ident_arr = np.asarray(idents, dtype=np.int32)
    pid = profile.metadata.pid
    b.extend(ident_arr[li] if li.size else np.zeros(0, dtype=np.int32),
             self_ns.astype(np.float64) / 1e3,
             incl_us=np.fromiter((s.dur_ns for s in spans), dtype=np.float64, count=len(spans)) / 1e3,
             flops=flops[li] if li.size else None, bytes_=nbytes[li] if li.size else None,
             int_ops=int_ops[li] if li.size else None, counters=counters,
             ts_us=np.fromiter((s.start_ns for s in spans), dtype=np.float64, count=len(spans)) / 1e3,
             pid=np.full(len(spans), int_id(pid), dtype=np.int64),
             tid=np.fromiter((s.tid for s in spans), dtype=np.int64, count=len(spans)))
    # tensor names let a diff pair nodes that graph transformations renamed (layerperf.analysis.matching)
    outputs = {layer.name: tuple(t.name for t in layer.outputs) for layer in profile.layers}
    # the ONNX nodes a compiled kernel computes (TVM's), anchor first: a fused kernel pairs with them
    covers = {layer.name: nodes for layer in profile.layers if (nodes := covered_nodes(layer.extension))}
    # the machine and thread count the run was taken on: which calibrated peaks its rates compare to
    measured = profile.measurement.intra_op_threads if profile.measurement is not None else None
    threads = measured or profile.metadata.threads
    machine = profile.metadata.machine
    table = b.build({"format": "layerperf", "runs": len(profile.runs), "events": len(li), "outputs": outputs,
                     **({"covers": covers} if covers else {}),
                     # the event each counter label counts (a perf config's labels are the user's own)
                     **({"counter_events": dict(profile.counters.events)} if profile.counters is not None else {}),
                     "inclusive_flops": profile.cost_nesting.rated_over_whole_call, "ts_origin_us": 0.0,
                     "machine": None if machine is None else machine.to_json(), "threads": threads, **(meta or {})})
    return with_outer(table, profile.span_parents)  # rows are the spans, in order


def covered_nodes(ext: object) -> tuple[str, ...]:
    """The ONNX nodes a layer's runtime says it computes, the one it is named after first (TVM's
    :class:`~layerperf.data.extension.TvmKernel`); () for a layer that says none."""
    if not isinstance(ext, TvmKernel) or not ext.nodes:
        return ()
    anchor = ext.anchor
    return (anchor, *(n for n in ext.nodes if n != anchor)) if anchor in ext.nodes else ext.nodes


def concat(tables: Sequence[Calls], meta: dict[str, Any] | None = None) -> Calls:
    """The rows of ``tables`` one after the other, as one table (string columns coded afresh; a counter
    a table lacks is NaN on its rows; ``meta`` the first table's unless given)."""
    if not tables:
        return empty(meta)
    if len(tables) == 1 and meta is None:
        return tables[0]

    def labels(column: str) -> Labels:
        index: dict[str, int] = {}
        codes = [recoded(t.labels(column), index) for t in tables]
        return Labels(np.concatenate(codes), tuple(index))

    def joined(get: Any) -> np.ndarray:
        return np.concatenate([np.asarray(get(t)) if get(t) is not None else np.full(len(t), np.nan) for t in tables])

    def figure(column: str) -> np.ndarray:
        return np.concatenate([getattr(t, column) for t in tables])

    counter_labels = list(dict.fromkeys(c for t in tables for c in t.counters))
    groupings = sorted({g for t in tables for g in t.outer})

    return Calls(
        name=labels("name"), op_type=labels("op_type"), provider=labels("provider"), in_shapes=labels("in_shapes"),
        out_shapes=labels("out_shapes"), dur_ns=figure("dur_ns"), total_ns=figure("total_ns"),
        incl_ns=figure("incl_ns"), device_ns=figure("device_ns"), flops=figure("flops"), bytes=figure("bytes"),
        int_ops=figure("int_ops"), calls=figure("calls"),
        counters={c: joined(lambda t, c=c: t.counters.get(c)) for c in counter_labels},
        meta=tables[0].meta if meta is None else meta, device_incl_ns=joined(lambda t: t.device_incl),
        outer={g: np.concatenate([t.outer.get(g, np.ones(len(t), dtype=bool)) for t in tables]) for g in groupings},
        ts_ns=figure("ts_ns"), pid=figure("pid"), tid=figure("tid"))


def recoded(labels: Labels, index: dict[str, int]) -> np.ndarray:
    """The rows of ``labels`` as codes of ``index`` (a string it lacks gets the next code)."""
    lut = np.asarray([index.setdefault(v, len(index)) for v in labels.values], dtype=np.int32)
    return lut[labels.codes] if lut.size else np.zeros(len(labels), dtype=np.int32)


def empty(meta: dict[str, Any] | None = None) -> Calls:
    return TableBuilder().build(meta)


def int_id(value: Any) -> int:
    """A process or thread id as the int64 of the ``pid``/``tid`` columns: an int, or a string of decimal
    digits (PyTorch 1.8 writes thread ids so), as it is; anything else -1 (unknown)."""
    if type(value) is str and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    if type(value) is float and value.is_integer():
        value = int(value)
    return value if type(value) is int and _INT64_MIN < value < _INT64_MAX else -1


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def shape_str(dims: Any) -> str:
    """``[1, 3, 224, 224]`` -> ``1x3x224x224``; ``[]`` -> ``scalar``; anything else -> ``?``."""
    if isinstance(dims, list | tuple):
        if not dims:
            return "scalar"
        if all(isinstance(d, int | str) and not isinstance(d, bool) for d in dims):
            return "x".join(str(d) for d in dims)
    return "?"
