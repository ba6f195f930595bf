"""MobileNetV2 (depthwise convolutions, Clip as two kernels when unfused) through the node-to-call
mapping: every node accounted for, fused and unfused, and the fused build's calls checked by value."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import onnx  # noqa: E402

from layerperf.backends.tvm.build import Build, build  # noqa: E402
from layerperf.backends.tvm.instrument import Runner  # noqa: E402
from layerperf.models import zoo  # noqa: E402
from tvm_models import every_value, feed, mismatches  # noqa: E402


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return zoo.build("mobilenet_v2", image_size=32)


@pytest.fixture(scope="module")
def builds(model: onnx.ModelProto) -> dict[str, Build]:
    return {p: build(model, pipeline=p, use_cache=False) for p in ("default", "unfused")}


@pytest.mark.parametrize("pipeline", ["default", "unfused"])
def test_every_node_runs_in_a_call(model: onnx.ModelProto, builds: dict[str, Build], pipeline: str) -> None:
    cov = builds[pipeline].cmap.coverage()
    assert cov == {"kernel": len(model.graph.node), "folded": 0, "import": 0, "unmapped": 0}


def test_unfused_clip_is_two_kernels_of_one_node(model: onnx.ModelProto, builds: dict[str, Build]) -> None:
    cmap = builds["unfused"].cmap
    clip = next(i for i, n in enumerate(model.graph.node) if n.op_type == "Clip")
    assert [s.func.rstrip("0123456789") for s in cmap.sites_of(clip)] == ["maximum", "minimum"]
    fused = builds["default"].cmap.sites_of(clip)
    assert len(fused) == 1 and fused[0].func.startswith("fused_batch_norm")


def test_fused_calls_write_their_nodes_values(model: onnx.ModelProto, builds: dict[str, Build]) -> None:
    b = builds["default"]
    inputs = feed(model)
    runner = Runner(b.executable, b.device, [inputs[i.name] for i in model.graph.input], b.cmap)
    written = runner.outputs({s.call for s in b.cmap.sites if s.nodes})
    assert not mismatches(model, b.cmap, written, every_value(model, inputs))
