"""The terminal format (rich): each section a table, its notes below, warnings and hints coloured.

Printed on stdout, or rendered to text for a ``.txt`` file (no colour, tables as wide as they need
up to :data:`WIDTH`). Knows views, nothing about runtimes or figures.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from layerperf.renderers.view import Column, Note, Row, Section, View

NAME = "table"
SUFFIX = ".txt"
WIDTH = 240  # piped, redirected or written to a file, output has no width to fit: keep tables wide
NOTE_STYLES = {"warning": "yellow", "hint": "yellow"}


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else WIDTH)


def table(rows: Sequence[Row], columns: Sequence[Column], title: str | None = None) -> Table:
    # Cells and titles are Text, never markup: a node named ``blocks[0]/attn`` prints as it is.
    t = Table(title=Text(title) if title is not None else None, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(Text(col.header, style="bold"), justify=col.justify,  # type: ignore[arg-type]
                     no_wrap=col.justify == "right", overflow="fold")
    for row in rows:
        t.add_row(*(Text(col.cell(row)) for col in columns))
    return t


def note_text(note: Note) -> Text:
    # Plain text, never markup: a name or a message with brackets prints as it is.
    if not note.kind:
        return Text(note.text)
    return Text.assemble((f"{note.kind}:", NOTE_STYLES.get(note.kind, "")), " ", note.text)


def listing_lines(section: Section) -> list[str]:
    """The rows as plain lines, every column but the last padded to its width."""
    *head, last = section.columns
    return [" ".join([*(c.cell(row).ljust(c.width) for c in head), last.cell(row)]) for row in section.people_rows]


def print_section(section: Section, con: Console) -> None:
    if section.listing:
        for line in listing_lines(section):
            con.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
    elif section.columns:
        con.print(table(section.people_rows, section.columns, title=section.title))
    for note in section.notes:
        con.print(note_text(note), highlight=False)


def print_view(view: View, con: Console | None = None) -> None:
    """Print ``view`` on ``con`` (a console on stdout when None)."""
    con = con or console()
    for section in view.sections:
        print_section(section, con)


def render(view: View) -> str:
    """``view`` as the terminal shows it, without colour: what a ``.txt`` output file holds."""
    buf = io.StringIO()
    print_view(view, Console(file=buf, width=WIDTH, color_system=None))
    return buf.getvalue()

