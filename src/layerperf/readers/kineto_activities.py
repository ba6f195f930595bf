"""A PyTorch trace's device activities on disk, each with the runtime call and the op that launched it:
the GPU views' source (:class:`~layerperf.analysis.gpu.source.Activities`) for a trace of any size.

While :func:`layerperf.readers.kineto_stream.fold` reads the trace, a :class:`Recorder` keeps in its own
temporary directory the activities as they come (file order), each op's External id with its identity
and position, and each runtime call's correlation id with its start, duration and thread, the ids sorted on
disk (:class:`~layerperf.readers.spill.Spill`). After the reading each activity is resolved a block at a
time, by binary search over those sorted files, by the rules of the whole-file reading
(:func:`layerperf.readers.kineto.read`): the op with its External id, else the op with its runtime
call's External id, else the op around that call — known only once the CPU segments have gone by
(:meth:`Recorder.around_calls`), then written into place. :class:`DiskActivities` serves them in any
order a block at a time, sorted through a spill. Memory: a few blocks whatever the trace's size; disk: ~100
bytes per activity (~210 while a view sorts them) and 50-160 per op and per runtime call.
"""

from __future__ import annotations

import contextlib
import mmap
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.data.calls import KernelTable, Labels
from layerperf.readers import kineto
from layerperf.readers.kineto_collect import Cpu, Note
from layerperf.readers.kineto_links import ACTIVITY, BLOCK, NONE, PART_SHIFT, Mapped, classify
from layerperf.readers.spill import Spill
from layerperf.readers.tef import run_windows, to_ns
from layerperf.util.arrays import PartMaps

_SORT = [("thread_key", "<i8"), ("ts_us", "<f8"), ("nonzero", "i1"), ("neg_dur", "<f8"), ("seq", "<i8")]
OWNER = np.dtype([*_SORT, ("op", "<i8"), ("ident", "<i8")])  # an op (or a call's op) by id, then position
# a runtime call by correlation (``thread``: its thread's key, :func:`layerperf.readers.streaming.thread_key`)
CALL = np.dtype([*_SORT, ("ext", "<i8"), ("start_us", "<f8"), ("dur_us", "<f8"), ("thread", "<i8")])
LINK = np.dtype([("owner", "<i8"), ("launcher", "<i8"), ("launch_ts_us", "<f8"), ("launch_dur_us", "<f8"),
                 ("launch_thread", "<i8")])
# an activity as the views read it (KernelTable's columns, ns on the trace's clock), with the sort fields
VIEW = np.dtype([*_SORT, ("ident", "<i8"), ("launcher", "<i8"), ("dur_ns", "<f8"), ("ts_ns", "<f8"),
                 ("stream", "<i8"), ("correlation", "<i8"), ("launch_ts_ns", "<f8"), ("launch_dur_ns", "<f8"),
                 ("bytes", "<f8"), ("owner", "<i8"), ("launch_thread", "<i8")])
_INT_KEYS = ("stream", "correlation", "owner", "launch_thread")


class Recorder:
    """What the views need of the activities, gathered while the trace is read (see the module's docstring)."""

    def __init__(self, directory: str | None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="layerperf-activities-", dir=directory))
        self.activities = self.dir / "activities.bin"
        self.links = self.dir / "links.bin"
        self.ops = Spill(False, str(self.dir), dtype=OWNER)
        self.calls = Spill(False, str(self.dir), dtype=CALL)
        self.launched = Spill(False, str(self.dir), dtype=OWNER)
        self.waiting = Spill(False, str(self.dir), dtype=OWNER)
        self.ident_maps: PartMaps | None = None  # read in parts: each part's identities, renumbered

    def cpu(self, cpu: Cpu, seq: int, thread_keys: np.ndarray) -> None:
        """Note the ops' External ids and the runtime calls among CPU events numbered from ``seq``
        (``thread_keys``: the key of each of their thread codes)."""
        ops, calls = cpu_records(cpu, seq, thread_keys)
        self.ops.add(ops)
        self.calls.add(calls)

    def adopt(self, op_runs: list[tuple[Path, int]], call_runs: list[tuple[Path, int]],
              ident_maps: PartMaps) -> None:
        """Take over what the parts of a trace read by two processes noted (``ident_maps``: each part's
        identity codes in the merged numbering)."""
        self.ops.adopt(op_runs)
        self.calls.adopt(call_runs)
        self.ident_maps = ident_maps

    def link(self) -> None:
        """Each activity's launching call and, where its ids say, its op (a block at a time, file order)."""
        ops = _sorted(self.ops, self.dir / "ops.bin", ("op", "ident"), self.ident_maps)
        calls = _sorted(self.calls, self.dir / "calls.bin", ("ext", "start_us", "dur_us", "thread"))
        acts = Mapped(self.activities, ACTIVITY)
        try:
            with self.links.open("wb") as out:
                for lo in range(0, acts.size, BLOCK):
                    block = acts.array[lo:lo + BLOCK]
                    _link_block(block, lo, ops.array, calls.array, self.waiting).tofile(out)
                    for m in (acts, ops, calls):
                        m.release()
        finally:
            for m in (acts, ops, calls):
                m.close()

    def around_calls(self, corr: np.ndarray, call_seq: np.ndarray, op_seq: np.ndarray, ident: np.ndarray) -> None:
        """Runtime calls whose activities wait on the op around them: that op (-1: none) and its identity."""
        rec = np.zeros(corr.size, dtype=OWNER)
        rec["thread_key"], rec["seq"], rec["op"], rec["ident"] = corr, call_seq, op_seq, ident
        self.launched.add(rec)

    def finish(self) -> None:
        """Write the op around each waiting activity's call (the first call with its correlation) into place."""
        launched = _sorted(self.launched, self.dir / "launched.bin", ("op", "ident"))
        waiting = _sorted(self.waiting, self.dir / "waiting.bin", ("seq",))
        try:
            if waiting.size and launched.size:
                _patch(self.links, waiting, launched)
        finally:
            launched.close()
            waiting.close()
        for spill in (self.ops, self.calls, self.launched, self.waiting):
            spill.close()

    def close(self) -> None:
        for spill in (self.ops, self.calls, self.launched, self.waiting):
            spill.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def cpu_records(cpu: Cpu, seq: int, thread_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ops with an External id (OWNER: the id, position, identity) and the runtime calls (CALL: the
    correlation id, position, External id, start, duration, thread key) among CPU events numbered from
    ``seq`` (``thread_keys``: the key of each thread code)."""
    pos = seq + np.arange(len(cpu), dtype=np.int64)
    is_op, ext, corr = cpu.column("is_op"), cpu.column("external"), cpu.column("correlation")
    at = np.flatnonzero(is_op & (ext != NONE))
    ops = np.zeros(at.size, dtype=OWNER)
    ops["thread_key"], ops["seq"], ops["op"], ops["ident"] = ext[at], pos[at], pos[at], cpu.column("ident")[at]
    at = np.flatnonzero(~is_op & (corr != NONE))
    calls = np.zeros(at.size, dtype=CALL)
    calls["thread_key"], calls["seq"], calls["ext"] = corr[at], pos[at], ext[at]
    calls["start_us"], calls["dur_us"] = cpu.column("ts_us")[at], cpu.column("dur_us")[at]
    calls["thread"] = thread_keys[cpu.column("thread")[at]]
    return ops, calls


def _sorted(spill: Spill, path: Path, fields: tuple[str, ...], ident_maps: PartMaps | None = None) -> Mapped:
    """The spill's records by id, then position: the id as ``key`` and ``fields``, one mapped file
    (``ident_maps``: records of a part renumbered into the merged identities, by the part in their position's
    high bits)."""
    dtype = np.dtype([("key", "<i8"), *((f, spill.dtype[f]) for f in fields)])
    with path.open("wb") as f:
        for block in spill.sorted_blocks():
            out = np.empty(block.size, dtype=dtype)
            out["key"] = block["thread_key"]
            for name in fields:
                out[name] = block[name]
            if ident_maps is not None:
                out["ident"] = ident_maps(block["seq"] >> PART_SHIFT, out["ident"])
            out.tofile(f)
    return Mapped(path, dtype)


def _first(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each wanted id first is in the sorted ``keys``, and whether it is there at all."""
    if not keys.size:
        return np.zeros(wanted.size, dtype=np.int64), np.zeros(wanted.size, dtype=bool)
    at = np.clip(np.searchsorted(keys, wanted), 0, keys.size - 1)
    return at, (keys[at] == wanted) & (wanted != NONE)


def _link_block(block: np.ndarray, lo: int, ops: np.ndarray, calls: np.ndarray, waiting: Spill) -> np.ndarray:
    links = classify(block["external"], block["correlation"], ops["key"], calls["key"], calls["ext"])
    out = np.zeros(block.size, dtype=LINK)
    out["owner"] = out["launcher"] = NONE
    owned = np.flatnonzero(links.target != NONE)
    at, _ = _first(ops["key"], links.target[owned])
    if owned.size:
        out["owner"][owned], out["launcher"][owned] = ops["op"][at], ops["ident"][at]
    has = links.has_call
    out["launch_ts_us"] = np.where(has, calls["start_us"][links.at] if calls.size else np.nan, np.nan)
    out["launch_dur_us"] = np.where(has, calls["dur_us"][links.at] if calls.size else np.nan, np.nan)
    out["launch_thread"] = np.where(has, calls["thread"][links.at] if calls.size else NONE, NONE)
    around = np.flatnonzero(links.around)
    rec = np.zeros(around.size, dtype=OWNER)
    rec["thread_key"], rec["seq"] = block["correlation"][around], lo + around
    waiting.add(rec)
    return out


def _patch(path: Path, waiting: Mapped, launched: Mapped) -> None:
    """Set owner and launcher of the waiting activities (by correlation) from the calls' ops."""
    with path.open("r+b") as f, contextlib.closing(mmap.mmap(f.fileno(), 0)) as mapped:
        links = np.frombuffer(mapped, dtype=LINK)
        try:
            for lo in range(0, waiting.size, BLOCK):
                block = waiting.array[lo:lo + BLOCK]
                at, hit = _first(launched.array["key"], block["key"])
                rows = block["seq"][hit]
                links["owner"][rows] = launched.array["op"][at[hit]]
                links["launcher"][rows] = launched.array["ident"][at[hit]]
                waiting.release()
                launched.release()
            mapped.flush()
        finally:
            del links


class DiskActivities:
    """The recorded activities, served a block at a time in any order (see the module's docstring);
    :meth:`close` removes their files."""

    def __init__(self, recorder: Recorder, idents: list[Any], origin_us: float) -> None:
        self.dir = recorder.dir
        self._acts, self._links = recorder.activities, recorder.links
        self.origin_us = origin_us
        self.size = self._acts.stat().st_size // ACTIVITY.itemsize if self._acts.exists() else 0
        seen_ident, seen_launcher = self._first_seen()
        self._labels = {k: _codes(seen_ident, [i[k] for i in idents]) for k in range(3)}
        self._launcher = _codes(seen_launcher, [i[0] for i in idents])

    def __len__(self) -> int:
        return self.size

    def _raw(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first index, activities, links) a block at a time, in file order."""
        if not self.size:
            return
        with self._acts.open("rb") as acts, self._links.open("rb") as links:
            for lo in range(0, self.size, BLOCK):
                n = min(BLOCK, self.size - lo)  # what is left at most (see kineto_parts.merged)
                yield lo, np.fromfile(acts, dtype=ACTIVITY, count=n), np.fromfile(links, dtype=LINK, count=n)

    def _first_seen(self) -> tuple[list[int], list[int]]:
        """The identities and launching ops' identities in the order they first come."""
        ident: dict[int, None] = {}
        launcher: dict[int, None] = {}
        for _, acts, links in self._raw():
            for seen, codes in ((ident, acts["ident"]), (launcher, links["launcher"])):
                values, first = np.unique(codes, return_index=True)
                for v in values[np.argsort(first, kind="stable")].tolist():
                    seen.setdefault(int(v))
        return list(ident), list(launcher)

    def _views(self, by: tuple[str, ...]) -> Iterator[np.ndarray]:
        for lo, acts, links in self._raw():
            rec = np.zeros(acts.size, dtype=VIEW)
            rec["seq"] = lo + np.arange(acts.size)
            rec["ident"], rec["launcher"], rec["owner"] = acts["ident"], links["launcher"], links["owner"]
            rec["dur_ns"] = to_ns(acts["dur_us"])
            rec["ts_ns"] = to_ns(acts["ts_us"] - self.origin_us)
            rec["stream"], rec["correlation"], rec["bytes"] = acts["tid"], acts["correlation"], acts["bytes"]
            known = ~np.isnan(links["launch_ts_us"])
            rec["launch_ts_ns"] = rec["launch_dur_ns"] = np.nan
            rec["launch_ts_ns"][known] = to_ns(links["launch_ts_us"][known] - self.origin_us)
            rec["launch_dur_ns"][known] = to_ns(links["launch_dur_us"][known])
            rec["launch_thread"] = np.where(known, links["launch_thread"], NONE)
            _keys(rec, rec, by)
            yield rec

    def blocks(self, *by: str) -> Iterator[KernelTable]:
        for block in self._sorted(self._views(by), VIEW, by):
            yield self._table(block)

    def sort(self, records: Iterable[np.ndarray], *by: str) -> Iterator[np.ndarray]:
        def keyed() -> Iterator[np.ndarray]:  # each record with sort fields, numbered as they come
            seq = 0
            for r in records:
                out = np.zeros(r.size, dtype=[*_SORT, ("rec", r.dtype)])
                out["rec"], out["seq"] = r, seq + np.arange(r.size)
                seq += r.size
                _keys(out, r, by)
                yield out

        blocks = keyed()
        first = next(blocks, None)
        if first is None:
            return
        for block in self._sorted(_chain(first, blocks), first.dtype, by):
            yield block["rec"]

    def _sorted(self, blocks: Iterator[np.ndarray], dtype: np.dtype, by: tuple[str, ...]) -> Iterator[np.ndarray]:
        if not by:
            yield from blocks
            return
        with Spill(False, str(self.dir), dtype=dtype) as spill:
            for b in blocks:
                spill.add(b)
            yield from spill.sorted_blocks()

    def _table(self, rec: np.ndarray) -> KernelTable:
        name, kind, device = (Labels(codes[rec["ident"]], values) for codes, values in self._labels.values())
        codes, values = self._launcher
        launcher = Labels(codes[rec["launcher"]], values)  # -1 (none) indexes the last slot: ""
        return KernelTable(name, kind, device, launcher, rec["dur_ns"].copy(), ts_ns=rec["ts_ns"].copy(),
                           stream=rec["stream"].copy(), correlation=rec["correlation"].copy(),
                           launch_ts_ns=rec["launch_ts_ns"].copy(), launch_dur_ns=rec["launch_dur_ns"].copy(),
                           bytes=rec["bytes"].copy(), owner=rec["owner"].copy(),
                           launch_thread=rec["launch_thread"].copy())

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _chain(first: np.ndarray, rest: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    yield first
    yield from rest


def _codes(seen: list[int], text: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per identity code (and -1, last), the code of its string among the distinct strings in the order
    ``seen`` first gives them ("" for -1)."""
    table: dict[str, int] = {}
    codes = np.zeros(len(text) + 1, dtype=np.int32)
    for ident in seen:
        codes[ident] = table.setdefault(text[ident] if ident >= 0 else "", len(table))
    return codes, tuple(table)


def _keys(out: np.ndarray, rec: np.ndarray, by: tuple[str, ...]) -> None:
    """Fill ``out``'s sort fields from ``rec``'s fields ``by``: an integer first key sorts as the thread
    key, then up to two float keys (NaN last)."""
    fields = list(by)
    if fields and rec.dtype[fields[0]].kind in "iub":
        out["thread_key"] = rec[fields.pop(0)]
    if len(fields) > 2 or any(rec.dtype[f].kind not in "f" for f in fields):
        raise ValueError(f"cannot sort activities by {by}: an integer key first, then up to two float keys")
    for slot, name in zip(("ts_us", "neg_dur"), fields, strict=False):
        values = rec[name]
        out[slot] = np.where(np.isnan(values), np.inf, values)


def view_meta(recorder: Recorder, idents: list[Any], origin_us: float, windows: list[tuple[float, float]],
              notes: list[Note]) -> dict[str, Any]:
    """What the GPU views read besides the table: the activities, the steps' windows, the annotations."""
    out: dict[str, Any] = {"activities": DiskActivities(recorder, idents, origin_us)}
    if windows:
        out["run_windows_ns"] = run_windows(windows, origin_us)
    if notes:
        out["annotations"] = kineto.annotation_table(notes, origin_us)
    return out
