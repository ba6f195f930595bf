"""The timeline of one run: a lane per thread, each call a bar, calls nested in another drawn below it.

One run, not all of them: a hundred runs of a few hundred layers would be tens of thousands of
elements for the browser to lay out, and the runs look alike. A layerperf Profile says where its runs
are (the run of median duration is drawn); a foreign trace's runs are its ProfilerStep events, or else
the periods of its op sequence (:mod:`layerperf.analysis.trace_runs`; the run of median length is drawn); a
trace of one run, or whose calls cannot be split into the runs it says it holds, is drawn whole (its
first calls, up to :data:`MAX_SPANS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from layerperf.analysis.trace_runs import find_runs
from layerperf.data.calls import Calls
from layerperf.data.profile import Profile
from layerperf.renderers.html.draw import Svg, clip, color, time_label, time_ticks
from layerperf.renderers.html.page import esc
from layerperf.renderers.svg import shade
from layerperf.util import units

if TYPE_CHECKING:
    pass

MAX_SPANS = 3000  # bars drawn at most; a run with more is cut, and the page says so
WIDTH = 1100  # px, at least
PX_PER_CALL, MAX_WIDTH = 5, 6000
LEFT, RIGHT, BAR_H, LANE_GAP = 150, 20, 15, 10


@dataclass(frozen=True, slots=True)
class Window:
    """The rows of one run (indices into the table, by start time), which run it is, and what was left out."""

    rows: np.ndarray
    label: str
    cut: int = 0  # calls of the run left out (beyond MAX_SPANS)
    start_ns: float | None = None  # where the run starts and ends, when the trace says (a layerperf run)
    end_ns: float | None = None


def _median_index(durations: list[float]) -> int:
    order = sorted(range(len(durations)), key=lambda i: durations[i])
    return order[(len(order) - 1) // 2]


def one_run(calls: Calls, profile: Profile | None) -> Window | None:
    """The calls of one representative run, or None when the table has no start times."""
    if not calls.has_times:
        return None
    if profile is not None and profile.runs and len(calls) == sum(len(r.spans) for r in profile.runs):
        durs = [float(r.dur_ns) for r in profile.runs]
        k = _median_index(durs)
        start = sum(len(r.spans) for r in profile.runs[:k])
        rows = np.arange(start, start + len(profile.runs[k].spans))
        label = f"run {k + 1} of {len(profile.runs)} (the one of median duration, {units.duration_us(durs[k] / 1e3)})"
        run = profile.runs[k]
        return replace(_cut(calls, rows, label), start_ns=float(run.start_ns), end_ns=float(run.start_ns + run.dur_ns))
    return _foreign_run(calls)


def _foreign_run(calls: Calls) -> Window:
    """A foreign trace's run of median length (:func:`layerperf.analysis.trace_runs.find_runs`), or the whole trace."""

    found = find_runs(calls)
    timed = np.flatnonzero(~np.isnan(calls.ts_ns))
    if len(found.windows) < 2:
        whole = (found.windows[0] if found.windows else timed)
        if found.count == 1 and whole.size == timed.size:
            return _cut(calls, timed, "the whole trace (it holds one run)")
        if found.count == 1:
            return _cut(calls, whole, f"the one run ({found.how})")
        return _cut(calls, timed, f"the whole trace ({found.count} runs: {found.how})")
    if found.bounds_ns:
        spans = list(found.bounds_ns)
    else:  # a run lasts from its first call's start to its last call's end
        ends = [calls.ts_ns[w] + np.nan_to_num(calls.incl_ns[w], nan=0.0) for w in found.windows]
        spans = [(float(calls.ts_ns[w].min()), float(np.nanmax(e))) for w, e in zip(found.windows, ends, strict=True)]
    k = _median_index([e - s for s, e in spans])
    what = "step" if found.bounds_ns else "run"
    label = (f"{what} {k + 1} of {found.count}, the one of median length "
             f"({units.duration_us((spans[k][1] - spans[k][0]) / 1e3)}; runs: {found.how})")
    window = _cut(calls, found.windows[k], label)
    return replace(window, start_ns=spans[k][0], end_ns=spans[k][1]) if found.bounds_ns else window


def _cut(calls: Calls, rows: np.ndarray, label: str) -> Window:
    rows = rows[np.argsort(calls.ts_ns[rows], kind="stable")]
    if rows.size > MAX_SPANS:
        return Window(rows[:MAX_SPANS], label, int(rows.size - MAX_SPANS))
    return Window(rows, label)


def _depths(ts: np.ndarray, end: np.ndarray) -> list[int]:
    """Each call's nesting depth within its lane: how many calls still open when it starts (calls given by
    start, the longer first at equal starts, so a parent comes before its children)."""
    depth: list[int] = []
    open_ends: list[float] = []
    for t, e in zip(ts.tolist(), end.tolist(), strict=True):
        while open_ends and open_ends[-1] <= t:
            open_ends.pop()
        depth.append(len(open_ends))
        open_ends.append(e)
    return depth


def extent_ns(calls: Calls, window: Window) -> tuple[float, float]:
    """Where the window starts and ends: its run's extent where known, else its calls' first start and last end."""
    rows = window.rows
    ts = calls.ts_ns[rows]
    first = float(ts.min()) if rows.size else 0.0
    last = float((ts + np.nan_to_num(calls.incl_ns[rows], nan=0.0)).max()) if rows.size else first
    start = first if window.start_ns is None else min(window.start_ns, first)
    end = last if window.end_ns is None else max(window.end_ns, last)
    return start, end


def span_ns(calls: Calls, window: Window) -> float:
    """How long the window lasts."""
    start, end = extent_ns(calls, window)
    return max(end - start, 1.0)


def gantt_svg(calls: Calls, window: Window, colors: Mapping[str, str], element_id: str = "timeline",
                 scale_ns: float | None = None) -> str:
    """The window's calls as bars; ``scale_ns``: the time the width stands for (two timelines drawn to one
    scale), the window's own span when None."""
    rows = window.rows
    ts = calls.ts_ns[rows]
    dur = np.nan_to_num(calls.incl_ns[rows], nan=0.0)
    t0 = extent_ns(calls, window)[0]
    span = max(scale_ns or 0.0, span_ns(calls, window))
    lanes: dict[tuple[int, int], list[int]] = {}
    for j, (p, t) in enumerate(zip(calls.pid[rows].tolist(), calls.tid[rows].tolist(), strict=True)):
        lanes.setdefault((p, t), []).append(j)
    placed: list[tuple[int, int, int]] = []  # (row position, lane, depth)
    lane_depth: list[int] = []
    for lane, members in enumerate(lanes.values()):
        idx = np.asarray(members)
        order = idx[np.lexsort((-dur[idx], ts[idx]))]
        depths = _depths(ts[order], ts[order] + dur[order])
        placed += [(int(j), lane, d) for j, d in zip(order.tolist(), depths, strict=True)]
        lane_depth.append(max(depths, default=0) + 1)
    lane_top = np.concatenate([[0], np.cumsum([d * BAR_H + LANE_GAP for d in lane_depth])]) + 34
    height = float(lane_top[-1]) + 10
    # a run of many calls gets a wider picture (the page scrolls it) rather than bars too thin to tell apart
    width = float(min(max(WIDTH, PX_PER_CALL * rows.size), MAX_WIDTH))
    svg = Svg(element_id, width, height, "timeline of one run")
    x0, x1 = LEFT, width - RIGHT

    def sx(t: float) -> float:
        return x0 + (t - t0) / span * (x1 - x0)

    step, unit = time_ticks(span)
    for k in range(int(span // step) + 1):
        x = sx(t0 + k * step)
        svg.line(x, 26, x, height - 6, "#eee")
        svg.text(x, 20, time_label(k * step, unit), 'text-anchor="middle" fill="#555" font-size="11"')
    for lane, ((pid, tid), depth) in enumerate(zip(lanes, lane_depth, strict=True)):
        y = float(lane_top[lane])
        svg.rect(0, y - 2, width, depth * BAR_H + 4, "#f6f6f8" if lane % 2 == 0 else "#ffffff")
        who = ("thread ?" if tid < 0 else f"thread {tid}") + ("" if pid < 0 or len({p for p, _ in lanes}) < 2
                                                              else f" (pid {pid})")
        svg.text(8, y + 11, clip(who, LEFT - 12))
    names, types = calls.name, calls.op_type
    for n, (j, lane, depth) in enumerate(placed):
        row = int(rows[j])
        x, w = sx(float(ts[j])), float(dur[j]) / span * (x1 - x0)
        y = float(lane_top[lane]) + depth * BAR_H
        name, op = names[row], types[row]
        title = (f"{name} ({op}): {units.duration_us(float(dur[j]) / 1e3)}, starts at "
                 f"{units.duration_us((float(ts[j]) - t0) / 1e3)}" + (f", nested {depth} deep" if depth else ""))
        svg.add(f'<g class="span" data-name="{esc(name)}"><title>{esc(title)}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.6):.1f}" height="{BAR_H - 2}" '
                f'fill="{shade(color(dict(colors), op), n)}" stroke="#fff" stroke-width="0.3"/>'
                + (f'<text x="{x + 2:.1f}" y="{y + 10.5:.1f}" font-size="10" fill="#111">{esc(label)}</text>'
                   if (label := clip(name, w - 4, 5.8)) else "") + "</g>")
    return svg.render()
