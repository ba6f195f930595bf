"""``layerperf compare MODEL --backends onnxruntime,tvm,torch``: one model profiled on each runtime in one
run, its layers side by side (:mod:`layerperf.analysis.compare`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from layerperf.cli.common import (
    add_backend_flags,
    add_model_args,
    add_output_args,
    layout,
    output_format,
    positive_int,
)


def register(sub: Any) -> None:
    p = sub.add_parser("compare", help="profile one model on several runtimes and compare its layers",
                       description="Profile MODEL on each runtime of --backends in one run (the run options apply "
                       "to all, a backend's own flags to it), then one table per layer — layers matched across "
                       "runtimes as `diff` matches them, fused kernels grouped with the layers they cover — and "
                       "one per op type: each runtime's time per run, the fastest, totals.")
    add_model_args(p)
    p.add_argument("--backends", required=True, metavar="A,B[,C]",
                   help="the runtimes, comma-separated, the first the reference whose layers name the rows "
                        "(e.g. onnxruntime,tvm,torch); see `layerperf backends`")
    p.add_argument("--warmup", type=positive_int, default=10, help="untimed runs first, on each (default 10)")
    p.add_argument("--runs", type=positive_int, default=100, help="measured runs on each (default 100)")
    p.add_argument("--threads", type=positive_int, default=0, help="intra-op threads on each (0: each runtime's "
                   "default)")
    p.add_argument("--no-latency", action="store_true", help="skip the whole-model latency with the profiler off")
    p.add_argument("--match", choices=("normalized", "exact"), default="normalized",
                   help="pair layers across runtimes as `diff --match` does (default normalized)")
    p.add_argument("--top", type=positive_int, default=None,
                   help="per-layer rows to show, the slowest first (table: 20 when not given; json: all, in order)")
    p.add_argument("--out", metavar="DIR", help="save each runtime's profile into DIR/<backend>/ (trace.json, "
                   "layers.csv) and the comparison as DIR/compare.json")
    add_output_args(p, ["table", "json"], help="terminal output format")
    add_backend_flags(p)
    p.set_defaults(func=run)


def chosen_backends(text: str) -> list[str]:
    """``--backends``: known names, each once, at least two; InputError in one line otherwise."""
    from layerperf import backends
    from layerperf.api import usable
    from layerperf.errors import InputError

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in backends.names()]
    if unknown:
        raise InputError(f"unknown backend{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} in --backends",
                         hint="one of: " + ", ".join(backends.names()))
    twice = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if twice:
        raise InputError(f"--backends names {', '.join(twice)} more than once: give each runtime once",
                         hint="e.g. --backends onnxruntime,tvm")
    if len(names) < 2:
        raise InputError(f"--backends names {len(names)} runtime{'s' * (len(names) != 1)}: compare needs two or more",
                         hint="e.g. --backends onnxruntime,tvm")
    for name in names:  # a runtime that is not here: said before anything runs
        usable(backends.get(name))
    return names


def run(args: argparse.Namespace) -> int:
    import layerperf
    from layerperf.analysis.compare import compare
    from layerperf.backends.base import RunPlan
    from layerperf.cli.common import flags_for, model_options, progress_bar
    from layerperf.errors import InputError, LayerperfError
    from layerperf.renderers.output import show
    from layerperf.renderers.views.compare import compare_view
    from layerperf.util.atomic import check_dir

    names = chosen_backends(args.backends)
    flags = flags_for(args, names)
    fmt = output_format(args)
    table_layout = layout(args, fmt)  # --columns/--wide refused with json before anything runs
    if args.out:
        check_dir(Path(args.out))
    RunPlan(warmup=args.warmup, runs=args.runs, threads=args.threads, seed=args.seed).validate()  # said once
    runs = _runs(names, flags)
    profiles: dict[str, layerperf.Profile] = {}
    failed: dict[str, str] = {}
    errors: dict[str, LayerperfError] = {}
    with progress_bar() as progress:
        for label, name, options in runs:
            try:
                profiles[label] = layerperf.profile(
                    args.model, backend=name, warmup=args.warmup, runs=args.runs, threads=args.threads,
                    latency=not args.no_latency, progress=progress, **model_options(args), **options)
            except Exception as exc:  # noqa: BLE001 - one runtime's failure, whatever raised it, is one line
                if getattr(args, "debug", False) and not isinstance(exc, LayerperfError):
                    raise
                failed[label] = failure(exc)
                if isinstance(exc, LayerperfError):
                    errors[label] = exc
    if not profiles and len(errors) == len(failed) and len(set(failed.values())) == 1:
        raise next(iter(errors.values()))  # the same mistake for every runtime: said once
    for label, message in failed.items():
        print(f"layerperf: compare: {label} failed: {message}", file=sys.stderr)
    if len(profiles) < 2:
        raise InputError(f"compare needs two runtimes that ran; {len(profiles)} did")
    comparison = compare({k: p.calls() for k, p in profiles.items()}, match=args.match,
                         latency_ms={k: _latency_ms(p) for k, p in profiles.items()})
    view = compare_view(comparison, top=args.top or 20, fmt=fmt, failed=failed,
                        profiles={k: _describe(p) for k, p in profiles.items()}, warnings=_warnings(profiles))
    if args.out:
        _save(Path(args.out), profiles, view.doc)
    show(view, fmt, args.output, table_layout)
    return 0


def failure(exc: Exception) -> str:
    """Why a runtime failed, in one line: a LayerperfError's message; any other error (the runtime's own,
    or a bug) its type and first line, so that it is told apart (``--debug`` raises it instead)."""
    from layerperf.errors import LayerperfError

    if isinstance(exc, LayerperfError):
        return str(exc)
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # a runtime's error may carry its native traceback first ("Traceback ...", frames): the reason is last
    text = (lines[-1] if lines[0].startswith("Traceback") else lines[0]) if lines else "(no message)"
    return f"{type(exc).__name__}: {text[:300]}"


def _runs(names: list[str], flags: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, backend, options) of each profile: a backend whose options ask for a baseline build (TVM's
    ``--compare``: the untuned one) is profiled as ``<name>:baseline`` too, just before."""
    import dataclasses

    from layerperf import backends
    from layerperf.api import backend_options

    out = []
    for name in names:
        backend = backends.get(name)
        base = backends.baseline_options(backend, backend_options(backend, flags[name]))
        if base is not None:
            out.append((f"{name}:baseline", name, dataclasses.asdict(base)))
        out.append((name, name, flags[name]))
    return out


def _latency_ms(prof: Any) -> float | None:
    import numpy as np

    return float(np.median(prof.latency_ns)) / 1e6 if prof.latency_ns else None


def _describe(prof: Any) -> dict[str, Any]:
    meta = prof.metadata
    return {"backend": meta.backend, "version": meta.backend_version, "provider": meta.provider,
            "options": meta.options.as_dict(), "runs": len(prof.runs),
            "threads": prof.measurement.intra_op_threads if prof.measurement is not None else None}


def _warnings(profiles: dict[str, Any]) -> list[str]:
    """Every warning each runtime's profile has below its summary under ``layerperf profile``, after its label."""
    from layerperf.renderers.views.profile import profile_warnings

    return [f"{label}: {w}" for label, p in profiles.items() for w in profile_warnings(p)]


def _save(out: Path, profiles: dict[str, Any], doc: dict[str, Any]) -> None:
    import orjson

    import layerperf
    from layerperf.renderers.files import ensure_dir
    from layerperf.util.atomic import write_bytes

    for label, prof in profiles.items():
        layerperf.save(prof, out / label.replace(":", "-"))
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    write_bytes(ensure_dir(out) / "compare.json", text)
