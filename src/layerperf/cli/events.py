"""``layerperf events``: the perf events layerperf knows, and whether each opens here right now."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("events", help="list perf events and whether they can be counted here",
                       description="List the perf event names layerperf knows, trying each on this machine, "
                       "and libpfm4's events for this CPU when libpfm4 is installed.")
    p.add_argument("--pfm", action="store_true", help="also list libpfm4's events for this CPU")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import orjson

    from layerperf import counters
    from layerperf.renderers import terminal as render

    probes = counters.probe_events()
    pfm_events = [{"name": e.name, "pmu": e.pmu, "description": e.desc}
                  for e in counters.pfm_event_list()] if args.pfm and counters.pfm_available() else []
    if args.format == "json":
        doc = {"events": [p._asdict() for p in probes], "libpfm4": counters.pfm_available(), "pfm_events": pfm_events}
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return 0
    rows = [{"name": p.name, "ok": "yes" if p.ok else "no", "reason": p.reason} for p in probes]
    cols = [render.Column("name", "event", str, "left"), render.Column("ok", "counts here", str, "left"),
            render.Column("reason", "why not", str, "left")]
    con = render.console()
    con.print(render.table(rows, cols, title="perf events (tried on this machine now)"))
    ok = sum(p.ok for p in probes)
    con.print(f"{ok} of {len(probes)} events open here. libpfm4: "
              f"{'installed' if counters.pfm_available() else 'not installed (apt-get install libpfm4)'}",
              highlight=False)
    if pfm_events:
        con.print(render.table(pfm_events, [render.Column("pmu", "pmu", str, "left"),
                                             render.Column("name", "libpfm4 event", str, "left"),
                                             render.Column("description", "description", str, "left")]))
    return 0
