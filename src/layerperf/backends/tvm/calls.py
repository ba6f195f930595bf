"""The calls the Relax VM makes in one run of ``main``, each tied to the ONNX nodes it computes.

Value types only (no TVM): what :mod:`.mapping` computes from a compile, what the artifact cache
stores as JSON, and what the instrument hook and the memory accounting read.

A *call site* is one call instruction of ``main``'s bytecode, in order; the VM's instrument hook
sees them one to one, before and after each. A kernel site runs a compiled function (a
``fused_conv2d_add_relu`` may serve several sites); a builtin site is the VM's own work
(``vm.builtin.alloc_storage``, ``vm.builtin.reshape``, ``vm.builtin.null_value``...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.data.tensor import TensorInfo

BUILTIN_PREFIX = "vm.builtin."
# The builtins that do a node's work (a Reshape runs as a view, not a kernel).
WORK_BUILTINS = frozenset({"vm.builtin.reshape"})
# How an ONNX node ended up: in a kernel (or a builtin doing its work); folded away at compile time
# (constant folding, dead code); resolved by the importer itself (Constant, Identity, a Shape of a
# static tensor); or still bound at the end of the Relax passes yet found in no call (a mapping gap).
STATUSES = ("kernel", "folded", "import", "unmapped")


def is_builtin(func: str) -> bool:
    return func.startswith(BUILTIN_PREFIX)


@dataclass(frozen=True, slots=True)
class CallSite:
    """One call instruction of ``main``: its position, callee, and the ONNX nodes it computes.

    ``nodes`` are graph indices in graph order (a fused kernel lists every node it covers; a
    builtin none, except a reshape). ``n_inputs``: how many of a kernel's arguments are inputs,
    the rest being its outputs (None: unknown). ``serves``: for an allocation, the kernel site it
    allocates for (the next one); for a free, the site after which the value died (the previous).
    """

    call: int
    func: str
    nodes: tuple[int, ...] = ()
    n_inputs: int | None = None
    serves: int | None = None

    @property
    def kernel(self) -> bool:
        return not is_builtin(self.func)

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "func": self.func, "nodes": list(self.nodes), "n_inputs": self.n_inputs,
                "serves": self.serves}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CallSite:
        return cls(int(d["call"]), str(d["func"]), tuple(int(n) for n in d.get("nodes", ())),
                   d.get("n_inputs"), d.get("serves"))


@dataclass(frozen=True, slots=True)
class CallTensors:
    """The tensors one call read and wrote, as a run had them (a builtin's result counts as written)."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]


@dataclass(frozen=True, slots=True)
class CallMap:
    """Every call site of ``main`` and what became of each ONNX node (one of :data:`STATUSES`)."""

    sites: tuple[CallSite, ...]
    node_status: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def kernels(self) -> list[CallSite]:
        return [s for s in self.sites if s.kernel]

    def coverage(self) -> dict[str, int]:
        """How many nodes have each status (every status listed, 0 included)."""
        counts = Counter(self.node_status)
        return {s: counts.get(s, 0) for s in STATUSES}

    def unmapped(self) -> list[int]:
        return [i for i, s in enumerate(self.node_status) if s == "unmapped"]

    def sites_of(self, node: int) -> list[CallSite]:
        return [s for s in self.sites if node in s.nodes]

    def to_json(self) -> dict[str, Any]:
        return {"sites": [s.to_json() for s in self.sites], "node_status": list(self.node_status),
                "warnings": list(self.warnings)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CallMap:
        return cls(tuple(CallSite.from_json(s) for s in d["sites"]), tuple(d["node_status"]),
                   tuple(d.get("warnings", ())))


def serving(funcs: Sequence[str]) -> list[int | None]:
    """For each call, the kernel call an allocation is made for (the next kernel) or a free follows
    (the previous kernel); None for the rest and where there is no such kernel."""
    kernels = [i for i, f in enumerate(funcs) if not is_builtin(f)]
    out: list[int | None] = [None] * len(funcs)
    prev: int | None = None
    nxt = iter(kernels)
    upcoming = next(nxt, None)
    for i, f in enumerate(funcs):
        if upcoming is not None and i == upcoming:
            prev, upcoming = i, next(nxt, None)
        elif f.startswith(BUILTIN_PREFIX + "alloc"):
            out[i] = upcoming
        elif f == BUILTIN_PREFIX + "null_value":
            out[i] = prev
    return out
