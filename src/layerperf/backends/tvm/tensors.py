"""The tensors each VM call read and wrote, named as the ONNX model names them.

The instrument hook gives a call's arguments as tensors without names. One watched run records
each one's data pointer, shape and dtype; a tensor is then followed by that identity (a later call
reading what an earlier one wrote at the same address, shape and dtype reads that tensor — the
memory plan reuses blocks, so the latest writer is the one that counts):

* the model's inputs and outputs get the ONNX graph's names;
* what a kernel writes gets the output names of the node whose output it writes (its last node),
  else ``<layer>:out<k>``;
* what is read but never written in the run is a constant (a weight): the name of an initializer of
  the kernel's nodes with its shape and dtype (or its elements, reshaped) where one is left, else
  ``<layer>:const<k>`` (a constant TVM made: a folded or transposed weight).
Names that say which tensor flows from which layer to which are what the memory timeline and the
contract's order checks read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx

from layerperf.backends.tvm.calls import CallSite, CallTensors
from layerperf.data.tensor import TensorInfo, dtype_itemsize

Key = tuple[int, tuple[int, ...], str]


@dataclass(frozen=True, slots=True)
class Arg:
    """A tensor argument as one run saw it: where its data is, its shape and dtype."""

    ptr: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def key(self) -> Key:
        return self.ptr, self.shape, self.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * dtype_itemsize(self.dtype)


@dataclass(frozen=True, slots=True)
class Seen:
    """One call's tensor arguments (None: not a tensor) and its result."""

    args: tuple[Arg | None, ...]
    ret: Arg | None


def arg(value: Any) -> Arg | None:
    """The tensor a hook argument is, or None (a shape, a storage, a string...)."""
    ptr = getattr(value, "data_ptr", None)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if ptr is None or shape is None or dtype is None or not callable(ptr):
        return None
    try:
        return Arg(int(ptr()), tuple(int(d) for d in shape), str(dtype))
    except (TypeError, ValueError):
        return None


def results(value: Any) -> list[Arg]:
    """The tensors ``main`` returned (a tensor or a tuple of them)."""
    one = arg(value)
    if one is not None:
        return [one]
    try:
        return [a for v in value for a in results(v)]
    except TypeError:
        return []


def split(site: CallSite, seen: Seen) -> tuple[list[Arg], list[Arg]]:
    """A call's tensors read and written: a kernel's first ``n_inputs`` arguments are inputs, the rest
    outputs; a builtin reads its arguments and writes its result."""
    args = [a for a in seen.args if a is not None] if not site.kernel or site.n_inputs is None else []
    if site.kernel and site.n_inputs is not None:
        ins = [a for a in seen.args[:site.n_inputs] if a is not None]
        return ins, [a for a in seen.args[site.n_inputs:] if a is not None]
    if site.kernel:
        return args, []
    return args, [seen.ret] if seen.ret is not None else []


@dataclass(slots=True)
class Namer:
    """Names tensors in call order (see the module's docstring); ``weights`` collects the constants."""

    model: onnx.ModelProto
    names: dict[Key, str] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    _inits: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    _used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for init in self.model.graph.initializer:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type).name
            self._inits[init.name] = (tuple(int(d) for d in init.dims), dtype)

    def read(self, a: Arg, layer: str, site: CallSite, k: int) -> str:
        name = self.names.get(a.key)
        if name is None and not site.kernel:  # a builtin's argument no call wrote (not seen at level 1)
            return f"{layer}:in{k}"
        if name is None:
            name = self._constant(a, site) or f"{layer}:const{k}"
            self.names[a.key] = name
            self.weights[name] = a.nbytes
        return name

    def _constant(self, a: Arg, site: CallSite) -> str | None:
        """An initializer of the call's nodes this constant is: the same shape and dtype, else the same
        elements in another shape (folding reshapes a bias to 1xCx1x1)."""
        candidates = [name for n in sorted(site.nodes) for name in self.model.graph.node[n].input
                      if name in self._inits and name not in self._used and self._inits[name][1] == a.dtype]
        exact = [name for name in candidates if self._inits[name][0] == a.shape]
        same_size = [name for name in candidates if math.prod(self._inits[name][0]) == math.prod(a.shape)]
        found = (exact or same_size or [None])[0]
        if found is not None:
            self._used.add(found)
        return found

    def written(self, outs: Sequence[Arg], layer: str, site: CallSite, last_node: int | None) -> list[str]:
        wanted = [o for o in self.model.graph.node[last_node].output if o] if last_node is not None else []
        if len(wanted) != len(outs):
            wanted = wanted[:1] if len(outs) == 1 and wanted else [f"{layer}:out{k}" for k in range(len(outs))]
        for a, name in zip(outs, wanted, strict=True):
            self.names[a.key] = name
        return wanted


def _info(a: Arg, name: str) -> TensorInfo:
    return TensorInfo(name, a.shape, a.dtype)


def name_tensors(model: onnx.ModelProto, sites: Sequence[CallSite], seen: Sequence[Seen], layer_of: Sequence[int],
                 layer_names: Sequence[str], inputs: Sequence[tuple[str, Arg]], outputs: Sequence[tuple[str, Arg]],
                 owner: dict[int, int]) -> tuple[list[CallTensors], dict[str, int]]:
    """Every call's named tensors (calls that are no layer included) and the constants' bytes by name.

    ``layer_of``: each call's layer (-1: none); ``inputs``/``outputs``: the model's, with the tensors
    the run was given and returned; ``owner``: node -> the call that writes its output."""
    namer = Namer(model)
    for name, a in inputs:
        namer.names[a.key] = name
    final = {a.key: name for name, a in outputs}
    out: list[CallTensors] = []
    for site, s, layer in zip(sites, seen, layer_of, strict=True):
        label = layer_names[layer] if layer >= 0 else site.func
        ins, outs = split(site, s)
        read = [_info(a, namer.read(a, label, site, k)) for k, a in enumerate(ins)]
        last = max((n for n in site.nodes if owner.get(n) == site.call), default=None)
        if site.kernel or site.nodes:
            written = namer.written(outs, label, site, last)
        else:  # a builtin's result (an allocation, a shape): a value of its own
            written = [f"{label}:out{k}" if len(outs) > 1 else label for k in range(len(outs))]
        out.append(CallTensors(tuple(read), tuple(_info(a, final.get(a.key, n)) for a, n in zip(outs, written,
                                                                                             strict=True))))
    return out, namer.weights
