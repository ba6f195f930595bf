"""Node pairing across ONNX Runtime's renamings (layerperf.analysis.matching), on names as real profiles have them.

The names below are copied from layerperf profiles of the Hugging Face ResNet-50 (PyTorch's legacy
exporter) at --opt-level all, its onnxruntime.quantization QOperator and QDQ versions, and the zoo
resnet50: they are what ONNX Runtime 1.32 produced, not invented patterns.
"""

from __future__ import annotations

import pytest

from layerperf.analysis.matching import Node, module_path, normalize_name, op_family, pair_nodes, scope, shapes_agree
from layerperf.errors import InputError

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
    ("Conv1D", "MatMul"), ("Linear", "MatMul"),  # Hugging Face's GPT-2 Conv1D is a Linear
    ("DynamicQuantizeLinear", "QuantizeLinear"),  # a quantization, not a "Linear"
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
    assert p.counts() == {"exact": 0, "name": 2, "output": 0, "covers": 0, "scope": 1, "order": 0}


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


# -- across runtimes: ONNX nodes of PyTorch's legacy exporter against the torch backend's modules ------
# Names from layerperf profiles of the Hugging Face ResNet-50 and BERT-base (ONNX Runtime 1.32, torch 2.13).
STAGE = "/model/encoder/stages.1/layers.0"


@pytest.mark.parametrize(("name", "expected"), [
    (f"{STAGE}/layer/layer.2/convolution/Conv_output_0_nchwc", ("model.encoder.stages.1.layers.0.layer.2.convolution",
                                                                True)),
    (f"{STAGE}/shortcut/convolution/Conv_output_0_nchwc", ("model.encoder.stages.1.layers.0.shortcut.convolution",
                                                           True)),
    ("/layer1/layer1.0/conv1/Conv", ("layer1.0.conv1", True)),  # torchvision: layer1.0 is child 0 of layer1
    ("/model/encoder/layer.0/attention/self/query/MatMul", ("model.encoder.layer.0.attention.self.query", True)),
    ("/model/encoder/layer.0/attention/self/value/MatMul/MatMulAddFusion",
     ("model.encoder.layer.0.attention.self.value", True)),
    ("/model/encoder/layer.0/attention/self/MatMul/MatmulTransposeFusion//MatMulScaleFusion/",
     ("model.encoder.layer.0.attention.self", True)),
    ("encoder.layer.0.attention.self.query", ("encoder.layer.0.attention.self.query", False)),
    ("features.4/aten::conv2d", ("features.4", False)),
    ("/Add", None), ("BiasGelu_token_33", ("BiasGelu_token_33", False)),
])
def test_module_path(name: str, expected: tuple[str, bool] | None) -> None:
    assert module_path(name) == expected


@pytest.mark.parametrize(("a", "b", "agree"), [
    (("1x64x56x56;256x64x1x1;256", "1x256x56x56"), ("1x64x56x56", "1x256x56x56"), True),
    (("1x56x56x64", "1x56x56x256"), ("1x64x56x56", "1x256x56x56"), True),  # NHWC against NCHW
    (("1x16x8x8;16x3x3x3", "1x16x8x8"), ("1x8x8x8", "1x16x8x8"), True),  # NCHWc pads 8 channels to 16
    (("8x32;32x32;32", "8x32"), ("1x8x32", "1x8x32"), True),  # a Linear's input flattened for a Gemm
    (("", ""), ("1x8x32", "1x8x32"), True),  # unknown: no objection
    # Hugging Face's MobileNetV2 pads before its conv in PyTorch; the export folded the Pad into the Conv
    (("1x3x224x224;32x3x3x3;32", "1x32x112x112"), ("1x3x225x225", "1x32x112x112"), True),
    # a stage's shortcut conv against the conv before it: same output, inputs of other shapes
    (("1x256x56x56;512x256x1x1;512", "1x512x28x28"), ("1x128x28x28", "1x512x28x28"), False),
    (("1x64x56x56", "1x64x56x56"), ("1x64x56x56", "1x256x56x56"), False),
])
def test_shapes_agree(a: tuple[str, str], b: tuple[str, str], agree: bool) -> None:
    assert shapes_agree(Node("a", "Conv", (), *a), Node("b", "Conv2d", (), *b)) is agree


def test_scope_pairs_onnx_nodes_with_the_torch_module_of_their_path() -> None:
    layer = "/model/encoder/layer.0/attention/self"
    a = [Node(f"{layer}/query/MatMul", "MatMul", (), "1x128x768;768x768", "1x128x768", 75e6),
         Node(f"{layer}/query/Add", "Add", (), "768;1x128x768", "1x128x768", 98e3),
         Node(f"{layer}/MatMul/MatMulScaleFusion/", "FusedMatMul", (), "1x12x128x64;1x12x64x128", "1x12x128x128"),
         Node("/model/embeddings/word_embeddings/Gather", "Gather", (), "30522x768;1x128", "1x128x768")]
    b = [Node("embeddings.word_embeddings", "Embedding", (), "1x128", "1x128x768"),
         Node("encoder.layer.0.attention.self", "BertSelfAttention", (), "1x128x768", "1x128x768"),
         Node("encoder.layer.0.attention.self.query", "Linear", (), "1x128x768", "1x128x768"),
         Node("encoder.layer.0.attention.self.key", "Linear", (), "1x128x768", "1x128x768")]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {(a[0].name, b[2].name, "scope"), (a[3].name, b[0].name, "scope")}
    assert p.inside_a == (1,)  # the bias Add ran inside the paired Linear; the attention matmul in no paired module
    # the other way round alike
    q = pair_nodes(b, a)
    assert _names(q.pairs, b, a) == {(b[2].name, a[0].name, "scope"), (b[0].name, a[3].name, "scope")}
    assert q.inside_b == (1,) and q.inside_a == ()


def test_scope_pairs_a_conv_named_after_its_fused_relu_with_the_conv_beside_it() -> None:
    block = "/model/encoder/stages.0/layers.0/layer"
    a = [Node(f"{block}/layer.0/activation/Relu_output_0_nchwc", "Conv", (), "1x64x56x56;64x64x1x1;64", "1x64x56x56"),
         Node(f"{block}/layer.1/activation/Relu_output_0_nchwc", "Conv", (), "1x64x56x56;64x64x3x3;64", "1x64x56x56")]
    mods = "encoder.stages.0.layers.0.layer"
    b = [Node(f"{mods}.{i}.{part}", kind, (), "1x64x56x56", "1x64x56x56") for i in (0, 1)
         for part, kind in (("convolution", "Conv2d"), ("normalization", "BatchNorm2d"), ("activation", "ReLU"))]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {(a[0].name, b[0].name, "scope"), (a[1].name, b[3].name, "scope")}


def test_order_never_pairs_shapes_that_disagree() -> None:
    # ONNX Runtime runs a stage's shortcut conv before the block's last conv, PyTorch after: in order,
    # they would pair crosswise; each takes the first one left whose shapes agree
    a = [Node("out_a_nchwc", "Conv", (), "1x256x56x56;512x256x1x1", "1x512x28x28"),
         Node("out_b_nchwc", "Conv", (), "1x128x28x28;512x128x1x1", "1x512x28x28")]
    b = [Node("last", "Conv2d", (), "1x128x28x28", "1x512x28x28"), Node("short", "Conv2d", (), "1x256x56x56",
                                                                          "1x512x28x28")]
    p = pair_nodes(a, b)
    assert _names(p.pairs, a, b) == {(a[0].name, "short", "order"), (a[1].name, "last", "order")}
    assert not p.only_a and not p.only_b
    one = pair_nodes(a[:1], b[:1])  # the one left disagrees: unpaired
    assert one.pairs == () and one.only_a == (0,)
    b_same = [b[1], b[0]]
    assert _names(pair_nodes(a, b_same).pairs, a, b_same) == {(a[0].name, "short", "order"),
                                                              (a[1].name, "last", "order")}


def test_no_scope_pairs_without_a_common_module_path() -> None:
    # a foreign PyTorch trace names ops, not modules; another model shares no module path with A
    a = [Node("/relu/Relu_output_0_nchwc", "Conv", (), "1x3x32x32", "1x16x32x32")]
    for b in ([Node("aten::conv2d", "aten::conv2d")],
              [Node("backbone.stem.conv", "Conv2d", (), "1x3x32x32", "1x16x32x32")]):
        assert pair_nodes(a, b).counts()["scope"] == 0
    assert module_path("aten::conv2d") is None
