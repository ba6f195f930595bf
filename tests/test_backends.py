"""The backend registry and the CLI around it: choosing a backend, its own flags, availability."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

import layerperf
from layerperf import backends
from layerperf.backends.base import Availability, RunPlan, option
from layerperf.cli import main
from layerperf.errors import InputError


@dataclass(frozen=True, slots=True)
class _AbsentOptions:
    warp: int = field(default=1, metadata=option("how much to warp"))


class AbsentBackend:
    """A backend whose runtime is not installed: it must say so, and never be run."""

    name: ClassVar[str] = "absent"
    summary: ClassVar[str] = "a runtime that is not installed"
    model_suffixes: ClassVar[tuple[str, ...]] = (".absent",)
    options_type: ClassVar[type] = _AbsentOptions

    def availability(self) -> Availability:
        return Availability(False, None, "absentrt is not installed (pip install absentrt)")

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Any) -> Any:
        raise AssertionError("an unusable backend must not be run")


@pytest.fixture
def absent() -> Iterator[AbsentBackend]:
    backend = AbsentBackend()
    backends.register("absent", backend)
    try:
        yield backend
    finally:
        backends.unregister("absent")


def test_onnxruntime_is_registered_usable_and_the_default() -> None:
    import onnxruntime

    ort_backend = backends.get("onnxruntime")
    avail = ort_backend.availability()
    assert avail.usable and avail.version == onnxruntime.__version__
    assert backends.for_model("model.onnx") is ort_backend
    assert backends.for_model("resnet18") is ort_backend  # a built-in model name has no suffix


def test_backends_command_lists_each_with_version_or_reason(absent: AbsentBackend,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import onnxruntime

    assert main(["backends", "--format", "json"]) == 0
    found = {b["name"]: b for b in orjson.loads(capsys.readouterr().out)["backends"]}
    assert found["onnxruntime"]["usable"] and found["onnxruntime"]["version"] == onnxruntime.__version__
    assert found["onnxruntime"]["default"] and "--opt-level" in found["onnxruntime"]["options"]
    assert not found["absent"]["usable"] and "not installed" in found["absent"]["reason"]
    assert found["absent"]["options"] == ["--warp"]
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime (default)" in out and "absentrt is not installed" in out


def test_unknown_backend_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "resnet18", "--backend", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown backend 'nope'" in err and "onnxruntime" in err


def test_unusable_backend_says_why(absent: AbsentBackend, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.absent"
    model.write_bytes(b"x")
    out = tmp_path / "out"
    # chosen by name, and by the model file's suffix
    for argv in (["profile", "resnet18", "--backend", "absent"], ["profile", str(model), "--out", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "backend 'absent' is not usable here: absentrt is not installed" in err
    assert not out.exists()


def test_a_flag_of_another_backend_is_refused(absent: AbsentBackend, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "resnet18", "--warp", "3"]) == 2
    assert "--warp is an option of the absent backend, not of onnxruntime" in capsys.readouterr().err
    assert main(["profile", "resnet18", "--backend", "absent", "--opt-level", "basic"]) == 2
    assert "--opt-level is an option of the onnxruntime backend, not of absent" in capsys.readouterr().err


def test_api_refuses_an_option_the_backend_lacks() -> None:
    with pytest.raises(InputError, match="the onnxruntime backend has no option 'warp'"):
        layerperf.profile("resnet18", warp=3)


def test_backend_flags_reach_the_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "resnet18", "--image-size", "32", "--runs", "2", "--warmup", "0", "--no-latency",
                 "--backend", "onnxruntime", "--opt-level", "disable", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["summary"]["runs"] == 2
    # with optimizations off, BatchNormalization still runs as its own node
    assert any(layer["op_type"] == "BatchNormalization" for layer in doc["layers"])


class WholeModelBackend(AbsentBackend):
    """A usable backend that profiles whole models only: it has no single-operator capability."""

    name: ClassVar[str] = "whole"

    def availability(self) -> Availability:
        return Availability(True, "1.0")

    def single_op(self) -> None:
        return None


def test_bench_refuses_a_backend_that_cannot_measure_one_op(absent: AbsentBackend,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    backends.register("whole", WholeModelBackend())
    try:
        assert main(["bench", "Relu", "--input", "X=1x8", "--backend", "whole"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "backend 'whole' cannot measure one operator in isolation" in err and "onnxruntime" in err
        with pytest.raises(InputError, match="cannot measure one operator"):
            layerperf.bench_op("Relu", {"X": "1x8"}, backend="whole")
    finally:
        backends.unregister("whole")
    assert main(["bench", "Relu", "--input", "X=1x8", "--backend", "absent"]) == 2
    assert "backend 'absent' cannot run here: absentrt is not installed" in capsys.readouterr().err
    assert main(["bench", "Relu", "--input", "X=1x8", "--backend", "nope"]) == 2
    assert "unknown backend 'nope'" in capsys.readouterr().err


def test_listing_backends_imports_no_runtime() -> None:
    import subprocess

    code = ("import sys; from layerperf.cli import build_parser; build_parser(); "
            "print('onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_py_factory_picks_the_torch_backend_and_no_other() -> None:
    assert backends.model_suffix("/tmp/models/cnn.py:make") == ".py"
    assert backends.model_suffix("dir.v2/model.ONNX") == ".onnx" and backends.model_suffix("resnet18") == ""
    assert backends.for_model("/tmp/models/cnn.py:make").name == "torch"
    assert backends.for_model("model.onnx").name == "onnxruntime"
    with pytest.raises(InputError, match=r"\.py factories run on --backend torch, not --backend onnxruntime"):
        backends.for_model("cnn.py:make", "onnxruntime")


def test_more_threads_than_cores_is_a_warning(tiny_model_path: Path) -> None:
    cores = os.cpu_count() or 1
    prof = layerperf.profile(str(tiny_model_path), runs=2, warmup=1, threads=cores + 1, latency=False)
    assert any(w.startswith(f"{cores + 1} intra-op threads asked for on {cores} cores") for w in prof.warnings)
    prof = layerperf.profile(str(tiny_model_path), runs=2, warmup=1, threads=1, latency=False)
    assert not any("intra-op threads asked for" in w for w in prof.warnings)
