"""The terminal format (rich): each section a table, its notes below, warnings and hints coloured.

On a terminal, tables are fitted to its width (:mod:`layerperf.renderers.fit`: what is left out is
said below), and a listing's last column wraps under itself. Piped, redirected, written to a ``.txt``
file or asked ``--wide``, a table prints whole: every column, every character, however wide (a listing
one line a row). Knows views, nothing about runtimes or figures.
"""

from __future__ import annotations

import io
import textwrap

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from layerperf.renderers.fit import PLAIN, Fitted, Layout, for_terminal
from layerperf.renderers.view import Note, Section, View

NAME = "table"
SUFFIX = ".txt"
UNBOUNDED = 1_000_000  # the width of output that no terminal cuts: a pipe, a file, --wide
NOTE_STYLES = {"warning": "yellow", "hint": "yellow"}
LISTING_MIN = 20  # a listing's last column narrower than this on a terminal: its lines are left whole


def table(fitted: Fitted, title: str | None = None) -> Table:
    """A rich table of ``fitted``'s cells at its widths; cells and titles are Text, never markup (a node
    named ``blocks[0]/attn`` prints as it is)."""
    t = Table(title=Text(title) if title is not None else None, title_justify="left", header_style="bold")
    widths = fitted.widths or (None,) * len(fitted.columns)
    for col, width in zip(fitted.columns, widths, strict=True):
        t.add_column(Text(col.header, style="bold"), justify=col.justify,  # type: ignore[arg-type]
                     width=width, no_wrap=not col.wrap, overflow="fold")
    for row in fitted.cells:
        t.add_row(*(Text(cell) for cell in row))
    return t


def note_text(note: Note) -> Text:
    # Plain text, never markup: a name or a message with brackets prints as it is.
    if not note.kind:
        return Text(note.text)
    return Text.assemble((f"{note.kind}:", NOTE_STYLES.get(note.kind, "")), " ", note.text)


def listing_lines(section: Section, width: int | None = None) -> list[str]:
    """The rows as plain lines, every column but the last padded to its width; fitted to ``width``
    characters (None: one line a row, for grep and awk), the last column wraps on words under itself."""
    *head, last = section.columns
    out = []
    for row in section.people_rows:
        lead = " ".join([*(c.cell(row).ljust(c.width) for c in head), ""])
        room = (width or 0) - cell_len(lead)
        if width is None or room < LISTING_MIN:
            out.append(lead + last.cell(row))
            continue
        lines = textwrap.wrap(last.cell(row), room, break_on_hyphens=False) or [""]
        out += [lead + lines[0], *(" " * cell_len(lead) + line for line in lines[1:])]
    return out


def print_section(section: Section, con: Console, width: int | None, layout: Layout = PLAIN,
                  note_width: int | None = None) -> None:
    """``section`` on ``con``, fitted to ``width`` characters (None: whole); notes wrapped at ``note_width``
    (None: at ``width``)."""
    notes = section.notes
    if section.listing:
        for line in listing_lines(section, width):
            con.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
    elif section.columns:
        fitted = for_terminal(section, width, layout)
        if section.title is not None:  # a line of its own: wrapped at the terminal's width, not the table's,
            # and never padded to the table's width (rich pads a table's title)
            con.print(Text(section.title), highlight=False, width=note_width or width)
        # a table that prints whole (columns picked that cannot fit) on a console no width cuts: rich
        # would otherwise squeeze its columns into the terminal, cutting numbers and their units
        (con if fitted.widths is not None or width is None else _unbounded(con)).print(table(fitted))
        notes = fitted.notes
    for note in notes:
        con.print(note_text(note), highlight=False, width=note_width or width)


def fit_width(con: Console, layout: Layout) -> int | None:
    """The width tables are fitted to on ``con``: its terminal's, or None (whole) for a pipe or ``--wide``."""
    return None if layout.wide or not con.is_terminal else con.width


def print_view(view: View, con: Console | None = None, layout: Layout = PLAIN) -> None:
    """Print ``view`` on ``con`` (stdout when None), its tables fitted to the terminal."""
    con = con or Console()
    width = fit_width(con, layout)
    note_width = con.width if con.is_terminal else None  # --wide: notes still wrap at the terminal's width
    if width is None:  # nothing cuts a line: the table as wide as its cells
        con = _unbounded(con)
    for section in view.sections:
        print_section(section, con, width, layout, note_width)


def _unbounded(con: Console) -> Console:
    """A console writing where ``con`` writes, in its colours, with lines as long as their text (the
    terminal, if any, wraps them)."""
    return Console(file=con.file, width=UNBOUNDED, force_terminal=con.is_terminal,
                   color_system=con.color_system if con.is_terminal else None)  # type: ignore[arg-type]


def render(view: View, width: int | None = None, layout: Layout = PLAIN) -> str:
    """``view`` as the terminal shows it, without colour: fitted to ``width`` characters, or whole when
    None (what a ``.txt`` output file holds)."""
    buf = io.StringIO()
    con = Console(file=buf, width=width or UNBOUNDED, color_system=None)
    for section in view.sections:
        print_section(section, con, width, layout)
    return buf.getvalue()
