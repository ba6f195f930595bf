"""bench --node: one node of a zoo model measured alone, with its real shapes, attributes and weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import layerperf
from layerperf.bench.extract import extract_node
from layerperf.errors import InputError
from layerperf.models import zoo

FAST: dict[str, Any] = {"samples": 3, "min_time_ms": 0.05, "warmup_max_s": 0.05, "overhead": False, "speed_wait_s": 0}
SMALL = {"image_size": 32}


@pytest.fixture(scope="module")
def resnet18() -> onnx.ModelProto:
    return onnx.load(str(zoo.path("resnet18", **SMALL)))


def _run_alone(one: Any) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(one.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, one.feed)


def test_node_as_written(resnet18: onnx.ModelProto) -> None:
    one = extract_node("resnet18", "conv1", opt_level="disable", **SMALL)
    node = next(n for n in resnet18.graph.node if n.name == "conv1")
    assert one.op_type == "Conv" and one.domain == ""
    assert one.attrs["kernel_shape"] == [7, 7] and one.attrs["strides"] == [2, 2]
    assert one.attrs["pads"] == [3, 3, 3, 3]
    assert [t.shape for t in one.inputs if t is not None][0] == (1, 3, 32, 32)
    assert one.outputs[0].shape == (1, 64, 16, 16)
    weight = next(i for i in resnet18.graph.initializer if i.name == node.input[1])
    kept = {i.name: i for i in one.model.graph.initializer}
    assert node.input[1] in one.weights
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(kept[node.input[1]]),
                                  onnx.numpy_helper.to_array(weight))


def test_intermediate_node_gets_the_real_activation(resnet18: onnx.ModelProto) -> None:
    one = extract_node("resnet18", "layer1.0.conv1", opt_level="disable", **SMALL)
    (name,) = one.feed  # its data input is the max pool's output in the model
    assert one.feed[name].shape == (1, 64, 8, 8)
    assert (one.feed[name] >= 0).all() and one.feed[name].any()  # after ReLU and max pool: real values
    out = _run_alone(one)[0]
    assert out.shape == one.outputs[0].shape


def test_optimized_node_keeps_its_contrib_domain() -> None:
    one = extract_node("resnet18", "layer1.0.relu1_nchwc", opt_level="all", **SMALL)
    assert one.domain == "com.microsoft.nchwc"
    assert "com.microsoft.nchwc" in {o.domain for o in one.model.opset_import}
    assert one.attrs.get("activation") == "Relu"
    assert _run_alone(one)[0].shape == one.outputs[0].shape


def test_bench_node_result() -> None:
    r = layerperf.bench_node("resnet18", "layer1.0.conv1", opt_level="disable", **SMALL, **FAST)
    assert r.source["name"] == "resnet18" and r.source["node"] == "layer1.0.conv1"
    assert r.node_name == "layer1.0.conv1" and r.opt_level == "disable"
    assert r.flops == 2 * 64 * 8 * 8 * 64 * 3 * 3  # 3x3 conv, 64 -> 64 channels at 8x8, no bias
    assert len(r.kernels) == 1
    doc = r.to_json()
    assert doc["source"]["opt_level"] == "disable" and len(doc["samples"]) == 3


def test_unknown_node() -> None:
    with pytest.raises(InputError, match="no node named 'nope'"):
        extract_node("resnet18", "nope", opt_level="disable", **SMALL)


def test_node_fused_away_by_optimization() -> None:
    with pytest.raises(InputError, match="'bn1' of the model is fused or renamed"):
        extract_node("resnet18", "bn1", opt_level="all", **SMALL)


def test_default_is_the_node_as_written() -> None:
    r = layerperf.bench_node("resnet18", "layer2.0.conv1", **SMALL, **FAST)
    assert r.opt_level == "disable" and r.op_type == "Conv" and r.domain == ""
    assert r.attrs["strides"] == [2, 2]
    # 3x3 conv, 64 -> 128 channels, stride 2: 8x8 -> 4x4, no bias (batch norm stays a node of its own)
    assert r.flops == 2 * 128 * 4 * 4 * 64 * 3 * 3


def test_optimized_name_without_opt_level_says_which_level_has_it() -> None:
    with pytest.raises(InputError, match="not in the model as written") as info:
        extract_node("resnet18", "layer1.0.relu1_nchwc", **SMALL)
    assert info.value.hint == "pass --opt-level all"


def test_node_sweep_over_threads_extracts_once() -> None:
    from layerperf.bench import sweep_node

    results = sweep_node("resnet18", "layer1.0.relu1", threads=[1, 2], zoo_options=SMALL, **FAST)
    assert [r.threads for r in results] == [1, 2]
    assert {r.node_name for r in results} == {"layer1.0.relu1"}
    assert results[0].inputs == results[1].inputs
