"""Views of lists: the backends (runtimes), the perf events, the built-in models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layerperf import backends
from layerperf.backends.base import flag_name, option_fields
from layerperf.renderers.view import KEEP, Column, Note, Section, View
from layerperf.renderers.views.columns import name_column, prose, text

BACKEND_COLUMNS = (text("name", "backend", priority=KEEP), text("version", "version"),
                   text("usable", "usable here", priority=KEEP), prose("reason", "why not", 1),
                   prose("options", "its flags", 3), prose("summary", "what it measures", 3))
EVENT_COLUMNS = (name_column("name", "event"), text("ok", "counts here", priority=KEEP), prose("reason", "why not"))
PFM_COLUMNS = (text("pmu", "pmu", priority=3), name_column("name", "libpfm4 event"),
               prose("description", "description"))
MODEL_COLUMNS = (Column("name", "model", str, "left", width=14), text("description", "description"))


def backend_rows() -> list[dict[str, Any]]:
    """Every registered backend: its version here or why it cannot run, its model suffixes and flags."""

    out = []
    for name in backends.names():
        backend = backends.get(name)
        avail = backend.availability()
        out.append({"name": name, "usable": avail.usable, "version": avail.version, "reason": avail.reason,
                    "default": name == backends.DEFAULT, "model_suffixes": list(backend.model_suffixes),
                    "options": [flag_name(f.name) for f in option_fields(backend.options_type)
                                if f.metadata.get("flag")],
                    "summary": backend.summary})
    return out


def backends_view(rows: Sequence[Mapping[str, Any]]) -> View:
    shown = [{**r, "usable": "yes" if r["usable"] else "no", "options": " ".join(r["options"]),
              "reason": r["reason"] or "", "name": r["name"] + (" (default)" if r["default"] else "")}
             for r in rows]
    section = Section(columns=BACKEND_COLUMNS, rows=rows, shown=shown, title="backends")
    return View(sections=(section,), doc={"backends": list(rows)})


def events_view(probes: Sequence[Any], pfm_events: Sequence[Mapping[str, Any]], pfm_installed: bool) -> View:
    """The perf events tried here (``probes``: name, ok, reason), and libpfm4's events when listed."""
    rows = [p._asdict() for p in probes]
    shown = [{"name": p.name, "ok": "yes" if p.ok else "no", "reason": p.reason} for p in probes]
    ok = sum(p.ok for p in probes)
    pfm = "installed" if pfm_installed else "not installed (apt-get install libpfm4)"
    sections = [Section(columns=EVENT_COLUMNS, rows=rows, shown=shown, title="perf events (tried on this machine now)",
                        notes=(Note(f"{ok} of {len(probes)} events open here. libpfm4: {pfm}"),))]
    if pfm_events:
        sections.append(Section(columns=PFM_COLUMNS, rows=pfm_events))
    doc = {"events": rows, "libpfm4": pfm_installed, "pfm_events": list(pfm_events)}
    return View(sections=tuple(sections), doc=doc)


def models_view() -> View:
    """The built-in models: name and description (the name said once), a line each where not wrapped."""
    from layerperf.models import zoo

    rows = [{"name": name, "description": zoo.describe(name)} for name in zoo.names()]
    shown = [{**r, "description": r["description"].removeprefix(f"{r['name']}: ")} for r in rows]  # named once
    return View(sections=(Section(columns=MODEL_COLUMNS, rows=rows, shown=shown, listing=True),),
                doc={"models": rows})
