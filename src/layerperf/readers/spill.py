"""Sorting a trace's timed events on disk: memory that does not grow with the trace.

Producers write events in whatever order suits them — PyTorch all its operators first and their
runtime calls after, ONNX Runtime each node when it ends (a Loop after its body) — and working out
what ran inside what needs them by thread and start. So each event becomes one fixed-size record
(:data:`RECORD`), records are sorted a run at a time in memory (:data:`RUN_RECORDS`) and written to a
temporary file, and the runs are merged block by block (:meth:`Spill.sorted_blocks`) in the order the
nesting rule opens events: thread, start, then (ONNX Runtime's truncated µs) a zero-length event
first, then the longer first, then file order. A run that follows the previous one in that order
(a time-ordered file) is merged by reading it after the other, at no cost.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from layerperf.data.nesting import sort_by
from layerperf.errors import InputError

RECORD = np.dtype([("thread_key", "<i8"), ("ts_us", "<f8"), ("nonzero", "i1"), ("neg_dur", "<f8"), ("seq", "<i8"),
                   ("thread", "<i4"), ("ident", "<i4"), ("flops", "<f8"), ("bytes", "<f8"), ("part", "i1")])
SORT_FIELDS = ("thread_key", "ts_us", "nonzero", "neg_dur", "seq")  # most significant first
RUN_RECORDS = 1 << 18  # records sorted in memory at a time (~15 MiB)
MERGE_RECORDS = 1 << 18  # records held from all runs together while merging (~15 MiB)
MIN_BLOCK = 4096  # records read from a run at a time, however many runs there are


def sort_order(records: np.ndarray, zero_first: bool) -> np.ndarray | None:
    """Indices that sort ``records`` by :data:`SORT_FIELDS` (``nonzero`` only when ``zero_first``); None
    when they are in order already (a time-ordered file: checked in one pass, the sort skipped)."""
    fields = [f for f in SORT_FIELDS if zero_first or f != "nonzero"]
    if _in_order(records, fields):
        return None
    seq = records["seq"]
    if seq.size > 1 and bool((seq[1:] >= seq[:-1]).all()):  # in file order already: a stable sort keeps it
        fields = fields[:-1]
    return sort_by([records[f] for f in fields])


def _in_order(records: np.ndarray, fields: list[str]) -> bool:
    less = np.zeros(records.size - 1 if records.size else 0, dtype=bool)
    equal = np.ones_like(less)
    for f in fields:
        col = records[f]
        a, b = col[:-1], col[1:]
        less |= equal & (a < b)
        equal &= a == b
        if not (less | equal).all():
            return False
    return True


def _at_most(records: np.ndarray, bound: np.void, zero_first: bool) -> np.ndarray:
    """Which records sort at or before ``bound`` (a record), lexicographically by the sort fields."""
    fields = [f for f in SORT_FIELDS if zero_first or f != "nonzero"]
    less = np.zeros(records.size, dtype=bool)
    equal = np.ones(records.size, dtype=bool)
    for f in fields:
        col, b = records[f], bound[f]
        less |= equal & (col < b)
        equal &= col == b
    return less | equal


class Spill:
    """Records written as sorted runs to a private temporary directory (removed by :meth:`close`)."""

    def __init__(self, zero_first: bool, directory: str | None = None, run_records: int | None = None,
                 dtype: np.dtype = RECORD) -> None:
        self.zero_first = zero_first
        self.dtype = dtype  # RECORD, or a reader's own with the same sort fields
        self.dir = Path(tempfile.mkdtemp(prefix="layerperf-", dir=directory))
        self.run_records = RUN_RECORDS if run_records is None else run_records
        self.runs: list[tuple[Path, int]] = []
        self._buf = np.empty(0, dtype=self.dtype)  # the run being gathered: its first _used records
        self._used = 0
        self.records = 0

    def add(self, records: np.ndarray) -> None:
        if records.size:
            self.space(records.size)[...] = records
            if self._used >= self.run_records:  # written now, as space()'s are once filled (at the next add)
                self._write_run()

    def space(self, n: int) -> np.ndarray:
        """Room for ``n`` more records at the end of the run being gathered, for the caller to fill — every
        field: it is not cleared — and counted as added: filled there, records are copied once less than
        through :meth:`add`. Valid until the next call that adds."""
        if self._used >= self.run_records:  # a run once it holds run_records or more, as when added at once
            self._write_run()
        need = self._used + n
        if self._buf.size < need:  # grown by doubling up to a run (a small spill keeps a small buffer)
            buf = np.empty(max(need, min(self.run_records, 2 * self._buf.size)), dtype=self.dtype)
            buf[:self._used] = self._buf[:self._used]
            self._buf = buf
        self._used = need
        self.records += n
        return self._buf[need - n:need]

    def flush(self) -> None:
        """Sort what is gathered and write it as a run; its buffer is let go (more records allocate another)."""
        self._write_run()
        self._buf = np.empty(0, dtype=self.dtype)

    def _write_run(self) -> None:
        if not self._used:
            return
        batch, self._used = self._buf[:self._used], 0
        order = sort_order(batch, self.zero_first)
        if order is not None:
            batch = batch[order]
        path = self.dir / f"run{len(self.runs)}.bin"
        batch.tofile(path)
        self.runs.append((path, batch.size))

    def adopt(self, other_runs: list[tuple[Path, int]]) -> None:
        """Take over runs another process wrote (into this spill's directory or its own)."""
        self.runs.extend(other_runs)
        self.records += sum(n for _, n in other_runs)

    def sorted_blocks(self, budget: int | None = None) -> Iterator[np.ndarray]:
        """Every record, in sort order, a block at a time (``budget`` records held at most, shared
        between the runs; :data:`MERGE_RECORDS` when None). Runs that follow one another in sort order
        (a time-ordered file's: each starts after the other ends) are read one after the other as one."""
        self.flush()
        budget = MERGE_RECORDS if budget is None else budget
        fields = [f for f in SORT_FIELDS if self.zero_first or f != "nonzero"]
        runs = [(path, n) for path, n in self.runs if n]
        # blocks as small as when every run is read side by side: larger ones cost more to join and sort
        # than the fewer steps save
        block = max(MIN_BLOCK, budget // max(len(runs), 1))
        chains = _chains(runs, self.dtype, fields)
        readers = [_RunReader(chain, block, self.dtype, fields) for chain in chains]
        readers = [r for r in readers if r.block.size]

        while readers:
            # everything at or before the least of the blocks' last records can go: nothing after it
            # in any run sorts before it
            least = min(readers, key=_RunReader.last_key)
            bound, bound_key = least.block[-1], least.last_key()
            taken = []
            for r in readers:
                if r.last_key() <= bound_key:  # the whole block (the bound's own, and any that ends with it)
                    taken.append(r.take(r.block.size))
                elif r.first_key() <= bound_key:  # a block that starts after the bound gives nothing
                    n = int(np.count_nonzero(_at_most(r.block, bound, self.zero_first)))
                    if n:
                        taken.append(r.take(n))
            out = np.concatenate(taken) if len(taken) > 1 else taken[0]
            order = sort_order(out, self.zero_first) if len(taken) > 1 else None
            if order is not None:
                out = out[order]
            readers = [r for r in readers if r.refill()]
            yield out

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key(rec: np.void, fields: list[str]) -> tuple[Any, ...]:
    return tuple(rec[f] for f in fields)


def _ends(path: Path, n: int, dtype: np.dtype, fields: list[str]) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """The sort keys of a run's first and last records (None when the file is shorter than said)."""
    with open(path, "rb") as f:
        first = np.fromfile(f, dtype=dtype, count=1)
        f.seek((n - 1) * dtype.itemsize)
        last = np.fromfile(f, dtype=dtype, count=1)
    if not first.size or not last.size:
        return None
    return _key(first[0], fields), _key(last[0], fields)


def _chains(runs: list[tuple[Path, int]], dtype: np.dtype, fields: list[str]) -> list[list[tuple[Path, int]]]:
    """The runs in chains, each run after one that ends before it starts (so that a chain reads as one
    sorted run): a run joins the first chain it follows, in the order of the runs' first records."""
    ends = [_ends(path, n, dtype, fields) for path, n in runs]
    if any(e is None for e in ends) or len(runs) < 2:
        return [[run] for run in runs]
    try:
        order = sorted(range(len(runs)), key=lambda i: ends[i][0])  # type: ignore[index]
    except TypeError:
        return [[run] for run in runs]
    chains: list[list[tuple[Path, int]]] = []
    lasts: list[tuple[Any, ...]] = []
    for i in order:
        first, last = ends[i]  # type: ignore[misc]
        for c, chain_last in enumerate(lasts):
            if chain_last < first:  # strictly: a key NaN compares false and starts a chain of its own
                chains[c].append(runs[i])
                lasts[c] = last
                break
        else:
            chains.append([runs[i]])
            lasts.append(last)
    return chains


class _RunReader:
    """Sorted runs on disk, one after another, read a block at a time (plain reads: the page cache, not
    this process's memory, holds the files); the keys of the block's first and last records are worked
    out once per block, not at every step of the merge."""

    def __init__(self, runs: list[tuple[Path, int]], block: int, dtype: np.dtype = RECORD,
                 fields: list[str] | tuple[str, ...] = SORT_FIELDS) -> None:
        self.runs = list(runs)
        self.f: Any = None
        self.left = 0
        self.block_n = block
        self.dtype = dtype
        self.fields = list(fields)
        self.block = np.zeros(0, dtype=dtype)
        self._first: tuple[Any, ...] | None = None
        self._last: tuple[Any, ...] | None = None
        self.refill()

    def first_key(self) -> tuple[Any, ...]:
        if self._first is None:
            self._first = _key(self.block[0], self.fields)
        return self._first

    def last_key(self) -> tuple[Any, ...]:
        if self._last is None:
            self._last = _key(self.block[-1], self.fields)
        return self._last

    def take(self, n: int) -> np.ndarray:
        out, self.block = self.block[:n], self.block[n:]
        self._first = None
        if not self.block.size:
            self._last = None
        return out

    def refill(self) -> bool:
        """Top the block up when it is empty (from as many of the runs as it takes); False once every run is
        exhausted."""
        if self.block.size:
            return True
        pieces: list[np.ndarray] = []
        want = self.block_n
        while want:
            if not self.left:
                if self.f is not None:
                    self.f.close()
                    self.f = None
                if not self.runs:
                    break
                path, self.left = self.runs.pop(0)
                self.f = open(path, "rb")  # noqa: SIM115 - closed when exhausted
            n = min(want, self.left)
            got = np.fromfile(self.f, dtype=self.dtype, count=n)
            self.left -= n
            if got.size < n:  # the file was cut short under us
                self.left = 0
            if got.size:
                pieces.append(got)
                want -= got.size
        self.block = np.concatenate(pieces) if len(pieces) > 1 else pieces[0] if pieces else self.block
        self._first = self._last = None
        return bool(self.block.size)


def records(n: int) -> np.ndarray:
    return np.zeros(n, dtype=RECORD)


def temp_dir() -> str | None:
    """Where runs go: ``LAYERPERF_TMPDIR`` when set, else the system's temporary directory; InputError in one
    line when it names no folder this process can write in (it was a traceback)."""
    given = os.environ.get("LAYERPERF_TMPDIR") or None
    if given is not None and not (os.path.isdir(given) and os.access(given, os.W_OK | os.X_OK)):
        raise InputError(f"LAYERPERF_TMPDIR={given} is not a folder this process can write in",
                         hint="set it to one, or unset it for the system's temporary folder")
    return given
