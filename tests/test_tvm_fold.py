"""Exporters' shape arithmetic folded before TVM imports a model: pads computed from ``Shape`` and
constants become an initializer, the model computes the same, and TVM profiles what it refused before."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from layerperf.backends.tvm.fold import fold_shapes
from tvm_models import own_cache, save, shape_padded  # noqa: F401

from conftest import tiny_cnn


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_shape_arithmetic_becomes_constants_and_computes_the_same() -> None:
    model = shape_padded()
    folded = fold_shapes(model, {"x": [2, 3, 8, 8]})
    assert [n.name for n in folded.graph.node] == ["pad", "relu"]
    assert {t.name for t in folded.graph.initializer} == {"pads"}  # the constants only the folded nodes read: gone
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(_run(folded, x), _run(model, x))


def test_a_model_with_nothing_to_fold_is_returned_as_it_is() -> None:
    model = tiny_cnn()
    assert fold_shapes(model, {"input": [1, 3, 16, 16]}) is model


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")
def test_tvm_profiles_a_model_whose_pads_its_frontend_refused(tmp_path: Path) -> None:
    import layerperf

    os.environ.setdefault("TVM_NUM_THREADS", "1")
    prof = layerperf.profile(save(shape_padded(), tmp_path, "padded"), backend="tvm", runs=2, warmup=0,
                             shapes=["x=1x3x8x8"])
    names = [layer.name for layer in prof.layers]
    assert names and all("pad" in n or "relu" in n for n in names), names
