"""Output shapes of ONNX Runtime's contrib ops, which onnx's own shape inference does not know.

An optimized graph saved by ONNX Runtime has no value_info past its first fused node, so
without these every later tensor, standard ops included, would lose its shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from layerperf.cost.onnx.fused import MS, NCHWC, NHWC, fused_matmul_dims
from layerperf.cost.onnx.nn import conv_out_shape, conv_transpose_out_shape, gemm_mnk, pool_out_shape
from layerperf.cost.onnx.node import Node
from layerperf.cost.shapes import Shape, ShapeUnknown, broadcast, matmul_dims
from layerperf.data.tensor import TensorInfo

ShapeFn = Callable[[Node], list[Shape | None]]
"""Output shapes of one node (None for an output it cannot tell); may raise ShapeUnknown."""


def _like_x(node: Node) -> list[Shape | None]:
    return [node.shape(0)]


def _conv(node: Node, channels_last: bool = False) -> list[Shape | None]:
    return [conv_out_shape(node, channels_last)]


def _pool(node: Node, channels_last: bool = False) -> list[Shape | None]:
    return [pool_out_shape(node, channels_last)]


def _global_pool(node: Node, channels_last: bool = False) -> list[Shape | None]:
    x = node.shape(0)
    ones = (1,) * (len(x) - 2)
    return [(x[0], *ones, x[-1]) if channels_last else (x[0], x[1], *ones)]


def _fused_matmul(node: Node) -> list[Shape | None]:
    return [fused_matmul_dims(node)[1]]


def _matmul(node: Node) -> list[Shape | None]:
    return [matmul_dims(node.shape(0), node.shape(1)).out_shape]


def _gemm(node: Node) -> list[Shape | None]:
    m, _, n = gemm_mnk(node)
    return [(m, n)]


def _nbits(node: Node) -> list[Shape | None]:
    return [(*node.shape(0)[:-1], node.attr_int("N", 0))]


def _attention(node: Node) -> list[Shape | None]:
    batch, seq, _ = node.shape(0)
    sizes = node.attr_ints("qkv_hidden_sizes") or [node.shape(1)[1] // 3] * 3
    return [(batch, seq, sizes[2])]


def _mha(node: Node) -> list[Shape | None]:
    q = node.shape(0)
    if len(q) == 5:
        return [(q[0], q[1], q[2] * q[4])]
    k = node.shape(1)
    if len(k) == 5:
        return [(q[0], q[1], k[2] * k[4])]
    v = node.shape(2)
    return [(q[0], q[1], v[1] * v[3] if len(v) == 4 else v[2])]


def _gqa(node: Node) -> list[Shape | None]:
    batch, seq, d = node.shape(0)
    heads, kv_heads = node.attr_int("num_heads", 0), node.attr_int("kv_num_heads", 0)
    if node.has(1):
        return [(batch, seq, d)]
    return [(batch, seq, d // (heads + 2 * kv_heads) * heads)]


def _embed(node: Node) -> list[Shape | None]:
    batch, seq = node.shape(0)
    hidden = node.shape(2)[1]
    return [(batch, seq, hidden), (batch,), (batch, seq, hidden)]


def _qlinear_binary(node: Node) -> list[Shape | None]:
    # A, A_scale, A_zero_point, B, ...: the output broadcasts A and B
    return [broadcast(node.shape(0), node.shape(3))]


def _half_last(node: Node) -> list[Shape | None]:
    x = node.shape(0)
    return [(*x[:-1], x[-1] // 2)]


def _swiglu(node: Node) -> list[Shape | None]:
    return _like_x(node) if node.has(1) else _half_last(node)


def _skip_norm(node: Node) -> list[Shape | None]:
    # output, mean, inv_std_var (training only, shapes not worth guessing), input_skip_bias_sum
    x = node.shape(0)
    return [x, None, None, x]


def _reorder_input(node: Node) -> list[Shape | None]:
    # Logical channel count: ORT inserts ReorderInput only where channels fill whole NCHWc blocks.
    x = node.shape(0)
    if node.attr_int("channels_last", 0):
        return [(x[0], x[-1], *x[1:-1])]
    return [x]


def _reorder_output(node: Node) -> list[Shape | None]:
    x = node.shape(0)
    channels = node.attr_int("channels", x[1])
    if node.attr_int("channels_last", 0):
        return [(x[0], *x[2:], channels)]
    return [(x[0], channels, *x[2:])]


def _upsample(node: Node) -> list[Shape | None]:
    x = node.shape(0)
    scales = node.attr_ints("scales") or []
    return [(*x[:2], *(d * s for d, s in zip(x[2:], scales, strict=True)))]


SHAPES: dict[tuple[str, str], ShapeFn] = {
    (MS, "FusedConv"): _conv,
    (MS, "NhwcConv"): partial(_conv, channels_last=True),
    (MS, "NhwcFusedConv"): partial(_conv, channels_last=True),
    (MS, "NhwcMaxPool"): partial(_pool, channels_last=True),
    (MS, "ConvTransposeWithDynamicPads"): lambda n: [conv_transpose_out_shape(n)],
    (MS, "FusedGemm"): _gemm,
    (MS, "QGemm"): lambda n: _gemm(n.with_inputs([0, 3, 6])),
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "TransposeMatMul"): _fused_matmul,
    (MS, "FusedMatMulActivation"): _fused_matmul,
    (MS, "DynamicQuantizeMatMul"): _matmul,
    (MS, "MatMulIntegerToFloat"): _matmul,
    (MS, "MatMulInteger16"): _matmul,
    (MS, "GemmFastGelu"): _matmul,
    (MS, "MatMulNBits"): _nbits,
    (MS, "MatMulBnb4"): _nbits,
    (MS, "Attention"): _attention,
    (MS, "QAttention"): _attention,
    (MS, "MultiHeadAttention"): _mha,
    (MS, "GroupQueryAttention"): _gqa,
    (MS, "EmbedLayerNormalization"): _embed,
    (MS, "BiasSplitGelu"): _half_last,
    (MS, "SwiGLU"): _swiglu,
    (MS, "SkipLayerNormalization"): _skip_norm,
    (MS, "SkipSimplifiedLayerNormalization"): _skip_norm,
    (MS, "QLinearAdd"): _qlinear_binary,
    (MS, "QLinearMul"): _qlinear_binary,
    (MS, "QLinearConv"): lambda n: _conv(n.with_inputs([0, 3, 8]), bool(n.attr_int("channels_last", 0))),
    (MS, "QLinearAveragePool"): lambda n: _pool(n, bool(n.attr_int("channels_last", 0))),
    (MS, "QLinearGlobalAveragePool"): lambda n: _global_pool(n, bool(n.attr_int("channels_last", 0))),
    (NCHWC, "Conv"): _conv,
    (NCHWC, "MaxPool"): _pool,
    (NCHWC, "AveragePool"): _pool,
    (NCHWC, "GlobalAveragePool"): _global_pool,
    (NCHWC, "GlobalMaxPool"): _global_pool,
    (NCHWC, "ReorderInput"): _reorder_input,
    (NCHWC, "ReorderOutput"): _reorder_output,
    (NCHWC, "Upsample"): _upsample,
    (NHWC, "Conv"): partial(_conv, channels_last=True),
    (NHWC, "QLinearConv"): lambda n: _conv(n.with_inputs([0, 3, 8]), channels_last=True),
    (NHWC, "ConvTranspose"): lambda n: [conv_transpose_out_shape(n, channels_last=True)],
    (NHWC, "MaxPool"): partial(_pool, channels_last=True),
    (NHWC, "AveragePool"): partial(_pool, channels_last=True),
    (NHWC, "QLinearAveragePool"): partial(_pool, channels_last=True),
    (NHWC, "GlobalAveragePool"): partial(_global_pool, channels_last=True),
    (NHWC, "GlobalMaxPool"): partial(_global_pool, channels_last=True),
}

# Ops whose first output is shaped like their first input.
_LIKE_X = [
    (MS, op) for op in (
        "Gelu", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd", "BiasSoftmax", "BiasDropout", "ScaledSiLU",
        "SimplifiedLayerNormalization", "GroupNorm", "SkipGroupNorm", "RotaryEmbedding", "QLinearSigmoid",
        "QLinearLeakyRelu", "QLinearSoftmax", "QuantizeLinear", "DequantizeLinear",
    )
] + [(NHWC, op) for op in ("BatchNormalization", "InstanceNormalization", "LRN")]
SHAPES.update({key: _like_x for key in _LIKE_X})


def _out_dtype(node: Node, i: int) -> str:
    """Element type of output ``i``: input 0's, except where the op defines another."""
    def dtype_of(j: int, default: str) -> str:
        t = node.inputs[j] if j < len(node.inputs) else None
        return t.dtype if t is not None else default

    if node.op_type == "EmbedLayerNormalization":
        return "int32" if i == 1 else dtype_of(2, "float32")
    if node.op_type == "QuantizeLinear":
        return dtype_of(2, "uint8")  # the zero point's type
    if node.op_type == "DequantizeLinear":
        return dtype_of(1, "float32")  # the scale's type
    if node.op_type == "MatMulInteger16":
        return "int32"
    if node.op_type == "MatMulIntegerToFloat":
        return dtype_of(2, "float32")  # integer inputs, output in the type of A's scale
    return dtype_of(0, "float32")


def infer_contrib(node: Node, names: list[str]) -> list[TensorInfo | None]:
    """TensorInfos for a contrib node's outputs named ``names``; None where not inferable."""
    fn = SHAPES.get((node.domain, node.op_type))
    if fn is None:
        return [None] * len(names)
    try:
        shapes = fn(node)
    except (ShapeUnknown, ValueError, IndexError, ZeroDivisionError):
        # malformed or partly unknown inputs: leave the outputs unknown rather than guess
        return [None] * len(names)
    out: list[TensorInfo | None] = []
    for i, name in enumerate(names):
        shape = shapes[i] if i < len(shapes) else None
        if not name or shape is None or any(d < 0 for d in shape) or math.prod(shape) < 0:
            out.append(None)
        else:
            out.append(TensorInfo(name, tuple(shape), _out_dtype(node, i)))
    return out
