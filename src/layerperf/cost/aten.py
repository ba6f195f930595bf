"""The work of aten ops torch.utils.flop_counter has no formula for, counted as layerperf's ONNX cost model
(:mod:`layerperf.cost`) counts the ONNX op each stands for, and which aten ops are views.

A forward op is costed by calling :func:`layerperf.cost.node_cost` on the ONNX op type it matches (``relu``
as ``Relu``, ``_softmax`` as ``Softmax``, ``native_layer_norm`` as ``LayerNormalization``...), so a torch
module and the ONNX node it exports to count alike by construction: 1 FLOP per output element for an
elementwise op, 1 per input element for a reduction, the cost model's constants for Gelu, Softmax, the
normalizations and pools. ``addmm`` and ``convolution`` are costed as Gemm and Conv too (flop_counter's
formulas leave out the bias add, which the cost model counts). A backward op (``threshold_backward``,
``native_layer_norm_backward``...) has no ONNX counterpart: it counts the primitives of its formula, each 1
FLOP per element as the cost model counts them (see :data:`BACKWARD`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layerperf.cost import node_cost
from layerperf.cost.ops_elementwise import LAYER_NORM
from layerperf.data.tensor import TensorInfo

# in-place ops that change a tensor's metadata only (shape, strides, storage), moving no data
METADATA_INPLACE = frozenset(("detach_", "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "resize_",
                              "set_", "_unsafe_view", "empty", "empty_like", "empty_strided",
                              "new_empty"))


# in-place ops that overwrite their first argument without reading it: its bytes are written, not read
OVERWRITE = frozenset(("copy_", "fill_", "zero_"))


def is_view(func: Any) -> bool:
    """Whether an aten op moves no data: every result is an alias of an argument it does not write (its
    schema's ``Tensor(a)``: ``t``, ``view``, ``expand``, ``transpose``, ``detach``...), or it only changes
    metadata or allocates without writing (:data:`METADATA_INPLACE`: ``_unsafe_view`` is a view whose
    alias the schema does not record; ``empty`` is an allocation)."""
    if func.overloadpacket.__name__ in METADATA_INPLACE:
        return True
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


# aten op -> the ONNX ops (domain ai.onnx) it does, each costed on the op's tensors (inputs in argument
# order, outputs in result order). An in-place form (``relu_``, ``add_``) is its op's.
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

# backward ops: FLOPs per element of input 0 (the gradient), each a sum of primitives at 1 FLOP an element
BACKWARD = {
    "threshold_backward": 1,  # where(x > threshold, grad, 0)
    "hardtanh_backward": 1,  # where(min < x < max, grad, 0)
    "sigmoid_backward": 3,  # grad * y * (1 - y)
    "tanh_backward": 3,  # grad * (1 - y*y)
    "silu_backward": 6,  # s = sigmoid(x); grad * s * (1 + x * (1 - s))
    # y * (grad - sum(grad * y)): Mul, ReduceSum, Sub, Mul
    "_softmax_backward_data": 4,
    "_log_softmax_backward_data": 4,  # grad - exp(y) * sum(grad): ReduceSum, Exp, Mul, Sub
    "max_pool2d_with_indices_backward": 1,  # one add of each gradient element into its input position
    "max_pool3d_with_indices_backward": 1,
    "embedding_dense_backward": 1,  # one add of each gradient element into its weight row
}
# gelu_backward, erf form: grad * (cdf + x * pdf): cdf = 0.5 * (1 + erf(x / sqrt2)) 4, pdf = exp(-x*x/2) /
# sqrt(2 pi) 4, x * pdf, + cdf, * grad 3 = 11; tanh form: inner k*(x + c*x^3) 4, tanh 1, sech^2 = 1 - t*t 2,
# derivative of the inner 1 + 3c*x^2 3 and its product with k, 0.5*x and sech^2 4, 0.5 * (1 + t) 2, sum 1,
# * grad 1 = 18
GELU_BACKWARD = {"none": 11, "tanh": 18}
# normalization backward per input element: x_hat = (x - mean) * rstd 2 (for dx or dweight); dx = rstd *
# (g - mean(g) - x_hat * mean(g * x_hat)) with g the output gradient times weight 8 more (Mul, ReduceSum,
# Mul, ReduceSum, Mul, Sub, Sub, Mul); dweight = sum(grad * x_hat) 2; dbias = sum(grad) 1. Batch norm in eval
# mode: dx = grad * (weight * invstd), one Mul an element.
NORM_XHAT, NORM_DX, NORM_DX_EVAL, NORM_DWEIGHT, NORM_DBIAS = 2, 8, 1, 2, 1


def _tensors(value: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _info(k: int, t: Any) -> TensorInfo:
    return TensorInfo(f"t{k}", tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch."))


def _onnx(op_type: str, inputs: list[Any], outputs: list[Any], attrs: dict[str, object] | None = None) -> int | None:
    """The cost model's FLOPs of one ONNX op on these torch tensors (None where it cannot tell)."""
    ins = [None if t is None else _info(k, t) for k, t in enumerate(inputs)]
    outs = [_info(len(ins) + k, t) for k, t in enumerate(outputs)]
    return node_cost(op_type, "", attrs or {}, ins, outs).flops


def _sum(counts: list[int | None]) -> int | None:
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def _arg(args: Any, kwargs: Any, i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def flops(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    """FLOPs of a floating-point aten op as the cost model counts its ONNX counterpart; None for one not
    covered here (torch.utils.flop_counter's formula, or unknown)."""
    name = func.overloadpacket.__name__
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    handler = _SPECIAL.get(base)
    if handler is not None:
        return handler(func, args, kwargs, out)
    ins, outs = _tensors((args, kwargs)), _tensors(out)
    if base in UNARY:
        return _onnx(UNARY[base], ins[:1], outs[:1])
    if base in BINARY:
        # add/sub/rsub(x, y, alpha): alpha != 1 scales y first; no other binary op has a third argument
        # of that meaning (where's third is a tensor)
        alpha = _arg(args, kwargs, 2, "alpha", 1) if base in ALPHA_OPS else 1
        scaled = isinstance(alpha, int | float) and alpha != 1
        extra = [_onnx("Mul", ins, outs[:1])] if scaled else []
        return _sum([_onnx(BINARY[base], ins, outs[:1]), *extra])
    if base in ("max", "min"):  # max.other is elementwise; max() and max.dim reduce
        binary = func._overloadname == "other"
        return _onnx(("Max" if base == "max" else "Min") if binary else f"Reduce{base.title()}", ins, outs[:1])
    if base in REDUCTIONS:
        return _onnx(REDUCTIONS[base], ins[:1], outs[:1])
    if base in COMPOSED:
        return _sum([_onnx(op, ins, outs[:1]) for op in COMPOSED[base]])
    if base in BACKWARD and ins:
        return BACKWARD[base] * ins[0].numel()
    return None


def _gelu(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    approximate = str(_arg(args, kwargs, 1, "approximate", "none"))
    return _onnx("Gelu", [args[0]], [out], {"approximate": approximate})


def _gelu_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    per = GELU_BACKWARD.get(str(_arg(args, kwargs, 2, "approximate", "none")))
    return None if per is None else per * args[0].numel()


def _batch_norm(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, ...);
    # _native_batch_norm_legit(input, weight, bias, [running_mean, running_var,] training, ...)
    name = func.overloadpacket.__name__
    training = True
    if name in ("native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm"):
        training = bool(_arg(args, kwargs, 5, "training", True))
    elif name == "_native_batch_norm_legit":
        training = bool(args[5] if func._overloadname == "default" else args[3])
    x, y = args[0], _tensors(out)[0]
    if not training:
        return _onnx("BatchNormalization", [x], [y])
    return LAYER_NORM * y.numel()


def _norm_backward(numel: int, mask: Any, train: bool = True) -> int:
    dx, dweight, dbias = (bool(m) for m in mask)
    count = NORM_XHAT if (dx and train) or dweight else 0
    count += (NORM_DX if train else NORM_DX_EVAL) if dx else 0
    count += NORM_DWEIGHT if dweight else 0
    count += NORM_DBIAS if dbias else 0
    return count * numel


def _layer_norm_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    return _norm_backward(args[1].numel(), _arg(args, kwargs, 7, "output_mask", (True, True, True)))


def _batch_norm_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    # train, eps, output_mask)
    return _norm_backward(args[1].numel(), _arg(args, kwargs, 9, "output_mask", (True, True, True)),
                          bool(_arg(args, kwargs, 7, "train", True)))


def _nll_loss(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # nll_loss_forward(self, target, ...) picks, negates and sums one log-probability per target;
    # nll_loss_backward(grad_output, self, target, ...) writes one value per target (the rest are zeros
    # written, no arithmetic): 1 FLOP per target element either way
    target = args[1] if func.overloadpacket.__name__.endswith("forward") else args[2]
    return int(target.numel())


def _attention_dims(q: Any, k: Any, v: Any) -> tuple[int, int, int, int, int]:
    """(batch x heads, L, S, E, Ev) of an attention's query (..., L, E), key (..., S, E), value (..., S, Ev)."""
    length, e = int(q.shape[-2]), int(q.shape[-1])
    return int(q.numel()) // max(length * e, 1), length, int(k.shape[-2]), e, int(v.shape[-1])


def _cpu_attention(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # _scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale): what
    # scaled_dot_product_attention's math path counts: q and k scaled (1 an element each), Q K^T
    # (2 BH L S E), the mask or causal bias added (BH L S), softmax (5 BH L S), P V (2 BH L S Ev)
    q, k, v = args[:3]
    bh, length, s, e, ev = _attention_dims(q, k, v)
    masked = _arg(args, kwargs, 99, "attn_mask", None) is not None or bool(_arg(args, kwargs, 4, "is_causal", False))
    return int(q.numel() + k.numel()) + 2 * bh * length * s * (e + ev) + (6 if masked else 5) * bh * length * s


def _cpu_attention_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # (grad_out, q, k, v, out, logsumexp, ...): the math path's backward: dV = P^T dO and dP = dO V^T
    # (2 BH L S Ev each), softmax's backward (4 BH L S), dQ = dS K and dK = dS^T Q (2 BH L S E each), the
    # scales' (1 an element of q and k)
    q, k, v = args[1:4]
    bh, length, s, e, ev = _attention_dims(q, k, v)
    return int(q.numel() + k.numel()) + 4 * bh * length * s * (e + ev) + 4 * bh * length * s


def _gpu_batch_norm_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # epsilon, reserve): batch statistics (the forward trained), every gradient computed
    return _norm_backward(args[0].numel(), (True, True, True))


def _group_norm_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    return _norm_backward(args[1].numel(), _arg(args, kwargs, 9, "output_mask", (True, True, True)))


def _pool(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode); the output gives the rest
    x, y = args[0], _tensors(out)[0]
    kernel = [int(k) for k in _arg(args, kwargs, 1, "kernel_size", ())]
    spatial = x.dim() - 2 if x.dim() > 2 else 1
    kernel = kernel * spatial if len(kernel) == 1 else kernel
    return _onnx(POOLS[func.overloadpacket.__name__], [x], [y], {"kernel_shape": kernel})


def _adaptive_avg_pool(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # a global average pool when every output spatial size is 1; other output sizes are not modelled
    x, y = args[0], _tensors(out)[0]
    if x.dim() < 3 or any(int(d) != 1 for d in y.shape[2:]):
        return None
    return _onnx("GlobalAveragePool", [x], [y])


def _addmm(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # addmm(bias, m1, m2, beta, alpha) is Gemm(m1, m2, bias): 2*M*N*K plus the bias add
    bias, m1, m2 = args[0], args[1], args[2]
    attrs: dict[str, object] = {"beta": float(_arg(args, kwargs, 3, "beta", 1)),
                                "alpha": float(_arg(args, kwargs, 4, "alpha", 1))}
    return _onnx("Gemm", [m1, m2, bias], [out], attrs)


def _convolution(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    # Conv or ConvTranspose on the op's own output shape, the bias add counted when there is a bias
    x, w, bias = args[0], args[1], args[2]
    transposed = bool(_arg(args, kwargs, 6, "transposed", False))
    y = _tensors(out)[0]
    attrs: dict[str, object] = {"group": int(_arg(args, kwargs, 8, "groups", 1))}
    return _onnx("ConvTranspose" if transposed else "Conv", [x, w, bias], [y], attrs)


def _convolution_backward(func: Any, args: Any, kwargs: Any, out: Any) -> int | None:
    # flop_counter's formula for the input and weight gradients, plus the bias gradient (output_mask's
    # third entry): a sum over the output gradient, 1 FLOP an element as a ReduceSum
    from torch.utils.flop_counter import flop_registry

    count = int(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
    mask = _arg(args, kwargs, 10, "output_mask", (True, True, True))
    return count + (args[0].numel() if bool(mask[2]) else 0)


_SPECIAL: dict[str, Callable[[Any, Any, Any, Any], int | None]] = {
    "gelu": _gelu,
    "gelu_backward": _gelu_backward,
    **{name: _batch_norm for name in BATCH_NORM_TRAINING},
    "native_layer_norm_backward": _layer_norm_backward,
    "native_batch_norm_backward": _batch_norm_backward,
    "cudnn_batch_norm_backward": _gpu_batch_norm_backward,
    "_scaled_dot_product_flash_attention_for_cpu": _cpu_attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _cpu_attention_backward,
    **{name: _nll_loss for name in ("nll_loss_forward", "nll_loss2d_forward", "nll_loss_backward",
                                    "nll_loss2d_backward")},
    "miopen_batch_norm_backward": _gpu_batch_norm_backward,
    "native_group_norm_backward": _group_norm_backward,
    **{name: _pool for name in POOLS},
    "_adaptive_avg_pool2d": _adaptive_avg_pool,
    "adaptive_avg_pool2d": _adaptive_avg_pool,
    "addmm": _addmm,
    "convolution": _convolution,
    "convolution_backward": _convolution_backward,
}
