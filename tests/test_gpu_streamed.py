"""The GPU views as folds over blocks: cut in blocks of any size, a source gives what the whole table gives
(counts, sums, least and largest exactly; medians exactly while a group holds at most 4096 values, within
0.5% beyond; standard deviations within 1e-9 relative), on the real traces and on a synthetic one made to
cut intervals, streams and op calls at block boundaries."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerperf.analysis import gpu_kernels
from layerperf.analysis.gpu.annotations import annotation_times
from layerperf.analysis.gpu.idle import idle
from layerperf.analysis.gpu.kernel_type import kernel_types
from layerperf.analysis.gpu.launch import launch
from layerperf.analysis.gpu.memcpy import memcpy
from layerperf.analysis.gpu.overlap import overlap
from layerperf.analysis.gpu.queue import queues
from layerperf.analysis.gpu.source import Activities, InMemory
from layerperf.analysis.gpu.temporal import temporal
from layerperf.data.calls import Annotations, KernelTable, Labels
from layerperf.readers.detect import read_table

DATA = Path(__file__).parent / "data"
TRACES = [DATA / "torch_resnet18_cuda" / "trace.json.gz", DATA / "torch_cuda" / "trace.json.gz"]


def _views(src: Any, notes: Annotations | None, steps: list[tuple[float, float]]) -> dict[str, Any]:
    return {"temporal": temporal(src, steps), "idle": idle(src), "kinds": kernel_types(src), "launch": launch(src),
            "queue": queues(src), "memcpy": memcpy(src), "overlap": overlap(src),
            "annotations": annotation_times(notes, src) if notes is not None else None,
            "kernels": gpu_kernels.aggregate(src)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return float(value) if isinstance(value, np.floating) else value


def _same(got: Any, want: Any, key: str = "", median_rel: float = 0.0) -> None:
    """Equal, but for standard deviations (1e-9 relative) and medians (``median_rel``)."""
    if isinstance(want, dict):
        assert list(got) == list(want), key
        for k in want:
            _same(got[k], want[k], k, median_rel)
    elif isinstance(want, list):
        assert len(got) == len(want), key
        for g, w in zip(got, want, strict=True):
            _same(g, w, key, median_rel)
    elif isinstance(want, float) and "stddev" in key:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), key
    elif isinstance(want, float) and "median" in key and median_rel:
        assert got == pytest.approx(want, rel=median_rel), key
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), key
    else:
        assert got == want, key


@pytest.mark.parametrize("path", TRACES, ids=["h100", "v100"])
def test_real_traces_any_block_size(path: Path) -> None:
    table = read_table(path)
    kernels, notes = table.meta["kernels"], table.meta.get("annotations")
    steps = [(float(s), float(e)) for s, e in table.meta.get("run_windows_ns") or []]
    whole = _plain(_views(InMemory(kernels, block=len(kernels)), notes, steps))
    assert whole == _plain(_views(kernels, notes, steps))  # a table is served whole
    for block in (1, 2, 3, 7, 64):
        _same(_plain(_views(InMemory(kernels, block=block), notes, steps)), whole)


# -- a synthetic trace --------------------------------------------------------------------------------
NAMES = ("gemm_a", "gemm_b", "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)",
         "Memset (Device)", "ncclKernel_AllReduce_RING", "cudaStreamSynchronize_helper")
THREADS = (3 << 40, 5 << 40)  # launching threads' keys (large, as real ones are)
N = 14000  # gemm_a alone has more than 4096 activities (and launches), stream 7 more than 4096 gaps of one cause


def _synthetic() -> KernelTable:
    """Three streams, long activities over many short ones (so that intervals straddle every block
    boundary), launch times unknown for some, copies with and without sizes, op calls under opaque keys."""
    rng = np.random.default_rng(25)
    name = np.where(rng.random(N) < 0.8, 0, rng.integers(1, len(NAMES), N))
    stream = rng.choice([7, 13, 20], N, p=[0.9, 0.05, 0.05])
    ts = np.cumsum(rng.integers(0, 40_000, N)).astype(np.float64)
    dur = rng.integers(0, 20_000, N).astype(np.float64)
    dur[::97] = 500_000.0  # long ones: they cover the next many starts
    launch = ts - rng.integers(0, 60_000, N)
    launch[rng.random(N) < 0.2] = np.nan
    size = np.where(np.isin(name, [2, 3, 4]), rng.integers(1, 1 << 20, N), np.nan).astype(np.float64)
    size[::11] = np.nan
    owner = np.repeat(rng.permutation(N) * 7 + 1_000_003, 3)[:N]  # three kernels per call, keys not rows
    owner[rng.random(N) < 0.1] = -1
    launcher = Labels(np.asarray(owner % 3, dtype=np.int32), ("aten::mm", "aten::copy_", ""))
    kind = Labels(np.zeros(N, dtype=np.int32), ("kernel",))
    thread = np.where(np.isnan(launch), -1, rng.choice([THREADS[0], THREADS[1]], N))  # launched from two threads
    return KernelTable(Labels(name.astype(np.int32), NAMES), kind, Labels(np.zeros(N, dtype=np.int32), ("cuda:0",)),
                       launcher, dur, ts, stream.astype(np.int64), np.arange(N, dtype=np.int64), launch,
                       rng.integers(1_000, 9_000, N).astype(np.float64), size, owner.astype(np.int64),
                       thread.astype(np.int64))


def _notes(kernels: KernelTable) -> Annotations:
    end = float(kernels.ts_ns[-1])
    starts = np.asarray([0.0, end / 3, end / 2, 0.0, end / 4])
    durs = np.asarray([end / 3, end / 3, end / 5, end, 1000.0])
    return Annotations(Labels.of(["step", "step", "fwd", "all", "fwd"]), np.asarray([False, False, False, False, True]),
                       starts, durs, np.asarray([THREADS[0], THREADS[0], THREADS[1], THREADS[0], 7]))


def test_synthetic_any_block_size() -> None:
    kernels = _synthetic()
    notes = _notes(kernels)
    cut = float(kernels.ts_ns[N // 3]) + 1.0  # inside activities still running there
    steps = [(0.0, cut), (cut, float(kernels.ts_ns[-1]) + 1.0)]
    whole = _plain(_views(InMemory(kernels, block=N), notes, steps))
    for block in (3, 64, 1000):
        _same(_plain(_views(InMemory(kernels, block=block), notes, steps)), whole, median_rel=0.005)
    overlapping = [(0.0, cut), (cut / 2, 2 * cut)]  # a row in two windows
    want = temporal(kernels, overlapping).steps
    assert temporal(InMemory(kernels, block=7), overlapping).steps == want
    assert sum(s.activities for s in want) > N // 3


def _union(start: np.ndarray, end: np.ndarray) -> float:
    total, reach, first = 0.0, -math.inf, math.nan
    for s, e in sorted(zip(start.tolist(), end.tolist(), strict=True)):
        if s > reach:
            total += reach - first if reach > -math.inf else 0.0
            first = s
        reach = max(reach, e)
    return total + (reach - first if reach > -math.inf else 0.0)


def test_synthetic_against_plain_references() -> None:
    kernels = _synthetic()
    src = InMemory(kernels, block=64)
    start, end = kernels.ts_ns, kernels.ts_ns + kernels.dur_ns
    compute = kernels.name.codes <= 1
    whole = temporal(src).whole
    assert whole.span_ns == end.max() - start.min()
    assert whole.idle_ns == whole.span_ns - _union(start, end)
    assert whole.compute_ns == _union(start[compute], end[compute])
    comm = kernels.name.codes == 5
    o = overlap(src)
    assert o.overlap_ns == _union(start[compute], end[compute]) + _union(start[comm], end[comm]) - _union(
        start[compute | comm], end[compute | comm])
    # the gaps of stream 7 (from the furthest end so far: its activities overlap): more than 4096, so the
    # median is the sketch's, within 0.5%
    mine = np.flatnonzero(kernels.stream == 7)
    mine = mine[np.argsort(kernels.ts_ns[mine], kind="stable")]
    gap = kernels.ts_ns[mine][1:] - np.maximum.accumulate(end[mine])[:-1]
    gap = gap[gap > 0]
    assert sum(g.idle_ns for g in idle(src) if g.stream == 7) == pytest.approx(
        (end[mine].max() - kernels.ts_ns[mine].min()) - _union(kernels.ts_ns[mine], end[mine]), abs=1e-3)
    rows = [g for g in idle(src) if g.stream == 7]
    assert sum(g.gaps for g in rows) == gap.size > 4096
    assert sum(g.idle_ns for g in rows) == gap.sum()
    biggest = max(rows, key=lambda g: g.gaps)
    assert biggest.gaps > 4096
    # kernel durations of gemm_a: exact count and total, median within 0.5%, stddev to 1e-9
    dur = kernels.dur_ns[kernels.name.codes == 0]
    row = next(r for r in gpu_kernels.aggregate(src) if r["name"] == "gemm_a")
    assert (row["calls"], row["total_us"]) == (dur.size, dur.sum() / 1e3)
    assert row["median_us"] == pytest.approx(np.median(dur) / 1e3, rel=0.005)
    assert row["stddev_us"] == pytest.approx(dur.std() / 1e3, rel=1e-9)
    (comp,) = [k for k in kernel_types(src) if k.kind == "computation"]
    assert comp.stddev_ns == pytest.approx(kernels.dur_ns[compute].std(), rel=1e-9)


def test_synthetic_launch_sequences_and_queue() -> None:
    kernels = _synthetic()
    src = InMemory(kernels, block=7)
    result = launch(src)
    known = ~np.isnan(kernels.launch_ts_ns)
    assert result.launches == int(known.sum())
    gemm = next(s for s in result.kernels if s.name == "gemm_a")
    delay = np.clip(kernels.ts_ns - kernels.launch_ts_ns - kernels.launch_dur_ns, 0, None)
    delay = delay[known & (kernels.name.codes == 0)]
    assert gemm.launches == delay.size > 4096 and gemm.delay_max_ns == delay.max()
    assert gemm.delay_median_ns == pytest.approx(np.median(delay), rel=0.005)
    calls = np.unique(kernels.owner[kernels.owner >= 0])
    assert sum(s.calls for s in result.sequences) == calls.size
    assert sum(s.calls * len(s.sequence) for s in result.sequences) == int((kernels.owner >= 0).sum())
    # queue lengths: +1 at each launch, -1 at each start, per stream
    for q in queues(src):
        mine = known & (kernels.stream == q.stream)
        ts = np.concatenate([kernels.launch_ts_ns[mine], kernels.ts_ns[mine]])
        step = np.concatenate([np.ones(mine.sum()), -np.ones(mine.sum())])
        length = np.cumsum(step[np.lexsort((-step, ts))])
        assert (q.changes, q.min_length, q.max_length) == (ts.size, length.min(), length.max())


class _Strict:
    """A source offering only what the disk-backed one does: sort keys an integer or float column first,
    float columns after, three at most; the views see nothing but the protocol. Counts the passes."""

    def __init__(self, kernels: KernelTable, block: int) -> None:
        self._inner = InMemory(kernels, block)
        self.passes: list[tuple[str, ...]] = []

    def __len__(self) -> int:
        return len(self._inner)

    def blocks(self, *by: str) -> Iterator[KernelTable]:
        table = self._inner.kernels
        kinds = [getattr(table, c).dtype.kind for c in by]
        assert len(by) <= 3 and all(k == "f" for k in kinds[1:]) and all(k in "if" for k in kinds[:1]), by
        self.passes.append(by)
        values = table.name.values
        for block in self._inner.blocks(*by):
            assert block.name.values is values
            yield block

    def sort(self, records: Iterable[np.ndarray], *by: str) -> Iterator[np.ndarray]:
        def checked() -> Iterator[np.ndarray]:
            for r in records:
                kinds = [r.dtype[f].kind for f in by]
                assert len(by) <= 3 and all(k == "f" for k in kinds[1:]) and kinds[0] in "if", by
                yield r
        self.passes.append(("sort", *by))
        return self._inner.sort(checked(), *by)


@pytest.mark.parametrize("path", TRACES[1:], ids=["v100"])
def test_views_use_only_the_protocol(path: Path) -> None:
    table = read_table(path)
    kernels, notes = table.meta["kernels"], table.meta["annotations"]
    steps = [(float(s), float(e)) for s, e in table.meta["run_windows_ns"]]
    strict = _Strict(kernels, 5)
    src: Activities = strict
    assert _plain(_views(src, notes, steps)) == _plain(_views(kernels, notes, steps))
    assert len(strict.passes) <= 15  # a pass or two per view, never one per group
