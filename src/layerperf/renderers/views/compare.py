"""The view of ``layerperf compare``: one model's layers on several runtimes, per layer and per op type,
each runtime's time, the fastest, and totals (:mod:`layerperf.analysis.compare`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layerperf.analysis.compare import Comparison, Row
from layerperf.renderers.view import KEEP, Column, Section, View, notes
from layerperf.renderers.views.columns import name_column, text
from layerperf.util import units

LAYER_ROWS = 20  # rows a table shows when --top is not given


def _time_columns(backends: Sequence[str]) -> list[Column]:
    return [Column(f"time_us.{b}", b, units.duration_us, priority=KEEP) for b in backends]


def _flat(row: Row, backends: Sequence[str], with_layers: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"key": row.key, "op_type": row.op_type, "fastest": row.fastest or ""}
    for b in backends:
        out[f"time_us.{b}"] = row.time_us.get(b)
        if with_layers:
            out[f"layers.{b}"] = " + ".join(row.layers.get(b, ()))
    known = [t for t in row.time_us.values() if t]
    out["spread"] = max(known) / min(known) if len(known) > 1 and row.comparable else None
    return out


def _people(row: dict[str, Any], backends: Sequence[str]) -> dict[str, Any]:
    """A row as people see it: a runtime without the layer blank, not "?" (unknown)."""
    return {**row, "spread": row["spread"] if row["spread"] is not None else "—",
            **{f"time_us.{b}": row[f"time_us.{b}"] if row[f"time_us.{b}"] is not None else "—" for b in backends}}


def _dash(fmt: Any) -> Any:
    return lambda v: v if v == "—" else fmt(v)


def _dashed(col: Column) -> Column:
    return Column(col.key, col.header, _dash(col.fmt), priority=col.priority)


def _layer_section(c: Comparison, top: int | None) -> Section:
    rest = c.backends[1:]
    rows = [_flat(r, c.backends, True) for r in c.rows]
    ranked = sorted(rows, key=lambda r: -max((r[f"time_us.{b}"] or 0.0) for b in c.backends))
    shown_rows = ranked[:top] if top else ranked
    # a narrow terminal keeps the name and each runtime's time, then the fastest, the type, the spread,
    # and the other runtimes' layer names last
    columns = [name_column("key", f"layer ({c.backends[0]})"), text("op_type", "type", priority=2),
               *[_dashed(col) for col in _time_columns(c.backends)],
               text("fastest", "fastest", priority=1),
               Column("spread", "slowest/fastest", _dash(lambda v: f"x{v:.2f}"), priority=2),
               *[text(f"layers.{b}", f"{b} layers", priority=3, min_width=16) for b in rest]]
    title = (f"per layer: time per run on each runtime (median per call x calls per run), the "
             f"{len(shown_rows)} slowest of {len(rows)} rows")
    return Section(columns=columns, rows=shown_rows, shown=[_people(r, c.backends) for r in shown_rows], title=title,
                   keys=["key", "op_type", *[f"time_us.{b}" for b in c.backends], "fastest", "spread",
                         *[f"layers.{b}" for b in rest]])


def _type_section(c: Comparison) -> Section:
    rows = [_flat(r, c.backends, False) for r in c.types]
    columns = [name_column("key", "op type"), *[_dashed(col) for col in _time_columns(c.backends)],
               text("fastest", "fastest", priority=1),
               Column("spread", "slowest/fastest", _dash(lambda v: f"x{v:.2f}"), priority=2)]
    unlike = [r.key for r in c.types if not r.comparable]
    lines = [f"no fastest for {', '.join(unlike)}: a runtime fused some of their work into another type's layers "
             "(see the rows per layer), so their sums per type hold different work"] if unlike else []
    return Section(columns=columns, rows=rows, shown=[_people(r, c.backends) for r in rows],
                   title="per op type (op family; a fused kernel under its anchor's type): time per run",
                   notes=notes([*lines, *_totals(c)]))


def _totals(c: Comparison) -> list[str]:
    lines = []
    for b in c.backends:
        latency = c.latency_ms.get(b)
        lines.append(f"{b}: {c.layers[b]} layers ({c.grouped[b]} in rows with another runtime's), sum of layer "
                     f"times {units.duration_us(c.total_us[b])}"
                     + (f", latency (profiler off) {units.duration_us(latency * 1e3)}" if latency is not None else ""))
    fastest = c.fastest_total()
    if fastest:
        lines.append(f"fastest in all: {fastest} (by the sum of its layer times)")
    return lines


def compare_view(c: Comparison, *, top: int | None = LAYER_ROWS, fmt: str = "table",
                 failed: Mapping[str, str] | None = None, profiles: Mapping[str, Any] | None = None,
                 warnings: Sequence[str] = ()) -> View:
    """The per-layer table (the ``top`` slowest rows for people; every row, in execution order, in
    JSON), the per-op-type table with the totals below; runtimes that ``failed`` said in one line each."""
    layer = _layer_section(c, top if fmt in ("table", "markdown") else None)
    types = _type_section(c)
    extra = [f"{b} failed: {reason}" for b, reason in (failed or {}).items()]
    doc = {**c.to_json(), "failed": dict(failed or {}), "profiles": dict(profiles or {}), "warnings": list(warnings)}
    view = View(sections=(layer, types), doc=doc)
    return view.with_notes([*notes(warnings, "warning"), *notes(extra, "warning")])
