"""The report of one trace, and the side-by-side report of two: the page's parts from a Source.

Every figure comes from where the rest of layerperf computes it: the layer table is ``layerperf
profile``'s (a Profile) or ``layerperf analyze``'s (any other trace) with their columns, the summary
lines theirs, the op-type breakdown ``analyze --aggregate-by type``'s, the diff ``layerperf diff``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from layerperf.analysis import aggregate as analysis
from layerperf.analysis.aggregate import grand_total_ns
from layerperf.analysis.summary import summary, work_line
from layerperf.analysis.trace_runs import TraceRuns, find_runs
from layerperf.calibration import peaks as cal
from layerperf.calibration.peaks import Peaks
from layerperf.data.calls import Calls
from layerperf.data.metadata import Metadata
from layerperf.errors import LayerperfError
from layerperf.renderers import svg
from layerperf.renderers.files import write_atomic
from layerperf.renderers.html import charts, gantt
from layerperf.renderers.html.draw import op_colors
from layerperf.renderers.html.page import (
    Table,
    document,
    esc,
    facts_html,
    filter_bar,
    notes_html,
    section_html,
    table_html,
)
from layerperf.renderers.html.source import Source
from layerperf.renderers.view import Note, Section
from layerperf.renderers.views.analyze import analyze_view
from layerperf.renderers.views.diff import diff_view
from layerperf.renderers.views.profile import _backend_options, profile_view
from layerperf.renderers.views.profile import _threads as threads_line
from layerperf.util import units

if TYPE_CHECKING:
    from collections.abc import Callable


AUTO: Any = "auto"  # peaks: this machine's (or the profiled machine's) calibration, when there is one
MAX_ROWS = 5000  # layer table rows at most (the page stays quick to open)


# -- the parts a single report and a diff share ----------------------------------------------------
def _layer_section(src: Source, peaks: Peaks | None = None) -> tuple[Section, list[Note]]:
    """The layer table (every layer, ranked by self time) and the notes below it: profile's or analyze's,
    with their "% of peak" column when ``peaks`` are given."""
    if src.profile is not None:
        section = profile_view(src.profile, top=0, fmt="table", written={}, peaks=peaks).sections[0]
    else:
        section = analyze_view(src.calls, peaks=peaks).sections[0]
    return replace(section, notes=()), list(section.notes)


def _threads(src: Source) -> int | None:
    if src.profile is None:
        return None
    m = src.profile.measurement
    if m is not None and m.intra_op_threads:
        return m.intra_op_threads
    return src.profile.metadata.threads


def calibration(src: Source, peaks: Peaks | None | str) -> tuple[Peaks | None, str]:
    """The peaks to draw as ceilings and a line saying whose they are (or why there are none)."""

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


def _machine(meta: Metadata) -> str:
    m = meta.machine
    if m is None:
        return "?"
    mem = f", {units.binary(m.memory_bytes)}" if m.memory_bytes else ""
    return f"{m.cpu or '?'}, {m.cores or '?'} cores{mem}; {m.os or ''} {m.arch or ''}".strip()


def facts(src: Source) -> list[tuple[str, str]]:
    """The headline figures: what ran where, how long, how much work."""
    if src.profile is None:
        return _trace_facts(src)

    prof = src.profile
    s = summary(prof)
    meta = prof.metadata
    overhead = s.get("profiler_overhead")
    out = [
        ("model", meta.model.name),
        ("backend", f"{meta.backend} {meta.backend_version} ({meta.provider}); "
                    f"{_backend_options(meta)}"),
        ("machine", _machine(meta)),
        ("runs", f"{s['runs']} measured; {threads_line(prof, s)}"),
        ("latency (profiler off)", f"median {units.duration_us(s['latency_median_us'])}, "
                                   f"p90 {units.duration_us(s['latency_p90_us'])}"),
        ("profiled run", f"median {units.duration_us(s['profiled_median_us'] or s['run_median_us'])}"),
        ("profiler overhead", f"x{overhead:.3f}" if overhead else "?"),
        ("layers", f"{s['layers']}; sum of medians {units.duration_us(s['layers_sum_median_us'])}"),
        ("work per run", work_line(s)),
    ]
    if prof.counters is not None:
        out.append(("perf counters", ", ".join(prof.counters.events) or "?"))
    if prof.memory is not None:
        out.append(("memory", f"live peak {units.binary(prof.memory.peak_bytes)}, max allocated "
                              f"{units.binary(prof.memory.max_allocated_bytes)}"))
    return out


def _trace_facts(src: Source) -> list[tuple[str, str]]:
    calls, meta = src.calls, src.calls.meta
    found = find_runs(calls)
    runs = f"{found.count} ({found.how})" if found.count else "? (not in this trace)"
    self_us = grand_total_ns(calls) / 1e3
    return [
        ("trace", str(meta.get("source") or src.label)),
        ("format", src.format),
        ("events", f"{meta.get('events', '?')} events, {len(calls)} op calls, {len(calls.name.values)} ops"),
        ("runs", runs),
        ("total self time", _per_run(self_us, self_us, found, units.duration_us)),
        ("FLOPs", _flops_per_run(calls, found)),
        ("latency", "? (not in this trace)"),
        ("machine", "? (not in this trace)"),
    ]


def _per_run(whole: float, in_runs: float, found: TraceRuns, fmt: Callable[[float], str]) -> str:
    """A total of the trace per run when its runs are known (``in_runs``: the total over the calls inside
    them, over their number), else over the whole trace; saying which, as a layerperf trace's "per run"."""
    if not found.per_run:
        return f"{fmt(whole)} (the whole trace: {found.count or '?'} run{'' if found.count == 1 else 's'})"
    assert found.count is not None
    return f"{fmt(in_runs / found.count)} per run (mean of {found.count} runs); {fmt(whole)} over the whole trace"


def _flops_per_run(calls: Calls, found: TraceRuns) -> str:
    import numpy as np

    known = np.isfinite(calls.flops)
    if not known.any():
        return "? (not in this trace)"
    rows = np.concatenate(found.windows) if found.windows else np.arange(len(calls))
    whole, in_runs = float(np.nansum(calls.flops)), float(np.nansum(calls.flops[rows]))
    return (_per_run(whole, in_runs, found, lambda v: units.si(v, "FLOP"))
            + f"; counted on the {int(known.sum())} of {len(calls)} op calls whose FLOPs are known")


def _split(notes: Sequence[Note]) -> tuple[list[str], list[str]]:
    return [n.text for n in notes if n.kind != "warning"], [n.text for n in notes if n.kind == "warning"]


def _memory(src: Source) -> str:
    if src.profile is None or src.profile.memory is None:
        return ""

    drawn = svg.memory_timeline_svg(src.profile.memory, str(src.label)).decode("utf-8")
    # inline SVG needs no namespace (and the page holds no URL); the id is the page's
    drawn = re.sub(r"""\s+xmlns=(['"])[^'"]*\1""", "", drawn, count=1)
    drawn = drawn.replace("<svg ", "<svg id=\"memory\" class=\"chart\" ", 1)
    return section_html("memory-section", "Memory", f'<div class="chartbox">{drawn}</div>',
                        "live tensor bytes node by node, beside what the runtime held (layerperf memory)")


def _timeline(src: Source, colors: Mapping[str, str], element_id: str = "timeline", title: str = "Timeline",
              window: gantt.Window | None = None, scale_ns: float | None = None) -> str:
    window = window or gantt.one_run(src.calls, src.profile)
    if window is None:
        return section_html(f"{element_id}-section", title, '<p class="missing">no start times in this trace: '
                            "nothing to place on a timeline</p>")
    intro = (f"{window.label}; a lane per thread, a call nested in another drawn below it; hover a bar for the "
             "call, click it to filter the table")
    if window.cut:
        intro += f"; the first {len(window.rows)} calls drawn, {window.cut} more left out"
    drawn = gantt.gantt_svg(src.calls, window, colors, element_id, scale_ns)
    return section_html(f"{element_id}-section", title, f'<div class="chartbox">{drawn}</div>', intro)


def _colors(times: Sequence[charts.TypeTime]) -> dict[str, str]:
    return op_colors([t.op_type for t in times])


def _runs(src: Source) -> int | None:
    if src.profile is not None:
        return len(src.profile.runs) or None

    return find_runs(src.calls).count


# -- the pages -------------------------------------------------------------------------------------
def _capped(section: Section) -> tuple[Section, str]:
    """The table's first :data:`MAX_ROWS` rows (ranked by self time: the ones that matter), and a line saying
    how many were left out; a trace of a million distinct names would otherwise be a page no browser opens."""
    n = len(section.rows)
    if n <= MAX_ROWS:
        return section, ""
    shown = None if section.shown is None else section.shown[:MAX_ROWS]
    return (replace(section, rows=section.rows[:MAX_ROWS], shown=shown),
            f"the {MAX_ROWS} rows with the most self time of {n} are in the table and the roofline; "
            "`layerperf analyze` lists them all")


def single(src: Source, peaks: Peaks | None | str = AUTO) -> str:
    """The report of one trace as an HTML page."""
    found, cal_line = calibration(src, peaks)
    ceilings = charts.Ceilings.of(found, _threads(src))
    section, notes = _layer_section(src, found)
    section, cut = _capped(section)
    lines, warnings = _split(notes)
    times = charts.type_times(src.calls)
    colors = _colors(times)
    pts, missing = charts.points(section.rows)
    roof_intro = (f"each layer a point: FLOPs per byte moved against FLOP/s achieved (hollow: integer work, "
                  f"against its own int8 ceiling); {cal_line}")
    if missing:
        roof_intro += (f"; {missing} layers are not drawn: no arithmetic counted (data movement), or FLOPs, bytes "
                       "or rate unknown")
    table = Table("layers", section)
    summary = facts_html(facts(src)) + notes_html(lines) + _warnings_html(warnings)
    parts = [
        section_html("summary", "Summary", summary),
        section_html("breakdown-section", "Time by op type",
                     f'<div class="chartbox">{charts.breakdown_svg(times, colors, _runs(src))}</div>',
                     "self time summed over every call of the op type; click a bar to filter the table"),
        _timeline(src, colors),
        section_html("roofline-section", "Roofline",
                     f'<div class="chartbox">{charts.roofline_svg(pts, colors, ceilings)}</div>', roof_intro),
        _memory(src),
        section_html("layers-section", "Layers", filter_bar([table]) + f'<div class="tablebox">{table_html(table)}'
                     "</div>", "; ".join(x for x in (section.title, "click a column header to sort, again to "
                                                     "reverse", cut) if x)),
    ]
    return document(f"layerperf report: {src.label}", _generated(src), [p for p in parts if p], [table],
                    {"kind": "report", "source": src.calls.meta.get("source"), "format": src.format})


def pair(a: Source, b: Source, *, match: str = "normalized", how: str = "mean", by: str = "name",
         order_by: str = "delta", top: int = 0) -> str:
    """A side-by-side page of two traces: both summaries, op-type times paired, the per-node (``by`` type: per
    op type) diff as ``layerperf diff`` makes it with the same options."""

    view = diff_view(a.calls, b.calls, by=by, how=how, match=match, order_by=order_by, top=top)
    diff_section = view.sections[0]
    by_type, _ = analysis.diff(a.calls, b.calls, by="type", how=how, match=match)
    colors = _colors(charts.type_times(a.calls))
    warnings = [f"A: {w}" for w in _split(_layer_section(a)[1])[1]] + \
               [f"B: {w}" for w in _split(_layer_section(b)[1])[1]]
    sides = "".join(f"<div><h3>{side}: {_esc(src.label)}</h3>{facts_html(facts(src))}</div>"
                    for side, src in (("A", a), ("B", b)))
    summary = (f'<div class="side">{sides}</div>' + notes_html([n.text for n in diff_section.notes])
               + _warnings_html(warnings))
    table = Table("diff", replace(diff_section, notes=()), name_key="key")
    parts = [
        section_html("summary", "Summary", summary),
        section_html("breakdown-section", "Time by op type, A and B",
                     f'<div class="chartbox">{charts.paired_breakdown_svg(by_type, colors)}</div>',
                     "click a bar to filter the table"),
        section_html("diff-section", "Layers, A and B", filter_bar([table]) + f'<div class="tablebox">'
                     f"{table_html(table)}</div>", diff_section.title or ""),
        *_timelines(a, b, colors),
    ]
    return document(f"layerperf diff: {a.label} vs {b.label}", f"A = {a.calls.meta.get('source')}, "
                    f"B = {b.calls.meta.get('source')}; delta = B - A, speedup = A / B", parts, [table],
                    {"kind": "diff", "a": a.calls.meta.get("source"), "b": b.calls.meta.get("source")})


def _timelines(a: Source, b: Source, colors: Mapping[str, str]) -> list[str]:
    """A's and B's timelines drawn to one time scale, so that the longer run is the longer picture."""
    wa, wb = gantt.one_run(a.calls, a.profile), gantt.one_run(b.calls, b.profile)
    scale = max((gantt.span_ns(src.calls, w) for src, w in ((a, wa), (b, wb)) if w is not None), default=None)
    return [_timeline(a, colors, "timeline", f"Timeline of A: {a.label}", wa, scale),
            _timeline(b, colors, "timeline-b", f"Timeline of B: {b.label}", wb, scale)]


def _warnings_html(warnings: Sequence[str]) -> str:
    none = "" if warnings else "<p>none</p>"
    return "<h3>warnings</h3>" + notes_html(warnings, "warnings", "notes warnings") + none


def _esc(text: str) -> str:
    return esc(text)


def _generated(src: Source) -> str:
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = src.calls.meta.get("source") or src.label
    return f"{where} ({src.format}); page made {made} by layerperf"


def write(html: str | bytes, path: str | Path) -> Path:
    """Write the page whole or not at all."""

    data = html.encode("utf-8") if isinstance(html, str) else html
    def put(f: IO[bytes]) -> None:
        f.write(data)

    return write_atomic(Path(path), put)
