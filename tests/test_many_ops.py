"""Traces that name many distinct ops — a decoder whose sequence grows step by step calls every node with new
shapes — fold at a cost per call, not per identity and segment: the same figures as the table read whole,
each segment's merge given only the identities its rows have, a few numbers per identity, and the
sketches' columns equal to a sketch per group."""

from __future__ import annotations

import gc
import itertools
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerperf.analysis import aggregate as analysis
from layerperf.data.calls import Interner, Labels, TableBuilder
from layerperf.data.fold import Folded
from layerperf.data.sketch import Sketch, Sketches
from layerperf.readers import detect, ort
from stream_traces import check_folded, shrink

NODES = (("q", "MatMul"), ("k", "QuantizeLinear"), ("act", "Relu"), ("body", "Add"), ("loop", "Loop"))


def growing(path: Path, steps: int = 60) -> Path:
    """An ONNX Runtime profile of ``steps`` runs, run ``s`` with sequence length ``s + 1``: every node has a
    new identity each run; counters on some nodes, a Loop whose body is nested in it."""
    events: list[dict[str, Any]] = []
    ts = 0
    for step in range(steps):
        start, seq = ts, step + 1
        for name, op in NODES:
            d = 3 + (step * 7 + len(name)) % 11
            if op == "Loop":  # its body ran inside it, and is written first, as ONNX Runtime writes it
                events.append(_node("body2", "Add", ts + 1, 1, seq))
            events.append(_node(name, op, ts, d, seq, counted=name in ("q", "act")))
            ts += d + 1
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 7, "ts": start,
                       "dur": ts - start})
        ts += 5
    path.write_text(json.dumps(events))
    return path


def _node(name: str, op: str, ts: int, dur: int, seq: int, counted: bool = False) -> dict[str, Any]:
    second, out = ({"float": []}, "int8") if op == "QuantizeLinear" else ({"float": [16, 16]}, "float")
    args: dict[str, Any] = {"op_name": op, "provider": "CPUExecutionProvider",
                            "input_type_shape": [{"float": [seq, 16]}, second], "output_type_shape": [{out: [seq, 16]}]}
    if counted:
        args["layerperf_counters"] = {"task-clock": float(1000 * seq + dur)}
    return {"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "pid": 1, "tid": 7, "ts": ts, "dur": dur,
            "args": args}


@pytest.fixture()
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    shrink(monkeypatch, segment=40, run=97, merge=50, block=13)


def test_many_distinct_ops_fold_as_read_whole(small_segments: None, tmp_path: Path) -> None:
    path = growing(tmp_path / "t.json")
    folded = check_folded(path)  # every grouping and statistic
    table = detect.read_table(path)
    ref, got = analysis.aggregate(table, "shape", "sum"), folded.table("shape", "sum")
    assert len(got) > 250  # a row per node and shape
    assert np.array_equal(ref.counters["task-clock"], got.counters["task-clock"], equal_nan=True)
    assert np.isfinite(got.counters["task-clock"]).sum() == 120
    assert np.isfinite(got.int_ops).sum() == 240  # all but the Loop's (the two Add bodies share a shape)
    assert "loop::body2" in set(folded.table("name", "sum").name.tolist())  # the body named after its Loop


def test_counts_met_late_stay_unknown_for_calls_before(small_segments: None, tmp_path: Path) -> None:
    """A node counted only after others ran uncounted (counting that starts after warm-up steps), named first
    in the file but run last: the uncounted calls folded before any counter was met are unknown (NaN), not
    0 / inf, and every statistic equals the table read whole; medians too (their sketches were short)."""
    events: list[dict[str, Any]] = []
    for step in range(40):  # "b", never counted, runs in every step; "a" is counted in the last ten
        start = step * 100
        for k, (name, counted) in enumerate((("b", False), ("a", step >= 30))):
            ev = _node(name, "Relu", start + 10 * k, 3 + step % 4, 1 + step, counted=counted)
            events.append(ev)
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 7, "ts": start,
                       "dur": 30})
    first_a = next(i for i, e in enumerate(events) if e["name"] == "a_kernel_time")
    events.insert(0, events.pop(first_a))  # "a" named first in the file (its first call still at its time)
    path = tmp_path / "late.json"
    path.write_text(json.dumps(events))
    folded = check_folded(path)  # counters compared too, NaN where NaN
    for how in ("sum", "min", "max", "median"):
        got = folded.table("name", how)
        per_name = dict(zip(got.name.tolist(), got.counters["task-clock"].tolist(), strict=True))
        assert math.isnan(per_name["b"]), how
        assert math.isnan(per_name["a"]), how  # thirty of its forty calls were not counted either


def test_counter_columns_in_the_order_of_the_table_read_whole(small_segments: None, tmp_path: Path) -> None:
    """A node named first in the file counts task-clock and cycles but runs last; the nodes that run first count
    cycles only. Segments come in time order and each carries its own nodes' counters, yet the columns come in
    the file's order, as read whole (they were swapped: the output's columns moved)."""
    events = [_node("y", "Relu", 100_000, 5, 1, counted=True)]
    events[0]["args"]["layerperf_counters"] = {"task-clock": 10.0, "cycles": 20.0}
    for i in range(200):
        events.append(_node("x", "Relu", i * 10, 3, 1))
        events[-1]["args"]["layerperf_counters"] = {"cycles": 7.0}
        events.append(_node(f"f{i % 4}", "Relu", i * 10 + 4, 2, 1))
    path = tmp_path / "order.json"
    path.write_text(json.dumps(events))
    assert list(detect.read_table(path).counters) == ["task-clock", "cycles"]
    folded = check_folded(path)  # the counters' order compared too
    assert list(folded.table("name", "sum").counters) == ["task-clock", "cycles"]


def test_a_counter_met_after_many_identities_then_merged(tmp_path: Path) -> None:
    """A counter that first comes in a later table, and one only the other half of a merge has: medians work
    (the sketches grow to every slot) and calls without it stay unknown."""
    def table(names: list[str], cycles: float | None) -> Any:
        b = TableBuilder()
        keys = [b.ident(n, "Relu", "CPU", "", "") for n in names]
        counters = None if cycles is None else {"cycles": [cycles] * len(keys)}
        b.extend(keys, [1.0] * len(keys), counters=counters)
        return b.build({})

    first, late = Folded(quantiles=True), table(["x"], 5.0)
    first.add(table([f"n{k}" for k in range(100)], None))
    first.add(late)
    other = Folded(quantiles=True)
    other.add(table(["x", "n7"], None))
    first.merge(other)
    for how in ("sum", "median", "p90", "min", "max"):
        got = first.table("name", how)
        values = dict(zip(got.name.tolist(), got.counters["cycles"].tolist(), strict=True))
        assert math.isnan(values["n7"]) and math.isnan(values["x"]) and math.isnan(values["n3"]), how
    only = Folded(quantiles=True)
    only.add(late)
    assert only.table("name", "median").counters["cycles"].tolist() == [5.0]


def test_nothing_folded_is_an_empty_table() -> None:
    folded, other = Folded(quantiles=True), Folded(quantiles=True)
    folded.merge(other)
    for by in ("name", "type", "provider", "shape"):
        for how in analysis.AGGREGATES:
            assert len(folded.table(by, how)) == 0


def test_extremes_keep_the_first_of_equal_values() -> None:
    """0.0 and -0.0 compare equal: the least and largest keep the one met first, across tables and across the
    identities of a group, as comparing them one by one does."""
    def table(value: float, name: str = "a") -> Any:
        b = TableBuilder()
        b.extend([b.ident(name, "Relu", "CPU", "", "")], [value])
        return b.build({})

    for first, then in ((0.0, -0.0), (-0.0, 0.0)):
        folded = Folded()
        for t in (table(first), table(then), table(then, "b")):
            folded.add(t)
        for how in ("min", "max"):
            for by in ("name", "type"):  # across tables; across a group's members too
                assert np.signbit(folded.table(by, how).dur_ns[0]) == np.signbit(first), (first, how, by)


def test_each_segment_merges_only_its_own_identities(small_segments: None, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment's rows are merged with the identities they have, not with every identity of the trace (which
    cost a trace of 300,000 distinct ops that many in every segment)."""
    path = growing(tmp_path / "t.json")
    given: list[tuple[int, int]] = []
    merge = ort.merge

    def counting(parts: list[Any], *args: Any, **kw: Any) -> Any:
        given.append((len(parts[0].idents), int(np.unique(parts[0].columns[3]).size)))
        return merge(parts, *args, **kw)

    monkeypatch.setattr(ort, "merge", counting)
    folded = detect.read_folded(path)
    assert isinstance(folded, Folded) and len(given) > 5
    assert all(idents == used for idents, used in given), given
    assert sum(idents for idents, _ in given) < 2 * len(folded.idents)


def test_an_identity_takes_a_few_numbers_a_figure() -> None:
    """Folding 30,000 distinct ops of three calls each, medians kept: under 1,500 bytes an identity, its
    name and statistics included (a list of floats and a sketch object per figure took ~4,500)."""
    n = 30_000
    builder = TableBuilder()
    codes = [builder.ident(f"node{k}", "MatMul", "CPU", f"1x{k}x768", f"1x{k}x768") for k in range(n)]
    keys = np.repeat(np.asarray(codes), 3)
    builder.extend(keys, np.random.default_rng(0).uniform(1, 9, keys.size), flops=np.full(keys.size, 1e6))
    table = builder.build({})
    gc.collect()
    tracemalloc.start()
    try:
        folded = Folded(quantiles=True)
        folded.add(table)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(folded.idents) == n and folded.calls == 3 * n
    assert held / n < 1500, held / n
    median = folded.table("name", "median")
    assert median.dur_ns[7] == np.median(table.dur_ns[keys == codes[7]])  # exact: three values


def _sketch_of(parts: list[np.ndarray]) -> Sketch:
    s = Sketch()
    for p in parts:
        s.add(p)
    return s


@pytest.mark.parametrize("seed", range(6))
def test_sketch_columns_equal_a_sketch_per_group(seed: int) -> None:
    """Groups small and past EXACT_MAX, NaN, zero and negative values, another instance merged in under other
    codes, unions of groups: every quantile equals the one Sketch objects give, to the bit."""
    rng = np.random.default_rng(seed)
    groups = int(rng.integers(2, 40))
    mine: list[list[np.ndarray]] = [[] for _ in range(groups)]
    columns = Sketches()
    for _ in range(int(rng.integers(1, 10))):
        n = int(rng.integers(0, 4000))
        g = np.minimum(rng.zipf(1.4, n) - 1, groups - 1)  # a few groups get most values
        v = rng.lognormal(2, 2, n) * np.where(rng.random(n) < 0.1, -1, 1)
        v[rng.random(n) < 0.05] = 0.0
        v[rng.random(n) < 0.0005] = np.nan
        columns.add(g, v)
        for k in range(groups):
            mine[k].append(v[g == k])
    other, theirs = Sketches(), [rng.lognormal(1, 1, int(rng.integers(0, 6000))) for _ in range(groups)]
    other.add(np.repeat(np.arange(groups), [t.size for t in theirs]), np.concatenate(theirs))
    slots = rng.permutation(groups)
    columns.merge(other, slots)
    for k in range(groups):
        mine[slots[k]].append(theirs[k])
    reference = [_sketch_of(parts) for parts in mine]
    assert any(not s.is_exact for s in reference) and any(s.is_exact for s in reference)
    unions = [sorted(set(rng.choice(groups, int(rng.integers(1, 5))).tolist())) for _ in range(12)]
    for pct in (50.0, 90.0):
        want = [s.quantile(pct) for s in reference]
        assert np.array_equal(columns.quantiles(pct)[:groups], want, equal_nan=True)
        assert np.array_equal([columns.quantile(k, pct) for k in range(groups)], want, equal_nan=True)
        merged = []
        for union in unions:
            s = Sketch()
            for k in union:
                s.merge(reference[k])
            merged.append(s.quantile(pct))
        assert np.array_equal(columns.quantiles(pct, unions), merged, equal_nan=True)
    assert math.isnan(Sketches().quantile(3, 50)) and math.isnan(columns.quantile(-1, 50))
    assert np.isnan(columns.quantiles(50.0, [[groups + 5], [0, groups + 9]])[0])  # a group never given a value


def test_kineto_segments_name_only_their_own_ops(small_segments: None, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyTorch trace of ops whose shapes grow call after call: each segment's table is made with the
    identities its rows have, not with every identity of the trace, and the figures are as read whole."""
    from layerperf.readers import kineto_stream

    events: list[dict[str, Any]] = []
    for k in range(600):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 3}", "pid": 1, "tid": 1, "ts": 10.0 * k,
                       "dur": 4.0 + k % 5, "args": {"Input Dims": [[1, 1 + k // 3, 64]], "External id": k + 1}})
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    sizes: list[tuple[int, int]] = []
    make = kineto_stream._segment_table

    def measured(seg: Any, *args: Any, **kw: Any) -> Any:
        table = make(seg, *args, **kw)
        sizes.append((len(table.in_shapes.values), int(np.unique(table.in_shapes.codes).size)))
        return table

    monkeypatch.setattr(kineto_stream, "_segment_table", measured)
    folded = check_folded(path)
    assert len(folded.idents) == 600 and len(sizes) > 5
    assert all(named == used for named, used in sizes), sizes


def test_interner_numbers_values_in_the_order_first_seen() -> None:
    rng = np.random.default_rng(1)
    seen = Interner()
    naive: dict[Any, int] = {}
    for size in (0, 50, 1, 400, 400):
        values = [(f"n{v}", "x") for v in rng.integers(0, 300, size).tolist()]
        want = [naive.setdefault(v, len(naive)) for v in values]
        assert seen.codes(iter(values)) == want
    assert seen.values() == list(naive)
    fresh = Interner()
    assert fresh.codes(["a", "b", "a", "c"]) == [0, 1, 0, 2] and fresh.picked([2, 0]) == ["c", "a"]
    assert fresh.codes(["d", "e"]) == [3, 4] and fresh.picked([4, 3, 1]) == ["e", "d", "b"]  # the list made again
    assert Labels.of(["b", "a", "b"]).tolist() == ["b", "a", "b"] and Labels.of(["b", "a", "b"]).values == ("b", "a")


def test_json_rows_keep_unknowns_null_and_whole_counts_int() -> None:
    builder = TableBuilder()
    a, b = builder.ident("a", "Conv", "CPU", "", ""), builder.ident("b", "Relu", "CPU", "", "")
    builder.extend([a, b, b], [1.5, 2.0, math.nan], flops=[3e20, math.nan, math.nan], bytes_=[2.5, 4.0, 4.0],
                   counters={"cycles": [7.0, 4.0, 5.0]})
    rows = analysis.rows(analysis.aggregate(builder.build({}), "name", "sum"))
    assert [r["name"] for r in rows] == ["a", "b"] and [r["calls"] for r in rows] == [1, 2]
    assert rows[0]["flops"] == 3 * 10**20 and type(rows[0]["flops"]) is int  # a count: whole numbers as ints
    assert rows[1]["flops"] is None and rows[1]["time_us"] is None  # unknown: null
    assert rows[0]["bytes"] == 2.5 and rows[1]["bytes"] == 8 and type(rows[1]["bytes"]) is int
    assert rows[0]["time_us"] == 1.5 and type(rows[0]["time_us"]) is float
    assert [r["cycles"] for r in rows] == [7.0, 9.0] and all(type(r["cycles"]) is float for r in rows)
    assert list(itertools.islice(rows[0], 3)) == ["name", "op_type", "provider"]
    assert list(rows[0])[-2:] == ["in_shapes", "out_shapes"]
