"""An ONNX model imported with TVM's Relax frontend, with the Relax bindings each ONNX node emitted.

``from_onnx`` keeps no node names or spans: after import nothing says which ``lv42`` came from which
Conv. So the import is run through a subclass of the frontend's importer that emits every node's
result as a binding of its own (the stock importer leaves a node's last call unbound, to be bound
later inside its consumer's conversion), and afterwards each node owns the bindings its output
vars depend on that no earlier node owns. Legalization and fusion keep those Var objects (checked
on the zoo's models), which is how :mod:`.mapping` follows a node to the kernel that runs it.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import onnx
from tvm import relax
from tvm.relax.frontend.onnx import onnx_frontend

from layerperf.errors import BackendError

# What the importer handles outside its converter table.
_DIRECT_OPS = frozenset({"If", "Constant"})
HINT = "profile it with --backend onnxruntime"


@dataclass(frozen=True, slots=True)
class Imported:
    """The Relax module and, for each binding var of ``main``, the index of the ONNX node it belongs to."""

    mod: Any  # tvm.IRModule
    owner: dict[Any, int]  # relax.Var -> index in the graph's nodes
    n_nodes: int


class _Recording(onnx_frontend.ONNXGraphImporter):
    """The stock importer, with every node's result bound to a var as soon as it is converted, and
    the node being converted known (to name it when its conversion fails)."""

    converting: tuple[str, str] = ("", "")

    def _convert_operator(self, op_name: str, inputs: list[Any], attrs: dict[str, Any], opset: int) -> Any:
        self.converting = (op_name, str(attrs.get("tvm_custom", {}).get("name", "")))
        sym = super()._convert_operator(op_name, inputs, attrs, opset)
        if isinstance(sym, relax.Tuple):
            return relax.Tuple([self._bound(f) for f in sym.fields])
        return self._bound(sym)

    def _bound(self, expr: Any) -> Any:
        return self.bb.emit(expr) if isinstance(expr, relax.Call | relax.TupleGetItem) else expr


def unsupported_ops(model: onnx.ModelProto) -> dict[str, str]:
    """Op types the Relax frontend has no converter for, each with its first node's name."""
    known = set(onnx_frontend._get_convert_map()) | _DIRECT_OPS
    out: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type not in known:
            out.setdefault(node.op_type, node.name or node.output[0])
    return out


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1 if text.startswith("Traceback") else 0] if text else type(exc).__name__


def _convert(model: onnx.ModelProto, shapes: dict[str, list[int]] | None) -> tuple[Any, _Recording]:
    importer = _Recording(shapes or {}, "float32")
    # The frontend prints "Error converting operator ..." before re-raising: the error is told here.
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            mod = importer.from_onnx(model.graph, _opset(model))
        except Exception as exc:  # noqa: BLE001 - any converter failure is the model's, told in one line
            op, name = importer.converting
            where = f" on node '{name}' ({op})" if name else (f" on a {op} node" if op else "")
            raise BackendError(f"TVM's Relax ONNX frontend failed{where}: {_first_line(exc)[:300]}",
                               hint=HINT) from None
    return mod, importer


def import_onnx(model: onnx.ModelProto, shapes: dict[str, list[int]] | None = None) -> Imported:
    """Import ``model`` (weights inside it) into Relax; BackendError naming an op type it cannot import."""
    missing = unsupported_ops(model)
    if missing:
        listed = ", ".join(f"{op} (node '{name}')" for op, name in missing.items())
        raise BackendError(f"TVM's Relax ONNX frontend cannot import op type{'s' * (len(missing) > 1)} {listed}",
                           hint=HINT)
    mod, importer = _convert(model, shapes)
    outputs = [[importer._nodes.get(name) for name in node.output if name] for node in model.graph.node]
    return Imported(mod, owners(mod["main"], outputs), len(model.graph.node))


def expr_vars(expr: Any) -> list[Any]:
    """The vars an importer value is made of (a Var, or a Tuple of them); constants have none."""
    if isinstance(expr, relax.Var):
        return [expr]
    if isinstance(expr, relax.Tuple):
        return [v for f in expr.fields for v in expr_vars(f)]
    return []


def bindings(func: Any) -> list[Any]:
    """Every binding of a Relax function's body, block after block."""
    return [b for block in func.body.blocks for b in block.bindings]


def owners(func: Any, node_outputs: Iterable[Iterable[Any]]) -> dict[Any, int]:
    """Each binding var of ``func`` -> the first node (in graph order) whose outputs depend on it."""
    bound = {b.var: b for b in bindings(func)}
    owner: dict[Any, int] = {}
    for k, outs in enumerate(node_outputs):
        todo = [v for expr in outs if expr is not None for v in expr_vars(expr)]
        while todo:
            var = todo.pop()
            if var in owner or var not in bound:
                continue
            owner[var] = k
            todo.extend(relax.analysis.free_vars(bound[var].value))
    # The function's output binding (``gv = lvN``) aliases the last node's value.
    for var, binding in bound.items():
        if var not in owner and isinstance(binding.value, relax.Var) and binding.value in owner:
            owner[var] = owner[binding.value]
    return owner


def tvm_error_types() -> tuple[type[BaseException], ...]:
    """The exception types TVM raises for a failed pass or build (0.27's errors are builtin
    exception types: InternalError a RuntimeError, a refused option a ValueError...)."""
    return (ValueError, RuntimeError, TypeError, AssertionError, KeyError, IndexError, NotImplementedError)
