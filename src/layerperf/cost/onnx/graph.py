"""Costs of a whole ONNX graph: collect every tensor's shape, then cost each node in order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from layerperf.cost.onnx import node_cost
from layerperf.cost.onnx.infer import SHAPES, infer_contrib
from layerperf.cost.onnx.layout import has_blocked, real_channels, real_view
from layerperf.cost.onnx.node import Node
from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo, onnx_elem_to_dtype

# Initializers up to this many elements keep their data for shape inference: shape tensors,
# axes and scales are tiny, and leaving the weights out keeps a 500 MB model from being
# serialized again (and models over protobuf's 2 GB limit from failing outright).
_SMALL_INITIALIZER = 4096
_CONSTANT_DTYPES = {"value_int": np.int64, "value_ints": np.int64, "value_float": np.float32,
                    "value_floats": np.float32}


def attributes(node: onnx.NodeProto) -> dict[str, object]:
    """A node's attributes as Python values, byte strings decoded (what node_cost expects)."""
    out: dict[str, object] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        out[attr.name] = value
    return out


def _numel(dims: Iterable[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _light_model(model: onnx.ModelProto, given: Mapping[str, TensorInfo] | None = None) -> onnx.ModelProto:
    """The model with large initializers turned into typed graph inputs (no data copied), and the inputs
    ``given`` a static shape declared at it (see :func:`_bind`)."""
    light = onnx.ModelProto()
    light.ir_version = max(model.ir_version, 4)  # initializers need not be graph inputs from IR 4
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g = light.graph
    g.name = model.graph.name
    g.node.extend(model.graph.node)
    g.input.extend(model.graph.input)
    g.output.extend(model.graph.output)
    g.value_info.extend(model.graph.value_info)
    declared = {i.name for i in model.graph.input}
    for init in model.graph.initializer:
        if _numel(init.dims) <= _SMALL_INITIALIZER and init.data_location != TensorProto.EXTERNAL:
            g.initializer.append(init)
        elif init.name not in declared:
            g.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    if given:
        _bind(g, given)
    return light


def _bind(g: onnx.GraphProto, given: Mapping[str, TensorInfo]) -> None:
    """Declare at ``g``'s inputs the static shapes ``given``, and size each symbolic dimension they bind
    (``batch``, ``sequence``) wherever the graph declares it: a graph whose exporter wrote every tensor's
    shape (value_info) would otherwise keep its symbols past the inputs, and its costs would be unknown."""
    symbols: dict[str, int] = {}
    for vi in g.input:
        info = given.get(vi.name)
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
        if info is None or not info.is_static or info.shape is None or len(dims) != len(info.shape):
            continue
        for d, size in zip(dims, info.shape, strict=True):
            if d.HasField("dim_param"):
                symbols.setdefault(d.dim_param, int(size))
            d.dim_value = int(size)
    for vi in [*g.value_info, *g.output]:
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in symbols:
                    d.dim_value = symbols[d.dim_param]


def _value_info(vi: onnx.ValueInfoProto) -> TensorInfo | None:
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    dtype = onnx_elem_to_dtype(tt.elem_type)
    if not tt.HasField("shape"):
        return TensorInfo(vi.name, None, dtype)
    dims: list[int | str] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or "?")
    return TensorInfo(vi.name, tuple(dims), dtype)


def _inferred(model: onnx.ModelProto, given: Mapping[str, TensorInfo] | None = None) -> onnx.ModelProto:
    light = _light_model(model, given)
    try:
        return onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is best effort; the walk below fills gaps
        return light


class _ShapeTable:
    """Every tensor's TensorInfo plus the values of small constants, built up in graph order."""

    def __init__(self, model: onnx.ModelProto, given: Mapping[str, TensorInfo] | None) -> None:
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
        self.infos: dict[str, TensorInfo] = {}
        self.consts: dict[str, TensorProto] = {}
        inferred = _inferred(model, given)
        g = inferred.graph
        for vi in [*g.input, *g.value_info, *g.output]:
            info = _value_info(vi)
            if info is not None:
                self._offer(info)
        for init in model.graph.initializer:
            self.infos[init.name] = TensorInfo(init.name, tuple(init.dims), onnx_elem_to_dtype(init.data_type))
        for init in g.initializer:  # the small ones, with data
            self.consts[init.name] = init
        # What the caller measured at run time beats anything inferred.
        self.given = dict(given or {})
        self.infos.update(self.given)

    def _offer(self, info: TensorInfo) -> None:
        old = self.infos.get(info.name)
        if old is None or (not old.is_static and info.is_static):
            self.infos[info.name] = info

    def get(self, name: str) -> TensorInfo | None:
        if not name:
            return None
        return self.infos.get(name) or TensorInfo(name, None, "unknown")

    def complete(self, node: onnx.NodeProto, view: Node) -> None:
        """Fill in the outputs of ``node`` that are still unknown, and note constant values."""
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            self._note_constant(node)
        elif node.op_type == "Shape" and node.domain in ("", "ai.onnx"):
            self._note_shape(node, view)
        elif node.domain in ("", "ai.onnx"):
            self._note_computed(node)
        if all(name in self.infos and self.infos[name].is_static for name in node.output if name):
            return
        if (node.domain, node.op_type) in SHAPES:
            found = infer_contrib(view, list(node.output))
        elif node.domain in ("", "ai.onnx"):
            found = self._infer_standard(node, view)
        else:
            return
        for info in found:
            if info is not None and info.name not in self.given:
                self._offer(info)

    def _note_constant(self, node: onnx.NodeProto) -> None:
        if not node.output:
            return
        for attr in node.attribute:
            if attr.name == "value":
                self.consts[node.output[0]] = attr.t
            elif attr.name in _CONSTANT_DTYPES:
                array = np.array(helper.get_attribute_value(attr), dtype=_CONSTANT_DTYPES[attr.name])
                self.consts[node.output[0]] = numpy_helper.from_array(array, node.output[0])

    def _note_shape(self, node: onnx.NodeProto, view: Node) -> None:
        x = view.inputs[0] if view.inputs else None
        if x is None or not x.is_static or x.shape is None or not node.output:
            return
        dims = [int(d) for d in x.shape]
        start = int(view.attrs.get("start", 0))  # type: ignore[call-overload]
        end = view.attrs.get("end")
        dims = dims[start:] if end is None else dims[start:int(end)]  # type: ignore[call-overload]
        self.consts[node.output[0]] = numpy_helper.from_array(np.array(dims, dtype=np.int64), node.output[0])

    def _note_computed(self, node: onnx.NodeProto) -> None:
        """Note the values of a standard op all of whose inputs are small constants (the shape arithmetic
        of an exported graph: Gather of a Shape, Unsqueeze, Concat, Slice...), so that the Reshape, Expand
        or Range they feed gets a static shape; outputs over :data:`_SMALL_INITIALIZER` elements are not
        kept."""
        names = [n for n in node.input if n]
        if not names or not all(n in self.consts for n in names) or not node.output:
            return
        try:
            from onnx.reference import ReferenceEvaluator  # the reference runtime of the onnx package itself

            inputs = [helper.make_tensor_value_info(n, self.consts[n].data_type, None) for n in names]
            outputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in node.output if n]
            graph = helper.make_graph([node], "constant", inputs, outputs)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
            values = ReferenceEvaluator(model).run(None, {n: numpy_helper.to_array(self.consts[n]) for n in names})
        except Exception:  # noqa: BLE001 - best effort: the outputs are then inferred without their values
            return
        for name, value in zip((n for n in node.output if n), values, strict=False):
            array = np.asarray(value)
            if array.size <= _SMALL_INITIALIZER:
                self.consts[name] = numpy_helper.from_array(array, name)

    def _infer_standard(self, node: onnx.NodeProto, view: Node) -> list[TensorInfo | None]:
        """Run onnx's per-node inference with the shapes known so far (after a contrib op)."""
        types: dict[str, onnx.TypeProto] = {}
        for t in view.inputs:
            if t is None or t.name in types:
                continue
            proto = _type_proto(t)
            if proto is None:
                return []
            types[t.name] = proto
        data = {name: self.consts[name] for name in node.input if name in self.consts}
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, "")
            out = onnx.shape_inference.infer_node_outputs(
                schema, node, types, data, opset_imports=[helper.make_opsetid("", self.opset)])
        except Exception:  # noqa: BLE001 - unknown schema or inference error: outputs stay unknown
            return []
        infos = []
        for name, tp in out.items():
            infos.append(_value_info(helper.make_value_info(name, tp)))
        return infos


def _type_proto(t: TensorInfo) -> onnx.TypeProto | None:
    if t.dtype == "bfloat16":
        elem = TensorProto.BFLOAT16
    else:
        try:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))
        except TypeError:
            return None
    return helper.make_tensor_type_proto(elem, None if t.shape is None else list(t.shape))


_Walked = list[tuple[onnx.NodeProto, dict[str, object], tuple[TensorInfo | None, ...], tuple[TensorInfo | None, ...]]]


def _walk(model: onnx.ModelProto, shapes: Mapping[str, TensorInfo] | None) -> tuple[_Walked, _ShapeTable]:
    """Every node with its attributes and tensors, shapes completed in graph order."""
    table = _ShapeTable(model, shapes)
    walked: _Walked = []
    for node in model.graph.node:
        attrs = attributes(node)
        inputs = tuple(table.get(name) for name in node.input)
        view = Node(node.op_type, node.domain, attrs, inputs, tuple(table.get(n) for n in node.output))
        table.complete(node, view)
        walked.append((node, attrs, inputs, tuple(table.get(name) for name in node.output)))
    return walked, table


def tensor_infos(model: onnx.ModelProto, shapes: Mapping[str, TensorInfo] | None = None) -> dict[str, TensorInfo]:
    """Every tensor of the main graph whose type is known, shapes as :func:`graph_costs` finds them."""
    return dict(_walk(model, shapes)[1].infos)


def graph_costs(model: onnx.ModelProto, shapes: Mapping[str, TensorInfo] | None = None,
                original: onnx.ModelProto | None = None) -> list[tuple[onnx.NodeProto, Cost]]:
    """One Cost per node of the main graph, in graph order.

    Shapes come from, in order of precedence: ``shapes`` (e.g. what ONNX Runtime reported at run
    time), the initializers, onnx shape inference (strict mode off), and, past ops onnx does not
    know (ONNX Runtime's contrib and NCHWc ops), this package's own inference. Channels an NCHWc
    layout padded are counted at their real number (:mod:`layerperf.cost.onnx.layout`; ``original``,
    the model ``model`` was optimized from, helps find it). Nodes inside subgraphs (If/Loop/Scan
    bodies) are not costed; those control-flow nodes report flops=None.
    """
    walked, table = _walk(model, shapes)
    channels = None
    if has_blocked(model):
        model_inputs = {i.name for i in original.graph.input} if original is not None else set()
        given = {k: v for k, v in table.infos.items() if k in model_inputs}
        channels = real_channels(model, table.infos, tensor_infos(original, given) if original is not None else None)
    result = []
    for node, attrs, inputs, outputs in walked:
        if channels is not None:
            inputs, outputs = real_view(node, inputs, outputs, channels)
        result.append((node, node_cost(node.op_type, node.domain, attrs, inputs, outputs)))
    return result


def model_flops(model: onnx.ModelProto) -> int:
    """Sum of the FLOPs over the nodes whose cost is known (nodes with flops=None add nothing)."""
    return sum(c.flops for _, c in graph_costs(model) if c.flops is not None)
