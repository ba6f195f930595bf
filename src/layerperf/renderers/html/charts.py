"""The op-type breakdown and the roofline, as SVG."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.analysis import aggregate as analysis
from layerperf.calibration.peaks import Peaks
from layerperf.data import figures
from layerperf.data.calls import Calls
from layerperf.renderers.html.draw import Svg, clip, color, decades
from layerperf.renderers.html.page import esc
from layerperf.util import units

if TYPE_CHECKING:
    pass

WIDTH = 1100
BAR_ROWS = 16  # op types drawn one by one; the rest share a bar


@dataclass(frozen=True, slots=True)
class TypeTime:
    """An op type's self time over the whole trace, its share of the total, and its calls."""

    op_type: str
    total_ns: float
    share: float
    calls: int


def type_times(calls: Calls) -> list[TypeTime]:
    """Self time per op type (as ``layerperf analyze --aggregate-by type``), largest first."""

    by_type = analysis.aggregate(calls, "type", "sum")
    grand = analysis.grand_total_ns(calls)
    shares = figures.shares(by_type.total_ns, grand)
    out = [TypeTime(t, float(ns), float(s), int(c)) for t, ns, s, c in
           zip(by_type.op_type.tolist(), by_type.total_ns.tolist(), shares.tolist(), by_type.calls.tolist(),
               strict=True)]
    return sorted(out, key=lambda t: (-t.total_ns, t.op_type))


Bar = tuple[str, float, float, int, "str | None"]


def _bars(times: Sequence[TypeTime]) -> list[Bar]:
    """(label, total ns, share, calls, op type to filter by) per bar, the tail folded into one."""
    head: list[Bar] = [(t.op_type, t.total_ns, t.share, t.calls, t.op_type) for t in times[:BAR_ROWS]]
    tail = times[BAR_ROWS:]
    if tail:
        head.append((f"{len(tail)} other op types", float(sum(t.total_ns for t in tail)),
                     float(np.nansum([t.share for t in tail])), sum(t.calls for t in tail), None))
    return head


def breakdown_svg(times: Sequence[TypeTime], colors: Mapping[str, str], runs: int | None,
                  element_id: str = "breakdown") -> str:
    """Horizontal bars: each op type's share of all self time; its time per run where runs are known."""
    bars = _bars(times)
    left, right, row = 190, 260, 22
    svg = Svg(element_id, WIDTH, 30 + row * max(len(bars), 1), "self time by op type")
    top = max((b[1] for b in bars), default=0.0) or 1.0
    span = WIDTH - left - right
    svg.text(left, 14, "share of all self time" + ("; time per run" if runs else "; time over the trace"),
             'fill="#555"')
    for i, (label, total_ns, share, n_calls, op) in enumerate(bars):
        y = 24 + i * row
        per = total_ns / runs if runs else total_ns
        title = (f"{label}: {units.percent(share)} of self time, {units.duration_us(per / 1e3)}"
                 f"{' per run' if runs else ''}, {n_calls} calls")
        attrs = 'class="bar"' + (f' data-filter="{_attr(op)}"' if op is not None else "")
        svg.text(left - 8, y + 13, clip(label, left - 12), 'text-anchor="end"')
        svg.rect(left, y + 2, span * total_ns / top, row - 6, color(dict(colors), op or ""), title, attrs)
        svg.text(left + span * total_ns / top + 6, y + 14,
                 f"{units.percent(share)}  {units.duration_us(per / 1e3)}{' / run' if runs else ''}",
                 'fill="#333"')
    return svg.render()


def _attr(text: str) -> str:
    return esc(text)


def _types(value: Any) -> list[str]:
    return [t for t in str(value or "").split("/") if t]


def family_label(row: Mapping[str, Any]) -> str:
    """A diff row's op type, or its op family with the types A and B ran under it when they are others
    (``Conv family (Conv, QLinearConv)``): B's QLinearConv is not shown as A's Conv."""
    key = str(row.get("key"))
    types = list(dict.fromkeys([*_types(row.get("op_type")), *_types(row.get("op_type_b"))]))
    return key if types in ([], [key]) else f"{key} family ({', '.join(types)})"


def paired_breakdown_svg(rows: Sequence[Mapping[str, Any]], colors: Mapping[str, str]) -> str:
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
    svg.text(left + 66, 15, "B   (per run: the sum over the type's nodes of each node's time per call)")
    for i, r in enumerate(ranked):
        y = 26 + i * row
        op, label = str(r.get("key")), family_label(r)
        svg.text(left - 8, y + 18, clip(label, left - 12), 'text-anchor="end"')
        for j, (side, fill) in enumerate((("a", "#4c78a8"), ("b", "#f58518"))):
            us = r.get(f"time_{side}_us") or 0.0
            ran = _types(r.get("op_type" if side == "a" else "op_type_b"))
            own = "" if ran in ([], [op]) else f" ({', '.join(ran)})"
            title = f"{label} in {side.upper()}{own}: {units.duration_us(us)}"
            svg.rect(left, y + 2 + j * 13, span * us / top, 11, fill, title,
                     f'class="bar" data-filter="{_attr(op)}"')
            svg.text(left + span * us / top + 6, y + 12 + j * 13, f"{side.upper()}{own}: {units.duration_us(us)}",
                     'fill="#333" font-size="11"')
    del colors
    return svg.render()


# -- roofline --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Point:
    """One layer on the roofline: work per byte moved, achieved rate, and whether the work is integer."""

    name: str
    op_type: str
    intensity: float  # FLOPs (or integer ops) per byte
    rate: float  # FLOP/s (or integer op/s)
    integer: bool


def points(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Point], int]:
    """A point per layer whose work, bytes and rate are known and > 0 (integer work where it is the larger);
    and how many layers have none."""
    out, missing = [], 0
    for r in rows:
        flops, int_ops = r.get("flops") or 0, r.get("int_ops") or 0
        integer = int_ops > flops
        work = int_ops if integer else flops
        rate = r.get("int_ops_per_s" if integer else "flops_per_s")
        intensity = figures.intensity(work, r.get("bytes"))
        if not work or rate is None or not rate > 0 or intensity is None or not intensity > 0:
            missing += 1
            continue
        out.append(Point(str(r.get("name")), str(r.get("op_type")), intensity, float(rate), integer))
    return out, missing


@dataclass(frozen=True, slots=True)
class Ceilings:
    """The calibrated peaks the roofline draws (None: not measured)."""

    flops_per_s: float | None
    int_ops_per_s: float | None
    bytes_per_s: float | None
    threads: int | None

    @staticmethod
    def of(peaks: Peaks | None, threads: int | None) -> Ceilings | None:
        if peaks is None:
            return None
        return Ceilings(peaks.at(peaks.flops_per_s, threads), peaks.at(peaks.int_ops_per_s, threads),
                        peaks.at(peaks.bytes_per_s, threads), threads)

    def peak(self, integer: bool) -> float | None:
        return self.int_ops_per_s if integer else self.flops_per_s


def roofline_svg(pts: Sequence[Point], colors: Mapping[str, str], ceilings: Ceilings | None) -> str:
    """Log-log: arithmetic intensity against achieved rate, a point per layer; the calibrated bandwidth
    slope and compute peaks (float and integer) as ceilings."""
    width, height = WIDTH, 520
    x0, x1, y0, y1 = 80, width - 30, 30, height - 60
    svg = Svg("roofline", width, height, "roofline: achieved rate by arithmetic intensity")
    xs = [p.intensity for p in pts] or [0.1, 100.0]
    ys = [p.rate for p in pts] or [1e8, 1e11]
    peaks = [v for v in ((ceilings.flops_per_s, ceilings.int_ops_per_s) if ceilings else ()) if v]
    bw = ceilings.bytes_per_s if ceilings else None
    if bw:
        xs += [v / bw for v in peaks]  # the ridge points
    ys += peaks  # every ceiling within the picture
    lo_x, hi_x = decades(min(xs) / 1.5, max(xs) * 1.5)[0], decades(min(xs) / 1.5, max(xs) * 1.5)[-1]
    lo_y, hi_y = decades(min(ys) / 1.5, max(ys) * 1.5)[0], decades(min(ys) / 1.5, max(ys) * 1.5)[-1]

    def sx(v: float) -> float:
        return x0 + (math.log10(v) - math.log10(lo_x)) / (math.log10(hi_x) - math.log10(lo_x)) * (x1 - x0)

    def sy(v: float) -> float:
        return y1 - (math.log10(v) - math.log10(lo_y)) / (math.log10(hi_y) - math.log10(lo_y)) * (y1 - y0)

    for v in decades(lo_x, hi_x):
        svg.line(sx(v), y0, sx(v), y1, "#eee")
        svg.text(sx(v), y1 + 16, f"{v:g}", 'text-anchor="middle" fill="#333"')
    for v in decades(lo_y, hi_y):
        svg.line(x0, sy(v), x1, sy(v), "#eee")
        svg.text(x0 - 6, sy(v) + 4, _rate_tick(v), 'text-anchor="end" fill="#333"')
    svg.line(x0, y1, x1, y1)
    svg.line(x0, y0, x0, y1)
    svg.text((x0 + x1) / 2, y1 + 36, "arithmetic intensity (FLOPs or integer ops per byte moved)",
             'text-anchor="middle"')
    svg.text(16, (y0 + y1) / 2, "achieved FLOP/s (integer: op/s)",
             f'text-anchor="middle" transform="rotate(-90 16 {(y0 + y1) / 2:.0f})"')
    if ceilings is not None:
        _ceilings(svg, ceilings, sx, sy, (lo_x, x1), lo_y)
    if not pts:
        svg.text((x0 + x1) / 2, (y0 + y1) / 2, "no layer with known FLOPs (or integer ops), bytes and rate to place",
                 'text-anchor="middle" fill="#8a3b00"')
    for p in pts:
        peak = ceilings.peak(p.integer) if ceilings else None
        of_peak = f", {units.percent(p.rate / peak)} of peak" if peak else ""
        unit = "int op" if p.integer else "FLOP"
        title = (f"{p.name} ({p.op_type}): {p.intensity:.3g} {unit}/byte, {units.si(p.rate, unit + '/s')}{of_peak}")
        fill = color(dict(colors), p.op_type)
        style = f'fill="white" stroke="{fill}" stroke-width="2"' if p.integer else \
            f'fill="{fill}" fill-opacity="0.85" stroke="#333" stroke-width="0.5"'
        svg.add(f'<circle class="point{" int" if p.integer else ""}" data-name="{_attr(p.name)}" '
                f'cx="{sx(p.intensity):.1f}" cy="{sy(p.rate):.1f}" r="4.5" {style}>'
                f"<title>{_attr(title)}</title></circle>")
    return svg.render()


def _ceilings(svg: Svg, ceilings: Ceilings, sx: Any, sy: Any, x_range: tuple[float, float], lo_y: float) -> None:
    """The calibrated roofs: for each peak (float32, int8), the bandwidth slope up to where it meets the
    peak, then the peak; a peak alone (no bandwidth measured) across the whole width."""
    lo_x, x1 = x_range
    bw = ceilings.bytes_per_s
    start = max(lo_x, lo_y / bw) if bw else lo_x
    for peak, label, unit, dash in ((ceilings.flops_per_s, "float32 peak", "FLOP/s", ""),
                                    (ceilings.int_ops_per_s, "int8 peak", "OP/s", ' stroke-dasharray="7 4"')):
        if not peak:
            continue
        ridge = max(peak / bw, start) if bw else start
        if bw:
            svg.add(f'<line class="ceiling" x1="{sx(start):.1f}" y1="{sy(bw * start):.1f}" x2="{sx(ridge):.1f}" '
                    f'y2="{sy(peak):.1f}" stroke="#444" stroke-width="1.6"{dash}><title>memory bandwidth '
                    f"{units.binary(bw)}/s (calibrated)</title></line>")
        svg.add(f'<line class="ceiling" x1="{sx(ridge):.1f}" y1="{sy(peak):.1f}" x2="{x1:.1f}" y2="{sy(peak):.1f}" '
                f'stroke="#444" stroke-width="1.6"{dash}><title>{label} {units.si(peak, unit)} (calibrated)'
                "</title></line>")
        svg.text(x1 - 4, sy(peak) - 5, f"{label} {units.si(peak, unit)}", 'text-anchor="end" fill="#444"')
    if bw:
        svg.text(sx(start) + 4, sy(bw * start) - 8, f"bandwidth {units.binary(bw)}/s", 'fill="#444"')


def _rate_tick(v: float) -> str:
    """A decade as a short rate label: 1 G/s, 100 M/s."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g} {prefix}/s"
    return f"{v:g} /s"
