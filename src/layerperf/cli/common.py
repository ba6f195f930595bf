"""Flags shared by subcommands; what they print is built and rendered in :mod:`layerperf.renderers`."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of ``minimum`` or more, its message naming that bound (the same rule
    the API checks, so ``--runs -1`` and ``--runs 0`` are refused alike)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {minimum} or more, got {value}")
        return value

    return parse


def event_list(text: str) -> tuple[str, ...]:
    """An argparse type: perf event names separated by commas (spaces around them dropped), at least one,
    none empty (:func:`layerperf.collectors.perf.event_names`, as the API reads them)."""
    from layerperf.collectors.perf import event_names  # lazy: the parser is built before any command runs
    from layerperf.errors import CounterError

    try:
        names = event_names(text)
    except CounterError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    if not names:  # "" is no events to the API; a flag given names some
        raise argparse.ArgumentTypeError(f"no event named in '{text}'; name them separated by commas, such as "
                                         "task-clock,page-faults")
    return tuple(names)


positive_int = at_least(0)  # a count that may be 0 (--warmup, --threads 0 = the runtime's default, --top 0 = all)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="path to an .onnx file, or a built-in model name "
                   "(see `layerperf models`)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                   help="set an input's shape, e.g. input=1x3x224x224 (repeatable)")
    p.add_argument("--inputs", metavar="FILE.npz", help="input arrays by input name")
    p.add_argument("--seed", type=at_least(0), default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--batch", type=int, help="batch size of a built-in model")
    p.add_argument("--image-size", type=int, help="input height and width of a built-in vision model")
    p.add_argument("--seq-len", type=int, help="sequence length of a built-in text model")
    p.add_argument("--model-seed", type=at_least(0), default=0,
                   help="seed a built-in model is built with (default 0): its random weights, a kernel sweep's sampled "
                        "configurations (as collect --model-seed)")


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``layerperf.profile`` keywords of the flags :func:`add_model_args` adds (MODEL aside)."""
    return {"shapes": args.shape, "inputs": args.inputs, "seed": args.seed, "batch": args.batch,
            "image_size": args.image_size, "seq_len": args.seq_len, "model_seed": args.model_seed}


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend`` and every registered backend's own flags (:func:`add_backend_flags`)."""
    from layerperf import backends

    p.add_argument("--backend", metavar="NAME", help="runtime to profile on (default: by the model's file "
                   f"type; {backends.DEFAULT} for .onnx files and built-in models); see `layerperf backends`")
    add_backend_flags(p)


def add_backend_flags(p: argparse.ArgumentParser) -> None:
    """Every registered backend's own flags, a group per backend. Flags default to None here, so that
    a flag given for another backend than the one chosen is told, not ignored. A flag two backends
    share (``--level``) is listed once, its help saying what it means on each."""
    from layerperf import backends
    from layerperf.backends.base import flag_name, option_fields

    helps: dict[str, list[str]] = {}
    for name in backends.names():
        for f in option_fields(backends.get(name).options_type):
            if f.metadata.get("flag"):
                helps.setdefault(f.name, []).append(f"{name}: {f.metadata.get('help', '')}")
    seen: set[str] = set()
    for name in backends.names():
        backend = backends.get(name)
        group = p.add_argument_group(f"{name} backend")
        for f in option_fields(backend.options_type):
            meta = f.metadata
            if not meta.get("flag") or f.name in seen:
                continue
            seen.add(f.name)
            text = meta.get("help", "") if len(helps[f.name]) == 1 else "; ".join(helps[f.name])
            if isinstance(f.default, bool):  # a switch: given or not
                group.add_argument(flag_name(f.name), dest=f.name, default=None, action="store_const", const=True,
                                   help=text)
                continue
            parse = meta.get("parse") or (type(f.default) if isinstance(f.default, int | float) else str)
            group.add_argument(flag_name(f.name), dest=f.name, default=None, type=parse, choices=meta.get("choices"),
                               metavar=meta.get("metavar"),
                               help=text if "default" in text else f"{text} (default {f.default})")


def backend_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The chosen backend's options given on the command line; a flag of another backend is refused."""
    from layerperf import backends

    chosen = backends.for_model(args.model, args.backend)
    return flags_for(args, [chosen.name])[chosen.name]


def flags_for(args: argparse.Namespace, chosen: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each chosen backend's options given on the command line (a flag several take goes to each); a
    flag of none of them is refused in one line."""
    from layerperf import backends
    from layerperf.backends.base import flag_name, option_fields
    from layerperf.errors import InputError

    own = {name: {f.name for f in option_fields(backends.get(name).options_type)} for name in chosen}
    out: dict[str, dict[str, Any]] = {name: {} for name in chosen}
    for name in backends.names():
        for f in option_fields(backends.get(name).options_type):
            value = getattr(args, f.name, None) if f.metadata.get("flag") else None
            if value is None:
                continue
            takers = [c for c in chosen if f.name in own[c]]
            if not takers:
                raise InputError(f"{flag_name(f.name)} is an option of the {name} backend, not of "
                                 f"{' or '.join(chosen)}")
            for c in takers:
                out[c][f.name] = value
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


def add_output_args(p: argparse.ArgumentParser, formats: Sequence[str], help: str = "output format (default table)"
                    ) -> None:
    """``--format`` (one of ``formats``; table when not given) and ``-o/--output FILE``, whose suffix may
    name the format instead: the default is resolved by :func:`output_format`, once the suffix is known."""
    p.add_argument("--format", choices=formats, default=None, help=help)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the output to FILE (whole or not at all) instead of stdout; its suffix names the "
                        "format: .txt (table), .csv, .json, .md (markdown)")
    add_table_args(p, formats)


PROGRAM_FORMATS = ("csv", "json")  # every column, every digit: --columns and --wide do not apply


def add_table_args(p: argparse.ArgumentParser, formats: Sequence[str]) -> None:
    """``--columns`` and ``--wide``: which columns a table shows, and a terminal's tables whole."""
    g = p.add_argument_group("table columns (a terminal's tables fit its width; piped output is whole)")
    g.add_argument("--columns", metavar="COL,COL", type=lambda t: tuple(c.strip() for c in t.split(",") if c.strip()),
                   default=(), help="show these columns (keys as in --format json, or headers) beside the name "
                                    "and the ranked one")
    g.add_argument("--wide", action="store_true", help="print every column whole, however wide the terminal "
                   "(as when the output is piped)")
    more = [f for f in formats if f in PROGRAM_FORMATS]
    p.set_defaults(table_more=f"--format {' or '.join(more)}" if more else "")


def layout(args: argparse.Namespace, fmt: str) -> Any:
    """The :class:`~layerperf.renderers.fit.Layout` that ``--columns`` and ``--wide`` give; with a format
    for programs (csv, json: every column already), an InputError."""
    from layerperf.errors import InputError
    from layerperf.renderers.fit import Layout

    given = [flag for flag, on in (("--columns", args.columns), ("--wide", args.wide)) if on]
    if given and fmt in PROGRAM_FORMATS:
        raise InputError(f"{' and '.join(given)} shape{'s' if len(given) == 1 else ''} the table; "
                         f"--format {fmt} carries every column already")
    return Layout(wide=args.wide, columns=args.columns, more=args.table_more or "--format json")


def output_format(args: argparse.Namespace) -> str:
    """The format ``--format`` or the ``--output`` file's suffix names (table when neither does);
    a suffix no format has, a ``--format`` the suffix contradicts or an output file that could not
    be written is an InputError, before any work."""
    from layerperf.renderers.output import check_output, format_for

    check_output(args.output)
    return format_for(args.output, args.format)


def warn_dropped(tables: Sequence[Any], fmt: str) -> None:
    """For a format programs read (csv, json), the events each table's reader left out, one line each
    on stderr: people see them below the table, a pipe must not have them mixed into its data."""
    from layerperf.readers.dropped import warnings
    from layerperf.renderers.view import for_people

    if for_people(fmt):
        return
    for table in tables:
        for line in warnings(table.meta):
            print(f"layerperf: warning: {table.meta.get('source')}: {line}", file=sys.stderr)
