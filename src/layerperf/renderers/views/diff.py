"""The view of ``diff``: per node (or op type) time in two traces, delta and speedup, totals below."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from layerperf.analysis import aggregate as analysis
from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.readers.dropped import warnings
from layerperf.renderers.view import KEEP, Column, Section, View, notes
from layerperf.renderers.views.columns import TYPE_MIN, name_column, ranked_by, text, type_repeats_name
from layerperf.util import units

if TYPE_CHECKING:
    pass


def signed_us(v: Any) -> str:
    return ("+" if v > 0 else "-" if v < 0 else "") + units.duration_us(abs(v))


def speedup(v: Any) -> str:
    return f"x{v:.3f}"


DIFF_COLUMNS: tuple[Column, ...] = (
    # a row found only in B has no name or type in A: where B's columns are left out, B's stand in
    replace(name_column("key", "name"), stand_in="key_b"),
    replace(text("op_type", "type", priority=1, min_width=TYPE_MIN), stand_in="op_type_b"),
    Column("calls_a", "calls A", priority=3),
    Column("calls_b", "calls B", priority=3),
    Column("time_a_us", "time A", units.duration_us, priority=1),
    Column("time_b_us", "time B", units.duration_us, priority=1),
    Column("delta_us", "delta", signed_us, priority=KEEP),  # the default ranking: see ranked_by
    Column("delta_pct", "delta %", lambda v: ("+" if v > 0 else "") + units.percent(v)),
    # the relative change again, as delta % says it: given way to before the side a row was found on, which
    # alone tells a node missing from B (its time B 0) from one measured at 0
    Column("speedup", "speedup", speedup, priority=2),
    text("only_in", "only in", priority=1),
)
# shown when some pair's names differ
DIFF_NAME_B = text("key_b", "name in B", priority=2, min_width=16)
DIFF_MATCH = text("match", "matched by", priority=3)
DIFF_TYPE_B = text("op_type_b", "type in B", priority=3, min_width=TYPE_MIN)


def time_label(by: str, how: str) -> str:
    """What a row's time is: a node's per-call figure, or by type the sum of its nodes' figures."""
    if by == "name":
        return f"per-node time: the {how} of its calls"
    return f"per-op-type time: the sum over its nodes of each node's {how} per call"


def _matched_line(totals: Mapping[str, Any], what: str = "nodes") -> str:
    rules = ", ".join(f"{n} by {rule}" for rule, n in totals["matched_by"].items() if n)
    return (f"matched {totals['matched']} of {totals['nodes_a']} {what} in A and {totals['nodes_b']} in B"
            + (f" ({rules})" if rules else "") + f"; --match {totals['match']}")


def _notes(totals: Mapping[str, Any], by: str, match: str) -> list[str]:
    lines = [f"total: A {units.duration_us(totals['time_a_us'])}, B {units.duration_us(totals['time_b_us'])}, "
             f"delta {signed_us(totals['delta_us'])}"
             + (f", speedup {speedup(totals['speedup'])}" if totals["speedup"] else ""),
             f"{totals['only_in_a']} only in A, {totals['only_in_b']} only in B; "
             "delta = B - A, speedup = A / B (> 1: B is faster)"]
    if by == "name" or match == "normalized":
        lines.insert(1, _matched_line(totals, "nodes" if by == "name" else "op families"))
    inside = [f"{totals.get(f'in_paired_scope_{side}') or 0} only in {side.upper()}" for side in "ab"
              if totals.get(f"in_paired_scope_{side}")]
    if inside:
        lines.append(f"{' and '.join(inside)} ran inside a module paired by scope (a Linear's bias Add beside "
                     "its MatMul): the other side's time for that module includes their work")
    return lines


def _source(table: Calls | Folded) -> str:
    return f"{table.meta.get('source')} ({table.meta.get('format')})"


def _key_headers(by: str, match: str) -> tuple[str, str]:
    """What a row's key is (A's and B's headers): a node's name, an op type, or an op family."""
    if by == "name":
        return "name", "name in B"
    what = "op family" if match == "normalized" else "op type"
    return what, f"{what} in B"


def _type_repeats_name(rows: list[dict[str, Any]]) -> bool:
    """Whether every row's type, in A and in B, is its name there (PyTorch traces)."""
    sides = [(r["key"], r["op_type"]) for r in rows]
    sides += [(r["key_b"], r["op_type_b"]) for r in rows if r["key_b"] is not None]
    return type_repeats_name([name for name, _ in sides], [kind for _, kind in sides])


def _columns(rows: list[dict[str, Any]], by: str, match: str,
             order_by: str) -> tuple[list[Column], list[dict[str, Any]]]:
    """The table's columns and its rows as people see them: a row found only in B shows its name and type
    in B's columns, none under A's (the JSON keeps ``key`` = its name, the row's identity); no type
    columns where they repeat the names (CSV and JSON keep them)."""
    head_a, head_b = _key_headers(by, match)
    columns = ranked_by([replace(DIFF_COLUMNS[0], header=head_a), *DIFF_COLUMNS[1:]],
                        analysis.DIFF_ORDER_ALIASES.get(order_by, order_by))
    typed = not _type_repeats_name(rows)
    if not typed:
        columns = [c for c in columns if c.key != "op_type"]
    if not any(r["only_in"] == "B" or r["key_b"] not in (None, r["key"]) or r["op_type_b"] not in (None, r["op_type"])
               for r in rows):
        return columns, rows
    columns[1:1] = [replace(DIFF_NAME_B, header=head_b), DIFF_MATCH]
    if typed:
        columns.insert(4, DIFF_TYPE_B)
    # no node on a side: blank there, not "?" (unknown)
    shown = [{**r, "key": "", "op_type": ""} if r["only_in"] == "B" else
             {**r, "key_b": r["key_b"] or "", "op_type_b": r["op_type_b"] or ""} for r in rows]
    return columns, shown


def diff_view(a: Calls | Folded, b: Calls | Folded, *, by: str = "name", how: str = "mean", match: str = "normalized",
              order_by: str = "delta", top: int = 0) -> View:
    """``a`` and ``b`` compared node by node (``by`` name) or op type by op type; rows ranked by
    ``order_by``, the first ``top`` of them (all when 0)."""

    rows, totals = analysis.diff(a, b, by=by, how=how, match=match)
    rows = analysis.order_diff(rows, order_by)
    if top:
        rows = rows[:top]
    columns, shown = _columns(rows, by, match, order_by)
    title = f"A = {_source(a)}, B = {_source(b)}: {time_label(by, how)}"
    left_out = [f"{side}: {line}" for side, t in (("A", a), ("B", b)) for line in warnings(t.meta)]
    section = Section(columns=columns, rows=rows, shown=shown, keys=analysis.DIFF_COLUMNS, title=title,
                      notes=(*notes(_notes(totals, by, match)), *notes(left_out, "warning")))
    doc = {"rows": rows, "totals": totals, "a": a.meta.get("source"), "b": b.meta.get("source"),
           "time": time_label(by, how)}
    if left_out:  # events a reader left out, by reason (absent when none)
        doc["dropped"] = {"a": a.meta.get("dropped") or {}, "b": b.meta.get("dropped") or {}}
    return View(sections=(section,), doc=doc)
