"""The op-type breakdowns as SVG: one statistic per chart, named on it.

A profile's chart sums its layers' median times (each layer's median per call times its calls per run),
the figure the layer table shows and the summary's "sum of medians": the bars add up to what the table
does. A foreign trace's chart sums self time over all its calls, as its table does; a GPU trace's ranks
device time. The op types after the first :data:`BAR_ROWS` share one bar, which expands to all of them.
A bar selects exactly its op type in the table (``data-type``), never a substring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.analysis import aggregate as analysis
from layerperf.analysis.matching import op_family
from layerperf.data import figures
from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.renderers.html.draw import Svg, clip, color
from layerperf.renderers.html.page import esc
from layerperf.util import units

WIDTH = 1100
BAR_ROWS = 16  # op types drawn one by one; the rest share a bar (which expands)


@dataclass(frozen=True, slots=True)
class TypeTime:
    """An op type's time in the chart's statistic, its share of the chart's total, and its calls."""

    op_type: str
    total_ns: float
    share: float
    calls: float  # per run for a profile (a layer may run several times per run)


def _ranked(out: list[TypeTime]) -> list[TypeTime]:
    return sorted(out, key=lambda t: (-t.total_ns, t.op_type))


def type_times(calls: Calls | Folded, device: bool = False) -> list[TypeTime]:
    """Self time per op type summed over all calls (as ``layerperf analyze --aggregate-by type``), or with
    ``device`` the device time the op type launched itself; largest first. Of every call, or folded."""
    by_type = analysis.grouped(calls, "type", "sum")
    values = np.nan_to_num(by_type.device_ns, nan=0.0) if device else by_type.total_ns
    grand = float(np.nansum(values)) if device else analysis.grand_total_ns(calls)
    shares = figures.shares(values, grand)
    return _ranked([TypeTime(t, float(ns), float(s), int(c)) for t, ns, s, c in
                    zip(by_type.op_type.tolist(), values.tolist(), shares.tolist(), by_type.calls.tolist(),
                        strict=True) if not device or ns > 0])


def profile_type_times(rows: Sequence[Mapping[str, Any]], runs: int) -> list[TypeTime]:
    """Per op type, the sum over its layers of each layer's median self time per call times its calls per
    run: the statistic of the layer table, so the bars add up to the summed medians."""
    per: dict[str, list[float]] = {}
    for r in rows:
        median, calls = r.get("median_us"), r.get("calls") or 0
        if median is None:
            continue
        per_run = calls / runs if runs else calls
        acc = per.setdefault(str(r.get("op_type")), [0.0, 0.0])
        acc[0] += float(median) * 1e3 * per_run
        acc[1] += per_run
    grand = sum(v[0] for v in per.values()) or 1.0
    return _ranked([TypeTime(t, ns, ns / grand, n) for t, (ns, n) in per.items()])


@dataclass(frozen=True, slots=True)
class Chart:
    """How a breakdown reads: its element id, what each bar is (named on the chart), the unit of its
    figure (``per run`` or empty), and the noun of its calls."""

    element_id: str
    statistic: str
    per: str = ""
    calls: str = "calls"


Bar = tuple[str, float, float, float, "str | None"]


def _bars(times: Sequence[TypeTime], limit: int | None) -> list[Bar]:
    """(label, ns, share, calls, op type) per bar; past ``limit`` the tail folded into one (op type None)."""
    head: list[Bar] = [(t.op_type, t.total_ns, t.share, t.calls, t.op_type) for t in times[:limit]]
    tail = times[limit:] if limit is not None else []
    if tail:
        head.append((f"{len(tail)} other op types (click to show them)", float(sum(t.total_ns for t in tail)),
                     float(np.nansum([t.share for t in tail])), sum(t.calls for t in tail), None))
    return head


def _calls(n: float, noun: str) -> str:
    return f"{n:g} {noun}" if float(n).is_integer() else f"{n:.2f} {noun}"


def _breakdown_svg(bars: Sequence[Bar], colors: Mapping[str, str], chart: Chart, element_id: str,
                   expand: str | None) -> str:
    left, right, row = 230, 260, 22
    svg = Svg(element_id, WIDTH, 34 + row * max(len(bars), 1), chart.statistic)
    top = max((b[1] for b in bars), default=0.0) or 1.0
    span = WIDTH - left - right
    svg.text(8, 14, chart.statistic, 'fill="#555" class="statistic"')
    per = f" {chart.per}" if chart.per else ""
    for i, (label, total_ns, share, n_calls, op) in enumerate(bars):
        y = 26 + i * row
        title = (f"{label}: {units.percent(share)}, {units.duration_us(total_ns / 1e3)}{per}, "
                 f"{_calls(n_calls, chart.calls)}{per}")
        attrs = 'class="bar"' + (f' data-type="{esc(op)}"' if op is not None else
                                 f' data-expand="{esc(expand)}"' if expand else "")
        svg.text(left - 8, y + 13, clip(label if op is not None else label.split(" (")[0], left - 12),
                 'text-anchor="end"')
        svg.rect(left, y + 2, span * total_ns / top, row - 6, color(dict(colors), op or ""), title, attrs)
        svg.text(left + span * total_ns / top + 6, y + 14,
                 f"{units.percent(share)}  {units.duration_us(total_ns / 1e3)}{per}", 'fill="#333"')
    return svg.render()


def breakdown_html(times: Sequence[TypeTime], colors: Mapping[str, str], chart: Chart) -> str:
    """The chart of the first :data:`BAR_ROWS` op types and the rest in one bar; when there is such a bar,
    the chart of them all beside it (hidden), which clicking that bar shows."""
    compact = _bars(times, BAR_ROWS)
    if len(compact) <= BAR_ROWS:
        return f'<div class="chartbox">{_breakdown_svg(compact, colors, chart, chart.element_id, None)}</div>'
    whole = f"{chart.element_id}-all"
    return (f'<div class="chartbox swap" id="{esc(chart.element_id)}-box">'
            f"{_breakdown_svg(compact, colors, chart, chart.element_id, whole + '-box')}</div>"
            f'<div class="chartbox swap" id="{esc(whole)}-box" hidden>'
            f"{_breakdown_svg(_bars(times, None), colors, chart, whole, None)}</div>")


# -- the diff page ---------------------------------------------------------------------------------
def _types(value: Any) -> list[str]:
    return [t for t in str(value or "").split("/") if t]


def family_label(row: Mapping[str, Any]) -> str:
    """A diff row's op type, or its op family with the types A and B ran under it when they are others
    (``Conv family (Conv, QLinearConv)``): B's QLinearConv is not shown as A's Conv."""
    key = str(row.get("key"))
    types = list(dict.fromkeys([*_types(row.get("op_type")), *_types(row.get("op_type_b"))]))
    return key if types in ([], [key]) else f"{key} family ({', '.join(types)})"


def family_of(row: Mapping[str, Any]) -> str:
    """The op family a diff row's bar selects: of its type in A, else in B."""
    return op_family(str(row.get("op_type") or row.get("op_type_b") or ""))


def paired_breakdown_svg(rows: Sequence[Mapping[str, Any]], statistic: str) -> str:
    """Diff: each op type's (op family's) time in A and in B side by side (``analysis.diff(by="type")`` rows);
    each side's bar names the op types it ran when they are not the family's own."""
    ranked = sorted(rows, key=lambda r: -max(r.get("time_a_us") or 0.0, r.get("time_b_us") or 0.0))[:BAR_ROWS]
    left, right, row = 260, 260, 34
    svg = Svg("breakdown", WIDTH, 40 + row * max(len(ranked), 1), "op type time, A and B")
    top = max((max(r.get("time_a_us") or 0.0, r.get("time_b_us") or 0.0) for r in ranked), default=0.0) or 1.0
    span = WIDTH - left - right
    svg.rect(left, 6, 12, 10, "#4c78a8")
    svg.text(left + 16, 15, "A")
    svg.rect(left + 50, 6, 12, 10, "#f58518")
    svg.text(left + 66, 15, f"B   ({statistic})", 'class="statistic"')
    for i, r in enumerate(ranked):
        y = 26 + i * row
        op, label = str(r.get("key")), family_label(r)
        svg.text(left - 8, y + 18, clip(label, left - 12), 'text-anchor="end"')
        for j, (side, fill) in enumerate((("a", "#4c78a8"), ("b", "#f58518"))):
            us = r.get(f"time_{side}_us") or 0.0
            ran = _types(r.get("op_type" if side == "a" else "op_type_b"))
            own = "" if ran in ([], [op]) else f" ({', '.join(ran)})"
            title = f"{label} in {side.upper()}{own}: {units.duration_us(us)}"
            svg.rect(left, y + 2 + j * 13, span * us / top, 11, fill, title, f'class="bar" data-type="{esc(op)}"')
            svg.text(left + span * us / top + 6, y + 12 + j * 13, f"{side.upper()}{own}: {units.duration_us(us)}",
                     'fill="#333" font-size="11"')
    return svg.render()
