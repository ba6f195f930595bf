"""Elementwise ops, activations, reductions, softmax and normalizations (ai.onnx domain)."""

from __future__ import annotations

import math

from layerperf.cost.onnx.node import FlopsFn, Node, OpKey
from layerperf.cost.shapes import ShapeUnknown, broadcast


def out_numel(node: Node, i: int = 0) -> int:
    """Elements of output ``i``; without its shape, the broadcast of the inputs stands in."""
    def from_inputs() -> tuple[int, ...]:
        shapes = [node.shape(j) for j in range(len(node.inputs)) if node.has(j)]
        if not shapes:
            raise ShapeUnknown("no input shapes")
        return broadcast(*shapes)

    return math.prod(node.out_shape_or(from_inputs, i))


def like_x_numel(node: Node) -> int:
    """Elements of output 0 for ops whose output has input 0's shape (activations, norms)."""
    return math.prod(node.out_shape_or(lambda: node.shape(0)))


def per_output(flops_per_element: int) -> FlopsFn:
    """A fixed number of FLOPs per element of output 0, whose shape broadcasts the inputs."""
    def fn(node: Node) -> int:
        return flops_per_element * out_numel(node)

    return fn


def per_x(flops_per_element: int) -> FlopsFn:
    """A fixed number of FLOPs per element of output 0, which is shaped like input 0.

    Its other inputs (scale, bias, min/max, zero points) need not broadcast against it.
    """
    def fn(node: Node) -> int:
        return flops_per_element * like_x_numel(node)

    return fn


def per_input(flops_per_element: int) -> FlopsFn:
    """A fixed number of FLOPs for every element of input 0 (reductions, global pools)."""
    def fn(node: Node) -> int:
        return flops_per_element * node.numel(0)

    return fn


def _variadic(node: Node) -> int:
    # Sum/Max/Min of k inputs: k-1 binary ops per output element.
    k = sum(1 for i in range(len(node.inputs)) if node.has(i))
    return max(k - 1, 1) * out_numel(node)


def _mean(node: Node) -> int:
    # Mean of k inputs: k-1 adds and 1 divide per output element.
    k = sum(1 for i in range(len(node.inputs)) if node.has(i))
    return max(k, 1) * out_numel(node)


def _gelu(node: Node) -> int:
    # Gelu costs what the graph it replaces costs: erf form x*0.5*(1+erf(x/sqrt2)) is
    # Div, Erf, Add, Mul, Mul = 5; the tanh form (Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul) = 8.
    per = 8 if node.attr_str("approximate", "none") == "tanh" else 5
    return per * like_x_numel(node)


# Every ai.onnx primitive counts one FLOP per output element, transcendental ones included:
# hardware cost differs, but a uniform count keeps fused and unfused graphs comparable.
UNARY = (  # shaped like input 0
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Ceil", "Celu", "Cos",
    "Cosh", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "IsInf", "IsNaN", "LeakyRelu", "Log", "Neg",
    "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Clip",
)
BINARY = (  # multidirectional broadcast of the inputs
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
    "GreaterOrEqual", "Less", "LessOrEqual", "Mod", "Mul", "Or", "Pow", "PRelu", "Sub", "Xor", "Where",
)
REDUCTIONS = (
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceProd", "ReduceSum", "ReduceSumSquare", "ArgMax", "ArgMin",
)

# FLOPs per element of the normalized/activated tensor. LayerNormalization's 8: mean (sum),
# subtract, square, variance (sum), normalize, scale, shift = 7, plus 1 for the per-row
# epsilon/rsqrt/broadcast work, rounded up (the unfused ONNX decomposition counts 7).
LAYER_NORM = 8
RMS_NORM = 4  # square, sum, normalize, scale (no mean, no shift)
SOFTMAX = 5  # max, subtract, exp, sum, divide
BATCH_NORM = 2  # inference: folded into one scale and one shift per element

TABLE: dict[OpKey, FlopsFn] = {
    **{("", op): per_x(1) for op in UNARY},
    **{("", op): per_output(1) for op in BINARY},
    **{("", op): per_input(1) for op in REDUCTIONS},
    ("", "Sum"): _variadic,
    ("", "Max"): _variadic,
    ("", "Min"): _variadic,
    ("", "Mean"): _mean,
    ("", "Gelu"): _gelu,
    ("", "HardSwish"): per_x(2),  # HardSigmoid then Mul
    ("", "Mish"): per_x(3),  # Softplus, Tanh, Mul
    ("", "Swish"): per_x(2),  # Sigmoid then Mul
    ("", "CumSum"): per_x(1),
    ("", "TopK"): per_input(1),  # one comparison per scanned element (selection, not a full sort)
    ("", "NonZero"): per_input(1),  # one comparison with zero per element
    ("", "Softmax"): per_x(SOFTMAX),
    ("", "LogSoftmax"): per_x(SOFTMAX),  # max, subtract, exp, sum, log-subtract
    ("", "Hardmax"): per_x(1),  # an argmax scan
    ("", "BatchNormalization"): per_x(BATCH_NORM),
    ("", "LayerNormalization"): per_x(LAYER_NORM),
    ("", "InstanceNormalization"): per_x(LAYER_NORM),
    ("", "GroupNormalization"): per_x(LAYER_NORM),
    ("", "MeanVarianceNormalization"): per_x(LAYER_NORM - 2),  # LayerNorm without scale/shift
    ("", "RMSNormalization"): per_x(RMS_NORM),
    ("", "SimplifiedLayerNormalization"): per_x(RMS_NORM),  # ORT's RMSNorm, kept in domain ""
    ("", "LpNormalization"): per_x(3),  # |x|^p, sum, divide
}
