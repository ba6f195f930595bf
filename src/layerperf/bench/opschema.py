"""What an operator accepts, from its schema: input names and types, attribute types, opsets.

Standard-domain schemas come from ``onnx.defs``; ONNX Runtime's contrib domains (``com.microsoft``,
``com.microsoft.nchwc``) are known only to ONNX Runtime, so their schemas come from its own list.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any

import onnx

from layerperf.errors import InputError

ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


@dataclass(frozen=True, slots=True)
class Param:
    """One formal input of an operator."""

    name: str
    option: str  # "Single", "Optional" or "Variadic"
    dtypes: frozenset[str]  # numpy-style names the input accepts; empty when the schema is silent


@dataclass(frozen=True, slots=True)
class OpSignature:
    op_type: str
    domain: str
    since_version: int
    opset: int  # the opset the model imports for this domain
    inputs: tuple[Param, ...]
    min_inputs: int
    max_inputs: int
    attr_types: dict[str, str]  # attribute name -> "INT", "INTS", "FLOAT", "STRING", ...
    from_onnx: bool  # False: an ONNX Runtime contrib schema, unknown to onnx's checker and inference

    def param_names(self) -> str:
        return ", ".join(p.name + {"Optional": "?", "Variadic": "..."}.get(p.option, "") for p in self.inputs)


def norm_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


_TENSOR_TYPES = {"float": "float32", "double": "float64"}


def _dtype_of(type_str: str) -> str | None:
    if not type_str.startswith("tensor("):
        return None  # seq(...), optional(...), map(...): not something bench can feed
    inner = type_str[len("tensor("):-1]
    return _TENSOR_TYPES.get(inner, inner)


def _param_dtypes(type_str: str, constraints: dict[str, list[str]]) -> frozenset[str]:
    allowed = constraints.get(type_str, [type_str])
    return frozenset(d for d in (_dtype_of(t) for t in allowed) if d is not None)


def _enum_name(value: Any) -> str:
    return getattr(value, "name", str(value).rsplit(".", 1)[-1])


def _signature(schema: Any, domain: str, opset: int, from_onnx: bool) -> OpSignature:
    constraints = {t.type_param_str: list(t.allowed_type_strs) for t in schema.type_constraints}
    params = tuple(
        Param(p.name, _enum_name(p.option),
              _param_dtypes(p.type_str if from_onnx else p.typeStr, constraints))
        for p in schema.inputs
    )
    attrs = {name: _enum_name(a.type) for name, a in schema.attributes.items()}
    return OpSignature(schema.name, domain, int(schema.since_version), opset, params, int(schema.min_input),
                       int(schema.max_input), attrs, from_onnx)


@functools.lru_cache(maxsize=1)
def _ort_schemas() -> dict[tuple[str, str], list[Any]]:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    out: dict[tuple[str, str], list[Any]] = {}
    for s in C.get_all_operator_schema():
        out.setdefault((s.domain, s.name), []).append(s)
    return out


@functools.lru_cache(maxsize=4)
def max_opset(domain: str = "") -> int:
    """The newest opset of ``domain`` that both onnx and ONNX Runtime know and ONNX Runtime loads."""
    ort_max = max((s.since_version for (d, _), ss in _ort_schemas().items() if d == domain for s in ss), default=1)
    if domain == "":
        return _loadable_opset(min(onnx.defs.onnx_opset_version(), ort_max))
    return ort_max


_OFFICIAL_OPSET = re.compile(r"official support for domain ai\.onnx is till opset (\d+)")


def _loadable_opset(opset: int) -> int:
    # ONNX Runtime carries the schemas of an opset still under development in onnx (their since_version
    # says 27 while 1.31 loads models up to 26 only), and refuses models stamped with it. A one-node
    # model tells which opset it really loads; the refusal names the newest official one.
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, onnx.helper.find_min_ir_version_for([model.opset_import[0]]))
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT's own pybind types
        found = _OFFICIAL_OPSET.search(str(exc))
        if found and int(found.group(1)) < opset:
            return int(found.group(1))
    return opset


def _unknown(op_type: str, domain: str) -> InputError:
    names = {n for (d, n) in _ort_schemas() if d == domain} | {
        s.name for s in onnx.defs.get_all_schemas() if norm_domain(s.domain) == domain}
    close = difflib.get_close_matches(op_type, names, n=3, cutoff=0.6)
    where = f"domain '{domain}'" if domain else "the ONNX standard (domain '')"
    hint = "did you mean " + " or ".join(close) + "?" if close else "check the spelling, or pass --domain"
    elsewhere = sorted({d for (d, n) in _ort_schemas() if n == op_type and d != domain})
    if elsewhere:
        hint = (f"it is in domain {elsewhere[0]}: pass --domain {elsewhere[0]}" if elsewhere[0]
                else "it is a standard ONNX operator: leave out --domain")
    return InputError(f"unknown operator '{op_type}' in {where}", hint=hint)


def lookup(op_type: str, domain: str = "", opset: int | None = None) -> OpSignature:
    """The schema ``op_type`` has in ``domain`` at ``opset`` (default: the newest both libraries know)."""
    domain = norm_domain(domain)
    version = opset if opset is not None else max_opset(domain)
    if not 1 <= version <= max_opset(domain):
        raise InputError(f"--opset {version} is out of range for domain '{domain}'",
                         hint=f"onnx and ONNX Runtime know opsets 1 to {max_opset(domain)}")
    if domain in ONNX_DOMAINS:
        if not onnx.defs.has(op_type, domain):
            raise _unknown(op_type, domain)
        try:
            schema = onnx.defs.get_schema(op_type, version, domain)
        except onnx.defs.SchemaError:
            raise InputError(f"operator {op_type} does not exist at opset {version}",
                             hint="pass a newer --opset") from None
        if schema.deprecated:
            raise InputError(f"operator {op_type} is deprecated at opset {version}", hint="pass an older --opset")
        return _signature(schema, domain, version, from_onnx=True)
    versions = [s for s in _ort_schemas().get((domain, op_type), []) if s.since_version <= version]
    if not versions:
        if (domain, op_type) in _ort_schemas():
            raise InputError(f"operator {domain}.{op_type} does not exist at opset {version}")
        raise _unknown(op_type, domain)
    return _signature(max(versions, key=lambda s: s.since_version), domain, version, from_onnx=False)
