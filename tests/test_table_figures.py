"""Tables that mean what they say: the profile table is ranked by the column its title names, the
diff by type says what its time is, and json/csv never drop rows that -t/--top did not ask to drop."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerperf.cli import main
from layerperf.data.metadata import Metadata, ModelInfo
from layerperf.data.profile import Layer, Profile, Run, Span
from layerperf.renderers.output import print_profile
from layerperf.renderers.views.columns import LAYER_COLUMNS

US = 1000
# medians 664 < 665 < 668 µs, means 698 > 683.75 > 668 µs: the two orders are opposite
DURATIONS_US = {"a": [664, 664, 664, 800], "b": [665, 665, 665, 740], "c": [668, 668, 668, 668]}


def mean_median_profile() -> Profile:
    layers = [Layer(name=name, op_type="Conv") for name in DURATIONS_US]
    runs = []
    for r in range(4):
        t, spans = r * 10_000 * US, []
        for i, durs in enumerate(DURATIONS_US.values()):
            spans.append(Span(i, t, durs[r] * US, 1))
            t += durs[r] * US
        runs.append(Run(r * 10_000 * US, t - r * 10_000 * US, spans))
    return Profile(metadata=Metadata(model=ModelInfo("fake")), layers=layers, runs=runs)


def test_profile_table_is_ranked_by_the_column_its_title_names(capsys: pytest.CaptureFixture[str]) -> None:
    prof = mean_median_profile()
    rows = {r["name"]: r for r in prof.table()}
    by_median = sorted(rows, key=lambda n: -rows[n]["median_us"])
    by_share = sorted(rows, key=lambda n: -rows[n]["share"])
    assert by_median != by_share  # the fixture tells the two orders apart

    print_profile(prof, top=None, fmt="table", written={})
    out = capsys.readouterr().out
    title = re.search(r"top \d+ of \d+ layers by (.+?) \(", out)
    assert title, out
    headers = {c.header: c.key for c in LAYER_COLUMNS}
    key = headers[title.group(1)]
    shown = [name for line in out.splitlines() for name in rows if re.search(rf"│ {name} +│", line)]
    assert shown == sorted(rows, key=lambda n: -rows[n][key])


def test_profile_json_keeps_every_layer_unless_top(capsys: pytest.CaptureFixture[str]) -> None:
    prof = mean_median_profile()
    print_profile(prof, top=None, fmt="json", written={})
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["layers"]] == ["a", "b", "c"]
    print_profile(prof, top=2, fmt="json", written={})
    layers = json.loads(capsys.readouterr().out)["layers"]
    assert len(layers) == 2 and layers[0]["share"] >= layers[1]["share"]


# -- analyze: json and csv print every row unless -t ----------------------------------------------

@pytest.fixture()
def many_ops(tmp_path: Path) -> Path:
    events = [{"ph": "X", "cat": "op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 100, "dur": 10 + i,
               "args": {"op_type": "Add"}} for i in range(30)]
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def test_analyze_pipes_keep_every_row(many_ops: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(many_ops), "--format", "json"]) == 0
    assert len(orjson.loads(capsys.readouterr().out)) == 30
    assert main(["analyze", str(many_ops), "--format", "csv"]) == 0
    assert len(list(csv.DictReader(io.StringIO(capsys.readouterr().out)))) == 30
    assert main(["analyze", str(many_ops), "--format", "json", "-t", "5"]) == 0
    assert len(orjson.loads(capsys.readouterr().out)) == 5
    assert main(["analyze", str(many_ops), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "top 20 of 30 ops" in md and md.count("| op") == 20
    assert main(["analyze", str(many_ops), "-t", "0"]) == 0
    assert ": 30 ops by" in capsys.readouterr().out


# -- diff: the by-type time is a sum over nodes, and says so -------------------------------------

def test_diff_by_type_says_its_time_is_a_sum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def trace(path: Path, adds: tuple[int, int]) -> Path:
        events, t = [], 0
        for _ in range(2):
            for name, dur in zip(("add1", "add2"), adds, strict=True):
                events.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur,
                               "args": {"op_type": "Add"}})
                t += dur
        path.write_bytes(orjson.dumps({"traceEvents": events}))
        return path

    a, b = trace(tmp_path / "a.json", (5, 7)), trace(tmp_path / "b.json", (4, 6))
    assert main(["diff", str(a), str(b), "--by", "type", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["rows"][0]["time_a_us"] == 12.0  # 5 + 7: each node's mean, summed over the type's nodes
    assert "sum over its nodes" in doc["time"] and "mean" in doc["time"]
    assert main(["diff", str(a), str(b), "--by", "type"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the title wraps where the paths are long
    assert "sum over its nodes of each node's mean per call" in out and "mean time" not in out


# -- memory: json lists every tensor at the peak unless --top --------------------------------------

def fan_model(branches: int) -> onnx.ModelProto:
    """x feeds ``branches`` MatMuls whose outputs all meet in one Sum: all are alive together."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"w{i}")
             for i in range(branches)]
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"], name=f"mm{i}") for i in range(branches)]
    nodes.append(helper.make_node("Sum", [f"m{i}" for i in range(branches)], ["y"], name="sum"))
    graph = helper.make_graph(nodes, "fan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _memory_json(path: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    argv = ["memory", str(path), "--out", str(out), "--format", "json", "--sample-rate", "0", "--runs", "1",
            "--opt-level", "disable", *extra]
    assert main(argv) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_memory_json_keeps_every_tensor_unless_top(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fan.onnx"
    onnx.save(fan_model(14), path)
    everything = _memory_json(path, tmp_path / "all", capsys)["tensors_at_peak"]
    assert len(everything) > 10  # more than the table's default
    assert len(_memory_json(path, tmp_path / "top", capsys, "--top", "3")["tensors_at_peak"]) == 3
