"""``layerperf analyze TRACE``: MegEngine profile_analyze's report for any supported trace."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from layerperf.analysis.gpu import VIEWS
from layerperf.cli.common import add_output_args, layout, output_format, positive_int, warn_dropped
from layerperf.data.calls import Calls
from layerperf.errors import InputError

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
                   help="how a group's calls combine (default sum; count orders by calls); with --aggregate-by "
                        "kernel, the per-kernel figure rows are ranked by")
    p.add_argument("--order-by", metavar="COLUMN",
                   help="column to rank by, largest first (default self time; e.g. cumulative, flops, "
                        "flops_per_s, bytes, bandwidth, calls, device, a counter; +COLUMN for ascending)")
    p.add_argument("--min-time", type=seconds, metavar="SECONDS",
                   help="hide rows whose aggregated self time is below this")
    p.add_argument("--type", action="append", default=[], metavar="OPTYPE", dest="types",
                   help="only ops of this type (repeatable)")
    p.add_argument("--name", metavar="REGEX", help="only ops whose name matches this regular expression")
    add_output_args(p, FORMATS)
    p.add_argument("--view", choices=VIEWS, metavar="VIEW",
                   help="a GPU timeline view of a PyTorch trace instead of the op table: " + ", ".join(VIEWS)
                        + " (README: GPU timeline views)")
    p.add_argument("--timeline", metavar="FILE.json",
                   help="also write the calls (those --type and --name keep) as a timeline: Chrome trace JSON "
                        "that Perfetto (ui.perfetto.dev) and chrome://tracing open")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.analysis import aggregate as analysis
    from layerperf.readers.detect import read_folded, release
    from layerperf.renderers.output import show

    fmt = output_format(args)
    table_layout = layout(args, fmt)
    if args.name is not None:
        analysis.compile_regex(args.name)  # a bad regex fails before the trace is read
    if args.view is not None:
        _check_view_flags(args)
    if args.aggregate_by == "kernel" and (args.types or args.min_time is not None):
        raise InputError("--type and --min-time do not apply to --aggregate-by kernel", hint="--name filters kernels")
    if args.timeline is not None:  # a place the timeline cannot be written fails before reading, too
        from layerperf.util.atomic import check_dir

        if Path(args.timeline).suffix.lower() != ".json":  # as -o refuses a suffix no format has
            raise InputError(f"--timeline writes Chrome trace JSON: name its file .json, not {args.timeline}")
        check_dir(Path(args.timeline).absolute().parent)
    # figures fold as the trace is read, a timeline is written as it goes, the device activities the GPU
    # views and the per-kernel view read go to disk (removed once the view is made, whatever happens)
    devices = args.view is not None or args.aggregate_by == "kernel"
    opened: list[Any] = []

    def read(sink: Any = None) -> Any:
        opened.append(read_folded(args.trace, quantiles=args.aggregate == "median", activities=devices, sink=sink))
        return opened[-1]

    try:
        if args.timeline is not None:
            table, view = _with_timeline(args, read, lambda t: _view(t, args, fmt))
        else:
            table = read()
            view = _view(table, args, fmt)
    finally:
        for t in opened:
            release(t)
    show(view, fmt, args.output, table_layout)
    warn_dropped([table], fmt)
    return 0


def _check_view_flags(args: argparse.Namespace) -> None:
    """Refuse the op table's flags beside --view, whose figures they would not change (--type and --name
    pick the calls of a --timeline only)."""
    flags = (("--aggregate-by", args.aggregate_by != "name"), ("--aggregate", args.aggregate != "sum"),
             ("--order-by", args.order_by is not None), ("--min-time", args.min_time is not None),
             ("--type", bool(args.types) and args.timeline is None),
             ("--name", args.name is not None and args.timeline is None))
    given = [flag for flag, on in flags if on]
    if given:
        raise InputError(f"{given[0]} does not apply to --view {args.view}: a view covers the whole timeline",
                         hint="--top limits its rows; --type and --name pick the calls of a --timeline")


def _view(table: Any, args: argparse.Namespace, fmt: str) -> Any:
    """The view asked for (the table, a GPU view, the per-kernel view); InputError where it cannot be."""
    from layerperf.analysis import aggregate as analysis
    from layerperf.renderers.views.analyze import analyze_view, default_top, kernels_view

    top = default_top(args.top, fmt)
    if args.view is not None:
        from layerperf.renderers.views.gpu import gpu_view

        return gpu_view(table, args.view, top=args.top or 0)
    if args.aggregate_by == "kernel":
        return kernels_view(table, name=args.name, order_by=args.order_by, top=top, how=args.aggregate)
    if args.order_by is not None:
        analysis.resolve_column(table, args.order_by)
    return analyze_view(table, by=args.aggregate_by, how=args.aggregate, order_by=args.order_by, top=top,
                        types=args.types, name=args.name, min_time_s=args.min_time)


def _with_timeline(args: argparse.Namespace, read: Any, make_view: Any) -> tuple[Any, Any]:
    """Read the trace (``read(sink)``) writing ``--timeline`` as it goes: every call the row filters keep, as
    read (not aggregated); the table (folded) and its view (``make_view``), made before the timeline is put in
    place, so that a view refused leaves no timeline (whole or not at all)."""
    from layerperf.analysis import aggregate as analysis
    from layerperf.data.fold import Folded
    from layerperf.renderers import timeline
    from layerperf.renderers.files import atomic_files

    target = Path(args.timeline).absolute()

    def keep(calls: Calls) -> Calls:
        return calls if args.aggregate_by == "kernel" else analysis.filter_table(calls, types=args.types,
                                                                                  name=args.name)

    with atomic_files(target.parent, [target.name]) as (f,), timeline.Streamed(f, target.parent, keep) as writer:
        table = read(writer.add)
        if isinstance(table, Folded):
            writer.finish(table.meta)
        else:  # a trace read whole (layerperf's own): its table's timeline
            f.seek(0)
            f.truncate()
            timeline.write(keep(table), f)
        view = make_view(table)
    return table, view
