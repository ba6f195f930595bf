"""Traces written by layerperf 0.1.0 (before the backend-interface redesign) still load and give the same
figures: the files under tests/data/traces_0_1 were written by that version, with its own outputs beside
them (analyze JSON and CSV, the summary and the layer table, layers.csv)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

import layerperf
from layerperf.analysis.summary import summary
from layerperf.cli import main

DATA = Path(__file__).parent / "data" / "traces_0_1"
TRACES = ("resnet18_counters_memory", "loop")
# Keys and layers.csv columns added since 0.1.0, each a figure of its own (the ones 0.1.0 wrote keep their
# values): the stepwise executor's fidelity per layer and in the summary, the counts' spread over passes.
ADDED = {"reference", "profile_time_ratio", "profile_rank_correlation", "flagged_layers", "off_share",
         "timing_passes", "passes_disturbed", "disturbed_used", "stepwise_ratio", "stepwise_off",
         "task-clock_cv", "page-faults_cv", "insitu_counts", "insitu_rank_ceiling", "holds", "misses", "bounds",
         "view_layers", "flagged_views", "rank_correlation_without_views", "insitu_rank_ceiling_without_views"}


def _same(a: Any, b: Any, where: str = "") -> None:
    """Equal JSON values, floats to 1e-9 relative (a re-encoded float may differ in its last digit)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, where
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) - ADDED == set(b), f"{where}: keys {sorted(set(a) - ADDED ^ set(b))}"
        for k in b:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _same_csv(got: str, expected: str, where: str) -> None:
    """The same table: header and text cells equal; each figure, written whole now, is the one 0.1.0 wrote
    to 6 significant digits."""
    got_rows, expected_rows = (list(csv.reader(io.StringIO(t, newline=""))) for t in (got, expected))
    width = len(expected_rows[0])  # columns added since come after the old ones
    assert got_rows[0][:width] == expected_rows[0] and set(got_rows[0][width:]) <= ADDED, where
    assert len(got_rows) == len(expected_rows), where
    for row, old in zip(got_rows[1:], expected_rows[1:], strict=True):
        for key, new_cell, old_cell in zip(expected_rows[0], row[:len(old)], old, strict=True):
            if _number(old_cell):  # 0.1.0 wrote integers whole, floats to 6 digits
                assert float(new_cell) == float(old_cell) or float(format(float(new_cell), ".6g")) == float(old_cell), \
                    f"{where} {key}: {new_cell} != {old_cell}"
            else:
                assert new_cell == old_cell, f"{where} {key}: {new_cell!r} != {old_cell!r}"


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _json(data: bytes | str) -> Any:
    return orjson.loads(data)


@pytest.mark.parametrize("name", TRACES)
def test_old_trace_loads_with_the_same_figures(name: str) -> None:
    prof = layerperf.load(DATA / name / "trace.json")
    expected = _json((DATA / name / "summary.json").read_bytes())
    got = _json(orjson.dumps({"summary": summary(prof), "table": prof.table()},
                             option=orjson.OPT_SERIALIZE_NUMPY))
    _same(got, expected, name)


@pytest.mark.parametrize("name", TRACES)
def test_old_trace_analyzes_the_same(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(DATA / name / "trace.json")
    assert main(["analyze", trace, "--format", "json", "--top", "0"]) == 0
    _same(_json(capsys.readouterr().out), _json((DATA / name / "analyze.json").read_bytes()), name)
    assert main(["analyze", trace, "--aggregate-by", "type", "--format", "csv"]) == 0
    _same_csv(capsys.readouterr().out, (DATA / name / "analyze_by_type.csv").read_text(), name)


@pytest.mark.parametrize("name", TRACES)
def test_old_trace_saves_the_same_layers_csv_and_round_trips(name: str, tmp_path: Path) -> None:
    prof = layerperf.load(DATA / name / "trace.json")
    written = layerperf.save(prof, tmp_path)
    layers_csv = (tmp_path / "layers.csv").read_bytes().decode()
    _same_csv(layers_csv, (DATA / name / "layers.csv").read_bytes().decode(), f"{name}/layers.csv")
    assert layers_csv.count("\r\n") == layers_csv.count("\n")  # CSV's own line ends, as always
    again = layerperf.load(tmp_path)
    assert again == prof
    if name.startswith("resnet18"):  # its memory section comes back as the pictures
        assert {"memory_flow.svg", "memory_timeline.svg"} <= set(written)
        assert prof.counters is not None and prof.counters.passes == 2
        assert prof.memory is not None and prof.memory.peak_bytes > 0
