"""ReorderInput/ReorderOutput nodes are found by where they run, not by name: ONNX Runtime makes their
names up (``ReorderOutput``, ``ReorderOutput_token_16``) and hands them out in another order in each
session, so the session that saves the optimized graph and the profiled one disagree on which is which."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

import layerperf
from layerperf.backends.ort.names import is_generated, profiler_names
from layerperf.data.profile import Layer

NCHWC = "com.microsoft.nchwc"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _graph(names: list[str]) -> onnx.GraphProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["b0"], name="conv_nchwc", domain=NCHWC)]
    for i, name in enumerate(names):
        nodes.append(helper.make_node("ReorderOutput", [f"b{i}"], [f"y{i}"], name=name, domain=NCHWC, channels=8))
        nodes.append(helper.make_node("ReorderInput", [f"y{i}"], [f"b{i + 1}"], name=f"ReorderInput_token_{i}",
                                      domain=NCHWC))
    return helper.make_graph(nodes, "g", [], [])


def test_made_up_names_are_recognised() -> None:
    assert is_generated("ReorderOutput", "ReorderOutput") and is_generated("ReorderOutput_token_16", "ReorderOutput")
    assert not is_generated("r1_nchwc", "Conv") and not is_generated("ReorderOutputX", "ReorderOutput")


def test_reorders_take_the_profilers_names_in_execution_order() -> None:
    graph = _graph(["ReorderOutput_token_15", "ReorderOutput"])  # as the saving session named them
    observed = [(n.name, n.op_type) for n in graph.node]
    observed[1], observed[3] = ("ReorderOutput", "ReorderOutput"), ("ReorderOutput_token_15", "ReorderOutput")
    assert profiler_names(graph, observed=observed) == [name for name, _ in observed]
    # events that do not line up one to one (a node the profiler did not report): still by order per op type
    assert profiler_names(graph, observed=observed[1:])[1::2] == ["ReorderOutput", "ReorderOutput_token_15"]


def _channels(layer: Layer, side: str) -> int:
    (t, *_) = layer.inputs if side == "in" else layer.outputs
    return int(t.logical().shape[1])  # type: ignore[index]


@pytest.mark.parametrize("model,kw", [(LIGHT / "light_bvlc_alexnet.onnx", {}),
                                      (LIGHT / "light_squeezenet.onnx", {}),
                                      ("mobilenet_v2", {"image_size": 64})], ids=["alexnet", "squeezenet", "mobilenet"])
def test_a_reorder_keeps_the_channel_count_it_restores(model: Path | str, kw: dict[str, int]) -> None:
    """A ReorderOutput's real input channels are its output's; a ReorderInput's real output channels its
    input's (alexnet's 96 and 256 fill whole blocks: nothing is padded there)."""
    if isinstance(model, Path) and not model.exists():
        pytest.skip(f"{model.name} is not in this onnx package")
    prof = layerperf.profile(str(model), runs=1, warmup=0, latency=False, opt_level="all", **kw)
    reorders = [la for la in prof.layers if la.op_type in ("ReorderInput", "ReorderOutput")]
    assert reorders
    for layer in reorders:
        assert _channels(layer, "in") == _channels(layer, "out"), (layer.name, layer.inputs, layer.outputs)
    padded = {la.name for la in prof.layers if la.padded}
    if "alexnet" in str(model):
        assert not padded
    elif "squeezenet" in str(model):
        assert any("1008(1000)" in ";".join(t.marked_shape_str() for t in la.outputs)
                   for la in prof.layers if la.name in padded)
    else:
        assert any("32(24)" in ";".join(t.marked_shape_str() for t in la.inputs) for la in prof.layers)
