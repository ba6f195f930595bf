"""``layerperf memory MODEL``: peak live tensors and where, what the runtime allocated, pictures."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from layerperf.cli.common import add_backend_args, add_model_args, add_output_args, at_least, layout, output_format


def add_memory_args(p: argparse.ArgumentParser | Any) -> None:
    p.add_argument("--sample-rate", type=at_least(0), default=None, metavar="N",
                   help="sample resident memory every N nodes during a real run (default 1; 0: off)")


def register(sub: Any) -> None:
    p = sub.add_parser("memory", help="memory profile: live tensors, peak, allocated, pictures",
                       description="Live-tensor timeline over the execution order, its peak and the tensors "
                       "alive there, what ONNX Runtime's arena and the process really used, and "
                       "memory_flow.svg / memory_timeline.svg.")
    add_model_args(p)
    add_backend_args(p)
    add_memory_args(p)
    p.add_argument("--out", metavar="DIR", help="write trace.json, layers.csv and the memory pictures into DIR "
                   "(default: ./<model>-memory)")
    p.add_argument("--runs", type=at_least(1), default=3, help="measured runs (default 3)")
    p.add_argument("--warmup", type=at_least(0), default=1, help="untimed runs first (default 1)")
    p.add_argument("--threads", type=at_least(0), default=0, help="intra-op threads (0: runtime default)")
    p.add_argument("--top", type=at_least(0), default=None,
                   help="tensors at the peak to list, 0 for all (default: 10 for table, all for json)")
    add_output_args(p, ["table", "json"], help="terminal output format")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import layerperf
    from layerperf.analysis.memory.report import memory_report
    from layerperf.cli.common import backend_flags, model_options, progress_bar
    from layerperf.renderers.output import show
    from layerperf.renderers.views.memory import memory_view
    from layerperf.util.atomic import check_dir

    options = backend_flags(args)
    fmt = output_format(args)  # before profiling, not after
    table_layout = layout(args, fmt)
    if args.out:
        check_dir(Path(args.out))
    with progress_bar() as progress:
        prof = layerperf.profile(
            args.model, backend=args.backend, warmup=args.warmup, runs=args.runs, threads=args.threads,
            **options, **model_options(args), latency=False, memory=True,
            sample_rate=args.sample_rate, progress=progress)
    model = prof.metadata.model.name
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in model)  # factory.py:make -> factory.py-make
    written = layerperf.save(prof, Path(args.out) if args.out else Path(f"{safe}-memory"))
    show(memory_view(memory_report(prof), fmt=fmt, top=args.top, model=model, written=written), fmt, args.output,
         table_layout)
    return 0
