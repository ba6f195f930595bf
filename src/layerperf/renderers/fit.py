"""Tables that fit the terminal: which columns a width has room for, and how wide each is.

Every table people read in a terminal comes through here. What a table is about (its
:data:`~layerperf.renderers.view.KEEP` columns: the name and the ranked figure) is always shown; a name
too long for its share of the width is shortened so that the rows still tell apart
(:func:`layerperf.renderers.distinct.shortened`: ``encoder.layer.11…attention.self.query``), never below its
column's ``min_width``. The other columns are taken by priority while they fit: columns
with nothing in them (all zero, all unknown) last, then the details (shapes, provider). Numbers always
print whole. A line below the table names what was left out and how to see it. Output for programs
(a pipe, a file, ``--wide``) is not fitted: every column, every character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.cells import cell_len

from layerperf.errors import InputError
from layerperf.renderers.distinct import shortened
from layerperf.renderers.view import KEEP, Column, Note, Section

GAP = 3  # what a boxed table adds per column: a space each side of the cell and the border before it
EDGE = 1  # the border closing each line
NAME_SHARE = 3  # a kept text column (the name) may take up to a third of the width before other columns
TEXT_SHARE = 6  # any other narrowable text column, a sixth


@dataclass(frozen=True, slots=True)
class Layout:
    """How tables meet the terminal: ``wide`` prints every column whole (as for a pipe or a file);
    ``columns`` (``--columns``, keys or headers) are the columns to show beside the kept ones; ``more``
    names the formats that carry every column, for the line saying what was left out."""

    wide: bool = False
    columns: tuple[str, ...] = ()
    more: str = "--format json"


PLAIN = Layout()  # the table's own choice of columns, fitted on a terminal


@dataclass(frozen=True, slots=True)
class Fitted:
    """A section as the terminal prints it: its columns, their widths (None: as wide as the cells), the
    cells as text, and the notes below (the section's own, then what fitting left out)."""

    columns: tuple[Column, ...]
    widths: tuple[int, ...] | None
    cells: tuple[tuple[str, ...], ...]
    notes: tuple[Note, ...]

    @property
    def width(self) -> int:
        """The printed table's width in characters."""
        widths = self.widths or tuple(natural(c, [row[i] for row in self.cells]) for i, c in enumerate(self.columns))
        return sum(widths) + GAP * len(widths) + EDGE


def natural(column: Column, cells: Sequence[str]) -> int:
    """The width a column takes whole: its header or its widest cell."""
    return max([cell_len(column.header), *(cell_len(c) for c in cells)])


def is_empty(column: Column, section: Section) -> bool:
    """Whether a column says nothing: every value unknown, zero or blank (int ops of a float model)."""
    return column.priority != KEEP and all(_blank(row.get(column.key)) for row in section.people_rows)


def _blank(value: object) -> bool:
    if value is None or value == "":
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def _reserve(column: Column, whole: int, width: int) -> int:
    """The width a column claims while columns are chosen: whole, or a narrowable one's share of ``width``."""
    if not column.min_width:
        return whole
    share = width // (NAME_SHARE if column.priority == KEEP else TEXT_SHARE)
    return min(whole, max(column.min_width, share))


def _named(column: Column, names: Sequence[str]) -> bool:
    """Whether ``names`` name ``column``: by its key as written, else by its header in any case (``FLOPS``
    is the rate's header, ``flops`` the computation's key)."""
    return any(n == column.key or n.lower() == column.header.lower() for n in names)


def select(section: Section, names: Sequence[str]) -> Section:
    """``section`` with only the columns ``names`` gives (keys, or headers in any case) and its kept ones;
    a section that has none of them stays as it is."""
    wanted = [n.strip() for n in names if n.strip()]
    if not wanted or not section.columns:
        return section
    keys = {c.key for c in section.columns}
    picked = [c for c in section.columns if c.key in wanted or _named(c, [n for n in wanted if n not in keys])]
    if not picked:
        return section
    return replace(section, columns=[c for c in section.columns if c in picked or c.priority == KEEP])


def check_names(sections: Sequence[Section], names: Sequence[str]) -> None:
    """Refuse ``--columns`` naming a column no table has, listing those there are."""
    columns = [c for s in sections for c in s.columns]
    unknown = [n for n in names if n.strip() and not any(_named(c, [n.strip()]) for c in columns)]
    if unknown:
        keys = ", ".join(dict.fromkeys(c.key for c in columns))
        raise InputError(f"--columns: no column {unknown[0]!r} here", hint=f"columns: {keys}")


def cells_of(section: Section, columns: Sequence[Column]) -> list[list[str]]:
    """Each row's cells as text, in ``columns``' order."""
    return [[c.cell(row) for c in columns] for row in section.people_rows]


def whole(section: Section) -> Fitted:
    """Every column, every character: for a pipe, a file, ``--wide``."""
    columns = tuple(section.columns)
    cells = tuple(tuple(row) for row in cells_of(section, columns))
    return Fitted(columns, None, cells, tuple(section.notes))


def for_terminal(section: Section, width: int | None, layout: Layout = PLAIN) -> Fitted:
    """``section`` as a terminal ``width`` characters wide shows it (None: whole, for programs), with
    only the columns ``layout.columns`` picks where it picks some."""
    picked = select(section, layout.columns)
    if width is None:
        return whole(picked)
    return fit(picked, width, layout, chosen=picked is not section)


def fit(section: Section, width: int, layout: Layout = PLAIN, chosen: bool = False) -> Fitted:
    """``section`` fitted to ``width`` characters: the columns there is room for, in the table's order,
    the narrowable ones shortened; a note below says what was left out and how to see it. ``chosen``:
    the columns were picked (``--columns``): none is left out, and when they cannot fit they print whole."""
    columns = list(section.columns)
    cells = cells_of(section, columns)
    filled = _stood_in(cells, _pairs(columns))  # the widths a blank cell may take
    wholes = [natural(c, [row[i] for row in filled]) for i, c in enumerate(columns)]
    forced = set(range(len(columns))) if chosen else set()
    kept, widths = _choose(columns, wholes, width, section, forced)
    _grow(columns, wholes, kept, widths, width)
    _shrink(columns, kept, widths, width)
    if chosen and sum(widths[i] for i in kept) + GAP * len(kept) + EDGE > width:
        return whole(section)  # asked for more than fits: every character, the terminal wraps the lines
    shown = [columns[i] for i in kept]
    filled = _stood_in(cells, _stand_ins(columns, set(kept)))
    fitted = {i: _cells(columns[i], [row[i] for row in filled], widths[i]) for i in kept}
    out = tuple(tuple(fitted[i][r] for i in kept) for r in range(len(filled)))
    short = sum(1 for i in kept if not columns[i].wrap for row in filled if cell_len(row[i]) > widths[i])
    left_out = [c for i, c in enumerate(columns) if i not in kept]
    extra = _fit_note(left_out, short, width, layout, _standing_in(columns, cells, set(kept)))
    return Fitted(tuple(shown), tuple(widths[i] for i in kept), out, (*section.notes, *extra))


def _pairs(columns: Sequence[Column]) -> dict[int, int]:
    """Each column with a stand-in (``Column.stand_in``) in the table: its index -> the stand-in's."""
    at = {c.key: i for i, c in enumerate(columns)}
    return {i: at[c.stand_in] for i, c in enumerate(columns) if c.stand_in in at}


def _stand_ins(columns: Sequence[Column], kept: set[int]) -> dict[int, int]:
    """The pairs of :func:`_pairs` whose column is shown and whose stand-in is left out."""
    return {i: j for i, j in _pairs(columns).items() if i in kept and j not in kept}


def _stood_in(cells: list[list[str]], pairs: dict[int, int]) -> list[list[str]]:
    """``cells`` with the blank cells of each column of ``pairs`` taken from its stand-in."""
    if not pairs:
        return cells
    return [[row[pairs[i]] if i in pairs and not cell else cell for i, cell in enumerate(row)] for row in cells]


def _standing_in(columns: Sequence[Column], cells: list[list[str]], kept: set[int]) -> list[tuple[Column, Column]]:
    """(shown column, its left-out stand-in) for each pair where some blank cell was filled."""
    return [(columns[i], columns[j]) for i, j in _stand_ins(columns, kept).items()
            if any(not row[i] and row[j] for row in cells)]


def _choose(columns: list[Column], wholes: list[int], width: int, section: Section,
            forced: set[int]) -> tuple[list[int], list[int]]:
    """The columns to show (indices, in table order) and their claimed widths: the kept and forced ones,
    then the others by priority (the empty ones last) while they fit."""
    widths = [_reserve(c, w, width) for c, w in zip(columns, wholes, strict=True)]
    order = sorted(range(len(columns)), key=lambda i: (
        i not in forced and columns[i].priority != KEEP, is_empty(columns[i], section), columns[i].priority, i))
    kept: list[int] = []
    used = EDGE
    for i in order:
        need = widths[i] + GAP
        if i in forced or columns[i].priority == KEEP or used + need <= width:
            kept.append(i)
            used += need
    return sorted(kept), widths


def _grow(columns: list[Column], wholes: list[int], kept: list[int], widths: list[int], width: int) -> None:
    """Give the room left to the narrowed columns, the most important first, up to their whole width."""
    room = width - (sum(widths[i] for i in kept) + GAP * len(kept) + EDGE)
    for i in sorted(kept, key=lambda i: (columns[i].priority, i)):
        extra = min(max(room, 0), wholes[i] - widths[i])
        widths[i] += extra
        room -= extra


def _shrink(columns: list[Column], kept: list[int], widths: list[int], width: int) -> None:
    """When the kept columns alone are too wide: narrow the narrowable ones to their least width, the
    least important first."""
    over = sum(widths[i] for i in kept) + GAP * len(kept) + EDGE - width
    for i in sorted(kept, key=lambda i: (-columns[i].priority, -i)):
        if over <= 0:
            return
        if columns[i].min_width:
            cut = min(over, widths[i] - min(widths[i], columns[i].min_width))
            widths[i] -= cut
            over -= cut


def _cells(column: Column, texts: list[str], width: int) -> list[str]:
    """A column's cells in ``width``: whole (wrapped prose, numbers), else shortened so that the rows
    still tell apart (:func:`layerperf.renderers.distinct.shortened`, the one rule for every table)."""
    if column.wrap or all(cell_len(t) <= width for t in texts):
        return texts
    return shortened(texts, width)


def _label(column: Column) -> str:
    return column.header if column.header == column.key else f"{column.header} ({column.key})"


def _fit_note(left_out: Sequence[Column], short: int, width: int, layout: Layout,
              stood_in: Sequence[tuple[Column, Column]] = ()) -> tuple[Note, ...]:
    if not left_out and not short:
        return ()
    parts = []
    if left_out:
        parts.append(f"left out to fit {width} columns: {', '.join(_label(c) for c in left_out)}")
    parts += [f"where a row has no {shown.header}, its {alt.header} stands in" for shown, alt in stood_in]
    if short:
        parts.append(f"{short} name{'s' if short > 1 else ''} shortened in the middle (…)")
    how = f"--wide shows every column whole, --columns KEY,... picks columns, {layout.more} carries them all"
    return (Note("; ".join(parts) + f"; {how}", "hint"),)
