"""The roofline: each layer a point at its arithmetic intensity and achieved rate, under the ceilings that
apply to where it ran — ``layerperf calibrate``'s peaks of the machine a profile ran on, or the published
peaks of the GPU a trace ran on (:mod:`layerperf.calibration.device_peaks`), never a CPU's for GPU work.

A layer is memory-bound when it lies left of its own roof's ridge (the intensity at which the bandwidth
slope meets the peak of its kind: float or integer), compute-bound right of it; without ceilings,
neither is known. Ceiling labels sit right of the plot, where no point can be.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.calibration.device_peaks import DevicePeaks
from layerperf.calibration.peaks import Peaks
from layerperf.data import figures
from layerperf.renderers.html.draw import Svg, color, decades
from layerperf.renderers.html.page import esc
from layerperf.util import units

WIDTH, HEIGHT = 1100, 520
X0, Y0, LABELS = 80, 30, 250  # left margin, top margin, room for the ceiling labels on the right
MEMORY, COMPUTE = "memory", "compute"


@dataclass(frozen=True, slots=True)
class Roof:
    """One compute ceiling: its label, rate, whether it bounds integer work, and whether it is the
    primary roof of its kind (the one "% of peak" and memory/compute-bound are judged by) or drawn
    for reference (dashed: TF32 tensor cores above float32)."""

    label: str
    rate: float
    integer: bool
    primary: bool = True


@dataclass(frozen=True, slots=True)
class Ceilings:
    """The roofs drawn, the memory bandwidth (None: not measured), and whose they are."""

    roofs: tuple[Roof, ...]
    bytes_per_s: float | None
    source: str  # "calibrated", "quick calibrated" (a --quick run) or the datasheet's name

    @staticmethod
    def of(peaks: Peaks | None, threads: int | None) -> Ceilings | None:
        """A calibration's float32 and int8 peaks and bandwidth at ``threads``."""
        if peaks is None:
            return None
        roofs = [Roof("float32 peak", rate, False) for rate in [peaks.at(peaks.flops_per_s, threads)] if rate]
        roofs += [Roof("int8 peak", rate, True) for rate in [peaks.at(peaks.int_ops_per_s, threads)] if rate]
        return Ceilings(tuple(roofs), peaks.at(peaks.bytes_per_s, threads),
                        "quick calibrated" if peaks.quick else "calibrated")

    @staticmethod
    def of_device(d: DevicePeaks, name: str) -> Ceilings:
        """A GPU's published dense peaks: float32 (CUDA cores), TF32 tensor cores for reference, int8."""
        roofs = [Roof(f"{d.model} float32", d.fp32_flops_per_s, False)]
        if d.tf32_flops_per_s:
            roofs.append(Roof(f"{d.model} TF32 tensor", d.tf32_flops_per_s, False, primary=False))
        if d.int8_ops_per_s:
            roofs.append(Roof(f"{d.model} int8 tensor", d.int8_ops_per_s, True))
        return Ceilings(tuple(roofs), d.bytes_per_s, f"published peaks of {name} ({d.source})")

    def peak(self, integer: bool) -> float | None:
        return next((r.rate for r in self.roofs if r.integer == integer and r.primary), None)

    def ridge(self, integer: bool) -> float | None:
        """The intensity where the bandwidth slope meets the primary roof of that kind."""
        peak = self.peak(integer)
        return peak / self.bytes_per_s if peak and self.bytes_per_s else None

    def bound(self, intensity: float | None, integer: bool) -> str | None:
        """"memory" left of the ridge, "compute" right of it; None when either is unknown."""
        ridge = self.ridge(integer)
        if ridge is None or intensity is None or not intensity > 0:
            return None
        return MEMORY if intensity < ridge else COMPUTE


@dataclass(frozen=True, slots=True)
class Point:
    """One layer on the roofline: work per byte moved, achieved rate, and whether the work is integer."""

    name: str
    op_type: str
    intensity: float  # FLOPs (or integer ops) per byte
    rate: float  # FLOP/s (or integer op/s)
    integer: bool


def work(row: Mapping[str, Any]) -> tuple[float, bool, float | None, float | None]:
    """A row's work (integer ops where they are the larger), whether integer, its rate and intensity."""
    flops, int_ops = row.get("flops") or 0, row.get("int_ops") or 0
    integer = int_ops > flops
    done = int_ops if integer else flops
    return done, integer, row.get("int_ops_per_s" if integer else "flops_per_s"), figures.intensity(done,
                                                                                                    row.get("bytes"))


def points(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Point], int]:
    """A point per layer whose work, bytes and rate are known and > 0; and how many layers have none."""
    out, missing = [], 0
    for r in rows:
        done, integer, rate, intensity = work(r)
        if not done or rate is None or not rate > 0 or intensity is None or not intensity > 0:
            missing += 1
            continue
        out.append(Point(str(r.get("name")), str(r.get("op_type")), intensity, float(rate), integer))
    return out, missing


def bound_of(row: Mapping[str, Any], ceilings: Ceilings | None) -> str | None:
    """A row's place under its own roof (see the module's docstring); None when unknown. A GPU's roof judges
    only the rows rated over device time."""
    if ceilings is None or (not ceilings.source.endswith("calibrated") and row.get("rate_time") != "device"):
        return None
    done, integer, _, intensity = work(row)
    return ceilings.bound(intensity, integer) if done else None


def rate(value: float, unit: str) -> str:
    """A rate with an SI prefix up to peta (a GPU's int8 peak is 1.98 POP/s)."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _bandwidth(bytes_per_s: float, published: bool) -> str:
    """Published bandwidth in decimal units as datasheets give it; a measured one in binary units."""
    return rate(bytes_per_s, "B/s") if published else f"{units.binary(bytes_per_s)}/s"


def _rate_tick(v: float) -> str:
    """A decade as a short rate label: 1 G/s, 100 M/s."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g} {prefix}/s"
    return f"{v:g} /s"


class _Axes:
    """The log-log frame: data to pixels."""

    def __init__(self, pts: Sequence[Point], ceilings: Ceilings | None) -> None:
        xs = [p.intensity for p in pts] or [0.1, 100.0]
        ys = [p.rate for p in pts] or [1e8, 1e11]
        rates = [r.rate for r in ceilings.roofs] if ceilings else []
        if ceilings and ceilings.bytes_per_s:
            xs += [v / ceilings.bytes_per_s for v in rates]  # the ridge points
        ys += rates  # every ceiling within the picture
        xd, yd = decades(min(xs) / 1.5, max(xs) * 1.5), decades(min(ys) / 1.5, max(ys) * 1.5)
        self.lo_x, self.hi_x, self.lo_y, self.hi_y = xd[0], xd[-1], yd[0], yd[-1]
        self.x1, self.y1 = WIDTH - LABELS, HEIGHT - 60

    def sx(self, v: float) -> float:
        return X0 + (math.log10(v) - math.log10(self.lo_x)) / (math.log10(self.hi_x) - math.log10(self.lo_x)) * (
            self.x1 - X0)

    def sy(self, v: float) -> float:
        return self.y1 - (math.log10(v) - math.log10(self.lo_y)) / (math.log10(self.hi_y) - math.log10(self.lo_y)) * (
            self.y1 - Y0)


def _frame(svg: Svg, ax: _Axes) -> None:
    for v in decades(ax.lo_x, ax.hi_x):
        svg.line(ax.sx(v), Y0, ax.sx(v), ax.y1, "#eee")
        svg.text(ax.sx(v), ax.y1 + 16, f"{v:g}", 'text-anchor="middle" fill="#333"')
    for v in decades(ax.lo_y, ax.hi_y):
        svg.line(X0, ax.sy(v), ax.x1, ax.sy(v), "#eee")
        svg.text(X0 - 6, ax.sy(v) + 4, _rate_tick(v), 'text-anchor="end" fill="#333"')
    svg.line(X0, ax.y1, ax.x1, ax.y1)
    svg.line(X0, Y0, X0, ax.y1)
    svg.text((X0 + ax.x1) / 2, ax.y1 + 36, "arithmetic intensity (FLOPs or integer ops per byte moved)",
             'text-anchor="middle"')
    svg.text(16, (Y0 + ax.y1) / 2, "achieved FLOP/s (integer: op/s)",
             f'text-anchor="middle" transform="rotate(-90 16 {(Y0 + ax.y1) / 2:.0f})"')


def _ceilings(svg: Svg, ceilings: Ceilings, ax: _Axes) -> None:
    """For each roof, the bandwidth slope up to where it meets the roof, then the roof; labels at the right,
    outside the plot, moved apart where two would touch."""
    bw = ceilings.bytes_per_s
    start = max(ax.lo_x, ax.lo_y / bw) if bw else ax.lo_x
    what = ceilings.source if ceilings.source.endswith("calibrated") else "published"
    labels: list[tuple[float, str]] = []
    for roof in sorted(ceilings.roofs, key=lambda r: -r.rate):
        dash = ' stroke-dasharray="7 4"' if roof.integer else ' stroke-dasharray="2 3"' if not roof.primary else ""
        ridge = max(roof.rate / bw, start) if bw else start
        unit = "OP/s" if roof.integer else "FLOP/s"
        if bw:
            svg.add(f'<line class="ceiling" x1="{ax.sx(start):.1f}" y1="{ax.sy(bw * start):.1f}" '
                    f'x2="{ax.sx(ridge):.1f}" y2="{ax.sy(roof.rate):.1f}" stroke="#444" stroke-width="1.6"{dash}>'
                    f"<title>memory bandwidth {_bandwidth(bw, what == 'published')} ({what})</title></line>")
        svg.add(f'<line class="ceiling" x1="{ax.sx(ridge):.1f}" y1="{ax.sy(roof.rate):.1f}" x2="{ax.x1:.1f}" '
                f'y2="{ax.sy(roof.rate):.1f}" stroke="#444" stroke-width="1.6"{dash}><title>{esc(roof.label)} '
                f"{rate(roof.rate, unit)} ({what})</title></line>")
        labels.append((ax.sy(roof.rate), f"{roof.label} {rate(roof.rate, unit)}"))
    if bw:
        labels.append((ax.sy(bw * start), f"bandwidth {_bandwidth(bw, what == 'published')}"))
    last = -1e9
    for y, text in sorted(labels):
        y = max(y + 4, last + 14)
        svg.text(ax.x1 + 8, y, text, 'class="roof-label" fill="#444"')
        last = y


def roofline_svg(pts: Sequence[Point], colors: Mapping[str, str], ceilings: Ceilings | None) -> str:
    """Log-log: arithmetic intensity against achieved rate, a point per layer; the ceilings that apply."""
    svg = Svg("roofline", WIDTH, HEIGHT, "roofline: achieved rate by arithmetic intensity")
    ax = _Axes(pts, ceilings)
    _frame(svg, ax)
    if ceilings is not None:
        _ceilings(svg, ceilings, ax)
    if not pts:
        svg.text((X0 + ax.x1) / 2, (Y0 + ax.y1) / 2, "no layer with known FLOPs (or integer ops), bytes and rate to "
                 "place", 'text-anchor="middle" fill="#8a3b00"')
    for p in pts:
        svg.add(_point(p, colors, ceilings, ax.sx, ax.sy))
    return svg.render()


def _point(p: Point, colors: Mapping[str, str], ceilings: Ceilings | None, sx: Callable[[float], float],
           sy: Callable[[float], float]) -> str:
    peak = ceilings.peak(p.integer) if ceilings else None
    of_peak = f", {units.percent(p.rate / peak)} of peak" if peak else ""
    bound = ceilings.bound(p.intensity, p.integer) if ceilings else None
    where = f"; {bound}-bound (ridge at {ceilings.ridge(p.integer):.3g}/byte)" if bound and ceilings else ""
    unit = "int op" if p.integer else "FLOP"
    title = f"{p.name} ({p.op_type}): {p.intensity:.3g} {unit}/byte, {rate(p.rate, unit + '/s')}{of_peak}{where}"
    fill = color(dict(colors), p.op_type)
    style = f'fill="white" stroke="{fill}" stroke-width="2"' if p.integer else \
        f'fill="{fill}" fill-opacity="0.85" stroke="#333" stroke-width="0.5"'
    return (f'<circle class="point{" int" if p.integer else ""}" data-name="{esc(p.name)}" '
            f'cx="{sx(p.intensity):.1f}" cy="{sy(p.rate):.1f}" r="4.5" {style}><title>{esc(title)}</title></circle>')
