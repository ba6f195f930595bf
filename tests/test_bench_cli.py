"""``layerperf bench`` on the command line: JSON/CSV/table output and one-line errors (exit 2)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest

from layerperf.cli import main
from layerperf.errors import InputError

from conftest import run_cli

FAST = ["--samples", "3", "--min-time", "50us", "--warmup-max", "0.05", "--no-overhead", "--speed-wait", "0"]
CONV = ["Conv", "--input", "X=1x3x16x16", "--input", "W=8x3x3x3", "--attr", "pads=1,1,1,1", "--attr", "strides=2,2"]


def test_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *CONV, *FAST, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"median_us", "flops", "bytes", "samples", "cv", "outliers", "peak_rss_delta_bytes"} <= set(doc)
    assert len(doc["samples"]) == 3 and doc["median_us"] > 0
    assert doc["flops"] == 2 * 8 * 8 * 8 * 27
    assert doc["outputs"][0]["shape"] == [1, 8, 8, 8]
    assert doc["attrs"] == {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    assert doc["weights"] == ["W"]
    assert doc["slowed"] == 0 and doc["speed_reference_us"] is None  # --speed-wait 0: no waiting


def test_speed_wait_reports_its_reference(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path))  # no remembered speed: this run's own is the reference
    assert main(["bench", *CONV, *FAST[:-2], "--speed-wait", "0.5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["speed_reference_us"] > 0 and doc["yardstick_p10_us"] >= doc["speed_reference_us"]
    assert len(doc["slowed_samples"]) == doc["slowed"] and doc["requested_samples"] == 3
    assert len(doc["samples"]) == doc["n_samples"]
    assert doc["n_samples"] == 3 or doc["slowed_used"] or doc["used_disturbed"]  # as many clean as asked, or flagged
    assert (tmp_path / "bench-speed.json").exists()  # remembered for the next run
    assert main(["bench", *CONV, *FAST[:-2], "--speed-wait", "0.5"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table's lines, unwrapped
    assert re.search(r"between the samples; full speed [\d.]+ µs, samples beside a reading above [\d.]+ µs set aside",
                     out), out
    assert main(["bench", *CONV, *FAST]) == 0  # --speed-wait 0: readings reported, nothing held to them
    assert "between the samples; runs at different yardsticks" in " ".join(capsys.readouterr().out.split())
    assert main(["bench", *CONV, *FAST[:-2], "--speed-wait", "-1"]) == 2


def test_sweep_csv_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "Relu", "--input", "X=1x8", "--sweep", "X=1x8,1x16,1x32", "--threads", "1,2", *FAST]
    assert main([*args, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 6
    assert [r["threads"] for r in rows] == ["1", "2"] * 3
    assert main([*args, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 6


def test_table_shows_cv_and_details(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *CONV, *FAST, "--const", "B=[0,0,0,0,0,0,0,0]"]) == 0
    out = capsys.readouterr().out
    assert "CV" in out and "median" in out and "FLOPs" in out
    assert "B 8 float32 (initializer)" in out
    assert "IQR outliers" in out


def test_a_schema_that_numbers_its_variadic_input(capsys: pytest.CaptureFixture[str]) -> None:
    # Sum's inputs are data_0 in the schema: data_1, data_2 follow it, as data_0_1 did
    assert main(["bench", "Sum", "--input", "data_2=3x4", "--input", "data_0=4", "--input", "data_1=2x1x4", *FAST,
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["in_shapes"] == "4;2x1x4;3x4"  # in their order, not the flags'



def test_beside_a_co_runner_on_the_same_cores_no_sample_is_set_aside(capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.bench.api import settings_from

    shared, alone = settings_from(set_aside=False).measure_options(), settings_from().measure_options()
    assert shared.max_wait_fraction is None and shared.speed_wait_s == 0  # the waiting is the interference
    assert alone.max_wait_fraction == 0.05 and alone.speed_wait_s > 0
    with pytest.raises(InputError, match="--speed-wait"):  # what was given is still checked
        settings_from(speed_wait_s=math.inf, set_aside=False)
    assert main(["bench", "Relu", "--input", "X=64", *FAST, "--corun", "Relu:X=64", "--shared-cores",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["wait_checked"] is False and doc["disturbed"] == 0 and doc["slowed"] == 0
    assert any("no sample set aside" in w for w in doc["warnings"])


def test_a_folded_input_the_saved_graph_keeps_is_not_asked_for() -> None:
    # ONNX Runtime's saved optimized graph keeps inputs it folded away (W__SHAPE): no value, no reader
    import numpy as np
    from onnx import TensorProto, helper

    from layerperf.backends.ort.single_op import probe

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    folded = helper.make_tensor_value_info("w__SHAPE", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x, folded], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    got = probe(model, ["y"], {"x": np.array([-1.0, 2.0], np.float32)}, "CPUExecutionProvider")
    assert got["y"].tolist() == [0.0, 2.0]
    assert [i.name for i in model.graph.input] == ["x", "w__SHAPE"]  # the model given is left as it was


def test_node_of_a_zoo_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "resnet18", "--node", "conv1", "--image-size", "32", "--opt-level", "disable",
                 *FAST, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["node"] == "conv1" and doc["inputs"][0]["shape"] == [1, 3, 32, 32]


@pytest.mark.parametrize("args, message", [
    (["Convv", "--input", "X=1x3"], "unknown operator 'Convv'"),
    (["Conv", "--input", "X=1x3x8x8"], "Conv needs input W"),
    (["Conv", "--input", "X=1x3x8x8", "--input", "W=4x3x3x3", "--input", "Q=1"], "no input 'Q'"),
    (["Relu", "--input", "X=1xfour"], "malformed dims of input X"),
    (["Relu", "--input", "X=1x4:float128"], "unknown dtype 'float128'"),
    (["Relu", "--input", "X=1x4:bool"], "Relu input X cannot be bool"),
    (["Conv", "--input", "X=1x3x8x8", "--input", "W=4x5x3x3"], "Input channels C is not equal"),
    (["Relu", "--input", "X=4", "--threads", "x"], "--threads"),
    (["Relu", "--input", "X=4", "--min-time", "soon"], "--min-time"),
    (["Relu", "--input", "X=4", "--shape", "x=1"], "--shape does not apply"),
    (["resnet18", "--node", "conv1", "--input", "X=1"], "--input does not apply"),
    (["resnet18"], "resnet18 is a model: name the node"),
    (["Relu", "--input", "X=4", "--events", "no-such-event"], "no-such-event"),
    (["StringNormalizer", "--input", "X=4"], "StringNormalizer input X is a tensor of strings"),
    (["Relu", "--input", "X=4", "--threads", "1,100000"], "--threads 100000 is more than"),  # before row 1 runs
    (["Relu", "--input", "X=4", "--min-time", "inf"], "--min-time: 'inf' is not a positive duration"),
    (["", "--input", "X=4"], "unknown operator ''"),  # not a model: "" names no file
])
def test_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["bench", *FAST, *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("layerperf: error: ") and err.count("\n") == 1


def test_an_input_beyond_memory_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    overcommit = Path("/proc/sys/vm/overcommit_memory")
    if overcommit.exists() and overcommit.read_text().strip() == "1":
        pytest.skip("this kernel grants any allocation (vm.overcommit_memory=1): it would not fail")
    assert main(["bench", *FAST, "Relu", "--input", "X=1000000x1000000"]) == 2  # 3.6 TiB
    err = capsys.readouterr().err
    assert err.startswith("layerperf: error: out of memory: ") and err.count("\n") == 1, err


def test_real_command_line() -> None:
    proc = run_cli("bench", "MatMul", "--input", "A=8x16", "--input", "B=16x4", *FAST, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["flops"] == 2 * 8 * 4 * 16
    bad = run_cli("bench", "Conv", "--input", "X=1x3x8x8", "--input", "W=4x3x3x3", "--attr", "pads=1,1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "pads has incorrect size" in bad.stderr
