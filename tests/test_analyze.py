"""``layerperf analyze``: flags, formats and bad input, on constructed traces with known numbers."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.calibration.peaks import Peaks
from layerperf.cli import main
from layerperf.errors import InputError
from layerperf.readers.detect import read_table
from layerperf.renderers.views.analyze import analyze_view

from conftest import run_cli


def _event(name: str, op: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"op_type": op, "provider": "CPU", **args}}


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    """3 runs of conv (known FLOPs/bytes), relu, two adds; a counter on conv."""
    events = []
    t = 0.0
    for run in range(3):
        for name, op, dur, extra in (("conv", "Conv", 50 + run, {"flops": 1e6, "bytes": 4096, "cycles": 1000}),
                                     ("relu", "Relu", 10, {"bytes": 512}), ("add1", "Add", 5, {}),
                                     ("add2", "Add", 7, {})):
            events.append(_event(name, op, t, dur, in_shapes="1x8", **extra))
            t += dur
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["analyze", *argv, "--format", "json"]) == 0
    doc: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)
    return doc


def test_json_rows(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, str(trace))
    assert [r["name"] for r in rows] == ["conv", "relu", "add2", "add1"]
    conv = rows[0]
    assert {"name", "op_type", "calls", "time_us", "flops", "bytes"} <= set(conv)
    assert (conv["op_type"], conv["calls"], conv["time_us"]) == ("Conv", 3, 153.0)
    assert conv["flops"] == 3e6 and conv["bytes"] == 3 * 4096
    assert conv["flops_per_s"] == pytest.approx(3e6 / 153e-6)
    assert rows[1]["flops"] is None  # unknown stays unknown through aggregation
    assert rows[-1]["cum_share"] == pytest.approx(1.0)


def test_aggregate_by_type_and_functions(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_type = {r["op_type"]: r for r in _json(capsys, str(trace), "--aggregate-by", "type")}
    assert by_type["Add"]["calls"] == 6 and by_type["Add"]["time_us"] == 36.0
    assert by_type["Add"]["name"] == "(2 names)"
    for how, expect in (("mean", 51.0), ("median", 51.0), ("max", 52.0), ("min", 50.0), ("sum", 153.0)):
        conv = next(r for r in _json(capsys, str(trace), "--aggregate", how) if r["name"] == "conv")
        assert conv["time_us"] == expect, how
    counts = _json(capsys, str(trace), "--aggregate", "count", "--aggregate-by", "type")
    assert counts[0]["op_type"] == "Add"  # count ranks by calls


def test_filters_order_and_top(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [r["name"] for r in _json(capsys, str(trace), "--type", "Add", "--type", "Relu")] == ["relu", "add2", "add1"]
    assert [r["name"] for r in _json(capsys, str(trace), "--name", "^add")] == ["add2", "add1"]
    assert [r["name"] for r in _json(capsys, str(trace), "--min-time", "0.00002")] == ["conv", "relu", "add2"]
    assert [r["name"] for r in _json(capsys, str(trace), "-t", "2")] == ["conv", "relu"]
    assert [r["name"] for r in _json(capsys, str(trace), "--order-by", "bytes")][:2] == ["conv", "relu"]
    assert [r["name"] for r in _json(capsys, str(trace), "--order-by", "+time")][0] == "add1"
    assert _json(capsys, str(trace), "--order-by", "flops")[0]["name"] == "conv"


def test_text_formats(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(trace), "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert table[0]["name"] == "conv" and table[1]["flops"] == ""  # unknown: empty, never 0
    assert main(["analyze", str(trace), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| self time |" in md and "| conv |" in md
    assert main(["analyze", str(trace)]) == 0
    out = capsys.readouterr().out
    for header in ("self time", "cumulative", "computation", "FLOPS", "memory", "bandwidth", "in_shapes"):
        assert header in out


def test_real_ort_profile_through_cli(tiny_model_path: Path, tmp_path: Path) -> None:
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "onnxruntime_profile")
    sess = ort.InferenceSession(str(tiny_model_path), opts, providers=["CPUExecutionProvider"])
    sess.run(None, {"input": np.zeros((1, 3, 16, 16), np.float32)})
    profile = Path(sess.end_profiling())
    gz = tmp_path / "profile.json.gz"
    gz.write_bytes(gzip.compress(profile.read_bytes()))
    proc = run_cli("analyze", str(gz), "--aggregate-by", "type", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert {"Conv", "Gemm", "MaxPool"} <= {r["op_type"] for r in orjson.loads(proc.stdout)}


BAD = {
    "malformed.json": (b'{"traceEvents": [{"ph": "X",, "dur": 1}]}', "not valid JSON"),
    # cut inside an event (an array that just lacks its "]" is one the Trace Event Format allows)
    "truncated.json": (b'[{"ph": "X", "name": "a", "ts": 1, "dur": 2},{"ph": "X", "na', "truncated"),
    "empty.json": (b"", "empty"),
    "shape.json": (b'{"layers": [1, 2]}', "not a trace"),
    "number.json": (b"42", "not a trace: a trace is a JSON array or object"),
    "events_not_a_list.json": (b'{"traceEvents": 5}', "traceEvents is a number, not an array"),
    "none.json": (b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}', "no timed events"),
    # its only timed event was left out: the line says why, not only that there is none
    "only_negative.json": (b'[{"ph": "X", "name": "a", "ts": 1, "dur": -2}]',
                           "(tef trace with 1 event, none of them a timed op; 1 left out: negative duration)"),
    "fake.json.gz": (b"[]", "not gzip"),
    "broken.json.gz": (gzip.compress(b"[1, 2, 3]")[:-8] + b"xx", "gzip"),
    # what gzip(1) calls "trailing garbage": not "ended before the end-of-stream marker"
    "junk_after.json.gz": (gzip.compress(b'[{"ph": "X", "name": "a", "ts": 1, "dur": 2}]') + b"garbage",
                           "not valid gzip (7 bytes after the gzip data, at byte"),
}


def _corrupt_gzip() -> bytes:
    """A 2 MB trace gzipped, a bit flipped in the middle of its compressed data: it inflates to junk well
    before the member's check (CRC, length) at its end fails."""
    events = [{"ph": "X", "name": f"op{i % 50}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(40_000)]
    data = bytearray(gzip.compress(json.dumps(events).encode(), mtime=0))
    data[len(data) // 2 + 97] ^= 0x01  # a bit that inflates to a character JSON can't have there
    return bytes(data)


def test_damaged_gzip_is_said_to_be_gzip_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(_corrupt_gzip())
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not valid gzip" in err and "JSON" not in err, err


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, says = BAD[name]
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["analyze", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and says in captured.err, captured.err


def test_bad_input_subprocess_and_where(tmp_path: Path, trace: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'[\n{"ph": "X", "dur": 1},\n{"ph": oops}\n]')
    proc = run_cli("analyze", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "line 3, column 8" in proc.stderr
    proc = run_cli("analyze", str(trace), "--order-by", "nonsense")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "flops_per_s" in proc.stderr and "bandwidth" not in proc.stderr.split("valid:")[0]


def test_counter_columns_order_and_aggregate() -> None:
    from layerperf.analysis import aggregate as analysis
    from layerperf.data.calls import TableBuilder

    b = TableBuilder()
    a, c = b.ident("a", "Conv", "CPU", "", ""), b.ident("c", "Relu", "CPU", "", "")
    b.extend([a, c, a], [5.0, 9.0, 6.0], counters={"cycles": [100.0, 10.0, 300.0]})
    table = b.build({"format": "test"})
    out = analysis.rows(analysis.analyze(table, order_by="cycles"))
    assert [(r["name"], r["cycles"]) for r in out] == [("a", 400.0), ("c", 10.0)]
    assert "cycles" in analysis.orderable(table)


def test_summed_inclusive_time_counts_nested_calls_of_a_group_once(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # a block (100 µs) holding a Loop (60) holding another Loop (20); a lone Loop (30) after it
    events = [_event("block", "Block", 0, 100), _event("outer", "Loop", 10, 60), _event("inner", "Loop", 20, 20),
              _event("later", "Loop", 200, 30)]
    path = tmp_path / "nested.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    loop = next(r for r in _json(capsys, str(path), "--aggregate-by", "type") if r["op_type"] == "Loop")
    assert loop["incl_us"] == 60 + 30  # the inner Loop's 20 µs are inside the outer one's 60
    assert loop["time_us"] == (60 - 20) + 20 + 30
    (cpu,) = _json(capsys, str(path), "--aggregate-by", "provider")
    assert cpu["incl_us"] == 100 + 30 and cpu["time_us"] == 130  # never more than the thread was busy
    by_name = {r["name"]: r["incl_us"] for r in _json(capsys, str(path))}
    assert by_name == {"block": 100, "outer": 60, "inner": 20, "later": 30}  # one call each: as they are


def test_a_file_that_is_no_json_is_refused_at_its_first_bytes(tmp_path: Path) -> None:
    # a weights file (.onnx.data) passed by mistake: refused from its first block, not read whole
    from layerperf.readers.stream import open_events

    path = tmp_path / "model.onnx.data"
    with path.open("wb") as f:
        f.truncate(64 << 20)
    with pytest.raises(InputError, match=r"starts with '\{' or '\['\), this file has byte 0x00 at line 1, column 1"):
        open_events(path, block=1 << 16)


def test_a_type_the_trace_lacks_says_which_it_has(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(trace), "--type", "Nope"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "hint: no op of type 'Nope' in this trace; its types: " in out and "Conv" in out


def test_a_profile_directory_with_its_trace_gzipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = Path(__file__).parent / "data" / "traces_0_1" / "resnet18_counters_memory" / "trace.json"
    (tmp_path / "trace.json.gz").write_bytes(gzip.compress(saved.read_bytes()))
    assert main(["analyze", str(tmp_path), "--format", "json"]) == 0
    gzipped = orjson.loads(capsys.readouterr().out)
    assert main(["analyze", str(saved), "--format", "json"]) == 0
    assert gzipped == orjson.loads(capsys.readouterr().out)


def test_a_cpu_trace_naming_a_gpu_is_rated_against_no_peak(tmp_path: Path) -> None:
    doc = orjson.loads(gzip.decompress((Path(__file__).parent / "data" / "torch_cpu" / "trace.json.gz").read_bytes()))
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    path = tmp_path / "cpu_beside_gpu.json"
    path.write_bytes(orjson.dumps(doc))
    given = Peaks("Some CPU", 2, flops_per_s={1: 100e9, 2: 200e9}, int_ops_per_s={1: 400e9, 2: 800e9},
                  bytes_per_s={1: 20e9, 2: 30e9}, measured_at="2026-11-24T00:00:00Z")  # test input, not measured
    section = analyze_view(read_table(path), peaks=given).sections[0]
    assert "pct_of_peak" not in section.keys
    assert any("% of peak not given: the trace names the GPU NVIDIA H100" in n.text for n in section.notes)
    plain = tmp_path / "cpu.json"  # the same trace without the GPU's name is rated against the peaks given
    del doc["deviceProperties"]
    plain.write_bytes(orjson.dumps(doc))
    assert "pct_of_peak" in analyze_view(read_table(plain), peaks=given).sections[0].keys


def test_shares_say_they_are_of_summed_time_when_rows_show_another_figure(trace: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    said = "self % and cumulative: each row's summed self time over the total, not its median per call"
    assert main(["analyze", str(trace), "--aggregate", "median"]) == 0
    assert said in capsys.readouterr().out.replace("\n", " ")
    assert main(["analyze", str(trace)]) == 0
    assert "self % and cumulative:" not in capsys.readouterr().out


def test_an_unknown_order_by_names_the_aliases_too(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(trace), "--order-by", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "time_us" in err
    for alias in ("time", "cumulative", "inclusive", "device", "memory", "bandwidth"):  # what the README offers
        assert f" {alias}," in err or f" {alias} (" in err, alias


def test_a_type_column_that_repeats_the_name_is_not_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a PyTorch trace's op type is the op's name: shown once on a terminal, kept in CSV and JSON
    same = tmp_path / "same.json"
    same.write_text('[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]')
    assert main(["analyze", str(same)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "name" in line and "self time" in line)
    assert "type" not in header
    assert main(["analyze", str(same), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("name,op_type,")
    other = tmp_path / "other.json"
    other.write_text('[{"ph": "X", "name": "conv1", "pid": 1, "tid": 1, "ts": 0, "dur": 5, '
                     '"args": {"op_type": "Conv"}}]')
    assert main(["analyze", str(other)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "name" in line and "self time" in line)
    assert "type" in header


@pytest.mark.parametrize("streamed", [False, True])
def test_inclusive_time_of_siblings_overlapping_by_a_nanosecond(tmp_path: Path, streamed: bool,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A PyTorch trace whose µs rounding makes two sibling ops overlap by 1 ns: the second linear (inside relu,
    which starts a nanosecond before the first linear ends) is a call of its own group, outermost, so the
    group's inclusive time is 10.001 + 20 µs, and the thread's inclusive time is no less than its self time."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 10.001,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 10, "dur": 40,
         "args": {"External id": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 12, "dur": 20,
         "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 5,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 8,
         "args": {"correlation": 9, "device": 0, "stream": 7}}]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    if not streamed:  # the whole-file table (the report's): the same nesting
        table = read_table(path)
        linear = [i for i in range(len(table)) if table.name.values[table.name.codes[i]] == "aten::linear"]
        assert table.outer["name"][linear].tolist() == [True, True]
    for by, name, incl in (("name", "aten::linear", 30.001), ("provider", "(3 names)", 50.001)):
        assert main(["analyze", str(path), "--aggregate-by", by, "--format", "json"]) == 0
        rows = {r["name"]: r for r in orjson.loads(capsys.readouterr().out)}
        assert rows[name]["incl_us"] == pytest.approx(incl, abs=1e-6)
        assert rows[name]["incl_us"] >= rows[name]["time_us"] - 1e-6


@pytest.mark.parametrize("by", ["name", "type", "provider", "shape"])
@pytest.mark.parametrize("which", ["counters", "v100", "torch_cpu"])
def test_no_rows_keep_the_csv_header_rows_have(capsys: pytest.CaptureFixture[str], by: str, which: str) -> None:
    """A filter that keeps nothing prints the header the rows would have had: the counters' columns, device
    time on a GPU trace, in the same order (it once printed name,op_type,provider,calls,time_us)."""
    data = Path(__file__).parent / "data"
    path = {"counters": data / "traces_0_1" / "resnet18_counters_memory" / "trace.json",
            "v100": data / "torch_cuda" / "trace.json.gz", "torch_cpu": data / "torch_cpu" / "trace.json.gz"}[which]
    keys = list(_json(capsys, str(path), "--aggregate-by", by)[0])
    assert ("page-faults" in keys) == (which == "counters") and ("device_us" in keys) == (which == "v100")
    assert main(["analyze", str(path), "--aggregate-by", by, "--name", "^no such op$", "--format", "csv"]) == 0
    assert capsys.readouterr().out == ",".join(keys) + "\n"
    assert _json(capsys, str(path), "--aggregate-by", by, "--name", "^no such op$") == []
