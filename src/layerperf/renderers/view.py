"""The view: what a command shows, built once and rendered in any format.

A view is a few sections (a table: columns, rows, a title, notes below) and the JSON document of
the same result. Views are built in :mod:`layerperf.renderers.views` from a Profile, an analyze or
diff result, a memory report, bench results or a list; the format modules (terminal, markdown,
csv, json) know these types and nothing about where the figures came from.

Rows hold figures as programs want them (raw numbers in the units their keys say, None where
unknown); columns say how people see them. ``shown`` rows, where given, replace cells for people
only (shapes marked with their padding, a blank where no node exists rather than ``?``). A column's
``priority`` and ``min_width`` say how it gives way when a terminal is narrower than the table
(:mod:`layerperf.renderers.fit` does the fitting, for every table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

Row = Mapping[str, Any]


KEEP = 0  # priority of the columns a table is about (its name, its ranked figure): never left out
LOW = 5  # priority of the details (shapes, provider): the first left out of a narrow terminal


@dataclass(frozen=True, slots=True)
class Column:
    """One column as people see it: the row key, its header, how a value prints, and its side.

    ``priority``: the order columns are left out in when a terminal is too narrow for them all, the
    highest first (:data:`KEEP`: never). ``min_width``: a text column that may be narrowed down to this
    many characters, its cells shortened in the middle (a name keeps its start and its end), or
    wrapped on words when ``wrap`` (prose); 0: never narrowed (numbers print whole). ``stand_in``: the
    key of the column whose cell a blank cell of this one shows when a terminal leaves that column out
    (a diff row found only in B has no name in A: its name in B stands in).
    """

    key: str
    header: str
    fmt: Callable[[Any], str] = str
    justify: str = "right"
    width: int = 0  # least width in a plain listing (see Section.listing)
    priority: int = 2
    min_width: int = 0
    wrap: bool = False
    stand_in: str = ""

    def cell(self, row: Row) -> str:
        value = row.get(self.key)
        return "?" if value is None else self.fmt(value)  # unknown is "?", never 0


@dataclass(frozen=True, slots=True)
class Note:
    """A line below a table; ``kind`` ("warning", "hint") is shown as a prefix, coloured in a terminal."""

    text: str
    kind: str = ""

    def plain(self) -> str:
        return f"{self.kind}: {self.text}" if self.kind else self.text


def notes(lines: Sequence[str], kind: str = "") -> tuple[Note, ...]:
    return tuple(Note(line, kind) for line in lines)


@dataclass(frozen=True, slots=True)
class Section:
    """A table with its title and the notes below it.

    ``keys`` are the CSV columns (empty: every key of the rows, first seen first), whose figures CSV
    writes whole; ``listing``: the terminal shows the rows as plain
    lines, columns padded to their width, rather than a boxed table (a list for grep and awk; on a
    terminal the last column wraps under itself at its width).
    """

    columns: Sequence[Column]
    rows: Sequence[Row]
    title: str | None = None
    notes: Sequence[Note] = ()
    keys: Sequence[str] = ()
    shown: Sequence[Row] | None = None
    listing: bool = False

    @property
    def people_rows(self) -> Sequence[Row]:
        """The rows as people see them (terminal, markdown)."""
        return self.rows if self.shown is None else self.shown

    def csv_keys(self) -> list[str]:
        if self.keys:
            return list(self.keys)
        return list(dict.fromkeys(k for row in self.rows for k in row))


@dataclass(frozen=True, slots=True)
class View:
    """What a command shows: its sections, and ``doc``, the JSON document of the same result.

    CSV holds the first section's rows: the main table; the others (a memory report below a
    profile, libpfm4's events below the perf events) are for people. ``status``: lines that say what
    the command did besides (``wrote DIR/trace.json``), no part of the result: people see them below the
    tables on stdout, and on stderr when the view goes to a file, which never holds them
    (:func:`layerperf.renderers.output.show`).
    """

    sections: Sequence[Section]
    doc: Any
    status: Sequence[str] = ()

    def then(self, other: View) -> View:
        """This view with ``other``'s sections below, and its status lines after this one's; the JSON document
        stays this one's."""
        return replace(self, sections=(*self.sections, *other.sections), status=(*self.status, *other.status))

    def with_notes(self, extra: Sequence[Note]) -> View:
        """This view with ``extra`` notes below its last section."""
        if not extra:
            return self
        *head, last = self.sections
        return replace(self, sections=(*head, replace(last, notes=(*last.notes, *extra))))


PEOPLE_FORMATS = ("table", "markdown")


def for_people(fmt: str) -> bool:
    """Whether ``fmt`` is read by people (units, a top few rows) rather than programs (every row)."""
    return fmt in PEOPLE_FORMATS
