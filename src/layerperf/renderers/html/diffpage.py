"""The side-by-side page of two traces: a headline computed as the cards and the table are, both summaries,
each op type's time in A and B, the per-node diff of ``layerperf diff`` (a node fused away on one side
shown as covered by the node it went into, not as "only in"), and both timelines to one time scale.

The headline's totals are the diff table's (the sum over nodes of each node's per-call statistic, named),
and each side's card "compared here" is the same figure: they agree by construction. Latency with the
profiler off, where both sides measured it, is a second headline of its own, named as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from layerperf.analysis import aggregate as analysis
from layerperf.analysis.matching import covers
from layerperf.analysis.summary import summary
from layerperf.data.fold import called_names
from layerperf.renderers.html import charts
from layerperf.renderers.html.build import generated, split_notes, timeline
from layerperf.renderers.html.draw import op_colors
from layerperf.renderers.html.facts import profile_facts, trace_facts, warnings_html
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
from layerperf.renderers.html.table import layer_table
from layerperf.renderers.view import Column
from layerperf.renderers.views.diff import diff_view, speedup, time_label
from layerperf.util import units

FUSED = Column("covered_by", "fused into", str, "left")


def covered(a: Source, b: Source, how: str, match: str) -> tuple[dict[str, str], dict[str, str]]:
    """Node names fused away on one side, each with the node of the other side that does its work:
    (B name -> A name, A name -> B name)."""
    na, nb, pairing = analysis.node_pairing(a.table, b.table, how=how, match=match)
    in_a, in_b = covers(na, nb, pairing)
    return ({nb[j].name: na[i].name for j, i in in_a.items()}, {na[i].name: nb[j].name for i, j in in_b.items()})


def _latency(src: Source) -> float | None:
    return summary(src.profile).get("latency_median_us") if src.profile is not None else None


def headline(totals: Mapping[str, Any], a: Source, b: Source, by: str, how: str, fused: int,
             modules: int = 0) -> list[tuple[str, str]]:
    """The page's headline: the table's totals, named; latency apart when both sides measured it."""
    what = "sum over nodes of each node's" if by == "name" else "sum over op types of their nodes'"
    out = [("compared", f"{time_label(by, how)}; totals: {what} {how} per call"),
           ("A, total", units.duration_us(totals["time_a_us"])), ("B, total", units.duration_us(totals["time_b_us"])),
           ("speedup A / B", f"{speedup(totals['speedup'])} (> 1: B is faster)" if totals["speedup"] else "?"),
           ("delta B - A", units.duration_us(totals["delta_us"]) if totals["delta_us"] >= 0 else
            "-" + units.duration_us(-totals["delta_us"]))]
    la, lb = _latency(a), _latency(b)
    if la and lb:
        out.append(("latency, profiler off (median)", f"A {units.duration_us(la)}, B {units.duration_us(lb)}: "
                                                      f"speedup {speedup(la / lb)} (whole runs, not the table's sum)"))
    only = f"{totals['only_in_a']} only in A, {totals['only_in_b']} only in B"
    said = ([f"{fused} of them fused into a node of the other side"] if fused else []) + \
        ([f"{modules} module{'' if modules == 1 else 's'} around others, which the other side does not run"]
         if modules else [])
    out.append(("nodes", only + (f" ({'; '.join(said)})" if said else "")))
    return out


def _card(src: Source, side: str, totals: Mapping[str, Any], how: str) -> list[tuple[str, str]]:
    runs = src.runs()
    rows = profile_facts(src, runs) if src.profile is not None else trace_facts(src, runs, None)
    return [(f"compared here ({how} per call, summed)", units.duration_us(totals[f"time_{side}_us"])), *rows]


def modules_around_others(src: Source) -> set[str]:
    """The names of a trace's nodes that are a module holding other nodes (``layer1`` of ``layer1.0.conv1``:
    torch's Sequential and blocks), whose own time is the module call's, not a layer's."""
    names = called_names(src.table)
    prefixes = {name[:i] for name in names for i, ch in enumerate(name) if ch == "."}
    return names & prefixes


def _rows(rows: Sequence[Mapping[str, Any]], shown: Sequence[Mapping[str, Any]],
          fused: tuple[dict[str, str], dict[str, str]], modules: tuple[set[str], set[str]]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows with ``covered_by``: for a node only in one trace, the node of the other that its work went into;
    a node only in one trace that is a module around others says so."""
    in_a, in_b = fused
    out_rows, out_shown = [], []
    for row, people in zip(rows, shown, strict=True):
        key, side = str(row["key"]), row["only_in"]
        by = in_a.get(key) if side == "B" else in_b.get(key) if side == "A" else None
        other = "A" if side == "B" else "B"
        module = by is None and key in (modules[1] if side == "B" else modules[0] if side == "A" else ())
        out_rows.append({**row, "covered_by": by})
        out_shown.append({**people, "covered_by": f"{other}: {by}" if by else "",
                          "only_in": f"{side} (fused)" if by else f"{side} (module)" if module else side})
    return out_rows, out_shown


def pair(a: Source, b: Source, *, match: str = "normalized", how: str = "mean", by: str = "name",
         order_by: str = "delta", top: int = 0) -> str:
    """A side-by-side page of two traces: the per-node (``by`` type: per op type) diff as ``layerperf diff``
    makes it with the same options; ``how``: the per-call statistic compared (default: the mean, as
    ``layerperf diff``'s), named in the headline, on each card and on the table."""
    view = diff_view(a.table, b.table, by=by, how=how, match=match, order_by=order_by, top=top)
    section = view.sections[0]
    totals = view.doc["totals"]
    fused = covered(a, b, how, match) if by == "name" else ({}, {})
    rows, shown = _rows(section.rows, section.people_rows, fused,
                        (modules_around_others(a), modules_around_others(b)) if by == "name" else (set(), set()))
    n_fused = sum(r["covered_by"] is not None for r in rows)
    n_modules = sum(str(p["only_in"]).endswith("(module)") for p in shown)
    columns = [*section.columns, FUSED] if n_fused else list(section.columns)
    by_type, _ = analysis.diff(a.table, b.table, by="type", how=how, match=match)
    colors = op_colors([t.op_type for t in charts.type_times(a.table)])
    warnings = [f"A: {w}" for w in split_notes(layer_table(a, None, None)[1])[1]] + \
               [f"B: {w}" for w in split_notes(layer_table(b, None, None)[1])[1]]
    sides = "".join(f"<div><h3>{side.upper()}: {esc(src.label)}</h3>{facts_html(_card(src, side, totals, how))}</div>"
                    for side, src in (("a", a), ("b", b)))
    body = (facts_html(headline(totals, a, b, by, how, n_fused, n_modules)) + f'<div class="side">{sides}</div>'
            + notes_html([n.text for n in section.notes]) + warnings_html(warnings))
    groups = [charts.family_of(r) if match == "normalized" else str(r.get("op_type") or r.get("op_type_b") or "")
              for r in rows]
    table = Table("diff", replace(section, rows=rows, shown=shown, columns=columns, notes=()), name_key="key",
                  groups=groups)
    parts = [
        section_html("summary", "Summary", body),
        section_html("breakdown-section", "Time by op type, A and B",
                     f'<div class="chartbox">{charts.paired_breakdown_svg(by_type, time_label("type", how))}</div>',
                     "click a bar to select exactly that op type (family) in the table"),
        section_html("diff-section", "Layers, A and B", filter_bar([table]) + f'<div class="tablebox">'
                     f"{table_html(table)}</div>", section.title or ""),
    ]
    timelines, data = _timelines(a, b, colors)
    return document(f"layerperf diff: {a.label} vs {b.label}", f"A = {a.table.meta.get('source')}, "
                    f"B = {b.table.meta.get('source')}; delta = B - A, speedup = A / B; {generated(a)}",
                    parts + timelines, [table],
                    {"kind": "diff", "a": a.table.meta.get("source"), "b": b.table.meta.get("source"),
                     "timelines": data})


def _timelines(a: Source, b: Source, colors: Mapping[str, str]) -> tuple[list[str], dict[str, Any]]:
    """A's and B's timelines drawn to one time scale, so that the longer run is the longer picture."""
    ra, rb = a.runs(), b.runs()
    spans = [float(r.durations_ns[r.representative]) for r in (ra, rb) if r is not None and len(r)]
    scale = max(spans, default=None)
    out, data = [], {}
    for src, runs, element_id, side in ((a, ra, "timeline", "A"), (b, rb, "timeline-b", "B")):
        html, doc = timeline(src, colors, runs, element_id, f"Timeline of {side}: {src.label}", scale)
        out.append(html)
        if doc is not None:
            data[element_id] = doc
    return out, data
