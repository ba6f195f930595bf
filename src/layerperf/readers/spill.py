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

import numpy as np

from layerperf.data.nesting import sort_by

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
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self.records = 0

    def add(self, records: np.ndarray) -> None:
        if not records.size:
            return
        self._pending.append(records)
        self._pending_n += records.size
        self.records += records.size
        if self._pending_n >= self.run_records:
            self.flush()

    def flush(self) -> None:
        """Sort what is pending and write it as a run."""
        if not self._pending:
            return
        batch = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_n = [], 0
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
        between the runs; :data:`MERGE_RECORDS` when None)."""
        self.flush()
        budget = MERGE_RECORDS if budget is None else budget
        runs = [(path, n) for path, n in self.runs if n]
        block = max(MIN_BLOCK, budget // max(len(runs), 1))
        readers = [_RunReader(path, n, block, self.dtype) for path, n in runs]
        fields = [f for f in SORT_FIELDS if self.zero_first or f != "nonzero"]

        def key(rec: np.void) -> tuple[float, ...]:
            return tuple(rec[f] for f in fields)

        while readers:
            # everything at or before the least of the blocks' last records can go: nothing after it
            # in any run sorts before it
            lasts = [key(r.block[-1]) for r in readers]
            least = min(range(len(readers)), key=lasts.__getitem__)
            bound, bound_key = readers[least].block[-1], lasts[least]
            taken = []
            for r, last in zip(readers, lasts, strict=True):
                if last <= bound_key:  # the whole block (the bound's own, and any that ends with it)
                    taken.append(r.take(r.block.size))
                elif key(r.block[0]) <= bound_key:  # a block that starts after the bound gives nothing
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


class _RunReader:
    """A sorted run on disk, read a block at a time (plain reads: the page cache, not this process's
    memory, holds the file)."""

    def __init__(self, path: Path, n: int, block: int, dtype: np.dtype = RECORD) -> None:
        self.f = open(path, "rb")  # noqa: SIM115 - closed when exhausted
        self.left = n
        self.block_n = block
        self.dtype = dtype
        self.block = np.zeros(0, dtype=dtype)
        self.refill()

    def take(self, n: int) -> np.ndarray:
        out, self.block = self.block[:n], self.block[n:]
        return out

    def refill(self) -> bool:
        """Top the block up when it is empty; False once the run is exhausted."""
        if self.block.size:
            return True
        if not self.left:
            self.f.close()
            return False
        n = min(self.block_n, self.left)
        self.block = np.fromfile(self.f, dtype=self.dtype, count=n)
        self.left -= n
        if self.block.size < n:  # the file was cut short under us
            self.left = 0
        return bool(self.block.size) or self.refill()


def records(n: int) -> np.ndarray:
    return np.zeros(n, dtype=RECORD)


def temp_dir() -> str | None:
    """Where runs go: ``LAYERPERF_TMPDIR`` when set, else the system's temporary directory."""
    return os.environ.get("LAYERPERF_TMPDIR") or None
