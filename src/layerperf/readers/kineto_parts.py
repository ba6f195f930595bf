"""A big PyTorch (Kineto) trace read by two processes before it is folded, as the other formats are.

The file is cut in two at an event boundary (:func:`layerperf.readers.gzsplit.split`, plain or gzipped);
a forked child reads the second stretch while this process reads the first, each spilling its CPU records,
op External ids and call correlations into sorted runs and writing its device activities to a file of its
own, with row identities and threads numbered locally. The parts then merge: identities and threads are
renumbered into one numbering in file order (the first part's, then what the second adds: as one process
reading the whole file numbers them), a record's part is the high bits of its file-order ``seq``, and the
second part's activities follow the first's. Anything unexpected returns None and the caller reads the file
in one process (which also reports any error at its true spot).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.data.calls import Interner, TableBuilder
from layerperf.readers import kineto_activities, parallel, streaming
from layerperf.readers.dropped import Dropped
from layerperf.readers.kineto_collect import Cpu, Device, Kinds, collect
from layerperf.readers.kineto_links import ACTIVITY, KEYED, PART_SHIFT, keyed  # a part in a position's high bits
from layerperf.readers.spill import Spill
from layerperf.readers.stream import EventStream
from layerperf.util.arrays import PartMaps

_COPY = 1 << 18  # activities copied at a time


@dataclass
class Part:
    """What one stretch of the trace gave: its runs and files, and its identities and threads in order."""

    runs: list[tuple[Path, int]]
    op_runs: list[tuple[Path, int]]
    call_runs: list[tuple[Path, int]]
    activities: Path
    idents: list[Any]
    threads: list[Any]
    events: int = 0
    device: int = 0
    records: int = 0
    steps: int = 0
    min_ts: float = np.inf
    dropped: Dropped = field(default_factory=Dropped)
    skeleton: Any = None
    # kept for the GPU views only (``record``): the ops and calls with their times, the steps, the annotations
    record_op_runs: list[tuple[Path, int]] = field(default_factory=list)
    record_call_runs: list[tuple[Path, int]] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)
    notes: list[tuple[str, bool, float, float]] = field(default_factory=list)


def read_part(stream: EventStream, directory: Path, index: int, drain: Any, record_dtype: np.dtype,
              record: bool = False, kinds: Kinds | None = None) -> Part:
    """Read one stretch (``drain``: :func:`layerperf.readers.kineto_stream._drain`), spilling into
    ``directory`` (``record``: also what :class:`~layerperf.readers.kineto_activities.Recorder` keeps;
    ``kinds``: what the process worked out of the events of its earlier stretches)."""
    builder, threads = TableBuilder(), Interner()
    if kinds is None:
        kinds = Kinds()
    kinds.unnumber()  # the identities are this stretch's own, numbered afresh
    cpu, dev = Cpu(), Device()
    steps: list[tuple[float, float]] = []
    notes: list[tuple[str, bool, float, float]] = []
    keys: list[int] = []
    out = Part([], [], [], directory / f"activities{index}.bin", [], [])
    base = index << PART_SHIFT
    with Spill(False, str(directory), dtype=record_dtype) as spill, \
            Spill(False, str(directory), dtype=KEYED) as ops, Spill(False, str(directory), dtype=KEYED) as calls, \
            Spill(False, str(directory), dtype=kineto_activities.OWNER) as record_ops, \
            Spill(False, str(directory), dtype=kineto_activities.CALL) as record_calls, \
            out.activities.open("wb") as activities:
        # the spills' own directories are removed on leaving: their runs are moved up into ``directory``
        seq = base

        def flush() -> None:
            nonlocal seq
            if len(cpu):
                out.min_ts = min(out.min_ts, float(cpu.column("ts_us").min()))
            op_ext: list[np.ndarray] = []
            runtime: list[np.ndarray] = []
            if record:
                for mine, got in zip((record_ops, record_calls), kineto_activities.cpu_records(cpu, seq), strict=True):
                    mine.add(got)
            seq = drain(cpu, spill, threads, keys, seq, op_ext, runtime)
            for ext, pos in op_ext:
                ops.add(keyed(ext, pos))
            for corr, ext, pos in runtime:
                calls.add(keyed(corr, pos, value=ext))
            if len(dev):
                out.device += len(dev)
                out.min_ts = min(out.min_ts, float(dev.column("ts_us").min()))
                rec = np.empty(len(dev), dtype=ACTIVITY)
                for name in rec.dtype.names or ():
                    rec[name] = dev.column(name)
                rec.tofile(activities)
                dev.clear()

        for chunk in stream.chunks():
            out.events += len(chunk)
            collect(chunk, kinds, threads, builder, cpu, dev, steps, out.dropped, notes)
            if len(cpu) >= streaming.DRAIN_ROWS or len(dev) >= streaming.DRAIN_ROWS:
                flush()
        flush()
        out.runs, out.op_runs, out.call_runs = (_moved(s, directory) for s in (spill, ops, calls))
        out.record_op_runs, out.record_call_runs = _moved(record_ops, directory), _moved(record_calls, directory)
    out.records, out.steps = seq - base, len(steps)
    if record:
        out.windows, out.notes = steps, notes
    out.idents, out.threads, out.skeleton = builder.idents(), threads.values(), stream.skeleton
    return out


def _moved(spill: Spill, directory: Path) -> list[tuple[Path, int]]:
    """The spill's runs, moved into ``directory`` (which outlives the spill's own)."""
    spill.flush()
    runs = []
    for path, n in spill.runs:
        target = directory / f"{spill.dir.name}-{path.name}"
        path.rename(target)
        runs.append((target, n))
    return runs


def two_processes(path: Path, directory: Path, drain: Any, record_dtype: np.dtype,
                  record: bool = False) -> list[Part] | None:
    """The trace read by two processes side by side, a part per stretch, in file order; None when it can't
    be (the caller reads it in one)."""
    kinds: dict[int, Kinds] = {}  # per process: its events' kinds, worked out once for all its stretches

    def read(stream: EventStream, k: int) -> Part:
        return read_part(stream, directory, k, drain, record_dtype, record, kinds.setdefault(os.getpid(), Kinds()))

    return parallel.side_by_side(path, read)


def merged(parts: list[Part], builder: TableBuilder, threads: Interner, spill: Spill, ops: Spill, calls: Spill,
           activities: Path) -> tuple[PartMaps, PartMaps]:
    """Adopt the parts' runs and join their activities into one file, renumbered; the maps from each part's
    identity and thread codes to the merged ones."""
    ident_maps, thread_maps = [], []
    with activities.open("wb") as out:
        for p in parts:
            imap = np.asarray(builder.ident_codes(p.idents), dtype=np.int64)
            ident_maps.append(imap)
            thread_maps.append(np.asarray(threads.codes(p.threads), dtype=np.int64))
            spill.adopt(p.runs)
            ops.adopt(p.op_runs)
            calls.adopt(p.call_runs)
            # plain reads a block at a time: a mapped file's pages read through would stay resident (~64
            # bytes per activity, 380 MiB at 30M events)
            with p.activities.open("rb") as acts:
                while (block := np.fromfile(acts, dtype=ACTIVITY, count=_COPY)).size:
                    block["ident"] = np.where(block["ident"] >= 0, imap[np.maximum(block["ident"], 0)], -1) \
                        if imap.size else block["ident"]
                    block.tofile(out)
            p.activities.unlink()
    return PartMaps(ident_maps), PartMaps(thread_maps)


def renumbered(block: np.ndarray, maps: tuple[PartMaps, PartMaps]) -> np.ndarray:
    """Records of any part with the merged identity and thread codes (in place; ``maps``: of :func:`merged`)."""
    part = block["seq"] >> PART_SHIFT
    block["ident"] = maps[0](part, block["ident"])
    block["thread"] = maps[1](part, block["thread"])
    return block
