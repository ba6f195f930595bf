"""Node pairing across ONNX Runtime's renamings (layerperf.matching), on names as real profiles have them.

The names below are copied from layerperf profiles of the Hugging Face ResNet-50 (PyTorch's legacy
exporter) at --opt-level all, its onnxruntime.quantization QOperator and QDQ versions, and the zoo
resnet50: they are what ONNX Runtime 1.32 produced, not invented patterns.
"""

from __future__ import annotations

import pytest

from layerperf.errors import InputError
from layerperf.matching import Node, normalize_name, op_family, pair_nodes, scope

BLOCK = "/model/encoder/stages.0/layers.0/layer/layer.0"


@pytest.mark.parametrize(("name", "expected"), [
    (f"{BLOCK}/activation/Relu_output_0_nchwc", f"{BLOCK}/activation/Relu"),
    (f"{BLOCK}/convolution/Conv_quant_token_5", f"{BLOCK}/convolution/Conv"),
    (f"{BLOCK}/convolution/Conv_token_8", f"{BLOCK}/convolution/Conv"),
    ("/model/embedder/pooler/MaxPool_output_0_DequantizeLinear/duplicated",
     "/model/embedder/pooler/MaxPool_output_0_DequantizeLinear"),
    ("layer1.0.relu1_nchwc", "layer1.0.relu1"),
    ("Transpose_token_192", "Transpose"),
    ("_nchwc", "_nchwc"),  # nothing would be left: kept as it is
    ("conv", "conv"),
])
def test_normalize_name(name: str, expected: str) -> None:
    assert normalize_name(name) == expected


@pytest.mark.parametrize(("op_type", "family"), [
    ("Conv", "Conv"), ("FusedConv", "Conv"), ("QLinearConv", "Conv"), ("ConvInteger", "Conv"),
    ("NhwcMaxPool", "MaxPool"), ("QLinearAdd", "Add"), ("Gemm", "MatMul"), ("FusedGemm", "MatMul"),
    ("QGemm", "MatMul"), ("MatMulInteger", "MatMul"), ("DynamicQuantizeMatMul", "MatMul"),
    ("MatMulNBits", "MatMul"), ("QuantizeLinear", "QuantizeLinear"), ("Relu", "Relu"),
])
def test_op_family(op_type: str, family: str) -> None:
    assert op_family(op_type) == family


def test_scope() -> None:
    assert scope(f"{BLOCK}/activation/Relu_output_0_nchwc") == BLOCK
    assert scope(f"{BLOCK}/convolution/Conv_quant_token_5") == BLOCK
    assert scope("layer1.0.relu1_nchwc") == "layer1.0"
    assert scope("conv") is None and scope("/Add") is None


def _names(pairs: tuple[tuple[int, int, str], ...], a: list[Node], b: list[Node]) -> set[tuple[str, str, str]]:
    return {(a[i].name, b[j].name, rule) for i, j, rule in pairs}


def test_fp32_nchwc_against_qoperator_int8() -> None:
    a = [Node(f"{BLOCK}/activation/Relu_output_0_nchwc", "Conv", ("reorder_token_5",)),
         Node("/model/encoder/stages.0/layers.0/shortcut/convolution/Conv_output_0_nchwc", "Conv"),
         Node("/model/embedder/pooler/MaxPool_output_0_nchwc", "MaxPool"),
         Node("ReorderOutput", "ReorderOutput", ("out",))]
    b = [Node("pixel_values_QuantizeLinear", "QuantizeLinear"),
         Node("/model/embedder/pooler/MaxPool_token_175", "NhwcMaxPool"),
         Node("/model/encoder/stages.0/layers.0/shortcut/convolution/Conv_quant_token_14", "QLinearConv"),
         Node(f"{BLOCK}/convolution/Conv_quant_token_5", "QLinearConv"),
         Node("/model/encoder/stages.0/layers.0/Add_quant", "QLinearAdd")]
    exact = pair_nodes(a, b, "exact")
    assert exact.pairs == () and len(exact.only_a) == 4 and len(exact.only_b) == 5
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {
        (a[0].name, b[3].name, "scope"),  # Conv+Relu named after the Relu's tensor <-> the quantized Conv
        (a[1].name, b[2].name, "name"),
        (a[2].name, b[1].name, "name"),
    }
    assert [a[i].name for i in p.only_a] == ["ReorderOutput"]
    assert {b[j].op_type for j in p.only_b} == {"QuantizeLinear", "QLinearAdd"}
    assert p.counts() == {"exact": 0, "name": 2, "output": 0, "scope": 1, "order": 0}


def test_nchwc_name_pairs_with_the_fused_node_making_that_tensor() -> None:
    # --opt-level all against extended: the NCHWc conv is named after the tensor the FusedConv makes
    a = [Node(f"{BLOCK}/activation/Relu_output_0_nchwc", "Conv", ("reorder_token_5",))]
    b = [Node(f"{BLOCK}/convolution/Conv", "FusedConv", (f"{BLOCK}/activation/Relu_output_0",)),
         Node(f"{BLOCK}/activation/Relu", "Relu", ("x",))]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {(a[0].name, b[0].name, "output")}
    assert [b[j].name for j in p.only_b] == [f"{BLOCK}/activation/Relu"]  # a different op family: not paired


def test_same_scope_pairs_in_execution_order() -> None:
    a = [Node("layer1.0.relu1_nchwc", "Conv"), Node("layer1.0.relu2_nchwc", "Conv"), Node("layer1.0.bn3_nchwc", "Conv")]
    b = [Node("layer1.0.conv1", "Conv"), Node("layer1.0.relu1", "Relu"), Node("layer1.0.conv2", "Conv"),
         Node("layer1.0.conv3", "Conv")]
    p = pair_nodes(a, b)
    assert {(a[i].name, b[j].name) for i, j, _ in p.pairs} == {
        ("layer1.0.relu1_nchwc", "layer1.0.conv1"), ("layer1.0.relu2_nchwc", "layer1.0.conv2"),
        ("layer1.0.bn3_nchwc", "layer1.0.conv3")}


def test_exact_names_win_and_each_node_pairs_once() -> None:
    a = [Node("x", "Conv"), Node("x_token_1", "Conv")]
    b = [Node("x_token_1", "Conv"), Node("x", "Conv"), Node("x_token_2", "Conv")]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {("x", "x", "exact"), ("x_token_1", "x_token_1", "exact")}
    assert p.only_b == (2,)


def test_unknown_mode() -> None:
    with pytest.raises(InputError, match="--match"):
        pair_nodes([], [], "fuzzy")


def test_order_pairs_only_renamed_leftovers() -> None:
    a = [Node("/blocks.0/act/Relu_output_0_nchwc", "Conv"), Node("out_nchwc", "Conv"), Node("old", "Add")]
    b = [Node("/blocks.0/conv/Conv", "Conv"), Node("/blocks.1/conv/Conv", "Conv"), Node("new", "Add")]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {(a[0].name, b[0].name, "scope"), ("out_nchwc", "/blocks.1/conv/Conv", "order")}
    assert [a[i].name for i in p.only_a] == ["old"] and [b[j].name for j in p.only_b] == ["new"]
