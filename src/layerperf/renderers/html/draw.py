"""A little SVG toolkit for the report's charts: elements as escaped text, colours per op type, log axes."""

from __future__ import annotations

import math
from collections.abc import Sequence

from layerperf.renderers.html.page import esc
from layerperf.renderers.svg import OTHER_COLOR, PALETTE


class Svg:
    """An inline <svg> (no namespace URL: the HTML parser knows it) built element by element."""

    def __init__(self, element_id: str, width: float, height: float, label: str) -> None:
        self.width, self.height = width, height
        self.parts = [f'<svg id="{esc(element_id)}" class="chart" width="{width:.0f}" height="{height:.0f}" '
                      f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(label)}" '
                      'font-size="12">']

    def add(self, element: str) -> None:
        self.parts.append(element)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, title: str = "", attrs: str = "") -> None:
        inner = f"<title>{esc(title)}</title>" if title else ""
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{max(h, 0.5):.1f}" '
                 f'fill="{fill}" {attrs}>{inner}</rect>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#333", attrs: str = "") -> None:
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" {attrs}/>')

    def text(self, x: float, y: float, text: str, attrs: str = "") -> None:
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" {attrs}>{esc(text)}</text>')

    def render(self) -> str:
        return "".join([*self.parts, "</svg>"])


def op_colors(op_types: Sequence[str]) -> dict[str, str]:
    """A colour for each of the first op types (ranked by time); the rest share grey (:func:`color`)."""
    return dict(zip(op_types, PALETTE, strict=False))


def color(colors: dict[str, str], op_type: str) -> str:
    return colors.get(op_type, OTHER_COLOR)


def clip(text: str, width_px: float, char_px: float = 6.6) -> str:
    """``text`` cut to fit ``width_px`` (an ellipsis where cut); empty when not even 3 characters fit."""
    n = int(width_px / char_px)
    if n < 3:
        return ""
    return text if len(text) <= n else text[:n - 1] + "…"


def decades(lo: float, hi: float) -> list[float]:
    """Powers of ten from below ``lo`` to above ``hi`` (both > 0)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** k for k in range(a, max(b, a + 1) + 1)]


def time_ticks(span_ns: float, target: int = 8) -> tuple[float, str]:
    """A round tick step for a span of ``span_ns`` (1, 2, 5 x 10^k ns), and the unit to label ticks in."""
    raw = max(span_ns, 1.0) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    unit = "ms" if step >= 1e5 else "µs" if step >= 100 else "ns"
    return step, unit


def time_label(ns: float, unit: str) -> str:
    scale = {"ms": 1e6, "µs": 1e3, "ns": 1.0}[unit]
    return f"{ns / scale:g} {unit}"
