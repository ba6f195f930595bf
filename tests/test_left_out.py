"""Nothing silent: every event a reader leaves out is counted and named; detection by content; the
kernel view honours every --aggregate."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.cli import main
from layerperf.readers.detect import read_folded, read_table
from layerperf.readers.dropped import NEGATIVE, NO_DURATION, NOT_A_NUMBER, NOT_EVENT

from conftest import run_cli

H100 = Path(__file__).parent / "data" / "torch_resnet18_cuda" / "trace.json.gz"


def _damaged(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The H100 trace with its first kernel's duration negated, two ops' made null and "NaN", a 5 added."""
    doc = json.loads(gzip.decompress(H100.read_bytes()))
    events = doc["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    kernel["dur"] = -kernel["dur"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    ops[5]["dur"], ops[6]["dur"] = None, "NaN"
    events.append(5)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    return path, kernel


def test_left_out_events_are_counted_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, kernel = _damaged(tmp_path)
    dropped = read_table(path).meta["dropped"]
    assert {k: v["events"] for k, v in dropped.items()} == {NEGATIVE: 1, NO_DURATION: 1, NOT_A_NUMBER: 1,
                                                            NOT_EVENT: 1}
    assert dropped[NEGATIVE]["example"] == kernel["name"]
    # the kernel's device time is refused, not subtracted: its op loses it, as if it had not run
    whole = read_table(H100).meta["kernels"]
    assert len(read_table(path).meta["kernels"]) == len(whole) - 1
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning: 1 event left out: negative duration" in out and "refused" in out
    assert main(["analyze", str(path), "--format", "json"]) == 0  # JSON stays the rows; warnings on stderr
    captured = capsys.readouterr()
    assert isinstance(orjson.loads(captured.out), list) and "negative duration" in captured.err


def test_left_out_in_diff_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _damaged(tmp_path)
    assert main(["diff", str(H100), str(path), "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["dropped"]["a"] == {} and doc["dropped"]["b"][NEGATIVE]["events"] == 1


def test_streamed_trace_counts_what_it_leaves_out(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "name": "bad", "ts": 5, "dur": -1},
              {"ph": "X", "name": "nan", "ts": 5, "dur": "NaN"}, {"ph": "E", "name": "lonely", "ts": 9},
              {"ph": "B", "name": "open", "ts": 9}]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(events))
    folded = read_folded(path)
    counts = {k: v["events"] for k, v in folded.meta["dropped"].items()}
    assert counts == {k: v["events"] for k, v in read_table(path).meta["dropped"].items()}
    assert counts[NEGATIVE] == 1 and counts[NOT_A_NUMBER] == 1 and len(counts) == 4


@pytest.mark.parametrize("pytorch", [False, True])
def test_a_bool_is_no_duration(tmp_path: Path, pytorch: bool) -> None:
    """``"dur": true`` is no number (JSON's true is not 1 µs): left out and counted, by every reader, whole
    or streamed, as the PyTorch reader always did."""
    events = [{"ph": "X", "name": "flag", "ts": 1, "dur": True, "pid": 1, "tid": 1},
              {"ph": "X", "name": "b", "ts": 5, "dur": 2, "pid": 1, "tid": 1}]
    if pytorch:
        for e in events:
            e["cat"] = "cpu_op"
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events} if pytorch else events))
    for table in (read_table(path), read_folded(path)):
        assert {k: v["events"] for k, v in table.meta["dropped"].items()} == {NOT_A_NUMBER: 1}
        assert table.meta["dropped"][NOT_A_NUMBER]["example"] == "flag"
    assert read_folded(path).total_ns == 2000


def test_ort_events_in_an_object_are_ort(tmp_path: Path) -> None:
    """Detection by content: ONNX Runtime's events wrapped in {"traceEvents": ...} read as ONNX Runtime's
    (node name without the _kernel_time suffix, FLOPs from the shapes)."""
    event = {"ph": "X", "cat": "Node", "name": "conv_kernel_time", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
             "args": {"op_name": "Conv", "provider": "CPUExecutionProvider",
                      "input_type_shape": [{"float": [1, 3, 8, 8]}, {"float": [4, 3, 3, 3]}],
                      "output_type_shape": [{"float": [1, 4, 6, 6]}]}}
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": [event]}))
    table = read_table(path)
    assert table.meta["format"] == "ort" and table.name.tolist() == ["conv"]
    assert table.flops[0] == 2 * 4 * 6 * 6 * 3 * 3 * 3


def test_empty_gzip_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(b"")
    result = run_cli("analyze", str(path))
    assert result.returncode == 2 and "is empty" in result.stderr and "not gzip" not in result.stderr


def test_truncated_gzip_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(gzip.decompress(H100.read_bytes()))[:-4000])
    result = run_cli("analyze", str(path))
    assert result.returncode == 2 and "not valid gzip" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("how", ["sum", "mean", "median", "max", "min", "count"])
def test_kernel_view_honours_aggregate(how: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(gzip.decompress(H100.read_bytes()))
    per: dict[str, list[float]] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            per.setdefault(e["name"], []).append(e["dur"])
    figure = {"sum": sum, "mean": statistics.mean, "median": statistics.median, "max": max, "min": min,
              "count": len}[how]
    assert main(["analyze", str(H100), "--aggregate-by", "kernel", "--aggregate", how, "--format", "json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    key = {"sum": "total_us", "mean": "mean_us", "median": "median_us", "max": "max_us", "min": "min_us",
           "count": "calls"}[how]
    got = [r[key] for r in rows]
    assert got == sorted(got, reverse=True)  # ranked by the figure --aggregate names
    for r in rows:
        ref = per[r["name"]]
        assert r[key] == pytest.approx(figure(ref), abs=1e-3 * len(ref))
        assert r["stddev_us"] == pytest.approx(statistics.pstdev(ref), abs=1e-3)
        assert not math.isnan(r["min_us"])


def test_an_infinite_duration_is_said_to_be_infinite(tmp_path: Path) -> None:
    from layerperf.readers.dropped import INFINITE, TOO_LONG

    path = tmp_path / "inf.json"
    path.write_text('[{"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 0, "dur": 5},'
                    '{"ph": "X", "name": "inf", "pid": 1, "tid": 1, "ts": 1, "dur": "Infinity"},'
                    '{"ph": "X", "name": "huge", "pid": 1, "tid": 1, "ts": 1, "dur": 5e15}]')
    dropped = read_table(path).meta["dropped"]
    assert {k: (v["events"], v["example"]) for k, v in dropped.items()} == {INFINITE: (1, "inf"), TOO_LONG: (1, "huge")}


def _trace(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def _by_name(table: Any) -> dict[str, tuple[float, float, float]]:
    """Per row name: (self, inclusive, device) µs, summed."""
    out: dict[str, tuple[float, float, float]] = {}
    for i in range(len(table)):
        name = table.name.values[table.name.codes[i]]
        dev = 0.0 if math.isnan(table.device_ns[i]) else float(table.device_ns[i])
        old = out.get(name, (0.0, 0.0, 0.0))
        out[name] = (old[0] + table.dur_ns[i] / 1e3, old[1] + table.incl_ns[i] / 1e3, old[2] + dev / 1e3)
    return out


def test_a_frame_inside_an_op_is_no_hole_in_its_self_time(tmp_path: Path) -> None:
    """A user_annotation (or python_function) frame inside an op is no row: its own time stays the op's self
    time and the ops in it count against the op around it, so the rows' self times add up to what ran
    (100 µs), not 70 (the frame's 30 µs belonging to no row); the same whole and streamed."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "A", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {"External id": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "U", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": {}},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 15, "dur": 30, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "B", "pid": 1, "tid": 1, "ts": 20, "dur": 20, "args": {"External id": 2}}])
    for table in (read_table(path), read_folded(path).table()):
        rows = _by_name(table)
        assert {k: v[:2] for k, v in rows.items()} == {"A": (80.0, 100.0), "B": (20.0, 20.0)}


def test_device_activity_linked_to_no_op_has_no_cpu_self_time(tmp_path: Path) -> None:
    """A kernel no op launched is a row of its own: its device time is its duration, its CPU self time none (the
    trace's CPU total is the CPU's: 50 µs, not 100), its span its inclusive time; whole and streamed."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 50,
         "args": {"External id": 2}},
        {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 200, "dur": 40,
         "args": {"correlation": 99, "device": 0, "stream": 7}}])
    for table in (read_table(path), read_folded(path).table()):
        assert _by_name(table) == {"aten::add": (50.0, 50.0, 0.0), "orphan": (0.0, 40.0, 40.0)}
        assert float(table.dur_ns.sum()) == 50_000


def test_a_launch_that_ends_past_its_op_is_still_the_ops(tmp_path: Path) -> None:
    """Kineto times runtime calls by another clock than ops: a cudaLaunchKernel ending 2 µs past its aten::mm
    is still inside it, so its kernel's 40 µs are aten::mm's device time (not the op around both), whole and
    streamed; two ops overlapping that way are siblings."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 18, "dur": 4,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 40,
         "args": {"correlation": 5, "device": 0, "stream": 7}}])
    for table in (read_table(path), read_folded(path).table()):
        rows = _by_name(table)
        assert rows["aten::mm"][2] == 40.0 and rows["aten::outer"][2] == 0.0
        assert rows["aten::mm"][0] == 8.0  # its launch took 2 of its 10 µs


def test_a_trace_of_device_activity_alone_ranks_by_device_time(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Kernels that link to no op have no CPU self time: with nothing else, the table ranks them by their device
    time and says so (ranked by self time, every row 0, the order said nothing)."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 100, "dur": 10,
         "args": {"correlation": 2, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 40,
         "args": {"correlation": 1, "device": 0, "stream": 7}}])
    assert main(["analyze", str(path), "--format", "json"]) == 0
    assert [r["name"] for r in orjson.loads(capsys.readouterr().out)] == ["gemm", "relu"]
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "by device time" in out and "ranked by device time: the trace holds no CPU self time" in out


def test_a_launch_running_past_its_op_is_counted_once(tmp_path: Path) -> None:
    """A runtime call that outlasts its op (18-58 µs inside aten::mm 10-20, both inside aten::outer 0-100):
    what it runs past the op's end is no longer outer's self time too: the rows' self times add up to the
    thread's 100 µs (they were 138), whole and streamed."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 18, "dur": 40,
         "args": {"correlation": 5}}])
    for table in (read_table(path), read_folded(path).table()):
        rows = _by_name(table)
        assert {k: v[0] for k, v in rows.items()} == {"aten::outer": 52.0, "aten::mm": 8.0, "cudaLaunchKernel": 40.0}


def test_a_call_in_a_frame_that_outlasts_its_op_makes_no_gap(tmp_path: Path) -> None:
    """A python_function frame (4-5.9 µs) ending past its op (aten::mm 1-5) holds a launch (5.5-5.6) that starts
    after mm's end: the launch is outer's, and outer loses only what its rows cover ([1,5] and [5.5,5.6]:
    5.9 µs of self time, not 5.4 — the 0.5 µs between them belonged to no row)."""
    path = _trace(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 4, "args": {}},
        {"ph": "X", "cat": "python_function", "name": "frame", "pid": 1, "tid": 1, "ts": 4, "dur": 1.9, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5.5, "dur": 0.1,
         "args": {"correlation": 5}}])
    for table in (read_table(path), read_folded(path).table()):
        got = {k: round(v[0], 6) for k, v in _by_name(table).items()}
        assert got == {"aten::outer": 5.9, "aten::mm": 4.0, "cudaLaunchKernel": 0.1}
