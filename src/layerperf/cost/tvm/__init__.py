"""The ``tvm.vm`` namespace: the Relax VM's own builtins, the rows TVM's level 2 shows beside its kernels.

A builtin allocates (``alloc_storage``, ``alloc_tensor``), frees (``null_value``), checks or builds
shapes (``check_tensor_info``, ``match_shape``, ``make_shape``), or hands a value on (``reshape`` as a
view, ``tuple_getitem``): none of them computes, so each does 0 FLOPs and 0 integer operations. The
bytes they touch are left unknown (an allocation reads none of its block; a check reads metadata only).
A kernel, compiled from ONNX nodes, is costed as the sum of those nodes' costs in the ONNX namespace;
the builtin ``reshape`` doing a Reshape node's work is costed as that node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo

NAMESPACE = "tvm.vm"
# The builtins a Relax VM main calls on the models seen (resnet, mobilenet, bert; fused and not).
BUILTINS = ("alloc_storage", "alloc_tensor", "null_value", "check_tensor_info", "match_shape", "make_shape",
            "reshape", "tuple_getitem", "make_tuple", "copy", "shape_of", "tensor_to_shape", "read_if_cond",
            "invoke_closure", "call_tir_dyn", "ensure_zero_offset", "to_device", "kill_object")


def short_name(func: str) -> str:
    """A builtin's name as its op type: ``vm.builtin.alloc_storage`` -> ``alloc_storage``."""
    return func.removeprefix("vm.builtin.")


class VmBuiltins:
    """Every op of the ``tvm.vm`` namespace: no arithmetic, bytes unknown."""

    def cost(self, namespace: str, op: str, inputs: Sequence[Any], outputs: Sequence[TensorInfo | None] | None,
             attrs: Mapping[str, Any]) -> Cost:
        return Cost(0, None, None, 0)

    def knows(self, namespace: str, op: str) -> bool:
        return namespace == NAMESPACE

    def ops(self) -> set[tuple[str, str]]:
        return {(NAMESPACE, op) for op in BUILTINS}
