"""The report of a trace too large to hold whole: read twice, streamed, in memory that does not grow with it.

The first reading folds the trace (:class:`~layerperf.data.fold.Folded`: the layer table, the op types'
times, each op's median call; the device activities go to disk for the GPU views), stores its tables of
calls in a temporary file (``$LAYERPERF_TMPDIR``, else the system's; some 100 bytes a call) and keeps,
per call, its start, end and name (20 bytes a call, for at most :data:`MAX_SEQUENCE` calls) to find the
runs as :func:`layerperf.analysis.trace_runs.find_runs` finds them in a table: the trace's
``ProfilerStep`` windows, else the period of its op sequence. The second pass reads the stored calls
back (not the trace: no second parse) and, knowing each call's run, sums self time, device time and
FLOPs per run, counts the calls far from their op's median, and keeps only the calls of the runs the
page holds (:func:`.gantt.held_runs`) for the timeline.

Every figure equals the whole reading's, but for medians: within the quantile sketch's stated error for
ops of many calls (:mod:`layerperf.data.sketch`), and so the count of calls far from their median near
the threshold. Where a trace holds more calls than :data:`MAX_SEQUENCE`, runs come from its
``ProfilerStep`` windows alone (else the trace is one window) and the page holds the drawn run only.
The timeline of a streamed trace draws its calls, not its device activities (the GPU section has them).
"""

from __future__ import annotations

import gzip
import pickle
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from layerperf.analysis.trace_runs import by_sequence, marked_by
from layerperf.data.calls import Calls, Labels, concat, empty, recoded
from layerperf.data.fold import Folded
from layerperf.readers.detect import read_folded, release
from layerperf.readers.gzsplit import is_gzip
from layerperf.readers.spill import temp_dir
from layerperf.renderers.html.gantt import MAX_RUN_CALLS, held_runs
from layerperf.renderers.html.runs import FAR, RunSet, made, one_window

WHOLE_BYTES = 256 << 20  # a trace up to this size (uncompressed) is read whole: every figure exact
MAX_SEQUENCE = 12_000_000  # calls whose start, end and name the first reading keeps to find the runs
SUMMED = ("dur_ns", "device_ns", "flops")  # the figures summed per run
LARGE_GZIP = 64 << 20  # a gzip this large is streamed unread (its trailer may have wrapped past 4 GiB)
SMALL_STRINGS = 4096  # a stored table's string column is cut to the strings it uses beyond this many


@dataclass(frozen=True, slots=True)
class Digest:
    """What the page reads of a streamed trace beside its folded table: the runs (``rows`` index the
    held calls), per run and over the whole trace the sums of :data:`SUMMED` (unknown counted as 0), the
    calls with FLOPs known, the calls in all, those far from their op's median, and each op's median
    inclusive time (ns)."""

    runs: RunSet | None
    per_run: Mapping[str, np.ndarray]
    whole: Mapping[str, float]
    flops_known: int
    calls: int
    far: int
    medians_incl_ns: Mapping[str, float]


def streamed(path: Path, whole_bytes: int = WHOLE_BYTES) -> bool:
    """Whether the trace at ``path`` is larger than ``whole_bytes`` uncompressed. A gzip's trailer names
    only its last member's size, modulo 4 GiB: one of :data:`LARGE_GZIP` or more is taken as large, one
    whose trailer says large is, and the others are inflated (into nothing) until they pass ``whole_bytes``
    or end."""
    size = path.stat().st_size
    if not is_gzip(path):
        return size > whole_bytes
    if size >= LARGE_GZIP:
        return True
    with path.open("rb") as f:
        f.seek(max(size - 4, 0))
        if int.from_bytes(f.read(4), "little") > whole_bytes:
            return True
    try:
        with gzip.open(path, "rb") as g:  # every member, as the readers read them
            seen = 0
            while seen <= whole_bytes and (chunk := g.read(1 << 20)):
                seen += len(chunk)
    except (OSError, EOFError, zlib.error):
        return False  # a damaged file: the reading says what is wrong with it
    return seen > whole_bytes


def read(path: Path, max_sequence: int | None = None) -> tuple[Calls, Folded | None, Digest | None]:
    """The trace at ``path`` read twice (see the module): the held runs' calls (a table), the folded
    trace (its ``meta["activities"]`` open: the caller closes it) and the digest; a trace the readers
    read whole (layerperf's own) as its table, with None and None."""
    with tempfile.TemporaryFile(prefix="layerperf-report-", dir=temp_dir()) as store:
        first = _First(MAX_SEQUENCE if max_sequence is None else max_sequence, store)
        folded = read_folded(path, quantiles=True, activities=True, sink=first.add)
        if not isinstance(folded, Folded):
            return folded, None, None
        try:
            plan = _plan(folded.meta, first)
            medians = _medians(folded)
            second = _Second(plan, medians)
            store.seek(0)
            for _ in range(first.tables):  # the calls again, as the first reading stored them
                second.add(pickle.load(store))
            held, runs = second.held(folded.meta)
        except BaseException:
            release(folded)
            raise
    digest = Digest(runs, second.per_run(), second.whole, second.flops_known, second.n, second.far, medians)
    return held, folded, digest


class _First:
    """The first reading's sink: each table of calls stored as it comes (``store``: a temporary file the
    second pass reads back rather than parsing the trace again), and per call its start, end (start +
    inclusive time) and name code, while there are at most ``cap`` calls."""

    def __init__(self, cap: int, store: IO[bytes]) -> None:
        self.store = store
        self.tables = 0
        self.cap = cap
        self.n = 0
        self.timed = False
        self.names: dict[str, int] = {}
        self.parts: tuple[list[np.ndarray], ...] = ([], [], [])  # starts, ends, name codes

    @property
    def over(self) -> bool:
        return self.n > self.cap

    def add(self, calls: Calls) -> None:
        n = len(calls)
        self.n += n
        if not n:
            return
        stored = _compact(calls)
        pickle.dump(stored, self.store, protocol=pickle.HIGHEST_PROTOCOL)
        self.tables += 1
        ts = calls.ts_ns
        self.timed = self.timed or calls.has_times
        if self.over:
            self.parts = ([], [], [])
            return
        for part, values in zip(self.parts, (ts, ts + np.nan_to_num(calls.incl_ns, nan=0.0),
                                             recoded(stored.name, self.names)), strict=True):
            part.append(values)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The starts, ends and name codes, each joined as the parts of the one before are let go (the
        peak is the parts and one column, not twice the parts)."""
        joined = []
        for dtype, part in zip((np.float64, np.float64, np.int32), self.parts, strict=True):
            joined.append(np.concatenate(part) if part else np.zeros(0, dtype=dtype))
            part.clear()
        return joined[0], joined[1], joined[2]


def _compact(calls: Calls) -> Calls:
    """The table to store: without its meta, each string column holding only the strings its rows use (a
    reader's tables may share one string table that grows with the trace: stored whole with every table,
    a trace of distinct names would be stored once per table)."""

    def cut(labels: Labels) -> Labels:
        if len(labels.values) <= max(SMALL_STRINGS, len(labels)):  # no more strings than rows: stored as they are
            return labels
        used, codes = np.unique(labels.codes, return_inverse=True)
        if used.size == len(labels.values):
            return labels
        return Labels(codes.reshape(-1).astype(np.int32), tuple(labels.values[i] for i in used.tolist()))

    return replace(calls, meta={}, name=cut(calls.name), op_type=cut(calls.op_type), provider=cut(calls.provider),
                   in_shapes=cut(calls.in_shapes), out_shapes=cut(calls.out_shapes))


@dataclass(frozen=True, slots=True)
class _Plan:
    """The runs found after the first reading: each run's extent, calls and (where known) each call's run
    (``window``, in the order the calls came; -1 in none) and whether the page keeps it (``keep``);
    ``marks``: with no ``window``, each call's run is the mark it starts in; ``drawn``: with no
    ``window``, the run drawn."""

    starts: tuple[float, ...]
    ends: tuple[float, ...]
    how: str
    noun: str
    split: bool
    sizes: tuple[int, ...]
    window: np.ndarray | None
    keep: np.ndarray | None
    marks: np.ndarray | None = None
    drawn: int = 0

    def runs(self, rows: tuple[np.ndarray, ...] = ()) -> RunSet:
        n = len(self.starts)
        rows = rows or tuple(np.zeros(0, dtype=np.int64) for _ in range(n))
        return made(self.starts, self.ends, rows, self.how, noun=self.noun, split=self.split, sizes=self.sizes)


def _plan(meta: Mapping[str, Any], first: _First) -> _Plan | None:
    """The runs, as :func:`layerperf.analysis.trace_runs.find_runs` and the report find them in a whole
    table; None when no call has a start time."""
    if not first.timed:
        return None
    said = int(meta["runs"]) if meta.get("runs") else None
    marked = [(float(s), float(e)) for s, e in meta.get("run_windows_ns") or ()]
    if first.over:
        return _unsequenced(first, said, marked, meta)
    ts, end, code = first.arrays()
    order = np.argsort(ts, kind="stable")  # NaN last: the timed calls by start, then the rest
    timed = order[:int(np.count_nonzero(~np.isnan(ts)))]
    at = ts[timed]
    del ts, order
    if marked:
        bounds = [(int(np.searchsorted(at, s, "left")), int(np.searchsorted(at, e, "left"))) for s, e in marked]
        starts, ends = [s for s, _ in marked], [e for _, e in marked]
        by, noun = marked_by(meta)
        how, split = by + _overlap(marked, noun), True
    else:
        p, how = by_sequence(code[timed], said)
        bounds = [(k * p, (k + 1) * p) for k in range(timed.size // p)] if p else [(0, int(timed.size))]
        lo = np.asarray([a for a, _ in bounds])
        starts, ends = at[lo].tolist(), np.maximum.reduceat(end[timed], lo).tolist()
        how, split = (how, True) if p else one_window(how, said)
        noun = "run"
    del at, end, code
    plan = _Plan(tuple(starts), tuple(ends), how, noun, split, tuple(b - a for a, b in bounds), None, None)
    window, keep = _assigned(plan, timed, first.n, bounds)
    return replace(plan, window=window, keep=keep)


def _overlap(marked: list[tuple[float, float]], noun: str = "step") -> str:
    """What the page says of windows that overlap (ProfilerStep events may): a call in two is placed in the
    later one (the whole reading counts it in both)."""
    spans = sorted(marked)
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)):
        return f"; they overlap: a call in two {noun}s is counted in the later one"
    return ""


def _assigned(plan: _Plan, timed: np.ndarray, n_calls: int,
              bounds: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Each call's run (``window``, -1: in none) and whether the page keeps it (``keep``: the calls of
    the runs :func:`.gantt.held_runs` holds, the drawn one cut at its first :data:`MAX_RUN_CALLS`)."""
    window = np.full(n_calls, -1, dtype=np.int32)
    for k, (a, b) in enumerate(bounds):
        window[timed[a:b]] = k
    keep = np.zeros(n_calls, dtype=bool)
    runs = plan.runs()
    drawn = runs.representative
    for k in held_runs(runs, kept_only=False).runs:
        a, b = bounds[k]
        keep[timed[a:min(b, a + MAX_RUN_CALLS) if k == drawn else b]] = True
    return window, keep


def _unsequenced(first: _First, said: int | None, marked: list[tuple[float, float]],
                 meta: Mapping[str, Any]) -> _Plan:
    """The runs of a trace of more calls than the first reading keeps: its ProfilerStep windows (each call
    in the last that starts at or before it, if it ends after), else one window; only the drawn run held."""
    beyond = (f"the trace holds {first.n:,} calls, more than the {first.cap:,} whose op sequence is searched for "
              "runs")
    if marked:
        order = sorted(range(len(marked)), key=lambda k: marked[k])
        starts, ends = tuple(marked[k][0] for k in order), tuple(marked[k][1] for k in order)
        by, noun = marked_by(meta)
        plan = _Plan(starts, ends, f"{by}{_overlap(marked, noun)}; {beyond}: only the drawn {noun} is held",
                     noun, True, (), None, None, marks=np.asarray([starts, ends]))
        return replace(plan, drawn=plan.runs().representative)
    how = "as the trace says: one run" if said == 1 else f"{beyond}: drawn as one window"
    return _Plan((np.nan,), (np.nan,), how, "run", said == 1, (), None, None)


def _medians(folded: Folded) -> dict[str, float]:
    """Each op name's median inclusive time over all its calls (ns)."""
    by_name = folded.table("name", "median")
    return {n: float(v) for n, v in zip(by_name.name.tolist(), by_name.incl_ns.tolist(), strict=True)}


class _Second:
    """The second reading's sink: each call's run, sums per run, far calls, the held runs' calls."""

    def __init__(self, plan: _Plan | None, medians: Mapping[str, float]) -> None:
        self.plan = plan
        self.medians = medians
        self.n = 0
        self.far = 0
        self.flops_known = 0
        self.whole = dict.fromkeys(SUMMED, 0.0)
        runs = len(plan.starts) if plan is not None else 0
        self.sums = {f: np.zeros(runs) for f in SUMMED}
        self.counts = np.zeros(runs, dtype=np.int64)
        self.extent = [np.inf, -np.inf]  # one window found by reading: its first start, its last end
        self.kept: list[Calls] = []
        self.kept_runs: list[np.ndarray] = []
        self.kept_n = 0

    def add(self, calls: Calls) -> None:
        n = len(calls)
        if not n:
            return
        lo, self.n = self.n, self.n + n
        self._far(calls)
        values = {f: np.nan_to_num(np.asarray(getattr(calls, f), dtype=np.float64), nan=0.0) for f in SUMMED}
        for f in SUMMED:
            self.whole[f] += float(values[f].sum())
        self.flops_known += int(np.isfinite(calls.flops).sum())
        if self.plan is None:
            return
        run, keep = self._runs(calls, lo)
        inside = run >= 0
        self.counts += np.bincount(run[inside], minlength=self.counts.size)
        for f in SUMMED:
            self.sums[f] += np.bincount(run[inside], weights=values[f][inside], minlength=self.counts.size)
        if keep.any():
            rows = np.flatnonzero(keep)
            self.kept.append(calls.take(rows))
            self.kept_runs.append(run[rows])
            self.kept_n += rows.size
            if self.plan.window is None and self.kept_n > 2 * MAX_RUN_CALLS:
                self._trim()

    def _far(self, calls: Calls) -> None:
        med = np.asarray([self.medians.get(v, np.nan) for v in calls.name.values], dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.far += int(np.sum(calls.incl_ns / med[calls.name.codes] >= FAR)) if med.size else 0

    def _runs(self, calls: Calls, lo: int) -> tuple[np.ndarray, np.ndarray]:
        """Each call's run (-1: none) and whether the page keeps it."""
        plan = self.plan
        assert plan is not None
        n = len(calls)
        if plan.window is not None and plan.keep is not None:
            return plan.window[lo:lo + n].astype(np.int64), plan.keep[lo:lo + n]
        ts = calls.ts_ns
        timed = ~np.isnan(ts)
        if plan.marks is not None:
            k = np.searchsorted(plan.marks[0], ts, "right") - 1
            inside = timed & (k >= 0)
            inside[inside] &= ts[inside] < plan.marks[1][k[inside]]
            run = np.where(inside, k, -1)
            return run, run == plan.drawn
        if timed.any():
            ends = ts[timed] + np.nan_to_num(calls.incl_ns[timed], nan=0.0)
            self.extent = [min(self.extent[0], float(ts[timed].min())), max(self.extent[1], float(ends.max()))]
        return np.where(timed, 0, -1), timed

    def _trim(self) -> None:
        """Keep the drawn run's first :data:`MAX_RUN_CALLS` calls by start (where the runs were not known
        call by call before this reading)."""
        table, run = concat(self.kept), np.concatenate(self.kept_runs)
        first = np.argsort(table.ts_ns, kind="stable")[:MAX_RUN_CALLS]
        first.sort()
        self.kept, self.kept_runs, self.kept_n = [table.take(first)], [run[first]], first.size

    def per_run(self) -> dict[str, np.ndarray]:
        return dict(self.sums)

    def held(self, meta: dict[str, Any]) -> tuple[Calls, RunSet | None]:
        """The held runs' calls (one table, in the order read) and the runs, ``rows`` indexing it."""
        plan = self.plan
        if plan is None:
            return empty(meta), None
        if plan.window is None and self.kept_n > MAX_RUN_CALLS:
            self._trim()
        table = concat(self.kept, meta) if self.kept else empty(meta)
        run = np.concatenate(self.kept_runs) if self.kept_runs else np.zeros(0, dtype=np.int64)
        if plan.window is None and plan.marks is None:  # one window: its extent read in this pass
            plan = replace(plan, starts=(self.extent[0],), ends=(self.extent[1],), sizes=(int(self.counts[0]),))
        elif plan.window is None:
            plan = replace(plan, sizes=tuple(self.counts.tolist()))
        return table, plan.runs(_rows_by_run(run, table.ts_ns, len(plan.starts)))


def _rows_by_run(run: np.ndarray, ts: np.ndarray, n_runs: int) -> tuple[np.ndarray, ...]:
    """Per run, the rows of the held table in it, by start (a run none of whose calls are held: none). Grouped
    once, not searched per run: a trace holds tens of thousands of runs."""
    rows = [np.zeros(0, dtype=np.int64)] * n_runs
    inside = np.flatnonzero(run >= 0)
    if not inside.size:  # no held call in any run
        return tuple(rows)
    by_run = inside[np.argsort(run[inside], kind="stable")]
    held, first = np.unique(run[by_run], return_index=True)
    for k, a, b in zip(held.tolist(), first.tolist(), [*first[1:].tolist(), by_run.size], strict=True):
        mine = by_run[a:b]
        rows[k] = mine[np.argsort(ts[mine], kind="stable")]
    return tuple(rows)
