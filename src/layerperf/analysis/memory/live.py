"""The live-tensor timeline of one profiled run, computed from a Profile alone.

A tensor lives from the node that produces it to the last node that consumes it, both included:
while a node runs, its inputs are still held and its outputs already allocated (ONNX Runtime's
profiler records its arena figures at that same moment, before the node's dead inputs are
released). Graph inputs live from the first node, graph outputs to the last; initializers are
weights, counted apart. A tensor that no layer produces and that is no graph input was made by the
model's own code between layers (a PyTorch module's forward computing outside its children): it
lives from its first use, and its kind says so ("code").

With ``inplace=True`` (the default) tensors that ONNX Runtime stores in one buffer are counted
once: a view op's output shares its input's buffer, and an op that may write in place reuses an
input buffer that dies at that node when the sizes match. The op lists were measured on the CPU
provider of ONNX Runtime 1.32 (an output allocated nothing in the arena); ``inplace=False`` counts
every tensor on its own, exactly as the lifetimes above define.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.layer import onnx_domain
from layerperf.data.memory_report import ACTIVATION, CODE, INPUT, OUTPUT, Block
from layerperf.errors import InputError

if TYPE_CHECKING:
    from layerperf.data.profile import Layer, Profile

# Output 0 is a view of input 0: no allocation, whatever the input's lifetime.
ALIAS_OPS = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})
# Output 0 may overwrite input 0 when that input's buffer dies at this node.
INPLACE_OPS = frozenset({
    "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign",
    "ThresholdedRelu", "Shrink", "Clip", "Softmax", "LogSoftmax", "Cast",
})
# Fused convolutions that add a residual ("Sum"/"Z" input) write their output over it.
SUM_INPLACE_OPS = frozenset({("com.microsoft.nchwc", "Conv"), ("com.microsoft", "FusedConv")})


def is_view(op_type: str, domain: str | None) -> bool:
    """Whether an op of ONNX's own domain hands its input over as its output (:data:`ALIAS_OPS`): it
    moves and computes nothing; what it takes is the runtime's own per-node cost."""
    return op_type in ALIAS_OPS and onnx_domain(domain)


def views(layers: Sequence[Layer]) -> list[bool]:
    """Whether each layer is a view op (:func:`is_view`)."""
    return [is_view(layer.op_type, layer.domain) for layer in layers]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Blocks and the bytes live while each node runs, in execution order."""

    nodes: tuple[str, ...]
    blocks: tuple[Block, ...]
    live_bytes: tuple[int, ...]
    initializer_bytes: int
    unknown_size: tuple[str, ...] = ()  # tensors whose size is unknown, counted as 0 bytes

    @property
    def peak_index(self) -> int:
        """Index of the first node at which live bytes peak; -1 for an empty profile."""
        return int(np.argmax(self.live_bytes)) if self.live_bytes else -1

    @property
    def peak_bytes(self) -> int:
        return max(self.live_bytes, default=0)

    def live_blocks(self, index: int) -> list[Block]:
        """Blocks live while node ``index`` runs, largest first."""
        return sorted((b for b in self.blocks if b.live_at(index) and b.nbytes), key=lambda b: (-b.nbytes, b.name))


@dataclass(slots=True)
class _Tensor:
    name: str
    nbytes: int
    first: int
    last: int
    kind: str


def graph_section(profile: Profile) -> dict[str, Any]:
    graph = profile.graph
    if graph is None:
        raise InputError("this profile has no graph section (inputs, outputs, initializers)",
                         hint="profile the model again with this layerperf to analyse memory")
    return {"inputs": list(graph.inputs), "outputs": list(graph.outputs), "initializers": graph.initializers}


def _tensors(layers: Sequence[Layer], graph: dict[str, Any]) -> tuple[dict[str, _Tensor], list[str]]:
    inits = set(graph.get("initializers", {}))
    outputs = set(graph.get("outputs", ()))
    inputs = set(graph.get("inputs", ()))
    size: dict[str, int | None] = {}
    first_use: dict[str, int] = {}
    producer: dict[str, int] = {}
    last_use: dict[str, int] = {}
    for k, layer in enumerate(layers):
        for t in layer.outputs:
            if t.name and t.name not in producer:
                producer[t.name] = k
                size[t.name] = t.nbytes
        for t in layer.inputs:
            if t.name and t.name not in inits:
                last_use[t.name] = k
                first_use.setdefault(t.name, k)
                if size.get(t.name) is None:
                    size[t.name] = t.nbytes
    end = len(layers) - 1
    tensors: dict[str, _Tensor] = {}
    for name in sorted(size, key=lambda n: (producer.get(n, -1), n)):
        code = name not in producer and bool(inputs) and name not in inputs and name in first_use
        first = producer.get(name, first_use[name] if code else 0)
        last = end if name in outputs else max(last_use.get(name, first), first)
        kind = OUTPUT if name in outputs else ACTIVATION if name in producer else CODE if code else INPUT
        tensors[name] = _Tensor(name, size[name] or 0, first, last, kind)
    return tensors, sorted(n for n, s in size.items() if s is None)


def _candidates(layer: Layer, inits: set[str]) -> tuple[list[str], bool]:
    """Inputs output 0 may be stored in, and whether that is a view (alias) rather than in place."""
    names = [t.name for t in layer.inputs]
    if is_view(layer.op_type, layer.domain) and names:
        return names[:1], True
    if layer.op_type in INPLACE_OPS and onnx_domain(layer.domain) and names:
        return [n for n in names[:1] if n not in inits], False
    if (layer.domain, layer.op_type) in SUM_INPLACE_OPS:
        return [n for n in names[1:] if n not in inits], False
    return [], False


class _Buffers:
    """Union of tensors into buffers, decided node by node in execution order."""

    def __init__(self, tensors: dict[str, _Tensor]) -> None:
        self.tensors = tensors
        self.owner = {name: name for name in tensors}
        self.members = {name: [name] for name in tensors}

    def last(self, owner: str) -> int:
        return max(self.tensors[m].last for m in self.members[owner])

    def pinned(self, owner: str) -> bool:
        # A graph input belongs to the caller and a graph output to the result: never overwritten.
        return any(self.tensors[m].kind != ACTIVATION for m in self.members[owner])

    def join(self, tensor: str, owner: str) -> None:
        self.members[self.owner[tensor]].remove(tensor)
        self.owner[tensor] = owner
        self.members[owner].append(tensor)

    def place_output(self, out: str, layer: Layer, index: int, inits: set[str]) -> None:
        names, alias = _candidates(layer, inits)
        for name in names:
            if alias and name in inits:  # a view of a weight allocates nothing
                self.tensors[out].nbytes = 0
                return
            if name not in self.tensors:
                continue
            owner = self.owner[name]
            if alias:
                self.join(out, owner)
                return
            src = self.tensors[owner]
            if self.last(owner) == index and not self.pinned(owner) and src.nbytes == self.tensors[out].nbytes:
                self.join(out, owner)
                return

    def blocks(self) -> list[Block]:
        out = []
        for owner, members in self.members.items():
            if not members:
                continue
            ts = [self.tensors[m] for m in members]
            kinds = {t.kind for t in ts}
            kind = next((k for k in (INPUT, OUTPUT, CODE) if k in kinds), ACTIVATION)
            out.append(Block(tuple(members), max(t.nbytes for t in ts), self.tensors[owner].first,
                             max(t.last for t in ts), kind))
        return sorted(out, key=lambda b: (b.first, b.name))


def live_bytes(blocks: Sequence[Block], n_nodes: int) -> tuple[int, ...]:
    steps = np.zeros(n_nodes + 1, dtype=np.int64)
    for b in blocks:
        steps[b.first] += b.nbytes
        steps[b.last + 1] -= b.nbytes
    return tuple(int(x) for x in np.cumsum(steps[:n_nodes]))


def build(profile: Profile, *, inplace: bool = True) -> Timeline:
    """The live-tensor timeline of ``profile`` over its layers' execution order."""
    graph = graph_section(profile)
    layers = profile.layers
    inits = set(graph.get("initializers", {}))
    tensors, unknown = _tensors(layers, graph)
    buffers = _Buffers(tensors)
    if inplace:
        for k, layer in enumerate(layers):
            # Only output 0 of these ops can share storage; a name seen earlier is not produced here.
            out = layer.outputs[0].name if layer.outputs else ""
            if out in tensors and tensors[out].first == k:
                buffers.place_output(out, layer, k, inits)
    blocks = buffers.blocks()
    init_bytes = sum(int(v) for v in graph.get("initializers", {}).values())
    return Timeline(nodes=tuple(layer.name for layer in layers), blocks=tuple(blocks),
                    live_bytes=live_bytes(blocks, len(layers)), initializer_bytes=init_bytes,
                    unknown_size=tuple(unknown))
