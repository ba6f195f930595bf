"""What a new user meets in the first minutes (issue 21's smaller items): each line says what is so."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from pathlib import Path

import pytest

import layerperf
from layerperf import counters
from layerperf.cli import main
from layerperf.renderers.views.profile import counted_how, profile_view

from conftest import run_cli

SAVED = Path(__file__).parent / "data" / "traces_0_1" / "resnet18_counters_memory" / "trace.json"


def _notes(prof: layerperf.Profile) -> list[str]:
    return [n.plain() for n in profile_view(prof, top=None, fmt="table", written={}, peaks=None).sections[0].notes]


def test_no_latency_says_latency_was_not_measured(tiny_model_path: Path) -> None:
    prof = layerperf.profile(str(tiny_model_path), runs=2, warmup=0, latency=False)
    line = next(t for t in _notes(prof) if t.startswith("latency"))
    assert line.startswith("latency: not measured (--no-latency); profiled run median ") and "?" not in line
    measured = layerperf.profile(str(tiny_model_path), runs=2, warmup=0)
    assert next(t for t in _notes(measured) if t.startswith("latency")).startswith("latency (profiler off")


def test_the_counter_line_says_how_the_backend_counted() -> None:
    assert counted_how("onnxruntime") == "stepwise executor"
    assert counted_how("torch") == "read in situ at module boundaries"
    assert any(t.startswith("counters: stepwise executor, 2 passes") for t in _notes(layerperf.load(SAVED)))


def test_the_torch_backends_counter_line_is_in_situ() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install 'layerperf[torch]')")
    if not any(p.ok for p in counters.probe_events() if p.name == "task-clock"):
        pytest.skip("task-clock cannot be counted here (perf_event_paranoid)")
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    prof = layerperf.profile((model.eval(), torch.randn(2, 8)), backend="torch", runs=2, warmup=0, latency=False,
                             events=["task-clock"], passes=2)
    line = next(t for t in _notes(prof) if t.startswith("counters:"))
    assert line.startswith("counters: read in situ at module boundaries, 2 passes per event group")
    assert "stepwise" not in line


def test_analyze_csv_and_json_keep_every_digit_and_counts_as_integers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAVED), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(SAVED), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == len(doc)
    for row, obj in zip(rows, doc, strict=True):
        for key in ("flops", "bytes", "int_ops", "calls"):
            assert isinstance(obj[key], int), (key, obj[key])  # counts as integers, not 2313110528.0
            assert row[key] == str(obj[key])  # not 2.31311e+09
        for key, value in obj.items():  # every numeric column, the CSV's text reads back as the JSON's number
            if isinstance(value, float):
                assert float(row[key]) == value, (key, row[key], value)


def test_diff_and_by_type_csv_keep_every_digit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAVED), "--aggregate-by", "type", "--format", "csv"]) == 0
    conv = next(r for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["op_type"] == "Conv")
    assert "e+" not in conv["flops"] and int(conv["flops"]) > 10**8
    assert main(["diff", str(SAVED), str(SAVED), "--format", "csv"]) == 0
    assert main(["diff", str(SAVED), str(SAVED), "--format", "json"]) == 0
    out = capsys.readouterr().out
    text, doc = out[:out.index("{")], json.loads(out[out.index("{"):])
    by_key = {r["key"]: r for r in doc["rows"]}
    for row in csv.DictReader(io.StringIO(text)):
        assert float(row["time_a_us"]) == by_key[row["key"]]["time_a_us"]


@pytest.mark.parametrize("shape", ["input=0x3x16x16", "input=1x0x16x16"])
def test_a_zero_dimension_is_refused_in_one_line(shape: str, dynamic_model_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(dynamic_model_path), "--shape", shape, "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--shape '{shape}' has a zero dimension" in err


@pytest.mark.parametrize("command", [["profile", "resnet18"], ["memory", "resnet18"]])
@pytest.mark.parametrize("runs", ["0", "-1"])
def test_runs_below_one_are_refused_with_the_rule_they_break(command: list[str], runs: str) -> None:
    r = run_cli(*command, "--runs", runs)
    assert r.returncode == 2 and f"argument --runs: expected 1 or more, got {runs}" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["profile", "resnet18"], ["memory", "resnet18"],
                                     ["compare", "resnet18", "--backends", "onnxruntime,torch"],
                                     ["bench", "Relu", "--input", "X=1x3x4"]])
def test_a_negative_seed_is_refused_in_one_line(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse: before anything runs (a traceback from numpy before)
        main([*command, "--seed", "-1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --seed: expected 0 or more, got -1" in err and err.count("\n") == 1


def test_the_api_refuses_a_negative_seed() -> None:
    from layerperf.backends.base import RunPlan
    from layerperf.errors import InputError

    with pytest.raises(InputError, match="--seed must be 0 or more, got -1"):
        RunPlan(seed=-1).validate()


def test_the_api_says_the_same_rule() -> None:
    with pytest.raises(layerperf.errors.InputError, match="--runs must be at least 1, got 0"):
        layerperf.profile("resnet18", runs=0)


def test_report_creates_the_missing_folders_of_its_output(tmp_path: Path) -> None:
    """As ``profile --out`` does: ``report -o missing/dir/x.html`` creates missing/dir."""
    out = tmp_path / "missing" / "dir" / "x.html"
    r = run_cli("report", str(SAVED), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.is_file() and [p.name for p in out.parent.iterdir()] == ["x.html"]


def test_the_suite_runs_on_a_cache_of_its_own() -> None:
    """conftest's LAYERPERF_CACHE: no test reads or writes the user's ~/.cache/layerperf (a calibration there
    would change % of peak; the zoo and bench's speed file too)."""
    from layerperf.bench import speed
    from layerperf.calibration import peaks
    from layerperf.models import zoo
    from layerperf.util.cache import cache_root

    root = cache_root()
    assert root != Path("~/.cache/layerperf").expanduser()
    for place in (zoo.cache_dir(), peaks.directory(), speed.path()):
        assert place.is_relative_to(root), place
