"""The names of a TVM profile's layers, so that ``diff`` and ``compare`` pair them with the ONNX nodes
other runtimes report.

* A kernel that computes one ONNX node takes the node's name (as ONNX Runtime's profiler names it,
  ``<op_type>_<index>`` for an unnamed node).
* A fused kernel is named after its *anchor*, the node doing the most work (FLOPs; the first of
  equals), then ``+`` and each other node it covers, the part of its name it shares with the
  anchor's left out: ``layer1.0.bn2+add+relu2``, ``/encoder/layer.0/output/dense/MatMul+Add``.
* A kernel doing part of a node's work, the part that does not write the node's output (an unfused
  Clip runs as ``maximum`` then ``minimum``), is ``<name>:<function>``.
* A VM builtin (level 2) is named after the kernel it serves (an allocation the next kernel, a free
  the previous one) and its own short name: ``layer1.0.conv1/alloc_tensor``; ``vm/<name>`` when it
  serves none (the input checks at the start).
A name taken twice gets ``#2``, ``#3``... in call order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from layerperf.backends.tvm.calls import CallSite
from layerperf.cost.tvm import short_name

_SEPARATORS = re.compile(r"[./]")


def short(name: str, anchor: str) -> str:
    """``name`` without the part it shares with ``anchor`` up to a separator (``.`` or ``/``)."""
    cut = 0
    for i, (a, b) in enumerate(zip(name, anchor, strict=False)):
        if a != b:
            break
        if _SEPARATORS.fullmatch(a):
            cut = i + 1
    return name[cut:] or name


def anchor_of(nodes: Sequence[int], flops: Sequence[int | None]) -> int:
    """The node a kernel is named after: the most FLOPs (unknown counts least), the first of equals."""
    return max(nodes, key=lambda n: _known(flops[n]))


def _known(flops: int | None) -> int:
    return -1 if flops is None else flops


def kernel_name(nodes: Sequence[int], node_names: Sequence[str], anchor: int) -> str:
    """``anchor`` then ``+`` and each other node in graph order, shortened against the anchor's name."""
    head = node_names[anchor]
    rest = [short(node_names[n], head) for n in nodes if n != anchor]
    return "+".join([head, *rest])


def layer_names(sites: Sequence[CallSite], all_sites: Sequence[CallSite], node_names: Sequence[str],
                flops: Sequence[int | None], owner: dict[int, int]) -> tuple[list[str], list[int | None]]:
    """The name of each layer (``sites``: the call sites that are layers, in order; ``all_sites``: every
    call of ``main``; ``owner``: node -> the call writing its output) and each one's anchor node."""
    base: dict[int, str] = {}  # call -> its kernel's name, for the builtins that serve it
    names: list[str] = []
    anchors: list[int | None] = []
    for site in all_sites:
        if site.nodes:
            anchor = anchor_of(site.nodes, flops)
            name = kernel_name(sorted(site.nodes), node_names, anchor)
            if not any(owner.get(n) == site.call for n in site.nodes):
                name = f"{name}:{site.func}"
            base[site.call] = name
    for site in sites:
        if site.nodes:
            names.append(base[site.call])
            anchors.append(anchor_of(site.nodes, flops))
        elif site.kernel:
            names.append(site.func)  # a kernel no node was traced to
            anchors.append(None)
        else:
            served = base.get(site.serves) if site.serves is not None else None
            names.append(f"{served or 'vm'}/{short_name(site.func)}")
            anchors.append(None)
    return unique(names), anchors


def unique(names: Sequence[str]) -> list[str]:
    """``names`` with a repeated one made ``name#2``, ``name#3``... in order."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out
