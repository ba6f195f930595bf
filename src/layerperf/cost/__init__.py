"""The cost model: FLOPs, integer operations, bytes read and bytes written of one op call, in any op
namespace a model is registered for.

One multiply-add is 2 FLOPs in every namespace; ``flops`` counts floating-point work only and
``int_ops`` integer work; either is None where the op is not modelled or a shape it needs is unknown,
never a silent 0 (:class:`~layerperf.data.cost.Cost`).

Namespaces
----------
- ONNX (:mod:`layerperf.cost.onnx`): every ONNX domain — ``""``, ``"ai.onnx"`` or ``"onnx"`` for the
  default one, ``"com.microsoft"`` (ONNX Runtime's contrib and fused ops), ``"com.microsoft.nchwc"``...
  A namespace no other model owns is taken for an ONNX domain: a custom op gets its bytes and unknown work.
  Whole graphs: :func:`layerperf.cost.onnx.graph.graph_costs`.
- ``"tvm.vm"`` (:mod:`layerperf.cost.tvm`): the Relax VM's builtins (allocations, frees, shape checks),
  TVM's level-2 rows: no arithmetic. TVM's kernels are costed as the ONNX nodes they compute.
- ``"aten"`` (:mod:`layerperf.cost.aten`): PyTorch's aten ops, counted as the ONNX op each stands for;
  inputs are the call's positional arguments (tensors, scalars, lists), attributes its keyword arguments.
  Live torch tensors: :mod:`layerperf.cost.aten.live`; a profiler trace's records:
  :mod:`layerperf.cost.aten.recorded`.

A new namespace (a TVM backend's kernels, say) plugs in with :func:`register`: an object with
``cost(namespace, op, inputs, outputs, attrs) -> Cost``, ``knows(namespace, op) -> bool`` and
``ops() -> set[(namespace, op)]`` (:class:`Namespace`), its formulas in a subpackage of its own
(``cost/tvm/``) built on :mod:`layerperf.cost.shapes`. A kernel that fuses ONNX nodes is best costed as
the sum of :func:`of` over its nodes (``of("ai.onnx", ...)``), its own formulas kept for kernels no node
is known for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from layerperf.cost import aten
from layerperf.cost import onnx as onnx_ops
from layerperf.cost import tvm as tvm_vm
from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo


class Namespace(Protocol):
    """The model of one or more op namespaces."""

    def cost(self, namespace: str, op: str, inputs: Sequence[Any], outputs: Sequence[TensorInfo | None] | None,
             attrs: Mapping[str, Any]) -> Cost:
        """The cost of one call; unknown figures None, never 0."""

    def knows(self, namespace: str, op: str) -> bool:
        """Whether :meth:`cost` can give ``op``'s work (shapes permitting)."""

    def ops(self) -> set[tuple[str, str]]:
        """Every (namespace, op) covered."""


class _Onnx:
    """The ONNX namespace: any domain; inputs and outputs are tensors by position (None: an omitted
    optional one), attrs the node's attributes as Python values."""

    def cost(self, namespace: str, op: str, inputs: Sequence[Any], outputs: Sequence[TensorInfo | None] | None,
             attrs: Mapping[str, Any]) -> Cost:
        found = onnx_ops.node_cost(op, namespace, dict(attrs), inputs, () if outputs is None else outputs)
        return found if outputs is not None else replace(found, bytes_written=None)  # not recorded: unknown

    def knows(self, namespace: str, op: str) -> bool:
        return onnx_ops.is_known(op, namespace)

    def ops(self) -> set[tuple[str, str]]:
        return onnx_ops.known_op_types()


class _Aten:
    """The aten namespace: inputs are the positional arguments, attrs the keyword arguments; outputs the
    results by position, None where not recorded (then only ops whose results follow from their
    arguments are costed)."""

    def cost(self, namespace: str, op: str, inputs: Sequence[Any], outputs: Sequence[TensorInfo | None] | None,
             attrs: Mapping[str, Any]) -> Cost:
        return aten.cost(aten.AtenCall(op, tuple(inputs), dict(attrs), None if outputs is None else tuple(outputs)))

    def knows(self, namespace: str, op: str) -> bool:
        return aten.knows(op)

    def ops(self) -> set[tuple[str, str]]:
        return {("aten", op) for op in aten.ops()}


_ONNX = _Onnx()
_NAMESPACES: dict[str, Namespace] = {"aten": _Aten(), tvm_vm.NAMESPACE: tvm_vm.VmBuiltins()}


def register(namespace: str, model: Namespace) -> None:
    """Make ``model`` the one that costs ``namespace``'s ops (replacing any before it)."""
    _NAMESPACES[namespace] = model


def _model(namespace: str) -> Namespace:
    return _NAMESPACES.get(namespace, _ONNX)


def of(namespace: str, op: str, inputs: Sequence[Any] = (), outputs: Sequence[TensorInfo | None] | None = None,
       attrs: Mapping[str, Any] | None = None) -> Cost:
    """FLOPs, integer operations and bytes of one call of ``op`` in ``namespace`` (see the module's
    docstring for what inputs, outputs and attrs are in each); an op no model covers gets unknown work
    (None, never 0)."""
    return _model(namespace).cost(namespace, op, inputs, outputs, attrs or {})


def covers(namespace: str, op: str) -> bool:
    """Whether :func:`of` can give ``op``'s work in ``namespace`` (shapes permitting)."""
    return _model(namespace).knows(namespace, op)


def known_ops() -> set[tuple[str, str]]:
    """Every (namespace, op) a registered model covers; the ONNX default domain is ``""``."""
    found = set(_ONNX.ops())
    for model in _NAMESPACES.values():
        found |= model.ops()
    return found


__all__ = ["Cost", "Namespace", "covers", "known_ops", "of", "register"]
