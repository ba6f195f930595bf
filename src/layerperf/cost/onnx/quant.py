"""Quantized ops: their integer work (``int_ops``) apart from their floating-point work (``flops``).

A quantized kernel multiplies and adds integers; only the conversions between integers and floats
are float work. The split, per op:

* Integer work: what the float counterpart would count, on the integer operands — 2 per
  multiply-add of a Conv/MatMul/Gemm (plus 1 per output element for an int32 bias), 1 per output
  element of an elementwise op, a pool's window per output element. Zero-point corrections are
  not counted, as the float ops count no layout or index arithmetic.
* Float work: quantizing (QuantizeLinear 2 per element: scale and zero-point shift; rounding is
  free), dequantizing (DequantizeLinear 2 per element), finding a dynamic scale
  (DynamicQuantizeLinear 4 per element: min and max scans, then quantize), requantizing an integer
  result to the output's scale and zero point (2 per output element, :data:`REQUANT`), or scaling
  it to float (1 per output element, :data:`TO_FLOAT`) and adding a float bias (1).

So a QLinearConv is 2*MACs (+ bias) integer operations and 2 FLOPs per output element; a
DynamicQuantizeMatMul is 4 FLOPs per element of A (its dynamic quantization), 2*MACs integer
operations, then 1 FLOP per output element for the scale and 1 for the bias. A graph ONNX Runtime
fuses (DynamicQuantizeLinear + MatMulInteger + Cast + Mul + Add into DynamicQuantizeMatMul) counts
what the unfused graph counts.

QLinearConcat copies (0 and 0); rescaling an input whose scale differs from the output's is not
counted. MatMulNBits (weight-only quantization) stays float work: its activations are float.
"""

from __future__ import annotations

import math

from layerperf.cost.onnx.elementwise import SOFTMAX, like_x_numel, out_numel
from layerperf.cost.onnx.fused import MS, NHWC, attention_parts
from layerperf.cost.onnx.nn import conv, conv_macs, gemm_mnk, pool
from layerperf.cost.onnx.node import FlopsFn, Node, OpKey
from layerperf.cost.shapes import ShapeUnknown, matmul_dims

REQUANT = 2  # integer result -> output scale and zero point: a multiply and a shift
TO_FLOAT = 1  # integer result -> float: one multiply by the combined scale
QUANTIZE = 2  # float -> integer: scale and zero-point shift
DEQUANTIZE = 2  # integer -> float: zero-point shift and scale
DYNAMIC_QUANTIZE = 4  # min and max scans, then quantize

SplitFn = tuple[FlopsFn, FlopsFn]
"""(FLOPs, integer operations) of one node; each raises ShapeUnknown when it cannot tell."""


def none(node: Node) -> int:
    return 0


# -- convolutions and matrix products ------------------------------------------------------------


def _qlinear_conv(channels_last: bool) -> SplitFn:
    # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B (int32)
    def view(node: Node) -> Node:
        return node.with_inputs([0, 3, 8])

    return (lambda node: REQUANT * conv_macs(view(node), channels_last)[1],
            lambda node: conv(view(node), channels_last))


def _matmul_macs(node: Node, a: int = 0, b: int = 1) -> tuple[int, int]:
    """(MACs, output elements) of the integer product of inputs ``a`` and ``b``."""
    dims = matmul_dims(node.shape(a), node.shape(b))
    return dims.macs, math.prod(dims.out_shape)


def _int_matmul(a: int, b: int) -> FlopsFn:
    return lambda node: 2 * _matmul_macs(node, a, b)[0]


def _to_float(bias_input: int) -> FlopsFn:
    """Scale the int32 product to float (1 per output element), add the float bias (1)."""
    return lambda node: _matmul_macs(node)[1] * (TO_FLOAT + (1 if node.has(bias_input) else 0))


def _dynamic_quantize_matmul(node: Node) -> int:
    # A (float), B, b_scale, b_zero_point, bias: A is quantized on the fly, then the product scaled
    return DYNAMIC_QUANTIZE * node.numel(0) + _to_float(4)(node)


def _qgemm_int(node: Node) -> int:
    # A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp
    m, k, n = gemm_mnk(node.with_inputs([0, 3]))
    return 2 * m * k * n + (m * n if node.has(6) else 0)


def _qgemm_float(node: Node) -> int:
    m, _, n = gemm_mnk(node.with_inputs([0, 3]))
    return m * n * (REQUANT if node.has(7) else TO_FLOAT)


def _qattention_int(node: Node) -> int:
    # input, weight, bias, input_scale, weight_scale, mask_index, input_zp, weight_zp, past
    return attention_parts(node.with_inputs([0, 1, 2, 5, 8]))[0]


def _qattention_float(node: Node) -> int:
    """The projection scaled to float and its bias added (1 + 1 per element); the core is float."""
    view = node.with_inputs([0, 1, 2, 5, 8])
    _, projected, core = attention_parts(view)
    return projected * (TO_FLOAT + (1 if view.has(2) else 0)) + core


# -- elementwise, pooling ------------------------------------------------------------------------


def _requant_out(numel: FlopsFn) -> FlopsFn:
    return lambda node: REQUANT * numel(node)


def _qlinear_elementwise(per_element: int, numel: FlopsFn) -> SplitFn:
    """The counterpart's count per output element as integer work, requantization as float."""
    return _requant_out(numel), lambda node: per_element * numel(node)


def _binary_numel(node: Node) -> int:
    # A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp: the output broadcasts A and B
    return out_numel(node.with_inputs([0, 3]))


def _where_numel(node: Node) -> int:
    # condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp
    return out_numel(node.with_inputs([0, 1, 4]))


def _pool_out(node: Node, channels_last: bool) -> int:
    kernel = node.attr_ints("kernel_shape")
    if not kernel:
        raise ShapeUnknown("pool without kernel_shape")
    return pool(node, channels_last) // math.prod(kernel)


def _qlinear_pool(channels_last: bool | None) -> SplitFn:
    def last(node: Node) -> bool:
        return bool(node.attr_int("channels_last", 0)) if channels_last is None else channels_last

    return (lambda node: REQUANT * _pool_out(node, last(node)), lambda node: pool(node, last(node)))


def _global_out(node: Node) -> int:
    """Elements of a global pool's output: N*C whatever the layout."""
    def reduced() -> tuple[int, ...]:
        x = node.shape(0)
        return (x[0], x[-1] if node.attr_int("channels_last", 0) else x[1])

    return math.prod(node.out_shape_or(reduced))


SPLIT: dict[OpKey, SplitFn] = {
    ("", "QuantizeLinear"): (lambda node: QUANTIZE * like_x_numel(node), none),
    ("", "DequantizeLinear"): (lambda node: DEQUANTIZE * like_x_numel(node), none),
    ("", "DynamicQuantizeLinear"): (lambda node: DYNAMIC_QUANTIZE * node.numel(0), none),
    ("", "QLinearConv"): _qlinear_conv(False),
    ("", "ConvInteger"): (none, lambda node: conv(node.with_inputs([0, 1]))),
    ("", "MatMulInteger"): (none, _int_matmul(0, 1)),
    ("", "QLinearMatMul"): (lambda node: REQUANT * _matmul_macs(node, 0, 3)[1], _int_matmul(0, 3)),
    (MS, "QuantizeLinear"): (lambda node: QUANTIZE * like_x_numel(node), none),
    (MS, "DequantizeLinear"): (lambda node: DEQUANTIZE * like_x_numel(node), none),
    (MS, "QLinearConv"): _qlinear_conv(False),
    (MS, "DynamicQuantizeMatMul"): (_dynamic_quantize_matmul, _int_matmul(0, 1)),
    (MS, "MatMulIntegerToFloat"): (_to_float(6), _int_matmul(0, 1)),
    (MS, "MatMulInteger16"): (none, _int_matmul(0, 1)),
    (MS, "QGemm"): (_qgemm_float, _qgemm_int),
    (MS, "QAttention"): (_qattention_float, _qattention_int),
    (MS, "QLinearAdd"): _qlinear_elementwise(1, _binary_numel),
    (MS, "QLinearMul"): _qlinear_elementwise(1, _binary_numel),
    (MS, "QLinearSigmoid"): _qlinear_elementwise(1, like_x_numel),
    (MS, "QLinearLeakyRelu"): _qlinear_elementwise(1, like_x_numel),
    (MS, "QLinearSoftmax"): _qlinear_elementwise(SOFTMAX, like_x_numel),
    (MS, "QLinearWhere"): _qlinear_elementwise(1, _where_numel),
    (MS, "QLinearConcat"): (none, none),
    (MS, "QLinearAveragePool"): _qlinear_pool(None),
    (MS, "QLinearGlobalAveragePool"): (lambda node: REQUANT * _global_out(node), lambda node: node.numel(0)),
    (MS, "QLinearReduceMean"): (lambda node: REQUANT * math.prod(node.out_shape()), lambda node: node.numel(0)),
    (NHWC, "QLinearConv"): _qlinear_conv(True),
    (NHWC, "QLinearAveragePool"): _qlinear_pool(True),
}

__all__ = ["DEQUANTIZE", "DYNAMIC_QUANTIZE", "QUANTIZE", "REQUANT", "SPLIT", "TO_FLOAT", "SplitFn"]
