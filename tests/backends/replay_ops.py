"""The replay backend's kernels: a handful of ONNX ops in numpy, each ``fn(inputs, attrs, opset) -> outputs``.

``inputs`` follow the node's positions (None for an omitted optional one); ``attrs`` are the node's
attributes as Python values. Semantics are ONNX's for what the toy backend needs, not every corner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Arrays = list[Any]
Kernel = Callable[[Arrays, dict[str, Any], int], list[np.ndarray]]


def _one(f: Callable[..., np.ndarray]) -> Kernel:
    return lambda xs, attrs, opset: [np.asarray(f(*xs))]


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):  # ONNX's integer Div truncates toward 0
        return np.trunc(a / b).astype(a.dtype)
    return a / b


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _softmax(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    x = xs[0]
    if opset < 13:  # before 13: the input flattened to 2-D at ``axis`` (default 1), normalized per row
        axis = int(attrs.get("axis", 1)) % max(x.ndim, 1)
        rows = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
        return [_softmax([rows], {"axis": 1}, 13)[0].reshape(x.shape)]
    axis = int(attrs.get("axis", -1))
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def _gemm(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    a, b = xs[0], xs[1]
    a = a.T if attrs.get("transA") else a
    b = b.T if attrs.get("transB") else b
    y = a @ b
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = y * y.dtype.type(alpha)
    if len(xs) > 2 and xs[2] is not None and beta != 0.0:
        y = y + xs[2] * y.dtype.type(beta)
    return [y]


def _reshape(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    x, shape = xs[0], [int(d) for d in xs[1]]
    if not attrs.get("allowzero"):  # 0 copies the input's dim
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [x.reshape(shape)]


def _transpose(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    perm = attrs.get("perm")
    return [np.transpose(xs[0], None if perm is None else [int(p) for p in perm])]


def _flatten(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    x = xs[0]
    axis = int(attrs.get("axis", 1)) % (x.ndim + 1)
    return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)]


def _conv(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    """2-D convolution of one group through im2col: every window gathered, then one tensordot."""
    x, w = xs[0], xs[1]
    if x.ndim != 4 or int(attrs.get("group", 1)) != 1 or attrs.get("auto_pad", "NOTSET") != "NOTSET":
        raise NotImplementedError("Conv: 2-D, one group, explicit pads only")
    kh, kw = w.shape[2:]
    sh, sw = (int(s) for s in attrs.get("strides", (1, 1)))
    dh, dw = (int(d) for d in attrs.get("dilations", (1, 1)))
    top, left, bottom, right = (int(p) for p in attrs.get("pads", (0, 0, 0, 0)))
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    windows = sliding_window_view(padded, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
    cols = windows[:, :, ::sh, ::sw, ::dh, ::dw]  # N, C, Hout, Wout, kh, kw
    y = np.tensordot(cols, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)  # N, M, Hout, Wout
    if len(xs) > 2 and xs[2] is not None:
        y = y + xs[2].reshape(1, -1, 1, 1)
    return [np.ascontiguousarray(y, dtype=x.dtype)]


def _grid_sample(xs: Arrays, attrs: dict[str, Any], opset: int) -> list[np.ndarray]:
    """Bilinear sampling of ``x`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2: x then y in [-1, 1]), zeros
    outside; ``align_corners`` says whether -1 and 1 are the corner pixels' centres or their edges."""
    x, grid = xs[0], xs[1]
    if attrs.get("mode", "linear") not in ("linear", "bilinear") or attrs.get("padding_mode", "zeros") != "zeros":
        raise NotImplementedError("GridSample: linear mode, zeros padding only")
    n, _, h, w = x.shape
    align = bool(attrs.get("align_corners", 0))
    gx, gy = grid[..., 0], grid[..., 1]
    fx = (gx + 1) / 2 * (w - 1) if align else ((gx + 1) * w - 1) / 2
    fy = (gy + 1) / 2 * (h - 1) if align else ((gy + 1) * h - 1) / 2
    x0, y0 = np.floor(fx), np.floor(fy)
    wx, wy = fx - x0, fy - y0
    out = np.zeros((n, x.shape[1], *grid.shape[1:3]), dtype=x.dtype)
    batch = np.arange(n)[:, None, None]
    for dy, dx, weight in ((0, 0, (1 - wy) * (1 - wx)), (0, 1, (1 - wy) * wx), (1, 0, wy * (1 - wx)), (1, 1, wy * wx)):
        xi, yi = x0 + dx, y0 + dy
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        taps = x[batch, :, np.clip(yi, 0, h - 1).astype(int), np.clip(xi, 0, w - 1).astype(int)]  # N, Ho, Wo, C
        out += (taps * (weight * inside)[..., None]).transpose(0, 3, 1, 2).astype(x.dtype)
    return [out]


KERNELS: dict[str, Kernel] = {
    "Add": _one(np.add), "Sub": _one(np.subtract), "Mul": _one(np.multiply), "Div": _one(_div),
    "MatMul": _one(np.matmul), "Relu": _one(_relu), "Sigmoid": _one(_sigmoid), "Tanh": _one(np.tanh),
    "Identity": _one(np.copy), "Det": _one(np.linalg.det), "GridSample": _grid_sample, "Softmax": _softmax,
    "Gemm": _gemm,
    "Reshape": _reshape, "Transpose": _transpose, "Flatten": _flatten, "Conv": _conv,
}
