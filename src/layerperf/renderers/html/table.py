"""The page's layer table: ``layerperf profile``'s (a Profile) or ``layerperf analyze``'s (any other trace)
columns, each header naming its statistic, with what the page adds: the spread of a layer's calls
(mean, p90, max, and max over median, marked when far), the counters with their units next to the
median time (in view without scrolling), and where the layer sits under its own roof (memory- or
compute-bound)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from layerperf.calibration.peaks import Peaks
from layerperf.data import figures
from layerperf.data.calls import Calls, group_codes
from layerperf.data.fold import Folded
from layerperf.data.table import extra_columns
from layerperf.renderers.html.counters import counter_columns
from layerperf.renderers.html.page import Table
from layerperf.renderers.html.roofline import Ceilings, bound_of
from layerperf.renderers.html.runs import FAR
from layerperf.renderers.html.source import Source
from layerperf.renderers.view import Column, Note, Section
from layerperf.renderers.views.analyze import analyze_view
from layerperf.renderers.views.profile import profile_view
from layerperf.util import units

MAX_ROWS = 5000  # layer table rows at most (the page stays quick to open)
SPREAD = Column("spread", "max / median", lambda v: f"x{v:.2f}")
BOUND = Column("bound", "bound", str, "left")
PER_CALL = (Column("mean_us", "mean", units.duration_us), Column("p90_us", "p90", units.duration_us),
            Column("max_us", "max", units.duration_us))
HINTS = {
    "median_us": "self time: the median of the layer's self time per call, over its calls in every measured run",
    "time_us": "self time: the sum over all the op's calls in the trace (its own time, nested calls excluded)",
    "call_median_us": "the median of one call's self time",
    "mean_us": "the mean of one call's self time", "p90_us": "the 90th percentile of one call's self time",
    "max_us": "the longest call's self time",
    "spread": f"the longest call over the median call; marked red at x{FAR:g} or more",
    "share": "the layer's share of all measured layer time (its calls x their mean)",
    "bound": "memory-bound: left of the ridge of its own roof (the bandwidth slope); compute-bound: right of it",
    "device_us": "device time of the kernels the op launched itself",
    "device_incl_us": "device time of the kernels the op and the ops nested in it launched",
}


def _insert(columns: list[Column], after: str, new: Sequence[Column]) -> list[Column]:
    keys = [c.key for c in columns]
    at = keys.index(after) + 1 if after in keys else len(columns)
    return [*columns[:at], *new, *columns[at:]]


def _spread(row: Mapping[str, Any], median_key: str) -> float | None:
    med, top = row.get(median_key), row.get("max_us")
    return top / med if isinstance(med, int | float) and isinstance(top, int | float) and med > 0 else None


def _far(row: Mapping[str, Any]) -> bool:
    value = row.get("spread")
    return isinstance(value, float) and value >= FAR


def _per_call(calls: Calls | Folded) -> dict[str, dict[str, float | None]]:
    """Per op name: the median, mean, p90 and max of one call's self time (µs); of every call, or folded
    (medians and p90 within the sketch's error)."""
    if isinstance(calls, Folded):
        tables = {key: calls.table("name", how) for key, how in (("call_median_us", "median"), ("mean_us", "mean"),
                                                                  ("p90_us", "p90"), ("max_us", "max"))}
        names = tables["max_us"].name.tolist()
        return {n: {k: None if (x := float(t.dur_ns[i]) / 1e3) != x else x for k, t in tables.items()}
                for i, n in enumerate(names)}
    codes = group_codes(calls, "name")
    g = figures.groups(codes)
    stats = {key: figures.grouped(calls.dur_ns, g, stat) / 1e3 for key, stat in
             (("call_median_us", "median"), ("mean_us", "mean"), ("p90_us", "p90"), ("max_us", "max"))}
    first: dict[int, int] = {}
    for row, code in enumerate(codes.tolist()):
        first.setdefault(code, row)
    return {calls.name[row]: {k: None if (x := float(v[code])) != x else x for k, v in stats.items()}
            for code, row in first.items()}


def _capped(section: Section) -> tuple[Section, str]:
    """The table's first :data:`MAX_ROWS` rows (ranked: the ones that matter), and a line saying how many
    were left out; a trace of a million distinct names would otherwise be a page no browser opens."""
    n = len(section.rows)
    if n <= MAX_ROWS:
        return section, ""
    shown = None if section.shown is None else section.shown[:MAX_ROWS]
    return (replace(section, rows=section.rows[:MAX_ROWS], shown=shown),
            f"the {MAX_ROWS} rows with the most self time of {n} are in the table and the roofline; "
            "`layerperf analyze` lists them all")


def _name_first(columns: list[Column]) -> list[Column]:
    """The name and type first (the name pinned as the table scrolls sideways), then the figures."""
    lead = [c for key in ("name", "op_type") for c in columns if c.key == key]
    return lead + [c for c in columns if c not in lead]


def _with(section: Section, rows: list[dict[str, Any]], columns: list[Column]) -> Section:
    shown = None
    if section.shown is not None:
        shown = [{**s, **{k: r[k] for k in ("spread", "bound") if k in r}} for s, r in zip(section.shown, rows,
                                                                                       strict=True)]
    return replace(section, rows=rows, columns=_name_first(columns), shown=shown)


def _profile_section(src: Source, peaks: Peaks | None, ceilings: Ceilings | None) -> Section:
    prof = src.profile
    assert prof is not None
    section = profile_view(prof, top=0, fmt="table", written={}, peaks=peaks).sections[0]
    extra = set(extra_columns(prof))
    rows = [{**r, "spread": _spread(r, "median_us"), "bound": bound_of(r, ceilings)} for r in section.rows]
    columns = [replace(c, header="self time (median)") if c.key == "median_us" else c
               for c in section.columns if c.key not in extra]
    events = prof.counters.events if prof.counters is not None else {}
    counters = counter_columns(list(extra), list(events), events, rows)
    # the counters (medians per run) beside the median time, in view before the spread of the calls
    columns = _insert(columns, "median_us", [*(c.column() for c in counters), *PER_CALL, SPREAD])
    if ceilings is not None:
        columns = _insert(columns, "pct_of_peak" if "pct_of_peak" in [c.key for c in columns] else "flops_per_s",
                          [BOUND])
    return _with(section, rows, columns)


def _trace_section(src: Source, peaks: Peaks | None, ceilings: Ceilings | None) -> Section:
    calls = src.table
    gpu = calls.has_device
    section = analyze_view(calls, peaks=peaks, order_by="device" if gpu else None).sections[0]
    per = _per_call(calls)
    rows = []
    for r in section.rows:
        stats = per.get(str(r.get("name")), {})
        row = {**r, **stats}
        rows.append({**row, "spread": _spread(row, "call_median_us"), "bound": bound_of(row, ceilings)})
    labels = list(calls.counter_labels if isinstance(calls, Folded) else calls.counters)
    counters = counter_columns(labels, labels, {}, rows)
    columns = [replace(c, header="self time (sum)") if c.key == "time_us" else c for c in section.columns
               if c.key not in labels]
    per_call = [Column("call_median_us", "median", units.duration_us), *PER_CALL, SPREAD]
    columns = _insert(columns, "calls", [*per_call, *(c.column() for c in counters)])
    if ceilings is not None:
        columns = _insert(columns, "pct_of_peak" if "pct_of_peak" in [c.key for c in columns] else "flops_per_s",
                          [BOUND])
    return _with(section, rows, columns)


def layer_table(src: Source, peaks: Peaks | None, ceilings: Ceilings | None) -> tuple[Table, list[Note], str]:
    """The layer table (every layer, ranked), the notes below it, and a line saying which rows were left
    out (empty when none)."""
    section = _profile_section(src, peaks, ceilings) if src.profile is not None else _trace_section(src, peaks,
                                                                                                    ceilings)
    notes = list(section.notes)
    section, cut = _capped(replace(section, notes=()))
    events = src.profile.counters.events if src.profile is not None and src.profile.counters is not None else {}
    hints = {**HINTS, **{c.key: c.hint for c in counter_columns([c.key for c in section.columns], list(events),
                                                                 events, section.rows)}}
    return Table("layers", section, hints=hints, marked={"spread": _far, "max_us": _far}), notes, cut


def far_calls(calls: Calls) -> int:
    """How many calls took :data:`FAR` times their op's median or more (what the timeline marks)."""
    g = figures.groups(group_codes(calls, "name"))
    med = figures.grouped(calls.incl_ns, g, "median")[g.inverse]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = calls.incl_ns / med
    return int(np.sum(ratio >= FAR))
