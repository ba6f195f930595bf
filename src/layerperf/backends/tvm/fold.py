"""Shape arithmetic folded into constants before TVM imports a model.

Exporters (PyTorch's, Hugging Face models through it) compute pads, reshape targets and mask shapes
from ``Shape`` of a tensor at run time. TVM's Relax ONNX frontend refuses much of that ("Dynamic pads
are not supported yet", a Reshape "expects the input tensor to have known shape"), although every such
value is fixed once the input shapes are: the profile feeds fixed shapes. So, with the inputs' shapes
fixed and ONNX's shape inference run, every ``Shape``/``Size`` of a tensor whose shape is then known,
and every node computed only from such values and small constants (Hugging Face's MobileNetV2 builds
its pads from constants through ConstantOfShape, Concat, Reshape, Slice and Transpose), is evaluated
(ONNX's reference evaluator) and replaced by an initializer. The other nodes keep their names and order; a model with
nothing to fold is returned as it is (the same bytes: its build and tuning keys do not change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

SMALL_ELEMENTS = 64  # a constant this small may enter shape arithmetic (indices, axes, scalars)
MAX_FOLDED_ELEMENTS = 1 << 16  # a folded value larger than this (a mask, say) is left to the runtime
SHAPE_OPS = ("Shape", "Size")
MAX_ROUNDS = 8
IR_INITIALIZERS_ARE_INPUTS = 3  # up to this IR version, every initializer is a graph input too
RANDOM_OPS = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli")


def fold_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """``model`` with its shape arithmetic folded for the input ``shapes`` (see the module's note), round
    after round: a folded Slice or Reshape target lets shape inference fix the shapes after it (BERT's
    position ids sliced by a computed length), whose ``Shape`` the next round folds."""
    out = model
    for _ in range(MAX_ROUNDS):
        folded = _fold_once(out, shapes)
        if folded is out:
            break
        out = folded
    return out


def _fold_once(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    has_shape_ops = any(n.op_type in SHAPE_OPS for n in model.graph.node)
    static = _static_shapes(model, shapes) if has_shape_ops else {}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    known = _small_constants(model)
    derived: dict[str, np.ndarray] = {}
    folded: list[int] = []
    for index, node in enumerate(model.graph.node):
        values = _fold(node, static, known, derived, opset)
        if values is None:
            continue
        derived.update(values)
        folded.append(index)
    if not folded:
        return model
    return _rebuilt(model, set(folded), derived)


def _static_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """Every tensor whose shape shape inference fixes, with the inputs fixed to ``shapes``."""
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    # the weights left out: shape inference reads their dims, and the values of small ones (a Slice's ends)
    for tensor in skeleton.graph.initializer:
        if int(np.prod(tensor.dims)) <= MAX_FOLDED_ELEMENTS and tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.ClearField("data_location")
        del tensor.external_data[:]
    for vi in skeleton.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[vi.name], strict=False):
                dim.Clear()
                dim.dim_value = int(size)
    try:
        inferred = shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # a model shape inference cannot read: nothing is folded, TVM says what it refuses
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
    for tensor in model.graph.initializer:
        out[tensor.name] = tuple(tensor.dims)
    return out


def _small_constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Initializers and Constant nodes' values small enough to take part in shape arithmetic."""
    out = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
           if int(np.prod(t.dims)) <= SMALL_ELEMENTS and t.data_location != onnx.TensorProto.EXTERNAL}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None and int(np.prod(value.t.dims)) <= SMALL_ELEMENTS:
                out[node.output[0]] = numpy_helper.to_array(value.t)
    return out


def _fold(node: onnx.NodeProto, static: Mapping[str, tuple[int, ...]], known: Mapping[str, np.ndarray],
          derived: Mapping[str, np.ndarray], opset: int) -> dict[str, np.ndarray] | None:
    """The node's output values when it is shape arithmetic (or small constant arithmetic) that can be
    folded, else None."""
    subgraphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    if node.domain not in ("", "ai.onnx") or node.op_type in RANDOM_OPS or any(a.type in subgraphs
                                                                               for a in node.attribute):
        return None
    names = [n for n in node.input if n]
    if node.op_type in SHAPE_OPS:
        if not names or names[0] not in static:
            return None
        feeds = {names[0]: np.broadcast_to(np.float32(0), static[names[0]])}  # only its shape is read
    elif names and all(n in derived or n in known for n in names):
        feeds = {n: derived[n] if n in derived else known[n] for n in names}
    else:
        return None
    try:
        from onnx.reference import ReferenceEvaluator  # lazy: only models with shape arithmetic need it

        results = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception:  # an op or case the reference evaluator lacks: left to TVM
        return None
    values = {out: np.asarray(r) for out, r in zip(node.output, results, strict=False) if out}
    if any(v.size > MAX_FOLDED_ELEMENTS or v.dtype == object for v in values.values()):
        return None
    return values


def _rebuilt(model: onnx.ModelProto, folded: set[int], values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The model without the folded nodes, their outputs that anything still reads as initializers."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = [n for i, n in enumerate(model.graph.node) if i not in folded]
    read = {name for n in kept for name in n.input} | {o.name for o in model.graph.output}
    del out.graph.node[:]
    out.graph.node.extend(kept)
    consumed = {name for i in folded for name in model.graph.node[i].input}
    unused = [t for t in out.graph.initializer if t.name in consumed and t.name not in read]
    for tensor in unused:  # read only by folded nodes: gone with them
        out.graph.initializer.remove(tensor)
    # A model of IR version 3 lists its initializers among the graph's inputs too (constants, not inputs
    # to feed: onnx_input_specs). One whose initializer went goes from the inputs with it, or it would be
    # left an input that nothing feeds.
    gone = {t.name for t in unused}
    if gone:
        kept_inputs = [vi for vi in out.graph.input if vi.name not in gone]
        del out.graph.input[:]
        out.graph.input.extend(kept_inputs)
    have = {t.name for t in out.graph.initializer}
    added = [numpy_helper.from_array(v, name) for name, v in values.items() if name in read and name not in have]
    out.graph.initializer.extend(added)
    if model.ir_version <= IR_INITIALIZERS_ARE_INPUTS:  # the folded values listed as its others are
        out.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in added)
    return out
