"""The graph node behind each profiled layer, body nodes of control flow included.

A Loop, If or Scan body's nodes are named in their own graph (and an unnamed one as the profiler
names it there, ``<op_type>_<index>`` in that graph); their layer is ``parent::node``
(:mod:`layerperf.data.nesting`), and they see their own graph's initializers and every enclosing one's.
"""

from __future__ import annotations

import onnx

from layerperf.backends.ort.names import Observed, profiler_names
from layerperf.data.nesting import qualify
from layerperf.data.tensor import TensorInfo, onnx_elem_to_dtype
from layerperf.readers.ort import NodeEvent

# A graph node with the initializers it can see (its own graph's and every enclosing graph's).
Scoped = tuple[onnx.NodeProto, dict[str, TensorInfo]]


def graph_initializers(graph: onnx.GraphProto) -> dict[str, TensorInfo]:
    return {i.name: TensorInfo(i.name, tuple(i.dims), onnx_elem_to_dtype(i.data_type)) for i in graph.initializer}


def subgraphs(node: onnx.NodeProto) -> dict[str, onnx.GraphProto]:
    """A node's subgraphs by attribute name (``name/i`` for a list of graphs)."""
    out = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out[a.name] = a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.update({f"{a.name}/{i}": g for i, g in enumerate(a.graphs)})
    return out


def scoped_nodes(optimized: onnx.ModelProto | None, model: onnx.ModelProto | None = None,
                 observed: Observed | None = None) -> dict[str, list[Scoped]]:
    """Every node of the executed graph and of its subgraphs by layer name (``loop::add`` for a body
    node). ``model`` and ``observed`` (the top-level node events of one run) name unnamed nodes, as
    :func:`layerperf.backends.ort.names.profiler_names` does. An If's two branches may hold nodes
    of the same name: all are kept, and :func:`graph_node` picks."""
    out: dict[str, list[Scoped]] = {}
    if optimized is not None:
        _add_scope(optimized.graph, model.graph if model is not None else None, observed, "", {}, out)
    return out


def _add_scope(graph: onnx.GraphProto, model_graph: onnx.GraphProto | None, observed: Observed | None,
               prefix: str, outer: dict[str, TensorInfo], out: dict[str, list[Scoped]]) -> None:
    inits = {**outer, **graph_initializers(graph)}
    # the same node in the model as given: where an unnamed body node's index is counted
    given = dict(zip(profiler_names(model_graph), model_graph.node, strict=True)) if model_graph else {}
    for node, own in zip(graph.node, profiler_names(graph, model_graph, observed), strict=True):
        if not own:
            continue
        name = qualify(prefix, own) if prefix else own
        out.setdefault(name, []).append((node, inits))
        model_subs = subgraphs(given[own]) if own in given else {}
        for attr, sub in subgraphs(node).items():
            _add_scope(sub, model_subs.get(attr), None, name, inits, out)


def graph_node(ev: NodeEvent, nodes: dict[str, list[Scoped]]) -> Scoped | None:
    """The graph node of a node event: by layer name, of the event's op type where names repeat."""
    found = nodes.get(ev.name, [])
    same_op = [s for s in found if s[0].op_type == ev.op_type]
    picked = (same_op or found)[:1]
    return picked[0] if picked else None
