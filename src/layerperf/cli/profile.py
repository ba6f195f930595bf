"""``layerperf profile MODEL``: per-layer timings (and counters, memory) of one model."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from layerperf.cli.common import (
    add_backend_args,
    add_model_args,
    add_output_args,
    at_least,
    event_list,
    layout,
    output_format,
)
from layerperf.cli.memory import add_memory_args


def register(sub: Any) -> None:
    p = sub.add_parser("profile", help="profile a model layer by layer",
                       description="Profile an .onnx file or a built-in model layer by layer, in situ on its "
                       "runtime (--backend; default ONNX Runtime).")
    add_model_args(p)
    add_backend_args(p)
    p.add_argument("--warmup", type=at_least(0), default=10, help="untimed runs first (default 10)")
    p.add_argument("--runs", type=at_least(1), default=100, help="measured runs (default 100)")
    p.add_argument("--threads", type=at_least(0), default=0, help="intra-op threads (0: runtime default)")
    p.add_argument("--top", type=at_least(0), default=None,
                   help="layers to show, ranked by self %% (table: 20 when not given; json: all, in execution order)")
    p.add_argument("--out", metavar="DIR", help="write trace.json and layers.csv into DIR")
    p.add_argument("--report", action="store_true",
                   help="also write the visual report (one self-contained HTML page): DIR/report.html with "
                        "--out, else ./report.html")
    add_output_args(p, ["table", "json"], help="terminal output format")
    p.add_argument("--no-latency", action="store_true",
                   help="skip the whole-model latency measurement with the profiler off")
    c = p.add_argument_group("perf counters (per layer: ONNX Runtime's stepwise executor; in situ at module "
                             "boundaries on torch)")
    c.add_argument("--events", type=event_list, help="comma-separated perf events: perf names "
                   "(cycles,instructions,...), raw rNNNN, or libpfm4 strings (perf::PERF_COUNT_HW_CPU_CYCLES)")
    c.add_argument("--perf-config", metavar="FILE", help="JSON object mapping event string to label, as in "
                   "ONNX Runtime's per-layer perf fork")
    c.add_argument("--passes", type=at_least(1), default=5, help="stepwise passes per event group (default 5)")
    c.add_argument("--multiplex", action="store_true", help="count all events in one pass group, scaled by "
                   "time_enabled/time_running (fraction counted shown)")
    m = p.add_argument_group("memory")
    m.add_argument("--memory", action="store_true", help="add the memory profile (peak live tensors, max "
                   "allocated, memory pictures with --out); see `layerperf memory`")
    add_memory_args(m)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import layerperf
    from layerperf.cli.common import backend_flags, model_options, progress_bar
    from layerperf.renderers.output import show
    from layerperf.renderers.view import for_people
    from layerperf.renderers.views.profile import profile_view
    from layerperf.util.atomic import check_dir

    options = backend_flags(args)
    fmt = output_format(args)  # before minutes of profiling, not after
    table_layout = layout(args, fmt)
    if args.out:
        check_dir(Path(args.out))
    report_path = _report_path(args)
    base_options = _baseline(args, options)
    with progress_bar() as progress:
        common = {"backend": args.backend, "warmup": args.warmup, "runs": args.runs, "threads": args.threads,
                  **model_options(args), "latency": not args.no_latency,
                  "events": list(args.events or ()), "perf_config": args.perf_config,
                  "passes": args.passes, "multiplex": args.multiplex, "memory": args.memory,
                  "sample_rate": args.sample_rate, "progress": progress}
        base = layerperf.profile(args.model, **common, **base_options) if base_options is not None else None
        prof = layerperf.profile(args.model, **common, **options)
    written = layerperf.save(prof, args.out) if args.out else {}
    if base is not None and args.out:
        written = {**written, **{f"baseline/{k}": v for k, v in layerperf.save(base, Path(args.out) /
                                                                               BASELINE_DIR).items()}}
    if report_path is not None:
        from layerperf.renderers import html

        written = {**written, "report.html": html.report(prof, report_path)}
    view = profile_view(prof, top=args.top, fmt=fmt, written=written)
    if args.memory and for_people(fmt):  # JSON has the memory report in its "extra"
        from layerperf.analysis.memory.report import memory_report
        from layerperf.renderers.views.memory import memory_view

        view = view.then(memory_view(memory_report(prof), fmt=fmt))
    if base is not None:  # JSON: the profile's document with the diffs' under their keys
        diffs = _baseline_diff(base, prof, fmt)
        view = replace(view.then(diffs), doc={**view.doc, **diffs.doc})
    show(view, fmt, args.output, table_layout)  # the "wrote" lines: below the tables, or on stderr with -o
    return 0


BASELINE_DIR = "baseline"  # where --out keeps the baseline's files (TVM's --compare: the untuned build)


def _baseline(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any] | None:
    """The options of the baseline build the chosen backend's options ask to compare with (TVM's
    ``--compare``: the untuned build), as keywords; None when they ask for none."""
    import dataclasses

    from layerperf import backends
    from layerperf.api import backend_options

    backend = backends.for_model(args.model, args.backend)
    base = backends.baseline_options(backend, backend_options(backend, options))
    return dataclasses.asdict(base) if base is not None else None


def _baseline_diff(base: Any, prof: Any, fmt: str) -> Any:
    """The diff of the baseline (A) and the profile (B): per layer (the 20 largest changes for people)
    and per op type, each with its totals."""
    from layerperf.renderers.view import for_people
    from layerperf.renderers.views.diff import diff_view

    a, b = (replace(t, meta={**t.meta, "source": _label(p, name)})
            for t, p, name in ((base.calls(), base, "baseline"), (prof.calls(), prof, "profile")))
    by_name = diff_view(a, b, top=20 if for_people(fmt) else 0)
    by_type = diff_view(a, b, by="type")
    return replace(by_name.then(by_type), doc={"baseline_diff": by_name.doc, "baseline_diff_by_type": by_type.doc})


def _label(prof: Any, name: str) -> str:
    state = prof.metadata.options.get("tuning_state")
    return f"{name}, {state}" if state else name


def _report_path(args: argparse.Namespace) -> Path | None:
    """Where ``--report`` writes the page (checked before profiling): into --out, else the current directory."""
    if not args.report:
        return None
    if args.out:
        return Path(args.out) / "report.html"  # --out is created by saving the profile, just before
    from layerperf.renderers import html

    return html.check_output(Path("report.html"))
