"""What the predictor knows of an op type it has no rows of, learned from the store itself (no calibration).

An op type a model has and no other model in the store has (LSTM, Gelu, FusedGemm in the zoo) still
does work the store has seen done by other op types: FLOPs through a compute kernel, bytes through an
elementwise or a copying one. Two estimates learn that from every layer of the store:

- **store-wide regressor** (:func:`fallback_matrix`): one gradient-boosted ensemble over all the store's
  layers, whatever their op type, on the features that mean the same for every op type (:data:`GENERIC`)
  plus the layer's *category* (compute, elementwise, normalisation, pooling/reduction, data movement, view,
  other: :func:`category`) and the unit its time is predicted per (FLOP, byte, call); what it predicts is
  the same log time per unit of work as an op type's own regressor.
- **store roofline** (:func:`store_peaks`): a roofline whose peaks are the store's own best measured
  rates per thread count — a high percentile of FLOP/s, integer op/s and bytes/s over its layers
  (the very best is often a mis-attributed time) — then scaled, as the calibrated roofline is, by how
  far the store's layers run from those peaks.

Either is held above the store's shortest layer times (:func:`floor_us`): a layer costs at least a call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from layerperf.calibration.peaks import Peaks
from layerperf.dataset.predict.features import FEATURES, Op, RunFactors, feature_matrix, work
from layerperf.dataset.predict.training import MeasuredConfig

CATEGORIES = ("compute", "elementwise", "normalisation", "pooling", "data movement", "view", "other")
_OPS = {
    "compute": "Conv ConvTranspose ConvInteger MatMul Gemm FusedConv FusedGemm FusedMatMul NhwcFusedConv QLinearConv "
               "QLinearMatMul MatMulInteger MatMulIntegerToFloat DynamicQuantizeMatMul LSTM GRU RNN Attention "
               "MultiHeadAttention QAttention Einsum",
    "elementwise": "Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal Floor Ceil Round Sin Cos Relu LeakyRelu "
                   "Sigmoid HardSigmoid HardSwish Tanh Erf Gelu FastGelu BiasGelu QuickGelu Softsign Softplus Clip "
                   "Cast Where Equal Less LessOrEqual Greater GreaterOrEqual Not And Or Min Max "
                   "QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearAdd QLinearMul QLinearSigmoid "
                   "QLinearLeakyRelu BiasAdd",
    "normalisation": "LayerNormalization SkipLayerNormalization SimplifiedLayerNormalization "
                     "SkipSimplifiedLayerNormalization EmbedLayerNormalization BatchNormalization "
                     "InstanceNormalization GroupNorm LpNormalization Softmax LogSoftmax",
    "pooling": "MaxPool AveragePool GlobalAveragePool GlobalMaxPool QLinearAveragePool QLinearGlobalAveragePool "
               "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ArgMax ArgMin TopK CumSum",
    "data movement": "Transpose Concat Split Slice Gather GatherElements GatherND ScatterND ScatterElements Expand "
                     "Tile Pad ConstantOfShape Range ReorderInput ReorderOutput Resize Upsample DepthToSpace "
                     "SpaceToDepth Trilu NonZero OneHot",
    # ONNX Runtime runs these without copying their input (a new shape on the same buffer): their time is a
    # call's, whatever their bytes, unlike the copies above (Squeeze was predicted at Split's rates, x5)
    "view": "Reshape Squeeze Unsqueeze Flatten Identity Dropout Shape Size",
}
_CATEGORY = {op: name for name, ops in _OPS.items() for op in ops.split()}
_UNITS = ("flop", "byte", "call")
# The features that mean the same for every op type: its work, bytes and weights, element type, the run.
# Shape features (a weight's window, channels) mean one thing for a Conv and another for an LSTM, and
# routed a never-seen LSTM to the slowest convolutions' rates (x6-22 its measured time, zoo on the Xeon).
GENERIC = ("log2_flops", "log2_int_ops", "log2_bytes_read", "log2_bytes_written", "log2_param_bytes",
           "log2_intensity", "in0_elem_bytes", "in0_integer", "threads", "batch", "opt_level", "inter_op",
           "cpu_count", "corun", "corun_shared", "log2_l2_bytes", "log2_l3_bytes")
_GENERIC_COLUMNS = [FEATURES.index(f) for f in GENERIC]
PEAK_PERCENTILE = 95.0  # the store's "best" rate: its layers' 95th percentile, not a single outlier
# No layer takes less than a call costs: the store's 5th percentile layer time per thread count (7.5 and
# 10.5 µs at 1 and 2 threads on the Xeon zoo) bounds an estimate from below. Without it the tiny mask
# arithmetic of bert-base (Mul, Sub on 128 elements, 10-15 µs measured) was predicted 20-25 times too short.
FLOOR_PERCENTILE = 5.0


def category(op_type: str) -> str:
    """What kind of work an op type does (one of :data:`CATEGORIES`); ``other`` where it is not listed."""
    return _CATEGORY.get(op_type, "other")


def fallback_matrix(rows: Sequence[tuple[Op, RunFactors]]) -> np.ndarray:
    """The :data:`GENERIC` features of each (op, run), then one column per category and per unit of work
    (1 for the layer's, 0 for the others): what lets one regressor tell a Gelu from a Conv."""
    base = feature_matrix(list(rows))[:, _GENERIC_COLUMNS]
    extra = np.zeros((len(rows), len(CATEGORIES) + len(_UNITS)))
    for i, (op, _) in enumerate(rows):
        extra[i, CATEGORIES.index(category(op.op_type))] = 1.0
        extra[i, len(CATEGORIES) + _UNITS.index(work(op)[1])] = 1.0
    return np.hstack([base, extra])


def floor_us(configs: Sequence[MeasuredConfig]) -> dict[int, float]:
    """Per thread count, the :data:`FLOOR_PERCENTILE` th percentile of the store's measured layer times (µs)."""
    times: dict[int, list[float]] = defaultdict(list)
    for cfg in configs:
        times[cfg.factors.threads] += [us for us in cfg.layer_us if us and us > 0]
    return {t: float(np.percentile(v, FLOOR_PERCENTILE)) for t, v in times.items() if v}


def store_peaks(configs: Sequence[MeasuredConfig]) -> Peaks | None:
    """Peaks from the store's own layers: per thread count, the :data:`PEAK_PERCENTILE` th percentile of
    FLOP/s (float work), integer op/s and bytes/s over the layers with a measured time; None where the
    store has no layer with work or bytes."""
    rates: dict[str, dict[int, list[float]]] = {k: defaultdict(list) for k in ("flops", "int_ops", "bytes")}
    for cfg in configs:
        threads = cfg.factors.threads
        for op, us in zip(cfg.ops, cfg.layer_us, strict=True):
            if not us or us <= 0:
                continue
            moved = (op.bytes_read or 0) + (op.bytes_written or 0)
            for kind, amount in (("flops", op.flops), ("int_ops", op.int_ops), ("bytes", moved)):
                if amount:
                    rates[kind][threads].append(amount / us * 1e6)

    def best(kind: str) -> dict[int, float]:
        return {t: float(np.percentile(v, PEAK_PERCENTILE)) for t, v in rates[kind].items()}

    if not any(rates.values()):
        return None
    return Peaks(cpu_model="the store", cores=0, flops_per_s=best("flops"), int_ops_per_s=best("int_ops"),
                 bytes_per_s=best("bytes"))
