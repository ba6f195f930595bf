"""ONNX Runtime's contrib and fused ops: com.microsoft, com.microsoft.nchwc, com.ms.internal.nhwc.

A fused op costs what the ops it replaced cost under the same conventions (FusedConv = Conv +
activation, BiasGelu = Add + the 5 ops of erf-GELU, ...), so the total of a graph optimized by
ONNX Runtime stays comparable with the total of the graph it came from.
"""

from __future__ import annotations

import math
from functools import partial

from layerperf.cost.onnx.elementwise import LAYER_NORM, RMS_NORM, SOFTMAX, like_x_numel, out_numel, per_x
from layerperf.cost.onnx.movement import _resize_taps_flops, zero
from layerperf.cost.onnx.nn import (
    conv,
    conv_out_shape,
    conv_transpose,
    gemm,
    gemm_mnk,
    global_pool,
    lrn,
    pool,
)
from layerperf.cost.onnx.node import BytesFn, FlopsFn, Node, OpKey, total_bytes
from layerperf.cost.shapes import ShapeUnknown, matmul_dims, transposed

ERF_GELU = 5  # Div, Erf, Add, Mul, Mul
TANH_GELU = 8  # Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul


def _activation(node: Node) -> int:
    """FLOPs per element of a fused ``activation`` attribute (Relu, Clip, Sigmoid, ...): 1, as the
    standalone op; 0 when there is none."""
    return 1 if node.attr_str("activation", "") else 0


def _out_elems(node: Node, fallback_shape: tuple[int, ...] | None = None) -> int:
    return math.prod(node.out_shape_or(lambda: fallback_shape or node.shape(0)))


# -- fused convolutions and matrix products ------------------------------------------------------


def fused_conv(node: Node, channels_last: bool = False) -> int:
    """Conv, plus the activation, plus one add per output element for the residual input 3
    (FusedConv's Z, NCHWc Conv's Sum)."""
    flops = conv(node, channels_last)
    out = math.prod(node.out_shape_or(lambda: conv_out_shape(node, channels_last)))
    return flops + out * (_activation(node) + (1 if node.has(3) else 0))


def fused_gemm(node: Node) -> int:
    m, _, n = gemm_mnk(node)
    return gemm(node) + m * n * _activation(node)


def fused_matmul_dims(node: Node) -> tuple[int, tuple[int, ...]]:
    """(MACs, output shape) of FusedMatMul/TransposeMatMul after its transpose attributes."""
    a = transposed(node.shape(0), bool(node.attr_int("transA", 0)), bool(node.attr_int("transBatchA", 0)))
    b = transposed(node.shape(1), bool(node.attr_int("transB", 0)), bool(node.attr_int("transBatchB", 0)))
    dims = matmul_dims(a, b)
    return dims.macs, dims.out_shape


def fused_matmul(node: Node) -> int:
    """2*MACs, plus one multiply per output element when alpha != 1 (the Mul/Div it absorbed)."""
    macs, out = fused_matmul_dims(node)
    per_out = (1 if node.attr_float("alpha", 1.0) != 1.0 else 0) + _activation(node)
    return 2 * macs + per_out * math.prod(out)


def _nbits_mnk(node: Node) -> tuple[int, int, int]:
    a = node.shape(0)
    k, n = node.attr_int("K", 0), node.attr_int("N", 0)
    if not k or not n or a[-1] != k:
        raise ShapeUnknown("MatMulNBits K/N")
    return math.prod(a[:-1]), k, n


def matmul_nbits(node: Node, bias_input: int | None) -> int:
    """Weight-only quantized MatMul: 2*M*K*N (dequantizing the weights is not counted) + bias."""
    m, k, n = _nbits_mnk(node)
    return 2 * m * k * n + (m * n if bias_input is not None and node.has(bias_input) else 0)


def gemm_fast_gelu(node: Node) -> int:
    dims = matmul_dims(node.shape(0), node.shape(1))
    out = math.prod(dims.out_shape)
    return 2 * dims.macs + out * (TANH_GELU + (1 if node.has(2) else 0))


# -- attention -----------------------------------------------------------------------------------


def _attention_core(b: int, heads: int, s: int, t: int, head_qk: int, head_v: int, masked: bool) -> int:
    """QK^T and AV products plus, per score, scale (1) + softmax (5) + mask/bias add (1)."""
    scores = b * heads * s * t
    return 2 * scores * head_qk + 2 * scores * head_v + scores * (1 + SOFTMAX + (1 if masked else 0))


def attention_parts(node: Node) -> tuple[int, int, int]:
    """ORT Attention as (projection 2*B*S*Din*(Dq+Dk+Dv), projected elements B*S*(Dq+Dk+Dv),
    attention core): input [B,S,Din] x weights [Din, Dq+Dk+Dv], then per head
    softmax(QK^T * scale + mask) V. past [2,B,N,P,H] lengthens the keys to T = P + S."""
    x, w = node.shape(0), node.shape(1)
    if len(x) != 3 or len(w) != 2:
        raise ShapeUnknown("Attention input must be [B,S,D] and weights 2-D")
    batch, seq, d_in = x
    heads = node.attr_int("num_heads", 0)
    sizes = node.attr_ints("qkv_hidden_sizes") or [w[1] // 3] * 3
    if heads <= 0 or sum(sizes) != w[1]:
        raise ShapeUnknown("Attention num_heads/qkv_hidden_sizes")
    d_q, _, d_v = sizes
    if node.attr_int("past_present_share_buffer", 0) and node.has(4):
        raise ShapeUnknown("past length lives in a tensor value")
    total = seq + (node.shape(4)[3] if node.has(4) else 0)
    masked = node.has(3) or node.has(5)
    core = _attention_core(batch, heads, seq, total, d_q // heads, d_v // heads, masked)
    return 2 * batch * seq * d_in * w[1], batch * seq * w[1], core


def attention(node: Node) -> int:
    """The projection, the bias add (one per projected element, when given) and the core."""
    projection, projected, core = attention_parts(node)
    return projection + (projected if node.has(2) else 0) + core


def _mha_lengths(node: Node, heads: int) -> tuple[int, int, int, int, int]:
    """(batch, S, T, head size of Q/K, head size of V) of a MultiHeadAttention node."""
    q = node.shape(0)
    if len(q) == 5:  # packed QKV [B, S, N, 3, H]
        return q[0], q[1], q[1], q[4], q[4]
    batch, seq, d_q = q
    if not node.has(1):
        raise ShapeUnknown("MultiHeadAttention without key")
    k = node.shape(1)
    if len(k) == 5:  # packed KV [B, L, N, 2, H]
        kv_len, head_v = k[1], k[4]
    elif len(k) == 4:  # key already projected and split: [B, N, L, H]
        kv_len, head_v = k[2], node.shape(2)[3]
    else:
        kv_len = k[1]
        v = node.shape(2)
        head_v = v[3] if len(v) == 4 else v[2] // heads
    past = node.shape(6)[2] if node.has(6) and len(k) != 4 else 0
    return batch, seq, past + kv_len, d_q // heads, head_v


def multi_head_attention(node: Node) -> int:
    """Q/K/V already projected: per head softmax(QK^T * scale + bias) V, plus the bias adds on
    the projected Q, K and V (``bias`` input, one add per element)."""
    heads = node.attr_int("num_heads", 0)
    if heads <= 0:
        raise ShapeUnknown("num_heads")
    batch, seq, total, head_qk, head_v = _mha_lengths(node, heads)
    flops = _attention_core(batch, heads, seq, total, head_qk, head_v, node.has(4) or node.has(5))
    if node.has(3):
        kv_len = total - (node.shape(6)[2] if node.has(6) else 0)
        flops += batch * heads * (seq * head_qk + kv_len * (head_qk + head_v))
    return flops


def group_query_attention(node: Node) -> int:
    """GQA: like MultiHeadAttention with kv_num_heads shared K/V heads. Causal masking is not
    discounted; rotary embedding (do_rotary) adds 3 FLOPs per Q and K element. T comes from
    present_key [B, kvN, T, H] when known, else past_key length + S."""
    heads, kv_heads = node.attr_int("num_heads", 0), node.attr_int("kv_num_heads", 0)
    q = node.shape(0)
    if heads <= 0 or kv_heads <= 0 or len(q) != 3:
        raise ShapeUnknown("GroupQueryAttention heads")
    batch, seq, d = q
    head = d // heads if node.has(1) else d // (heads + 2 * kv_heads)
    past = node.shape(3)[2] if node.has(3) else 0
    total = node.out_shape(1)[2] if node.has_out(1) else seq + past
    flops = _attention_core(batch, heads, seq, total, head, head, node.has(10))
    if node.attr_int("do_rotary", 0):
        flops += 3 * batch * seq * (heads + kv_heads) * head
    return flops


def rotary_embedding(node: Node) -> int:
    # x*cos + rotate(x)*sin: 2 multiplies and an add per element.
    return 3 * like_x_numel(node)


# -- elementwise fusions -------------------------------------------------------------------------


def skip_norm(norm: int) -> FlopsFn:
    """Skip(+bias) add then a LayerNorm/RMSNorm: 1 + (1 with bias, input 4 / 3) + norm."""
    def fn(node: Node) -> int:
        bias_index = 4 if norm == LAYER_NORM else 3
        return (1 + (1 if node.has(bias_index) else 0) + norm) * like_x_numel(node)

    return fn


def embed_layer_norm(node: Node) -> int:
    """word + position (+ segment) embedding adds, LayerNorm; the mask reduces to mask_index."""
    batch, seq = node.shape(0)
    hidden = node.shape(2)[1]
    adds = 1 + (1 if node.has(1) and node.has(4) else 0)
    flops = (adds + LAYER_NORM) * batch * seq * hidden
    return flops + (batch * seq if node.has(7) else 0)


def _bias_split_gelu(node: Node) -> int:
    # Bias add on both halves (2 per output element), GELU on one (5), times the other (1).
    x = node.shape(0)
    return (2 + ERF_GELU + 1) * _out_elems(node, (*x[:-1], x[-1] // 2))


def _fast_gelu(node: Node) -> int:
    return (TANH_GELU + (1 if node.has(1) else 0)) * like_x_numel(node)


def _quick_gelu(node: Node) -> int:
    # x * sigmoid(alpha * x): the alpha multiply exists only when alpha != 1.
    return (2 + (1 if node.attr_float("alpha", 1.702) != 1.0 else 0)) * like_x_numel(node)


def _group_norm(node: Node) -> int:
    silu = 2 if node.attr_int("activation", 0) else 0
    return (LAYER_NORM + silu) * like_x_numel(node)


def _skip_group_norm(node: Node) -> int:
    return _group_norm(node) + (1 + (1 if node.has(4) else 0)) * like_x_numel(node)


def _bias_dropout(node: Node) -> int:
    return (1 + (1 if node.has(2) else 0)) * like_x_numel(node)


def _swiglu(node: Node) -> int:
    # G * sigmoid(alpha*G) * (L + beta): 5 per output element; one input holds both halves.
    def half() -> tuple[int, ...]:
        g = node.shape(0)
        return g if node.has(1) else (*g[:-1], g[-1] // 2)

    return 5 * math.prod(node.out_shape_or(half))


def _upsample_nchwc(node: Node) -> int:
    mode = node.attr_str("mode", "nearest")
    if mode == "nearest":
        return 0
    x = node.shape(0)
    scales = node.attr_ints("scales") or []
    out = node.out_shape_or(lambda: (*x[:2], *(d * s for d, s in zip(x[2:], scales, strict=True))))
    return _resize_taps_flops(node, mode, x, out)


MS = "com.microsoft"
NCHWC = "com.microsoft.nchwc"
NHWC = "com.ms.internal.nhwc"

TABLE: dict[OpKey, FlopsFn] = {
    (MS, "FusedConv"): fused_conv,
    (MS, "NhwcConv"): partial(conv, channels_last=True),
    (MS, "NhwcFusedConv"): partial(fused_conv, channels_last=True),
    (MS, "NhwcMaxPool"): partial(pool, channels_last=True),
    (MS, "ConvTransposeWithDynamicPads"): conv_transpose,
    (MS, "FusedGemm"): fused_gemm,
    (MS, "FusedMatMul"): fused_matmul,
    (MS, "TransposeMatMul"): fused_matmul,
    (MS, "FusedMatMulActivation"): fused_matmul,
    (MS, "MatMulNBits"): partial(matmul_nbits, bias_input=5),
    (MS, "MatMulBnb4"): partial(matmul_nbits, bias_input=None),
    (MS, "GemmFastGelu"): gemm_fast_gelu,
    (MS, "Attention"): attention,
    (MS, "MultiHeadAttention"): multi_head_attention,
    (MS, "GroupQueryAttention"): group_query_attention,
    (MS, "RotaryEmbedding"): rotary_embedding,
    (MS, "Gelu"): per_x(ERF_GELU),
    (MS, "BiasGelu"): per_x(1 + ERF_GELU),
    (MS, "FastGelu"): _fast_gelu,
    (MS, "QuickGelu"): _quick_gelu,
    (MS, "BiasSplitGelu"): _bias_split_gelu,
    (MS, "BiasAdd"): per_x(2),  # X + bias + skip
    (MS, "BiasSoftmax"): lambda node: (1 + SOFTMAX) * out_numel(node),
    (MS, "BiasDropout"): _bias_dropout,
    (MS, "ScaledSiLU"): per_x(3),
    (MS, "SwiGLU"): _swiglu,
    (MS, "SkipLayerNormalization"): skip_norm(LAYER_NORM),
    (MS, "SkipSimplifiedLayerNormalization"): skip_norm(RMS_NORM),
    (MS, "SimplifiedLayerNormalization"): per_x(RMS_NORM),
    (MS, "EmbedLayerNormalization"): embed_layer_norm,
    (MS, "GroupNorm"): _group_norm,
    (MS, "SkipGroupNorm"): _skip_group_norm,
    (NCHWC, "Conv"): fused_conv,
    (NCHWC, "MaxPool"): pool,
    (NCHWC, "AveragePool"): pool,
    (NCHWC, "GlobalAveragePool"): global_pool,
    (NCHWC, "GlobalMaxPool"): global_pool,
    (NCHWC, "ReorderInput"): zero,
    (NCHWC, "ReorderOutput"): zero,
    (NCHWC, "Upsample"): _upsample_nchwc,
    # Layout-transformed ops for NHWC execution providers: X and Y channels-last, W as in ONNX.
    (NHWC, "Conv"): partial(conv, channels_last=True),
    (NHWC, "ConvTranspose"): partial(conv_transpose, channels_last=True),
    (NHWC, "MaxPool"): partial(pool, channels_last=True),
    (NHWC, "AveragePool"): partial(pool, channels_last=True),
    (NHWC, "GlobalAveragePool"): global_pool,
    (NHWC, "GlobalMaxPool"): global_pool,
    (NHWC, "BatchNormalization"): per_x(2),
    (NHWC, "InstanceNormalization"): per_x(LAYER_NORM),
    (NHWC, "LRN"): lrn,
    (NHWC, "DepthToSpace"): zero,
    (NHWC, "SpaceToDepth"): zero,
    (NHWC, "MaxUnpool"): zero,
}


def _embed_read(node: Node) -> int:
    """EmbedLayerNormalization touches one row per token of each table, not the whole table."""
    batch, seq = node.shape(0)
    hidden = node.shape(2)[1]
    tables = [2, 3] + ([4] if node.has(4) else [])
    rows = 0
    for i in tables:
        table = node.inputs[i] if i < len(node.inputs) else None
        rows += batch * seq * hidden * table.itemsize if table is not None else 0
    rest = total_bytes([t for i, t in enumerate(node.inputs) if i not in tables])
    if rest is None:
        raise ShapeUnknown("EmbedLayerNormalization inputs")
    return rows + rest


BYTES_READ: dict[OpKey, BytesFn] = {(MS, "EmbedLayerNormalization"): _embed_read}
