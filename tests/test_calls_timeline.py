"""Every reader keeps each call's start, process and thread; any event table becomes a timeline.

Expectations come from the files themselves: the events ONNX Runtime's profiler and PyTorch's wrote
(their ts, dur, pid, tid), and the spans of a layerperf Profile.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import orjson
import pytest

import layerperf
from controlflow_models import MODELS, feeds
from layerperf.analysis.aggregate import aggregate, filter_table
from layerperf.cli import main
from layerperf.data.calls import Calls, TableBuilder, int_id
from layerperf.errors import InputError
from layerperf.readers.detect import read_table
from layerperf.readers.ort import is_kernel_event
from layerperf.renderers import timeline
from layerperf.util.arrays import dense, unique_inverse

from conftest import run_cli

DATA = Path(__file__).parent / "data"
TORCH_TRACES = (DATA / "torch_cpu" / "trace.json.gz", DATA / "torch_cuda" / "trace.json.gz")
KINETO_ROW_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "Operator", "Runtime")


def _ort_profile(model: Any, feed: list[dict[str, np.ndarray]], tmp: Path, runs: int = 2) -> Path:
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp / "ort")
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        for f in feed:
            sess.run(None, f)
    return Path(sess.end_profiling())


@pytest.fixture(scope="module")
def nested_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ONNX Runtime's own profile of a Loop inside a Loop: body nodes nest in their parents' spans."""
    return _ort_profile(MODELS["nested"](), feeds("nested"), tmp_path_factory.mktemp("ort"))


def _kineto_rows(path: Path) -> list[dict[str, Any]]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in KINETO_ROW_CATS
            and not str(e.get("name")).startswith("ProfilerStep#")]


def _timeline(table: Calls, tmp: Path) -> list[dict[str, Any]]:
    path = timeline.save(table, tmp / "timeline.json")
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns"
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def _contains(outer: dict[str, Any], inner: dict[str, Any], slack_us: float = 0.0) -> bool:
    return (outer is not inner and (outer["pid"], outer["tid"]) == (inner["pid"], inner["tid"])
            and outer["ts"] <= inner["ts"] < outer["ts"] + max(outer["dur"], 1e-9)
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack_us)


# -- the columns ------------------------------------------------------------------------------------
def test_ort_calls_keep_the_events_times_and_threads(nested_profile: Path) -> None:
    kernels = [e for e in json.loads(nested_profile.read_text()) if is_kernel_event(e)]
    table = read_table(nested_profile)
    assert table.meta["ts_origin_us"] == 0.0  # ONNX Runtime's times count from the profiler's start
    assert table.ts_ns.tolist() == [e["ts"] * 1e3 for e in kernels]  # rows are the events, in file order
    assert table.incl_ns.tolist() == [e["dur"] * 1e3 for e in kernels]
    assert table.pid.tolist() == [e["pid"] for e in kernels]
    assert table.tid.tolist() == [e["tid"] for e in kernels]


@pytest.mark.parametrize("path", TORCH_TRACES, ids=lambda p: p.parent.name)
def test_kineto_calls_keep_the_events_times_and_threads(path: Path) -> None:
    events = _kineto_rows(path)
    table = read_table(path)
    origin = table.meta["ts_origin_us"]
    assert origin == min(e["ts"] for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
                         if e.get("ph") == "X" and e.get("cat") not in (None, "Trace"))
    # rows are the CPU calls in file order (every kernel of these traces links to an op)
    assert len(table) == len(events)
    assert table.name.tolist() == [e["name"] for e in events]
    assert np.allclose(table.ts_ns, [(e["ts"] - origin) * 1e3 for e in events], rtol=0, atol=0.5)
    assert table.pid.tolist() == [int(e["pid"]) for e in events]
    assert table.tid.tolist() == [int(e["tid"]) for e in events]  # PyTorch 1.8 writes "24572"


def test_tef_ids_that_are_no_numbers_are_unknown(tmp_path: Path) -> None:
    doc = {"traceEvents": [
        {"ph": "X", "name": "a", "pid": "GPU", "tid": "stream 3", "ts": 1_700_000_000_000_100, "dur": 5},
        {"ph": "B", "name": "b", "pid": 4, "tid": 9, "ts": 1_700_000_000_000_000.5},
        {"ph": "E", "pid": 4, "tid": 9, "ts": 1_700_000_000_000_010.5}]}
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(doc))
    table = read_table(path)
    by_name = dict(zip(table.name.tolist(), range(len(table)), strict=True))
    a, b = by_name["a"], by_name["b"]
    assert (table.pid[a], table.tid[a], table.pid[b], table.tid[b]) == (-1, -1, 4, 9)
    # relative to the first event, an epoch-µs time keeps its ns (the .5 µs)
    assert table.meta["ts_origin_us"] == 1_700_000_000_000_000.5
    assert (table.ts_ns[b], table.ts_ns[a], table.incl_ns[b]) == (0.0, 99_500.0, 10_000.0)


def test_ids() -> None:
    assert [int_id(v) for v in (7, "24572", "stream 7", None, True, 3.0, 2.5, 1 << 70, "-3")] == \
        [7, 24572, -1, -1, -1, 3, -1, -1, -1]


def test_profile_calls_are_its_spans(tiny_model_path: Path, tmp_path: Path) -> None:
    prof = layerperf.profile(str(tiny_model_path), runs=3, warmup=1, latency=False)
    table = prof.calls()
    spans = [s for run in prof.runs for s in run.spans]
    assert len(table) == len(spans) and table.meta["format"] == "layerperf"
    assert table.ts_ns.tolist() == [float(s.start_ns) for s in spans]
    assert table.tid.tolist() == [s.tid for s in spans]
    assert set(table.pid.tolist()) == {prof.metadata.pid}
    assert table.name.tolist() == [prof.layers[s.layer].name for s in spans]
    # analyze reads a saved profile through the same table
    layerperf.save(prof, tmp_path)
    read = read_table(tmp_path)
    assert read.name.tolist() == table.name.tolist() and read.tid.tolist() == table.tid.tolist()
    assert np.allclose(read.ts_ns, table.ts_ns, rtol=0, atol=1.0)  # trace.json keeps ns to 3 decimals of µs
    prof.metadata = replace(prof.metadata, pid=None)
    assert set(prof.calls().pid.tolist()) == {-1}  # unknown, not made up


def test_aggregation_and_take() -> None:
    b = TableBuilder()
    keys = [b.ident(n, "Relu", "CPU", "", "") for n in ("x", "y", "x")]
    b.extend(keys, [1.0, 2.0, 3.0], ts_us=[0.5, 2.0, 5.0], pid=[1, 1, 1], tid=[5, 6, 5])
    table = b.build()
    assert table.ts_ns.tolist() == [500.0, 2000.0, 5000.0] and table.has_times
    picked = table.take(np.array([2, 0]))
    assert (picked.ts_ns.tolist(), picked.tid.tolist()) == ([5000.0, 500.0], [5, 5])
    assert filter_table(table, name="y").tid.tolist() == [6]
    grouped = aggregate(table, "name")
    assert len(grouped) == 2 and not grouped.has_times  # a group is no single call: no start, no thread
    assert np.isnan(grouped.ts_ns).all() and grouped.pid.tolist() == grouped.tid.tolist() == [-1, -1]
    b2 = TableBuilder()
    b2.extend([b2.ident("z", "Relu", "CPU", "", "")], [1.0])  # left out: unknown
    unknown = b2.build()
    assert np.isnan(unknown.ts_ns).all() and unknown.pid.tolist() == [-1] and not unknown.has_times
    with pytest.raises(ValueError, match="ts_us"):
        b2.extend([0], [1.0], ts_us=[1.0, 2.0])
    with pytest.raises(ValueError, match="tid"):
        Calls(**{**{f: getattr(table, f) for f in Calls.__dataclass_fields__}, "tid": np.zeros(2, dtype=np.int64)})


# -- the timeline -----------------------------------------------------------------------------------
def test_ort_timeline(nested_profile: Path, tmp_path: Path) -> None:
    kernels = [e for e in json.loads(nested_profile.read_text()) if is_kernel_event(e)]
    table = read_table(nested_profile)
    events = _timeline(table, tmp_path)
    assert len(events) == len(kernels) == len(table)
    # each call where and when ONNX Runtime recorded it, named as analyze names it (body nodes qualified)
    assert [(e["ts"], e["dur"], e["pid"], e["tid"]) for e in events] == \
        [(k["ts"], k["dur"], k["pid"], k["tid"]) for k in kernels]
    assert [e["name"] for e in events] == table.name.tolist()
    assert [e["cat"] for e in events] == [k["args"]["op_name"] for k in kernels]
    assert all(e["args"]["provider"] == "CPUExecutionProvider" for e in events)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_name.setdefault(e["name"], []).append(e)
    body = [e for e in events if "::" in e["name"]]
    assert any(e["name"].count("::") == 2 for e in body)  # the inner loop's body, two levels down
    for e in body:
        parent = e["name"].rsplit("::", 1)[0]
        # within a call of its parent on its thread (ONNX Runtime truncates to whole µs: an end may spill 1 µs)
        assert any(_contains(p, e, slack_us=1.0) for p in by_name[parent]), e
    # what the table knows of a call is in its arguments, what it does not know is left out
    flops = [None if f != f else f for f in table.flops.tolist()]
    assert any(flops) and [e["args"].get("flops") for e in events] == flops
    assert [e["args"].get("in_shapes", "") for e in events] == table.in_shapes.tolist()


@pytest.mark.parametrize("path", TORCH_TRACES, ids=lambda p: p.parent.name)
def test_kineto_timeline(path: Path, tmp_path: Path) -> None:
    source = _kineto_rows(path)
    events = _timeline(read_table(path), tmp_path)
    assert len(events) == len(source)
    assert [e["name"] for e in events] == [e["name"] for e in source]
    # every op that held another on its thread holds it still, and nothing else does
    source = [{**e, "tid": int(e["tid"])} for e in source]
    before = {(i, j) for i, a in enumerate(source) for j, b in enumerate(source) if _contains(a, b)}
    after = {(i, j) for i, a in enumerate(events) for j, b in enumerate(events) if _contains(a, b)}
    assert before and after == before
    # the CPU trace recorded shapes (the linear's FLOPs are on aten::linear, not its addmm); the CUDA one has none
    assert any(e["name"] == "aten::linear" and e["args"].get("flops") for e in events) or \
        path.parent.name == "torch_cuda"


def test_timeline_reads_back(nested_profile: Path, tmp_path: Path) -> None:
    """The timeline is a trace analyze reads: the same calls, the same inclusive times."""
    table = read_table(nested_profile)
    path = timeline.save(table, tmp_path / "t.json")
    again = read_table(path)
    assert again.meta["format"] == "tef"
    assert sorted(again.name.tolist()) == sorted(table.name.tolist())
    assert sorted(again.incl_ns.tolist()) == sorted(table.incl_ns.tolist())


def test_cli_timeline(nested_profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    done = run_cli("analyze", str(nested_profile), "--timeline", str(out), "--type", "Loop", "--format", "csv")
    assert done.returncode == 0, done.stderr
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in json.loads(nested_profile.read_text())
               if is_kernel_event(e) and e["args"]["op_name"] == "Loop"]
    assert events and len(events) == len(kernels) and {e["cat"] for e in events} == {"Loop"}
    (tmp_path / "file").write_text("")
    bad = run_cli("analyze", str(nested_profile), "--timeline", str(tmp_path / "file" / "t.json"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert not bad.stdout  # refused before the report
    odd = run_cli("analyze", str(nested_profile), "--timeline", str(tmp_path / "t.xyz"))  # as -o refuses it
    assert odd.returncode == 2 and "name its file .json" in odd.stderr and not (tmp_path / "t.xyz").exists()


def test_no_timeline_without_times(nested_profile: Path, tmp_path: Path) -> None:
    grouped = aggregate(read_table(nested_profile), "type")
    with pytest.raises(InputError, match="no start times") as info:
        timeline.save(grouped, tmp_path / "t.json")
    assert "\n" not in str(info.value)
    assert not list(tmp_path.iterdir())  # nothing written, not even a temporary


def test_unknown_ids_get_a_named_track(tmp_path: Path) -> None:
    b = TableBuilder()
    keys = [b.ident(n, "Op", "", "", "") for n in ("a", "b")]
    b.extend(keys, [1.0, 1.0], ts_us=[0.0, 2.0], pid=[3, -1], tid=[-1, 4])
    doc = timeline.document(b.build({"source": "x.json", "format": "tef"}))
    calls = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    assert (calls["a"]["pid"], calls["b"]["pid"]) == (3, 4)  # unknown: one past the largest id
    assert (calls["a"]["tid"], calls["b"]["tid"]) == (5, 4)
    names = {(e["name"], e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert names[("process_name", 4, 0)].startswith("unknown process")
    assert names[("thread_name", 3, 5)] == "unknown thread"


def test_written_in_chunks_is_the_document(nested_profile: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    table = read_table(nested_profile)
    monkeypatch.setattr(timeline, "CHUNK_ROWS", 7)  # several chunks, the last one short
    assert len(table) > 3 * 7 and len(table) % 7
    path = timeline.save(table, tmp_path / "t.json")
    assert json.loads(path.read_text()) == timeline.document(table)
    none = filter_table(table, types=["NoSuchOp"])  # no call left: an empty timeline, still one a viewer opens
    empty = json.loads(timeline.save(none, tmp_path / "empty.json").read_text())
    assert empty == timeline.document(none) and empty["traceEvents"] == []


def _events(path: Path) -> tuple[list[str], dict[str, Any]]:
    doc = json.loads(path.read_text())
    return sorted(json.dumps(e, sort_keys=True) for e in doc["traceEvents"]), doc["otherData"]


def _tef_unknown_ids(path: Path) -> Path:
    """Nested events of known and unknown process and thread (ids that are no numbers), shuffled."""
    events = []
    for k in range(300):
        pid, tid = (1, 2) if k % 3 == 0 else ("main", 5) if k % 3 == 1 else (7, "worker")
        events.append({"ph": "X", "name": f"op{k % 7}", "cat": "Op", "pid": pid, "tid": tid, "ts": 10.0 * k,
                       "dur": 8.0, "args": {}})
        events.append({"ph": "X", "name": "inner", "cat": "Op", "pid": pid, "tid": tid, "ts": 10.0 * k + 1,
                       "dur": 2.5, "args": {}})
    events.reverse()
    path.write_text(json.dumps(events))
    return path


@pytest.mark.parametrize("args", [[], ["--name", "op[12]|conv|aten::add"], ["--type", "Loop", "--type", "Op"]],
                         ids=["all", "name", "type"])
def test_streamed_timeline_is_the_whole_tables(nested_profile: Path, tmp_path: Path, args: list[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``analyze --timeline`` writes the calls as the trace streams (segments of a few records here), the same
    events as the timeline of the table read whole, unknown ids named alike, in any order."""
    from stream_traces import shrink

    shrink(monkeypatch, segment=40, run=97, merge=50, block=13)
    monkeypatch.setattr(timeline, "CHUNK_ROWS", 5)
    written = 0
    for trace in (nested_profile, *TORCH_TRACES, _tef_unknown_ids(tmp_path / "tef.json")):
        out = tmp_path / "streamed.json"
        assert main(["analyze", str(trace), "--timeline", str(out), "--format", "json", *args]) == 0
        table = read_table(trace)
        keep = filter_table(table, types=args[1::2] if "--type" in args else (),
                            name=args[1] if "--name" in args else None)
        whole = timeline.save(keep, tmp_path / "whole.json")
        assert _events(out) == _events(whole), trace
        written += sum('"ph": "X"' in e for e in _events(out)[0])
    assert written > 100


def test_streamed_timeline_failing_read_leaves_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}, {"ph": ')
    done = run_cli("analyze", str(bad), "--timeline", str(tmp_path / "t.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # no timeline, no temporary


@pytest.mark.parametrize("args", [["--order-by", "nosuch"], ["--aggregate-by", "kernel"]], ids=["order", "kernels"])
def test_streamed_timeline_not_written_when_the_view_is_refused(tmp_path: Path, args: list[str]) -> None:
    """The timeline goes in place only once the view is made: a refused ``--order-by`` or a CPU trace asked
    for its kernels is one line, exit 2, and no file (found in review: the timeline was put in place first)."""
    out = tmp_path / "t.json"
    done = run_cli("analyze", str(TORCH_TRACES[0]), "--timeline", str(out), *args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("high", [0, 7, 5000, 10**12])
def test_dense_numbers_values_as_unique_does(high: int) -> None:
    key = np.random.default_rng(high).integers(0, high + 1, 3000)
    assert np.array_equal(dense(key), np.unique(key, return_inverse=True)[1].reshape(-1))
    assert dense(key[:0]).size == 0
    negative = key - high // 2
    assert np.array_equal(dense(negative), np.unique(negative, return_inverse=True)[1].reshape(-1))
    assert dense(np.array([True, False, True])).tolist() == [1, 0, 1]
    for k in (key, negative, key[:0]):
        values, inverse = unique_inverse(k)
        want_values, want_inverse = np.unique(k, return_inverse=True)
        assert np.array_equal(values, want_values) and np.array_equal(inverse, want_inverse.reshape(-1))
