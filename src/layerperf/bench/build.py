"""Build the one-node ONNX model that ``bench`` measures, checked by the op schema and shape inference.

Weights: inputs that hold a layer's parameters in a real model (a Conv's W and B, a Gemm's B and C,
a MatMul's B, normalization scales...) become initializers by default, because that is how they
arrive in real models and ONNX Runtime's kernels pre-pack constant weights (a Conv or MatMul
re-lays its weight out once, at session creation); a weight fed at run time would be measured
without that. ``weights="inputs"`` feeds every tensor at run time instead. The first data input is
always a graph input, so that constant folding can never compute the node away before it is timed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layerperf.bench.opschema import OpSignature, Param, _ort_schemas, lookup, max_opset, norm_domain
from layerperf.bench.parse import Dims, guess_attr, parse_dims, parse_dtype, split_dtype
from layerperf.data.tensor import TensorInfo, onnx_elem_to_dtype
from layerperf.errors import InputError, first_line

# (domain, op_type) -> input names that are layer parameters in real models.
PARAMETER_INPUTS: dict[tuple[str, str], frozenset[str]] = {
    ("", "Conv"): frozenset({"W", "B"}),
    ("", "ConvTranspose"): frozenset({"W", "B"}),
    ("", "ConvInteger"): frozenset({"w", "w_zero_point"}),
    ("", "QLinearConv"): frozenset({"w", "w_scale", "w_zero_point", "B"}),
    ("", "Gemm"): frozenset({"B", "C"}),
    ("", "MatMul"): frozenset({"B"}),
    ("", "MatMulInteger"): frozenset({"B", "b_zero_point"}),
    ("", "QLinearMatMul"): frozenset({"b", "b_scale", "b_zero_point"}),
    ("", "BatchNormalization"): frozenset({"scale", "B", "input_mean", "input_var"}),
    ("", "InstanceNormalization"): frozenset({"scale", "B"}),
    ("", "LayerNormalization"): frozenset({"Scale", "B"}),
    ("", "GroupNormalization"): frozenset({"scale", "bias"}),
    ("", "RMSNormalization"): frozenset({"scale"}),
    ("", "PRelu"): frozenset({"slope"}),
    ("", "LSTM"): frozenset({"W", "R", "B"}),
    ("", "GRU"): frozenset({"W", "R", "B"}),
    ("", "RNN"): frozenset({"W", "R", "B"}),
    ("com.microsoft", "FusedConv"): frozenset({"W", "B"}),
    ("com.microsoft", "FusedMatMul"): frozenset({"B"}),
    ("com.microsoft", "FusedGemm"): frozenset({"B", "C"}),
    ("com.microsoft", "Attention"): frozenset({"weights", "bias"}),
    ("com.microsoft", "SkipLayerNormalization"): frozenset({"gamma", "beta", "bias"}),
    ("com.microsoft", "BiasGelu"): frozenset({"bias"}),
    ("com.microsoft.nchwc", "Conv"): frozenset({"W", "B"}),
}


@dataclass(frozen=True, slots=True)
class InputArg:
    """What was asked for one input: a shape and dtype to fill with data, or a constant value."""

    shape: Dims
    dtype: str | None = None  # None: the op's default for this input
    value: np.ndarray | None = None  # a constant: becomes an initializer holding exactly this


InputLike = str | Sequence[int] | tuple[Sequence[int], str] | np.ndarray | InputArg


@dataclass(frozen=True, slots=True)
class OneNode:
    """A one-node model ready to measure, with the data of its graph inputs and what went into it."""

    model: onnx.ModelProto
    feed: dict[str, np.ndarray]
    op_type: str
    domain: str
    opset: int
    attrs: dict[str, Any]
    inputs: tuple[TensorInfo | None, ...]  # the node's inputs in order; None: an omitted optional one
    outputs: tuple[TensorInfo, ...]  # shapes may be None until a run tells them (contrib ops)
    weights: tuple[str, ...]  # inputs held as initializers
    node_name: str
    source: dict[str, Any] = field(default_factory=dict)  # where the node came from (--node)


def as_input_arg(name: str, spec: InputLike) -> InputArg:
    """Normalize the ways an input can be given (``"1x3x8x8:float16"``, ``(1, 3, 8, 8)``, an array...)."""
    if isinstance(spec, InputArg):
        return spec
    if isinstance(spec, np.ndarray):
        return InputArg(tuple(spec.shape), str(spec.dtype), spec)
    if isinstance(spec, str):
        dims_text, dtype = split_dtype(spec)
        return InputArg(parse_dims(dims_text, f"dims of input {name}"), dtype)
    if (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], str)
            and isinstance(spec[0], Sequence) and not isinstance(spec[0], str)):
        return InputArg(_int_dims(name, spec[0]), parse_dtype(spec[1]))
    if isinstance(spec, Sequence):
        return InputArg(_int_dims(name, spec))
    raise InputError(f"input {name}: cannot use {type(spec).__name__} as a shape",
                     hint="give dims as '1x3x224x224', a tuple of ints, (dims, dtype) or a numpy array")


def _int_dims(name: str, dims: Sequence[Any]) -> Dims:
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in dims):
        raise InputError(f"input {name}: dims {tuple(dims)} must be positive integers")
    return tuple(int(d) for d in dims)


# -- inputs: names, order, dtypes --------------------------------------------------------------------
_SUFFIX = re.compile(r"^_?(\d+)$")
_SUFFIX_AT_END = re.compile(r"_?\d+$")


def _variadic_names(param: Param, given: Iterable[str]) -> list[str]:
    """User names for a variadic input ``inputs``: ``inputs`` or ``inputs_0``, ``inputs1``..., by index; where
    the schema numbers it already (Sum's, Max's ``data_0``), ``data_1``, ``data_2``... too."""
    stems = dict.fromkeys((param.name, _SUFFIX_AT_END.sub("", param.name)))
    found = []
    for name in given:
        if name == param.name:
            found.append((0, name))
            continue
        index = next((int(m.group(1)) for stem in stems
                      if name.startswith(stem) and (m := _SUFFIX.match(name[len(stem):]))), None)
        if index is not None:
            found.append((index, name))
    return [n for _, n in sorted(found)]


def order_inputs(sig: OpSignature, given: Mapping[str, Any]) -> list[tuple[Param, str | None]]:
    """The node's inputs in schema order as (formal parameter, user name or None when omitted)."""
    slots: list[tuple[Param, str | None]] = []
    used: set[str] = set()
    for param in sig.inputs:
        if param.option == "Variadic":
            names = _variadic_names(param, [n for n in given if n not in used])
            slots += [(param, n) for n in names]
            used.update(names)
        else:
            slots.append((param, param.name if param.name in given else None))
            used.update({param.name} & set(given))
    unknown = [n for n in given if n not in used]
    if unknown:
        close = difflib.get_close_matches(unknown[0], [p.name for p in sig.inputs], n=1)
        raise InputError(f"{sig.op_type} has no input '{unknown[0]}'",
                         hint=("did you mean " + close[0] + "? " if close else "") + _inputs_hint(sig))
    while slots and slots[-1][1] is None and slots[-1][0].option == "Optional":
        slots.pop()  # trailing omitted optionals are simply left off
    for param, name in slots:
        if name is None and param.option != "Optional":
            raise InputError(f"{sig.op_type} needs input {param.name}",
                             hint=f"add --input {param.name}=DIMS; " + _inputs_hint(sig))
    if not sig.min_inputs <= len(slots) <= sig.max_inputs:
        takes = (f"at least {sig.min_inputs}" if sig.max_inputs >= 2**31 - 1  # a variadic input: no real limit
                 else f"{sig.min_inputs} to {sig.max_inputs}")
        raise InputError(f"{sig.op_type} takes {takes} inputs, got {len(slots)}", hint=_inputs_hint(sig))
    return slots


def _inputs_hint(sig: OpSignature) -> str:
    optional = any(p.option == "Optional" for p in sig.inputs)
    return f"its inputs are {sig.param_names()}" + (", where ? marks an optional one" if optional else "")


def default_dtype(param: Param) -> str:
    """float32 where the input takes it, else int64 (indices, shapes), else its only type."""
    for choice in ("float32", "int64"):
        if not param.dtypes or choice in param.dtypes:
            return choice
    if len(param.dtypes) == 1:
        return next(iter(param.dtypes))
    raise InputError(f"input {param.name} needs a dtype", hint="one of: " + ", ".join(sorted(param.dtypes)))


def check_dtype(sig: OpSignature, param: Param, name: str, dtype: str) -> None:
    if param.dtypes and dtype not in param.dtypes:
        raise InputError(f"{sig.op_type} input {name} cannot be {dtype}",
                         hint="it takes " + ", ".join(sorted(param.dtypes)))


# -- attributes ----------------------------------------------------------------------------------------
def _split(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [v.strip() for v in value.strip("[]()").split(",") if v.strip()]
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(value)
    return [value]


def _typed(value: Any, kind: str) -> Any:
    if kind == "INT":
        f = float(value)
        if not f.is_integer():
            raise ValueError(value)
        return int(f)
    if kind == "FLOAT":
        return float(value)
    if kind == "STRING":
        return value.decode() if isinstance(value, bytes) else str(value)
    if kind in {"INTS", "FLOATS", "STRINGS"}:
        return [_typed(v, kind[:-1]) for v in _split(value)]
    if kind == "TENSOR":
        if isinstance(value, onnx.TensorProto):
            return value
        arr = np.asarray(guess_attr(value) if isinstance(value, str) else value)
        arr = arr.astype(np.float32) if arr.dtype.kind == "f" else arr.astype(np.int64)
        return numpy_helper.from_array(arr.reshape(-1) if arr.ndim == 0 else arr)
    raise TypeError(kind)


_EXPECTED = {"INT": "an integer", "FLOAT": "a number", "INTS": "integers such as 1,1,1,1",
             "FLOATS": "numbers such as 0.5,1.0", "STRING": "a string", "STRINGS": "strings such as a,b",
             "TENSOR": "a number or a list such as [0.5]"}


def coerce_attrs(sig: OpSignature, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values typed as the schema says (``"1,1"`` -> [1, 1] for INTS); unknown names are errors."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        kind = sig.attr_types.get(key)
        if kind is None:
            close = difflib.get_close_matches(key, list(sig.attr_types), n=1)
            known = ", ".join(sorted(sig.attr_types)) or "none"
            raise InputError(f"{sig.op_type} has no attribute '{key}'",
                             hint=(f"did you mean {close[0]}? " if close else "") + f"its attributes: {known}")
        if kind not in _EXPECTED:
            raise InputError(f"attribute {key} of {sig.op_type} is a {kind}, which bench cannot set")
        try:
            out[key] = _typed(value, kind)
        except (TypeError, ValueError):
            raise InputError(f"attribute {key} of {sig.op_type}: expected {_EXPECTED[kind]}, got '{value}'") from None
    return out


def json_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as JSON-friendly values (a tensor attribute becomes its list of values)."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if isinstance(value, onnx.TensorProto):
            out[key] = numpy_helper.to_array(value).tolist()
        elif isinstance(value, (int, float, str, bool)) or value is None:
            out[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, str)) for v in value):
            out[key] = list(value)
        else:
            out[key] = f"<{type(value).__name__}>"  # a graph or sparse tensor: described, not serialized
    return out


# -- data ------------------------------------------------------------------------------------------------
def random_data(shape: Dims, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Normal floats; integer inputs are zeros, always valid as indices or axes; random bools."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(dt, copy=False)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return np.zeros(shape, dt)


# -- the model ---------------------------------------------------------------------------------------------
def _output_names(sig: OpSignature, schema_outputs: Sequence[tuple[str, str]], n_outputs: int | None,
                  taken: set[str]) -> list[str]:
    names: list[str] = []
    for name, option in schema_outputs:
        if option == "Variadic":
            names += [f"{name}_{i}" for i in range(max(1, (n_outputs or 1) - len(names)))]
            break
        if n_outputs is None and option == "Optional" and names:
            break
        names.append(name)
        if n_outputs is not None and len(names) >= n_outputs:
            break
    if n_outputs is not None and len(names) != n_outputs:
        raise InputError(f"{sig.op_type} has {len(names)} outputs, not {n_outputs}")
    return [n + "_out" if n in taken else n for n in names]


def schema_outputs(sig: OpSignature) -> list[tuple[str, str]]:
    if sig.from_onnx:
        schema = onnx.defs.get_schema(sig.op_type, sig.opset, sig.domain)
    else:
        schema = max((s for s in _ort_schemas()[(sig.domain, sig.op_type)] if s.since_version <= sig.opset),
                     key=lambda s: s.since_version)
    return [(o.name, getattr(o.option, "name", str(o.option).rsplit(".", 1)[-1])) for o in schema.outputs]


def _weight_names(sig: OpSignature, slots: Sequence[tuple[Param, str | None]], weights: Any) -> set[str]:
    present = [n for _, n in slots if n is not None]
    if weights == "auto":
        params = PARAMETER_INPUTS.get((sig.domain, sig.op_type), frozenset())
        chosen = {n for p, n in slots if n is not None and p.name in params}
    elif weights == "inputs":
        chosen = set()
    elif weights == "initializers":
        chosen = set(present[1:])
    else:
        chosen = set(_split(weights))
        unknown = chosen - set(present)
        if unknown:
            raise InputError(f"--weights names {', '.join(sorted(unknown))}, which is not an input given",
                             hint="inputs: " + ", ".join(present))
    return chosen


def build_op(op_type: str, inputs: Mapping[str, InputLike], attrs: Mapping[str, Any] | None = None, *,
             domain: str = "", opset: int | None = None, weights: Any = "auto", n_outputs: int | None = None,
             seed: int = 0, data: bool = True) -> OneNode:
    """A checked one-node model of ``op_type`` over ``inputs`` (input name -> dims, dtype or array). Without
    ``data``, every input given by its dims is a graph input with no data made for it (no feed, no weights):
    the node checked as it would be built, at no cost in memory (a co-runner's check in the driver)."""
    sig = lookup(op_type, domain, opset)
    args = {name: as_input_arg(name, spec) for name, spec in inputs.items()}
    slots = order_inputs(sig, args)
    typed_attrs = coerce_attrs(sig, attrs or {})
    as_init = _weight_names(sig, slots, weights) | {n for n, a in args.items() if a.value is not None}
    rng = np.random.default_rng(seed)
    graph_inputs, inits, feed = [], [], {}
    infos: list[TensorInfo | None] = []
    first_data = next((n for _, n in slots if n is not None and args[n].value is None), None)
    if first_data is None:
        raise InputError(f"every input of {op_type} is a constant: ONNX Runtime would fold the node away",
                         hint="give at least one input with --input NAME=DIMS")
    as_init.discard(first_data)
    for param, name in slots:
        if name is None:
            infos.append(None)
            continue
        arg = args[name]
        dtype = parse_dtype(arg.dtype) if arg.dtype else default_dtype(param)
        check_dtype(sig, param, name, dtype)
        if dtype == "string" and arg.value is None:
            raise InputError(f"{op_type} input {name} is a tensor of strings: bench makes numbers and bools only")
        if not data and arg.value is None:
            infos.append(TensorInfo(name, tuple(arg.shape), dtype))
            graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                              tuple(arg.shape)))
            continue
        values = (np.asarray(arg.value, dtype=dtype) if arg.value is not None
                  else random_data(arg.shape, dtype, rng))
        infos.append(TensorInfo(name, tuple(values.shape), dtype))
        if name in as_init:
            inits.append(numpy_helper.from_array(values, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(values.dtype),
                                                              values.shape))
            feed[name] = values
    out_names = _output_names(sig, schema_outputs(sig), n_outputs, set(args))
    node = helper.make_node(op_type, [n or "" for _, n in slots], out_names, name=op_type,
                            domain=sig.domain, **typed_attrs)
    model = _model(node, graph_inputs, inits, out_names, sig)
    model = infer(model, sig) if sig.from_onnx else model
    return OneNode(model=model, feed=feed, op_type=op_type, domain=sig.domain, opset=sig.opset,
                   attrs=typed_attrs, inputs=tuple(infos),
                   outputs=output_infos(model), weights=tuple(i.name for i in inits), node_name=op_type)



def _model(node: onnx.NodeProto, graph_inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto],
           out_names: list[str], sig: OpSignature) -> onnx.ModelProto:
    outputs = []
    for name in out_names:  # untyped: shape inference (or ONNX Runtime, for contrib ops) fills them in
        vi = onnx.ValueInfoProto()
        vi.name = name
        outputs.append(vi)
    graph = helper.make_graph([node], f"bench_{sig.op_type}", graph_inputs, outputs, inits)
    opsets = {"": max_opset("") if sig.domain else sig.opset}
    if sig.domain:
        opsets[sig.domain] = sig.opset
    ids = [helper.make_opsetid(d, v) for d, v in opsets.items()]
    return helper.make_model(graph, opset_imports=ids, producer_name="layerperf-bench",
                             ir_version=helper.find_min_ir_version_for(ids, ignore_unknown=True))


def infer(model: onnx.ModelProto, sig: OpSignature) -> onnx.ModelProto:
    """Strict ONNX shape inference: the output types and shapes, or an InputError saying what is wrong."""
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    try:
        onnx.checker.check_node(model.graph.node[0], ctx)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise InputError(f"{sig.op_type} rejects these inputs and attributes: {first_line(exc)}") from None
    for out in inferred.graph.output:
        tt = out.type.tensor_type
        if not out.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if any(d is not None and d <= 0 for d in dims):
            shape = "x".join(str(d) for d in dims)
            raise InputError(f"{sig.op_type} would produce an empty output {out.name} of shape {shape}",
                             hint="the input is smaller than the kernel, pads and strides ask for")
    return inferred


def output_infos(model: onnx.ModelProto) -> tuple[TensorInfo, ...]:
    """The graph outputs as TensorInfo (shape None where it is not known yet)."""
    out = []
    for o in model.graph.output:
        tt = o.type.tensor_type
        dtype = onnx_elem_to_dtype(tt.elem_type) if tt.elem_type else ""
        shape = (tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim)
                 if tt.HasField("shape") else None)
        out.append(TensorInfo(o.name, shape, dtype))
    return tuple(out)


__all__ = ["PARAMETER_INPUTS", "InputArg", "OneNode", "build_op", "norm_domain"]
