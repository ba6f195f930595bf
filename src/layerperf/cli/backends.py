"""``layerperf backends``: the runtimes layerperf profiles on, their versions, and whether each runs here."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.common import add_table_args, layout


def register(sub: Any) -> None:
    p = sub.add_parser("backends", help="list the backends (runtimes) and whether each is usable here",
                       description="List the runtimes layerperf profiles on (`--backend NAME` of profile, memory "
                       "and bench): each one's version here, or why it cannot run, and its own options.")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    add_table_args(p, ["table", "json"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.renderers.output import show
    from layerperf.renderers.views.lists import backend_rows, backends_view

    show(backends_view(backend_rows()), args.format, layout=layout(args, args.format))
    return 0
