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
from layerperf.models.inputs import onnx_input_specs
from tvm_models import initializers_as_inputs, own_cache, save, shape_padded  # noqa: F401

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


def test_an_initializer_folded_away_leaves_the_inputs_with_it() -> None:
    """IR version 3 lists initializers among the graph's inputs: ``w__SHAPE``, read only by the folded
    ConstantOfShape, goes from both, so the folded model is fed ``x`` alone, as the model before."""
    model = initializers_as_inputs()
    folded = fold_shapes(model, {"x": [1, 4]})
    assert [n.name for n in folded.graph.node] == ["fc", "bias"]
    assert "w__SHAPE" not in {vi.name for vi in folded.graph.input} | {t.name for t in folded.graph.initializer}
    assert [s.name for s in onnx_input_specs(folded)] == [s.name for s in onnx_input_specs(model)] == ["x"]
    onnx.checker.check_model(folded)  # the folded weight listed among the inputs as IR version 3 wants
    x = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
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


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="apache-tvm is not installed")
def test_tvm_profiles_a_model_whose_initializers_are_graph_inputs(tmp_path: Path) -> None:
    """As the onnx package's light models (IR version 3): TVM is fed the inputs ONNX Runtime is fed, the
    initializers listed among the graph's inputs left out as constants."""
    import layerperf

    os.environ.setdefault("TVM_NUM_THREADS", "1")
    prof = layerperf.profile(save(initializers_as_inputs(), tmp_path, "ir3"), backend="tvm", runs=2, warmup=0)
    assert prof.graph is not None and list(prof.graph.inputs) == ["x"]
    assert prof.measurement is not None and [i["name"] for i in prof.measurement.inputs] == ["x"]
    assert prof.layers and len(prof.runs) == 2
