"""ONNX Runtime's own profiler file (``SessionOptions.enable_profiling``): the one reading of its format.

A JSON array of events: per run a ``model_run`` Session event, and per executed node a
``<node>_kernel_time`` Node event whose args give ``op_name``, ``provider``, the
``input_type_shape``/``output_type_shape`` seen at run time, the arena's memory figures and, with an
intra-op thread pool, ``thread_scheduling_stats``. Older releases wrap each kernel in
``<node>_fence_before``/``<node>_fence_after`` events, which time nothing and are skipped.
The nodes of a Loop, If or Scan body are node events within the parent's (:mod:`layerperf.data.nesting`):
they are named ``parent::node``.

It is read two ways, through the same parsing (the first section below):

- as node events per run, with all their arguments (:func:`split_runs`): what the ONNX Runtime
  backend builds a Profile's layers and runs from (:mod:`layerperf.backends.ort.layers`);
- as the event table ``layerperf analyze`` and ``diff`` use (:func:`read`; :func:`part` and
  :func:`merge` for a file read in parts), columnar, for files of millions of events. There a
  control-flow parent's self time is its duration less its body's, and its FLOPs per call the sum
  of its body calls' (unknown when any of theirs is). Bytes, FLOPs and integer operations come
  from :mod:`layerperf.cost` on the recorded shapes and element types. The profile has no node
  attributes, so they are given only for op types whose cost depends on shapes alone; the rest are
  unknown. ONNX Runtime leaves out inputs it pre-packed (a Gemm's or a QLinearConv's weights, say),
  so those ops stay unknown too. The profile has no graph either: a Conv that ran in the NCHWc
  layout (opt level all) counts the channels as stored, padding included (``layerperf profile``
  counts the real ones).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np

from layerperf.data.calls import Calls, Interner, TableBuilder, with_outer
from layerperf.data.nesting import CONTROL_FLOW_OPS, body_sums, depths, enclosing, open_order, qualify, self_times
from layerperf.data.tensor import TensorInfo
from layerperf.readers.decode import Args, fields
from layerperf.readers.dropped import Dropped
from layerperf.readers.ort_costs import Costs, listed_tensors, tensor_info
from layerperf.readers.stream import EventStream
from layerperf.readers.tef import (
    MAX_US,
    Idents,
    Part,
    Slices,
    column,
    count_not_objects,
    floats,
    raw_key,
    remapped,
    run_windows,
    thread_codes,
    thread_ids,
    to_ns,
)
from layerperf.readers.tef import Reading as TefReading

# -- the format --------------------------------------------------------------------------------------
KERNEL_SUFFIX = "_kernel_time"
RUN_EVENT = "model_run"
MEMORY_KEYS = (
    "activation_size", "parameter_size", "output_size", "mem_bytes_requested_in_use", "mem_bytes_in_use",
    "mem_in_use_peak", "mem_arena_held", "mem_requested_in_use_delta", "mem_in_use_delta",
    "mem_arena_held_delta",
)


def kernel_flags(cats: Iterable[Any], names: Iterable[Any]) -> list[bool]:
    """Which events time a node's kernel, from their ``cat`` and ``name`` fields (a column each: a
    million events are filtered at the speed of one list comprehension)."""
    return [cat == "Node" and type(name) is str and name.endswith(KERNEL_SUFFIX)
            for cat, name in zip(cats, names, strict=True)]


def run_flags(cats: Iterable[Any], names: Iterable[Any]) -> list[bool]:
    """Which events span a whole run, from their ``cat`` and ``name`` fields."""
    return [cat == "Session" and name == RUN_EVENT for cat, name in zip(cats, names, strict=True)]


def is_kernel_event(ev: Any) -> bool:
    """:func:`kernel_flags` of one event as parsed JSON."""
    return isinstance(ev, dict) and kernel_flags([ev.get("cat")], [ev.get("name")])[0]


def is_run_event(ev: Any) -> bool:
    """:func:`run_flags` of one event as parsed JSON."""
    return isinstance(ev, dict) and run_flags([ev.get("cat")], [ev.get("name")])[0]


def node_name(event_name: str) -> str:
    """The node a kernel event times: its name less the suffix."""
    return event_name[: -len(KERNEL_SUFFIX)] if event_name.endswith(KERNEL_SUFFIX) else event_name


def tensor_infos(shapes: Any, names: list[str],
                 known: dict[str, TensorInfo] | None = None) -> tuple[TensorInfo | None, ...]:
    """Pair the profiler's ``input_type_shape`` list with the node's input names.

    The profiler lists only inputs it still sees at run time: an omitted optional input has the
    empty name in the graph, and a weight a kernel pre-packed is left out. So positions are restored
    by walking the names: a ``known`` tensor (an initializer) takes its own shape and consumes the
    profiler's entry only when that entry matches it.
    """
    known = known or {}
    listed = [tensor_info("", elem_type, dims) for elem_type, dims in listed_tensors(shapes) or []]
    if not names:
        return tuple(listed)
    out: list[TensorInfo | None] = []
    pos = 0
    for name in names:
        if name in known:
            t = known[name]
            if pos < len(listed) and listed[pos].shape == t.shape:
                pos += 1
            out.append(t)
        elif name == "" or pos >= len(listed):
            out.append(None)
        else:
            got = listed[pos]
            pos += 1
            out.append(TensorInfo(name, got.shape, got.dtype))
    return tuple(out)


def memory_figures(args: dict[str, Any]) -> dict[str, int]:
    """The arena's figures a node event's arguments carry (bytes), those that are numbers."""
    out: dict[str, int] = {}
    for key in MEMORY_KEYS:
        if key in args:
            try:
                out[key] = int(args[key])
            except (TypeError, ValueError):
                continue
    return out


def pool_threads(args: dict[str, Any]) -> set[str] | None:
    """The intra-op pool workers that ran part of a node, from its ``thread_scheduling_stats``;
    None when the event has none (no pool, or an older release)."""
    stats = args.get("thread_scheduling_stats")
    if not isinstance(stats, dict):
        return None
    subs = stats.get("sub_threads")
    return {str(k) for k in subs} if isinstance(subs, dict) else set()


# -- node events per run: what the ONNX Runtime backend builds layers from ------------------------------
@dataclass(slots=True)
class NodeEvent:
    """One node call. ``name`` is the layer name: a body node's is qualified by its parent's
    (``loop::add``); ``node`` is the name in its own graph; ``parent`` the enclosing layer's name."""

    name: str
    op_type: str
    provider: str
    ts_us: int
    dur_us: int
    tid: int
    args: dict[str, Any]
    node: str = ""
    parent: str | None = None


@dataclass(slots=True)
class RunEvents:
    ts_us: int
    dur_us: int
    nodes: list[NodeEvent] = field(default_factory=list)
    events: int = 0  # every profiler event within the run (nodes, subgraph executions...)


def _node(ev: dict[str, Any]) -> NodeEvent:
    args = ev.get("args") or {}
    name = node_name(str(ev["name"]))
    return NodeEvent(name=name, op_type=str(args.get("op_name", "")), provider=str(args.get("provider", "")),
                     ts_us=int(ev["ts"]), dur_us=int(ev["dur"]), tid=int(ev.get("tid", 0)), args=args, node=name)


def split_runs(events: list[Any]) -> list[RunEvents]:
    """Group kernel events (parsed JSON) into runs by the ``model_run`` event whose extent holds them."""
    runs = sorted((RunEvents(int(e["ts"]), int(e["dur"])) for e in events if is_run_event(e)),
                  key=lambda r: r.ts_us)
    starts = [r.ts_us for r in runs]
    for ev in events:
        i = _run_of(ev, runs, starts)
        if i is None:
            continue
        runs[i].events += 1
        if is_kernel_event(ev):
            runs[i].nodes.append(_node(ev))
    for run in runs:
        nest(run)
    return runs


def _run_of(ev: Any, runs: list[RunEvents], starts: list[int]) -> int | None:
    if not isinstance(ev, dict) or not isinstance(ev.get("ts"), int | float):
        return None
    ts = ev["ts"]
    i = bisect.bisect_right(starts, ts) - 1
    return i if i >= 0 and ts <= runs[i].ts_us + runs[i].dur_us else None


def nest(run: RunEvents) -> None:
    """Sort a run's node calls as they opened and qualify body nodes by the parent they ran in."""
    nodes = run.nodes
    tid, ts, dur = (np.asarray([getattr(n, f) for n in nodes], dtype=np.int64) for f in ("tid", "ts_us", "dur_us"))
    order = open_order(tid, ts, dur).tolist()
    run.nodes = [nodes[i] for i in order]
    flow = np.asarray([n.op_type in CONTROL_FLOW_OPS for n in run.nodes], dtype=bool)
    if not flow.any():
        return
    sorted_cols = (tid[order], ts[order], dur[order])
    parent = enclosing(*sorted_cols, flow).tolist()
    for i, p in enumerate(parent):  # a parent opens before its children: already qualified
        if p >= 0:
            node = run.nodes[i]
            node.parent = run.nodes[p].name
            node.name = qualify(node.parent, node.node)


def pool_workers(runs: Iterable[RunEvents]) -> int | None:
    """Distinct intra-op pool workers that ran part of a node (:func:`pool_threads`) over all runs;
    None when no event carries the figures."""
    seen: set[str] = set()
    stats_found = False
    for run in runs:
        for node in run.nodes:
            threads = pool_threads(node.args)
            if threads is not None:
                stats_found = True
                seen |= threads
    return len(seen) if stats_found else None


# -- the event table: what layerperf analyze and diff read -------------------------------------------
FIELDS = ("name", "pid", "tid", "ts", "dur", "args")
# what a node event's row identity is made of (with its name), read with one C call per event
ARG_KEY = attrgetter("op_name", "provider", "input_type_shape", "output_type_shape", "layerperf_counters")


def _arg_key(args: Args) -> tuple[Any, ...]:
    return raw_key(*ARG_KEY(args))


_OTHER, _KERNEL, _RUN = 0, 1, 2


def _kinds(cats: list[Any], names: list[Any], known: dict[tuple[Any, Any], int]) -> list[int]:
    """Per event: a node's kernel, a run, or other — looked up per distinct (cat, name), in C (a
    profile's names repeat run after run); :func:`kernel_flags` and :func:`run_flags` say what each is."""
    pairs = list(zip(cats, names, strict=True))
    try:
        return list(map(known.__getitem__, pairs))
    except KeyError:
        pass
    except TypeError:  # an unhashable name: decided event by event
        return _each(cats, names)
    try:
        new = {pair for pair in set(pairs) if pair not in known}  # (a set less the dict's keys would walk them all)
    except TypeError:
        return _each(cats, names)
    for pair in new:
        k, r = kernel_flags([pair[0]], [pair[1]])[0], run_flags([pair[0]], [pair[1]])[0]
        known[pair] = _KERNEL if k else _RUN if r else _OTHER
    return list(map(known.__getitem__, pairs))


def _each(cats: list[Any], names: list[Any]) -> list[int]:
    return [_KERNEL if k else _RUN if r else _OTHER
            for k, r in zip(kernel_flags(cats, names), run_flags(cats, names), strict=True)]


class Reading(TefReading):
    """What reading worked out of the events so far — their identities, numbered in the order met, with
    their FLOPs and bytes — kept for the next stretch a process reads (worked out once per process, not
    once per stretch: a node's shapes are parsed and costed once)."""

    def __init__(self) -> None:
        super().__init__()
        self.costs = Costs(self.builder, node_name)
        self.idents = Idents(self.costs.make, _arg_key)
        self.kinds: dict[tuple[Any, Any], int] = {}


def part(stream: EventStream, slices: Slices | None = None, threads: Interner | None = None,
         reading: Reading | None = None) -> Part:
    """Read a stretch of an ONNX Runtime profile; :func:`merge` turns parts read in order into the table
    (``slices``, ``threads``: as :func:`layerperf.readers.tef.part` takes them; ``reading``: what this
    process's earlier stretches worked out — the part then carries the identities its earlier parts did
    not, see :class:`layerperf.readers.tef.Part`)."""
    reading = Reading() if reading is None else reading
    costs, idents, kinds = reading.costs, reading.idents, reading.kinds
    threads = Interner() if threads is None else threads
    slices = Slices() if slices is None else slices
    n_events = runs = 0
    windows: list[tuple[float, float]] = []
    for chunk in stream.chunks():
        n_events += len(chunk)
        kind = _kinds(column(chunk, "cat"), column(chunk, "name"), kinds)
        n_runs = kind.count(_RUN)
        if n_runs:
            runs += n_runs
            marks = list(compress(chunk, map(_RUN.__eq__, kind)))
            start, length = floats(column(marks, "ts")), floats(column(marks, "dur"))
            usable = (np.abs(start) < MAX_US) & (length > 0) & (length < MAX_US)  # NaN compares False
            windows.extend(zip(start[usable].tolist(), length[usable].tolist(), strict=True))
        n_nodes = kind.count(_KERNEL)
        nodes = chunk if n_nodes == len(chunk) else list(compress(chunk, map(_KERNEL.__eq__, kind)))
        name, pid, tid, ts, dur, args = fields(nodes, FIELDS)
        codes = np.fromiter(idents.codes(name, args), dtype=np.int64, count=n_nodes)
        flops, nbytes = costs.arrays()
        slices.add(thread_codes(threads, pid, tid), ts, dur, codes, flops[codes], nbytes[codes], name)
        if n_nodes + kind.count(_RUN) < len(chunk):  # other events: any item that is no event object is one
            others = list(compress(chunk, map(_OTHER.__eq__, kind)))
            count_not_objects(others, column(others, "ph"), slices.dropped)
    new, base = reading.new_idents()
    # the counts and integer operations this stretch worked out (later ones, as in one reading, win)
    touched, costs.touched = costs.touched, set()
    counters = {k: costs.counters[k] for k in touched if k in costs.counters}
    int_ops = {k: costs.int_ops[k] for k in touched if k in costs.int_ops}
    return Part(new, threads.values(), slices.joined(), {}, [], n_events, runs, counters, int_ops, slices.dropped,
                ident_base=base, reading=reading.process, run_windows=windows)


def run_meta(parts: Sequence[Part]) -> dict[str, Any]:
    """What the trace says of its runs: their count, and where each ran (its model_run events, as ns on the
    table's clock: the file's zero) when every run it counts has a usable one and they follow one another:
    runs called from several threads at once (their windows overlap, each holding the others' nodes) or
    nested are only counted."""
    windows = [w for p in parts for w in p.run_windows]
    runs = sum(p.runs for p in parts)
    out: dict[str, Any] = {"runs": runs}
    if windows and len(windows) == runs:
        spans = run_windows(windows, 0.0)
        if all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False)):
            out["run_windows_ns"], out["run_windows_by"] = spans, "model_run"
    return out


def merge(parts: Sequence[Part], meta: dict[str, Any] | None = None, *, origin_us: float | None = None) -> Calls:
    """The table of parts read in file order (``origin_us``: ignored, the file's zero is the origin)."""
    builder = TableBuilder()
    threads = Interner()
    columns = [remapped(p, builder, threads) for p in parts]
    thread, ts_us, dur_us, ident, flops, nbytes = (np.concatenate([c[i] for c in columns]) for i in range(6))
    counters = _counter_columns(parts, builder, ident)
    int_ops = _int_ops_column(parts, builder, ident)
    self_us, ident, flops, parent = _nest(builder, thread, ts_us, dur_us, ident.astype(np.int64), flops)
    pid, tid = thread_ids(threads.values(), thread.astype(np.int64))
    # times are relative to the profiler's start already: the file's zero is the origin
    builder.extend(ident.astype(np.int32), self_us, incl_us=dur_us, flops=flops, bytes_=nbytes, int_ops=int_ops,
                   counters=counters, ts_us=to_ns(ts_us) / 1e3, pid=pid, tid=tid)
    info: dict[str, Any] = {"format": "ort", "events": sum(p.events for p in parts), **run_meta(parts),
                            "inclusive_flops": True, "ts_origin_us": 0.0}
    dropped = Dropped()
    for p in parts:
        dropped.merge(p.dropped)
    if dropped:
        info["dropped"] = dropped.doc()
    table = builder.build({**info, **(meta or {})})
    return table if parent is None else with_outer(table, parent)  # rows are the calls, in order


def _nest(builder: TableBuilder, thread: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray, ident: np.ndarray,
          flops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Self time (µs), identity and FLOPs of each call once control-flow bodies are nested in their
    parents, and each call's enclosing call (None when nothing nests)."""
    flow_ident = np.asarray([t[1] in CONTROL_FLOW_OPS for t in builder.idents()], dtype=bool)
    flow = flow_ident[ident] if ident.size else np.zeros(0, dtype=bool)
    if not flow.any():
        return dur_us, ident, flops, None
    start = to_ns(ts_us)
    end = start + to_ns(dur_us)
    parent = enclosing(thread.astype(np.int64), start, end - start, flow)
    self_ns = self_times(parent, start, end)
    return self_ns / 1e3, _qualified(builder, ident, parent), body_sums(parent, flops, flow), parent


def _qualified(builder: TableBuilder, ident: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Identities of body calls renamed ``parent::node``, outermost first (a parent is renamed first)."""
    out = ident.copy()
    depth = depths(parent)
    for d in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == d)
        pairs, inverse = np.unique(np.stack([out[parent[rows]], ident[rows]]), axis=1, return_inverse=True)
        idents = builder.idents()
        codes = []
        for p, own in pairs.T.tolist():
            name, *rest = idents[own]
            codes.append(builder.ident(qualify(idents[p][0], name), *rest))
        out[rows] = np.asarray(codes, dtype=np.int64)[inverse.reshape(-1)]
    return out


def _int_ops_column(parts: Sequence[Part], builder: TableBuilder, ident: np.ndarray) -> np.ndarray:
    """Per row, its node's integer operations (NaN: unknown), from each part's per-identity figure."""
    values = np.full(len(builder.idents()), np.nan)
    for p in parts:
        if not p.ident_int_ops:
            continue
        codes = builder.ident_codes(p.idents)
        for local, count in p.ident_int_ops.items():
            values[codes[local]] = count
    return values[ident.astype(np.int64)] if ident.size else np.zeros(0)


def _counter_columns(parts: Sequence[Part], builder: TableBuilder, ident: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, the counts layerperf's drop-in session wrote for its node (NaN: not counted)."""
    per_ident: dict[int, dict[str, float]] = {}
    for p in parts:
        if not p.ident_counters:
            continue
        codes = builder.ident_codes(p.idents)
        for local, counts in p.ident_counters.items():
            per_ident[codes[local]] = counts
    labels = list(dict.fromkeys(label for counts in per_ident.values() for label in counts))
    columns = {}
    for label in labels:
        values = np.full(len(builder.idents()), np.nan)
        for code, counts in per_ident.items():
            values[code] = counts.get(label, np.nan)
        columns[label] = values[ident.astype(np.int64)]
    return columns


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> Calls:
    return merge([part(stream)], meta)
