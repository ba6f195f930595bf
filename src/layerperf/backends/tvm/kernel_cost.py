"""A kernel call's work: the FLOPs of the ONNX nodes it computes, the bytes of the tensors it touched.

FLOPs and integer operations are the cost model's (:func:`layerperf.cost.onnx.graph.graph_costs`) summed over
the call's nodes. A node split over several calls (an unfused Clip runs as ``maximum`` then
``minimum``; a Gather with negative-index handling as four kernels) is counted once, at the last
of them, the one that writes its output, so a model's total is its nodes' total. Bytes are what the
kernel's arguments really hold: its inputs (weights included) read, its outputs written — a fused
kernel keeps its intermediates out of memory, so summing its nodes' bytes would overstate it.
"""

from __future__ import annotations

from collections.abc import Sequence

from layerperf.backends.tvm.calls import CallMap, CallSite, CallTensors
from layerperf.data.cost import Cost


def _sum(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def owning_site(cmap: CallMap) -> dict[int, int]:
    """Node -> the call that writes its output (the last call that computes it)."""
    out: dict[int, int] = {}
    for site in cmap.sites:
        for node in site.nodes:
            out[node] = site.call
    return out


def site_cost(site: CallSite, owner: dict[int, int], node_costs: Sequence[Cost], tensors: CallTensors) -> Cost:
    """One call's cost: its nodes' work (those whose output it writes) and its arguments' bytes.
    A builtin that does no node's work costs no FLOPs; its bytes are None (the VM's own)."""
    nodes = [n for n in site.nodes if owner.get(n) == site.call]
    if not site.nodes:
        return Cost(0, None, None, 0)
    flops = _sum([node_costs[n].flops for n in nodes])
    int_ops = _sum([node_costs[n].int_ops for n in nodes])
    read = _sum([t.nbytes for t in tensors.inputs])
    written = _sum([t.nbytes for t in tensors.outputs])
    return Cost(flops, read, written, int_ops)


def site_costs(cmap: CallMap, node_costs: Sequence[Cost], tensors: Sequence[CallTensors]) -> list[Cost]:
    """Every call's cost, in call order (``tensors``: from :meth:`~.instrument.Runner.tensors`)."""
    owner = owning_site(cmap)
    return [site_cost(site, owner, node_costs, t) for site, t in zip(cmap.sites, tensors, strict=True)]
