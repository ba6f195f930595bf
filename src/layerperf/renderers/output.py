"""Where a view goes: stdout in the format ``--format`` names, or a file whose suffix names it.

Each format module states its name and its file suffix and renders a view to text; this module
picks one by name or by suffix, refuses a suffix no format has and a ``--format`` the suffix
contradicts, and writes files whole or not at all.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from layerperf.data.profile import Profile
from layerperf.errors import InputError
from layerperf.renderers import csv, json, markdown, terminal
from layerperf.renderers.files import write_atomic
from layerperf.renderers.fit import PLAIN, Layout, check_names, select
from layerperf.renderers.view import View, for_people, notes
from layerperf.renderers.views.profile import profile_view
from layerperf.util.atomic import check_dir

if TYPE_CHECKING:
    pass


class Renderer(Protocol):
    NAME: str
    SUFFIX: str

    def render(self, view: View) -> str: ...


RENDERERS: dict[str, Renderer] = {m.NAME: m for m in (terminal, csv, json, markdown)}
BY_SUFFIX: dict[str, str] = {m.SUFFIX: name for name, m in RENDERERS.items()}
DEFAULT = terminal.NAME


def _known() -> str:
    return ", ".join(suffix + (f" ({name})" if suffix != f".{name}" else "") for suffix, name in BY_SUFFIX.items())


def format_for(output: str | Path | None, given: str | None, default: str = DEFAULT) -> str:
    """The format to render in: the one ``--format`` gave, else the one the output file's suffix
    names, else ``default``. An unknown suffix, or a suffix and a ``--format`` that disagree, is an
    InputError."""
    if output is None:
        return given or default
    suffix = Path(output).suffix
    by_suffix = BY_SUFFIX.get(suffix.lower())
    if by_suffix is None:
        what = f"its suffix {suffix} names no format" if suffix else "it has no suffix to name a format"
        raise InputError(f"cannot tell the format of --output {output}: {what}", hint=f"known: {_known()}")
    if given is not None and given != by_suffix:
        raise InputError(f"--format {given} disagrees with --output {output}, whose suffix {suffix} means {by_suffix}",
                         hint="give one of them, or make them agree")
    return by_suffix


def check_output(output: str | Path | None) -> None:
    """Refuse, before any work, an output file that could not be written; creates nothing."""
    if output is None:
        return

    path = Path(output)
    if path.is_dir():
        raise InputError(f"--output {output} is a directory", hint="name a file, e.g. report.md")
    check_dir(path.absolute().parent)


def show(view: View, fmt: str, output: str | Path | None = None, layout: Layout = PLAIN) -> None:
    """Print ``view`` on stdout as ``fmt``, or write it to ``output`` (whole or not at all). ``layout``:
    the columns people see (``--columns``; a name no table has is an InputError) and whether a terminal's
    tables print whole (``--wide``); csv and json carry every column.

    The view's status lines (the files a command wrote) are notes below its tables for people on stdout,
    and left out for programs there (JSON has the files in its document); with ``output`` they are no
    part of the file: they go to stderr, and the output file's own line after them (always: a command that
    wrote a file says so)."""
    if layout.columns and for_people(fmt):
        check_names(view.sections, layout.columns)
    if output is not None:
        _write(view, fmt, Path(output), layout)
        for line in (*view.status, f"wrote {output}"):
            print(line, file=sys.stderr)
        return
    if for_people(fmt):
        view = view.with_notes(notes(view.status))
    if fmt == terminal.NAME:
        terminal.print_view(view, layout=layout)  # fitted to the terminal it prints on; whole when piped
        return
    sys.stdout.write(_text(view, fmt, layout))


def _text(view: View, fmt: str, layout: Layout) -> str:
    """``view`` as ``fmt`` renders it; a terminal's table whole, as a file holds it."""
    if fmt == terminal.NAME:
        return terminal.render(view, layout=layout)
    if fmt == markdown.NAME:
        view = replace(view, sections=tuple(select(s, layout.columns) for s in view.sections))
    return RENDERERS[fmt].render(view)


def _write(view: View, fmt: str, output: Path, layout: Layout) -> None:
    text = _text(view, fmt, layout)

    def write(f: IO[bytes]) -> None:
        f.write(text.encode())

    write_atomic(output, write)


def print_profile(prof: Profile, *, top: int | None, fmt: str, written: dict[str, Path]) -> None:
    """The profile on stdout: a table of the ``top`` layers (20 when None) and the summary lines, or
    JSON with every layer in execution order (the ``top`` ranked ones when ``top`` is given)."""

    show(profile_view(prof, top=top, fmt=fmt, written=written), fmt)
