"""A little SVG toolkit for the report's charts: elements as escaped text, colours per op type, log axes;
and kernels' short names."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from layerperf.renderers.html.page import esc
from layerperf.renderers.svg import OTHER_COLOR, PALETTE
from layerperf.renderers.svg_parts import Elements


class Svg(Elements):
    """An inline <svg> (no namespace URL: the HTML parser knows it) built element by element."""

    def __init__(self, element_id: str, width: float, height: float, label: str) -> None:
        super().__init__(esc)
        self.width, self.height = width, height
        self.add(f'<svg id="{esc(element_id)}" class="chart" width="{width:.0f}" height="{height:.0f}" '
                 f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(label)}" font-size="12">')

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


# what a templated kernel applies, in its template arguments: AddFunctor, sum_functor, MeanOps, where_kernel_impl
_APPLIED = re.compile(r"\b(\w*(?:Functor|functor|Ops|kernel_impl|cuda_kernel|kernel_cuda|_scalar)\w*)\b")


def short_kernel(name: str) -> str:
    """A kernel's C++ signature without its return type, template and parameter lists, and what it applies
    where its template names it (``at::native::vectorized_elementwise_kernel (FillFunctor)``): PyTorch's
    generic kernels differ only there. The full name is in the tooltip and the table."""
    text = name.removeprefix("void ")
    if "<" not in text.split("(")[0] and "::" not in text:  # not a C++ signature: "Memcpy HtoD (Pageable -> Device)"
        return name
    out, depth = [], 0
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif not depth:
            out.append(ch)
    short = "".join(out).strip().replace("::::", "::") or name
    start = text.find("<")
    applied = _APPLIED.findall(text[start:text.find(">", start)]) if start >= 0 else []
    return f"{short} ({applied[-1]})" if applied else short
