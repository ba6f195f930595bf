"""The schedule MetaSchedule chose for a kernel, as a typed record: tiles, loop order, where each
block is computed, and the parallel, vectorize and unroll choices.

Read from a tuning record's trace as MetaSchedule prints it (``Trace.as_python()``), one schedule
primitive a line::

    v18, v19, v20, v21 = sch.sample_perfect_tile(loop=l4, n=4, max_innermost_factor=64, decision=[8, 8, 8, 1])
    l22, l23, l24, l25 = sch.split(loop=l4, factors=[v18, v19, v20, v21], preserve_unit_iters=True)
    sch.reorder(l14, l22, l30, ...)
    sch.reverse_compute_at(block=b54, loop=l39, preserve_unit_loops=True, index=-1)
    v55 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[...], decision=1)

Loops are named after the block's loop variables (``ff``; split parts ``ff_0``... as TVM names them)
when the caller knows them (:mod:`.database` reads them from the unscheduled kernel), else ``l4``.
What the postprocessors finally made parallel, vectorized and unrolled (and with which extents) is
only known after replaying the trace: :mod:`.database` fills ``loops``. No TVM needed here. The record
types are the data model's (:mod:`layerperf.data.schedule`), re-exported here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layerperf.data.schedule import DEFAULT, TUNED, KernelSchedule, Loop, Placement, Tile, default_schedule

__all__ = ["DEFAULT", "TUNED", "KernelSchedule", "Loop", "Placement", "Tile", "default_schedule", "read_trace"]


@dataclass(slots=True)
class _Reader:
    """Replays the trace's text: random variables -> blocks, loops and sampled values."""

    loop_names: Mapping[str, Sequence[str]]  # block -> its loop variables, outermost first
    blocks: dict[str, str] = field(default_factory=dict)  # block RV -> block name
    loops: dict[str, tuple[str, str]] = field(default_factory=dict)  # loop RV -> (block, loop name)
    values: dict[str, Any] = field(default_factory=dict)  # sampled RV -> value
    tiles: list[Tile] = field(default_factory=list)
    order: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    annotations: dict[str, Any] = field(default_factory=dict)
    postproc: bool = False

    def loop(self, rv: str) -> str:
        return self.loops.get(rv, ("", rv))[1]

    def step(self, op: str, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        handler = getattr(self, "_" + op, None)
        if handler is not None:
            handler(outs, kw, args)

    def _enter_postproc(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self.postproc = True

    def _get_sblock(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self.blocks[outs[0]] = str(kw.get("name", outs[0]))

    def _get_loops(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        block = self.blocks.get(str(kw.get("block")), "")
        names = list(self.loop_names.get(block, ())) if not self.postproc else []
        for i, rv in enumerate(outs):
            self.loops[rv] = (block, names[i] if i < len(names) and len(names) == len(outs) else rv)

    def _sample_perfect_tile(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        decision = [int(d) for d in kw.get("decision") or []]
        block, name = self.loops.get(str(kw.get("loop")), ("", str(kw.get("loop"))))
        self.values.update(zip(outs, decision, strict=False))
        if decision:
            self.tiles.append(Tile(block, name, tuple(decision)))

    def _sample_categorical(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        candidates, decision = kw.get("candidates") or [], kw.get("decision")
        if outs and isinstance(decision, int) and 0 <= decision < len(candidates):
            self.values[outs[0]] = candidates[decision]

    def _split(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        block, name = self.loops.get(str(kw.get("loop")), ("", str(kw.get("loop"))))
        for i, rv in enumerate(outs):
            self.loops[rv] = (block, f"{name}_{i}")

    def _fuse(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        parts = [self.loops.get(str(a), ("", str(a))) for a in args]
        if outs:
            self.loops[outs[0]] = (parts[0][0] if parts else "", "_".join(p[1] for p in parts) + "_fused")

    def _reorder(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        names = tuple(self.loop(str(a)) for a in args)
        block = self.loops.get(str(args[0]), ("", ""))[0] if args else ""
        self.order.append((block, names))

    def _cache_write(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        if outs:
            block = self.blocks.get(str(kw.get("block")), "")
            self.blocks[outs[0]] = f"{block}_{kw.get('storage_scope', 'global')}"

    _cache_read = _cache_write

    def _get_consumers(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        # The text does not name them: "<block>.consumer0" says whose they are.
        block = self.blocks.get(str(kw.get("block")), str(kw.get("block")))
        for i, rv in enumerate(outs):
            self.blocks[rv] = f"{block}.consumer{i}"

    def _get_producers(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        block = self.blocks.get(str(kw.get("block")), str(kw.get("block")))
        for i, rv in enumerate(outs):
            self.blocks[rv] = f"{block}.producer{i}"

    def _place(self, how: str, kw: dict[str, Any]) -> None:
        block = self.blocks.get(str(kw.get("block")), str(kw.get("block")))
        loop = self.loop(str(kw["loop"])) if "loop" in kw else None
        self.placements.append(Placement(block, how, loop))

    def _compute_inline(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self._place("inline", kw)

    def _reverse_compute_inline(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self._place("reverse_inline", kw)

    def _compute_at(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self._place("compute_at", kw)

    def _reverse_compute_at(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        self._place("reverse_compute_at", kw)

    def _annotate(self, outs: list[str], kw: dict[str, Any], args: list[Any]) -> None:
        if not self.postproc:
            value = kw.get("ann_val")
            resolved = self.values.get(value, value) if isinstance(value, str) else value
            self.annotations[str(kw.get("ann_key"))] = resolved


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        return node.id  # a random variable
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _parse_line(line: str) -> tuple[str, list[str], dict[str, Any], list[Any]] | None:
    """(primitive, output RVs, keyword args, positional args) of one trace line; None if not a call."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1:
        return None
    stmt = tree.body[0]
    outs: list[str] = []
    if isinstance(stmt, ast.Assign):
        target = stmt.targets[0]
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        outs = [e.id for e in elts if isinstance(e, ast.Name)]
        call = stmt.value
    elif isinstance(stmt, ast.Expr):
        call = stmt.value
    else:
        return None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    kw = {k.arg: _literal(k.value) for k in call.keywords if k.arg}
    return call.func.attr, outs, kw, [_literal(a) for a in call.args]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_trace(func: str, lines: Sequence[str], loop_names: Mapping[str, Sequence[str]] | None = None,
               run_s: float | None = None, loops: Sequence[Loop] = ()) -> KernelSchedule:
    """The schedule a trace's lines describe (``loop_names``: each block's loop variables)."""
    reader = _Reader(loop_names or {})
    for line in lines:
        parsed = _parse_line(line)
        if parsed is not None:
            reader.step(*parsed)
    ann = reader.annotations
    explicit = "meta_schedule.unroll_explicit" in ann
    unroll = ann.get("meta_schedule.unroll_explicit", ann.get("meta_schedule.unroll_implicit"))
    return KernelSchedule(
        func, TUNED, tuple(reader.tiles), tuple(reader.order), tuple(reader.placements),
        _int(ann.get("meta_schedule.parallel")), _int(ann.get("meta_schedule.vectorize")), _int(unroll),
        explicit if unroll is not None else None, tuple(loops), run_s, tuple(lines))
