"""Forward aten ops counted as the ONNX op each stands for (``relu`` as ``Relu``, ``_softmax`` as
``Softmax``, ``native_layer_norm`` as ``LayerNormalization``, ``addmm`` as ``Gemm``, ``convolution`` as
``Conv``...): :func:`onnx` calls the ONNX namespace on the call's tensors, so a torch module and the
ONNX node it exports to count alike by construction.

Each function takes an :class:`~.call.AtenCall` and returns its FLOPs, raising ShapeUnknown where it
cannot tell. The ``*_result`` functions infer the results of the ops whose results follow from their
arguments alone, for a call whose results were not recorded (a profiler trace keeps only the inputs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from layerperf.cost.aten.call import AtenCall, static_shape
from layerperf.cost.onnx import node_cost
from layerperf.cost.onnx.elementwise import LAYER_NORM
from layerperf.cost.shapes import ShapeUnknown, Window, window_out
from layerperf.data.tensor import TensorInfo

# aten op -> the ONNX op (domain ai.onnx) it does, costed on the op's tensors (inputs in argument order,
# outputs in result order). An in-place form (``relu_``, ``add_``) is its op's.
UNARY = {
    "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "neg": "Neg", "abs": "Abs", "sin": "Sin", "cos": "Cos", "erf": "Erf", "reciprocal": "Reciprocal",
    "floor": "Floor", "ceil": "Ceil", "round": "Round", "sign": "Sign", "hardtanh": "Clip", "clamp": "Clip",
    "clamp_min": "Clip", "clamp_max": "Clip", "leaky_relu": "LeakyRelu", "elu": "Elu", "softplus": "Softplus",
    "hardsigmoid": "HardSigmoid", "threshold": "Relu", "silu": "Swish", "hardswish": "HardSwish",
    "mish": "Mish", "cumsum": "CumSum", "_softmax": "Softmax", "_safe_softmax": "Softmax", "_log_softmax": "LogSoftmax",
    "native_layer_norm": "LayerNormalization", "native_group_norm": "GroupNormalization",
    "_native_batch_norm_legit_no_training": "BatchNormalization",
}
BINARY = {
    "add": "Add", "sub": "Sub", "rsub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
    "minimum": "Min", "eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
    "ge": "GreaterOrEqual", "where": "Where", "fmod": "Mod", "remainder": "Mod",
}
ALPHA_OPS = frozenset(("add", "sub", "rsub"))
REDUCTIONS = {
    "sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin", "prod": "ReduceProd",
    "argmax": "ArgMax", "argmin": "ArgMin", "logsumexp": "ReduceLogSumExp", "linalg_vector_norm": "ReduceL2",
}
# several ONNX ops: rsqrt is Sqrt then Reciprocal; addcmul/addcdiv (value 1) a Mul or Div then an Add
# lerp(a, b, w) = a + w * (b - a): a Sub, a Mul and an Add (Adam's first moment)
COMPOSED = {"rsqrt": ("Sqrt", "Reciprocal"), "addcmul": ("Mul", "Add"), "addcdiv": ("Div", "Add"),
            "lerp": ("Sub", "Mul", "Add")}
POOLS = {"max_pool1d": "MaxPool", "max_pool2d": "MaxPool", "max_pool3d": "MaxPool",
         "max_pool2d_with_indices": "MaxPool", "max_pool3d_with_indices": "MaxPool",
         "avg_pool1d": "AveragePool", "avg_pool2d": "AveragePool", "avg_pool3d": "AveragePool"}
# batch norm with batch statistics (training): mean, subtract, square, variance, normalize, scale, shift
# per element, as the cost model's normalizations that compute statistics (LAYER_NORM); the running
# statistics' update is per channel and not counted
# (on a GPU batch norm dispatches to cudnn_batch_norm / miopen_batch_norm, native_batch_norm's arguments)
BATCH_NORM_TRAINING = frozenset(("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
                                 "cudnn_batch_norm", "miopen_batch_norm"))
CONVS = frozenset(("conv1d", "conv2d", "conv3d"))
MATMULS = frozenset(("mm", "bmm"))


def onnx(op_type: str, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo],
         attrs: dict[str, object] | None = None) -> int:
    """The ONNX namespace's FLOPs of ``op_type`` on these tensors; raises ShapeUnknown where it cannot tell."""
    flops = node_cost(op_type, "", attrs or {}, inputs, outputs).flops
    if flops is None:
        raise ShapeUnknown(f"{op_type} not costed")
    return flops


def _first(tensors: list[TensorInfo]) -> list[TensorInfo]:
    return tensors[:1]


def unary(call: AtenCall) -> int:
    return onnx(UNARY[call.base], _first(call.tensors()), _first(call.results()))


def binary(call: AtenCall) -> int:
    # add/sub/rsub(x, y, alpha): alpha != 1 scales y first; no other binary op has a third argument
    # of that meaning (where's third is a tensor)
    alpha = call.arg(2, "alpha", 1) if call.base in ALPHA_OPS else 1
    ins, outs = call.tensors(), _first(call.results())
    scaled = isinstance(alpha, int | float) and alpha != 1
    return onnx(BINARY[call.base], ins, outs) + (onnx("Mul", ins, outs) if scaled else 0)


def max_min(call: AtenCall) -> int:
    """``max.other`` is elementwise; ``max()`` and ``max.dim`` reduce."""
    op = ("Max" if call.base == "max" else "Min") if call.overload == "other" else f"Reduce{call.base.title()}"
    return onnx(op, call.tensors(), _first(call.results()))


def reduction(call: AtenCall) -> int:
    return onnx(REDUCTIONS[call.base], _first(call.tensors()), _first(call.results()))


def composed(call: AtenCall) -> int:
    ins, outs = call.tensors(), _first(call.results())
    return sum(onnx(op, ins, outs) for op in COMPOSED[call.base])


def gelu(call: AtenCall) -> int:
    approximate = str(call.arg(1, "approximate", "none"))
    return onnx("Gelu", [call.tensor(0)], [call.result(0)], {"approximate": approximate})


def batch_norm(call: AtenCall) -> int:
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, ...);
    # _native_batch_norm_legit(input, weight, bias, [running_mean, running_var,] training, ...)
    training = True
    if call.op in ("native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm"):
        training = bool(call.arg(5, "training", True))
    elif call.op == "_native_batch_norm_legit":
        training = bool(call.args[5] if call.overload == "default" else call.args[3])
    x, y = call.tensor(0), call.results()[0]
    if not training:
        return onnx("BatchNormalization", [x], [y])
    return LAYER_NORM * _numel(y)


def _attention_dims(call: AtenCall, first: int) -> tuple[int, int, int, int, int]:
    """(batch x heads, L, S, E, Ev) of an attention's query (..., L, E), key (..., S, E), value (..., S, Ev),
    arguments ``first`` to ``first + 2``."""
    q, k, v = (call.shape(i) for i in range(first, first + 3))
    length, e = q[-2], q[-1]
    return math.prod(q) // max(length * e, 1), length, k[-2], e, v[-1]


def cpu_attention(call: AtenCall) -> int:
    # _scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale): what
    # scaled_dot_product_attention's math path counts: q and k scaled (1 an element each), Q K^T
    # (2 BH L S E), the mask or causal bias added (BH L S), softmax (5 BH L S), P V (2 BH L S Ev)
    bh, length, s, e, ev = _attention_dims(call, 0)
    masked = call.arg(99, "attn_mask", None) is not None or bool(call.arg(4, "is_causal", False))
    return call.numel(0) + call.numel(1) + 2 * bh * length * s * (e + ev) + (6 if masked else 5) * bh * length * s


def nll_loss(call: AtenCall) -> int:
    # nll_loss_forward(self, target, ...) picks, negates and sums one log-probability per target;
    # nll_loss_backward(grad_output, self, target, ...) writes one value per target (the rest are zeros
    # written, no arithmetic): 1 FLOP per target element either way
    return call.numel(1 if call.op.endswith("forward") else 2)


def pool(call: AtenCall) -> int:
    # max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode); the output gives the rest
    x, y = call.tensor(0), call.results()[0]
    kernel = [int(k) for k in call.arg(1, "kernel_size", ())]
    rank = len(static_shape(x))
    spatial = rank - 2 if rank > 2 else 1
    kernel = kernel * spatial if len(kernel) == 1 else kernel
    return onnx(POOLS[call.op], [x], [y], {"kernel_shape": kernel})


def adaptive_avg_pool(call: AtenCall) -> int:
    # a global average pool when every output spatial size is 1; other output sizes are not modelled
    x, y = call.tensor(0), call.results()[0]
    if len(static_shape(x)) < 3 or any(d != 1 for d in static_shape(y)[2:]):
        raise ShapeUnknown("adaptive pool to a size other than 1")
    return onnx("GlobalAveragePool", [x], [y])


def addmm(call: AtenCall) -> int:
    # addmm(bias, m1, m2, beta, alpha) is Gemm(m1, m2, bias): 2*M*N*K plus the bias add
    attrs: dict[str, object] = {"beta": float(call.arg(3, "beta", 1)), "alpha": float(call.arg(4, "alpha", 1))}
    return onnx("Gemm", [call.tensor(1), call.tensor(2), call.tensor(0)], [call.result(0)], attrs)


def matmul(call: AtenCall) -> int:
    """mm(a, b), bmm(a, b): 2*M*N*K per batch."""
    return onnx("MatMul", [call.tensor(0), call.tensor(1)], [call.result(0)])


def linear(call: AtenCall) -> int:
    """linear(input [..., K], weight [N, K], bias [N]): a Gemm over the flattened rows."""
    x, w = call.shape(0), call.shape(1)
    rows = math.prod(x[:-1])
    a = TensorInfo(call.tensor(0).name, (rows, x[-1]), call.tensor(0).dtype)
    out = TensorInfo(call.result(0).name, (rows, w[0]), call.result(0).dtype)
    return onnx("Gemm", [a, call.tensor(1), _optional(call, 2)], [out], {"transB": 1})


def convolution(call: AtenCall) -> int:
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), and
    # conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups): Conv or ConvTranspose on the
    # op's own output shape, the bias add counted when there is a bias
    transposed = call.base not in CONVS and bool(call.arg(6, "transposed", False))
    group = int(call.arg(6 if call.base in CONVS else 8, "groups", 1))
    op = "ConvTranspose" if transposed else "Conv"
    return onnx(op, [call.tensor(0), call.tensor(1), _optional(call, 2)], [call.results()[0]], {"group": group})


def _optional(call: AtenCall, i: int) -> TensorInfo | None:
    t = call.args[i] if i < len(call.args) else None
    return t if isinstance(t, TensorInfo) else None


def _numel(t: TensorInfo) -> int:
    return math.prod(static_shape(t))


# -- results that follow from the arguments (for calls whose results were not recorded) -------------
def _result(call: AtenCall, like: int, shape: tuple[int, ...]) -> tuple[TensorInfo | None, ...]:
    return (TensorInfo("out", shape, call.tensor(like).dtype),)


def conv_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    """The output of a convolution that is not transposed: [N, Cout, *spatial]."""
    x, w = call.shape(0), call.shape(1)
    spatial = len(x) - 2
    transposed = call.base not in CONVS and bool(call.arg(6, "transposed", False))
    group = int(call.arg(6 if call.base in CONVS else 8, "groups", 1))
    if spatial < 1 or len(w) != len(x) or transposed or w[1] * group != x[1]:
        raise ShapeUnknown("not a convolution this formula covers")
    stride, pad, dilation = (_spread(call.arg(k, name, ()), spatial)
                             for k, name in ((3, "stride"), (4, "padding"), (5, "dilation")))
    window = Window(w[2:], stride, dilation, pad + pad, "NOTSET", False)
    return _result(call, 0, (x[0], w[0], *window_out(x[2:], window)))


def _spread(values: Any, n: int) -> tuple[int, ...]:
    """A per-dimension tuple; one value stands for every dimension."""
    ints = [int(v) for v in values] if isinstance(values, list | tuple) else [int(values)]
    if len(ints) == 1:
        return tuple(ints * n)
    if len(ints) != n:
        raise ShapeUnknown("wrong number of values")
    return tuple(ints)


def linear_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    x, w = call.shape(0), call.shape(1)
    if len(w) != 2 or not x or x[-1] != w[1]:
        raise ShapeUnknown("linear of mismatched shapes")
    return _result(call, 0, (*x[:-1], w[0]))


def addmm_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    a, b = call.shape(1), call.shape(2)
    if len(a) != 2 or len(b) != 2:
        raise ShapeUnknown("addmm of no matrices")
    return _result(call, 1, (a[0], b[1]))


def _pieces(call: AtenCall) -> list[TensorInfo]:
    """The list of tensors ``cat`` and ``stack`` take first, each of a static shape."""
    pieces = call.arg(0, "tensors")
    if not isinstance(pieces, tuple | list) or not pieces or not all(isinstance(p, TensorInfo) for p in pieces):
        raise ShapeUnknown("no list of tensors")
    for p in pieces:
        static_shape(p)
    return list(pieces)


def _joined_dtype(pieces: list[TensorInfo]) -> str:
    """The pieces' one element type ("unknown" where it is); pieces of several types are not modelled."""
    dtypes = {p.dtype for p in pieces}
    if len(dtypes) != 1:
        raise ShapeUnknown("pieces of several element types")
    return dtypes.pop()


def _axis(dim: Any, rank: int) -> int:
    d = int(dim)
    if not -rank <= d < rank:
        raise ShapeUnknown("dim out of range")
    return d % rank


def cat_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    """cat(tensors, dim): the pieces joined along ``dim``, which every other dim of theirs agrees on; a
    1-D piece of size 0 (torch's legacy empty tensor) takes no part."""
    pieces = _pieces(call)
    shapes = [s for s in (static_shape(p) for p in pieces) if s != (0,)] or [(0,)]
    first = shapes[0]
    d = _axis(call.arg(1, "dim", 0), len(first))
    if any(len(s) != len(first) or s[:d] != first[:d] or s[d + 1:] != first[d + 1:] for s in shapes):
        raise ShapeUnknown("pieces that do not join")
    return (TensorInfo("out", (*first[:d], sum(s[d] for s in shapes), *first[d + 1:]), _joined_dtype(pieces)),)


def stack_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    """stack(tensors, dim): the pieces, all of one shape, along a new ``dim``."""
    pieces = _pieces(call)
    first = static_shape(pieces[0])
    if any(static_shape(p) != first for p in pieces):
        raise ShapeUnknown("pieces of several shapes")
    d = _axis(call.arg(1, "dim", 0), len(first) + 1)
    return (TensorInfo("out", (*first[:d], len(pieces), *first[d:]), _joined_dtype(pieces)),)


def matmul_result(call: AtenCall) -> tuple[TensorInfo | None, ...]:
    a, b = call.shape(0), call.shape(1)
    if len(a) != len(b) or len(a) not in (2, 3):
        raise ShapeUnknown("mm or bmm of mismatched ranks")
    return _result(call, 0, (*a[:-1], b[-1]))
