"""Analysis of a trace of any size in bounded memory: events folded into per-op accumulators.

``layerperf analyze`` and ``diff`` need, per group of calls, sums, counts, extremes and medians — not
the calls themselves. So an ONNX Runtime profile or any Trace Event Format file is read like this:

1. events are decoded a chunk at a time (a big file by two processes that share its stretches out,
   :func:`layerperf.readers.parallel.side_by_side`; a gzipped one inflated ahead on a thread) and each
   timed event becomes a fixed-size record, spilled to disk in sorted runs (:mod:`layerperf.readers.spill`);
2. the runs are merged in the order the nesting rule opens events (thread, start, longer first);
3. that stream is cut into *segments* where nothing is open on the thread — no event before the cut
   ends after it — so each segment holds whole nesting trees, and the reader's own table code
   (self time, control-flow bodies, inclusive sums, per-grouping outer flags) runs on each segment
   exactly as on the whole file;
4. each segment's calls are folded into a :class:`~layerperf.data.fold.Folded` and dropped.

Memory is the records of one segment plus the accumulators: a segment ends at the first safe cut past
:data:`SEGMENT_RECORDS`, so it is as small as the trace's longest top-level call allows (one run of a
model at most, in the traces profilers write). Every figure equals the whole-file table's; medians are
exact for groups of up to 4096 calls and within 0.5% beyond (:mod:`layerperf.data.sketch`).
PyTorch (Kineto) traces are folded by :mod:`layerperf.readers.kineto_stream` the same way; layerperf's own are
read whole (:func:`layerperf.readers.detect.read_table`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from layerperf.data.calls import Interner, TableBuilder
from layerperf.data.fold import Folded
from layerperf.readers import ort, parallel, tef
from layerperf.readers.dropped import B_WITHOUT_E, E_WITHOUT_B, Dropped
from layerperf.readers.spill import RECORD, Spill, temp_dir
from layerperf.readers.stream import EventStream, open_events
from layerperf.readers.tef import Idents, Part, Slices
from layerperf.util.arrays import PartMaps, unique_inverse
from layerperf.util.malloc_trim import trim

SEGMENT_RECORDS = 1 << 16  # records a segment holds at least before it is cut (where it safely can be); 1 << 18 folded
# 15-27% slower (a segment's columns fall out of cache) and held ~50 MiB more
DRAIN_ROWS = 1 << 16  # timed events gathered before they become records (fewer, larger numpy steps)
_SEQ_PART = 40  # a record's file order: its part in the high bits, its place in the part below


def thread_key(value: Any) -> int:
    """The same int64 for the same (pid, tid) in every process: what records sort by first."""
    pid, tid = value if isinstance(value, tuple) and len(value) == 2 else (value, None)
    high = zlib.crc32(repr(pid).encode()) & 0x7FFFFFFF
    return (high << 32) | zlib.crc32(repr(tid).encode())


def thread_keys(threads: Interner, keys: list[int]) -> np.ndarray:
    """The key (:func:`thread_key`) of each of ``threads``' codes; ``keys`` holds those worked out before and
    is extended by those of the codes added since (a reading that drains chunk after chunk keys each thread
    once)."""
    if len(keys) < len(threads.table):
        keys.extend(thread_key(v) for v in threads.values()[len(keys):])
    return np.asarray(keys, dtype=np.int64)


class SpillSlices(Slices):
    """Slices that hand each chunk's timed events on to a spill as records, keeping none."""

    def __init__(self, spill: Spill, threads: Interner, part_index: int) -> None:
        super().__init__()
        self.spill, self.threads, self.part_index = spill, threads, part_index
        self.keys: list[int] = []
        self.seq = 0
        self.pending = 0
        self.min_ts_us = np.inf

    def add(self, thread: Any, ts_us: Any, dur_us: Any, ident: Any, flops: Any, nbytes: Any,
            names: Sequence[Any] | None = None) -> None:
        super().add(thread, ts_us, dur_us, ident, flops, nbytes, names)
        self.pending += len(ts_us)
        if self.pending >= DRAIN_ROWS:
            self.drain()

    def add_columns(self, columns: tuple[np.ndarray, ...]) -> None:
        super().add_columns(columns)
        self.drain()

    def drain(self) -> None:
        """Hand what was gathered on to the spill."""
        self.pending = 0
        if not self.ts_us:
            return
        columns = (self.thread, self.ts_us, self.dur_us, self.ident, self.flops, self.nbytes)
        thread, ts, dur, ident, flops, nbytes = (np.concatenate(c) if len(c) > 1 else c[0] for c in columns)
        for c in columns:
            c.clear()
        if not ts.size:
            return
        rec = np.zeros(ts.size, dtype=RECORD)
        thread = thread.astype(np.int64)
        rec["thread_key"] = thread_keys(self.threads, self.keys)[thread]
        rec["ts_us"], rec["nonzero"], rec["neg_dur"] = ts, dur != 0, -dur
        rec["seq"] = (self.part_index << _SEQ_PART) + self.seq + np.arange(ts.size)
        rec["thread"], rec["ident"], rec["flops"], rec["bytes"] = thread, ident, flops, nbytes
        rec["part"] = self.part_index
        self.seq += ts.size
        self.min_ts_us = min(self.min_ts_us, float(ts.min()))
        self.spill.add(rec)


@dataclass
class _Spilled:
    """What one stretch gave (a process reads several): the part (without columns), its runs, its earliest
    start."""

    part: Part
    runs: list[tuple[Path, int]]
    min_ts_us: float


def _spill_part(stream: EventStream, reader: ModuleType, directory: Path, part_index: int,
                zero_first: bool, reading: Any = None) -> _Spilled:
    spill = Spill(zero_first, str(directory))  # inside the parent's directory: removed with it
    threads = Interner()
    slices = SpillSlices(spill, threads, part_index)
    part = reader.part(stream, slices, threads, reading)
    slices.drain()
    spill.flush()
    return _Spilled(part, spill.runs, slices.min_ts_us)


def fold(path: Path, reader: ModuleType, stream: EventStream | None, meta: dict[str, Any], *,
         split: bool, quantiles: bool = False, sink: Any = None) -> Folded:
    """The trace at ``path`` (``reader``: :mod:`~layerperf.readers.ort` or :mod:`~layerperf.readers.tef`)
    folded; ``stream`` the file opened at its events (None when ``split``: two processes read it); ``sink``
    handed each table folded (:class:`~layerperf.data.fold.Folded`)."""
    zero_first = reader is ort
    with Spill(zero_first, temp_dir()) as spill:
        spilled = _two_processes(path, reader, spill.dir, zero_first) if split else None
        if spilled is None:
            spilled = [_spill_part(stream or open_events(path), reader, spill.dir, 0, zero_first)]
        for s in spilled:
            spill.adopt(s.runs)
        trim()  # the reading's freed blocks back to the system before the folding
        return _fold_sorted(spill, spilled, reader, meta, quantiles, sink)


def _two_processes(path: Path, reader: ModuleType, directory: Path, zero_first: bool) -> list[_Spilled] | None:
    readings: dict[int, Any] = {}  # per process: the reader's Reading, carried from stretch to stretch

    def read(stream: EventStream, k: int) -> _Spilled:
        if os.getpid() not in readings:  # made once a process
            readings[os.getpid()] = reader.Reading()
        return _spill_part(stream, reader, directory, k, zero_first, readings[os.getpid()])

    return parallel.side_by_side(path, read, even=False)  # their events cost alike: a gzipped one cut in two


def _fold_sorted(spill: Spill, spilled: list[_Spilled], reader: ModuleType, meta: dict[str, Any],
                 quantiles: bool, sink: Any = None) -> Folded:
    builder, threads = TableBuilder(), Interner()
    ident_maps, which = _ident_maps([s.part for s in spilled], builder)
    thread_maps = [np.asarray(threads.codes(s.part.threads), dtype=np.int64) for s in spilled]
    dropped = Dropped()
    for s in spilled:
        dropped.merge(s.part.dropped)
    counters: dict[int, dict[str, float]] = {}
    int_ops: dict[int, float] = {}
    for s, w in zip(spilled, which, strict=True):
        counters.update({int(ident_maps[w][k]): v for k, v in s.part.ident_counters.items()})
        int_ops.update({int(ident_maps[w][k]): v for k, v in s.part.ident_int_ops.items()})
    extra = _cross_pairs([s.part for s in spilled], builder, threads, dropped)
    if extra[0].size:  # sorted in with the rest: they may enclose, or lie in, events of any part
        which.append(len(ident_maps))
        ident_maps.append(np.arange(len(builder.idents()), dtype=np.int64))
        thread_maps.append(np.arange(len(threads.table), dtype=np.int64))
        spill.add(_records(extra, len(spilled), threads))
    origin = min([s.min_ts_us for s in spilled] + ([float(extra[1].min())] if extra[1].size else []))
    origin = 0.0 if not np.isfinite(origin) else origin

    folded = Folded(quantiles=quantiles, sink=sink)
    folded.declare(builder.idents())
    # the counters in the order the table read whole has them (segments bring them in time order)
    folded.counter_labels = list(dict.fromkeys(label for counts in counters.values() for label in counts))
    proto = Part(builder.idents(), threads.values(), (), {}, [], 0, ident_counters=counters, ident_int_ops=int_ops)
    maps = (PartMaps(ident_maps, which), PartMaps(thread_maps))

    # in this process: the merge, not the tables, is what costs here (a fold helper saved nothing)
    idents, thread_values = builder.idents(), threads.values()
    for columns in _segments(spill, maps, origin):
        folded.add(reader.merge([_segment_part(proto, columns, idents, thread_values)], {}, origin_us=origin))
    parts = [s.part for s in spilled]
    info: dict[str, Any] = {"format": "ort" if reader is ort else "tef", "events": sum(p.events for p in parts),
                            "ts_origin_us": 0.0 if reader is ort else origin, "streamed": True,
                            "total_ns": folded.total_ns, "spilled_records": spill.records}
    if reader is ort:
        info.update(ort.run_meta(parts), inclusive_flops=True)
    if len(spilled) > 1:  # read in stretches by two processes (parallel.side_by_side)
        info["processes"], info["stretches"] = 2, len(spilled)
    if dropped:
        info["dropped"] = dropped.doc()
    folded.meta = {**info, **meta}
    return folded


def _segment_part(proto: Part, columns: tuple[np.ndarray, ...], idents: list[Any], threads: list[Any]) -> Part:
    """A segment's rows as a part naming only the identities they have (a merge costs per identity it is
    given: a trace of 300,000 distinct ops would cost that many in every segment)."""
    used, local = unique_inverse(columns[3])
    codes = used.tolist()
    counters, int_ops = proto.ident_counters, proto.ident_int_ops
    return replace(proto, idents=[idents[c] for c in codes], threads=threads,
                   columns=(*columns[:3], local, *columns[4:]),
                   ident_counters={j: counters[c] for j, c in enumerate(codes) if c in counters} if counters else {},
                   ident_int_ops={j: int_ops[c] for j, c in enumerate(codes) if c in int_ops} if int_ops else {})


def _ident_maps(parts: list[Part], builder: TableBuilder) -> tuple[list[np.ndarray], list[int]]:
    """Per process that read parts, the map from its identity codes to ``builder``'s, and per part the index of
    its process's map: each part's new identities numbered in file order (as one reading of the whole file
    numbers them), appended to its process's map."""
    codes: dict[int, list[int]] = {}
    for p in parts:
        mine = codes.setdefault(p.reading, [])
        if len(mine) != p.ident_base:  # the parts of a process come in the order it read them
            raise ValueError("a part's identities do not follow its process's earlier ones")
        mine.extend(builder.ident_codes(p.idents))
    order = list(codes)
    return [np.asarray(codes[r], dtype=np.int64) for r in order], [order.index(p.reading) for p in parts]


def _cross_pairs(parts: list[Part], builder: TableBuilder, threads: Interner,
                 dropped: Dropped) -> tuple[np.ndarray, ...]:
    """B/E pairs that span two parts (as :func:`layerperf.readers.tef.merge` joins them), as columns in
    the global codes; every B never closed and E never opened is counted."""
    slices = Slices()
    carry: dict[Any, list[Any]] = {}
    idents = Idents(tef.generic_key(builder), tef.arg_key)
    for p in parts:
        loose: list[Any] = []
        if p.loose_e:
            tef.add_timed(tef.pairs(p.loose_e, ["E"] * len(p.loose_e), carry, loose), threads, idents, slices)
        for ev in loose:
            dropped.add(E_WITHOUT_B, 1, ev.name)
        for key, stack in p.open_b.items():
            carry.setdefault(key, []).extend(stack)
    for stack in carry.values():
        for ev in stack:
            dropped.add(B_WITHOUT_E, 1, ev.name)
    dropped.merge(slices.dropped)
    thread, ts, dur, ident, flops, nbytes = slices.joined()
    return thread.astype(np.int64), ts, dur, ident.astype(np.int64), flops, nbytes


def _records(columns: tuple[np.ndarray, ...], part_index: int, threads: Interner) -> np.ndarray:
    """Records of columns (thread, ts, dur, ident, flops, bytes) already in the global codes."""
    thread, ts, dur, ident, flops, nbytes = columns
    rec = np.zeros(ts.size, dtype=RECORD)
    rec["thread_key"] = thread_keys(threads, [])[thread]
    rec["ts_us"], rec["nonzero"], rec["neg_dur"] = ts, dur != 0, -dur
    rec["seq"] = (part_index << _SEQ_PART) + np.arange(ts.size)
    rec["thread"], rec["ident"], rec["flops"], rec["bytes"], rec["part"] = thread, ident, flops, nbytes, part_index
    return rec


def _segments(spill: Spill, maps: tuple[PartMaps, PartMaps], origin_us: float) -> Iterator[tuple[np.ndarray, ...]]:
    """The records in nesting order, in global codes, as columns (thread, ts, dur, ident, flops, bytes),
    cut where nothing is open on the thread."""
    pieces: list[tuple[np.ndarray, ...]] = []  # joined once there are enough (not block by block: quadratic)
    held, need = 0, SEGMENT_RECORDS
    for block in spill.sorted_blocks():
        pieces.append(_columns(block, maps))
        held += block.size
        if held <= need:  # a cut at the need falls before a record: one past it must be held
            continue
        cols = _joined(pieces)
        pieces.clear()
        done = 0
        for cut in _cuts(cols, origin_us):
            yield tuple(c[done:cut] for c in cols[:6])
            done = cut
        pieces.append(tuple(c[done:] for c in cols) if done else cols)
        held = pieces[0][0].size
        need = next_need(held)
    if held:
        yield _joined(pieces)[:6]


def next_need(left: int) -> int:
    """Records to hold before the next try at a cut, ``left`` held uncut: a segment's worth in all, or twice
    what is held when a call open across it all left most of it uncut (so that a call spanning the trace is
    joined a logarithmic number of times, not once per block)."""
    return max(SEGMENT_RECORDS, 2 * left)


def _joined(pieces: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    return pieces[0] if len(pieces) == 1 else tuple(np.concatenate(c) for c in zip(*pieces, strict=True))


def _columns(block: np.ndarray, maps: tuple[PartMaps, PartMaps]) -> tuple[np.ndarray, ...]:
    part = block["part"]
    return (maps[1](part, block["thread"]), block["ts_us"].copy(), -block["neg_dur"], maps[0](part, block["ident"]),
            block["flops"].copy(), block["bytes"].copy(), block["thread_key"].copy())


def _cuts(cols: tuple[np.ndarray, ...], origin_us: float) -> list[int]:
    """Where to cut the stream into segments of about :data:`SEGMENT_RECORDS` (:func:`cuts`)."""
    _, ts, dur, *_rest, key = cols
    start = tef.to_ns(ts - origin_us)
    return cuts(key, start, start + tef.to_ns(dur))


def cuts(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[int]:
    """Where to cut records (by thread ``key``, then start; ns as the table computes them: ``to_ns`` of
    the start from the origin, plus ``to_ns`` of the duration) into segments of about
    :data:`SEGMENT_RECORDS`: at the first safe place past each such stretch (:func:`safe_cuts`)."""
    safe = safe_cuts(key, start, end)
    out: list[int] = []
    done = 0
    while True:
        k = int(np.searchsorted(safe, done + SEGMENT_RECORDS))
        if k >= safe.size:
            return out
        done = int(safe[k])
        out.append(done)


def safe_cuts(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The indices before which the stream can be cut: on its thread no earlier event ends after the
    event starts, and it starts later than the event before it (so a group of events starting in the
    same ns stays together whatever their order)."""
    n = start.size
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = key[1:] != key[:-1]
    bounds = np.flatnonzero(new_thread).tolist() + [n]
    ok = np.zeros(n, dtype=bool)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        run_max = np.maximum.accumulate(end[a:b])
        ok[a + 1:b] = (start[a + 1:b] >= run_max[:-1]) & (start[a + 1:b] > start[a:b - 1])
        ok[a] = True
    ok[0] = False
    return np.flatnonzero(ok)
