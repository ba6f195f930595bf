"""Compute-heavy ai.onnx ops: convolutions, matrix products, pooling, recurrent cells, Einsum."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from layerperf.cost.onnx.node import FlopsFn, Node, OpKey
from layerperf.cost.shapes import ShapeUnknown, Window, conv_transpose_out, matmul_dims, window_out


def window(node: Node, kernel: Sequence[int]) -> Window:
    """Read kernel_shape/strides/dilations/pads/auto_pad/ceil_mode, defaulting per the ONNX spec."""
    n = len(kernel)
    kernel_attr = node.attr_ints("kernel_shape")
    kern = tuple(kernel_attr) if kernel_attr else tuple(kernel)
    if len(kern) != n:
        raise ShapeUnknown("kernel_shape rank differs from the input's spatial rank")
    strides = node.attr_ints("strides") or [1] * n
    dilations = node.attr_ints("dilations") or [1] * n
    pads = node.attr_ints("pads") or [0] * (2 * n)
    return Window(kern, tuple(strides), tuple(dilations), tuple(pads),
                  node.attr_str("auto_pad", "NOTSET"), bool(node.attr_int("ceil_mode", 0)))


# -- convolution ---------------------------------------------------------------------------------


def conv_out_shape(node: Node, channels_last: bool = False) -> tuple[int, ...]:
    """Conv output [N, Cout, *spatial] (or [N, *spatial, Cout]) from X, W and the attributes."""
    x, w = node.shape(0), node.shape(1)
    spatial_in = x[1:-1] if channels_last else x[2:]
    spatial = window_out(spatial_in, window(node, w[2:]))
    return (x[0], *spatial, w[0]) if channels_last else (x[0], w[0], *spatial)


def conv_macs(node: Node, channels_last: bool = False) -> tuple[int, int]:
    """(MACs, output elements) of a Conv: every output element is a dot product of length
    Cin/group * prod(kernel), read off W = [Cout, Cin/group, *kernel].

    W's shape rather than X's channel count gives Cin/group, so a layout that pads channels
    (NCHWc) or puts them last (NHWC) does not change the formula.
    """
    w = node.shape(1)
    out = node.out_shape_or(lambda: conv_out_shape(node, channels_last))
    out_elems = math.prod(out)
    return out_elems * math.prod(w[1:]), out_elems


def conv(node: Node, channels_last: bool = False) -> int:
    """2*MACs, plus one add per output element for the bias when B is given."""
    macs, out_elems = conv_macs(node, channels_last)
    return 2 * macs + (out_elems if node.has(2) else 0)


def conv_transpose_out_shape(node: Node, channels_last: bool = False) -> tuple[int, ...]:
    x, w = node.shape(0), node.shape(1)
    group = node.attr_int("group", 1)
    spatial_in = x[1:-1] if channels_last else x[2:]
    win = window(node, w[2:])
    output_padding = node.attr_ints("output_padding") or [0] * len(spatial_in)
    spatial = conv_transpose_out(spatial_in, win, output_padding, node.attr_ints("output_shape"))
    cout = w[1] * group
    return (x[0], *spatial, cout) if channels_last else (x[0], cout, *spatial)


def conv_transpose(node: Node, channels_last: bool = False) -> int:
    """Every input element is scattered into Cout/group * prod(kernel) outputs: one MAC each.

    W is [Cin, Cout/group, *kernel], so MACs = N * Cin * prod(in spatial) * prod(W[1:]); the
    bias adds one per output element.
    """
    x, w = node.shape(0), node.shape(1)
    macs = math.prod(x) * math.prod(w[1:])
    flops = 2 * macs
    if node.has(2):
        flops += math.prod(node.out_shape_or(lambda: conv_transpose_out_shape(node, channels_last)))
    return flops


# -- matrix products -----------------------------------------------------------------------------


def matmul(node: Node) -> int:
    """2 * batch * M * K * N with numpy broadcasting of batch dims and 1-D operands."""
    return 2 * matmul_dims(node.shape(0), node.shape(1)).macs


def gemm_mnk(node: Node) -> tuple[int, int, int]:
    a, b = node.shape(0), node.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise ShapeUnknown("Gemm operands must be 2-D")
    m, k = (a[1], a[0]) if node.attr_int("transA", 0) else a
    k_b, n = (b[1], b[0]) if node.attr_int("transB", 0) else b
    if k != k_b:
        raise ShapeUnknown("Gemm inner dims differ")
    return m, k, n


def gemm(node: Node) -> int:
    """Y = alpha*A'B' + beta*C: 2*M*N*K, plus per output element one add for C (when given and
    beta != 0), one multiply for alpha != 1 and one for beta not in (0, 1).

    MatMul + Add costs 2*M*N*K + M*N, so the Gemm ONNX Runtime fuses it into costs the same.
    """
    m, k, n = gemm_mnk(node)
    alpha, beta = node.attr_float("alpha", 1.0), node.attr_float("beta", 1.0)
    flops = 2 * m * n * k
    if alpha != 1.0:
        flops += m * n
    if node.has(2) and beta != 0.0:
        flops += m * n * (1 if beta == 1.0 else 2)
    return flops


# -- pooling -------------------------------------------------------------------------------------


def pool_out_shape(node: Node, channels_last: bool = False) -> tuple[int, ...]:
    x = node.shape(0)
    spatial_in = x[1:-1] if channels_last else x[2:]
    kernel = node.attr_ints("kernel_shape")
    if not kernel:
        raise ShapeUnknown("pool without kernel_shape")
    spatial = window_out(spatial_in, window(node, kernel))
    return (x[0], *spatial, x[-1]) if channels_last else (x[0], x[1], *spatial)


def pool(node: Node, channels_last: bool = False) -> int:
    """prod(kernel) per output element: k-1 comparisons (max) or adds (average) plus one
    divide or store, i.e. k."""
    kernel = node.attr_ints("kernel_shape")
    if not kernel:
        raise ShapeUnknown("pool without kernel_shape")
    out = node.out_shape_or(lambda: pool_out_shape(node, channels_last))
    return math.prod(out) * math.prod(kernel)


def lp_pool(node: Node) -> int:
    # |x|^p and an add per tap.
    return 2 * pool(node)


def global_pool(node: Node) -> int:
    """One add or comparison per input element."""
    return node.numel(0)


def global_lp_pool(node: Node) -> int:
    return 2 * node.numel(0)


def lrn(node: Node) -> int:
    # A square and an add per window element, then scale, pow and divide per output element.
    size = node.attr_int("size", 1)
    return (2 * size + 3) * node.numel(0)


# -- recurrent cells -----------------------------------------------------------------------------

# (gates, elementwise FLOPs per hidden unit per step without bias):
#  LSTM: 4 adds joining the input and recurrent parts of each gate, 4 gate activations,
#        c = f*c + i*g (3), tanh(c) (1), h = o*tanh(c) (1)                        -> 13
#  GRU:  2 adds for z and r, 2 sigmoids, r gating (1), 1 add for the candidate, tanh (1),
#        h = (1-z)*h~ + z*h (3)                                                   -> 10
#  RNN:  1 add, 1 activation                                                      -> 2
_RNN_CELLS = {"LSTM": (4, 13), "GRU": (3, 10), "RNN": (1, 2)}


def recurrent(node: Node) -> int:
    """gates * (input MatMul + recurrent MatMul) per step, per direction, per batch row, as
    2*MACs, plus the gate math above; B adds 2*gates per hidden unit per step, LSTM's
    peepholes P add 3 multiply-adds (6)."""
    gates, cell = _RNN_CELLS[node.op_type]
    x, w, r = node.shape(0), node.shape(1), node.shape(2)
    if len(x) != 3 or len(w) != 3 or len(r) != 3 or x[2] != w[2]:
        raise ShapeUnknown("recurrent op shapes: X [S,B,I], W [D,G*H,I], R [D,G*H,H]")
    seq, batch = (x[1], x[0]) if node.attr_int("layout", 0) else (x[0], x[1])
    directions, input_size, hidden = w[0], w[2], r[2]
    per_unit = cell
    if node.has(3):
        per_unit += 2 * gates
    if node.op_type == "LSTM" and node.has(7):
        per_unit += 6
    macs = gates * hidden * (input_size + hidden)
    return seq * directions * batch * (2 * macs + per_unit * hidden)


# -- Einsum --------------------------------------------------------------------------------------


def _einsum_dims(equation: str, shapes: list[tuple[int, ...]]) -> tuple[dict[str, int], str]:
    """Size of every index letter (an ellipsis becomes upper-case stand-ins) and the output term."""
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ShapeUnknown("Einsum operand count differs from the equation")
    sizes: dict[str, int] = {}
    ell_rank = 0
    for term, shape in zip(terms, shapes, strict=True):
        named = term.replace("...", "")
        rank_ell = len(shape) - len(named)
        if rank_ell < 0 or (rank_ell and "..." not in term):
            raise ShapeUnknown("Einsum term rank differs from its operand")
        ell_rank = max(ell_rank, rank_ell)
        letters = term.replace("...", "".join(chr(ord("A") + ell_rank - rank_ell + i) for i in range(rank_ell)))
        for letter, dim in zip(letters, shape, strict=True):
            # broadcast dims of size 1 yield to the real size
            sizes[letter] = max(sizes.get(letter, 1), dim)
    if not rhs and "->" not in eq:  # implicit output: letters seen once, in alphabetical order
        counts = {c: lhs.count(c) for c in set(lhs) if c.isalpha() and c.islower()}
        rhs = "..." * ("..." in lhs) + "".join(sorted(c for c, n in counts.items() if n == 1))
    rhs = rhs.replace("...", "".join(chr(ord("A") + i) for i in range(ell_rank)))
    return sizes, rhs


def einsum(node: Node) -> int:
    """Naive evaluation: over every combination of all indices, (operands - 1) multiplies and,
    when some index is summed away, one add. A 2-operand contraction is thus 2*MACs, as MatMul."""
    equation = node.attr_str("equation", "")
    if not re.fullmatch(r"[A-Za-z.,\s\->]*", equation) or not equation:
        raise ShapeUnknown("bad Einsum equation")
    shapes = [node.shape(i) for i in range(len(node.inputs)) if node.has(i)]
    sizes, rhs = _einsum_dims(equation, shapes)
    reduces = any(letter not in rhs for letter in sizes)
    per_point = (len(shapes) - 1) + (1 if reduces else 0)
    return per_point * math.prod(sizes.values())


TABLE: dict[OpKey, FlopsFn] = {
    ("", "Conv"): conv,
    ("", "ConvTranspose"): conv_transpose,
    ("", "MatMul"): matmul,
    ("", "Gemm"): gemm,
    ("", "MaxPool"): pool,
    ("", "AveragePool"): pool,
    ("", "LpPool"): lp_pool,
    ("", "GlobalAveragePool"): global_pool,
    ("", "GlobalMaxPool"): global_pool,
    ("", "GlobalLpPool"): global_lp_pool,
    ("", "LRN"): lrn,
    ("", "LSTM"): recurrent,
    ("", "GRU"): recurrent,
    ("", "RNN"): recurrent,
    ("", "Einsum"): einsum,
}
