"""The GPU section of a trace with device activity: which device, and Holistic Trace Analysis's views
beside the op-type chart — how the device's time went (idle, compute, non-compute), why it sat idle
(host wait, kernel wait, other), device time by kind of kernel, and per-kernel totals (a chart of the
largest, a sortable table of all).

The figures are :mod:`layerperf.analysis.gpu`'s and :mod:`layerperf.analysis.gpu_kernels`'s; this module
only draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from layerperf.analysis.gpu.idle import CAUSES, KERNEL_WAIT_NS, idle
from layerperf.analysis.gpu.kernel_type import kernel_types
from layerperf.analysis.gpu.source import Activities, total_ns
from layerperf.analysis.gpu.source import of as activities_of
from layerperf.analysis.gpu.temporal import temporal
from layerperf.calibration.device_peaks import TraceDevice
from layerperf.data.calls import Calls, KernelTable
from layerperf.data.fold import Folded
from layerperf.renderers.html.draw import Svg, clip, short_kernel
from layerperf.renderers.html.gantt import KIND_COLORS
from layerperf.renderers.html.page import Table, esc, facts_html, section_html, table_html
from layerperf.renderers.views.analyze import kernels_view
from layerperf.util import units

WIDTH = 1100
PART_COLORS = {"idle": "#e45756", "compute": "#4c78a8", "non-compute": "#f58518",
               "host wait": "#e45756", "kernel wait": "#eeca3b", "other": "#9d755d"}
TOP_KERNELS = 16
TOP_STEPS = 12  # steps drawn in the time split of a trace with more


def stacked_svg(element_id: str, title: str, rows: Sequence[tuple[str, Sequence[tuple[str, float]]]]) -> str:
    """One horizontal bar per row, split into its parts (ns), each part's share of the row written on it."""
    left, row_h = 170, 34
    svg = Svg(element_id, WIDTH, 40 + row_h * len(rows), title)
    svg.text(8, 14, title, 'fill="#555" class="statistic"')
    span = WIDTH - left - 30
    for i, (label, parts) in enumerate(rows):
        y, x = 24 + i * row_h, float(left)
        total = sum(v for _, v in parts) or 1.0
        svg.text(left - 8, y + 16, clip(label, left - 12), 'text-anchor="end"')
        for part, value in parts:
            w = span * value / total
            tip = f"{label}: {part} {units.duration_us(value / 1e3)} ({units.percent(value / total)})"
            svg.rect(x, y, w, 22, PART_COLORS.get(part, KIND_COLORS.get(part, "#bab0ac")), tip,
                     f'class="part" data-part="{esc(part)}"')
            if w > 70:
                svg.text(x + 4, y + 15, f"{part} {units.percent(value / total)}", 'fill="#fff" font-size="11"')
            x += w
    return svg.render()


def bars_svg(element_id: str, title: str, bars: Sequence[tuple[str, float, str, str]]) -> str:
    """Horizontal bars: (label, ns, colour, tooltip), the largest as wide as the chart allows."""
    left, right, row = 330, 200, 22
    svg = Svg(element_id, WIDTH, 34 + row * max(len(bars), 1), title)
    svg.text(8, 14, title, 'fill="#555" class="statistic"')
    top = max((b[1] for b in bars), default=0.0) or 1.0
    span = WIDTH - left - right
    total = sum(b[1] for b in bars) or 1.0
    for i, (label, ns, fill, tip) in enumerate(bars):
        y = 26 + i * row
        svg.text(left - 8, y + 13, clip(label, left - 12, 7.4), 'text-anchor="end"')
        svg.rect(left, y + 2, span * ns / top, row - 6, fill, tip, 'class="bar"')
        svg.text(left + span * ns / top + 6, y + 14, f"{units.duration_us(ns / 1e3)}  ({units.percent(ns / total)})",
                 'fill="#333"')
    return svg.render()


def _steps(calls: Calls | Folded) -> list[tuple[float, float]]:
    return [(float(w[0]), float(w[1])) for w in calls.meta.get("run_windows_ns") or []]


def temporal_svg(k: KernelTable | Activities, calls: Calls | Folded) -> str:
    result = temporal(k, _steps(calls))
    steps = list(result.steps)
    title = ("the device's time from its first activity to its last: idle (no activity on any stream), compute "
             "(computation kernels), non-compute (copies, sets, other)")
    if len(steps) > TOP_STEPS:  # a bar per step of a long trace would be a page of its own: the idlest, in order
        idlest = sorted(range(len(steps)), key=lambda i: -(steps[i].share(steps[i].idle_ns) or 0.0))[:TOP_STEPS]
        title += f"; the {TOP_STEPS} of its {len(steps)} steps with the largest idle share"
        steps = [steps[i] for i in sorted(idlest)]
    rows = [(b.label, [("idle", b.idle_ns), ("compute", b.compute_ns), ("non-compute", b.non_compute_ns)])
            for b in (result.whole, *steps)]
    return stacked_svg("gpu-temporal", title, rows)


def idle_svg(k: KernelTable | Activities) -> str:
    gaps = idle(k)
    lanes = list(dict.fromkeys((g.device, g.stream) for g in gaps))  # in the view's order: device, stream
    many = len({d for d, _ in lanes}) > 1
    rows = [(f"{d} stream {s}" if many else f"stream {s}",
             [(c, sum(g.idle_ns for g in gaps if (g.device, g.stream) == (d, s) and g.cause == c)) for c in CAUSES])
            for d, s in lanes]
    return stacked_svg("gpu-idle", f"idle time between activities, per stream: host wait (launched after the gap "
                       f"began), kernel wait (a gap under {units.duration_us(KERNEL_WAIT_NS / 1e3)}), other", rows)


def kinds_svg(k: KernelTable | Activities) -> str:
    bars = [(t.kind, t.total_ns, KIND_COLORS[t.kind],
             f"{t.kind}: {t.calls} activities, {units.duration_us(t.total_ns / 1e3)} "
             f"({units.percent(t.share)} of device time), mean {units.duration_us(t.mean_ns / 1e3)}")
            for t in kernel_types(k)]
    return bars_svg("gpu-kinds", "device time by kind of kernel (sum over activities)", bars)


def kernels_svg(rows: Sequence[Mapping[str, Any]]) -> str:
    shown = rows[:TOP_KERNELS]
    bars = [(short_kernel(str(r["name"])), float(r["total_us"]) * 1e3, "#4c78a8",
             f"{r['name']}\n{r['calls']} calls, {units.duration_us(r['total_us'])} "
             f"(mean {units.duration_us(r['mean_us'])}); launched by {r['launched_by']}")
            for r in shown]
    rest = rows[TOP_KERNELS:]
    if rest:
        ns = sum(float(r["total_us"]) for r in rest) * 1e3
        bars.append((f"{len(rest)} other kernels", ns, "#bab0ac", f"{len(rest)} other kernels (in the table below)"))
    return bars_svg("gpu-kernels", "device time per kernel (sum over its calls), largest first", bars)


def device_facts(device: TraceDevice, calls: Calls | Folded) -> list[tuple[str, str]]:
    """What the trace says of its device, and whose peaks rate its work."""
    props: Mapping[str, Any] = next((d for d in calls.meta.get("devices") or () if d.get("name") == device.name), {})
    out = [("device", device.label())]
    bits = []
    if props.get("numSms"):
        bits.append(f"{props['numSms']} SMs")
    if props.get("computeMajor") is not None:
        bits.append(f"compute capability {props['computeMajor']}.{props.get('computeMinor', 0)}")
    if props.get("totalGlobalMem"):
        bits.append(f"{units.binary(props['totalGlobalMem'])} memory")
    if bits:
        out.append(("device properties", ", ".join(bits)))
    p = device.peaks
    out.append(("device peaks", f"{p.model}: float32 {units.si(p.fp32_flops_per_s, 'FLOP/s')}, memory "
                                f"{units.si(p.bytes_per_s, 'B/s')} ({p.source}; dense)" if p is not None else
                "? (not among the GPUs whose published peaks layerperf lists: no ceilings, no % of peak)"))
    return out


def gpu_section(calls: Calls | Folded, device: TraceDevice) -> tuple[str, Table | None]:
    """The section's markup and its kernel table (None when the trace keeps no device activity); of a
    trace read whole or folded (its activities on disk)."""
    k = activities_of(calls.meta)
    facts = facts_html(device_facts(device, calls))
    if k is None:
        return section_html("gpu-section", "GPU", facts + '<p class="missing">no device activity in this trace</p>'), \
            None
    view = kernels_view(calls)
    section = view.sections[0]
    table = Table("kernels", replace(section, notes=()), noun="kernels", filtered=False, pinned="")
    total = total_ns(k)
    body = (facts
            + f'<p class="intro">{len(k)} device activities, {esc(units.duration_us(total / 1e3))} of device time '
            "(Holistic Trace Analysis's views: kinds of kernel by its name rules)</p>"
            + f'<div class="chartbox">{temporal_svg(k, calls)}</div>'
            + f'<div class="chartbox">{idle_svg(k)}</div>'
            + f'<div class="chartbox">{kinds_svg(k)}</div>'
            + f'<div class="chartbox">{kernels_svg(list(section.rows))}</div>'
            + f'<h3>every kernel</h3><div class="tablebox short">{table_html(table)}</div>')
    return section_html("gpu-section", "GPU: device time", body,
                        "the device the trace names and how its time went"), table
