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
4. ``covers``: a node against a compiled kernel that lists the ONNX nodes it computes (TVM's, see
   :class:`Node`): the node's normalized name (or output) is one of them and their op families agree
   (a kernel's op type is its anchor node's). Kernels are scoped by their anchor in the rules below.
5. ``scope``: the same module scope (a ``/``-path name without its last two parts — module and op —
   or a dotted name without its last part) and the same op family. This is how a fused Conv+Relu
   named after its Relu finds the quantized Conv named after the Conv.
   Across runtimes (an ONNX node named ``/model/encoder/layer.0/attention/self/query/MatMul`` by
   PyTorch's exporter against the torch backend's module ``encoder.layer.0.attention.self.query``),
   ``scope`` pairs a node with the module whose dotted path is the node's module path (see
   :func:`module_path`; a leading wrapper such as ``model`` aligned away), one to one, op families
   compatible (Conv2d <-> Conv, Linear <-> MatMul/Gemm...), the node doing the most work (FLOPs) when
   several fall in one module (a Linear's MatMul, not its bias Add). A node the runtime named after a
   fused neighbour (a Conv named ``.../layer.0/activation/Relu_output_0_nchwc``) pairs with the
   unpaired modules of its family beside it (same parent), in execution order, as many on each side.
6. ``order``: an op family with as many nodes left on each side, all of one side renamed (their names
   carry a suffix above: a node named after a graph output, say ``out_nchwc``): paired in execution order.

``scope`` and ``order`` never pair two nodes whose recorded shapes disagree (:func:`shapes_agree`):
left unpaired is better than paired wrongly; within a key, each node takes the first one left whose
shapes agree.

What no rule pairs is reported as only in one trace: quantize/dequantize and layout nodes, and nodes
fused away (an Add done inside a convolution).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from layerperf.errors import InputError

MODES = ("normalized", "exact")
RULES = ("exact", "name", "output", "covers", "scope", "order")

_SUFFIX = re.compile(r"(?:_token_\d+|_nchwc|_quant|_quantized|/duplicated|_output_\d+)$")
_FAMILY = re.compile(r"^(?:QLinear|Fused|Nhwc|DynamicQuantize|Q(?=Gemm))*(.*?)(?:IntegerToFloat|Integer|NBits)?$")


@dataclass(frozen=True, slots=True)
class Node:
    """What pairing looks at: a node's name, op type and output tensor names (when the trace has them);
    its input and output shapes as traces write them (``1x64x56x56;64x64x1x1``; empty: unknown) and
    its FLOPs per call (None: unknown); for a compiled kernel, the ONNX nodes it computes, the one it is
    named after (its anchor) first."""

    name: str
    op_type: str = ""
    outputs: tuple[str, ...] = ()
    in_shapes: str = ""
    out_shapes: str = ""
    flops: float | None = None
    covers: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        """The name that says where the node is: a kernel's anchor node, else its own."""
        return self.covers[0] if self.covers else self.name


@dataclass(frozen=True, slots=True)
class Pairing:
    """Pairs (index in A, index in B, rule) and the indices left unpaired on each side."""

    pairs: tuple[tuple[int, int, str], ...]
    only_a: tuple[int, ...]
    only_b: tuple[int, ...]
    # unpaired ONNX nodes inside the scope of a module paired across runtimes (a Linear's bias Add):
    # their work is in that module's time on the other side
    inside_a: tuple[int, ...] = ()
    inside_b: tuple[int, ...] = ()

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


# PyTorch module classes (the torch backend's layer op types) and the ONNX op each computes; Hugging
# Face's GPT-2 Conv1D is a Linear (x @ W + b), so a MatMul both in pairing and in ``diff --by type``
_TORCH_MODULES = {"Conv1d": "Conv", "Conv2d": "Conv", "Conv3d": "Conv", "Linear": "MatMul", "ReLU": "Relu",
                  "BatchNorm1d": "BatchNormalization", "BatchNorm2d": "BatchNormalization", "MaxPool2d": "MaxPool",
                  "AdaptiveAvgPool2d": "GlobalAveragePool", "LayerNorm": "LayerNormalization", "GELU": "Gelu",
                  "Embedding": "Gather", "Softmax": "Softmax", "Flatten": "Flatten", "Conv1D": "MatMul",
                  "GELUActivation": "Gelu", "NewGELUActivation": "Gelu", "AvgPool2d": "AveragePool",
                  "AdaptiveAvgPool1d": "GlobalAveragePool", "Hardswish": "HardSwish",
                  "ConvTranspose2d": "ConvTranspose"}
# ONNX ops whose name reads as a prefixed variant of another op but is not: DynamicQuantizeLinear quantizes
# a tensor (QuantizeLinear with its scale computed at run time), it is no "Linear"
_ONNX_OPS = {"DynamicQuantizeLinear": "QuantizeLinear"}
# the aten ops of level 2 rows (``features.0/aten::conv2d``), for pairing across runtimes only (``--by
# type`` keeps their own names)
_TORCH_MORE = {"Tanh": "Tanh", "Sigmoid": "Sigmoid",
               "aten::conv1d": "Conv", "aten::conv2d": "Conv", "aten::conv3d": "Conv", "aten::linear": "MatMul",
               "aten::addmm": "MatMul", "aten::mm": "MatMul", "aten::matmul": "MatMul", "aten::bmm": "MatMul",
               "aten::batch_norm": "BatchNormalization", "aten::max_pool2d": "MaxPool", "aten::relu": "Relu",
               "aten::relu_": "Relu", "aten::layer_norm": "LayerNormalization", "aten::gelu": "Gelu",
               "aten::softmax": "Softmax", "aten::embedding": "Gather", "aten::add": "Add", "aten::mul": "Mul",
               "aten::adaptive_avg_pool2d": "GlobalAveragePool", "aten::tanh": "Tanh"}
# ONNX Runtime's fused ops that do a PyTorch module's work (a LayerNorm with the residual Add before it)
_ORT_ALIASES = {"SkipLayerNormalization": "LayerNormalization", "BiasGelu": "Gelu", "FastGelu": "Gelu"}


def op_family(op_type: str) -> str:
    """The op an op type computes, whatever its fused, layout or quantized variant (or PyTorch module)."""
    if op_type in _TORCH_MODULES or op_type in _ONNX_OPS:
        return _TORCH_MODULES.get(op_type) or _ONNX_OPS[op_type]
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
    where = scope(node.anchor)
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
        self.inside_a: list[int] = []
        self.inside_b: list[int] = []

    def apply(self, rule: str, key: Key, *, unique: bool = False, renamed: bool = False,
              shaped: bool = False) -> None:
        """Pair the nodes left that share a key, in execution order; with ``shaped``, a pair whose
        shapes disagree is left unpaired."""
        ga, gb = _groups(self.a, self.left_a, key), _groups(self.b, self.left_b, key)
        used_a: set[int] = set()
        used_b: set[int] = set()
        for k, ia in ga.items():
            jb = gb.get(k)
            if not jb or unique and (len(ia) > 1 or len(jb) > 1) or renamed and not self._renamed(ia, jb):
                continue
            free_b = [j for j in jb if j not in used_b]
            for i in (i for i in ia if i not in used_a):
                j = next((j for j in free_b if not shaped or shapes_agree(self.a[i], self.b[j])), None)
                if j is None:
                    continue
                free_b.remove(j)
                used_a.add(i)
                used_b.add(j)
                self.pairs.append((i, j, rule))
        self.left_a = [i for i in self.left_a if i not in used_a]
        self.left_b = [j for j in self.left_b if j not in used_b]

    def covered(self) -> None:
        """Rule ``covers``: each node left on one side with a kernel left on the other that computes it."""
        for flip, nodes, kernels, left_n, left_k in ((False, self.a, self.b, self.left_a, self.left_b),
                                                     (True, self.b, self.a, self.left_b, self.left_a)):
            by_node: dict[str, list[int]] = defaultdict(list)
            for k in left_k:
                for covered in kernels[k].covers:
                    by_node[covered].append(k)
            taken: set[int] = set()
            for i in [i for i in left_n if not nodes[i].covers]:
                names = dict.fromkeys(normalize_name(x) for x in (nodes[i].name, *nodes[i].outputs) if x)
                family = op_family(nodes[i].op_type)
                hit = next((k for x in names for k in by_node.get(x, ()) if k not in taken
                            and op_family(kernels[k].op_type) == family), None)
                if hit is not None:
                    taken.add(hit)
                    self.pairs.append((hit, i, "covers") if flip else (i, hit, "covers"))
            paired = {p[1] if flip else p[0] for p in self.pairs if p[2] == "covers"}
            left_n[:] = [i for i in left_n if i not in paired]
            left_k[:] = [k for k in left_k if k not in taken]

    def cross_scope(self) -> None:
        """Rule ``scope`` across runtimes: ONNX nodes on one side, torch modules on the other."""
        ra, rb = _Roles.of(self.a), _Roles.of(self.b)
        left_a, left_b = set(self.left_a), set(self.left_b)
        for flip, (ro, on, left_o), (rt, tn, left_t) in ((False, (ra, self.a, left_a), (rb, self.b, left_b)),
                                                          (True, (rb, self.b, left_b), (ra, self.a, left_a))):
            if not ro.onnx or not rt.mods:
                continue
            aligned = _align(set(ro.onnx.values()), set(rt.all_mods))
            if aligned is None:
                continue
            da, db = aligned
            onnx = {i: _drop(path, da) for i, path in ro.onnx.items() if i in left_o}
            mods = {j: (_drop(path, db), family) for j, (path, family) in rt.mods.items() if j in left_t}
            found = _pair_modules(on, onnx, tn, mods, {_drop(path, db) for path in rt.all_mods})
            for i, j in found:
                self.pairs.append((j, i, "scope") if flip else (i, j, "scope"))
                left_o.discard(i)
                left_t.discard(j)
            inside = _inside(onnx, found, mods)
            (self.inside_b if flip else self.inside_a).extend(inside)
        self.left_a = [i for i in self.left_a if i in left_a]
        self.left_b = [j for j in self.left_b if j in left_b]

    def _renamed(self, ia: list[int], jb: list[int]) -> bool:
        """As many on each side, and every node of one side renamed by a transformation."""
        def all_renamed(nodes: Sequence[Node], idx: list[int]) -> bool:
            return all(normalize_name(nodes[i].name) != nodes[i].name for i in idx)

        return len(ia) == len(jb) and (all_renamed(self.a, ia) or all_renamed(self.b, jb))


def _shape_list(shapes: str) -> list[tuple[str, ...]]:
    """The known tensor shapes of a ``;``-list, their dims of 1 dropped (a batch of 1 flattened away
    or not); scalars left out (a quantized node's scales would match anything)."""
    out = []
    for s in shapes.split(";"):
        dims = tuple(d for d in s.split("x") if d != "1")
        if s and s not in ("scalar", "?", "*") and dims:
            out.append(dims)
    return out


def _padded(small: str, big: str) -> bool:
    """``big`` is ``small`` rounded up to a block of 8 or 16 (ONNX Runtime's NCHWc pads channels so)."""
    if not (small.isdigit() and big.isdigit()):
        return False
    n, m = int(small), int(big)
    return m > n and m in (-(-n // 8) * 8, -(-n // 16) * 16)


def _flattened(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same tensor with its leading dims flattened (ONNX Runtime runs a Linear's 3-d input as a 2-d
    Gemm): the same last dim and element count."""
    if a[-1] != b[-1] or not all(d.isdigit() for d in (*a, *b)):
        return False
    return math.prod(int(d) for d in a) == math.prod(int(d) for d in b)


def _spatially_padded(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same channels, the other dims a few apart: a PyTorch model that pads explicitly before a
    conv (``F.pad``, Hugging Face's TensorFlow-style padding) against the export that folded the Pad
    into the Conv's pads."""
    if len(a) != len(b) or len(a) < 2 or a[0] != b[0] or not all(d.isdigit() for d in (*a, *b)):
        return False
    return all(abs(int(x) - int(y)) <= 8 for x, y in zip(a[1:], b[1:], strict=True))


def _same_shape(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Equal in any layout (NCHW, NHWC, NCHWc with its channels padded), flattened, or padded spatially."""
    if sorted(a) == sorted(b) or _flattened(a, b) or _spatially_padded(a, b):
        return True
    if len(a) != len(b):
        return False
    rest = sorted(b)
    for d in sorted(a):  # each dim equal to one of the other's, or one of them the other padded
        hit = next((k for k, e in enumerate(rest) if e == d), None)
        if hit is None:
            hit = next((k for k, e in enumerate(rest) if _padded(d, e) or _padded(e, d)), None)
        if hit is None:
            return False
        rest.pop(hit)
    return True


def shapes_agree(a: Node, b: Node) -> bool:
    """False when both nodes recorded input (or output) shapes and no input (output) shape of one is
    like one of the other's (:func:`_same_shape`): a shortcut conv of 1x256x56x56 is not the 1x128x28x28
    conv beside it. PyTorch modules record their arguments only, ONNX nodes their weights too: one
    shape in common is enough."""
    for ta, tb in ((a.in_shapes, b.in_shapes), (a.out_shapes, b.out_shapes)):
        sa, sb = _shape_list(ta), _shape_list(tb)
        if sa and sb and not any(_same_shape(x, y) for x in sa for y in sb):
            return False
    return True


_FUSION = re.compile(r"(?:/+\w*Fusion)*/*$")


def module_path(name: str) -> tuple[str, bool] | None:
    """The dotted module path a node ran in, and whether the name is an ONNX node's.

    An ONNX node from PyTorch's exporter is named ``/`` + its modules + ``/`` + op, each module
    named from its last non-numeric part on (``/model/encoder/stages.0/layers.0/layer/layer.0/
    convolution/Conv``: ``layer.0`` is child 0 of the Sequential ``layer``), ONNX Runtime's renamings
    appended (``_output_0_nchwc``, ``/MatMulScaleFusion/``): ``model.encoder.stages.0.layers.0.
    layer.0.convolution``. A torch backend row is its module's dotted path (level 2:
    ``path/aten::op``). None where the name says no module.
    """
    if name.startswith("/"):
        parts = normalize_name(_FUSION.sub("", name)).split("/")[1:-1]
        atoms: list[str] = []
        for part in parts:
            new = part.split(".")
            k = len(new) - 1  # an indexed child ('layer.0') of the container it was called through ('layer')
            while k > 0 and not (all(x.isdigit() for x in new[k:]) and atoms[-k:] == new[:k]):
                k -= 1
            atoms += new[k:]
        return (".".join(atoms), True) if atoms else None
    head, slash, op = name.rpartition("/")
    if slash:
        return (head, False) if op.startswith("aten::") and head and "::" not in head else None
    return (name, False) if name and "::" not in name else None  # aten::conv2d names an op, not a module


def _torch_family(op_type: str) -> str | None:
    return _TORCH_MODULES.get(op_type) or _TORCH_MORE.get(op_type)


def _onnx_family(op_type: str) -> str:
    family = op_family(op_type)
    return _ORT_ALIASES.get(family, family)


def _drop(path: str, atoms: int) -> str:
    return ".".join(path.split(".")[atoms:])


def _align(onnx_paths: set[str], torch_paths: set[str]) -> tuple[int, int] | None:
    """How many leading atoms to drop from ONNX paths and from torch paths so that most coincide: the
    exporter's wrapper module (``model.``), or a wrapper the torch side was profiled through. None
    when no path coincides: two unrelated models (or no module paths) pair nothing by scope."""
    best = (0, 0, 0)
    for da, db in ((0, 0), (1, 0), (2, 0), (0, 1), (0, 2)):
        hits = len({_drop(q, da) for q in onnx_paths} & {_drop(t, db) for t in torch_paths} - {""})
        if hits > best[0]:
            best = (hits, da, db)
    return (best[1], best[2]) if best[0] else None


@dataclass(frozen=True, slots=True)
class _Roles:
    """One side's nodes by role: ONNX nodes (index -> module path), torch rows with an op family
    (index -> module path, family), and every torch module path (containers too)."""

    onnx: dict[int, str]
    mods: dict[int, tuple[str, str]]
    all_mods: frozenset[str]

    @staticmethod
    def of(nodes: Sequence[Node]) -> _Roles:
        onnx: dict[int, str] = {}
        mods: dict[int, tuple[str, str]] = {}
        all_mods: set[str] = set()
        for i, node in enumerate(nodes):
            where = module_path(node.name)
            family = _torch_family(node.op_type)
            if where is None:
                continue
            if where[1]:
                onnx[i] = where[0]
            else:
                all_mods.add(where[0])
                if family:
                    mods[i] = (where[0], family)
        return _Roles(onnx, mods, frozenset(all_mods))


def _by_flops(node: Node) -> float:
    return -1.0 if node.flops is None or node.flops != node.flops else node.flops


def _pair_modules(on: Sequence[Node], onnx: dict[int, str], tn: Sequence[Node],
                  torch: dict[int, tuple[str, str]], all_torch: Iterable[str]) -> list[tuple[int, int]]:
    """ONNX nodes (``on``, aligned paths ``onnx``) with torch rows (``tn``, ``torch``): first each
    torch row with the node of its family doing the most work in its own scope, then nodes named after
    a fused neighbour with the leaf modules of their family under the same parent, in order."""
    out: list[tuple[int, int]] = []
    in_scope: dict[str, list[int]] = defaultdict(list)
    for i, path in onnx.items():
        in_scope[path].append(i)
    used: set[int] = set()
    for j, (path, family) in torch.items():
        cands = [i for i in in_scope.get(path, ()) if i not in used and _onnx_family(on[i].op_type) == family
                 and shapes_agree(on[i], tn[j])]
        if cands:
            best = max(cands, key=lambda i: _by_flops(on[i]))  # max keeps the first of equals
            used.add(best)
            out.append((best, j))
    paired_t = {j for _, j in out}
    own = {(path, family) for path, family in torch.values()}
    parents = {path.rpartition(".")[0] for path in all_torch}
    ga: dict[tuple[str, str], list[int]] = defaultdict(list)
    gb: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, path in onnx.items():
        family = _onnx_family(on[i].op_type)
        # in a leaf of another family (a ReLU fused into the conv before it) or in no module (``relu_1``,
        # the exporter's second call of ``relu``); a container's own ops (attention's matmuls) stay out
        if i not in used and (path, family) not in own and path not in parents:
            ga[(family, path.rpartition(".")[0])].append(i)
    taken = {torch[j][0] for j in paired_t}
    leaf: dict[tuple[str, str], int] = {}  # one row per module: level 2 has the module's and its aten ops'
    for j, (path, family) in torch.items():
        if path not in parents and path not in taken and (
                (path, family) not in leaf or tn[leaf[(path, family)]].op_type.startswith("aten::")):
            leaf[(path, family)] = j
    for (path, family), j in sorted(leaf.items(), key=lambda item: item[1]):
        gb[(family, path.rpartition(".")[0])].append(j)
    for key, ia in ga.items():
        jb = gb.get(key, [])
        if len(ia) == len(jb):
            out += [(i, j) for i, j in zip(ia, jb, strict=True) if shapes_agree(on[i], tn[j])]
    return out


def _inside(onnx: dict[int, str], paired: list[tuple[int, int]], torch: dict[int, tuple[str, str]]) -> list[int]:
    """Unpaired ONNX nodes in the scope of a torch module they were not paired with."""
    scopes = {torch[j][0] for _, j in paired}
    done = {i for i, _ in paired}

    def within(path: str) -> bool:  # the path or one of its ancestors is a paired module
        atoms = path.split(".")
        return any(".".join(atoms[:k]) in scopes for k in range(len(atoms), 0, -1))

    return [i for i, path in onnx.items() if i not in done and within(path)]


def pair_nodes(a: Sequence[Node], b: Sequence[Node], mode: str = "normalized") -> Pairing:
    """Pair the nodes of A with those of B: by exact name, and with ``mode="normalized"`` by the rules
    of this module's docstring too."""
    if mode not in MODES:
        raise InputError(f"unknown --match {mode!r}", hint=f"use one of: {', '.join(MODES)}")
    p = _Pairer(a, b)
    p.apply("exact", lambda n: (n.name,))
    if mode == "normalized":
        p.apply("name", _name_key)
        p.apply("output", _output_key, unique=True)
        p.covered()
        p.apply("scope", _scope_key, shaped=True)
        p.cross_scope()
        p.apply("order", lambda n: (op_family(n.op_type),), renamed=True, shaped=True)
    pairs = tuple(sorted(p.pairs))
    left_a, left_b = set(p.left_a), set(p.left_b)
    return Pairing(pairs, tuple(p.left_a), tuple(p.left_b), tuple(sorted(set(p.inside_a) & left_a)),
                   tuple(sorted(set(p.inside_b) & left_b)))


# ops a runtime fuses into the convolution or matrix product before them (a BatchNorm folded into the
# weights, an activation or a residual Add done in the kernel's epilogue)
FUSIBLE = frozenset({"BatchNormalization", "Relu", "Add", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "LeakyRelu"})
_ANCHORS = frozenset({"Conv", "MatMul"})


def _parent(name: str) -> str | None:
    where = module_path(name)
    return where[0].rpartition(".")[0] if where else None


def covers(a: Sequence[Node], b: Sequence[Node], pairing: Pairing) -> tuple[dict[int, int], dict[int, int]]:
    """The unpaired nodes of each side that the other side fused into a paired node: a node of a
    :data:`FUSIBLE` family is covered by the partner of the nearest Conv or MatMul before it (execution
    order) in its own module, when the other side has no unpaired node of its family in that module (it
    was not renamed: it is gone). (B index -> A index covering it, A index -> B index)."""
    partner_a = {i: j for i, j, _ in pairing.pairs}
    partner_b = {j: i for i, j, _ in pairing.pairs}
    out: list[dict[int, int]] = []
    for nodes, left, partner, other, other_left in ((b, pairing.only_b, partner_b, a, pairing.only_a),
                                                    (a, pairing.only_a, partner_a, b, pairing.only_b)):
        families = {(_parent(other[k].name), _family(other[k].op_type)) for k in other_left}
        covered: dict[int, int] = {}
        for x in left:
            family, parent = _family(nodes[x].op_type), _parent(nodes[x].name)
            if family not in FUSIBLE or parent is None or (parent, family) in families:
                continue
            anchor = next((k for k in range(x - 1, -1, -1) if k in partner and _parent(nodes[k].name) == parent
                           and _family(nodes[k].op_type) in _ANCHORS), None)
            if anchor is not None:
                covered[x] = partner[anchor]
        out.append(covered)
    return out[0], out[1]


def _family(op_type: str) -> str:
    return _torch_family(op_type) or _onnx_family(op_type)
