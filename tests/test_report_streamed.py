"""The report of a trace larger than it reads whole (:mod:`layerperf.renderers.html.streamed`): the page
equals the one made from the whole table (sketch medians are exact for these small groups), on traces of
every format, with ProfilerStep windows, with runs found by their period, with a warm-up run; beyond the
calls whose sequence it keeps, runs from ProfilerStep windows alone and only the drawn run held."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.renderers.html import build, gantt, source, streamed
from layerperf.renderers.html.source import Source
from test_report import DATA, Dom, _facts, _torch_trace, drawn_calls, timeline_of

NOTE = re.compile(r"<li>read as a stream in bounded memory:[^<]*</li>|; medians within [^;)]*\(the trace was read as a "
                  r"stream\)")
STAMP = re.compile(r"page made [^<;]*? by layerperf")
WHOLE = 1 << 62


def _page(path: Path, *, whole: bool) -> tuple[str, Source]:
    src = source.load(path, WHOLE if whole else 0)
    try:
        return STAMP.sub("", build.single(src, None)), src
    finally:
        src.close()


def _ort_trace(path: Path, runs: int = 5, nodes: int = 40, slower: int = 1, extra: bool = False) -> Path:
    """An ONNX Runtime profile: ``runs`` runs of ``nodes`` nodes, a model_run event after each, the first
    run three times slower (a warm-up); every third node ``slower`` times slower; ``extra``: the first run
    has one node more (its sequence then repeats no number of times)."""
    events, ts = [], 1000
    for r in range(runs):
        start = ts
        for i in range(nodes + (1 if extra and r == 0 else 0)):
            dur = (1 + (i * 37 + r) % 50) * (3 if r == 0 else 1) * (slower if i % 3 == 0 else 1)
            events.append({"cat": "Node", "name": f"n{i}_kernel_time", "ph": "X", "pid": 1, "tid": 1, "ts": ts,
                           "dur": dur, "args": {"op_name": ("Conv", "Relu", "Add")[i % 3],
                                                "provider": "CPUExecutionProvider",
                                                "input_type_shape": [{"float": [1, 8, 16, 16]}],
                                                "output_type_shape": [{"float": [1, 8, 16, 16]}]}})
            ts += dur + 1
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 1, "ts": start,
                       "dur": ts - start, "args": {}})
    path.write_bytes(orjson.dumps(events))
    return path


@pytest.mark.parametrize("steps", [False, True])
def test_torch_trace_streamed_equals_whole(tmp_path: Path, steps: bool) -> None:
    trace, runs = _torch_trace(tmp_path / "t.json", steps=steps)
    whole, _ = _page(trace, whole=True)
    page, src = _page(trace, whole=False)
    assert src.digest is not None and src.folded is not None  # it was streamed
    assert NOTE.search(page) and not NOTE.search(whole)
    assert NOTE.sub("", page) == whole
    assert len(timeline_of(Dom(page))["runs"]["dur"]) == runs


def test_ort_profile_with_a_warmup_streamed_equals_whole(tmp_path: Path) -> None:
    trace = _ort_trace(tmp_path / "ort.json")
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert NOTE.sub("", page) == whole
    facts = _facts(page)
    assert facts["runs"].startswith("5 runs (its model_run events); run 1 (")
    assert "was a warm-up" in facts["runs"]


@pytest.mark.parametrize("trace", [DATA / "torch_cpu" / "trace.json.gz"])
def test_real_cpu_trace_streamed_equals_whole(trace: Path) -> None:
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert NOTE.sub("", page) == whole


def test_gpu_trace_streamed(tmp_path: Path) -> None:
    """A CUDA trace: the summary, the layer table and the GPU section (its views from the activities on
    disk) equal the whole reading's; the timeline draws the same calls, without the device lanes."""
    trace = DATA / "torch_resnet18_cuda" / "trace.json.gz"
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert _facts(NOTE.sub("", page)) == _facts(whole)
    from layerperf.readers.detect import read_table

    calls = read_table(trace)
    used = len(set(calls.name.codes.tolist()))
    assert len(calls.name.values) > used  # the table's strings name its kernels too: they are no ops
    assert _facts(whole)["events"].endswith(f" op calls, {used} ops")

    def section(text: str, element_id: str) -> str:
        found = re.search(rf'<section id="{element_id}".*?</section>', NOTE.sub("", text), re.S)
        assert found is not None, element_id
        return found.group(0)

    for element_id in ("gpu-section", "layers-section", "breakdown-section", "summary"):
        assert section(page, element_id) == section(whole, element_id)
    assert drawn_calls(Dom(page)) == drawn_calls(Dom(whole))
    assert not any("kernels" in p for p in timeline_of(Dom(page))["parts"])
    assert any("kernels" in p for p in timeline_of(Dom(whole))["parts"])


@pytest.mark.parametrize("steps", [False, True])
def test_more_calls_than_the_sequence_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: bool) -> None:
    """Past MAX_SEQUENCE calls: the ProfilerStep windows are the runs, with only the drawn one held (its
    calls those the whole reading draws); without them the trace is one window, its calls drawn in order
    up to the run's cut."""
    trace, runs = _torch_trace(tmp_path / "t.json", steps=steps)
    whole, _ = _page(trace, whole=True)
    monkeypatch.setattr(streamed, "MAX_SEQUENCE", 10)
    page, src = _page(trace, whole=False)
    assert src.digest is not None
    data, full = timeline_of(Dom(page)), timeline_of(Dom(whole))
    facts, whole_facts = _facts(NOTE.sub("", page)), _facts(whole)
    for key in ("total self time", "FLOPs", "events", "calls far from their median"):
        if steps or key in ("events", "calls far from their median"):
            assert facts[key] == whole_facts[key], key
        else:  # one window: the whole trace's figure alone
            total = facts[key].split(" (the whole trace")[0]
            assert f"; {total} over the whole trace" in whole_facts[key], key
    if steps:
        assert data["runs"]["dur"] == full["runs"]["dur"] and data["runs"]["held"] == [data["runs"]["drawn"]]
        assert drawn_calls(Dom(page)) == drawn_calls(Dom(whole))
        assert "only the drawn step is held" in facts["runs"]
    else:
        assert facts["runs"].startswith("1 (the trace holds ") and "drawn as one window" in facts["runs"]
        assert len(drawn_calls(Dom(page))) == src.digest.calls
        monkeypatch.setattr(streamed, "MAX_RUN_CALLS", 7)
        monkeypatch.setattr(gantt, "MAX_RUN_CALLS", 7)
        page, src = _page(trace, whole=False)
        drawn = drawn_calls(Dom(page))
        assert len(drawn) == 7 and timeline_of(Dom(page))["cut"] == src.digest.calls - 7
        starts = sorted(src.calls.ts_ns.tolist())
        assert [c["start"] for c in drawn] == [round(t - starts[0]) for t in starts]


def test_size_decides(tmp_path: Path) -> None:
    trace = _ort_trace(tmp_path / "ort.json")
    size = trace.stat().st_size
    assert streamed.streamed(trace, size - 1) and not streamed.streamed(trace, size)
    import gzip

    packed = tmp_path / "ort.json.gz"
    packed.write_bytes(gzip.compress(trace.read_bytes()))
    assert streamed.streamed(packed, size - 1) and not streamed.streamed(packed, size)


def test_two_traces_streamed_equal_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layerperf.renderers import html

    a, b = _ort_trace(tmp_path / "a.json"), _ort_trace(tmp_path / "b.json", slower=2)
    whole = STAMP.sub("", html.html(a, b))
    monkeypatch.setattr(streamed, "WHOLE_BYTES", 0)
    read, seen = streamed.read, []
    monkeypatch.setattr(streamed, "read", lambda path, *args: seen.append(path) or read(path, *args))
    page = STAMP.sub("", html.html(a, b))
    assert seen == [a, b] and page == whole


def test_cli_report_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.cli import main

    trace = _ort_trace(tmp_path / "ort.json")
    monkeypatch.setattr(streamed, "WHOLE_BYTES", 0)
    assert main(["report", str(trace), "-o", str(tmp_path / "r.html")]) == 0
    assert NOTE.search((tmp_path / "r.html").read_text())


def test_stored_tables_hold_only_the_strings_their_rows_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's tables may share a string table that grows with the trace: the stored copy keeps only
    the strings its rows use, and reads the same."""
    import numpy as np

    from layerperf.data.calls import Labels, TableBuilder

    b = TableBuilder()
    b.extend(b.ident_codes([("a", "Op", "", "", ""), ("b", "Op", "", "", "")]), [1.0, 2.0])
    table = b.build({"source": "x"})
    wide = Labels(np.asarray([2, 0], dtype=np.int32), ("b", "unused", "a"))
    assert streamed._compact(replace(table, name=wide)).name is wide  # a few strings: stored as they are
    monkeypatch.setattr(streamed, "SMALL_STRINGS", 1)
    stored = streamed._compact(replace(table, name=wide))
    assert stored.name.values == ("b", "a") and stored.name.tolist() == ["a", "b"] and stored.meta == {}


def test_runs_the_sequence_does_not_divide_into_are_the_model_run_events(tmp_path: Path) -> None:
    # the first run has a node more: the op sequence repeats no number of times, the model_run events say
    # where each run was (it was one run, "drawn as one window")
    trace = _ort_trace(tmp_path / "ort.json", extra=True)
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert NOTE.sub("", page) == whole
    assert _facts(page)["runs"].startswith("5 runs (its model_run events); run 1 (")


def test_a_profile_cut_short_inside_a_run_keeps_its_runs(tmp_path: Path) -> None:
    # ONNX Runtime stops recording at 1,000,000 events, inside a run: the nodes after the last model_run event
    # are in no run, and every run before it is still one (the whole profile was "one run")
    trace = _ort_trace(tmp_path / "ort.json", runs=4)
    events = orjson.loads(trace.read_bytes())
    last = max(e["ts"] + e["dur"] for e in events)
    events += [{**events[i], "ts": last + 10 * (i + 1)} for i in range(3)]  # three nodes of a fifth run
    trace.write_bytes(orjson.dumps(events))
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert NOTE.sub("", page) == whole
    assert _facts(page)["runs"].startswith("4 runs (its model_run events)")
    from layerperf.analysis.trace_runs import find_runs
    from layerperf.readers.detect import read_folded, read_table

    table = read_table(trace)
    found = find_runs(table)
    assert found.count == 4 and [len(w) for w in found.windows] == [40, 40, 40, 40]
    assert read_folded(trace).meta["run_windows_ns"] == table.meta["run_windows_ns"]


def test_overlapping_steps_are_said(tmp_path: Path) -> None:
    """ProfilerStep windows that overlap: a call in two is counted in the later one, and the page says so."""
    trace, runs = _torch_trace(tmp_path / "t.json", steps=True)
    doc = orjson.loads(trace.read_bytes())
    steps = sorted((e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    steps[0]["dur"] = steps[1]["ts"] - steps[0]["ts"] + steps[1]["dur"] / 2  # into the next step
    trace.write_bytes(orjson.dumps(doc))
    page, src = _page(trace, whole=False)
    assert src.digest is not None and src.digest.runs is not None and len(src.digest.runs) == runs
    assert "they overlap: a call in two steps is counted in the later one" in _facts(page)["runs"]


def test_a_gzip_of_several_members_is_measured_whole(tmp_path: Path) -> None:
    """A gzip's trailer names its last member's size alone: a file of two members is inflated to be sized."""
    import gzip

    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(b"[" + b" " * 100_000) + gzip.compress(b"]"))
    assert int.from_bytes(packed.read_bytes()[-4:], "little") == 1
    assert streamed.streamed(packed, 50_000) and not streamed.streamed(packed, 200_000)


def test_a_source_given_is_left_open(tmp_path: Path) -> None:
    """html() closes what it read, not a Source handed to it: its activities on disk serve a second page."""
    from layerperf.renderers import html

    src = source.load(DATA / "torch_resnet18_cuda" / "trace.json.gz", 0)
    try:
        first, second = html.html(src, peaks=None), html.html(src, peaks=None)
    finally:
        src.close()
    assert STAMP.sub("", first) == STAMP.sub("", second) and 'id="gpu-section"' in first


def _with_runs(path: Path, change: Any) -> Path:
    """The profile at ``path`` with each model_run event changed by ``change(event, index)``."""
    events = orjson.loads(path.read_bytes())
    runs = [e for e in events if e.get("name") == "model_run"]
    for k, e in enumerate(runs):
        change(e, k)
    path.write_bytes(orjson.dumps(events))
    return path


@pytest.mark.parametrize("how", ["overlap", "zero", "huge", "shifted"])
def test_model_run_windows_that_cannot_be_runs(tmp_path: Path, how: str) -> None:
    # runs called from two threads at once (windows that overlap: each would hold the other's nodes), windows of
    # no length or past any clock: counted only, the op sequence splits the runs as before; windows that hold
    # no call (a damaged profile) are runs of nothing, the same page read whole or streamed (that crashed)
    trace = _ort_trace(tmp_path / "ort.json", runs=4)

    def change(e: dict[str, Any], k: int) -> None:
        if how == "overlap" and k % 2:
            e["ts"] -= e["dur"] // 2
        elif how == "zero":
            e["dur"] = 0
        elif how == "huge":
            e["dur"] = 1e20
        elif how == "shifted":
            e["ts"] += 10 ** 9

    _with_runs(trace, change)
    whole, _ = _page(trace, whole=True)
    page, _ = _page(trace, whole=False)
    assert NOTE.sub("", page) == whole
    runs = _facts(page)["runs"]
    if how == "shifted":
        assert runs.startswith("4 runs (its model_run events)")
    else:
        assert runs.startswith("4 runs (its op sequence repeats 4 times, every 40 calls)"), runs
