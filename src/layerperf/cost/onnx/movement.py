"""Data movement ops: no arithmetic (0 FLOPs is their true cost, not a placeholder), real bytes."""

from __future__ import annotations

import math

from layerperf.cost.onnx.elementwise import out_numel
from layerperf.cost.onnx.node import BytesFn, FlopsFn, Node, OpKey, total_bytes
from layerperf.cost.shapes import ShapeUnknown


def zero(node: Node) -> int:
    return 0


def _resize_taps_flops(node: Node, mode: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> int:
    """Interpolating resize: one multiply-add (2 FLOPs) per tap; nearest does no arithmetic.

    Linear reads 2 taps per resized axis (4 for bilinear), cubic 4 per axis (16 for bicubic).
    """
    if mode == "nearest":
        return 0
    taps_per_axis = {"linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}.get(mode)
    if taps_per_axis is None:
        raise ShapeUnknown(f"resize mode {mode}")
    resized = sum(1 for a, b in zip(in_shape, out_shape, strict=True) if a != b)
    return 2 * taps_per_axis ** resized * math.prod(out_shape)


def resize(node: Node) -> int:
    mode = node.attr_str("mode", "nearest")
    if mode == "nearest":
        return 0
    return _resize_taps_flops(node, mode, node.shape(0), node.out_shape())


def _scatter(node: Node) -> int:
    # With reduction="add"/"mul"/... each update element costs one op; plain scatter is a copy.
    if node.attr_str("reduction", "none") == "none":
        return 0
    return node.numel(2)


def _col2im(node: Node) -> int:
    # Overlapping patches are summed: one add per input (column) element.
    return node.numel(0)


MOVEMENT = (
    "Cast", "CastLike", "CenterCropPad", "Compress", "Concat", "Constant",
    "ConstantOfShape", "DepthToSpace", "Dropout", "Expand", "EyeLike", "Flatten", "Gather",
    "GatherElements", "GatherND", "Identity", "MaxUnpool", "OneHot", "Pad",
    "Range", "Reshape", "ReverseSequence", "Shape", "Size", "Slice", "SpaceToDepth", "Split",
    "SplitToSequence", "Squeeze", "Tile", "Transpose", "Trilu", "Unsqueeze", "Optional", "OptionalGetElement",
    "OptionalHasElement", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
    "SequenceInsert", "SequenceLength", "ConcatFromSequence",
)

TABLE: dict[OpKey, FlopsFn] = {
    **{("", op): zero for op in MOVEMENT},
    ("", "Resize"): resize,
    ("", "Upsample"): resize,
    ("", "Scatter"): _scatter,
    ("", "ScatterElements"): _scatter,
    ("", "ScatterND"): _scatter,
    ("", "Col2Im"): _col2im,
    # ORT registers copies of a few standard ops in its own domain.
    ("com.microsoft", "ExpandDims"): zero,
    ("com.microsoft", "GatherND"): zero,
    ("com.microsoft", "Pad"): zero,
    ("com.microsoft", "Range"): zero,
    ("com.microsoft", "Trilu"): zero,
}


# -- bytes read overrides -------------------------------------------------------------------------

def _metadata_only(node: Node) -> int:
    # Shape and Size look at the descriptor, never at the data.
    return 0


def _gathered(node: Node) -> int:
    """A gather touches only the rows it copies: the indices plus an output's worth of data."""
    out = node.outputs[0] if node.outputs else None
    rows = out.nbytes if out is not None else None
    index = total_bytes(node.inputs[1:])
    if rows is None or index is None:
        raise ShapeUnknown("gather shapes")
    return rows + index


def _sliced(node: Node) -> int:
    """Slice reads the selected elements (an output's worth) plus its small index inputs."""
    return _gathered(node)


BYTES_READ: dict[OpKey, BytesFn] = {
    ("", "Shape"): _metadata_only,
    ("", "Size"): _metadata_only,
    ("", "Gather"): _gathered,
    ("", "GatherElements"): _gathered,
    ("", "GatherND"): _gathered,
    ("com.microsoft", "GatherND"): _gathered,
    ("", "Slice"): _sliced,
}

__all__ = ["BYTES_READ", "TABLE", "out_numel", "resize", "zero"]
