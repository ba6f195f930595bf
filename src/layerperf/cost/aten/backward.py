"""Backward aten ops: no ONNX counterpart, so each counts the primitives of its formula, each 1 FLOP per
element as the ONNX cost model counts them (:data:`BACKWARD`: ``threshold_backward`` 1,
``sigmoid_backward`` 3...); the matrix products inside (a convolution's gradients, attention's) as
2 FLOPs a multiply-add.

Each function takes an :class:`~.call.AtenCall` and returns its FLOPs, raising ShapeUnknown where it
cannot tell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from layerperf.cost.aten.call import AtenCall, static_shape

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
ALL_GRADIENTS = (True, True, True)


def per_element(call: AtenCall) -> int:
    """A :data:`BACKWARD` op: its primitives per element of the gradient (the first tensor)."""
    return BACKWARD[call.base] * math.prod(static_shape(call.tensors()[0]))


def gelu_backward(call: AtenCall) -> int:
    per = GELU_BACKWARD.get(str(call.arg(2, "approximate", "none")))
    if per is None:
        raise ValueError("gelu_backward of an unknown approximation")
    return per * call.numel(0)


def _norm(numel: int, mask: Sequence[Any], train: bool = True) -> int:
    dx, dweight, dbias = (bool(m) for m in mask)
    count = NORM_XHAT if (dx and train) or dweight else 0
    count += (NORM_DX if train else NORM_DX_EVAL) if dx else 0
    count += NORM_DWEIGHT if dweight else 0
    count += NORM_DBIAS if dbias else 0
    return count * numel


def layer_norm_backward(call: AtenCall) -> int:
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    return _norm(call.numel(1), call.arg(7, "output_mask", ALL_GRADIENTS))


def batch_norm_backward(call: AtenCall) -> int:
    # native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    # train, eps, output_mask)
    return _norm(call.numel(1), call.arg(9, "output_mask", ALL_GRADIENTS), bool(call.arg(7, "train", True)))


def gpu_batch_norm_backward(call: AtenCall) -> int:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # epsilon, reserve): batch statistics (the forward trained), every gradient computed
    return _norm(call.numel(0), ALL_GRADIENTS)


def group_norm_backward(call: AtenCall) -> int:
    # native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    return _norm(call.numel(1), call.arg(9, "output_mask", ALL_GRADIENTS))


def cpu_attention_backward(call: AtenCall) -> int:
    # (grad_out, q, k, v, out, logsumexp, ...): the math path's backward: dV = P^T dO and dP = dO V^T
    # (2 BH L S Ev each), softmax's backward (4 BH L S), dQ = dS K and dK = dS^T Q (2 BH L S E each), the
    # scales' (1 an element of q and k)
    q, k, v = call.shape(1), call.shape(2), call.shape(3)
    length, e = q[-2], q[-1]
    bh, s, ev = math.prod(q) // max(length * e, 1), k[-2], v[-1]
    return call.numel(1) + call.numel(2) + 4 * bh * length * s * (e + ev) + 4 * bh * length * s


def convolution_backward(call: AtenCall) -> int:
    """convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): the input's gradient as a transposed convolution of the output's
    gradient with the weight, the weight's as a convolution of the input with the output's gradient
    (torch.utils.flop_counter's formulas: 2 FLOPs a multiply-add), plus the bias's: a sum over the output's
    gradient, 1 FLOP an element as a ReduceSum."""
    grad_out, x, w = call.shape(0), call.shape(1), call.shape(2)
    transposed = bool(call.arg(7, "transposed", False))
    mask = call.arg(10, "output_mask", ALL_GRADIENTS)
    count = 0
    if mask[0]:
        count += _conv_flops(grad_out, w, static_shape(call.result(0)), not transposed)
    if mask[1]:
        grad_w = _swap(static_shape(call.result(1)))
        pair = (_swap(grad_out), _swap(x)) if transposed else (_swap(x), _swap(grad_out))
        count += _conv_flops(*pair, grad_w, False)
    return count + (math.prod(grad_out) if bool(mask[2]) else 0)


def _swap(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[1], shape[0], *shape[2:])


def _conv_flops(x: tuple[int, ...], w: tuple[int, ...], out: tuple[int, ...], transposed: bool) -> int:
    """torch.utils.flop_counter's conv_flop_count: each point of the output's spatial dims (the input's, for
    a transposed convolution) convolves the filter, for every batch row and pair of channels."""
    c_out, c_in = w[0], w[1]
    spatial = (x if transposed else out)[2:]
    return math.prod(spatial) * math.prod(w[2:]) * x[0] * c_out * c_in * 2
