"""A TVM build's layers: one per VM call that is a row at the profile's level, with its name
(:mod:`.naming`), op type, tensors (:mod:`.tensors`), work, and the kernel's own facts
(:class:`~layerperf.data.extension.TvmKernel`: function, ONNX nodes, schedule).

A kernel's op type is its anchor node's (the node it is named after); its FLOPs are the sum of the
cost model's over the nodes whose output it writes (:mod:`.kernel_cost`); its bytes are its
arguments'. A builtin's op type is its short name in the ``tvm.vm`` namespace, which costs no
arithmetic (:mod:`layerperf.cost.tvm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from layerperf import cost as cost_model
from layerperf.backends.ort.names import profiler_names
from layerperf.backends.tvm.calls import CallMap, CallSite, CallTensors
from layerperf.backends.tvm.instrument import layer_sites
from layerperf.backends.tvm.kernel_cost import owning_site, site_cost
from layerperf.backends.tvm.naming import layer_names
from layerperf.backends.tvm.tensors import Seen, arg, name_tensors, results
from layerperf.cost.onnx.graph import attributes, tensor_infos
from layerperf.cost.tvm import NAMESPACE, short_name
from layerperf.data.cost import Cost
from layerperf.data.extension import TvmKernel
from layerperf.data.layer import Layer
from layerperf.data.schedule import KernelSchedule
from layerperf.data.tensor import TensorInfo
from layerperf.models.inputs import onnx_input_specs

UNTRACED_DOMAIN = "tvm"  # a kernel no ONNX node was traced to: its function's name is its op type


@dataclass(frozen=True, slots=True)
class LayerPlan:
    """Which calls are layers at a level, and the layers themselves."""

    sites: list[CallSite]  # the calls that are layers, in order
    layer_of: list[int]  # for every call, its layer (-1: none)
    layers: list[Layer]
    weights: dict[str, int]  # the constants the kernels read (weights), bytes by name


def make_layers(model: onnx.ModelProto, cmap: CallMap, level: int, seen: Sequence[Seen], inputs: Sequence[object],
                returned: object, schedule: dict[str, KernelSchedule], provider: str) -> LayerPlan:
    """The layers of one build at ``level``, from one watched run (``seen``: each call's arguments;
    ``inputs``: the tensors ``main`` was given, ``returned``: what it returned)."""
    sites, layer_of = layer_sites(cmap, level)
    node_names = profiler_names(model.graph)
    # the inputs main was fed: the model's by the one rule that picks them (initializers left out)
    fed = [spec.name for spec in onnx_input_specs(model)]
    given = [(name, a) for name, a in zip(fed, (arg(v) for v in inputs), strict=True) if a is not None]
    costs = node_costs(model, {name: TensorInfo(name, a.shape, a.dtype) for name, a in given})
    owner = owning_site(cmap)
    names, anchors = layer_names(sites, cmap.sites, node_names, [c.flops for c in costs], owner)
    graph_out = [(vi.name, a) for vi, a in zip(model.graph.output, results(returned), strict=False)]
    tensors, weights = name_tensors(model, cmap.sites, seen, layer_of, names, given, graph_out, owner)
    layers = [_layer(site, name, anchor, model, node_names, tensors[site.call], weights, owner, costs,
                     schedule, provider) for site, name, anchor in zip(sites, names, anchors, strict=True)]
    return LayerPlan(sites, layer_of, layers, weights)


def node_costs(model: onnx.ModelProto, given: dict[str, TensorInfo]) -> list[Cost]:
    """Each ONNX node's cost, by the cost model (:func:`layerperf.cost.of`), at the shapes the run had."""
    table = tensor_infos(model, given)
    return [cost_model.of(n.domain, n.op_type, [table.get(i) if i else None for i in n.input],
                          [table.get(o) if o else None for o in n.output], attributes(n)) for n in model.graph.node]


def _layer(site: CallSite, name: str, anchor: int | None, model: onnx.ModelProto, node_names: Sequence[str],
           tensors: CallTensors, weights: dict[str, int], owner: dict[int, int], costs: Sequence[Cost],
           schedule: dict[str, KernelSchedule], provider: str) -> Layer:
    if anchor is not None:
        node = model.graph.node[anchor]
        op_type, domain = node.op_type, node.domain
        work = site_cost(site, owner, costs, tensors)
    elif site.kernel:
        op_type, domain = site.func, UNTRACED_DOMAIN
        work = Cost(None, _bytes(tensors.inputs), _bytes(tensors.outputs), None)
    else:
        op_type, domain = short_name(site.func), NAMESPACE
        work = cost_model.of(NAMESPACE, op_type, tensors.inputs, tensors.outputs)
    ext = TvmKernel(site.func, tuple(node_names[n] for n in sorted(site.nodes)),
                    node_names[anchor] if anchor is not None else None, site.call,
                    schedule.get(site.func) if site.kernel else None)
    return Layer(name=name, op_type=op_type, domain=domain, provider=provider, inputs=tensors.inputs,
                 outputs=tensors.outputs, param_bytes=sum(weights.get(t.name, 0) for t in tensors.inputs),
                 flops=work.flops, bytes_read=work.bytes_read, bytes_written=work.bytes_written,
                 int_ops=work.int_ops, extension=ext)


def _bytes(infos: Sequence[TensorInfo]) -> int | None:
    sizes = [t.nbytes for t in infos]
    return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)
