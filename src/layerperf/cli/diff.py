"""``layerperf diff A B``: per node (or op type) time in two traces, delta and speedup."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.analyze import FORMATS, add_trace_help
from layerperf.cli.common import add_output_args, layout, output_format, positive_int, warn_dropped


def register(sub: Any) -> None:
    p = sub.add_parser("diff", help="compare two traces node by node (or op type by op type)",
                       description="Per node matched by name (or per op type): time in A, time in B, delta "
                                   "(B - A), speedup (A / B), totals; nodes only in A or only in B are flagged.")
    add_trace_help(p)
    p.add_argument("a", metavar="A", help="baseline trace (any format `layerperf analyze` reads)")
    p.add_argument("b", metavar="B", help="trace to compare with A")
    p.add_argument("--by", choices=("name", "type"), default="name", help="match nodes by name or op type")
    p.add_argument("--match", choices=("normalized", "exact"), default="normalized",
                   help="pair nodes across the renamings of graph optimizations and quantization (normalized, "
                        "default: suffixes such as _nchwc, _quant, _token_N stripped, fused nodes paired), or "
                        "by identical names only (exact)")
    p.add_argument("--aggregate", choices=("mean", "median", "sum", "min", "max"), default="mean",
                   help="a node's time: its calls' mean (default), median, sum, min or max; with --by type, "
                        "summed over the type's nodes")
    p.add_argument("--order-by", default="delta", metavar="COLUMN",
                   help="delta (|B - A|, default), time_a, time_b, speedup, delta_pct, calls_a, calls_b, key; "
                        "+COLUMN for ascending")
    p.add_argument("-t", "--top", type=positive_int, default=0, help="rows to show, 0 for all (default)")
    add_output_args(p, FORMATS)
    p.epilog = (p.epilog or "") + " -o FILE.html writes the visual report of A and B side by side (as `layerperf " \
        "report A B`)."
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.analysis import aggregate as analysis
    from layerperf.readers.detect import read_folded
    from layerperf.renderers.output import show
    from layerperf.renderers.views.diff import diff_view

    if is_html(args.output):
        return _page(args)
    fmt = output_format(args)
    table_layout = layout(args, fmt)
    analysis.order_diff([], args.order_by)  # an unknown column fails before the traces are read
    median = args.aggregate == "median"
    a, b = read_folded(args.a, quantiles=median), read_folded(args.b, quantiles=median)
    view = diff_view(a, b, by=args.by, how=args.aggregate, match=args.match, order_by=args.order_by, top=args.top)
    show(view, fmt, args.output, table_layout)
    warn_dropped([a, b], fmt)
    return 0


def is_html(output: str | None) -> bool:
    from pathlib import Path

    from layerperf.renderers import html

    return output is not None and Path(output).suffix.lower() in html.SUFFIXES


def _page(args: argparse.Namespace) -> int:
    """``-o FILE.html``: the visual report of A and B, their diff made with the same options."""
    from layerperf.analysis import aggregate as analysis
    from layerperf.errors import InputError
    from layerperf.renderers import html
    from layerperf.renderers.html.build import write
    from layerperf.util import units

    if args.format is not None:
        raise InputError(f"--format {args.format} disagrees with --output {args.output}, an HTML page",
                         hint="give one of them")
    target = html.check_output(args.output)
    analysis.order_diff([], args.order_by)  # an unknown column fails before the traces are read
    page = html.html(args.a, args.b, match=args.match, how=args.aggregate, by=args.by, order_by=args.order_by,
                     top=args.top).encode("utf-8")
    write(page, target)
    print(f"wrote {target} ({units.binary(len(page))})")
    return 0
