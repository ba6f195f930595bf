"""TVM beside the other runtimes: ``--tune`` and ``--compare`` (the untuned and tuned builds in one run,
their diff printed; the schedules MetaSchedule chose in trace.json and the records), ``layerperf
compare`` across runtimes (a runtime that fails said in one line, the rest compared), and ``diff`` of
resnet18 on ONNX Runtime against TVM pairing the convolutions and the Gemm. Tuning here is one random
trial per task of a two-task model (seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

pytest.importorskip("tvm")
for _needed in ("psutil", "cloudpickle", "xgboost"):
    pytest.importorskip(_needed)
os.environ.setdefault("TVM_NUM_THREADS", "1")

import onnx  # noqa: E402

import layerperf  # noqa: E402
from layerperf import backends  # noqa: E402
from layerperf.backends.tvm import tuning  # noqa: E402
from layerperf.cli import main  # noqa: E402
from tvm_models import det_model, own_cache, two_matmuls  # noqa: E402,F401

from conftest import tiny_cnn  # noqa: E402

QUICK = ["--tune-strategy", "replay-trace"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    out = {}
    for name, model in (("two_matmuls", two_matmuls()), ("tiny_cnn", tiny_cnn()), ("det", det_model())):
        out[name] = folder / f"{name}.onnx"
        onnx.save(model, out[name])
    return out


@pytest.fixture(scope="module")
def compared(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """``profile --tune 2 --compare`` of the two-matmul model: its JSON and its --out folder."""
    out = tmp_path_factory.mktemp("compared") / "out"
    with pytest.MonkeyPatch.context():
        capture = _run(["profile", str(models["two_matmuls"]), "--backend", "tvm", "--tune", "2", "--compare", *QUICK,
                        "--runs", "2", "--warmup", "0", "--format", "json", "--out", str(out)])
    return capture, out


def _run(argv: list[str]) -> dict:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(argv) == 0
    return orjson.loads(buffer.getvalue())


def test_compare_profiles_the_untuned_build_and_diffs_the_two(compared: tuple[dict, Path]) -> None:
    doc, out = compared
    diff = doc["baseline_diff"]
    assert {r["key"] for r in diff["rows"]} == {"mm1+relu", "mm2"} and all(r["match"] == "exact" for r in diff["rows"])
    assert diff["totals"]["time_a_us"] > 0 and diff["totals"]["time_b_us"] > 0
    assert doc["baseline_diff_by_type"]["rows"][0]["key"] == "MatMul"
    tuned, untuned = layerperf.load(out), layerperf.load(out / "baseline")
    assert untuned.metadata.options.get("tuning_state") == "untuned"
    assert str(tuned.metadata.options.get("tuning_state")).startswith("tuned (ms-")
    assert tuned.metadata.options.get("tuning_tasks") == 2 and tuned.metadata.options.get("tuning_trials_per_task") == 1


def test_a_tuned_build_keeps_each_kernels_schedule(compared: tuple[dict, Path]) -> None:
    _, out = compared
    saved = orjson.loads((out / "trace.json").read_bytes())["otherData"]["layerperf"]["layers"]
    for layer in saved:
        schedule = layer["tvm"]["schedule"]
        assert schedule["source"] == "metaschedule" and schedule["tiles"] and schedule["trace"]
    records = layerperf.load(out).records()
    assert all(r.schedule and r.schedule.startswith("tiles=") for r in records)
    assert all(r.schedule == "default schedule" for r in layerperf.load(out / "baseline").records())


def test_a_rerun_reuses_the_database(models: dict[str, Path]) -> None:
    prof = layerperf.profile(models["two_matmuls"], backend="tvm", tune=2, tune_strategy="replay-trace", runs=1,
                             warmup=0, latency=False)
    assert prof.metadata.options.get("tuning_trials_run") == 0  # every task had its trial already
    assert prof.metadata.options.get("build_cached") is True


def test_an_interrupted_tuning_is_one_line(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise tuning.TuningInterrupted("tuning interrupted after 3 trials; the 3 records found are kept in x",
                                       hint="run again to tune the rest")

    monkeypatch.setattr(tuning, "tune_total", interrupted)
    out = tmp_path / "out"
    assert main(["profile", str(models["tiny_cnn"]), "--backend", "tvm", "--tune", "4", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tuning interrupted after 3 trials" in err and not out.exists()


def test_compare_puts_the_runtimes_side_by_side(models: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    doc = _run(["compare", str(models["tiny_cnn"]), "--backends", "onnxruntime,tvm", "--runs", "3", "--warmup", "0",
                "--format", "json", "--out", str(out)])
    assert doc["backends"] == ["onnxruntime", "tvm"] and not doc["failed"]
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["fc"]["layers"] == {"onnxruntime": ["fc"], "tvm": ["fc"]}
    assert all(t is not None and t > 0 for t in rows["fc"]["time_us"].values())
    assert rows["fc"]["fastest"] in ("onnxruntime", "tvm")
    # ONNX Runtime fuses the conv and relu as TVM does: one row each way
    conv = next(r for r in doc["rows"] if "conv" in r["layers"].get("tvm", [""])[0])
    assert conv["layers"]["tvm"] == ["conv+relu"]
    assert set(doc["totals"]["time_us"]) == {"onnxruntime", "tvm"} and doc["totals"]["fastest"]
    assert doc["profiles"]["tvm"]["options"]["tuning_state"] == "untuned"
    assert (out / "onnxruntime" / "trace.json").is_file() and (out / "tvm" / "trace.json").is_file()
    assert orjson.loads((out / "compare.json").read_bytes())["backends"] == ["onnxruntime", "tvm"]


def test_a_runtime_that_fails_is_one_line_and_the_others_are_compared(
        models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    had = "replay" in backends.names()  # the contract test's module registers it for the whole session
    backends.register("replay", "backends.replay:ReplayBackend")
    try:
        assert main(["compare", str(models["det"]), "--backends", "onnxruntime,tvm,replay", "--runs", "2",
                     "--warmup", "0", "--format", "json"]) == 0
    finally:
        if not had:
            backends.unregister("replay")
    captured = capsys.readouterr()
    doc = orjson.loads(captured.out)
    assert doc["backends"] == ["onnxruntime", "replay"] and "Det (node 'the_det')" in doc["failed"]["tvm"]
    assert captured.err.count("\n") == 1 and "tvm failed" in captured.err


def test_a_flag_of_no_compared_runtime_is_refused(models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(models["tiny_cnn"]), "--backends", "onnxruntime,tvm", "--torch-device", "cpu"]) == 2
    assert "--torch-device is an option of the torch backend, not of onnxruntime or tvm" in capsys.readouterr().err


def test_diff_of_resnet18_pairs_the_convolutions_and_the_gemm(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ort = layerperf.profile("resnet18", image_size=32, runs=2, warmup=0)
    tvm = layerperf.profile("resnet18", image_size=32, runs=2, warmup=0, backend="tvm", latency=False)
    layerperf.save(ort, tmp_path / "ort")
    layerperf.save(tvm, tmp_path / "tvm")
    for a, b in (("ort", "tvm"), ("tvm", "ort")):
        assert main(["diff", str(tmp_path / a / "trace.json"), str(tmp_path / b / "trace.json"), "--format",
                     "json"]) == 0
        rows = orjson.loads(capsys.readouterr().out)["rows"]
        heavy = [r for r in rows if r["only_in"] != "B" and r["op_type"] in ("Conv", "FusedConv", "Gemm")]
        paired = [r for r in heavy if not r["only_in"] and r["op_type_b"] in ("Conv", "FusedConv", "Gemm")]
        assert len(heavy) == 21 and len(paired) >= 0.9 * len(heavy), (a, [r["key"] for r in heavy if r["only_in"]])
