"""A big PyTorch (Kineto) trace read by two processes before it is folded, as the other formats are.

The file is cut into stretches at event boundaries (:func:`layerperf.readers.gzsplit.stretches`, plain or
gzipped) that this process and a forked child share out (:func:`layerperf.readers.parallel.side_by_side`).
Each process spills the CPU records, op External ids and call correlations of every stretch it takes into
sorted runs of its own, and writes each stretch's device activities to a file, with row identities and
threads numbered per stretch. The parts then merge: identities and threads are renumbered into one
numbering in file order (the first stretch's, then what each next one adds: as one process reading the
whole file numbers them), a record's stretch is the high bits of its file-order ``seq``, and the stretches'
activities follow one another in file order. Anything unexpected returns None and the caller reads the file
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
from layerperf.readers.decode import KINETO
from layerperf.readers.dropped import Dropped
from layerperf.readers.kineto_collect import Cpu, Device, Kinds, Note, collect
from layerperf.readers.kineto_links import ACTIVITY, KEYED, PART_SHIFT, keyed  # a part in a position's high bits
from layerperf.readers.spill import Spill
from layerperf.readers.stream import EventStream
from layerperf.util.arrays import PartMaps

_COPY = 1 << 18  # activities copied at a time


@dataclass
class Part:
    """What one stretch of the trace gave: its activities' file, its identities and threads in order."""

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
    # kept for the GPU views only (``record``): the steps, the annotations
    windows: list[tuple[float, float]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


@dataclass
class Runs:
    """One process's sorted runs, spanning the stretches it took: CPU records, op External ids, call
    correlations, and (for the GPU views) the ops and calls with their times."""

    records: list[tuple[Path, int]] = field(default_factory=list)
    ops: list[tuple[Path, int]] = field(default_factory=list)
    calls: list[tuple[Path, int]] = field(default_factory=list)
    record_ops: list[tuple[Path, int]] = field(default_factory=list)
    record_calls: list[tuple[Path, int]] = field(default_factory=list)


class Reading:
    """One process's reading across the stretches it takes: the kinds it worked out, and spills whose runs
    span its stretches — as few as one process reading the whole file writes, however many stretches there
    are — moved up into ``directory`` once it has taken its last (:meth:`finish`)."""

    def __init__(self, directory: Path, record_dtype: np.dtype) -> None:
        self.directory = directory
        self.kinds = Kinds()
        self.spills = tuple(Spill(False, str(directory), dtype=d)
                            for d in (record_dtype, KEYED, KEYED, kineto_activities.OWNER, kineto_activities.CALL))

    def finish(self) -> Runs:
        """The runs, moved into the directory (the spills' own directories go)."""
        try:
            return Runs(*(_moved(s, self.directory) for s in self.spills))
        finally:
            for s in self.spills:
                s.close()


def read_part(stream: EventStream, reading: Reading, index: int, drain: Any, record: bool = False) -> Part:
    """Read one stretch (``drain``: :func:`layerperf.readers.kineto_stream._drain`) into ``reading``'s spills
    (``record``: also what :class:`~layerperf.readers.kineto_activities.Recorder` keeps)."""
    builder, threads, kinds = TableBuilder(), Interner(), reading.kinds
    kinds.unnumber()  # the identities are this stretch's own, numbered afresh
    spill, ops, calls, record_ops, record_calls = reading.spills
    cpu, dev = Cpu(), Device()
    steps: list[tuple[float, float]] = []
    notes: list[Note] = []
    keys: list[int] = []
    out = Part(reading.directory / f"activities{index}.bin", [], [])
    base = index << PART_SHIFT
    with out.activities.open("wb") as activities:
        seq = base

        def flush() -> None:
            nonlocal seq
            if len(cpu):
                out.min_ts = min(out.min_ts, float(cpu.column("ts_us").min()))
            op_ext: list[np.ndarray] = []
            runtime: list[np.ndarray] = []
            if record:
                keyed_threads = streaming.thread_keys(threads, keys)
                for mine, got in zip((record_ops, record_calls), kineto_activities.cpu_records(cpu, seq, keyed_threads),
                                     strict=True):
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

        stream.decode_as(KINETO)
        for chunk in stream.chunks():
            out.events += len(chunk)
            collect(chunk, kinds, threads, builder, cpu, dev, steps, out.dropped, notes)
            if len(cpu) >= streaming.DRAIN_ROWS or len(dev) >= streaming.DRAIN_ROWS:
                flush()
        flush()
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
                  record: bool = False) -> tuple[list[Part], list[Runs]] | None:
    """The trace read by two processes side by side: a part per stretch, in file order, and each process's
    runs; None when it can't be (the caller reads it in one)."""
    readings: dict[int, Reading] = {}  # per process, made there

    def mine() -> Reading:
        pid = os.getpid()
        if pid not in readings:  # made once a process (its spills' folders with it)
            readings[pid] = Reading(directory, record_dtype)
        return readings[pid]

    got = parallel.side_by_side(path, lambda stream, k: read_part(stream, mine(), k, drain, record),
                                finish=lambda: mine().finish())
    return None if got is None else (got[:-2], got[-2:])


def merged(parts: list[Part], runs: list[Runs], builder: TableBuilder, threads: Interner, spill: Spill, ops: Spill,
           calls: Spill, activities: Path) -> tuple[PartMaps, PartMaps]:
    """Adopt the processes' runs and join the parts' activities into one file, renumbered; the maps from each
    part's identity and thread codes to the merged ones."""
    for r in runs:
        spill.adopt(r.records)
        ops.adopt(r.ops)
        calls.adopt(r.calls)
    ident_maps, thread_maps = [], []
    with activities.open("wb") as out:
        for p in parts:
            imap = np.asarray(builder.ident_codes(p.idents), dtype=np.int64)
            ident_maps.append(imap)
            thread_maps.append(np.asarray(threads.codes(p.threads), dtype=np.int64))
            # plain reads a block at a time: a mapped file's pages read through would stay resident (~64
            # bytes per activity, 380 MiB at 30M events). Each read asks for what is left at most: asked for
            # a whole block, numpy allocates it and shrinks it to what the file held, and the heap kept the
            # shrunk pieces, part after part (142 MiB after a 10M-event trace's 64 parts, 437 at 30M)
            left = p.activities.stat().st_size // ACTIVITY.itemsize
            with p.activities.open("rb") as acts:
                while left and (block := np.fromfile(acts, dtype=ACTIVITY, count=min(_COPY, left))).size:
                    left -= block.size
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
