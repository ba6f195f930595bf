"""Pairing the nodes of two traces of one model across graph transformations.

ONNX Runtime's optimizers and ``onnxruntime.quantization`` rename the nodes they touch: an NCHWc
convolution is named after its output tensor plus ``_nchwc``, a quantized one after the float node
plus ``_quant``, a node created under a name already taken gets ``_token_N``, and PyTorch's exporter
names a tensor after the node that makes it plus ``_output_N``. So a float32 profile and its int8 or
differently optimized twin share almost no name, yet most of their nodes do the same work.

Rules, each applied to the nodes the earlier ones left unpaired (in execution order within a key):

1. ``exact``: the same name.
2. ``name``: the same normalized name — the known suffixes above stripped, repeatedly — and the same
   op family (op type with ``QLinear``/``Fused``/``Nhwc``/``DynamicQuantize`` prefixes and
   ``Integer``/``IntegerToFloat``/``NBits`` suffixes dropped, Gemm counted as MatMul).
3. ``output``: the same normalized output tensor name, unique on each side, and the same op family
   (traces that record tensor names: layerperf's own). A fused node keeps the last fused node's output.
4. ``scope``: the same module scope (a ``/``-path name without its last two parts — module and op —
   or a dotted name without its last part) and the same op family. This is how a fused Conv+Relu
   named after its Relu finds the quantized Conv named after the Conv.
5. ``order``: an op family with as many nodes left on each side, all of one side renamed (their names
   carry a suffix above: a node named after a graph output, say ``out_nchwc``): paired in execution order.

What no rule pairs is reported as only in one trace: quantize/dequantize and layout nodes, and nodes
fused away (an Add done inside a convolution).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

MODES = ("normalized", "exact")
RULES = ("exact", "name", "output", "scope", "order")

_SUFFIX = re.compile(r"(?:_token_\d+|_nchwc|_quant|_quantized|/duplicated|_output_\d+)$")
_FAMILY = re.compile(r"^(?:QLinear|Fused|Nhwc|DynamicQuantize|Q(?=Gemm))*(.*?)(?:IntegerToFloat|Integer|NBits)?$")


@dataclass(frozen=True, slots=True)
class Node:
    """What pairing looks at: a node's name, op type and output tensor names (when the trace has them)."""

    name: str
    op_type: str = ""
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pairing:
    """Pairs (index in A, index in B, rule) and the indices left unpaired on each side."""

    pairs: tuple[tuple[int, int, str], ...]
    only_a: tuple[int, ...]
    only_b: tuple[int, ...]

    def counts(self) -> dict[str, int]:
        """Pairs per rule, every rule listed."""
        out = dict.fromkeys(RULES, 0)
        for _, _, rule in self.pairs:
            out[rule] += 1
        return out


def normalize_name(name: str) -> str:
    """``name`` without the suffixes ONNX Runtime, its quantizer and PyTorch's exporter append."""
    while True:
        stripped = _SUFFIX.sub("", name)
        if stripped == name or not stripped:
            return name
        name = stripped


# PyTorch module classes (the torch backend's layer op types) and the ONNX op each computes
_TORCH_MODULES = {"Conv1d": "Conv", "Conv2d": "Conv", "Conv3d": "Conv", "Linear": "MatMul", "ReLU": "Relu",
                  "BatchNorm1d": "BatchNormalization", "BatchNorm2d": "BatchNormalization", "MaxPool2d": "MaxPool",
                  "AdaptiveAvgPool2d": "GlobalAveragePool", "LayerNorm": "LayerNormalization", "GELU": "Gelu",
                  "Embedding": "Gather", "Softmax": "Softmax", "Flatten": "Flatten"}


def op_family(op_type: str) -> str:
    """The op an op type computes, whatever its fused, layout or quantized variant (or PyTorch module)."""
    if op_type in _TORCH_MODULES:
        return _TORCH_MODULES[op_type]
    match = _FAMILY.match(op_type)
    core = match.group(1) if match and match.group(1) else op_type
    return "MatMul" if core == "Gemm" else core


def scope(name: str) -> str | None:
    """The module a node belongs to: ``/a/b/conv/Conv`` -> ``/a/b``; ``layer1.0.conv1`` -> ``layer1.0``."""
    name = normalize_name(name)
    if "/" in name:
        parts = name.split("/")
        module_parent = "/".join(parts[:-2]) if len(parts) > 2 else ""
        return module_parent or None
    head, dot, _ = name.rpartition(".")
    return head if dot and head else None


Key = Callable[[Node], Iterable[str]]


def _name_key(node: Node) -> Iterable[str]:
    return (f"{op_family(node.op_type)}\0{normalize_name(node.name)}",)


def _output_key(node: Node) -> Iterable[str]:
    # A node's name stands for a tensor too: an NCHWc node is named after the tensor it makes.
    family = op_family(node.op_type)
    return tuple(f"{family}\0{normalize_name(t)}" for t in (*node.outputs, node.name) if t)


def _scope_key(node: Node) -> Iterable[str]:
    where = scope(node.name)
    return (f"{op_family(node.op_type)}\0{where}",) if where else ()


def _groups(nodes: Sequence[Node], indices: list[int], key: Key) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        for k in dict.fromkeys(key(nodes[i])):
            out[k].append(i)
    return out


class _Pairer:
    def __init__(self, a: Sequence[Node], b: Sequence[Node]) -> None:
        self.a, self.b = a, b
        self.left_a = list(range(len(a)))
        self.left_b = list(range(len(b)))
        self.pairs: list[tuple[int, int, str]] = []

    def apply(self, rule: str, key: Key, *, unique: bool = False, renamed: bool = False) -> None:
        ga, gb = _groups(self.a, self.left_a, key), _groups(self.b, self.left_b, key)
        used_a: set[int] = set()
        used_b: set[int] = set()
        for k, ia in ga.items():
            jb = gb.get(k)
            if not jb or unique and (len(ia) > 1 or len(jb) > 1) or renamed and not self._renamed(ia, jb):
                continue
            free_a = [i for i in ia if i not in used_a]
            free_b = [j for j in jb if j not in used_b]
            for i, j in zip(free_a, free_b, strict=False):
                used_a.add(i)
                used_b.add(j)
                self.pairs.append((i, j, rule))
        self.left_a = [i for i in self.left_a if i not in used_a]
        self.left_b = [j for j in self.left_b if j not in used_b]

    def _renamed(self, ia: list[int], jb: list[int]) -> bool:
        """As many on each side, and every node of one side renamed by a transformation."""
        def all_renamed(nodes: Sequence[Node], idx: list[int]) -> bool:
            return all(normalize_name(nodes[i].name) != nodes[i].name for i in idx)

        return len(ia) == len(jb) and (all_renamed(self.a, ia) or all_renamed(self.b, jb))


def pair_nodes(a: Sequence[Node], b: Sequence[Node], mode: str = "normalized") -> Pairing:
    """Pair the nodes of A with those of B: by exact name, and with ``mode="normalized"`` by the rules
    of this module's docstring too."""
    if mode not in MODES:
        from layerperf.errors import InputError

        raise InputError(f"unknown --match {mode!r}", hint=f"use one of: {', '.join(MODES)}")
    p = _Pairer(a, b)
    p.apply("exact", lambda n: (n.name,))
    if mode == "normalized":
        p.apply("name", _name_key)
        p.apply("output", _output_key, unique=True)
        p.apply("scope", _scope_key)
        p.apply("order", lambda n: (op_family(n.op_type),), renamed=True)
    pairs = tuple(sorted(p.pairs))
    return Pairing(pairs, tuple(p.left_a), tuple(p.left_b))
