"""The cost model: hand-computed FLOPs and bytes, ORT-optimized graphs, published MAC counts."""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerperf.cost.onnx import is_known, known_op_types, node_cost
from layerperf.cost.onnx.graph import graph_costs, model_flops, tensor_infos
from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo

F32 = "float32"


def t(shape: tuple[int | str, ...] | None, name: str = "", dtype: str = F32) -> TensorInfo:
    return TensorInfo(name or f"t{shape}", shape, dtype)


def cost(op: str, inputs: Sequence[tuple[int, ...] | None], outputs: Sequence[tuple[int, ...] | None] | None = None,
         domain: str = "", **attrs: object) -> Cost:
    ins = [None if s is None else t(s, f"in{i}") for i, s in enumerate(inputs)]
    outs = [t(s, f"out{i}") for i, s in enumerate(outputs or [None])]
    return node_cost(op, domain, attrs, ins, outs)


def flops(op: str, inputs: Sequence[tuple[int, ...] | None], outputs: Sequence[tuple[int, ...] | None] | None = None,
          domain: str = "", **attrs: object) -> int | None:
    """FLOPs both from the output shape (as ONNX Runtime reports it) and without it (formula).

    The two must agree: a cost function may use either, never give different answers.
    """
    with_out = cost(op, inputs, outputs, domain, **attrs).flops
    formula = cost(op, inputs, None, domain, **attrs).flops
    if outputs is not None:
        assert formula == with_out, (formula, with_out)
    return with_out


# -- Cost record ----------------------------------------------------------------------------------


def test_cost_bytes_and_intensity() -> None:
    c = Cost(flops=100, bytes_read=30, bytes_written=20)
    assert c.bytes == 50
    assert c.intensity == 2.0
    assert Cost(None, 1, 1).intensity is None
    assert Cost(5, None, 1).bytes is None
    assert Cost(0, 0, 0).intensity is None


# -- convolutions ---------------------------------------------------------------------------------


def test_conv_with_bias() -> None:
    # 3x3 pad 1 keeps 32x32: every output element is a dot product of 3*3*3
    macs = 1 * 16 * 32 * 32 * (3 * 3 * 3)
    bias_adds = 1 * 16 * 32 * 32
    c = cost("Conv", [(1, 3, 32, 32), (16, 3, 3, 3), (16,)], [(1, 16, 32, 32)], pads=[1, 1, 1, 1])
    assert c.flops == 2 * macs + bias_adds
    assert c.bytes_read == 4 * (3 * 32 * 32 + 16 * 3 * 3 * 3 + 16)
    assert c.bytes_written == 4 * 16 * 32 * 32


def test_conv_groups_strides_dilations_pads() -> None:
    # dilation 2 turns k=3 into an effective 5; out = floor((17 + 1 + 1 - 5) / 2) + 1 = 8
    out = (17 + 1 + 1 - 5) // 2 + 1
    assert out == 8
    macs = 2 * 12 * out * out * (8 // 2) * 3 * 3  # N * Cout * H * W * Cin/group * kh * kw
    got = flops("Conv", [(2, 8, 17, 17), (12, 4, 3, 3)], [(2, 12, 8, 8)],
                group=2, strides=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])
    assert got == 2 * macs


def test_conv_asymmetric_pads() -> None:
    # H: (10 + 0 + 2 - 3) // 1 + 1 = 10, W: (10 + 1 + 0 - 3) + 1 = 9
    got = flops("Conv", [(1, 2, 10, 10), (4, 2, 3, 3)], [(1, 4, 10, 9)], pads=[0, 1, 2, 0])
    assert got == 2 * (4 * 10 * 9 * 2 * 3 * 3)


def test_depthwise_conv() -> None:
    macs = 32 * 56 * 56 * (1 * 3 * 3)  # one input channel per output channel
    got = flops("Conv", [(1, 32, 56, 56), (32, 1, 3, 3), (32,)], [(1, 32, 56, 56)], group=32, pads=[1] * 4)
    assert got == 2 * macs + 32 * 56 * 56


def test_conv_auto_pad_same_upper() -> None:
    # SAME_*: out = ceil(in / stride) = ceil(15 / 2) = 8, whatever the kernel
    macs = 8 * 8 * 8 * (3 * 3 * 3)
    assert flops("Conv", [(1, 3, 15, 15), (8, 3, 3, 3)], [(1, 8, 8, 8)], auto_pad="SAME_UPPER",
                 strides=[2, 2]) == 2 * macs


def test_conv_auto_pad_valid_1d_and_3d() -> None:
    assert flops("Conv", [(1, 4, 10), (6, 4, 3)], [(1, 6, 8)], auto_pad="VALID") == 2 * (6 * 8 * 4 * 3)
    # 3-D: out = 8 - 3 + 1 = 6 per axis
    assert flops("Conv", [(1, 2, 8, 8, 8), (4, 2, 3, 3, 3)], [(1, 4, 6, 6, 6)]) == 2 * (4 * 6**3 * 2 * 27)


def test_conv_matches_onnxruntime_output_shapes() -> None:
    """The formula's output size (used when no output shape is given) is the one ORT computes."""
    cases: list[dict[str, Any]] = [
        dict(strides=[2, 2], pads=[1, 1, 1, 1]),
        dict(strides=[2, 2], auto_pad="SAME_UPPER"),
        dict(strides=[3, 3], auto_pad="SAME_LOWER"),
        dict(strides=[2, 1], dilations=[1, 3], pads=[0, 2, 1, 0]),
    ]
    for attrs in cases:
        y = _run_ort(helper.make_node("Conv", ["x", "w"], ["y"], **attrs), {"x": (1, 2, 13, 14), "w": (4, 2, 3, 3)})
        macs = math.prod(y) * 2 * 3 * 3
        assert flops("Conv", [(1, 2, 13, 14), (4, 2, 3, 3)], None, **attrs) == 2 * macs, attrs


def test_conv_transpose() -> None:
    # every input element is scattered into Cout/group * kh * kw outputs
    macs = 1 * 4 * 5 * 5 * (2 * 3 * 3)
    out = 2 * (5 - 1) + 3  # stride * (in - 1) + kernel = 11
    got = flops("ConvTranspose", [(1, 4, 5, 5), (4, 2, 3, 3), (2,)], [(1, 2, out, out)], strides=[2, 2])
    assert got == 2 * macs + 2 * out * out
    grouped = flops("ConvTranspose", [(1, 4, 5, 5), (4, 3, 3, 3)], [(1, 6, 7, 7)], group=2)
    assert grouped == 2 * (4 * 5 * 5 * 3 * 3 * 3)


def test_conv_transpose_bias_uses_formula_output() -> None:
    # output_padding 1, pads 1+1: 2*(5-1) + 1 + 3 - 2 = 10
    got = flops("ConvTranspose", [(1, 4, 5, 5), (4, 2, 3, 3), (2,)], [(1, 2, 10, 10)], strides=[2, 2],
                pads=[1, 1, 1, 1], output_padding=[1, 1])
    assert got == 2 * (4 * 25 * 2 * 9) + 2 * 10 * 10


# -- matrix products ------------------------------------------------------------------------------


def test_gemm_trans_alpha_beta() -> None:
    # A is [K=4, M=3] transposed, B is [N=5, K=4] transposed
    m, k, n = 3, 4, 5
    assert flops("Gemm", [(k, m), (n, k)], [(m, n)], transA=1, transB=1) == 2 * m * n * k
    # C broadcast from [N]: one add per output element
    assert flops("Gemm", [(k, m), (n, k), (n,)], [(m, n)], transA=1, transB=1) == 2 * m * n * k + m * n
    # alpha != 1 multiplies every product, beta != 1 scales C: one more each per output element
    got = flops("Gemm", [(m, k), (k, n), (1, n)], [(m, n)], alpha=2.0, beta=0.5)
    assert got == 2 * m * n * k + m * n + 2 * m * n
    assert flops("Gemm", [(m, k), (k, n), (m, n)], [(m, n)], beta=0.0) == 2 * m * n * k


def test_matmul_broadcasts_batch_dims() -> None:
    # [2,1,4,5] x [3,5,6] -> [2,3,4,6], K = 5
    assert flops("MatMul", [(2, 1, 4, 5), (3, 5, 6)], [(2, 3, 4, 6)]) == 2 * (2 * 3 * 4 * 6 * 5)


def test_matmul_one_d_operands() -> None:
    assert flops("MatMul", [(5,), (5, 6)], [(6,)]) == 2 * 5 * 6
    assert flops("MatMul", [(4, 5), (5,)], [(4,)]) == 2 * 4 * 5
    assert flops("MatMul", [(5,), (5,)], [()]) == 2 * 5
    assert flops("MatMul", [(7,), (2, 7, 3)], [(2, 3)]) == 2 * (2 * 7 * 3)


def test_matmul_mismatch_is_unknown_not_zero() -> None:
    assert cost("MatMul", [(4, 5), (6, 7)]).flops is None


def test_einsum_matches_matmul() -> None:
    assert flops("Einsum", [(2, 3, 4), (2, 4, 5)], [(2, 3, 5)], equation="bij,bjk->bik") == 2 * 2 * 3 * 4 * 5
    assert flops("Einsum", [(2, 8, 3, 4), (2, 8, 5, 4)], None, equation="...ij,...kj->...ik") == 2 * 16 * 3 * 5 * 4
    assert flops("Einsum", [(3, 4), (4, 5)], None, equation="ij,jk") == 2 * 3 * 4 * 5  # implicit "->ik"
    # a pure transpose does no arithmetic; a sum reduces every element once
    assert flops("Einsum", [(3, 4)], None, equation="ij->ji") == 0
    assert flops("Einsum", [(3, 4)], None, equation="ij->i") == 12


def test_fused_matmul_transposes_and_alpha() -> None:
    # transBatchA moves A's dim 0 next to the last: [4, 2, 3] -> [2, 4, 3]; transB: [2,5,3] -> [2,3,5]
    got = flops("FusedMatMul", [(4, 2, 3), (2, 5, 3)], [(2, 4, 5)], domain="com.microsoft",
                transBatchA=1, transB=1, alpha=0.125)
    assert got == 2 * (2 * 4 * 5 * 3) + 2 * 4 * 5  # + one multiply per output element for alpha


def test_matmul_nbits() -> None:
    m, k, n = 8, 64, 32
    c = cost("MatMulNBits", [(1, m, k), (n, 2, 16), (n, 2)], [(1, m, n)], domain="com.microsoft",
             K=k, N=n, bits=4, block_size=32)
    assert c.flops == 2 * m * k * n


# -- pooling ----------------------------------------------------------------------------------------


def test_pool_ceil_mode() -> None:
    # k=3 s=2 on 6: floor -> (6-3)//2 + 1 = 2, ceil -> ceil(3/2) + 1 = 3
    assert flops("MaxPool", [(1, 1, 6, 6)], [(1, 1, 2, 2)], kernel_shape=[3, 3], strides=[2, 2]) == 2 * 2 * 9
    assert flops("MaxPool", [(1, 1, 6, 6)], [(1, 1, 3, 3)], kernel_shape=[3, 3], strides=[2, 2],
                 ceil_mode=1) == 3 * 3 * 9
    # a last window that would start inside the end padding is dropped: 6 + pad 1, k=2 s=2 -> 3
    assert flops("AveragePool", [(1, 2, 6, 6)], [(1, 2, 3, 3)], kernel_shape=[2, 2], strides=[2, 2],
                 pads=[0, 0, 1, 1], ceil_mode=1) == 2 * 3 * 3 * 4


def test_pool_pads_dilations_match_onnxruntime() -> None:
    cases: list[dict[str, Any]] = [
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1),
        dict(kernel_shape=[3, 2], strides=[2, 3], dilations=[2, 1], ceil_mode=1),
        dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID", ceil_mode=1),
    ]
    for attrs in cases:
        y = _run_ort(helper.make_node("MaxPool", ["x"], ["y"], **attrs), {"x": (1, 3, 11, 12)})
        k = math.prod(attrs["kernel_shape"])
        assert flops("MaxPool", [(1, 3, 11, 12)], None, **attrs) == math.prod(y) * k, attrs


def test_global_pools_and_reductions_count_inputs() -> None:
    assert flops("GlobalAveragePool", [(2, 64, 7, 7)], [(2, 64, 1, 1)]) == 2 * 64 * 7 * 7
    assert flops("GlobalMaxPool", [(2, 64, 7, 7)], [(2, 64, 1, 1)]) == 2 * 64 * 7 * 7
    assert flops("ReduceMean", [(4, 10, 16)], [(4, 1, 16)], axes=[1]) == 4 * 10 * 16
    assert flops("ReduceLogSumExp", [(4, 10), (1,)], [(4,)], keepdims=0) == 40


# -- recurrent --------------------------------------------------------------------------------------


def test_lstm_bidirectional_with_bias() -> None:
    seq, batch, inp, hid, dirs = 5, 2, 3, 4, 2
    macs_per_step = 4 * hid * (inp + hid)  # 4 gates x (input + recurrent MatMul) per batch row
    gate_math = 13 * hid  # see cost/onnx/nn.py: gate joins, activations, cell update
    bias = 2 * 4 * hid  # Wb and Rb per gate
    expected = seq * dirs * batch * (2 * macs_per_step + gate_math + bias)
    got = flops("LSTM", [(seq, batch, inp), (dirs, 4 * hid, inp), (dirs, 4 * hid, hid), (dirs, 8 * hid)],
                [(seq, dirs, batch, hid)], hidden_size=hid, direction="bidirectional")
    assert got == expected == 6160


def test_gru_and_rnn_batch_first_layout() -> None:
    seq, batch, inp, hid = 6, 3, 5, 4
    gru = flops("GRU", [(batch, seq, inp), (1, 3 * hid, inp), (1, 3 * hid, hid)], None, hidden_size=hid, layout=1)
    assert gru == seq * batch * (2 * 3 * hid * (inp + hid) + 10 * hid)
    rnn = flops("RNN", [(seq, batch, inp), (1, hid, inp), (1, hid, hid), (1, 2 * hid)], None, hidden_size=hid)
    assert rnn == seq * batch * (2 * hid * (inp + hid) + (2 + 2) * hid)


# -- elementwise, norms, softmax ------------------------------------------------------------------


def test_elementwise_broadcasting() -> None:
    # [2,3,1] + [4] -> [2,3,4]: one add per output element
    assert flops("Add", [(2, 3, 1), (4,)], [(2, 3, 4)]) == 24
    assert flops("Where", [(2, 1, 4), (3, 1), ()], [(2, 3, 4)]) == 24
    assert flops("Sum", [(5,), (5,), (1,)], [(5,)]) == 2 * 5  # k-1 adds for k inputs
    assert flops("Relu", [(3, 7)], [(3, 7)]) == 21
    assert flops("Erf", [(3, 7)]) == 21  # transcendental ops count 1 too
    # Clip's scalar min/max do not enlarge anything
    assert flops("Clip", [(1, 8, 4, 4), (), ()], [(1, 8, 4, 4)]) == 128
    c = cost("Mul", [(1000,), (1000,)], [(1000,)])
    assert (c.bytes_read, c.bytes_written) == (8000, 4000)


def test_same_tensor_twice_is_read_once() -> None:
    x = t((10,), "x")
    c = node_cost("Mul", "", {}, [x, x], [t((10,), "y")])
    assert (c.flops, c.bytes_read) == (10, 40)


def test_norms_softmax_gelu_per_element() -> None:
    n = 2 * 8 * 16
    assert flops("Softmax", [(2, 8, 16)], [(2, 8, 16)], axis=-1) == 5 * n
    assert flops("LayerNormalization", [(2, 8, 16), (16,), (16,)], [(2, 8, 16)]) == 8 * n
    assert flops("BatchNormalization", [(2, 8, 4, 4)] + [(8,)] * 4, [(2, 8, 4, 4)]) == 2 * 2 * 8 * 16
    assert flops("Gelu", [(n,)]) == 5 * n  # Div, Erf, Add, Mul, Mul
    assert flops("Gelu", [(n,)], approximate="tanh") == 8 * n


def test_fused_elementwise_cost_what_they_replace() -> None:
    n = 4 * 16
    ms = "com.microsoft"
    assert flops("BiasGelu", [(4, 16), (16,)], [(4, 16)], domain=ms) == (1 + 5) * n
    assert flops("FastGelu", [(4, 16), (16,)], [(4, 16)], domain=ms) == (8 + 1) * n
    assert flops("SkipLayerNormalization", [(4, 16), (4, 16), (16,), (16,), (16,)], [(4, 16)],
                 domain=ms) == (1 + 1 + 8) * n
    assert flops("SkipSimplifiedLayerNormalization", [(4, 16), (4, 16), (16,)], [(4, 16)], domain=ms) == 5 * n
    assert flops("BiasSoftmax", [(2, 4, 16), (2, 1, 16)], [(2, 4, 16)], domain=ms) == 6 * 2 * n


def test_fused_conv_adds_activation_and_residual() -> None:
    out = 1 * 8 * 6 * 6
    conv = 2 * out * 4 * 9 + out  # MACs and bias
    base = [(1, 4, 8, 8), (8, 4, 3, 3), (8,)]
    assert flops("FusedConv", base, [(1, 8, 6, 6)], domain="com.microsoft", activation="Relu") == conv + out
    # NCHWc Conv with the residual Add fused as its 4th input ("Sum")
    got = flops("Conv", [*base, (1, 8, 6, 6)], [(1, 8, 6, 6)], domain="com.microsoft.nchwc", activation="Relu")
    assert got == conv + 2 * out
    assert flops("ReorderOutput", [(1, 8, 6, 6)], [(1, 8, 6, 6)], domain="com.microsoft.nchwc", channels=8) == 0


def test_nhwc_conv_reads_channels_last() -> None:
    # X [N, H, W, C]; W stays [Cout, Cin, kh, kw]
    got = flops("NhwcConv", [(1, 10, 10, 3), (16, 3, 3, 3)], [(1, 8, 8, 16)], domain="com.microsoft")
    assert got == 2 * (8 * 8 * 16 * 27)
    got = flops("Conv", [(1, 10, 10, 3), (16, 3, 3, 3)], [(1, 8, 8, 16)], domain="com.ms.internal.nhwc")
    assert got == 2 * (8 * 8 * 16 * 27)


# -- attention ------------------------------------------------------------------------------------


def test_contrib_attention() -> None:
    b, s, hidden, heads = 2, 8, 16, 4
    head = hidden // heads
    projection = 2 * b * s * hidden * (3 * hidden)  # input [B,S,H] x weights [H, 3H]
    bias = b * s * 3 * hidden
    scores = b * heads * s * s
    qk = 2 * scores * head
    av = 2 * scores * head
    per_score = 1 + 5 + 1  # scale, softmax, mask
    got = flops("Attention", [(b, s, hidden), (hidden, 3 * hidden), (3 * hidden,), (b, s)], [(b, s, hidden)],
                domain="com.microsoft", num_heads=heads)
    assert got == projection + bias + qk + av + scores * per_score == 37120
    # the output-shape inference used by graph_costs agrees with ONNX Runtime
    node = helper.make_node("Attention", ["x", "w", "bias", "mask"], ["y"], domain="com.microsoft", num_heads=heads)
    y = _run_ort(node, {"x": (b, s, hidden), "w": (hidden, 3 * hidden), "bias": (3 * hidden,)},
                 {"mask": np.ones((b, s), np.int32)})
    assert y == (b, s, hidden)


def test_contrib_attention_with_past_and_unequal_heads() -> None:
    b, s, past, d_in, heads = 1, 4, 6, 8, 2
    sizes = [8, 8, 12]  # qkv_hidden_sizes: V wider than Q/K
    total = s + past
    scores = b * heads * s * total
    expected = (2 * b * s * d_in * sum(sizes) + 2 * scores * (8 // heads) + 2 * scores * (12 // heads)
                + scores * (1 + 5))
    got = flops("Attention", [(b, s, d_in), (d_in, 28), None, None, (2, b, heads, past, 4)], None,
                domain="com.microsoft", num_heads=heads, qkv_hidden_sizes=sizes)
    assert got == expected


def test_multi_head_attention() -> None:
    b, s, kv, heads, d = 2, 5, 7, 4, 32
    scores = b * heads * s * kv
    got = flops("MultiHeadAttention", [(b, s, d), (b, kv, d), (b, kv, d)], [(b, s, d)],
                domain="com.microsoft", num_heads=heads)
    assert got == 2 * scores * (d // heads) * 2 + scores * (1 + 5)


# -- data movement, unknowns ----------------------------------------------------------------------


def test_data_movement_is_zero_flops_with_real_bytes() -> None:
    c = cost("Transpose", [(2, 3, 4)], [(4, 3, 2)], perm=[2, 1, 0])
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 96, 96)
    c = cost("Reshape", [(2, 3, 4), (2,)], [(6, 4)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 96 + 8, 96)
    assert cost("Resize", [(1, 3, 4, 4), None, (4,)], [(1, 3, 8, 8)], mode="nearest").flops == 0
    # bilinear: 4 taps per output element, a multiply-add each
    assert cost("Resize", [(1, 3, 4, 4), None, (4,)], [(1, 3, 8, 8)], mode="linear").flops == 2 * 4 * 3 * 64


def test_gather_reads_only_gathered_rows() -> None:
    table = t((30000, 64), "emb")
    ids = t((2, 8), "ids", "int64")
    c = node_cost("Gather", "", {"axis": 0}, [table, ids], [t((2, 8, 64), "rows")])
    assert c.flops == 0
    assert c.bytes_read == 2 * 8 * 64 * 4 + 2 * 8 * 8
    assert node_cost("Shape", "", {}, [table], [t((2,), "s", "int64")]).bytes_read == 0


def test_unknown_op_is_none_not_zero() -> None:
    c = cost("FrobnicateTensor", [(4, 4)], [(4, 4)], domain="example.custom")
    assert c.flops is None
    assert (c.bytes_read, c.bytes_written) == (64, 64)
    assert not is_known("FrobnicateTensor", "example.custom")


def test_unknown_shapes_give_none() -> None:
    sym = node_cost("Conv", "", {}, [t(("N", 3, 8, 8), "x"), t((4, 3, 3, 3), "w")], [t(("N", 4, 6, 6), "y")])
    assert sym.flops is None and sym.bytes_read is None and sym.bytes_written is None
    missing = node_cost("MatMul", "", {}, [t(None, "a"), t((4, 5), "b")], [t(None, "y")])
    assert missing.flops is None and missing.bytes is None
    assert cost("Add", [None, (3,)]).flops == 3  # a None input is an omitted optional input


def test_malformed_node_is_unknown_not_a_crash() -> None:
    # pads for 1 spatial axis on a 2-D conv; a 2-D input to LSTM
    assert cost("Conv", [(1, 3, 8, 8), (4, 3, 3, 3)], pads=[1, 1]).flops is None
    assert cost("LSTM", [(5, 3), (1, 16, 3), (1, 16, 4)], hidden_size=4).flops is None


def test_known_op_types_cover_the_required_set() -> None:
    known = known_op_types()
    required = {
        ("", op) for op in (
            "Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool",
            "GlobalMaxPool", "BatchNormalization", "LayerNormalization", "InstanceNormalization",
            "GroupNormalization", "Softmax", "LogSoftmax", "LSTM", "GRU", "RNN", "Einsum", "Add", "Sub", "Mul",
            "Div", "Relu", "Max", "Min", "Pow", "Sqrt", "Where", "Clip", "Exp", "Erf", "Tanh", "Sigmoid", "Log",
            "Gelu", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
            "ReduceLogSumExp", "Reshape", "Transpose", "Gather", "Concat", "Slice", "Split", "Squeeze",
            "Unsqueeze", "Flatten", "Identity", "Cast", "Shape", "Expand", "Pad", "Tile", "Constant",
            "ConstantOfShape", "Range", "ScatterND", "Resize", "SimplifiedLayerNormalization",
        )
    } | {
        ("com.microsoft", op) for op in (
            "FusedConv", "FusedMatMul", "FusedGemm", "BiasGelu", "FastGelu", "Gelu", "QuickGelu", "BiasAdd",
            "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization",
            "Attention", "MultiHeadAttention", "MatMulNBits", "TransposeMatMul", "NhwcConv", "BiasSoftmax",
        )
    } | {
        ("com.microsoft.nchwc", op) for op in (
            "Conv", "ReorderInput", "ReorderOutput", "MaxPool", "AveragePool", "GlobalAveragePool",
            "GlobalMaxPool", "Upsample",
        )
    }
    assert required <= known, sorted(required - known)
    assert is_known("Conv") and is_known("Conv", "ai.onnx") and is_known("Conv", "com.microsoft.nchwc")


# -- whole graphs through ONNX Runtime's optimizer ------------------------------------------------

LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def _optimize(model: onnx.ModelProto, level: str, out: Path) -> onnx.ModelProto:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3  # level "all" warns that NCHWc graphs are machine specific
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return onnx.load(str(out))


def _run_ort(node: onnx.NodeProto, float_inputs: dict[str, tuple[int, ...]],
             other_inputs: dict[str, np.ndarray] | None = None) -> tuple[int, ...]:
    """Run one node in ONNX Runtime and return its output shape."""
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {n: rng.standard_normal(s).astype(np.float32) for n, s in float_inputs.items()}
    feeds.update(other_inputs or {})
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in feeds.items()]
    graph = helper.make_graph([node], "one", ins, [helper.make_tensor_value_info(node.output[0], 1, None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return tuple(sess.run(None, feeds)[0].shape)


def _init(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def _cnn(odd_channels: int = 48) -> onnx.ModelProto:
    """Conv+BN+Relu blocks (one depthwise, one with ``odd_channels`` outputs), a residual Add,
    pools and a Gemm head. Channel counts that are multiples of 16 need no NCHWc padding on any
    CPU (ORT's block is 8 or 16 channels)."""
    rng = np.random.default_rng(0)
    nodes, inits, x, c = [], [], "x", 3
    blocks = [(16, 3, 2, 1), (16, 3, 1, 16), (32, 1, 1, 1), (odd_channels, 3, 1, 1), (32, 3, 1, 1)]
    for i, (co, k, s, g) in enumerate(blocks):
        inits += [_init(rng, f"w{i}", (co, c // g, k, k)), _init(rng, f"b{i}", (co,))]
        inits += [_init(rng, f"s{i}", (co,)), _init(rng, f"o{i}", (co,)), _init(rng, f"m{i}", (co,))]
        inits.append(numpy_helper.from_array(np.ones(co, np.float32), f"v{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=[k, k], strides=[s, s],
                                   pads=[k // 2] * 4, group=g),
                  helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"o{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"])]
        x, c = f"r{i}", co
    inits += [_init(rng, "wr", (32, 32, 3, 3)), _init(rng, "fw", (10, 32)), _init(rng, "fb", (10,))]
    nodes += [
        helper.make_node("MaxPool", [x], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["mp", "wr"], ["cr"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["cr", "mp"], ["res"]),
        helper.make_node("Relu", ["res"], ["rr"]),
        helper.make_node("AveragePool", ["rr"], ["ap"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["fl"]),
        helper.make_node("Gemm", ["fl", "fw", "fb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _transformer_block(b: int = 2, s: int = 16, hidden: int = 32, heads: int = 4) -> onnx.ModelProto:
    """One BERT layer: Q/K/V MatMul+Add, scaled softmax attention, LayerNorm, erf-GELU MLP."""
    rng = np.random.default_rng(1)
    d = hidden // heads
    inits = [numpy_helper.from_array(np.array([0, 0, heads, d], np.int64), "split"),
             numpy_helper.from_array(np.array([0, 0, hidden], np.int64), "merge"),
             numpy_helper.from_array(np.array(math.sqrt(d), np.float32), "sqrt_d"),
             numpy_helper.from_array(np.array(math.sqrt(2), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    nodes = []
    for n in "qkv":
        inits += [_init(rng, f"w{n}", (hidden, hidden)), _init(rng, f"b{n}", (hidden,))]
        nodes += [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}m"]),
                  helper.make_node("Add", [f"{n}m", f"b{n}"], [f"{n}a"]),
                  helper.make_node("Reshape", [f"{n}a", "split"], [f"{n}r"])]
    inits += [_init(rng, name, shape) for name, shape in [
        ("wo", (hidden, hidden)), ("bo", (hidden,)), ("g1", (hidden,)), ("be1", (hidden,)),
        ("w1", (hidden, 4 * hidden)), ("b1", (4 * hidden,)), ("w2", (4 * hidden, hidden)), ("b2", (hidden,)),
        ("g2", (hidden,)), ("be2", (hidden,))]]
    nodes += [
        helper.make_node("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qt", "kt"], ["qk"]),
        helper.make_node("Div", ["qk", "sqrt_d"], ["qks"]),
        helper.make_node("Softmax", ["qks"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "vt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctxt", "merge"], ["ctxr"]),
        helper.make_node("MatMul", ["ctxr", "wo"], ["o"]),
        helper.make_node("Add", ["o", "bo"], ["ob"]),
        helper.make_node("Add", ["ob", "x"], ["res1"]),
        helper.make_node("LayerNormalization", ["res1", "g1", "be1"], ["ln1"], axis=-1),
        helper.make_node("MatMul", ["ln1", "w1"], ["f1"]),
        helper.make_node("Add", ["f1", "b1"], ["f1b"]),
        helper.make_node("Div", ["f1b", "sqrt2"], ["gd"]),
        helper.make_node("Erf", ["gd"], ["ge"]),
        helper.make_node("Add", ["ge", "one"], ["ga"]),
        helper.make_node("Mul", ["f1b", "ga"], ["gm"]),
        helper.make_node("Mul", ["gm", "half"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["f2"]),
        helper.make_node("Add", ["f2", "b2"], ["f2b"]),
        helper.make_node("Add", ["f2b", "ln1"], ["res2"]),
        helper.make_node("LayerNormalization", ["res2", "g2", "be2"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, s, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _lstm() -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    seq, batch, inp, hid = 10, 2, 8, 16
    inits = [_init(rng, "W", (1, 4 * hid, inp)), _init(rng, "R", (1, 4 * hid, hid)), _init(rng, "B", (1, 8 * hid)),
             _init(rng, "W2", (2, 3 * hid, hid)), _init(rng, "R2", (2, 3 * hid, hid)),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y"], hidden_size=hid),
             helper.make_node("Squeeze", ["Y", "ax"], ["Ys"]),
             helper.make_node("GRU", ["Ys", "W2", "R2"], ["Y2"], hidden_size=hid, direction="bidirectional"),
             helper.make_node("ReduceMean", ["Y2"], ["y"], axes=[0, 1], keepdims=0)]
    graph = helper.make_graph(nodes, "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, hid])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _assert_fully_costed(model: onnx.ModelProto) -> int:
    costs = graph_costs(model)
    assert len(costs) == len(model.graph.node)
    unknown = [(n.domain, n.op_type, n.name) for n, c in costs if c.flops is None or c.bytes is None]
    assert not unknown, unknown
    return sum(c.flops or 0 for _, c in costs)


@pytest.mark.parametrize("builder", [_cnn, _transformer_block, _lstm], ids=["cnn", "transformer", "lstm"])
def test_ort_optimized_graphs_are_fully_costed(builder: Callable[[], onnx.ModelProto], tmp_path: Path) -> None:
    """Every op type ORT leaves at every level is known, every node gets FLOPs and bytes (NCHWc
    tensors have no value_info in the saved graph: graph_costs infers them), and fusing does not
    change the total beyond what the optimizer really removes (BatchNormalization folding)."""
    model = builder()
    base = _assert_fully_costed(model)
    removed = sum(c.flops or 0 for n, c in graph_costs(model) if n.op_type == "BatchNormalization")
    for level in LEVELS:
        optimized = _optimize(model, level, tmp_path / f"{level}.onnx")
        total = _assert_fully_costed(optimized)
        expected = base if level == "disable" else base - removed
        assert total == pytest.approx(expected, rel=0.001), level


def test_nchwc_conv_counts_real_channels(tmp_path: Path) -> None:
    """ORT pads a 20-channel Conv to its NCHWc block (8 or 16 channels, by CPU) and pads its weights.
    graph_costs counts the real channels: a Conv of the level-all graph costs what the same Conv of
    the extended graph (same fusions, plain layout) costs, the padded work is padded_flops, the
    padded Convs are those whose weights differ from the extended graph's, and the totals agree."""
    model = _cnn(odd_channels=20)
    extended, blocked = (_optimize(model, level, tmp_path / f"{level}.onnx") for level in ("extended", "all"))

    def convs(graph: onnx.ModelProto) -> list[tuple[onnx.NodeProto, tuple[int, ...], Cost]]:
        dims = {i.name: tuple(i.dims) for i in graph.graph.initializer}
        return [(n, dims[n.input[1]], c) for n, c in graph_costs(graph) if n.op_type in ("Conv", "FusedConv")]

    plain, laid_out = convs(extended), convs(blocked)
    # one Conv per Conv, in graph order: the model is a chain, so the order is its data flow
    assert len(plain) == len(laid_out) == 6
    padded = 0
    for (plain_node, plain_dims, plain_cost), (node, dims, got) in zip(plain, laid_out, strict=True):
        if plain_node.op_type == "FusedConv" and len(node.input) < 4:  # the same fusions on both sides
            assert got.flops == plain_cost.flops
        if dims != plain_dims:
            padded += 1
            assert got.padded_flops is not None and got.flops is not None and got.padded_flops > got.flops
        else:
            assert got.padded_flops is None
    # the residual Add and Relu the extended graph keeps apart are in the level-all Conv (Sum, activation)
    assert sum(c.flops or 0 for _, c in graph_costs(blocked)) == sum(c.flops or 0 for _, c in graph_costs(extended))
    if not padded:
        pytest.skip("ONNX Runtime padded no channel of this model on this CPU")


def test_ort_level_all_uses_nchwc_and_fused_ops(tmp_path: Path) -> None:
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    for builder in (_cnn, _transformer_block):
        for level in ("extended", "all"):
            optimized = _optimize(builder(), level, tmp_path / f"{builder.__name__}{level}.onnx")
            seen.update((n.domain, n.op_type) for n in optimized.graph.node)
    assert ("com.microsoft", "FusedConv") in seen
    assert ("com.microsoft.nchwc", "Conv") in seen
    assert ("com.microsoft", "SkipLayerNormalization") in seen


def test_graph_costs_infers_shapes_through_contrib_ops() -> None:
    """A saved ORT graph has no value_info past its first contrib op: shapes are inferred."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("ReorderInput", ["x"], ["xb"], domain="com.microsoft.nchwc"),
        helper.make_node("Conv", ["xb", "w", "b"], ["cb"], domain="com.microsoft.nchwc", activation="Relu",
                         kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["cb"], ["pb"], domain="com.microsoft.nchwc", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("ReorderOutput", ["pb"], ["p"], domain="com.microsoft.nchwc", channels=16),
        helper.make_node("Reshape", ["p", "shape"], ["flat"]),
        helper.make_node("FusedMatMul", ["flat", "fw"], ["y"], domain="com.microsoft", alpha=0.5),
    ]
    inits = [_init(rng, "w", (16, 8, 3, 3)), _init(rng, "b", (16,)), _init(rng, "fw", (16 * 4 * 4, 10)),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    graph = helper.make_graph(nodes, "nchwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    opsets = [helper.make_opsetid(d, v) for d, v in [("", 17), ("com.microsoft", 1), ("com.microsoft.nchwc", 1)]]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    costs = {n.output[0]: c for n, c in graph_costs(model)}
    conv_out = 16 * 8 * 8  # stride 2 on 16x16
    assert costs["cb"].flops == 2 * conv_out * 8 * 9 + conv_out + conv_out  # MACs, bias, Relu
    assert costs["pb"].flops == 16 * 4 * 4 * 4
    assert costs["p"].bytes_written == 4 * 16 * 4 * 4
    assert costs["y"].flops == 2 * 256 * 10 + 10  # [1, 256] x [256, 10], alpha
    assert costs["y"].bytes_written == 40


@pytest.mark.parametrize("symbol", ["sequence", "unk__0"])
def test_runtime_shapes_reach_tensors_the_exporter_declared_symbolic(symbol: str) -> None:
    """An exporter that declares every tensor (value_info) with the input's symbols (the dynamo exporter), or
    with symbols of its own (ONNX Runtime's ``unk__N``): the given input shapes size the input's symbols
    everywhere, and the shape arithmetic after a contrib op, which onnx's inference stops at, is evaluated
    (Shape, Gather), so a tensor whose shape is computed (a Range over the sequence length) is costed too."""
    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft"),
             helper.make_node("Shape", ["g"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["posf", "posf"], ["y"])]
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("zero", 0), ("one", 1))]
    graph = helper.make_graph(nodes, "positions", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 ["batch", "sequence"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [symbol])], consts,
                              value_info=[helper.make_tensor_value_info("pos", TensorProto.INT64, [symbol]),
                                          helper.make_tensor_value_info("posf", TensorProto.FLOAT, [symbol])])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    costs = {n.output[0]: c for n, c in graph_costs(model, shapes={"x": TensorInfo("x", (2, 128), F32)})}
    assert costs["y"].flops == 128


def test_integer_matmul_to_float_outputs_floats() -> None:
    """com.microsoft MatMulIntegerToFloat (dynamic quantization's MatMul) multiplies integers into its scale's
    type: the MatMul after it does floating-point work."""
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.integers(-8, 8, (64, 32)).astype(np.int8), "b"),
             numpy_helper.from_array(np.array(0.1, np.float32), "sa"),
             numpy_helper.from_array(np.array(0.1, np.float32), "sb"), _init(rng, "w", (32, 16))]
    nodes = [helper.make_node("MatMulIntegerToFloat", ["a", "b", "sa", "sb"], ["y"], domain="com.microsoft"),
             helper.make_node("MatMul", ["y", "w"], ["z"])]
    graph = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("a", TensorProto.UINT8, [8, 64])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    costs = {n.output[0]: c for n, c in graph_costs(helper.make_model(graph, opset_imports=opsets, ir_version=9))}
    assert costs["z"].flops == 2 * 8 * 32 * 16 and not costs["z"].int_ops


def test_quantized_conv_channels_last_shape() -> None:
    """ONNX Runtime's NHWC transformer turns a QLinearConv channels-last (com.microsoft, channels_last=1)."""
    rng = np.random.default_rng(5)
    scalars = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in (
        ("xs", 0.1, np.float32), ("xz", 0, np.uint8), ("ws", 0.1, np.float32), ("wz", 0, np.int8),
        ("ys", 0.1, np.float32), ("yz", 0, np.uint8))]
    w = numpy_helper.from_array(rng.integers(-8, 8, (16, 3, 3, 3)).astype(np.int8), "w")
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    pool = helper.make_node("NhwcMaxPool", ["y"], ["p"], domain="com.microsoft", kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph([node, pool], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 8, 3])],
                              [helper.make_tensor_value_info("p", TensorProto.UINT8, None)], [*scalars, w])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    shapes = tensor_infos(helper.make_model(graph, opset_imports=opsets, ir_version=9))
    assert shapes["y"].shape == (1, 8, 8, 16) and shapes["p"].shape == (1, 4, 4, 16)


def test_graph_costs_takes_runtime_shapes() -> None:
    model = _cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    before = graph_costs(model)
    assert before[0][1].flops is None  # symbolic batch: not static
    after = graph_costs(model, shapes={"x": TensorInfo("x", (2, 3, 32, 32), F32)})
    assert all(c.flops is not None for _, c in after)
    assert model_flops(_cnn()) * 2 == sum(c.flops or 0 for _, c in after)  # batch 2 doubles everything


# -- published figures (layerperf.models.zoo) ------------------------------------------------------------

zoo: Any
try:
    from layerperf.models import zoo
except ImportError:  # the zoo is optional for this module: only the published-figure tests need it
    zoo = None
needs_zoo = pytest.mark.skipif(not hasattr(zoo, "build"), reason="layerperf.models.zoo.build not available")
MAC_OPS = {"Conv", "Gemm", "MatMul"}


@pytest.fixture(scope="module")
def zoo_model() -> Callable[[str], onnx.ModelProto]:
    cache: dict[str, onnx.ModelProto] = {}

    def get(name: str) -> onnx.ModelProto:
        if name not in cache:
            cache[name] = zoo.build(name)
        return cache[name]

    return get


@needs_zoo
@pytest.mark.parametrize(("name", "gmacs"), [("resnet50", 4.1), ("resnet18", 1.8), ("vgg16", 15.5)])
def test_published_macs(zoo_model: Callable[[str], onnx.ModelProto], name: str, gmacs: float) -> None:
    macs = model_flops(zoo_model(name)) / 2
    assert macs == pytest.approx(gmacs * 1e9, rel=0.03)


@needs_zoo
def test_published_macs_mobilenet_v2(zoo_model: Callable[[str], onnx.ModelProto]) -> None:
    """MobileNetV2's 300M MACs count Conv and Gemm only. Its many thin layers make the rest
    visible: BatchNormalization (2 FLOPs per element) and Clip add about 3.3%, so the whole-model
    figure is compared at 4% and the MAC-bearing ops alone at 3%."""
    costs = graph_costs(zoo_model("mobilenet_v2"))
    mac_ops = sum(c.flops or 0 for n, c in costs if n.op_type in MAC_OPS) / 2
    assert mac_ops == pytest.approx(0.30e9, rel=0.03)
    assert model_flops(zoo_model("mobilenet_v2")) / 2 == pytest.approx(0.30e9, rel=0.04)


@needs_zoo
@pytest.mark.parametrize("name", ["resnet50", "bert-base"])
def test_ort_level_all_keeps_the_cost(zoo_model: Callable[[str], onnx.ModelProto], name: str,
                                      tmp_path: Path) -> None:
    model = zoo_model(name)
    optimized = _optimize(model, "all", tmp_path / "all.onnx")
    assert _assert_fully_costed(optimized) == pytest.approx(model_flops(model), rel=0.02)


def test_a_layer_holds_its_cost() -> None:
    from layerperf.data.profile import Layer

    layer = Layer(name="c", op_type="Conv", flops=200, bytes_read=60, bytes_written=40, int_ops=0, padded_flops=240)
    assert layer.cost == Cost(200, 60, 40, 0, 240)
    assert (layer.bytes, layer.flops_as_stored, layer.cost.intensity) == (100, 240, 2.0)
    unknown = Layer(name="d", op_type="Det", bytes_read=8)
    assert (unknown.cost.flops, unknown.bytes, unknown.cost.intensity) == (None, None, None)
