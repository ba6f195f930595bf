"""One model's layers across runtimes, side by side: the table of ``layerperf compare``.

Each runtime's profile is an event table (:class:`~layerperf.data.calls.Calls`). A row is a group of
layers that do the same work on each runtime:

* the first runtime's layers are paired with each other runtime's as ``diff`` pairs them
  (:func:`layerperf.analysis.matching.pair_nodes`, normalized: across renamings, fusions, and ONNX
  nodes against PyTorch modules);
* a compiled kernel that lists the ONNX nodes it computes (TVM's) is grouped with every layer of
  another runtime named after one of them (normalized name or output): a row may hold several ONNX
  Runtime nodes against one fused TVM kernel, or one ONNX Runtime fused node against a TVM
  convolution and the batch-norm kernel after it;
* a layer a runtime named after a fused neighbour (ONNX Runtime's Conv with its Relu inside, named
  ``.../Relu_output_0_nchwc``) is grouped with the other runtimes' layer of that name, of another op family,
  when nothing of its own runtime took it (the Relu it ran inside the Conv);
* rows are what these links join (connected groups); a layer linked to nothing is a row of its own,
  present on its runtime only.

A row's time on a runtime is the sum of its layers' time per run (each layer's median per call,
times its calls per run); the fastest runtime is the one with the least, among those that have the
row. Per op type, each runtime's layers are summed by op family (Conv, FusedConv and a Conv2d module
are one) — a fused kernel counts under its anchor's type; a type whose layers share a row with another
type's (one runtime fused that work into another type's layer) names no fastest: its sums hold
different work. Totals add every layer of a runtime (its
sum of layer times), beside its end-to-end latency with the profiler off when it was measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.analysis.aggregate import aggregate, match_nodes
from layerperf.analysis.matching import Node, normalize_name, op_family, pair_nodes
from layerperf.data.calls import Calls

Item = tuple[int, int]  # (runtime index, layer index)


@dataclass(frozen=True, slots=True)
class Row:
    """One group of layers: its key (the first runtime's names, else the first layer's), op family,
    each runtime's layers and time per run (µs; None where the runtime has none of it), the fastest."""

    key: str
    op_type: str
    layers: dict[str, tuple[str, ...]]
    time_us: dict[str, float | None]
    fastest: str | None
    comparable: bool = True  # an op type's row: False where the runtimes' layers of it do different work

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "op_type": self.op_type, "layers": {k: list(v) for k, v in self.layers.items()},
                "time_us": dict(self.time_us), "fastest": self.fastest, "comparable": self.comparable}


@dataclass(frozen=True, slots=True)
class Comparison:
    """The per-layer rows (execution order of the first runtime that has each), per op type rows,
    and per runtime: the sum of its layer times (µs), its latency (ms, None: not measured)."""

    backends: tuple[str, ...]
    rows: tuple[Row, ...]
    types: tuple[Row, ...]
    total_us: dict[str, float]
    latency_ms: dict[str, float | None]
    layers: dict[str, int]  # layers per runtime
    grouped: dict[str, int]  # of them, in a row with another runtime's

    def fastest_total(self) -> str | None:
        return _fastest(self.total_us)

    def to_json(self) -> dict[str, Any]:
        return {"backends": list(self.backends), "rows": [r.to_json() for r in self.rows],
                "by_type": [r.to_json() for r in self.types],
                "totals": {"time_us": dict(self.total_us), "latency_ms": dict(self.latency_ms),
                           "fastest": self.fastest_total(), "layers": dict(self.layers),
                           "grouped": dict(self.grouped)}}


class _Groups:
    """Union-find over (runtime, layer) items."""

    def __init__(self) -> None:
        self.parent: dict[Item, Item] = {}

    def find(self, x: Item) -> Item:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: Item, b: Item) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def per_run_us(table: Calls) -> list[float]:
    """Each layer's time per run (µs): its median per call times its calls per run."""
    runs = max(int(table.meta.get("runs") or 1), 1)
    return [float(d) / 1e3 * int(c) / runs for d, c in zip(table.dur_ns.tolist(), table.calls.tolist(), strict=True)]


def _fastest(times: Mapping[str, float | None]) -> str | None:
    known = {k: v for k, v in times.items() if v is not None and v > 0}
    return min(known, key=lambda k: known[k]) if len(known) > 1 else None


def _link_covers(groups: _Groups, nodes: Sequence[Sequence[Node]]) -> None:
    """Each kernel that lists its ONNX nodes, with every other runtime's layer named after one of them."""
    for k, kernels in enumerate(nodes):
        covering: dict[str, int] = {}
        for j, node in enumerate(kernels):
            for name in node.covers:
                covering.setdefault(name, j)
        if not covering:
            continue
        for r, side in enumerate(nodes):
            if r == k:
                continue
            for i, node in enumerate(side):
                names = (normalize_name(x) for x in (node.name, *node.outputs) if x)
                hit = next((covering[x] for x in names if x in covering), None) if not node.covers else None
                if hit is not None:
                    groups.join((r, i), (k, hit))


def _link_named_after(groups: _Groups, nodes: Sequence[Sequence[Node]]) -> None:
    """Each layer a runtime named after a fused neighbour (ONNX Runtime's Conv with its Relu inside, named
    ``.../Relu_output_0_nchwc``) with the other runtimes' layers of that neighbour's name and another op
    family that nothing of its runtime took (the Relu it ran inside it): one row, as for a kernel that lists
    its nodes, so neither the row nor the op types compare a Conv and Relu against a Conv alone."""
    for k, side in enumerate(nodes):
        renamed: dict[str, int] = {}
        for j, node in enumerate(side):
            base = normalize_name(node.name)
            if base != node.name:
                renamed.setdefault(base, j)
        if not renamed:
            continue
        taken = {groups.find((k, j)) for j in range(len(side))}
        for r, other in enumerate(nodes):
            if r == k:
                continue
            for i, node in enumerate(other):
                hit = renamed.get(normalize_name(node.name))
                if hit is not None and op_family(node.op_type) != op_family(side[hit].op_type) \
                        and groups.find((r, i)) not in taken:
                    groups.join((r, i), (k, hit))


def _link_pairs(groups: _Groups, nodes: Sequence[Sequence[Node]], match: str) -> None:
    for r in range(1, len(nodes)):
        for i, j, _ in pair_nodes(nodes[0], nodes[r], match).pairs:
            groups.join((0, i), (r, j))


def _members(nodes: Sequence[Sequence[Node]], groups: _Groups) -> dict[Item, list[Item]]:
    """Each row's layers, by the row's root."""
    members: dict[Item, list[Item]] = {}
    for r, side in enumerate(nodes):
        for i in range(len(side)):
            members.setdefault(groups.find((r, i)), []).append((r, i))
    return members


def _rows(backends: Sequence[str], nodes: Sequence[Sequence[Node]], times: Sequence[Sequence[float]],
          members: dict[Item, list[Item]]) -> list[Row]:
    rows = []
    for root in sorted(members):  # the first runtime's execution order, then the others' own rows
        items = members[root]
        first = min(r for r, _ in items)
        names = {b: tuple(nodes[r][i].name for rr, i in items if rr == r) for r, b in enumerate(backends)}
        time = {b: (sum(times[r][i] for rr, i in items if rr == r) if names[b] else None)
                for r, b in enumerate(backends)}
        lead = names[backends[first]]
        key = lead[0] if len(lead) == 1 else f"{lead[0]} (+{len(lead) - 1})"
        op = op_family(nodes[first][min(i for rr, i in items if rr == first)].op_type)
        rows.append(Row(key, op, {b: v for b, v in names.items() if v}, time, _fastest(time)))
    return rows


def _mixed(nodes: Sequence[Sequence[Node]], members: dict[Item, list[Item]]) -> set[str]:
    """The op families whose layers share a row (on two runtimes or more) with layers of another family:
    one runtime fused their work into another type's layer (ONNX Runtime's Add beside a MatMul, where TVM's
    kernel is a MatMul with the Add in it), so their sums per type hold different work."""
    out: set[str] = set()
    for items in members.values():
        families = {op_family(nodes[r][i].op_type) for r, i in items}
        if len(families) > 1 and len({r for r, _ in items}) > 1:
            out |= families
    return out


def _types(backends: Sequence[str], nodes: Sequence[Sequence[Node]], times: Sequence[Sequence[float]],
           mixed: set[str]) -> list[Row]:
    sums: dict[str, dict[str, float]] = {}
    for r, b in enumerate(backends):
        for node, t in zip(nodes[r], times[r], strict=True):
            sums.setdefault(op_family(node.op_type), {}).setdefault(b, 0.0)
            sums[op_family(node.op_type)][b] += t
    out = []
    for family, by_backend in sorted(sums.items(), key=lambda kv: -max(kv[1].values())):
        time = {b: by_backend.get(b) for b in backends}
        alike = family not in mixed
        out.append(Row(family, family, {}, time, _fastest(time) if alike else None, alike))
    return out


def compare(tables: Mapping[str, Calls], *, match: str = "normalized",
            latency_ms: Mapping[str, float | None] | None = None) -> Comparison:
    """The comparison of one model's profiles on several runtimes (``tables``: runtime -> its event
    table, the reference first); ``latency_ms``: each one's end-to-end latency, where measured."""
    backends = tuple(tables)
    per_layer = [aggregate(tables[b], "name", "median") for b in backends]
    nodes = [match_nodes(t) for t in per_layer]
    times = [per_run_us(t) for t in per_layer]
    groups = _Groups()
    _link_pairs(groups, nodes, match)
    _link_covers(groups, nodes)
    _link_named_after(groups, nodes)
    members = _members(nodes, groups)
    rows = _rows(backends, nodes, times, members)
    grouped = {b: sum(len(r.layers.get(b, ())) for r in rows if b in r.layers and len(r.layers) > 1)
               for b in backends}
    return Comparison(backends, tuple(rows), tuple(_types(backends, nodes, times, _mixed(nodes, members))),
                      {b: sum(t) for b, t in zip(backends, times, strict=True)},
                      {b: (latency_ms or {}).get(b) for b in backends},
                      {b: len(n) for b, n in zip(backends, nodes, strict=True)}, grouped)
