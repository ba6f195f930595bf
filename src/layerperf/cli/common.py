"""Flags and printing shared by subcommands."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layerperf.profile_data import Profile


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="path to an .onnx file, or a built-in model name "
                   "(see `layerperf models`)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                   help="set an input's shape, e.g. input=1x3x224x224 (repeatable)")
    p.add_argument("--inputs", metavar="FILE.npz", help="input arrays by input name")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--batch", type=int, help="batch size of a built-in model")
    p.add_argument("--image-size", type=int, help="input height and width of a built-in vision model")
    p.add_argument("--seq-len", type=int, help="sequence length of a built-in text model")


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``layerperf.profile`` keywords of the flags :func:`add_model_args` adds (MODEL aside)."""
    return {"shapes": args.shape, "inputs": args.inputs, "seed": args.seed, "batch": args.batch,
            "image_size": args.image_size, "seq_len": args.seq_len}


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend`` and every registered backend's own flags, a group per backend. Flags default to
    None here, so that a flag given for another backend than the one chosen is told, not ignored."""
    from layerperf import backends
    from layerperf.backends.base import flag_name, option_fields

    p.add_argument("--backend", metavar="NAME", help="runtime to profile on (default: by the model's file "
                   f"type; {backends.DEFAULT} for .onnx files and built-in models); see `layerperf backends`")
    seen: set[str] = set()
    for name in backends.names():
        backend = backends.get(name)
        group = p.add_argument_group(f"{name} backend")
        for f in option_fields(backend.options_type):
            meta = f.metadata
            if not meta.get("flag") or f.name in seen:
                continue
            seen.add(f.name)
            parse = meta.get("parse") or (type(f.default) if isinstance(f.default, int | float) else str)
            text = meta.get("help", "")
            group.add_argument(flag_name(f.name), dest=f.name, default=None, type=parse, choices=meta.get("choices"),
                               help=text if "default" in text else f"{text} (default {f.default})")


def backend_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The chosen backend's options given on the command line; a flag of another backend is refused."""
    from layerperf import backends
    from layerperf.backends.base import flag_name, option_fields
    from layerperf.errors import InputError

    chosen = backends.for_model(args.model, args.backend)
    own = {f.name for f in option_fields(chosen.options_type)}
    out = {}
    for name in backends.names():
        for f in option_fields(backends.get(name).options_type):
            value = getattr(args, f.name, None) if f.metadata.get("flag") else None
            if value is None:
                continue
            if f.name not in own:
                raise InputError(f"{flag_name(f.name)} is an option of the {name} backend, not of {chosen.name}")
            out[f.name] = value
    return out


@contextlib.contextmanager
def progress_bar() -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal; None (no progress) otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done)

        yield update


# The profile table's order: self % is each layer's share of all measured layer time (calls x mean),
# the figure the cumulative column runs over; self time is the median per call, so its column need not
# be monotonic. The title names the column the rows are ranked by.
RANK_KEY = "share"


def ranked(rows: list[dict[str, Any]], top: int | None) -> list[dict[str, Any]]:
    """Rows by :data:`RANK_KEY`, largest first (ties keep execution order); the first ``top`` of them
    (all when ``top`` is None or 0)."""
    out = sorted(rows, key=lambda r: -r[RANK_KEY])
    return out[:top] if top else out


def profile_title(prof: Profile, shown: int, total: int) -> str:
    from layerperf.renderers.terminal import header

    model = prof.metadata.get("model", {}).get("name", "model")
    return f"{model}: top {shown} of {total} layers by {header(RANK_KEY)} (share of all measured layer time)"


def print_profile(prof: Profile, *, top: int | None, fmt: str, written: dict[str, Path]) -> None:
    """The profile on stdout: a table of the ``top`` layers (20 when None) and the summary lines, or
    JSON with every layer in execution order (the ``top`` ranked ones when ``top`` is given)."""
    import orjson

    from layerperf import units
    from layerperf.figures import extra_columns
    from layerperf.renderers import terminal as render
    from layerperf.summary import summary

    summ = summary(prof)
    if fmt == "json":
        layers = prof.table() if top is None else ranked(prof.table(), top)
        doc = {"summary": summ, "layers": layers, "files": {k: str(v) for k, v in written.items()},
               "extra": prof.extra}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return
    con = render.console()
    rows = render.marked_shapes(ranked(prof.table(), DEFAULT_TOP if top is None else top), prof.layers)
    columns = render.layer_columns(summ["int_ops"] > 0) + render.counter_columns(extra_columns(prof))
    if prof.parent_names:  # control flow: a parent's whole duration beside its self time
        columns.insert(3, render.Column("incl_median_us", "inclusive", units.duration_us))
    con.print(render.table(rows, columns, title=profile_title(prof, len(rows), summ["layers"])))
    for line in summary_lines(prof, summ, units):
        con.print(line, highlight=False)
    for path in written.values():
        con.print(f"wrote {path}", highlight=False)


DEFAULT_TOP = 20


def _event_cost(us: float, clock: str) -> str:
    # A difference of two medians: below 0 it measured the host's noise, not a cost of the profiler.
    return f"{us:+.2f} µs {clock}" + (" (below 0: noise, not a cost)" if us < 0 else "")


def _passes(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


def _threads(prof: Profile, summ: dict[str, Any]) -> str:
    asked = prof.metadata.get("options", {}).get("threads")
    used = summ.get("intra_op_threads")
    if used is None:
        return f"threads {asked or 'default'}" + (" (count unknown)" if prof.measurement is not None else "")
    how = "counted: threads the session started + the calling thread"
    return f"threads {used} ({'ONNX Runtime default, ' if not asked else ''}{how})"


def _inputs(summ: dict[str, Any]) -> str | None:
    from rich.markup import escape

    inputs = summ.get("inputs")
    if not inputs:
        return None
    return "inputs: " + escape(", ".join(f"{i['name']}={'x'.join(str(d) for d in i['shape']) or 'scalar'} {i['dtype']}"
                                         for i in inputs))


def _latency(summ: dict[str, Any], units: Any) -> str:
    interleaved = summ.get("latency_interleaved")
    how = "profiler off" + ("" if interleaved is None else ", runs interleaved with the profiled ones"
                            if interleaved else ", measured apart")
    overhead, cost = summ["profiler_overhead"], summ.get("profiler_event_cost_us")
    text = (f"latency ({how}): median {units.duration_us(summ['latency_median_us'])}, "
            f"p90 {units.duration_us(summ['latency_p90_us'])}; profiled run median "
            f"{units.duration_us(summ['profiled_median_us'])}")
    if overhead:
        text += f"; profiler overhead x{overhead:.3f}"
    cpu_cost = summ.get("profiler_event_cost_cpu_us")
    if cost is not None and summ.get("nodes_per_run"):
        text += (f"; per node event {_event_cost(cost, 'wall')}"
                 + (f", {_event_cost(cpu_cost, 'CPU')}" if cpu_cost is not None else "")
                 + f" ({summ['nodes_per_run']:g} nodes per run)")
    return text


def summary_lines(prof: Profile, summ: dict[str, Any], units: Any) -> list[str]:
    meta = prof.metadata
    lines = [
        f"backend: {meta.get('backend')} {meta.get('backend_version')} ({meta.get('provider')}), "
        f"opt level {meta.get('options', {}).get('opt_level')}, {_threads(prof, summ)}, {summ['runs']} runs",
        *([inp] if (inp := _inputs(summ)) else []),
        _latency(summ, units),
        f"sum of layer medians {units.duration_us(summ['layers_sum_median_us'])}; total "
        f"{units.si(summ['flops'], 'FLOP')} + {units.si(summ['int_ops'])} int ops, "
        f"{units.binary(summ['bytes'])} moved",
        "legend: rows ranked by self % = share of all measured layer time (calls x mean); cumulative = running "
        "self %; self time = median per call; computation in FLOPs, one multiply-add = 2 FLOPs (floating "
        "point; int ops count integer work likewise); ? = unknown, never 0",
    ]
    if summ.get("padded_layers"):
        lines.append(f"{summ['padded_layers']} layers ran on channels padded to ONNX Runtime's NCHWc block, "
                     f"shown as stored(real) dims; FLOPs count the real channels, the padding added "
                     f"{units.si(summ['padding_flops'], 'FLOP')} of work")
    fid = summ.get("fidelity")
    if fid and prof.counters is not None:
        corr = fid["rank_correlation"]
        lines.append(f"counters: stepwise executor, {_passes(prof.counters.passes)} per event group; "
                     f"fidelity vs in-situ: time ratio {fid['time_ratio']:.3f}, rank correlation "
                     + (f"{corr:.3f}" if corr is not None else "n/a"))
    if summ.get("busy_host_warning"):
        lines.append(f"[yellow]warning:[/] {summ['busy_host_warning']}")
    if summ.get("profiler_warning"):
        lines.append(f"[yellow]warning:[/] profiler cost: {summ['profiler_warning']}")
    unknown = [f"{what} unknown for {summ[key]} layers" for what, key in
               (("FLOPs", "flops_unknown_layers"), ("int ops", "int_ops_unknown_layers")) if summ.get(key)]
    if unknown:
        lines.append(f"[yellow]warning:[/] {'; '.join(unknown)}")
    lines += [f"[yellow]warning:[/] {w}" for w in prof.warnings]
    return lines
