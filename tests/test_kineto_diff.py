"""``layerperf diff`` of PyTorch (Kineto) traces that mark no ``ProfilerStep#N``: ops paired by name, each
figure the difference of what ``analyze`` reads from the two traces (both streamed)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from layerperf.cli import main

H100 = Path(__file__).parent / "data" / "torch_resnet18_cuda" / "trace.json.gz"
SHORTER_US = 0.5  # what each aten::empty loses in the changed copy


def _changed_copy(path: Path) -> Path:
    """The H100 trace with every ``aten::empty`` (a leaf) half a µs shorter: its self time falls by that
    much per call, the op around it gains it, the trace's total stays."""
    doc = json.loads(gzip.decompress(H100.read_bytes()))
    assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in doc["traceEvents"])
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") == "aten::empty":
            e["dur"] -= SHORTER_US
    path.write_bytes(json.dumps(doc).encode())
    return path


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_diff_of_kineto_traces_without_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _changed_copy(tmp_path / "b.json")
    doc = _json(["diff", str(H100), str(b), "--aggregate", "sum", "--format", "json"], capsys)
    assert isinstance(doc, dict)
    rows = {r["key"]: r for r in doc["rows"]}
    a_rows = _json(["analyze", str(H100), "--format", "json"], capsys)
    b_rows = _json(["analyze", str(b), "--format", "json"], capsys)
    assert isinstance(a_rows, list) and isinstance(b_rows, list)
    a_time = {r["name"]: r["time_us"] for r in a_rows}
    b_time = {r["name"]: r["time_us"] for r in b_rows}
    assert set(rows) == set(a_time) == set(b_time)  # every op paired, none only in one trace
    for name, row in rows.items():
        assert row["time_a_us"] == pytest.approx(a_time[name], abs=1e-6)
        assert row["time_b_us"] == pytest.approx(b_time[name], abs=1e-6)
    empty = rows["aten::empty"]
    assert empty["delta_us"] == pytest.approx(-SHORTER_US * empty["calls_a"], abs=1e-6)
    assert sum(r["delta_us"] for r in rows.values()) == pytest.approx(0.0, abs=1e-6)
    assert doc["totals"]["delta_us"] == pytest.approx(0.0, abs=1e-6)
