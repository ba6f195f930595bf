"""``layerperf diff A B``: per node (or op type) time in two traces, delta and speedup."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.analyze import FORMATS, add_trace_help
from layerperf.cli.common import add_output_args, output_format, positive_int


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
                   help="delta (|B - A|, default), time_a, time_b, speedup, delta_pct, calls_a, calls_b, key")
    p.add_argument("-t", "--top", type=positive_int, default=0, help="rows to show, 0 for all (default)")
    add_output_args(p, FORMATS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf import analysis
    from layerperf.readers.detect import read_table
    from layerperf.renderers.output import show
    from layerperf.renderers.views.diff import diff_view

    fmt = output_format(args)
    analysis.order_diff([], args.order_by)  # an unknown column fails before the traces are read
    a, b = read_table(args.a), read_table(args.b)
    view = diff_view(a, b, by=args.by, how=args.aggregate, match=args.match, order_by=args.order_by, top=args.top)
    show(view, fmt, args.output)
    return 0
