"""``layerperf analyze TRACE``: MegEngine profile_analyze's report for any supported trace."""

from __future__ import annotations

import argparse
from typing import Any

from layerperf.cli.common import positive_int

AGGREGATE_BY = ("name", "type", "provider", "shape", "kernel")
AGGREGATES = ("sum", "mean", "median", "max", "min", "count")
FORMATS = ("table", "csv", "json", "markdown")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got '{text}'") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {text}")
    return value


def add_trace_help(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Formats, detected from the content (.json or .json.gz): a layerperf trace.json or "
                "profile directory; ONNX Runtime's profile (enable_profiling); a PyTorch profiler "
                "trace (export_chrome_trace); any Trace Event Format file.")


def register(sub: Any) -> None:
    p = sub.add_parser("analyze", help="per-op report of a trace file (layerperf, ONNX Runtime, PyTorch, any TEF)",
                       description="Aggregate, filter and rank the ops of a trace: self time, cumulative share, "
                                   "operator info, FLOPs, FLOPS, memory, bandwidth, shapes and counters.")
    add_trace_help(p)
    p.add_argument("trace", metavar="TRACE", help="trace file (.json, .json.gz) or layerperf profile directory")
    p.add_argument("-t", "--top", type=positive_int, default=None,
                   help="rows to show, 0 for all (default: 20 for table and markdown, all for csv and json)")
    p.add_argument("--aggregate-by", choices=AGGREGATE_BY, default="name",
                   help="group calls by node name, op type, provider, or op type and shapes (default name); "
                        "kernel: the GPU kernels of a PyTorch trace by name, with the ops that launched them")
    p.add_argument("--aggregate", choices=AGGREGATES, default="sum",
                   help="how a group's calls combine (default sum; count orders by calls)")
    p.add_argument("--order-by", metavar="COLUMN",
                   help="column to rank by, largest first (default self time; e.g. cumulative, flops, "
                        "flops_per_s, bytes, bandwidth, calls, device, a counter; +COLUMN for ascending)")
    p.add_argument("--min-time", type=seconds, metavar="SECONDS",
                   help="hide rows whose aggregated self time is below this")
    p.add_argument("--type", action="append", default=[], metavar="OPTYPE", dest="types",
                   help="only ops of this type (repeatable)")
    p.add_argument("--name", metavar="REGEX", help="only ops whose name matches this regular expression")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    p.add_argument("--timeline", metavar="FILE.json",
                   help="also write the calls (those --type and --name keep) as a timeline: Chrome trace JSON "
                        "that Perfetto (ui.perfetto.dev) and chrome://tracing open")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from layerperf import analysis
    from layerperf.readers.detect import read_table
    from layerperf.renderers import tables
    from layerperf.renderers import terminal as render

    if args.name is not None:
        analysis.compile_regex(args.name)  # a bad regex fails before the trace is read
    if args.timeline is not None:  # and so does a place the timeline cannot be written
        from pathlib import Path

        from layerperf.renderers.files import check_dir

        check_dir(Path(args.timeline).absolute().parent)
    table = read_table(args.trace)
    if args.aggregate_by == "kernel":
        return _kernels(table, args)
    if args.order_by is not None:
        analysis.resolve_column(table, args.order_by)
    ranked = analysis.analyze(table, by=args.aggregate_by, how=args.aggregate, order_by=args.order_by,
                              types=args.types, name=args.name, min_time_s=args.min_time)
    result = analysis.top(ranked, default_top(args.top, args.format))
    rows = analysis.rows(result)
    columns = list(tables.ANALYZE_COLUMNS)
    if bool(np.nansum(result.int_ops) > 0):  # integer work is shown only where there is some
        columns = render.with_int_columns(columns)
    nested = bool(len(table)) and not bool((table.incl_ns == table.dur_ns).all())
    if nested:
        columns.insert(3, tables.INCLUSIVE)
    if result.has_device:
        columns[3:3] = [tables.DEVICE, tables.DEVICE_INCL]
        columns.insert(columns.index(next(c for c in columns if c.key == "flops_per_s")) + 1, tables.RATE_TIME)
    columns += render.counter_columns(list(table.counters))
    keys = list(rows[0]) if rows else ["name", "op_type", "provider", "calls", "time_us"]
    _timeline(table, args)
    tables.emit(args.format, rows, columns, keys=keys, title=_title(table, result, len(ranked), args),
                notes=_notes(table, args))
    return 0


def _timeline(table: Any, args: argparse.Namespace) -> None:
    """Write ``--timeline``: every call of the trace the row filters keep, as read (not aggregated)."""
    if args.timeline is None:
        return
    from pathlib import Path

    from layerperf import analysis
    from layerperf.renderers import timeline

    calls = table if args.aggregate_by == "kernel" else analysis.filter_table(table, types=args.types,
                                                                                 name=args.name)
    timeline.save(calls, Path(args.timeline))


def default_top(top: int | None, fmt: str) -> int:
    """Rows to keep: what -t/--top says; else 20 for people (table, markdown) and all (0) for programs,
    so a pipe never loses rows it was not asked to drop."""
    if top is not None:
        return top
    return DEFAULT_TOP if fmt in ("table", "markdown") else 0


DEFAULT_TOP = 20


def _title(table: Any, result: Any, total: int, args: argparse.Namespace) -> str:
    meta = table.meta
    what = {"name": "ops", "type": "op types", "provider": "providers", "shape": "op type+shape groups"}
    order = args.order_by or ("calls" if args.aggregate == "count" else "self time")
    shown = f"top {len(result)} of {total}" if len(result) < total else f"{total}"
    return (f"{meta.get('source')} ({meta.get('format')}): {shown} {what[args.aggregate_by]} "
            f"by {order}, {args.aggregate} over calls")


def _notes(table: Any, args: argparse.Namespace) -> list[str]:
    from layerperf import units
    from layerperf.analysis import grand_total_ns

    meta = table.meta
    runs = meta.get("runs")
    lines = [f"{meta.get('events', 0)} events, {len(table)} op calls"
             + (f", {runs} runs" if runs else "")
             + f"; total self time {units.duration_us(grand_total_ns(table) / 1e3)}"]
    if meta.get("device_unlinked"):
        lines.append(f"{meta['device_unlinked']} device activities linked to no op are rows of their own")
    if table.has_device:
        lines.append("device self = kernels, copies and sets the op launched itself; device incl = also those of "
                     "the ops nested in it; FLOPS and bandwidth are over device incl where an op has some "
                     "(FLOPS over: device), else over its CPU self time (cpu)")
    if table.outer:
        lines.append("summed inclusive figures count a call nested in a call of its own group once")
    lines.append("self time excludes nested events; cumulative = running share of total self time; "
                 "computation in FLOPs (floating point), int ops (integer); ? = unknown")
    return lines


def _kernels(table: Any, args: argparse.Namespace) -> int:
    from layerperf import kernels, units
    from layerperf.errors import InputError
    from layerperf.renderers import tables

    if args.types or args.min_time is not None:
        raise InputError("--type and --min-time do not apply to --aggregate-by kernel", hint="--name filters kernels")
    kernel_table = kernels.of(table)
    if kernel_table is None:
        raise InputError(f"{table.meta.get('source')} has no GPU kernels to aggregate "
                         f"({table.meta.get('format')} trace)", hint="--aggregate-by kernel reads PyTorch GPU traces")
    rows = kernels.order(kernels.aggregate(kernel_table, name=args.name), args.order_by)
    top = default_top(args.top, args.format)
    shown = rows[:top] if top else rows
    total_us = float(kernel_table.dur_ns.sum()) / 1e3
    title = (f"{table.meta.get('source')} ({table.meta.get('format')}): {len(shown)} of {len(rows)} kernels "
             f"by {args.order_by or 'device time'}")
    notes = [f"{len(kernel_table)} device activities, {units.duration_us(total_us)} of device time; share = of all "
             "device time; of launchers' device time = of all device time of the ops that launched the kernel"]
    _timeline(table, args)
    tables.emit(args.format, shown, tables.KERNEL_COLUMNS, keys=list(kernels.KERNEL_COLUMNS), title=title,
                notes=notes)
    return 0
