"""Control flow: Loop, If and Scan bodies nested in their parent node's span.

Expectations come from what ONNX Runtime recorded: each node event, the control-flow events whose
span holds it, their durations, and the shapes the profiler wrote; never from fixed timings.
"""

from __future__ import annotations

import csv
import importlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import layerperf
from controlflow_models import LOOP_TRIPS, MODELS, OUTER_TRIPS, SCAN_STEPS, feeds
from layerperf.backends.ort.layers import build_layers_and_runs, unknown_cost_ops
from layerperf.backends.ort.measure import OPT_LEVELS
from layerperf.data.metadata import Metadata
from layerperf.data.profile import Profile
from layerperf.readers.detect import read_table
from layerperf.readers.ort import is_kernel_event, node_name, split_runs

FLOW = ("Loop", "If", "Scan")
RUNS = 3


@dataclass
class Recorded:
    """ONNX Runtime's own profile of some runs, the graph it ran, and the Profile layerperf makes of it."""

    path: Path
    events: list[dict[str, Any]]
    optimized: onnx.ModelProto
    profile: Profile


def record(model: onnx.ModelProto, inputs: list[dict[str, Any]], tmp: Path, opt_level: str = "all",
           runs: int = RUNS) -> Recorded:
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp / "ort")
    so.graph_optimization_level = OPT_LEVELS[opt_level]
    so.optimized_model_filepath = str(tmp / "optimized.onnx")
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        for feed in inputs:
            sess.run(None, feed)
    path = Path(sess.end_profiling())
    events = json.loads(path.read_text())
    optimized = onnx.load(str(tmp / "optimized.onnx"), load_external_data=False)
    layers, run_list = build_layers_and_runs([(0, r) for r in split_runs(events)], optimized, 0, model)
    return Recorded(path, events, optimized, Profile(metadata=Metadata(), layers=layers, runs=run_list))


# -- what ONNX Runtime recorded, read independently of layerperf's nesting code ----------------------
def _kernels(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if is_kernel_event(e)]


def _inside(child: dict[str, Any], parent: dict[str, Any]) -> bool:
    return (child is not parent and child["tid"] == parent["tid"] and parent["ts"] <= child["ts"]
            and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"])


def recorded_parents(kernels: list[dict[str, Any]]) -> list[int | None]:
    """Each node event's innermost enclosing control-flow event (the shortest one holding it)."""
    flow = [i for i, e in enumerate(kernels) if e["args"].get("op_name") in FLOW]
    out: list[int | None] = []
    for e in kernels:
        holders = [p for p in flow if _inside(e, kernels[p])]
        out.append(min(holders, key=lambda p: kernels[p]["dur"]) if holders else None)
    return out


def recorded_calls(events: list[dict[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    """Per layer name (a body node's qualified by its parent's): (self ns, duration ns) of each call,
    self = duration - the durations of the events directly inside it."""
    kernels = _kernels(events)
    parents = recorded_parents(kernels)

    def name(i: int) -> str:
        own = node_name(kernels[i]["name"])
        p = parents[i]
        return own if p is None else f"{name(p)}::{own}"

    inner = [0] * len(kernels)
    for i, p in enumerate(parents):
        if p is not None:
            inner[p] += kernels[i]["dur"]
    calls: dict[str, list[tuple[int, int]]] = {}
    for i, e in enumerate(kernels):
        calls.setdefault(name(i), []).append(((e["dur"] - inner[i]) * 1000, e["dur"] * 1000))
    return calls


def run_total_ns(events: list[dict[str, Any]]) -> int:
    return sum(e["dur"] * 1000 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")


# -- the invariants ----------------------------------------------------------------------------------
def check_against_recorded(rec: Recorded) -> None:
    prof = rec.profile
    expected = recorded_calls(rec.events)
    assert {layer.name for layer in prof.layers} == set(expected)
    for i, layer in enumerate(prof.layers):
        calls = expected[layer.name]
        assert sorted(prof.durations_ns(i).tolist()) == sorted(s for s, _ in calls), layer.name
        assert sorted(prof.inclusive_ns(i).tolist()) == sorted(d for _, d in calls), layer.name
    self_total = int(sum(prof.durations_ns(i).sum() for i in range(len(prof.layers))))
    assert self_total <= run_total_ns(rec.events)  # no nanosecond counted twice
    top_level = sum(prof.inclusive_ns(i).sum() for i, la in enumerate(prof.layers) if la.parent is None)
    assert self_total == top_level  # and none lost: the bodies' time is their parents'


def check_flops(prof: Profile) -> None:
    """A parent's FLOPs per call: its body's calls' FLOPs over its own calls; unknown when any is."""
    calls = {la.name: prof.durations_ns(i).size for i, la in enumerate(prof.layers)}
    for parent in prof.layers:
        body = [la for la in prof.layers if la.parent == parent.name]
        if not body:
            continue
        if any(la.flops is None for la in body):
            assert parent.flops is None
            assert any(w.startswith(parent.op_type) for w in unknown_cost_ops(prof.layers))
        else:
            total = sum(la.flops * calls[la.name] for la in body)  # type: ignore[operator]
            assert parent.flops == round(total / calls[parent.name])


def by_name(path: Path) -> dict[str, dict[str, Any]]:
    from layerperf.analysis import aggregate as analysis

    return {r["name"]: r for r in analysis.rows(analysis.aggregate(read_table(path), "name", "sum"))}


def check_analyze(rec: Recorded, tmp: Path) -> None:
    """``layerperf analyze`` of the raw profile and of the saved layerperf trace agree."""
    layerperf.save(rec.profile, tmp / "saved")
    raw, saved = by_name(rec.path), by_name(tmp / "saved")
    assert set(raw) == set(saved) == {la.name for la in rec.profile.layers}
    for name, r in raw.items():
        s = saved[name]
        assert (r["calls"], r["op_type"]) == (s["calls"], s["op_type"]), name
        assert r["time_us"] == pytest.approx(s["time_us"], abs=1e-6), name
        assert r["incl_us"] == pytest.approx(s["incl_us"], abs=1e-6), name
        if r["flops"] is not None:  # the raw profile lacks attributes: some FLOPs are unknown there only
            # per call there; a saved layer's whose shapes vary from call to call: their mean, rounded
            assert abs(r["flops"] - s["flops"]) <= 0.5 * r["calls"], name


# -- the tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("opt_level", ["disable", "all"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_nesting_matches_what_ort_recorded(model: str, opt_level: str, tmp_path: Path) -> None:
    rec = record(MODELS[model](), feeds(model), tmp_path, opt_level)
    assert any(la.parent for la in rec.profile.layers), "the body nodes were recorded"
    check_against_recorded(rec)
    check_flops(rec.profile)
    check_analyze(rec, tmp_path)


def _layer(prof: Profile, name: str) -> int:
    return next(i for i, la in enumerate(prof.layers) if la.name == name)


def test_loop_body_runs_once_per_iteration(tmp_path: Path) -> None:
    rec = record(MODELS["loop"](), feeds("loop"), tmp_path, "disable")
    prof = rec.profile
    loop = _layer(prof, "loop")
    matmul = _layer(prof, "loop::b_matmul")
    iterations = prof.durations_ns(matmul).size // prof.durations_ns(loop).size
    assert iterations == LOOP_TRIPS
    # the MatMul's FLOPs from the shapes the profiler recorded for it: (m x k) in, (m x n) out
    ev = next(e for e in _kernels(rec.events) if node_name(e["name"]) == "b_matmul")
    (m, k), (_, n) = (next(iter(t[0].values())) for t in (ev["args"]["input_type_shape"],
                                                            ev["args"]["output_type_shape"]))
    assert prof.layers[matmul].flops == 2 * m * k * n
    body = sum(la.flops or 0 for la in prof.layers if la.parent == "loop")
    assert prof.layers[loop].flops == iterations * body
    assert unknown_cost_ops(prof.layers) == []


def test_nested_loops_qualify_names_twice(tmp_path: Path) -> None:
    prof = record(MODELS["nested"](), feeds("nested"), tmp_path, "disable").profile
    names = {la.name: la.parent for la in prof.layers}
    assert names["outer::inner"] == "outer"
    assert names["outer::inner::i_matmul"] == "outer::inner"
    inner, outer = _layer(prof, "outer::inner"), _layer(prof, "outer")
    assert prof.durations_ns(inner).size == OUTER_TRIPS * prof.durations_ns(outer).size
    assert prof.layers[outer].flops == OUTER_TRIPS * prof.layers[inner].flops  # type: ignore[operator]


def test_if_counts_the_branch_taken(tmp_path: Path) -> None:
    model = MODELS["if"]()
    (tmp_path / "then").mkdir()
    then_only = record(model, feeds("if")[:1], tmp_path / "then", "disable").profile
    assert {la.name for la in then_only.layers if la.parent} == {"if::t_matmul", "if::t_add"}
    both = record(model, feeds("if"), tmp_path, "disable").profile
    calls = {la.name: both.durations_ns(i).size for i, la in enumerate(both.layers)}
    assert calls["if::t_matmul"] == calls["if::e_mul"] == calls["if"] // 2
    # FLOPs per call of the If: the mean of its calls' bodies (half of them each branch)
    then_flops = sum(la.flops or 0 for la in both.layers if la.name.startswith("if::t_"))
    else_flops = next(la.flops for la in both.layers if la.name == "if::e_mul")
    assert both.layers[_layer(both, "if")].flops == round((then_flops + else_flops) / 2)  # type: ignore[operator]


def test_scan_steps(tmp_path: Path) -> None:
    prof = record(MODELS["scan"](), feeds("scan"), tmp_path, "disable").profile
    steps = prof.durations_ns(_layer(prof, "scan::s_matmul")).size // prof.durations_ns(_layer(prof, "scan")).size
    assert steps == SCAN_STEPS


def test_profile_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "loop.onnx"
    onnx.save(MODELS["loop"](), path)
    prof = layerperf.profile(path, warmup=1, runs=4, latency=False)
    self_total = sum(prof.durations_ns(i).sum() for i in range(len(prof.layers)))
    assert self_total <= prof.run_durations_ns.sum()
    rows = {r["name"]: r for r in prof.table()}
    loop = rows["loop"]
    assert loop["parent"] is None and loop["incl_median_us"] > loop["median_us"]
    assert all(r["parent"] == "loop" for name, r in rows.items() if name != "loop")
    assert sum(r["share"] for r in rows.values()) == pytest.approx(1.0)
    assert loop["flops_per_s"] == pytest.approx(loop["flops"] / (loop["incl_median_us"] * 1e-6))
    layerperf.save(prof, tmp_path / "out")
    again = layerperf.load(tmp_path / "out")
    assert again == prof
    for i in range(len(prof.layers)):
        assert again.durations_ns(i).tolist() == prof.durations_ns(i).tolist()
    with (tmp_path / "out" / "layers.csv").open() as f:
        csv_rows = {r["name"]: r for r in csv.DictReader(f)}
    assert csv_rows["loop"]["parent"] == ""
    assert {r["parent"] for name, r in csv_rows.items() if name.startswith("loop::")} == {"loop"}
    assert float(csv_rows["loop"]["incl_median_us"]) >= float(csv_rows["loop"]["median_us"])
    analyzed = by_name(tmp_path / "out")
    assert analyzed["loop"]["time_us"] == pytest.approx(prof.durations_ns(_layer(prof, "loop")).sum() / 1e3)


# -- the onnx package's node test models with control flow --------------------------------------------
def _has_flow(graph: onnx.GraphProto) -> bool:
    return any(n.op_type in FLOW or any(a.type == onnx.AttributeProto.GRAPH and _has_flow(a.g) for a in n.attribute)
               for n in graph.node)


# The onnx modules whose node tests hold control flow (their own or in an expanded function);
# importing a module records its cases (collect_testcases would build all ~1,900: a minute).
_FLOW_MODULES = ("loop", "if_", "scan", "sequence_map", "affinegrid", "rangeop", "linear_attention")


def _onnx_flow_cases() -> list[Any]:
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name in _FLOW_MODULES:
            try:
                importlib.import_module(f"{node_cases.__name__}.{name}")
            except ImportError:  # an older onnx without that op
                continue
    cases = [c for c in node_cases._NodeTestCases if _has_flow(c.model.graph)]
    # every Loop, If and Scan test; of the expanded functions (affine grid, range, sequence map, linear
    # attention: alike within a family), every fourth, to keep the test short
    return [c for i, c in enumerate(cases) if any(k in c.name for k in ("loop", "_if", "scan")) or i % 4 == 0]


def _feed(sess: ort.InferenceSession, inputs: list[Any]) -> dict[str, Any]:
    return {i.name: np.asarray(v) if isinstance(v, np.generic) else v
            for i, v in zip(sess.get_inputs(), inputs, strict=False)}


def test_onnx_node_test_models(tmp_path: Path) -> None:
    cases = _onnx_flow_cases()
    assert cases, "onnx ships node tests with Loop, If and Scan"
    checked, skipped = [], []
    for k, case in enumerate(cases):
        tmp = tmp_path / str(k)
        tmp.mkdir()
        try:
            sess = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
            feed = _feed(sess, case.data_sets[0][0])
            sess.run(None, feed)
        except Exception as exc:  # a type this ONNX Runtime or its Python binding does not take
            skipped.append(f"{case.name}: {str(exc).splitlines()[0]}")
            continue
        rec = record(case.model, [feed], tmp, "all", runs=2)
        check_against_recorded(rec)
        check_flops(rec.profile)
        check_analyze(rec, tmp)
        checked.append(case.name)
    assert len(checked) >= len(cases) // 2, skipped
    assert any("loop" in c for c in checked) and any("scan" in c for c in checked)  # If: older onnx has no case


def _ort_event(name: str, op: str, ts: int, dur: int) -> dict[str, Any]:
    return {"cat": "Node", "ph": "X", "name": f"{name}_kernel_time", "pid": 1, "tid": 7, "ts": ts, "dur": dur,
            "args": {"op_name": op, "provider": "CPUExecutionProvider",
                     "input_type_shape": [{"float": [4, 8]}], "output_type_shape": [{"float": [4, 8]}]}}


def test_touching_spans_in_a_raw_profile(tmp_path: Path) -> None:
    """Whole-µs times make touching spans ambiguous; the rules the runtime's truncation allows."""
    events = [
        {"cat": "Session", "ph": "X", "name": "model_run", "pid": 1, "tid": 7, "ts": 0, "dur": 100, "args": {}},
        _ort_event("before", "Relu", 10, 0),  # zero length in the µs the loop starts: ended as it began
        _ort_event("first", "Relu", 10, 3),  # a length, starting in the loop's first µs: inside it
        _ort_event("spill", "Relu", 40, 11),  # truncation lets a child end 1 µs past its parent
        _ort_event("loop", "Loop", 10, 40),
        _ort_event("after", "Relu", 50, 5),  # starts as the loop ends: after it
    ]
    path = tmp_path / "ort.json"
    path.write_text(json.dumps(events))
    rows = by_name(path)
    assert set(rows) == {"before", "loop::first", "loop::spill", "loop", "after"}
    # the loop's self time: 40 µs less its children's time within it (3 + the 10 of 11 inside)
    assert rows["loop"]["time_us"] == 27 and rows["loop"]["incl_us"] == 40
    assert rows["loop"]["flops"] == rows["loop::first"]["flops"] + rows["loop::spill"]["flops"]
    assert sum(r["time_us"] for r in rows.values()) == 0 + 40 + 5  # each µs once


def test_control_flow_without_recorded_body_has_unknown_flops(tmp_path: Path) -> None:
    events = [
        {"cat": "Session", "ph": "X", "name": "model_run", "pid": 1, "tid": 7, "ts": 0, "dur": 50, "args": {}},
        _ort_event("if", "If", 10, 20),
    ]
    (tmp_path / "ort.json").write_text(json.dumps(events))
    assert by_name(tmp_path / "ort.json")["if"]["flops"] is None
    layers, _ = build_layers_and_runs([(0, r) for r in split_runs(events)], None, 0)
    assert layers[0].flops is None and unknown_cost_ops(layers) == ["If (body)"]


@pytest.mark.parametrize("source", ["raw", "saved"])
def test_sums_over_groups_count_nested_calls_once(source: str, tmp_path: Path) -> None:
    """By type, a Loop in a Loop is summed once; by provider, a parent's FLOPs and time are not added
    to its body's again."""
    from layerperf.analysis import aggregate as analysis

    rec = record(MODELS["nested"](), feeds("nested"), tmp_path, "disable")
    layerperf.save(rec.profile, tmp_path / "saved")
    table = read_table(rec.path if source == "raw" else tmp_path / "saved")
    calls = analysis.rows(analysis.aggregate(table, "name", "sum"))
    by_name = {r["name"]: r for r in calls}
    loops = analysis.rows(analysis.aggregate(table, "type", "sum"))
    loop = next(r for r in loops if r["op_type"] == "Loop")
    assert loop["incl_us"] == pytest.approx(by_name["outer"]["incl_us"])
    assert loop["flops"] == pytest.approx(by_name["outer"]["flops"])
    (cpu,) = analysis.rows(analysis.aggregate(table, "provider", "sum"))
    leaves = [r for name, r in by_name.items() if r["op_type"] != "Loop"]
    known = [r["flops"] for r in leaves if r["flops"] is not None]
    assert cpu["flops"] == (pytest.approx(sum(known)) if len(known) == len(leaves) else None)
    assert source == "raw" or cpu["flops"] is not None  # the saved profile knows every FLOP here
    assert cpu["incl_us"] == pytest.approx(by_name["outer"]["incl_us"] + by_name["relu"]["incl_us"])
    assert cpu["time_us"] == pytest.approx(sum(r["time_us"] for r in calls))
