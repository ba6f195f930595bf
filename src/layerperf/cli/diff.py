"""``layerperf diff A B``: per node (or op type) time in two traces, delta and speedup."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.analyze import FORMATS, add_trace_help
from layerperf.cli.common import positive_int


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
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    p.set_defaults(func=run)


def time_label(by: str, how: str) -> str:
    """What a row's time is: a node's per-call figure, or by type the sum of its nodes' figures."""
    if by == "name":
        return f"per-node time: the {how} of its calls"
    return f"per-op-type time: the sum over its nodes of each node's {how} per call"


def run(args: argparse.Namespace) -> int:
    from layerperf import analysis, units
    from layerperf.readers.detect import read_table
    from layerperf.renderers import tables

    analysis.order_diff([], args.order_by)  # an unknown column fails before the traces are read
    a, b = read_table(args.a), read_table(args.b)
    rows, totals = analysis.diff(a, b, by=args.by, how=args.aggregate, match=args.match)
    rows = analysis.order_diff(rows, args.order_by)
    if args.top:
        rows = rows[:args.top]
    keys = list(analysis.DIFF_COLUMNS)
    columns = list(tables.DIFF_COLUMNS)
    shown = rows
    if any(r["key_b"] not in (None, r["key"]) or r["op_type_b"] not in (None, r["op_type"]) for r in rows):
        columns[1:1] = [tables.DIFF_NAME_B, tables.DIFF_MATCH]
        columns.insert(4, tables.DIFF_TYPE_B)
        # no node in B: blank, not "?" (unknown)
        shown = [{**r, "key_b": r["key_b"] or "", "op_type_b": r["op_type_b"] or ""} for r in rows]
    title = f"A = {a.meta.get('source')} ({a.meta.get('format')}), B = {b.meta.get('source')} " \
            f"({b.meta.get('format')}): {time_label(args.by, args.aggregate)}"
    notes = [f"total: A {units.duration_us(totals['time_a_us'])}, B {units.duration_us(totals['time_b_us'])}, "
             f"delta {tables.signed_us(totals['delta_us'])}"
             + (f", speedup {tables.speedup(totals['speedup'])}" if totals["speedup"] else ""),
             f"{totals['only_in_a']} only in A, {totals['only_in_b']} only in B; "
             "delta = B - A, speedup = A / B (> 1: B is faster)"]
    if args.by == "name" or args.match == "normalized":
        notes.insert(1, _matched_line(totals, "nodes" if args.by == "name" else "op families"))
    tables.emit(args.format, shown, columns, keys=keys, title=title, notes=notes,
                doc={"rows": rows, "totals": totals, "a": a.meta.get("source"), "b": b.meta.get("source"),
                     "time": time_label(args.by, args.aggregate)})
    return 0


def _matched_line(totals: dict[str, Any], what: str = "nodes") -> str:
    rules = ", ".join(f"{n} by {rule}" for rule, n in totals["matched_by"].items() if n)
    return (f"matched {totals['matched']} of {totals['nodes_a']} {what} in A and {totals['nodes_b']} in B"
            + (f" ({rules})" if rules else "") + f"; --match {totals['match']}")
