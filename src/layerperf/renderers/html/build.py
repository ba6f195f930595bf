"""The report of one trace: the page's parts from a Source.

Every figure comes from where the rest of layerperf computes it: the layer table is ``layerperf
profile``'s (a Profile) or ``layerperf analyze``'s (any other trace), the summary lines theirs, the GPU
views :mod:`layerperf.analysis.gpu`'s. Each view names its statistic. A trace that ran on a GPU is rated
against that GPU's published peaks (when listed), never this machine's CPU calibration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from layerperf.calibration import peaks as cal
from layerperf.calibration.device_peaks import TraceDevice, trace_device, unrated
from layerperf.calibration.peaks import Peaks
from layerperf.errors import LayerperfError
from layerperf.renderers import svg
from layerperf.renderers.files import write_atomic
from layerperf.renderers.html import charts, counters, facts, gantt
from layerperf.renderers.html.charts import Chart
from layerperf.renderers.html.draw import op_colors
from layerperf.renderers.html.gpu import gpu_section
from layerperf.renderers.html.page import document, filter_bar, notes_html, section_html, table_html
from layerperf.renderers.html.roofline import Ceilings, points, roofline_svg
from layerperf.renderers.html.runs import RunSet
from layerperf.renderers.html.source import Source
from layerperf.renderers.html.table import layer_table
from layerperf.renderers.html.timeline_part import legend_html, timeline_section
from layerperf.renderers.view import Note
from layerperf.util import units

AUTO: Any = "auto"  # peaks: this machine's (or the profiled machine's) calibration, when there is one


def _threads(src: Source) -> int | None:
    if src.profile is None:
        return None
    m = src.profile.measurement
    if m is not None and m.intra_op_threads:
        return m.intra_op_threads
    return src.profile.metadata.threads


def calibration(src: Source, peaks: Peaks | None | str) -> tuple[Peaks | None, str]:
    """The CPU peaks to draw as ceilings and a line saying whose they are (or why there are none)."""

    if peaks is not AUTO:
        assert not isinstance(peaks, str)
        return peaks, ("calibrated peaks given" if peaks is not None else "no calibration given")
    machine = src.profile.metadata.machine if src.profile is not None else None
    named = machine is not None and bool(machine.cpu and machine.cores)
    try:
        found = cal.for_machine(machine.to_json() if machine is not None and named else None)
    except (LayerperfError, OSError, ValueError) as exc:  # a damaged calibration costs the ceilings, not the page
        return None, f"calibration unreadable ({exc}): run `layerperf calibrate` again"
    if machine is not None and named:
        if found is None:
            return None, (f"{machine.cpu} ({machine.cores} cores) was never calibrated: run "
                          "`layerperf calibrate` on that machine to draw its peaks as ceilings")
        quick = " (a --quick calibration: small sizes, not this machine's peaks)" if found.quick else ""
        return found, f"ceilings: calibration of {machine.cpu}, {machine.cores} cores{quick}"
    if found is None:
        return None, "this machine was never calibrated: run `layerperf calibrate` to draw its peaks as ceilings"
    quick = "; a --quick calibration: small sizes, not this machine's peaks" if found.quick else ""
    return found, (f"ceilings: this machine's calibration ({found.cpu_model}, {found.cores} cores{quick}); the "
                   "trace does not say which machine it ran on")


def device_ceilings(device: TraceDevice, peaks: Peaks | None | str) -> tuple[Ceilings | None, str]:
    """A GPU trace's ceilings: its device's published peaks, never a CPU calibration (one given is set aside,
    and the note says so)."""
    if peaks is None:
        return None, "no ceilings asked for"
    aside = (f"the calibration given is of a CPU, not {device.label()}: set aside; "
             if peaks is not AUTO else "")
    if device.peaks is None:
        return None, f"{aside}no ceilings: {device.label()} is not among the GPUs whose published peaks layerperf lists"
    return (Ceilings.of_device(device.peaks, str(device.name)),
            f"{aside}ceilings: the published dense peaks of {device.label()} ({device.peaks.source}); points rated "
            "over device time only")


def split_notes(notes: Sequence[Note]) -> tuple[list[str], list[str]]:
    return [n.text for n in notes if n.kind != "warning"], [n.text for n in notes if n.kind == "warning"]


def _memory(src: Source) -> str:
    if src.profile is None or src.profile.memory is None:
        return ""
    parts = []
    for element_id, draw in (("memory", svg.memory_timeline_svg), ("memory-flow", svg.flow_svg)):
        drawn = draw(src.profile.memory, str(src.label)).decode("utf-8")
        # inline SVG needs no namespace (and the page holds no URL); the id is the page's
        drawn = re.sub(r"""\s+xmlns=(['"])[^'"]*\1""", "", drawn, count=1)
        drawn = drawn.replace("<svg ", f'<svg id="{element_id}" class="chart" ', 1)
        parts.append(f'<div class="chartbox">{drawn}</div>')
    return section_html("memory-section", "Memory", parts[0] + "<h3>tensor memory by address over time</h3>"
                        + parts[1], "live tensor bytes node by node, beside what the runtime held; then each "
                        "tensor placed at its address (best fit) from the node that makes it to its last use "
                        "(layerperf memory; memory_flow.svg)")


def timeline(src: Source, colors: Mapping[str, str], runs: RunSet | None, element_id: str = "timeline",
             title: str = "Timeline", scale_ns: float | None = None) -> tuple[str, dict[str, Any] | None]:
    """The timeline section and its data (None when the trace has no start times)."""
    medians = src.digest.medians_incl_ns if src.digest is not None else None
    data = None if runs is None else gantt.timeline_data(src.calls, runs, colors, counters.tracks(src.profile),
                                                         scale_ns, medians)
    return timeline_section(element_id, title, runs, data, colors), data


def _runs(src: Source) -> int | None:
    if src.profile is not None:
        return len(src.profile.runs) or None
    return None


def breakdown(src: Source, device: TraceDevice | None, runs: RunSet | None) -> tuple[list[charts.TypeTime], Chart]:
    """The op-type chart's bars and how it reads (its statistic named)."""
    calls = src.table
    if device is not None and calls.has_device:
        return (charts.type_times(calls, device=True),
                Chart("breakdown", "device time the op type launched itself, summed over the trace (ranked by device "
                      "time; CPU time is in the table)", calls="calls"))
    if src.profile is not None:
        n = _runs(src) or 1
        return (charts.profile_type_times(src.profile.table(), n),
                Chart("breakdown", "per run: the sum over the op type's layers of each layer's median self time per "
                      "call x its calls per run (the table's statistic; the bars add up to the summed medians)",
                      per="per run", calls="calls"))
    n = src.digest.calls if src.digest is not None else len(src.calls)
    return (charts.type_times(calls),
            Chart("breakdown", f"self time summed over all {n:,} calls of the trace ("
                  f"{units.count(len(runs), 'run') if runs else '? runs'}, warm-up included; the table's statistic)",
                  calls="calls"))


def single(src: Source, peaks: Peaks | None | str = AUTO) -> str:
    """The report of one trace as an HTML page."""
    device = trace_device(src.table.meta) if src.profile is None else None
    if device is not None:
        ceilings, cal_line = device_ceilings(device, peaks)
        table_peaks: Peaks | None | str = peaks
    else:
        why_not = unrated(src.table.meta) if src.profile is None else None
        found, cal_line = calibration(src, None if why_not else peaks)
        cal_line = why_not or cal_line
        ceilings, table_peaks = Ceilings.of(found, _threads(src)), found
    table, notes, cut = layer_table(src, table_peaks, ceilings)  # type: ignore[arg-type]
    lines, warnings = split_notes(notes)
    runs = src.runs()
    times, chart = breakdown(src, device, runs)
    # colours for the op types that matter most in the chart, then (a GPU trace) in CPU time
    ranked = [t.op_type for t in times] + ([t.op_type for t in charts.type_times(src.table)] if device else [])
    colors = op_colors(list(dict.fromkeys(ranked)))
    pts, missing = points(table.section.rows)
    roof_intro = ("each layer a point: FLOPs per byte moved against FLOP/s achieved (hollow: integer work, against "
                  f"its own int8 ceiling); left of its roof's ridge it is memory-bound, right of it compute-bound; "
                  f"{cal_line}")
    if missing:
        roof_intro += (f"; {missing} layers are not drawn: no arithmetic counted (data movement), or FLOPs, bytes "
                       "or rate unknown")
    summary = (facts.facts_html(src, runs, device) + notes_html(lines) + facts.warnings_html(warnings))
    timeline_html, timeline_data = timeline(src, colors, runs)
    gpu_html, kernels = gpu_section(src.table, device) if device is not None else ("", None)
    parts = [
        section_html("summary", "Summary", summary),
        section_html("breakdown-section", "Time by op type", charts.breakdown_html(times, colors, chart),
                     "click a bar to select exactly that op type in the table; the last bar folds the smaller op "
                     "types: click it to show them all"),
        gpu_html,
        timeline_html,
        section_html("roofline-section", "Roofline", f'<div class="chartbox">{roofline_svg(pts, colors, ceilings)}'
                     f"</div>{legend_html(colors, False)}", roof_intro),
        _memory(src),
        section_html("layers-section", "Layers", filter_bar([table]) + f'<div class="tablebox">{table_html(table)}'
                     "</div>", "; ".join(x for x in (table.section.title, "each header says its statistic (hover "
                                                     "it for more); click a header to sort, again to reverse", cut)
                                         if x)),
    ]
    tables = [table] + ([kernels] if kernels is not None else [])
    return document(f"layerperf report: {src.label}", generated(src), [p for p in parts if p], tables,
                    {"kind": "report", "source": src.calls.meta.get("source"), "format": src.format,
                     "timelines": {"timeline": timeline_data} if timeline_data else {}})


def generated(src: Source) -> str:
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = src.calls.meta.get("source") or src.label
    return f"{where} ({src.format}); page made {made} by layerperf"


def write(html: str | bytes, path: str | Path) -> Path:
    """Write the page whole or not at all."""

    data = html.encode("utf-8") if isinstance(html, str) else html

    def put(f: IO[bytes]) -> None:
        f.write(data)

    return write_atomic(Path(path), put)

