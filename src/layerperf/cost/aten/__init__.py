"""The aten namespace of the cost model: FLOPs, integer operations and bytes of one call of a PyTorch
aten op, from its arguments' shapes, element types and scalar values (:class:`AtenCall`).

One table serves every caller: the torch backend and ``layerperf.torch``, which see the tensors of a call
that ran (:mod:`.live`), and the PyTorch profiler trace reader, which sees what the trace recorded of a
call's inputs (:mod:`.recorded`; torch need not be installed).

- FLOPs as the ONNX cost model counts the ONNX op each forward op stands for (:mod:`.forward`: ``relu``
  as ``Relu``, ``addmm`` as ``Gemm`` with its bias add, ``convolution`` as ``Conv``); a backward op the
  primitives of its formula (:mod:`.backward`). An op that only moves, views or makes data
  (:data:`NO_ARITHMETIC`) does 0 of both kinds of work.
- Integer work: an op whose tensors are all integer or boolean counts integer operations and 0 FLOPs, as
  the ONNX cost model does: an elementwise op 1 per output element (after broadcasting), a reduction or a
  scan 1 per input element (:data:`INT_ELEMENTWISE`, :data:`INT_PER_INPUT`).
- Bytes: the tensors an op reads (its arguments, each distinct tensor once) and writes (its results); none
  for an alias of an argument (``t``, ``view``, ``expand``..., :attr:`AtenCall.alias`) or a metadata-only
  op (:data:`METADATA_INPLACE`); a gather reads the rows it copies (an output's worth) and its indices
  (:data:`GATHERS`); ``copy_``, ``fill_``, ``zero_`` overwrite their first argument without reading it.
- Unknown is None, never 0: an op the table does not cover (a caller may offer a formula of its own, the
  live side torch.utils.flop_counter's), or a call whose results were not recorded, unless they follow
  from its arguments (:data:`RESULTS`: convolutions, ``linear``, the matrix products, and ``cat`` and
  ``stack`` of a list of tensors of one element type).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from layerperf.cost.aten import backward, forward
from layerperf.cost.aten.call import AtenCall, static_shape
from layerperf.cost.onnx.node import total_bytes
from layerperf.cost.shapes import ShapeUnknown, guarded
from layerperf.data.cost import UNKNOWN, Cost
from layerperf.data.tensor import TensorInfo, is_float_dtype

# aten ops that move, view, convert or make data but do no arithmetic: 0 FLOPs and 0 integer operations,
# known (as the ONNX cost model's data movement ops). ``_to_copy`` converts between dtypes: bytes, no
# FLOPs, as ONNX Cast.
NO_ARITHMETIC = frozenset((
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "expand_as", "flatten",
    "unflatten", "squeeze", "unsqueeze", "select", "slice", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "as_strided", "contiguous", "clone", "detach", "alias", "cat", "stack", "copy_", "_to_copy",
    "to", "lift_fresh", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "fill_",
    "arange", "embedding", "index_select", "gather", "index",
    "_reshape_alias", "masked_fill", "new_zeros", "new_empty", "new_ones", "zero_", "lift_fresh_copy",
    "view_as",
    # in place and copying forms of the views above, and more pure movement
    "detach_", "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "resize_", "set_", "lift",
    "view_as_real", "view_as_complex", "view_copy", "expand_copy", "permute_copy", "slice_copy", "select_copy",
    "split_copy", "split_with_sizes_copy", "unbind_copy", "transpose_copy", "t_copy", "squeeze_copy",
    "unsqueeze_copy", "detach_copy", "alias_copy", "_reshape_copy", "copy", "fill", "masked_fill_", "new_full",
    "full_like", "empty_strided", "scalar_tensor", "_local_scalar_dense", "_record_function_enter_new",
    "select_backward", "slice_backward", "tril", "triu", "tril_", "triu_", "is_nonzero",
    "_record_function_enter", "_record_function_exit", "repeat", "flip", "roll",
    "constant_pad_nd", "select_scatter", "slice_scatter", "masked_select", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "movedim", "moveaxis", "swapaxes", "diagonal", "unfold", "_unsafe_index",
    "resolve_conj", "resolve_neg", "_pin_memory", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d",
))
# in-place ops that change a tensor's metadata only (shape, strides, storage), moving no data
METADATA_INPLACE = frozenset(("detach_", "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "resize_",
                              "set_", "_unsafe_view", "empty", "empty_like", "empty_strided",
                              "new_empty"))
# in-place ops that overwrite their first argument without reading it: its bytes are written, not read
OVERWRITE = frozenset(("copy_", "fill_", "zero_"))
# ops that copy rows of their first argument picked by the others (as the ONNX cost model's Gather): what
# they read is the indices and an output's worth of the table (embedding's first argument is the table)
GATHERS = frozenset(("embedding", "index_select", "gather", "index", "take", "_unsafe_index"))
# what autograd itself dispatches with grad on (a saved tensor's detach): the model's work is the same
# without it, so a module's bytes in training mode are not made larger by it
AUTOGRAD_ONLY = frozenset(("detach",))
# Integer work, counted as the ONNX cost model counts ops on integer tensors: an elementwise op 1
# operation per output element (after broadcasting), a reduction or a scan 1 per input element. Only for
# ops whose tensors are all integer or boolean; the in-place form (``add_``) counts as its op.
INT_ELEMENTWISE = frozenset((
    "add", "sub", "rsub", "mul", "div", "floor_divide", "remainder", "fmod", "neg", "abs", "sign", "pow",
    "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "where",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "logical_and", "logical_or", "logical_xor", "logical_not",
))
# (not max/min: one name for a reduction and an elementwise op, whose counts differ under broadcasting)
INT_PER_INPUT = frozenset(("sum", "prod", "any", "all", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod"))

FlopsFn = Callable[[AtenCall], int]
ResultsFn = Callable[[AtenCall], tuple[TensorInfo | None, ...]]

# aten op (its in-place form is its) -> FLOPs of a floating-point call
FLOPS: dict[str, FlopsFn] = {
    **{name: forward.unary for name in forward.UNARY},
    **{name: forward.binary for name in forward.BINARY},
    "max": forward.max_min, "min": forward.max_min,
    **{name: forward.reduction for name in forward.REDUCTIONS},
    **{name: forward.composed for name in forward.COMPOSED},
    **{name: backward.per_element for name in backward.BACKWARD},
    "gelu": forward.gelu,
    "gelu_backward": backward.gelu_backward,
    **{name: forward.batch_norm for name in forward.BATCH_NORM_TRAINING},
    "native_layer_norm_backward": backward.layer_norm_backward,
    "native_batch_norm_backward": backward.batch_norm_backward,
    "cudnn_batch_norm_backward": backward.gpu_batch_norm_backward,
    "miopen_batch_norm_backward": backward.gpu_batch_norm_backward,
    "native_group_norm_backward": backward.group_norm_backward,
    "_scaled_dot_product_flash_attention_for_cpu": forward.cpu_attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": backward.cpu_attention_backward,
    **{name: forward.nll_loss for name in ("nll_loss_forward", "nll_loss2d_forward", "nll_loss_backward",
                                           "nll_loss2d_backward")},
    **{name: forward.pool for name in forward.POOLS},
    "_adaptive_avg_pool2d": forward.adaptive_avg_pool,
    "adaptive_avg_pool2d": forward.adaptive_avg_pool,
    "addmm": forward.addmm,
    **{name: forward.matmul for name in forward.MATMULS},
    "linear": forward.linear,
    **{name: forward.convolution for name in (*forward.CONVS, "convolution", "_convolution")},
    "convolution_backward": backward.convolution_backward,
}
# ops that read only their first n positional arguments: a later one is where the results go (``out=``,
# which a profiler trace records among the positional arguments)
OPERANDS = {**{name: 3 for name in (*forward.CONVS, "convolution", "_convolution", "linear", "addmm")},
            **{name: 2 for name in forward.MATMULS}}
# ops whose results follow from their arguments: a call whose results were not recorded is costed on these
RESULTS: dict[str, ResultsFn] = {
    **{name: forward.conv_result for name in (*forward.CONVS, "convolution", "_convolution")},
    "linear": forward.linear_result,
    "addmm": forward.addmm_result,
    **{name: forward.matmul_result for name in forward.MATMULS},
    "cat": forward.cat_result,
    "stack": forward.stack_result,
}


def knows(op: str) -> bool:
    """Whether the table gives ``op`` (or its in-place form's op) a cost, shapes permitting."""
    call = AtenCall(op)
    return call.op in NO_ARITHMETIC or call.base in FLOPS or call.base in INT_ELEMENTWISE | INT_PER_INPUT


def ops() -> set[str]:
    """Every aten op the table covers."""
    return set(NO_ARITHMETIC) | set(FLOPS) | INT_ELEMENTWISE | INT_PER_INPUT


def infers_results(op: str) -> bool:
    """Whether a call of ``op`` whose results were not recorded can be costed (:data:`RESULTS`)."""
    return op in RESULTS


def cost(call: AtenCall, formula: Callable[[], int] | None = None) -> Cost:
    """FLOPs, integer operations and bytes of one call (see the module's docstring); ``formula``, where the
    caller has one, gives the call's count where the table gives none."""
    if call.outputs is None:
        infer = RESULTS.get(call.op)
        results = None if infer is None else _guarded_results(infer, call)
        if results is None:
            return UNKNOWN
        call = AtenCall(call.op, call.args, call.kwargs, results, call.overload, call.alias)
    if call.alias or call.op in METADATA_INPLACE:  # no data moves
        return Cost(0, 0, 0, 0)
    read, written = _bytes(call)
    if call.op in NO_ARITHMETIC:
        return Cost(0, read, written, 0)
    if _integer(call):
        count = guarded(_int_ops, call)
        return Cost(0, read, written, _asked(formula) if count is None else count)
    flops = guarded(FLOPS[call.base], call) if call.base in FLOPS else None
    return Cost(_asked(formula) if flops is None else flops, read, written, 0)


def _guarded_results(infer: ResultsFn, call: AtenCall) -> tuple[TensorInfo | None, ...] | None:
    try:
        return infer(call)
    except (ShapeUnknown, ArithmeticError, IndexError, KeyError, TypeError, ValueError):  # as shapes.guarded
        return None


def _asked(formula: Callable[[], int] | None) -> int | None:
    return None if formula is None else formula()


def _bytes(call: AtenCall) -> tuple[int | None, int | None]:
    """(bytes read, bytes written); None where a tensor's size is unknown."""
    if call.op in AUTOGRAD_ONLY:
        return 0, 0
    results = call.results()
    if call.op in GATHERS:  # reads the rows it copies (an output's worth) and the indices, not the whole table
        rest = _sizes(_rest(call))
        out = _sizes(results)
        return (None if rest is None or out is None else rest + out), out
    if call.op in OVERWRITE:
        reads = _rest(call)
    elif call.op in OPERANDS:
        reads = AtenCall(call.op, call.args[:OPERANDS[call.op]]).tensors()
    else:
        reads = call.tensors()
    return _sizes(reads), _sizes(results)


def _rest(call: AtenCall) -> list[TensorInfo]:
    """The tensors among every argument but the first."""
    return AtenCall(call.op, call.args[1:], call.kwargs).tensors()


def _sizes(tensors: list[TensorInfo]) -> int | None:
    """Bytes of the tensors, each distinct one once; None where one's element type is unknown."""
    if any(t.dtype == "unknown" for t in tensors):
        return None
    return total_bytes(tensors)


def _integer(call: AtenCall) -> bool:
    """Whether a call works on integers: every tensor argument (or, with none, every result) is of an
    integer or boolean type. One with a floating-point or complex operand (or one of unknown type) is
    floating-point work, as in the ONNX cost model."""
    tensors = call.tensors() or call.results()
    return bool(tensors) and not any(is_float_dtype(t.dtype) or t.dtype.startswith("complex") or t.dtype == "unknown"
                                     for t in tensors)


def _int_ops(call: AtenCall) -> int:
    """Integer operations of an integer call of an op in :data:`INT_ELEMENTWISE` or :data:`INT_PER_INPUT`;
    raises ShapeUnknown for another op."""
    if call.base in INT_ELEMENTWISE:
        counted = call.results()
    else:
        counted = call.tensors()[:1] if call.base in INT_PER_INPUT else []
    if not counted:
        raise ShapeUnknown(f"no integer formula for {call.op}")
    return sum(math.prod(static_shape(t)) for t in counted)


__all__ = ["AtenCall", "cost", "infers_results", "knows", "ops"]
