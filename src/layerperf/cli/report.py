"""``layerperf report TRACE [B] -o report.html``: the visual report, one self-contained HTML page."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.analyze import add_trace_help


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a trace (or of two, side by side)",
                       description="One HTML file that opens anywhere, offline: summary, sortable and filterable "
                                   "layer table, op-type breakdown, timeline of one run, roofline (with this "
                                   "machine's `layerperf calibrate` peaks as ceilings), memory timeline; with "
                                   "two traces, A and B side by side with the per-node diff.")
    add_trace_help(p)
    p.add_argument("trace", metavar="TRACE", help="trace to report on (any format `layerperf analyze` reads)")
    p.add_argument("b", metavar="B", nargs="?", help="a second trace: the page compares TRACE (A) with B")
    p.add_argument("-o", "--output", metavar="FILE.html", default="report.html",
                   help="the page to write (default report.html); a missing directory is made")
    p.add_argument("--match", choices=("normalized", "exact"), default="normalized",
                   help="with B: how nodes are paired, as `layerperf diff --match`")
    p.add_argument("--calibration", metavar="FILE.json",
                   help="peaks to draw as roofline ceilings: a file `layerperf calibrate` wrote (default: the "
                        "calibration of the machine the profile ran on, or of this machine for a foreign trace)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.renderers import html
    from layerperf.renderers.html.build import AUTO, write
    from layerperf.util import units

    target = html.check_output(args.output)  # before reading traces, not after
    peaks = AUTO
    if args.calibration is not None:
        from layerperf.calibration import peaks as calibration

        peaks = calibration.load(args.calibration)
    page = html.html(args.trace, args.b, match=args.match, peaks=peaks).encode("utf-8")
    write(page, target)
    print(f"wrote {target} ({units.binary(len(page))})")
    return 0
