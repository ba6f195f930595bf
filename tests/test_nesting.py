"""One nesting rule for every timeline: which call ran inside which, and self times (data/nesting.py).

Both clocks against one brute-force definition: ONNX Runtime's truncated µs (its control-flow bodies
end to end: test_control_flow.py) and the exact clocks of Trace Event Format and PyTorch traces; and the
pieces both use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from layerperf.data.nesting import any_ancestor, enclosing, nest, open_order, outermost, self_times, sort_by
from layerperf.readers.spill import SORT_FIELDS, Spill, records, sort_order


def _brute_parents(thread: np.ndarray, start: np.ndarray, dur: np.ndarray, can_enclose: np.ndarray,
                   zero_first: bool, reach: float | None = None) -> list[int]:
    """The last ``can_enclose`` event on the same thread opened before each (by start, the longer first,
    then file order; zero-length first of all with ``zero_first``) that had not ended when it started (and,
    with a ``reach``, that it does not outlast by more)."""
    rank = np.empty(start.size, dtype=np.int64)
    rank[open_order(thread, start, dur, zero_first=zero_first)] = np.arange(start.size)
    out = []
    for e in range(start.size):
        holders = [p for p in range(start.size) if can_enclose[p] and thread[p] == thread[e] and rank[p] < rank[e]
                   and start[e] < start[p] + dur[p]
                   and (reach is None or start[e] + dur[e] <= start[p] + dur[p] + reach)]
        out.append(max(holders, key=lambda p: rank[p]) if holders else -1)
    return out


def _events(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    thread = rng.integers(0, 3, n)
    start = rng.integers(0, 60, n)
    dur = np.where(rng.random(n) < 0.2, 0, rng.integers(1, 30, n))
    return thread, start, dur, rng


@pytest.mark.parametrize("seed", range(30))
def test_truncated_clock_nesting_matches_its_definition(seed: int) -> None:
    """ONNX Runtime's profile: only control-flow events enclose, zero-length ones open first."""
    thread, start, dur, rng = _events(seed)
    flow = rng.random(start.size) < 0.3
    assert enclosing(thread, start, dur, flow).tolist() == _brute_parents(thread, start, dur, flow, True)


@pytest.mark.parametrize("seed", range(30))
def test_exact_clock_nesting_matches_its_definition(seed: int) -> None:
    """Overlaps that are no nesting included: a call's parent is the last one still open when it starts."""
    thread, start, dur, _ = _events(seed + 100)
    n = start.size
    parent = enclosing(thread, start, dur, zero_first=False)
    assert parent.tolist() == _brute_parents(thread, start, dur, np.ones(n, dtype=bool), False)
    # self time: the part of its span that nothing nested in it (at any depth) covers, each instant once
    end = start + dur
    assert self_times(parent, start, end, clip=False).tolist() == _brute_self(parent, start, end)


def _brute_self(parent: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[int]:
    """Per event (whole-unit times): the units of its span covered by none of its descendants."""
    out = []
    for i in range(start.size):
        covered: set[int] = set()
        for d in range(start.size):
            up = parent[d]
            while up >= 0 and up != i:
                up = parent[up]
            if up == i:
                covered |= set(range(int(start[d]), int(end[d])))
        out.append(len(set(range(int(start[i]), int(end[i]))) - covered))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_exact_clock_self_time_with_a_reach_matches_its_definition(seed: int) -> None:
    """With the reach PyTorch traces use (ops bounded, runtime calls not): a call's tail past its parent's end
    is taken from the grandparent, overlapping siblings count once."""
    thread, start, dur, rng = _events(seed + 600)
    reach = np.where(rng.random(start.size) < 0.4, np.inf, 2.0)
    parent = enclosing(thread, start, dur, zero_first=False, reach=reach)
    end = start + dur
    assert self_times(parent, start, end, clip=False).tolist() == _brute_self(parent, start, end)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("reach", [0, 3, "mixed"])
def test_exact_clock_nesting_with_a_reach_matches_its_definition(seed: int, reach: int | str) -> None:
    """A call outlasting an open one by more than its reach is not inside it: the guesses that jump along
    each other's still find the last one that holds it (the random timelines overlap a lot); a reach per
    event (PyTorch's runtime calls unbounded, its ops 1 µs) too."""
    thread, start, dur, rng = _events(seed + 300)
    ones = np.ones(start.size, dtype=bool)
    per = np.where(rng.random(start.size) < 0.3, np.inf, rng.integers(0, 4, start.size)) if reach == "mixed" \
        else np.full(start.size, float(reach))
    brute = []
    for e in range(start.size):  # the definition, each event with its own reach
        brute.append(_brute_parents(thread, start, dur, ones, False, float(per[e]))[e])
    got = enclosing(thread, start, dur, zero_first=False, reach=per if reach == "mixed" else int(reach))
    assert got.tolist() == brute


def test_siblings_overlapping_by_a_rounding_nanosecond() -> None:
    """linear [0, 10.001], relu [10, 50] with a linear [12, 32] inside it: relu is linear's sibling, not its
    child (it goes on 40 µs past it), so the second linear is outermost and the group's inclusive time is both
    calls' (30.001 µs), not the first's alone; a child ending past its parent by less than the reach (a µs
    producer's rounding) stays its child."""
    thread = np.zeros(3, dtype=np.int64)
    start, dur = np.array([0.0, 10_000, 12_000]), np.array([10_001.0, 40_000, 20_000])
    self_ns, parent = nest(thread, start, start + dur)
    assert parent is not None and parent.tolist() == [-1, -1, 1]
    assert self_ns.tolist() == [10_001, 20_000, 20_000]
    start, dur = np.array([0.0, 5_000]), np.array([10_000.0, 5_600])  # ends 600 ns past: rounding
    assert nest(np.zeros(2, dtype=np.int64), start, start + dur)[1].tolist() == [-1, 0]


def test_self_time_of_absolute_nanoseconds_keeps_its_last_digits() -> None:
    """Times of today's clocks in ns (~1.7e18) are beyond float64's integers: worked out from each parent's
    start, a child of 20 ns and one of 27 still count (953 ns of self time, not 1000)."""
    base = 1_700_000_000_000_000_123
    start = np.array([0, 10, 50], dtype=np.int64) + base
    end = np.array([1000, 30, 77], dtype=np.int64) + base
    assert self_times(np.array([-1, 0, 0]), start, end, clip=False).tolist() == [953, 20, 27]


def test_nesting_rules_side_by_side() -> None:
    """outer [0, 10) with a child at its start, a zero-length event there, a child spilling past its end."""
    thread = np.zeros(4, dtype=np.int64)
    start = np.array([0, 0, 0, 8])
    dur = np.array([10, 4, 0, 4])
    end = start + dur
    # exact clocks: the zero-length event at outer's start is inside it, the spill keeps its own duration
    assert enclosing(thread, start, dur, zero_first=False).tolist() == [-1, 0, 1, 0]
    assert self_times(np.array([-1, 0, 1, 0]), start, end, clip=False).tolist() == [4, 4, 0, 4]
    # truncated µs (ONNX Runtime): the zero-length event is outer's sibling, the spill is cut at outer's end
    flow = np.array([True, False, False, False])
    assert enclosing(thread, start, dur, flow).tolist() == [-1, 0, -1, 0]
    assert self_times(np.array([-1, 0, -1, 0]), start, end).tolist() == [4, 4, 0, 2]


def test_a_call_is_inside_what_is_still_open_when_it_starts() -> None:
    """a [0, 10), b [5, 15) overlapping it, c [12, 20): c started inside b (a had ended)."""
    thread = np.zeros(3, dtype=np.int64)
    start, end = np.array([0, 5, 12]), np.array([10, 15, 20])
    self_ns, parent = nest(thread, start, end)
    assert parent is not None and parent.tolist() == [-1, 0, 1]
    assert self_ns.tolist() == [5, 7, 8]
    flat_ns, none = nest(thread[:2], np.array([0, 10]), np.array([10, 20]))  # touching: nothing nests
    assert none is None and flat_ns.tolist() == [10, 10]


def test_work_counts_on_the_outermost_call_that_has_it() -> None:
    values = np.array([np.nan, 6.0, 6.0, np.nan, 2.0])  # conv2d > convolution > ..., a lone op
    parent = np.array([-1, 0, 1, 2, -1])
    assert np.array_equal(outermost(values, parent), [np.nan, 6.0, np.nan, np.nan, 2.0], equal_nan=True)


@pytest.mark.parametrize("seed", range(20))
def test_sort_by_is_lexsort_with_ties_settled_by_the_later_keys(seed: int) -> None:
    # few distinct values, so most rows tie on the first two keys and the later ones decide
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    keys = [rng.integers(0, int(rng.integers(1, 5)), n).astype(dtype)
            for dtype in (np.int64, np.float64, np.int8, np.float64, np.int64)[:int(rng.integers(1, 6))]]
    assert np.array_equal(sort_by(keys), np.lexsort(keys[::-1]))
    if n and keys[0].dtype.kind == "i" and len(keys) > 2:  # NaN in a float head key sorts last, ties by the rest
        floats = [keys[0], np.where(rng.random(n) < 0.3, np.nan, rng.integers(0, 3, n).astype(float)), *keys[2:]]
        assert np.array_equal(sort_by(floats), np.lexsort(floats[::-1]))


def test_spill_runs_sort_as_a_lexsort_of_every_field_would() -> None:
    rng = np.random.default_rng(0)
    for file_order in (True, False):
        rec = records(5000)
        rec["thread_key"] = rng.integers(0, 3, rec.size)
        rec["ts_us"] = rng.integers(0, 50, rec.size) * 0.5
        rec["nonzero"] = rng.integers(0, 2, rec.size)
        rec["neg_dur"] = -rng.integers(0, 4, rec.size)
        rec["seq"] = np.arange(rec.size) if file_order else rng.permutation(rec.size)
        for zero_first in (True, False):
            fields = [f for f in SORT_FIELDS if zero_first or f != "nonzero"]
            order = sort_order(rec, zero_first)
            assert order is not None
            assert np.array_equal(order, np.lexsort([rec[f] for f in reversed(fields)]))


@pytest.mark.parametrize("seed", range(10))
def test_any_ancestor_walks_every_chain_to_its_top(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    parent = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])  # a forest: parents come first
    code = rng.integers(0, 3, n)
    flag = rng.random(n) < 0.2

    def reference(test: Callable[[int, int], bool]) -> list[bool]:
        out = []
        for row in range(n):
            up, hit = parent[row], False
            while up >= 0 and not hit:
                hit, up = test(up, row), parent[up]
            out.append(hit)
        return out

    same = any_ancestor(parent, lambda up, rows: code[up] == code[rows])
    assert same.tolist() == reference(lambda up, row: bool(code[up] == code[row]))
    assert any_ancestor(parent, lambda up, rows: flag[up]).tolist() == reference(lambda up, row: bool(flag[up]))


@pytest.mark.parametrize("seed", range(12))
def test_spill_merges_its_runs_in_sort_order_whether_they_overlap_follow_or_tie(seed: int,
                                                                                tmp_path: Path) -> None:
    # runs written as a time-ordered file gives them (each after the last: read one after another), as
    # PyTorch's gives them (overlapping), and with ties on every field but the file position across runs
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6000))
    rec = records(n)
    rec["seq"] = np.arange(n)
    ordered = seed % 3 == 0
    threads = 1 if seed % 2 else 3
    rec["thread_key"] = rng.integers(0, threads, n)
    rec["ts_us"] = np.arange(n) * 0.5 if ordered else rng.integers(0, max(n // 8, 1), n) * 0.5
    rec["nonzero"] = rng.integers(0, 2, n)
    rec["neg_dur"] = -rng.integers(0, 3, n)
    zero_first = bool(seed % 4 < 2)
    with Spill(zero_first, str(tmp_path), run_records=int(rng.integers(1, 700))) as spill:
        for piece in np.array_split(rec, int(rng.integers(1, 30))):
            spill.add(piece.copy())
        budget = int(rng.integers(1, 5000))
        blocks = list(spill.sorted_blocks(budget))
    out = np.concatenate(blocks) if blocks else records(0)
    fields = [f for f in SORT_FIELDS if zero_first or f != "nonzero"]
    assert np.array_equal(out["seq"], rec["seq"][np.lexsort([rec[f] for f in reversed(fields)])])
    assert all(b.size for b in blocks)


def test_spill_reads_runs_that_follow_one_another_as_one(tmp_path: Path) -> None:
    rec = records(10_000)
    rec["seq"] = np.arange(rec.size)
    rec["ts_us"] = np.arange(rec.size) * 1.0
    with Spill(True, str(tmp_path), run_records=1000) as spill:
        for piece in np.array_split(rec, 10):
            spill.add(piece.copy())
        assert len(spill.runs) == 10
        blocks = list(spill.sorted_blocks(budget=4096))
    # one chain of ten runs, read 4,096 records at a time across the files (ten runs merged side by side
    # would give a block per run)
    assert [b.size for b in blocks] == [4096, 4096, 1808]
    assert np.array_equal(np.concatenate(blocks)["seq"], rec["seq"])
