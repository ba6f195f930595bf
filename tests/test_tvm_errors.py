"""The TVM backend's failures, each one line naming what went wrong and what to do: an op type the
Relax frontend cannot import, a node it fails on, a compile failure, a pipeline or target it has not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import tvm  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from layerperf.backends.tvm.build import build  # noqa: E402
from layerperf.backends.tvm.importer import import_onnx, unsupported_ops  # noqa: E402
from layerperf.errors import BackendError, InputError  # noqa: E402
from tvm_models import with_op  # noqa: E402

from conftest import tiny_cnn  # noqa: E402


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_an_op_the_frontend_cannot_import_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BackendError) as info:
        import_onnx(with_op("DFT"))
    text = _one_line(info)
    assert "cannot import op type DFT (node 'the_dft')" in text and "--backend onnxruntime" in text
    assert capsys.readouterr().out == ""


def test_every_op_it_cannot_import_is_listed() -> None:
    model = with_op("STFT")
    model.graph.node.append(helper.make_node("Col2Im", ["y"], ["z"], name="c2i"))
    assert unsupported_ops(model) == {"STFT": "the_stft", "Col2Im": "c2i"}
    with pytest.raises(BackendError, match="op types STFT .*, Col2Im"):
        import_onnx(model)


def test_a_contrib_op_is_refused_by_its_type() -> None:
    with pytest.raises(BackendError, match="FusedConv"):
        import_onnx(with_op("FusedConv", "com.microsoft"))


def test_a_node_the_frontend_fails_on_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    pads = helper.make_tensor("p", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])
    node = helper.make_node("Pad", ["x", "p"], ["y"], name="wrap_pad", mode="wrap")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [pads]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    with pytest.raises(BackendError) as info:
        import_onnx(model)
    text = _one_line(info)
    assert "failed on node 'wrap_pad' (Pad)" in text and "wrap" in text and "--backend onnxruntime" in text
    assert capsys.readouterr().out == ""  # the frontend's own print is kept off the terminal


def test_a_compile_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise tvm.error.InternalError("Traceback (most recent call last):\n  File x\nInternalError: Check failed: "
                                      "(bad) is false: storage too small")

    monkeypatch.setattr(tvm, "compile", failing)
    with pytest.raises(BackendError) as info:
        build(tiny_cnn(), use_cache=False)
    text = _one_line(info)
    assert text.startswith("TVM failed to compile the model for llvm (pipeline default)")
    assert "storage too small" in text


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"pipeline": "fastest"}, "unknown TVM pipeline 'fastest'"),
    ({"target": "c"}, "no Relax pipeline for target kind 'c'"),
    ({"target": "llvm -mtriple=aarch64-linux-gnu"}, "not available here"),
])
def test_pipelines_and_targets_it_has_not(kwargs: dict, words: str) -> None:
    with pytest.raises(InputError) as info:
        build(tiny_cnn(), use_cache=False, **kwargs)
    assert words in _one_line(info)


def test_nothing_is_cached_when_the_build_fails(tmp_path: Path) -> None:
    with pytest.raises(BackendError):
        build(with_op("DFT"), cache_root=tmp_path)
    assert not (tmp_path / "builds").exists()
