"""The names ONNX Runtime's profiler gives nodes, unnamed ones included.

A node without a name is profiled as ``<op_type>_<index>``, the index being the node's place in
the graph ONNX Runtime built when it loaded the model: the model's nodes in order, except ONNX
``Constant`` nodes, which it turns into initializers at load. Optimizations keep a surviving node's
index (and name every node they create), but the graph they save is renumbered, and a layout pass
may rename a kept node's tensors. So names come, best first, from what the profiler itself reported
for one run (its node events in execution order, which is the order of the saved graph's nodes), or
else from the model: an unnamed node is found there by its op type and output tensors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import onnx

from layerperf.data.layer import onnx_domain

_TOKEN = re.compile(r"(_token_\d+)?")


def is_generated(name: str, op_type: str) -> bool:
    """Whether ``name`` is one ONNX Runtime made up for a node an optimization inserted
    (``ReorderOutput``, ``ReorderOutput_token_16``). Which of those nodes gets which suffix differs
    from session to session, so such a name does not say which node it is."""
    return name.startswith(op_type) and _TOKEN.fullmatch(name, len(op_type)) is not None


def _identity(node: onnx.NodeProto) -> tuple[str, str, tuple[str, ...]]:
    return "" if onnx_domain(node.domain) else node.domain, node.op_type, tuple(node.output)


def load_indices(nodes: Iterable[onnx.NodeProto]) -> dict[tuple[str, str, tuple[str, ...]], int]:
    """Each unnamed node's index in the graph ONNX Runtime builds from ``nodes``, by its identity."""
    out: dict[tuple[str, str, tuple[str, ...]], int] = {}
    index = 0
    for node in nodes:
        if node.op_type == "Constant" and onnx_domain(node.domain):
            continue
        if not node.name:
            out.setdefault(_identity(node), index)
        index += 1
    return out


Observed = Sequence[tuple[str, str | None]]  # (name, op type or None) of each node event of one run, in order


def observed_names(graph: onnx.GraphProto, observed: Observed) -> list[str] | None:
    """The profiler's names for ``graph``'s nodes from one run's node events, when they line up with
    the nodes one to one (same count, same op types where known, same names where the node has one)."""
    if len(observed) != len(graph.node):
        return None
    for (name, op_type), node in zip(observed, graph.node, strict=True):
        renamed = node.name and node.name != name and not (
            is_generated(node.name, node.op_type) and is_generated(name, node.op_type))
        if renamed or (op_type is not None and op_type != node.op_type):
            return None
    return [name for name, _ in observed]


def _generated_in_order(graph: onnx.GraphProto, names: list[str], observed: Observed) -> list[str]:
    """``names`` with each made-up name (:func:`is_generated`) replaced by the profiler's name of the
    node of that op type at the same place in execution order, where both count as many of them."""
    out = list(names)
    for op_type in {n.op_type for n in graph.node if is_generated(n.name, n.op_type)}:
        at = [i for i, n in enumerate(graph.node) if n.op_type == op_type and is_generated(n.name, op_type)]
        seen = [name for name, op in observed if op in (None, op_type) and is_generated(name, op_type)]
        if len(at) == len(seen):
            for i, name in zip(at, seen, strict=True):
                out[i] = name
    return out


def profiler_names(graph: onnx.GraphProto, model_graph: onnx.GraphProto | None = None,
                   observed: Observed | None = None) -> list[str]:
    """The profiler's name of each node of ``graph`` (the graph ONNX Runtime runs), in order.

    ``observed``: the profiler's node events of one run (see :func:`observed_names`). Otherwise
    ``model_graph``, the graph of the model as given to ONNX Runtime (default: ``graph`` itself,
    right when no optimization ran). An unnamed node found in neither gets "" (it cannot be named).
    """
    if observed is not None:
        names = observed_names(graph, observed)
        if names is not None:
            return names
    indices = load_indices((model_graph if model_graph is not None else graph).node)
    names = []
    for node in graph.node:
        if node.name:
            names.append(node.name)
            continue
        index = indices.get(_identity(node))
        names.append(f"{node.op_type}_{index}" if index is not None else "")
    return _generated_in_order(graph, names, observed) if observed is not None else names


def nodes_by_name(graph: onnx.GraphProto, model_graph: onnx.GraphProto | None = None,
                  observed: Observed | None = None) -> dict[str, onnx.NodeProto]:
    """The nodes of ``graph`` by the names the profiler gives them (unnameable ones left out)."""
    names = profiler_names(graph, model_graph, observed)
    return {name: node for name, node in zip(names, graph.node, strict=True) if name}


def has_unnamed(graph: onnx.GraphProto) -> bool:
    return any(not node.name for node in graph.node)
