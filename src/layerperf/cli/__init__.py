"""The ``layerperf`` command. Thin: parses flags, calls the Python API, prints.

Each subcommand is one module with ``register(subparsers)`` and ``run(args) -> int``. One wrapper
turns layerperf errors into one line on stderr and exit code 2; tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from layerperf import __version__
from layerperf.errors import LayerperfError

# name -> module; modules import their heavy dependencies inside run(), so --help stays fast.
COMMANDS = ("profile", "compare", "models", "backends", "events", "analyze", "diff", "memory", "bench", "report",
            "calibrate", "collect", "predict")

SUCCESS, ERROR, INTERRUPTED = 0, 2, 130


def _modules(names: Sequence[str] = COMMANDS) -> list[Any]:
    mods: list[Any] = []
    for name in names:
        try:
            mods.append(importlib.import_module(f"layerperf.cli.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"layerperf.cli.{name}":
                raise
    return mods


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (the problem, and where the usage is), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _named(argv: Sequence[str]) -> tuple[str, ...]:
    """The subcommand ``argv`` names (its first word that is not a flag), alone; every one when it names none
    or one unknown. Building the parser of one command spares importing the other twelve: ~0.2 s a call."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return (word,) if word in COMMANDS else COMMANDS


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the one ``argv`` names only (see :func:`_named`)."""
    parser = Parser(
        prog="layerperf", description="Per-layer performance profiler for deep-learning inference.")
    parser.add_argument("--version", action="version", version=f"layerperf {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _modules(COMMANDS if argv is None else _named(argv)):
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return ERROR
    try:
        return int(args.func(args))
    except LayerperfError as exc:
        if args.debug:
            raise
        print(f"layerperf: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except MemoryError as exc:  # an input shape or a trace beyond this machine: one line, as for bad input
        if args.debug:
            raise
        detail = str(exc).strip() or "an allocation failed"
        print(f"layerperf: error: out of memory: {detail} (smaller inputs, or a machine with more memory)",
              file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        print("layerperf: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return SUCCESS


def entry() -> None:
    sys.exit(main())
