"""The ONNX namespace of the cost model: FLOPs, bytes read and bytes written of a node of any ONNX
domain (ai.onnx, com.microsoft and its NCHWc and NHWC layouts; a domain no table covers gets its bytes
and unknown work). Whole graphs: :mod:`layerperf.cost.onnx.graph`.

Conventions
-----------
FLOPs and integer operations
    One multiply-add is 2 FLOPs. ``flops`` counts floating-point work only and ``int_ops``
    integer work, counted the same way (one multiply-add is 2 operations). An op on integer (or
    boolean) tensors — an Add of int64 shape values, a MaxPool on uint8 — counts its operations
    in ``int_ops`` and 0 FLOPs; an op with a floating-point input counts FLOPs and 0 integer
    operations. Either is None when the op type is not modelled or a shape it needs is not
    static; never a silent 0. Data movement ops report a real 0 for both.

    * Conv / ConvTranspose / Gemm / MatMul (and Einsum): 2 * MACs. Conv with a bias adds one
      FLOP per output element (N*Cout*Hout*Wout); ConvTranspose likewise. MatMul follows numpy
      broadcasting of batch dims and 1-D operands. Gemm adds M*N for C (when beta != 0), M*N
      for alpha != 1 and M*N for beta not in (0, 1); MatMul + Add therefore costs what the Gemm
      ONNX Runtime fuses it into costs. Published MAC counts exclude bias adds: compare
      flops / 2 with them and expect the bias to add well under 1%.
    * Elementwise unary and binary ops (Add, Sub, Mul, Div, Pow, Max, Min, Where, Clip, Relu,
      Sqrt, comparisons...) cost 1 FLOP per output element, after broadcasting; so do the
      transcendental ones (Exp, Log, Erf, Tanh, Sigmoid, Sin...): a uniform count keeps fused
      and unfused graphs comparable, even though their hardware cost differs. Variadic
      Sum/Max/Min cost k-1 per output element, Mean k.
    * Ops that stand for several primitives cost the sum of them: Gelu 5 (erf form: Div, Erf,
      Add, Mul, Mul) or 8 (tanh form), HardSwish 2, Mish 3.
    * Softmax and LogSoftmax: 5 per element (max, subtract, exp, sum, divide).
    * LayerNormalization, InstanceNormalization, GroupNormalization: 8 per element (mean,
      subtract, square, variance, normalize, scale, shift, and 1 for the per-row rsqrt and
      broadcasting, rounded up); RMS norm (SimplifiedLayerNormalization): 4; BatchNormalization
      (inference): 2, a folded scale and shift.
    * MaxPool / AveragePool: prod(kernel) per output element (k-1 comparisons or adds plus one
      divide/store), pads/strides/dilations/ceil_mode honoured. GlobalAveragePool /
      GlobalMaxPool: 1 per input element. Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/
      LogSumExp..., ArgMax/ArgMin): 1 per input element.
    * LSTM / GRU / RNN: gates (4/3/1) * (input MatMul + recurrent MatMul) per step, per
      direction, per batch row, as 2*MACs, plus gate math per hidden unit per step (LSTM 13,
      GRU 10, RNN 2; see ``nn``), plus 2*gates per unit for the bias B and 6 for LSTM
      peepholes.
    * Data movement (Reshape, Transpose, Gather, Concat, Slice, Split, Squeeze, Unsqueeze,
      Flatten, Identity, Cast, Shape, Expand, Pad, Tile, Constant, ConstantOfShape, Range,
      ScatterND, Dropout, DepthToSpace, Resize/Upsample in nearest mode, NCHWc Reorder*):
      0 FLOPs. Interpolating Resize: 2 FLOPs per tap (2 taps per resized axis for linear, 4
      for cubic) per output element.
    * Quantized ops (QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger, QGemm,
      DynamicQuantizeMatMul, MatMulIntegerToFloat, QLinearAdd..., QAttention) count their
      integer arithmetic in ``int_ops``, as their float counterparts count FLOPs; only the
      conversions between integers and floats (quantize, dequantize, requantize, scale to float)
      are FLOPs. See ``quant`` for the rules. MatMulNBits (weight-only quantization) is float.
    * ONNX Runtime fused ops cost what the ops they replaced cost: FusedConv = Conv +
      activation (1 per output element) + residual add (input Z, 1); FusedGemm, FusedMatMul
      (alpha != 1 adds 1 per output element); BiasGelu 6, FastGelu 8 (+1 with bias), QuickGelu
      3; SkipLayerNormalization 1 (+1 with bias) + 8; Attention = QKV projection 2*B*S*Din*
      (Dq+Dk+Dv) (+ bias adds) + QK^T 2*B*N*S*T*H + AV 2*B*N*S*T*Hv + per score 1 scale + 5
      softmax (+1 mask); MultiHeadAttention and GroupQueryAttention the same without the
      projection. Causal masking is not discounted.
    * NCHWc (com.microsoft.nchwc) Conv and pools: the Conv/pool formulas on the model's shapes.
      ONNX Runtime pads channel counts to its block size (8 or 16, by CPU) and stores padded
      weights [Cout', Cin'/group, kh, kw]; FLOPs count the real channels (a tensor's
      ``real_shape``, found by ``layout``), the work on the padded ones is ``padded_flops``.

Bytes
    ``bytes_read`` is the sum of the nbytes of the inputs (weights included), each distinct
    tensor once; ``bytes_written`` the sum over the outputs. Either is None when a shape it
    needs is unknown. Exceptions: Shape and Size read nothing (metadata only); Gather,
    GatherElements, GatherND, Slice and EmbedLayerNormalization read only the rows they copy
    (an output's worth) plus their index inputs. Reshape, Squeeze, Unsqueeze, Flatten and
    Identity are often no-copy views in ONNX Runtime; they are still counted as reading and
    writing their tensor, so their bytes are an upper bound.

Not modelled (flops=None): control flow (If, Loop, Scan: their bodies are subgraphs), random
generators, NonMaxSuppression, RoiAlign, GridSample, string and ai.onnx.ml ops, and the rarer
contrib ops; :func:`known_op_types` lists what is covered.
"""

from __future__ import annotations

from collections.abc import Sequence

from layerperf.cost.onnx import elementwise, fused, movement, nn, quant
from layerperf.cost.onnx.node import BytesFn, FlopsFn, Node, OpKey, total_bytes
from layerperf.cost.shapes import guarded
from layerperf.data.cost import Cost
from layerperf.data.layer import ONNX_DOMAINS, onnx_domain
from layerperf.data.tensor import TensorInfo, is_float_dtype, is_integer_dtype

DEFAULT_DOMAINS = ONNX_DOMAINS  # the names of ONNX's default domain

# (domain, op_type) -> FLOPs function. Domain "" is ai.onnx.
_TABLE: dict[OpKey, FlopsFn] = {
    **elementwise.TABLE,
    **movement.TABLE,
    **nn.TABLE,
    **fused.TABLE,
}
_BYTES_READ: dict[OpKey, BytesFn] = {**movement.BYTES_READ, **fused.BYTES_READ}
# (domain, op_type) -> (FLOPs, integer operations) functions of the ops that do both.
_SPLIT: dict[OpKey, quant.SplitFn] = quant.SPLIT


def _domain(domain: str) -> str:
    return "" if onnx_domain(domain) else domain


def known_op_types() -> set[tuple[str, str]]:
    """Every (domain, op_type) the cost model covers; domain "" is ai.onnx."""
    return set(_TABLE) | set(_SPLIT)


def is_known(op_type: str, domain: str = "") -> bool:
    """Whether node_cost can give FLOPs and integer operations for this op type (shapes permitting)."""
    key = (_domain(domain), op_type)
    return key in _TABLE or key in _SPLIT


def node_cost(op_type: str, domain: str, attrs: dict[str, object],
              inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo | None]) -> Cost:
    """FLOPs, integer operations and bytes of one node.

    ``attrs`` holds Python values as from ``onnx.helper.get_attribute_value`` (byte strings
    decoded to str). ``inputs``/``outputs`` follow the node's positions; None marks an omitted
    optional tensor. An op type the model does not cover gets ``flops=None`` and ``int_ops=None``
    (never 0) and still its bytes. Work is counted on each tensor's model shape
    (``TensorInfo.logical()``); bytes on the shapes as stored, which a padded layout really moves.
    """
    key = (_domain(domain), op_type)
    stored = Node(op_type, key[0], dict(attrs), tuple(inputs), tuple(outputs))
    padded = any(t is not None and t.padded for t in (*inputs, *outputs))
    node = _logical(stored) if padded else stored
    flops, int_ops = _work(key, node)
    padded_flops = _work(key, stored)[0] if padded else None
    read_fn = _BYTES_READ.get(key)
    bytes_read = guarded(read_fn, stored) if read_fn is not None else total_bytes(stored.inputs)
    return Cost(flops, bytes_read, total_bytes(stored.outputs), int_ops, padded_flops)


def _logical(node: Node) -> Node:
    def real(tensors: tuple[TensorInfo | None, ...]) -> tuple[TensorInfo | None, ...]:
        return tuple(None if t is None else t.logical() for t in tensors)

    return Node(node.op_type, node.domain, node.attrs, real(node.inputs), real(node.outputs))


def _work(key: OpKey, node: Node) -> tuple[int | None, int | None]:
    """(FLOPs, integer operations) of a node; None where not modelled or shapes are unknown."""
    split = _SPLIT.get(key)
    if split is not None:
        return guarded(split[0], node), guarded(split[1], node)
    fn = _TABLE.get(key)
    if fn is None:
        return None, None
    count = guarded(fn, node)
    # An op does one kind of work: integer when every operand is an integer or boolean tensor.
    return (0, count) if _integer_operands(node) else (count, 0)


def _integer_operands(node: Node) -> bool:
    """Whether every present input is of an integer or boolean type (an unknown type is not)."""
    dtypes = [t.dtype for t in node.inputs if t is not None]
    if not dtypes or any(is_float_dtype(d) for d in dtypes):
        return False
    return all(is_integer_dtype(d) for d in dtypes)


__all__ = ["DEFAULT_DOMAINS", "is_known", "known_op_types", "node_cost"]
