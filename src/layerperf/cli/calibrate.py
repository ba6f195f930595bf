"""``layerperf calibrate``: measure this machine's peak FLOP/s, int8 ops/s and memory bandwidth on
ONNX Runtime, store them for the "% of peak" columns and the roofline, and print them."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from layerperf.cli.common import add_table_args, at_least, layout

FORMATS = ("table", "json")


def register(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="measure this machine's peak FLOP/s, int8 ops/s and memory bandwidth",
                       description="Measure this machine's peaks on ONNX Runtime (float32 MatMul and Conv, int8 "
                       "MatMulInteger and QLinearMatMul, a copy and an Add over arrays larger than the last-level "
                       "cache) per thread count, store them in the cache directory (one file per CPU model and "
                       "core count) and print them. profile and analyze then show each layer's % of peak.")
    p.add_argument("--threads", metavar="N,N", help="thread counts to measure (default: 1 and each power of two "
                   "up to the core count, and the core count)")
    p.add_argument("--quick", action="store_true", help="small sizes and short repeats: a smoke test in a second, "
                   "not peaks (stored marked as quick; never replaces a full calibration)")
    p.add_argument("--stream-mib", type=at_least(1), metavar="MIB", help="size of each array of the bandwidth kernels "
                   "(default: twice the last-level cache, at least 64 MiB)")
    p.add_argument("--show", action="store_true", help="print the stored calibration of this machine, measure nothing")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    add_table_args(p, FORMATS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.calibration import peaks as calibration
    from layerperf.errors import InputError
    from layerperf.renderers.output import show
    from layerperf.renderers.views.calibration import calibration_view, none_view

    table_layout = layout(args, args.format)
    if args.show:
        if args.threads or args.quick or args.stream_mib is not None:
            raise InputError("--show measures nothing: --threads, --quick and --stream-mib do not apply")
        file = calibration.path()
        peaks = calibration.load(file) if file.exists() else None
        show(none_view(file) if peaks is None else calibration_view(peaks, file=file, verb="stored in"), args.format,
             layout=table_layout)
        return 0
    from layerperf.calibration.measure import calibrate, parse_threads, settings_for

    threads = parse_threads(args.threads) if args.threads else None
    settings = settings_for(threads=threads, quick=args.quick,
                            stream_bytes=args.stream_mib * 2**20 if args.stream_mib is not None else None)
    peaks, measured = calibrate(settings, progress=_progress())
    file = calibration.path(calibration.machine_key(peaks.cpu_model, peaks.cores))
    if args.quick and _full(file):  # a smoke test never replaces real peaks
        verb = "not stored: a --quick run never replaces the full calibration in"
        show(calibration_view(peaks, measured, file=file, verb=verb, stored=False), args.format, layout=table_layout)
        return 0
    file = calibration.save(peaks)
    show(calibration_view(peaks, measured, file=file), args.format, layout=table_layout)
    return 0


def _full(file: Any) -> bool:
    """Whether ``file`` holds a full (not --quick) calibration; an unreadable one does not count."""
    from layerperf.calibration import peaks as calibration
    from layerperf.errors import InputError

    try:
        stored = calibration.load(file) if file.exists() else None
    except InputError:
        return False
    return stored is not None and not stored.quick


def _progress() -> Any:
    if not sys.stderr.isatty():
        return None

    def say(what: str) -> None:
        print(f"calibrate: {what}", file=sys.stderr, flush=True)

    return say
