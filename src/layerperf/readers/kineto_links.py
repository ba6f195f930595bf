"""Device activities linked to the ops that launched them through files: memory that does not grow.

Linking an activity needs every op's External id and every runtime call's correlation id
(:mod:`layerperf.readers.kineto_stream`). Kept in memory they grow with the trace (~55 MiB a million
events); here they are sorted on disk instead (:class:`~layerperf.readers.spill.Spill`, keyed by the id):
the activities, written in file order, are resolved a block at a time against the sorted ids by
binary search over the mapped files; what they give — device time per op External id, per runtime
call correlation (for the op around the call), the activities that link to nothing — is sorted and
summed on disk too, and looked up the same way while the CPU segments go by. Mapped pages are given
back after each block, so memory is a block's worth whatever the trace's size. A big trace's linking is
shared with a forked child, step by step (:data:`TWO_FROM` activities up, where :func:`_two` says so): the
calls sorted while this process sorts the ops, the second half of the activities resolved into spills of the
child's own (adopted here), the waiting and the lone activities written while this process sums the ones
that link; what the child fails to do is done again here. The rules are
:func:`classify`'s (the whole-file reading's, :func:`layerperf.readers.kineto._link`), and so are the figures.
"""

from __future__ import annotations

import contextlib
import mmap
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.readers import parallel
from layerperf.readers.spill import Spill

NONE = -1
BLOCK = 1 << 18  # activities resolved at a time
TWO_FROM = 4 * BLOCK  # activities from which a child shares the linking (fewer: the fork costs what it saves)
PART_SHIFT = 40  # read by two processes (kineto_parts): a record's part in the high bits of its position
# a record sorted by its key (an id), then file order; the spill's sort fields, the rest zero
KEYED = np.dtype([("thread_key", "<i8"), ("ts_us", "<f8"), ("nonzero", "i1"), ("neg_dur", "<f8"), ("seq", "<i8"),
                  ("value", "<i8"), ("ns", "<f8")])
ACTIVITY = np.dtype([("ts_us", "<f8"), ("dur_us", "<f8"), ("ident", "<i8"), ("external", "<i8"),
                     ("correlation", "<i8"), ("pid", "<i8"), ("tid", "<i8"), ("bytes", "<f8")])


@dataclass(frozen=True, slots=True)
class Links:
    """How each activity of a block links: ``target`` the External id of the op whose device time it is
    (its own, or its runtime call's; -1: none), ``around`` whether it waits on the op around its call,
    ``has_call`` whether its call is known and ``at`` where (in the sorted calls)."""

    target: np.ndarray
    around: np.ndarray
    has_call: np.ndarray
    at: np.ndarray


def classify(ext: np.ndarray, corr: np.ndarray, op_keys: np.ndarray, call_corr: np.ndarray,
             call_ext: np.ndarray) -> Links:
    """The linking rules of the whole-file reading, for activities with External ids ``ext`` and
    correlations ``corr``, against the ops' sorted External ids and the calls' sorted correlations."""
    direct = _member(ext, op_keys)
    at = np.clip(np.searchsorted(call_corr, corr), 0, max(call_corr.size - 1, 0))
    has_call = (call_corr[at] == corr) & (corr != NONE) if call_corr.size else np.zeros(corr.size, bool)
    via = np.where(has_call, call_ext[at] if call_ext.size else NONE, NONE)
    via_op = ~direct & has_call & _member(via, op_keys)
    around = ~direct & has_call & ~via_op
    return Links(np.where(direct, ext, np.where(via_op, via, NONE)), around, has_call, at)


def keyed(key: np.ndarray, seq: np.ndarray, value: np.ndarray | None = None,
          ns: np.ndarray | None = None) -> np.ndarray:
    """KEYED records: sorted by ``key``, then ``seq``."""
    rec = np.zeros(key.size, dtype=KEYED)
    rec["thread_key"], rec["seq"] = key, seq
    if value is not None:
        rec["value"] = value
    if ns is not None:
        rec["ns"] = ns
    return rec


class Mapped:
    """A file of one numpy dtype, mapped; :meth:`release` gives its pages back (the page cache keeps them)."""

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.size = path.stat().st_size // dtype.itemsize
        self._f = path.open("rb")
        self._map = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.array = np.frombuffer(self._map, dtype=dtype, count=self.size) if self._map is not None else \
            np.zeros(0, dtype=dtype)

    def release(self) -> None:
        if self._map is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        self.array = self.array[:0].copy()
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
        self._f.close()


def _sorted_file(spill: Spill, path: Path, fields: tuple[str, ...], dtype: np.dtype) -> Mapped:
    """The spill's records in key order, the ``fields`` only, as one mapped file."""
    with path.open("wb") as f:
        for block in spill.sorted_blocks():
            out = np.empty(block.size, dtype=dtype)
            for name, field in zip(dtype.names or (), fields, strict=True):
                out[name] = block[field]
            out.tofile(f)
    return Mapped(path, dtype)


_SUMMED = np.dtype([("key", "<i8"), ("ns", "<f8"), ("first", "<i8")])
# the fields a sorted file keeps of a spill's records (the ops' and the waiting activities'; the calls'), its dtype
_OP_FIELDS = (("thread_key", "seq"), np.dtype([("key", "<i8"), ("seq", "<i8")]))
_CALL_FIELDS = (("thread_key", "value", "seq"), np.dtype([("key", "<i8"), ("ext", "<i8"), ("seq", "<i8")]))


def _two(activities: int) -> bool:
    """Whether a child shares the linking: enough activities, and a spare CPU with no other thread here
    (:func:`layerperf.readers.parallel.spare_cpu`)."""
    return activities >= TWO_FROM and parallel.spare_cpu()


def _started(two: bool, work: Any, spills: tuple[Spill, ...], children: list[parallel.Child]) -> parallel.Child | None:
    """``work()`` (True once done) started in a child where ``two``, added to ``children`` (``spills`` flushed
    first: what the child writes of them is then what this process would); None where it is not."""
    if not two:
        return None
    for spill in spills:
        spill.flush()
    child = parallel.fork(work)
    if child is not None:
        children.append(child)
    return child


def _done(child: parallel.Child | None) -> bool:
    """Whether ``child`` did its work (waited for; False: not started, or failed: to do here)."""
    return child is not None and child() is True


def _summed_file(spill: Spill, path: Path) -> Mapped:
    """Per distinct key of the spill, the sum of its records' ``ns`` (whole ns: exact in any order) and their
    ``value`` (the same in every record of a key: the position of the op or call that takes the time)."""
    dtype = _SUMMED
    carry: np.ndarray | None = None
    with path.open("wb") as f:
        for block in spill.sorted_blocks():
            key, ns = block["thread_key"], block["ns"]
            starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
            out = np.empty(starts.size, dtype=dtype)
            out["key"], out["ns"], out["first"] = key[starts], np.add.reduceat(ns, starts), block["value"][starts]
            if carry is not None and out["key"][0] == carry["key"][0]:
                out["ns"][0] += carry["ns"][0]
            elif carry is not None:
                carry.tofile(f)
            out[:-1].tofile(f)
            carry = out[-1:].copy()
        if carry is not None:
            carry.tofile(f)
    return Mapped(path, dtype)


def _member(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    if not sorted_keys.size:
        return np.zeros(values.size, dtype=bool)
    at = np.clip(np.searchsorted(sorted_keys, values), 0, sorted_keys.size - 1)
    return (sorted_keys[at] == values) & (values != NONE)


class DiskLinks:
    """What the CPU segments need of the device activities, from files (see the module's docstring)."""

    def __init__(self, directory: Path, activities: Path, ops: Spill, calls: Spill, recorder: Any = None) -> None:
        self.dir = directory
        self.recorder = recorder  # a kineto_activities.Recorder told the op around each waiting call
        self.activities = Mapped(activities, ACTIVITY)
        self.orphans: list[np.ndarray] = []  # correlations of calls with no op around them
        self._around_spill_path = directory / "around.bin"
        self._lone_path = directory / "lone.bin"
        self._child_dir: str | None = None  # where a child's spills go (:meth:`_resolve_all`)
        two = _two(self.activities.size)
        keys: list[Mapped] = []  # closed however the linking ends (a failure leaves no mapping open)
        children: list[parallel.Child] = []  # stopped however it ends (a child waited for is reaped already)
        try:
            calls_path = directory / "calls.bin"

            def sort_calls() -> bool:
                _sorted_file(calls, calls_path, *_CALL_FIELDS).close()
                return True

            sorting = _started(two, sort_calls, (calls,), children)
            keys.append(_sorted_file(ops, directory / "ops.bin", *_OP_FIELDS))
            if not _done(sorting):
                sort_calls()
            keys.append(Mapped(calls_path, _CALL_FIELDS[1]))
            with Spill(False, str(directory), dtype=KEYED) as ext, \
                    Spill(False, str(directory), dtype=KEYED) as around, \
                    Spill(False, str(directory), dtype=KEYED) as lone:
                self.unlinked = self._resolve_all(two, keys[0], keys[1], ext, around, lone, children)
                for mapped in keys:  # their pages back before the summing below
                    mapped.close()
                writing = _started(two, lambda: self._waiting_and_lone(around, lone), (around, lone), children)
                self.ext_file = _summed_file(ext, directory / "ext_ns.bin")
                if not _done(writing):
                    self._waiting_and_lone(around, lone)
                self._child_done()  # the child's runs are read: their disk back before the folding
                self.around_file = Mapped(directory / "around_ns.bin", _SUMMED)
        except BaseException:
            for child in children:
                child.kill()
            self._child_done()
            self.activities.close()
            raise
        finally:
            for mapped in keys:
                mapped.close()
        # by id: the device time, and the position of the one op (call) that takes it: the first with that id
        self.ext, self.ext_ns, self.ext_first = (self.ext_file.array[f] for f in ("key", "ns", "first"))
        self.around, self.around_ns, self.around_first = (self.around_file.array[f] for f in ("key", "ns", "first"))

    def _child_done(self) -> None:
        """The folder of the child's spills removed (their runs read, or the child failed)."""
        if self._child_dir is not None:
            shutil.rmtree(self._child_dir, ignore_errors=True)
            self._child_dir = None

    def _waiting_and_lone(self, around: Spill, lone: Spill) -> bool:
        """The device time waiting on each call's op around it, summed, the waiting activities by call and the
        lone ones, each written to its file."""
        _summed_file(around, self.dir / "around_ns.bin").close()
        _sorted_file(around, self._around_spill_path, *_OP_FIELDS).close()
        _sorted_file(lone, self._lone_path, ("seq",), np.dtype([("seq", "<i8")])).close()
        return True

    def _resolve_all(self, two: bool, ops: Mapped, calls: Mapped, ext_out: Spill, around_out: Spill,
                     lone_out: Spill, children: list[parallel.Child]) -> int:
        """:meth:`_resolve` of every activity: the second half's in a child where ``two`` (its spills' runs
        adopted by ``ext_out``, ``around_out`` and ``lone_out``), else, or where the child fails, here."""
        size = self.activities.size
        half = (size // BLOCK // 2) * BLOCK if two else size
        # the child's spills, in a folder removed once their runs are read (:meth:`_child_done`), or when it fails
        own = tempfile.mkdtemp(prefix="layerperf-links-", dir=self.dir) if half < size else None
        self._child_dir = own

        def second() -> tuple[int, list[list[tuple[Path, int]]]]:
            spills = [Spill(False, own, dtype=KEYED) for _ in range(3)]
            n = self._resolve(ops, calls, spills[0], spills[1], spills[2], start=half)
            for sp in spills:
                sp.flush()  # its runs stay, adopted by the caller, which removes their folder once read
            return n, [sp.runs for sp in spills]

        child = parallel.fork(second) if half < size else None
        if child is not None:
            children.append(child)
        else:
            self._child_done()
        lone_n = self._resolve(ops, calls, ext_out, around_out, lone_out, stop=half if child is not None else size)
        got = child() if child is not None else None
        if child is not None and got is None:  # the child failed: its half here, what it wrote gone
            self._child_done()
            lone_n += self._resolve(ops, calls, ext_out, around_out, lone_out, start=half)
        elif got is not None:
            lone_n += got[0]
            for spill, runs in zip((ext_out, around_out, lone_out), got[1], strict=True):
                spill.adopt(runs)
        return lone_n

    def _resolve(self, ops: Mapped, calls: Mapped, ext_out: Spill, around_out: Spill, lone_out: Spill,
                 start: int = 0, stop: int | None = None) -> int:
        """Each activity's link (:func:`classify`), a block at a time, of the activities from ``start`` to
        ``stop`` (a multiple of :data:`BLOCK` apart from the end); how many link to nothing."""
        op_keys, call_corr, call_ext = ops.array["key"], calls.array["key"], calls.array["ext"]
        op_seq, call_seq = ops.array["seq"], calls.array["seq"]
        lone_n = 0
        acts = self.activities.array
        for lo in range(start, acts.size if stop is None else stop, BLOCK):
            block = acts[lo:lo + BLOCK]
            index = np.arange(lo, lo + block.size, dtype=np.int64)
            ext, corr = block["external"], block["correlation"]
            dur_ns = np.rint(block["dur_us"] * 1e3).astype(np.int64).astype(np.float64)
            links = classify(ext, corr, op_keys, call_corr, call_ext)
            target, around = links.target, links.around
            owned = target != NONE
            first_op = op_seq[np.searchsorted(op_keys, target[owned])] if owned.any() else target[owned]
            ext_out.add(keyed(target[owned], index[owned], value=first_op, ns=dur_ns[owned]))
            around_out.add(keyed(corr[around], index[around], value=call_seq[links.at[around]], ns=dur_ns[around]))
            lone = ~owned & ~around
            lone_out.add(keyed(np.zeros(int(lone.sum()), dtype=np.int64), index[lone]))
            lone_n += int(lone.sum())
            self.activities.release()
            ops.release()
            calls.release()
        return lone_n

    def orphaned(self, corr: np.ndarray) -> None:
        """Calls with these correlations have no op around them: their activities link to nothing."""
        if corr.size:
            self.orphans.append(corr.astype(np.int64))

    def release(self) -> None:
        self.ext_file.release()
        self.around_file.release()

    def around_calls(self, corr: np.ndarray, call_seq: np.ndarray, op_seq: np.ndarray, ident: np.ndarray) -> None:
        """Runtime calls with activities waiting on the op around them: that op (-1: none), for the views."""
        if self.recorder is not None:
            self.recorder.around_calls(corr, call_seq, op_seq, ident)

    def lone_blocks(self) -> Iterator[np.ndarray]:
        """The activities that link to nothing, in file order, a block at a time (ACTIVITY records)."""
        orphans = np.unique(np.concatenate(self.orphans)) if self.orphans else np.zeros(0, dtype=np.int64)
        extra = np.zeros(0, dtype=np.int64)
        if orphans.size:
            waiting = Mapped(self._around_spill_path, np.dtype([("key", "<i8"), ("seq", "<i8")]))
            found = []
            for lo in range(0, waiting.size, BLOCK):
                block = waiting.array[lo:lo + BLOCK]
                found.append(block["seq"][_member(block["key"], orphans)].copy())
                waiting.release()
            waiting.close()
            extra = np.sort(np.concatenate(found)) if found else extra
        self.unlinked += extra.size
        lone = Mapped(self._lone_path, np.dtype([("seq", "<i8")]))
        try:
            yield from _merged_indices(lone, extra, self.activities)
        finally:
            lone.close()

    def close(self) -> None:
        self.ext = self.ext_ns = self.ext_first = np.zeros(0)  # views of the maps closed next
        self.around = self.around_ns = self.around_first = np.zeros(0)
        for m in (self.activities, self.ext_file, self.around_file):
            m.close()


def _merged_indices(lone: Mapped, extra: np.ndarray, activities: Mapped) -> Iterator[np.ndarray]:
    """The activities at the (sorted) indices of ``lone`` and ``extra`` together, in index order."""
    done_extra = 0
    for lo in range(0, max(lone.size, 1), BLOCK):
        seq = lone.array["seq"][lo:lo + BLOCK]
        last = int(seq[-1]) if seq.size and lo + BLOCK < lone.size else None
        upto = extra.size if last is None else int(np.searchsorted(extra, last, "right"))
        index = np.sort(np.concatenate([seq, extra[done_extra:upto]]))
        done_extra = upto
        lone.release()
        if index.size:
            out = activities.array[index].copy()
            activities.release()
            yield out
