"""``layerperf events``: the perf events layerperf knows, and whether each opens here right now."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.common import add_table_args, layout


def register(sub: Any) -> None:
    p = sub.add_parser("events", help="list perf events and whether they can be counted here",
                       description="List the perf event names layerperf knows, trying each on this machine, "
                       "and libpfm4's events for this CPU when libpfm4 is installed.")
    p.add_argument("--pfm", action="store_true", help="also list libpfm4's events for this CPU")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_table_args(p, ["table", "json"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf import counters
    from layerperf.renderers.output import show
    from layerperf.renderers.views.lists import events_view

    table_layout = layout(args, args.format)
    probes = counters.probe_events()
    pfm_events = [{"name": e.name, "pmu": e.pmu, "description": e.desc}
                  for e in counters.pfm_event_list()] if args.pfm and counters.pfm_available() else []
    show(events_view(probes, pfm_events, counters.pfm_available()), args.format, layout=table_layout)
    return 0
