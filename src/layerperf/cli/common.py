"""Flags and printing shared by subcommands."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layerperf.data import Profile


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


def print_profile(prof: Profile, *, top: int, fmt: str, written: dict[str, Path]) -> None:
    import orjson

    from layerperf import render, units
    from layerperf.stats import extra_columns
    from layerperf.summary import summary

    summ = summary(prof)
    if fmt == "json":
        doc = {"summary": summ, "layers": prof.table(), "files": {k: str(v) for k, v in written.items()},
               "extra": prof.extra}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return
    con = render.console()
    rows = render.marked_shapes(sorted(prof.table(), key=lambda r: -r["share"])[:top], prof.layers)
    columns = render.layer_columns(summ["int_ops"] > 0) + render.counter_columns(extra_columns(prof))
    if prof.parent_names:  # control flow: a parent's whole duration beside its self time
        columns.insert(3, render.Column("incl_median_us", "inclusive", units.duration_us))
    model = prof.metadata.get("model", {}).get("name", "model")
    con.print(render.table(rows, columns, title=f"{model}: top {len(rows)} of {summ['layers']} layers by self time"))
    for line in summary_lines(prof, summ, units):
        con.print(line, highlight=False)
    for path in written.values():
        con.print(f"wrote {path}", highlight=False)


def summary_lines(prof: Profile, summ: dict[str, Any], units: Any) -> list[str]:
    meta = prof.metadata
    overhead = summ["profiler_overhead"]
    lines = [
        f"backend: {meta.get('backend')} {meta.get('backend_version')} ({meta.get('provider')}), "
        f"opt level {meta.get('options', {}).get('opt_level')}, threads "
        f"{meta.get('options', {}).get('threads') or 'default'}, {summ['runs']} runs",
        f"latency (profiler off): median {units.duration_us(summ['latency_median_us'])}, "
        f"p90 {units.duration_us(summ['latency_p90_us'])}; profiled run median "
        f"{units.duration_us(summ['profiled_median_us'])}"
        + (f"; profiler overhead x{overhead:.3f}" if overhead else ""),
        f"sum of layer medians {units.duration_us(summ['layers_sum_median_us'])}; total "
        f"{units.si(summ['flops'], 'FLOP')} + {units.si(summ['int_ops'])} int ops, "
        f"{units.binary(summ['bytes'])} moved",
        "legend: self time = median per call; computation in FLOPs, one multiply-add = 2 FLOPs (floating "
        "point; int ops count integer work likewise); ? = unknown, never 0",
    ]
    if summ.get("padded_layers"):
        lines.append(f"{summ['padded_layers']} layers ran on channels padded to ONNX Runtime's NCHWc block, "
                     f"shown as stored(real) dims; FLOPs count the real channels, the padding added "
                     f"{units.si(summ['padding_flops'], 'FLOP')} of work")
    fid = summ.get("fidelity")
    if fid:
        corr = fid["rank_correlation"]
        lines.append(f"counters: stepwise executor, {prof.extra['counters']['passes']} passes per event group; "
                     f"fidelity vs in-situ: time ratio {fid['time_ratio']:.3f}, rank correlation "
                     + (f"{corr:.3f}" if corr is not None else "n/a"))
    unknown = [f"{what} unknown for {summ[key]} layers" for what, key in
               (("FLOPs", "flops_unknown_layers"), ("int ops", "int_ops_unknown_layers")) if summ.get(key)]
    if unknown:
        lines.append(f"[yellow]warning:[/] {'; '.join(unknown)}")
    lines += [f"[yellow]warning:[/] {w}" for w in prof.extra.get("warnings", [])]
    return lines
