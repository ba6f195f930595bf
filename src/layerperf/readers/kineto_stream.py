"""A PyTorch (Kineto) trace folded in bounded memory: :mod:`layerperf.readers.kineto`'s figures, streamed.

Kineto writes every CPU operator first and the runtime calls that launched kernels after them, so no
op's self time is known before the end of the file. As for the other formats
(:mod:`layerperf.readers.streaming`), each CPU event becomes a record spilled in sorted runs, the runs
are merged by thread and start and cut where nothing is open, and each segment's rows — self time,
inclusive time, FLOPs counted on the outermost op, device self and inclusive time — are computed by
the rules of :func:`layerperf.readers.kineto.read` and folded. Linking device activities to ops needs
every op's External id first: the activities and the ids go to files (:mod:`layerperf.readers.kineto_links`)
and before the segments each activity is resolved to the op with its External id, or through its runtime
call's correlation to the op with that call's External id, or to the op around that call (found in the
call's segment); what links to nothing is a row of its own, as in the whole-file reading. Memory is one
segment, the accumulators, and a block of the linking files. For the GPU views the activities are kept
on disk with their launching call and op (:mod:`layerperf.readers.kineto_activities`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.data.calls import Calls, Interner, TableBuilder, with_outer
from layerperf.data.fold import Folded
from layerperf.data.nesting import outermost
from layerperf.readers import kineto, kineto_activities, kineto_links, kineto_parts, streaming, twofold
from layerperf.readers.decode import KINETO
from layerperf.readers.devices import from_skeleton
from layerperf.readers.dropped import Dropped
from layerperf.readers.kineto_collect import Cpu, Device, Kinds, Note, collect
from layerperf.readers.kineto_links import DiskLinks
from layerperf.readers.spill import Spill, temp_dir
from layerperf.readers.stream import EventStream, open_events
from layerperf.readers.tef import thread_ids, to_ns
from layerperf.util.arrays import PartMaps, unique_inverse
from layerperf.util.malloc_trim import trim

RECORD = np.dtype([("thread_key", "<i8"), ("ts_us", "<f8"), ("nonzero", "i1"), ("neg_dur", "<f8"), ("seq", "<i8"),
                   ("thread", "<i4"), ("ident", "<i4"), ("is_op", "?"), ("flops", "<f8"), ("bytes", "<f8"),
                   ("external", "<i8"), ("correlation", "<i8")])
_NONE = -1


def _drain(cpu: Cpu, spill: Spill, threads: Interner, keys: list[int], seq: int,
           op_ext: list[np.ndarray], runtime: list[np.ndarray]) -> int:
    """Move the CPU events gathered so far into the spill; keep what linking needs (the ops' External
    ids and the runtime calls' correlation and External ids, each with its position in the trace)."""
    n = len(cpu)
    if not n:
        return seq
    rec = spill.space(n)  # every field set below
    thread = cpu.column("thread")
    dur = cpu.column("dur_us")
    rec["thread_key"] = streaming.thread_keys(threads, keys)[thread]
    rec["ts_us"], rec["nonzero"], rec["neg_dur"] = cpu.column("ts_us"), dur != 0, -dur
    is_op, ext, corr, pos = cpu.column("is_op"), cpu.column("external"), cpu.column("correlation"), seq + np.arange(n)
    rec["seq"], rec["thread"], rec["ident"], rec["is_op"] = pos, thread, cpu.column("ident"), is_op
    rec["flops"], rec["bytes"] = cpu.column("flops"), cpu.column("bytes")
    rec["external"], rec["correlation"] = ext, corr
    ops = is_op & (ext != _NONE)
    op_ext.append(np.stack([ext[ops], pos[ops]]))
    calls = ~is_op & (corr != _NONE)
    runtime.append(np.stack([corr[calls], ext[calls], pos[calls]]))
    cpu.clear()
    return seq + n


def fold(stream: EventStream, meta: dict[str, Any], *, quantiles: bool = False, path: Path | None = None,
         split: bool = False, activities: bool = False, sink: Any = None) -> Folded:
    """The Kineto trace ``stream`` reads, folded (see the module's docstring): the activities linked through
    files (:mod:`layerperf.readers.kineto_links`); with ``split`` the file at ``path`` is read by two processes
    (:mod:`layerperf.readers.kineto_parts`; ``stream`` is then only its start). ``activities``: the device
    activities on disk with their launching calls and ops, the step windows and the annotations, for the GPU
    views and the per-kernel view (``meta["activities"]``, a
    :class:`~layerperf.readers.kineto_activities.DiskActivities` the caller closes).
    ``sink``: handed each table of calls as it is folded."""
    recorder = kineto_activities.Recorder(temp_dir()) if activities else None
    try:
        folded = _fold(stream, meta, Folded(quantiles=quantiles, sink=sink), path, split, recorder)
    except BaseException:
        if recorder is not None:
            recorder.close()
        raise
    return folded


def _fold(stream: EventStream, meta: dict[str, Any], folded: Folded, path: Path | None, split: bool,
          recorder: kineto_activities.Recorder | None) -> Folded:
    with Spill(False, temp_dir(), dtype=RECORD) as spill, \
            Spill(False, str(spill.dir), dtype=kineto_links.KEYED) as ops, \
            Spill(False, str(spill.dir), dtype=kineto_links.KEYED) as calls:
        parts = None
        split = split and path is not None
        if split:  # ``stream`` was opened only to tell the format
            stream.close()
        if split:
            parts = kineto_parts.two_processes(path, spill.dir, _drain, RECORD,  # type: ignore[arg-type]
                                               record=recorder is not None)
        if parts is not None:
            read = _Read.of_parts(*parts, stream, spill, ops, calls, recorder)
        else:
            read = _read_one(open_events(path) if split else stream, spill, ops, calls, recorder)  # type: ignore[arg-type]
        origin = 0.0 if not np.isfinite(read.min_ts) else float(read.min_ts)
        for sp in (spill, ops, calls) + ((recorder.ops, recorder.calls) if recorder is not None else ()):
            sp.flush()  # its last run written and its buffer let go (read in parts, the parts did it)
        trim()  # the reading's freed blocks back to the system, before the folding (and its helper's fork)
        folded.declare(read.builder.idents())
        links = DiskLinks(spill.dir, _activities_path(spill, recorder), ops, calls, recorder)
        try:
            if recorder is not None:
                recorder.link()
            folded = _fold_segments(folded, spill, read, links, origin, two=recorder is None)
            for table in _lone_tables(read.builder, links, origin):
                folded.add(table)
        finally:
            links.close()
        if recorder is not None:
            recorder.finish()
    info: dict[str, Any] = {"format": "kineto", "events": read.n_events, "device_events": read.n_dev,
                            "device_unlinked": links.unlinked, "runs": read.steps or None, "ts_origin_us": origin,
                            "inclusive_flops": True, "streamed": True, "total_ns": folded.total_ns,
                            "spilled_records": read.records}
    if read.dropped:
        info["dropped"] = read.dropped.doc()
    if recorder is not None:
        info.update(kineto_activities.view_meta(recorder, read.builder.idents(), origin, read.windows, read.notes))
    if devices := from_skeleton(read.skeleton):
        info["devices"] = devices
    if parts is not None:
        info["processes"], info["stretches"] = 2, len(parts[0])
    folded.meta = {**info, **meta}
    return folded


def _fold_segments(folded: Folded, spill: Spill, read: _Read, links: DiskLinks, origin: float,
                   two: bool) -> Folded:
    """The CPU segments folded in (by two processes where it pays and ``two``: not while the links' runtime
    calls are recorded for the GPU views)."""
    def table_of(seg: np.ndarray) -> Calls:
        return _segment_table(seg, read.builder, read.threads, links, origin, read.n_dev > 0)

    def reset() -> None:
        links.orphans = []

    folded, orphans = twofold.fold_all(lambda: _segments(spill, origin, read.maps), table_of, folded,
                                       read.records if two else 0, extra=lambda: links.orphans, reset=reset)
    links.orphans.extend(orphans or [])
    return folded


@dataclass
class _Read:
    """What reading the trace gave, in one process or two."""

    builder: TableBuilder
    threads: Interner
    n_events: int
    n_dev: int
    records: int
    steps: int
    min_ts: float
    dropped: Dropped
    skeleton: Any
    maps: tuple[PartMaps, PartMaps] | None = None  # the parts' identity and thread codes, merged
    windows: list[tuple[float, float]] = field(default_factory=list)  # the steps (one process only)
    notes: list[Note] = field(default_factory=list)  # the annotations (likewise)

    @classmethod
    def of_parts(cls, parts: list[kineto_parts.Part], runs: list[kineto_parts.Runs], stream: EventStream,
                 spill: Spill, ops: Spill, calls: Spill, recorder: kineto_activities.Recorder | None) -> _Read:
        builder, threads = TableBuilder(), Interner()
        maps = kineto_parts.merged(parts, runs, builder, threads, spill, ops, calls, _activities_path(spill, recorder))
        if recorder is not None:
            recorder.adopt([x for r in runs for x in r.record_ops], [x for r in runs for x in r.record_calls], maps[0])
        dropped = Dropped()
        for p in parts:
            dropped.merge(p.dropped)
        tail = parts[-1].skeleton
        skeleton = {**stream.head, **tail} if isinstance(stream.head, dict) and isinstance(tail, dict) else \
            stream.head
        return cls(builder, threads, sum(p.events for p in parts), sum(p.device for p in parts),
                   sum(p.records for p in parts), sum(p.steps for p in parts), min(p.min_ts for p in parts), dropped,
                   skeleton, maps, windows=[w for p in parts for w in p.windows],
                   notes=[n for p in parts for n in p.notes])


def _activities_path(spill: Spill, recorder: kineto_activities.Recorder | None) -> Path:
    return recorder.activities if recorder is not None else spill.dir / "activities.bin"


def _read_one(stream: EventStream, spill: Spill, ops: Spill, calls: Spill,
              recorder: kineto_activities.Recorder | None = None) -> _Read:
    """Read the whole trace in this process (``recorder``: keeping what the GPU views need too)."""
    builder, threads = TableBuilder(), Interner()
    cpu, dev, kinds = Cpu(), Device(), Kinds()
    steps: list[tuple[float, float]] = []
    dropped = Dropped()
    notes: list[Note] = []
    keys: list[int] = []
    op_ext: list[np.ndarray] = []
    runtime: list[np.ndarray] = []
    seq = n_events = n_dev = 0
    min_ts = np.inf
    with _activities_path(spill, recorder).open("wb") as activities:

        def drain() -> int:
            if recorder is not None:
                recorder.cpu(cpu, seq, streaming.thread_keys(threads, keys))
            new = _drain(cpu, spill, threads, keys, seq, op_ext, runtime)
            # the ids go to files, sorted there by id then position (the first op or call with an id links)
            for ext, pos in op_ext:
                ops.add(kineto_links.keyed(ext, pos))
            for corr, ext, pos in runtime:
                calls.add(kineto_links.keyed(corr, pos, value=ext))
            op_ext.clear()
            runtime.clear()
            return new

        def take() -> float:
            got = len(dev)
            low = float(dev.column("ts_us").min()) if got else np.inf
            if got:
                rec = np.empty(got, dtype=kineto_links.ACTIVITY)
                for name in rec.dtype.names or ():
                    rec[name] = dev.column(name)
                rec.tofile(activities)
                dev.clear()
            return low

        stream.decode_as(KINETO)
        for chunk in stream.chunks():
            n_events += len(chunk)
            collect(chunk, kinds, threads, builder, cpu, dev, steps, dropped, notes)
            if len(cpu) >= streaming.DRAIN_ROWS:
                min_ts = min(min_ts, float(cpu.column("ts_us").min()))
                seq = drain()
            if len(dev) >= streaming.DRAIN_ROWS:
                n_dev += len(dev)
                min_ts = min(min_ts, take())
        if len(cpu):
            min_ts = min(min_ts, float(cpu.column("ts_us").min()))
        seq = drain()
        n_dev += len(dev)
        min_ts = min(min_ts, take())
    return _Read(builder, threads, n_events, n_dev, seq, len(steps), min_ts, dropped, stream.skeleton,
                 windows=steps if recorder is not None else [],
                 notes=notes if recorder is not None else [])


def _lone_tables(builder: TableBuilder, links: DiskLinks, origin: float) -> Any:
    """Rows of their own for the activities that link to no op, as the whole-file reading makes them."""
    for recs in links.lone_blocks():
        yield _lone_rows(builder, recs["ident"], to_ns(recs["dur_us"]).astype(np.float64), recs["ts_us"],
                         recs["pid"], recs["tid"], origin)


def _segments(spill: Spill, origin: float, maps: tuple[PartMaps, PartMaps] | None) -> Any:
    """The CPU records in nesting order (``maps``: renumbered from the parts' codes), cut where nothing is
    open (:func:`streaming.cuts`)."""
    pieces: list[np.ndarray] = []  # joined once there are enough (not block by block: quadratic)
    held, need = 0, streaming.SEGMENT_RECORDS
    for block in spill.sorted_blocks():
        pieces.append(block if maps is None else kineto_parts.renumbered(block, maps))
        held += block.size
        if held <= need:  # a cut at the need falls before a record: one past it must be held
            continue
        recs = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        pieces.clear()
        start = to_ns(recs["ts_us"] - origin)
        done = 0
        for cut in streaming.cuts(recs["thread_key"], start, start + to_ns(-recs["neg_dur"])):
            yield recs[done:cut]
            done = cut
        pieces.append(recs[done:])
        held = pieces[0].size
        need = streaming.next_need(held)
    if held:
        yield np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


def _segment_table(seg: np.ndarray, builder: TableBuilder, threads: Interner, links: DiskLinks, origin: float,
                   has_device: bool) -> Calls:
    """One segment's rows, as :func:`layerperf.readers.kineto.read` makes them."""
    thread = seg["thread"].astype(np.int64)
    start = to_ns(seg["ts_us"] - origin)
    end = start + to_ns(-seg["neg_dur"])
    is_op = seg["is_op"]
    parent, self_ns = kineto.nesting(thread, start, end, is_op, seg["ident"] >= 0)
    device = np.zeros(seg.size)
    ext = seg["external"]
    at = np.clip(np.searchsorted(links.ext, ext), 0, max(links.ext.size - 1, 0))
    # the first op with an External id takes its device time (as the whole-file reading links it)
    hit = is_op & (links.ext[at] == ext) & (links.ext_first[at] == seg["seq"]) if links.ext.size else \
        np.zeros(seg.size, bool)
    device[hit] = links.ext_ns[at[hit]]
    corr = seg["correlation"]
    at = np.clip(np.searchsorted(links.around, corr), 0, max(links.around.size - 1, 0))
    # the first call with a correlation id hands its activities' time to the op around it
    calls = np.flatnonzero(~is_op & (links.around[at] == corr) & (corr != _NONE)
                           & (links.around_first[at] == seg["seq"])) if links.around.size else np.zeros(0, np.int64)
    if calls.size:
        op = kineto._enclosing_op(parent, is_op, calls)
        has_op = op >= 0
        np.add.at(device, op[has_op], links.around_ns[at[calls[has_op]]])
        links.orphaned(corr[calls[~has_op]])
        found = np.maximum(op, 0)
        links.around_calls(corr[calls], seg["seq"][calls], np.where(has_op, seg["seq"][found], _NONE),
                           np.where(has_op, seg["ident"][found], _NONE).astype(np.int64))
    links.release()
    incl = _inclusive(parent, device)
    idents = seg["ident"].astype(np.int64)
    rows = np.flatnonzero(idents >= 0)
    pid, tid = thread_ids(threads.values(), thread[rows])
    flops, moved = outermost(seg["flops"], parent), outermost(seg["bytes"], parent)
    b, local = _builder_of(builder, idents[rows])
    b.extend(local, self_ns[rows] / 1e3, incl_us=(end - start)[rows] / 1e3,
             device_us=device[rows] / 1e3 if has_device else None, flops=flops[rows], bytes_=moved[rows],
             device_incl_us=incl[rows] / 1e3 if has_device else None, ts_us=start[rows] / 1e3, pid=pid, tid=tid)
    return with_outer(b.build({"inclusive_flops": True}), kineto._row_parents(parent, rows))


def _inclusive(parent: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Per event, its own device time plus that of every event nested in it."""
    out = np.zeros(parent.size)
    at = np.flatnonzero(own)
    values = own[at]
    while at.size:
        np.add.at(out, at, values)
        at = parent[at]
        keep = at >= 0
        at, values = at[keep], values[keep]
    return out


def _builder_of(builder: TableBuilder, ident: np.ndarray) -> tuple[TableBuilder, np.ndarray]:
    """A builder holding the identities of ``builder`` that the codes ``ident`` name, in their order, and the
    codes in it (a segment's table names only its own: a trace of 250,000 distinct ops would cost that many
    in every segment)."""
    used, local = unique_inverse(ident)
    b = TableBuilder()
    b.ident_codes(builder.idents_of(used.tolist()))
    return b, local


def _lone_rows(builder: TableBuilder, ident: np.ndarray, dur_ns: np.ndarray, ts_us: np.ndarray, pid: np.ndarray,
               tid: np.ndarray, origin: float) -> Calls:
    b, local = _builder_of(builder, ident.astype(np.int64))
    b.extend(local, np.zeros(dur_ns.size), incl_us=dur_ns / 1e3, device_us=dur_ns / 1e3,
             ts_us=to_ns(ts_us - origin) / 1e3,
             pid=pid.astype(np.int64), tid=tid.astype(np.int64))
    return b.build({"inclusive_flops": True})
