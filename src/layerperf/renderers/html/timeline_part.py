"""The timeline section's markup: the strip of every run's duration (click one to draw it), the controls,
the two canvases ``timeline.js`` draws on (the overview and the lanes), and the colour legend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layerperf.renderers.html.draw import Svg
from layerperf.renderers.html.gantt import KIND_COLORS
from layerperf.renderers.html.page import esc, section_html
from layerperf.renderers.html.runs import FAR, RunSet
from layerperf.renderers.svg import OTHER_COLOR
from layerperf.util import units

STRIP_W, STRIP_H, STRIP_LEFT = 1100, 84, 160
MAX_STRIP = 2000  # runs drawn on the strip at most
RUN, WARM, FAR_RUN = "#4c78a8", "#9d755d", "#d62728"


def _ms(ns: float) -> str:
    return units.duration_us(ns / 1e3)


def strip_svg(element_id: str, runs: RunSet, held: Sequence[int]) -> str:
    """A bar per run, as tall as it lasted: the warm-up runs apart on the left, outliers red, the steady runs'
    median dashed across, runs the page does not hold faded. Each bar names its run (``data-run``)."""
    n = min(len(runs), MAX_STRIP)
    durations = runs.durations_ns
    top = float(durations[:n].max()) if n else 1.0
    gap = 18 if runs.warmup else 0
    bar = min(26.0, (STRIP_W - STRIP_LEFT - 20 - gap) / max(n, 1))
    base = STRIP_H - 18
    svg = Svg(f"{element_id}-runs", STRIP_W, STRIP_H, f"every {runs.noun}'s duration")
    svg.text(8, 16, f"{len(runs)} {runs.noun}{'' if len(runs) == 1 else 's'}", 'font-weight="600"')
    svg.text(8, 32, "click one to draw it", 'fill="#555" font-size="11"')
    median = runs.median_ns
    held_set, outliers = set(held), set(runs.outliers)
    x = float(STRIP_LEFT)
    for k in range(n):
        if k == runs.warmup and gap:
            x += gap
        h = max((base - 8) * float(durations[k]) / top, 1.0)
        fill = WARM if k < runs.warmup else FAR_RUN if k in outliers else RUN
        what = " (warm-up: left out of the per-run figures)" if k < runs.warmup else \
            f" (outlier: x{float(durations[k]) / median:.2f} the steady median)" if k in outliers else \
            f" (x{float(durations[k]) / median:.2f} the steady median)" if median > 0 else ""
        kept = "" if k in held_set else "; not held in this page"
        cls = "run" + (" warmup" if k < runs.warmup else "") + (" outlier" if k in outliers else "") + \
            ("" if k in held_set else " gone")
        svg.rect(x + 1, base - h, max(bar - 2, 0.6), h, fill, f"{runs.noun} {k + 1}: {_ms(float(durations[k]))}"
                 f"{what}{kept}", f'class="{cls}" data-run="{k}"')
        x += bar
    if runs.warmup:
        svg.text(STRIP_LEFT, base + 14, "warm-up", 'fill="#9d755d" font-size="11"')
    if median > 0 and len(runs) > runs.warmup:
        y = base - (base - 8) * median / top
        x0 = STRIP_LEFT + runs.warmup * bar + gap
        svg.line(x0, y, x, y, "#333", 'stroke-dasharray="4 3"')
        svg.text(x + 6, y + 4, f"median {_ms(median)}", 'font-size="11" fill="#333"')
    if len(runs) > n:
        svg.text(STRIP_LEFT, base + 14, f"the first {n} of {len(runs)} {runs.noun}s shown", 'font-size="11"')
    return svg.render()


def _held(held: int, total: int, noun: str) -> str:
    return f"it whole (1 {noun})" if total == 1 else f"{held} of {total} {noun}s"


def legend_html(colors: Mapping[str, str], gpu: bool, extra: Sequence[tuple[str, str]] = ()) -> str:
    """Swatches: each coloured op type, the rest, device kinds (GPU traces), and ``extra`` marks."""
    items = [(c, t) for t, c in colors.items()] + [(OTHER_COLOR, "other op types")]
    if gpu:
        items += [(c, f"kernel: {k}") for k, c in KIND_COLORS.items()]
    spans = "".join(f'<span class="key"><i style="background:{esc(c)}"></i>{esc(t)}</span>' for c, t in items)
    marks = "".join(f'<span class="key"><i class="{esc(cls)}"></i>{esc(t)}</span>' for cls, t in extra)
    return f'<div class="legend">{spans}{marks}</div>'


def timeline_section(element_id: str, title: str, runs: RunSet | None, data: Mapping[str, Any] | None,
                     colors: Mapping[str, str], intro: str = "") -> str:
    """The section, or a line saying there is nothing to place in time."""
    if runs is None or data is None:
        return section_html(f"{element_id}-section", title, '<p class="missing">no start times in this trace: '
                            "nothing to place on a timeline</p>")
    gpu = any(lane["gpu"] for lane in data["lanes"])
    held = data["runs"]["held"]
    text = (f"{runs.how}; {runs.noun} {runs.representative + 1} drawn (the steady {runs.noun} of median duration); "
            f"the page holds {_held(len(held), len(runs), runs.noun)}. Wheel: zoom about the pointer; drag or "
            "shift+wheel: pan; the overview: drag to pick a stretch; keys W/S zoom, A/D pan, 0 whole run; "
            "double-click: whole run. Hover a call for its full name; click it to select its layer in the table"
            + ("; a kernel's arrow comes from the call that launched it" if gpu else ""))
    if data.get("cut"):
        text += f"; {data['cut']} calls of the drawn {runs.noun} are beyond what the page holds and left out"
    marks = [("far", f"red top edge: a call x{FAR:g} its median or more")]
    if gpu:
        marks.append(("flow", "arrow: launch to kernel"))
    body = (f'<div class="tl" id="{esc(element_id)}"><div class="tl-strip chartbox">'
            f"{strip_svg(element_id, runs, held)}</div>"
            '<div class="tl-bar"><button type="button" data-act="out" title="zoom out">−</button>'
            '<button type="button" data-act="in" title="zoom in">+</button>'
            f'<button type="button" data-act="all">whole {esc(runs.noun)}</button> <span class="tl-view"></span></div>'
            '<div class="tl-box"><canvas class="tl-over" aria-label="overview of the drawn run"></canvas></div>'
            '<div class="tl-box"><canvas class="tl-main" tabindex="0" aria-label="timeline: calls in lanes">'
            "</canvas></div>"
            f"{legend_html(colors, gpu, marks)}</div>")
    return section_html(f"{element_id}-section", title, body, intro or text)
