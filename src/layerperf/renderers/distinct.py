"""Names shortened so that the rows of a table still tell apart.

Shortening each name on its own makes rows alike: ``encoder.layer.1.output.dense/MatMulAddFusion`` and
``encoder.layer.4.intermediate.dense/MatMulAddFusion`` both become ``encoder…MatMulAddFusion``. Here a
name loses whole units of its path (``layer.1`` is one unit: a label and its index), those every shown
name shares first (the common head ``encoder``, a shared ``dense``), then the others; a unit is kept
whenever eliding it would let the shortened name read as another shown row's (``…layer.1…MatMulAddFusion``
beside ``encoder.layer.1.intermediate.dense/…``). Units are dropped one at a time, so a name keeps as
much as its width has room for.

A name whose units cannot tell it apart in its width (a CUDA kernel's ``sm90_xmma_fprop_…_tilesize64x64x32_…``
is one unit; a kernel sequence's names differ in their middle) is cut by characters, keeping its start, its
end and, between them, where it parts from the rows it would otherwise read as (``sm90_xm…ze64x64x32_…_cudnn``
beside ``sm90_xm…ze64x128x32…_cudnn``). :func:`shortened` is the one rule every fitted table follows.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence

from rich.cells import cell_len

ELLIPSIS = "…"
PART = re.compile(r"[^./:]+")  # the parts of a module path (encoder.layer.11), an ONNX scope (/bert/encoder/...)
_UNIT = re.compile(r"[^./:]+(?:\.\d+(?=[./:]|$))*")  # a path part with its indices: stages.0, layer.11, Conv_output_0
_EDGE_BEFORE = r"(?:^|(?<=[./:]))"
_EDGE_AFTER = r"(?=[./:]|$)"

Span = tuple[int, int]


def shortened(texts: Sequence[str], width: int) -> list[str]:
    """Each of ``texts`` in at most ``width`` characters, the rows still told apart: by whole units
    (:func:`distinct`), or in the middle (:func:`shorten`) where that keeps more and reads as no other
    row, else by characters kept where it parts from the others (:func:`cut_apart`). Only where none of
    these tells a row apart in the width does it read as its middle cut alone."""
    if all(cell_len(t) <= width for t in texts):
        return list(texts)
    apart = distinct(texts, width)
    rows = Rows(texts)
    out = []
    for text, by_units in zip(texts, apart, strict=True):
        cut = shorten(text, width)
        if by_units is not None and (len(cut) <= len(by_units) or rows.reads_as_another(cut, text)):
            out.append(by_units)
        elif cut == text or not rows.reads_as_another(cut, text):
            out.append(cut)
        else:
            out.append(cut_apart(text, rows, width) or cut)
    return out


class Rows:
    """The rows' texts, sorted forwards and backwards, so that the rows a shortened name could read as are
    found by its first piece (a prefix every such row has) or its last (a suffix), whichever fewer rows
    share — two binary searches — instead of by trying every row: a table of n rows costs about n log n,
    not n² pattern matches."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.forwards = sorted(set(texts))
        self.backwards = sorted(t[::-1] for t in self.forwards)

    @staticmethod
    def _span(items: list[str], prefix: str) -> tuple[int, int]:
        return bisect.bisect_left(items, prefix), bisect.bisect_left(items, prefix + "\U0010ffff")

    def matching(self, shown: str, text: str) -> Iterator[str]:
        """The rows other than ``text`` that ``shown`` could stand for."""
        pieces = shown.split(ELLIPSIS)
        first, last = pieces[0], pieces[-1]
        lo, hi = self._span(self.forwards, first)
        blo, bhi = self._span(self.backwards, last[::-1])
        if hi - lo <= bhi - blo:
            found = (o for o in self.forwards[lo:hi] if o.endswith(last))
        else:
            found = (r[::-1] for r in self.backwards[blo:bhi] if r.endswith(first[::-1]))
        return (o for o in found if o != text and _matches(shown, o))

    def reads_as_another(self, shown: str, text: str) -> bool:
        return next(self.matching(shown, text), None) is not None


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle replaced by an ellipsis: a name keeps its
    start (where it is in the model) and its end (what it is). A dotted or slashed name loses whole
    parts of its path where that keeps most of the width (``encoder.layer.9…self.value``). Blind to the
    other rows: :func:`shortened` checks it."""
    if cell_len(text) <= width:
        return text
    by_parts = _by_parts(text, width)
    if by_parts is not None and len(by_parts) * 3 >= width * 2:
        return by_parts
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _by_parts(text: str, width: int) -> str | None:
    """``text`` with whole middle parts of its path elided: parts taken from the start and the end in
    turn while they fit; None when the first and the last part alone do not fit."""
    parts = [m.span() for m in PART.finditer(text)]
    if len(parts) < 2:
        return None

    def joined(h: int, t: int) -> str:
        return text[:parts[h - 1][1]] + ELLIPSIS + text[parts[-t][0]:]

    h, t = 1, 1
    if cell_len(joined(h, t)) > width:
        return None
    grew = True
    while grew:
        grew = False
        for dh, dt in ((1, 0), (0, 1)):
            if h + dh + t + dt <= len(parts) - 1 and cell_len(joined(h + dh, t + dt)) <= width:
                h, t, grew = h + dh, t + dt, True
    return joined(h, t)


MARKS = 8  # places a name is kept at, beside its start and end, before :func:`cut_apart` gives up


def cut_apart(text: str, rows: Rows, width: int) -> str | None:
    """``text`` in at most ``width`` characters, reading as none of the other ``rows``: its start, its end and a
    few characters around each place where it parts from a row it would otherwise read as (the first
    character where they differ, else the last), those places added one at a time until no other row
    matches; None when that does not fit the width."""
    marks: list[int] = []
    for _ in range(MARKS + 1):
        kept = _keep_around(text, marks, width)
        if kept is None:
            return None
        shown = _render_kept(text, kept)
        confused = next(rows.matching(shown, text), None)
        if confused is None:
            return shown
        mark = _parting(text, confused, kept)
        if mark is None:
            return None
        marks.append(mark)
    return None


def _parting(text: str, other: str, kept: Sequence[Span]) -> int | None:
    """Where ``text`` parts from ``other`` and is not yet kept: the first character that differs
    counted from the start, else from the end; None when both are kept already."""
    head = next((i for i, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), min(len(text), len(other)))
    tail = next((i for i, (a, b) in enumerate(zip(reversed(text), reversed(other), strict=False)) if a != b),
                min(len(text), len(other)))
    for at in (head, len(text) - 1 - tail):
        if 0 <= at < len(text) and not any(lo <= at < hi for lo, hi in kept):
            return at
    return None


def _keep_around(text: str, marks: Sequence[int], width: int) -> list[Span] | None:
    """The runs of ``text`` to keep: its first and last character and each of ``marks``, each grown a
    character at a time in turn (a mark to both sides) while the shortened name fits ``width``; None
    when those characters alone do not fit."""
    cells = [0]
    for ch in text:
        cells.append(cells[-1] + cell_len(ch))
    n = len(text)
    runs = [[0, 1], [n - 1, n], *([m, m + 1] for m in sorted(set(marks)))]
    sides = [(0, 1), (1, -1)] + [(i, s) for i in range(2, len(runs)) for s in (-1, 1)]

    def size(spans: list[list[int]]) -> int:
        merged = _merge(spans)
        return sum(cells[hi] - cells[lo] for lo, hi in merged) + len(merged) - 1

    if size(runs) > width:
        return None
    grew = True
    while grew:
        grew = False
        for i, side in sides:
            lo, hi = runs[i]
            trial = [lo, hi + 1] if side > 0 else [lo - 1, hi]
            if trial[0] < 0 or trial[1] > n:
                continue
            runs[i] = trial
            if size(runs) <= width:
                grew = True
            else:
                runs[i] = [lo, hi]
    return _merge(runs)


def _merge(spans: Sequence[Sequence[int]]) -> list[Span]:
    """``spans`` sorted, those that touch or overlap joined."""
    out: list[Span] = []
    for lo, hi in sorted((s[0], s[1]) for s in spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def _render_kept(text: str, kept: Sequence[Span]) -> str:
    """``text``'s ``kept`` runs, an ellipsis for each run left out between them."""
    return ELLIPSIS.join(text[lo:hi] for lo, hi in kept)


def _matches(shown: str, other: str) -> bool:
    """Whether ``shown`` (pieces and ellipses) could stand for ``other``."""
    pattern = "^" + ".+".join(re.escape(p) for p in shown.split(ELLIPSIS)) + "$"
    return re.match(pattern, other, re.DOTALL) is not None


def units(text: str) -> list[Span]:
    """The spans of ``text``'s units: its path's parts, a numeric part joined to the part it indexes."""
    return [m.span() for m in _UNIT.finditer(text)]


def render(text: str, spans: Sequence[Span], kept: Sequence[bool]) -> str:
    """``text`` with its dropped units' runs replaced by one ellipsis each (their separators with them)."""
    out: list[str] = []
    gap = False
    for i, ((start, end), keep) in enumerate(zip(spans, kept, strict=True)):
        if not keep:
            gap = True
            continue
        if gap:
            out.append(ELLIPSIS)
        elif i > 0:
            out.append(text[spans[i - 1][1]:start])  # the separator between two kept units
        else:
            out.append(text[:start])  # a leading "/"
        out.append(text[start:end])
        gap = False
    if gap:
        out.append(ELLIPSIS)
    return "".join(out) + (text[spans[-1][1]:] if kept and kept[-1] else "")


def _pattern(text: str, spans: Sequence[Span], kept: Sequence[bool]) -> re.Pattern[str]:
    """What the shortened name could stand for: its kept runs in order, each ellipsis any units."""
    out = ["^"]
    i = 0
    while i < len(spans):
        if not kept[i]:
            while i < len(spans) and not kept[i]:
                i += 1
            out.append(".+")
            continue
        j = i
        while j + 1 < len(spans) and kept[j + 1]:
            j += 1
        lead = text[:spans[i][0]] if i == 0 else ""
        tail = text[spans[j][1]:] if j == len(spans) - 1 else ""
        out.append(_EDGE_BEFORE + re.escape(lead + text[spans[i][0]:spans[j][1]] + tail) + _EDGE_AFTER)
        i = j + 1
    out.append("$")
    return re.compile("".join(out))


def _shared(spans_of: Sequence[Sequence[str]], at: int, index: int) -> bool:
    """Whether name ``at``'s unit ``index`` is the same unit in every shown name, counted from the start
    or from the end (the common head, a shared suffix)."""
    mine = spans_of[at]
    unit, back = mine[index], len(mine) - index
    return all(len(other) > index and other[index] == unit or len(other) >= back and other[-back] == unit
               for other in spans_of)


def _orders(names_units: Sequence[Sequence[str]], at: int) -> list[list[int]]:
    """The orders name ``at``'s units are tried for dropping, best first: the units every name shares,
    then the others from the end of the path backwards (a path's head says where: ``stages.0/layers.2``),
    its last unit (what the row is) last; else from the start; else the last unit first."""
    n = len(names_units[at])
    shared = [i for i in range(n) if _shared(names_units, at, i)]
    rest = [i for i in range(n - 1) if i not in shared]
    last = [] if n - 1 in shared else [n - 1]  # a last unit every row shares says nothing either
    backwards, forwards = shared + rest[::-1], shared + rest
    return [backwards + last, forwards + last, last + backwards, last + forwards]


def distinct(texts: Sequence[str], width: int) -> list[str | None]:
    """Each of ``texts`` in at most ``width`` characters where dropping whole units gets it there while no
    shortened name reads as another of ``texts``; None where it does not (the caller cuts it further)."""
    spans = [units(t) for t in texts]
    words = [[t[s:e] for s, e in sp] for t, sp in zip(texts, spans, strict=True)]
    out: list[str | None] = []
    for at, text in enumerate(texts):
        out.append(text if cell_len(text) <= width else _drop_units(texts, spans, words, at, width))
    return out


def _drop_units(texts: Sequence[str], spans: Sequence[Sequence[Span]], words: Sequence[Sequence[str]],
                at: int, width: int) -> str | None:
    """The fewest units that tell name ``at`` apart (by the first order of :func:`_orders` that fits), then
    as many of the dropped ones back as the width has room for, the last dropped first."""
    text, sp = texts[at], spans[at]
    if len(sp) < 2:
        return None
    others = [t for i, t in enumerate(texts) if i != at and t != text]
    fewest: str | None = None  # the shortest rendering that tells the row apart, when none fits
    for order in _orders(words, at):
        kept = [True] * len(sp)
        dropped = []
        for i in order:
            kept[i] = False
            if any(kept) and not _ambiguous(text, sp, kept, others):
                dropped.append(i)
            else:
                kept[i] = True
        if cell_len(render(text, sp, kept)) > width:
            shown = render(text, sp, kept)
            fewest = shown if fewest is None or len(shown) < len(fewest) else fewest
            continue
        for i in reversed(dropped):  # use the room left
            kept[i] = True
            if cell_len(render(text, sp, kept)) > width:
                kept[i] = False
        return render(text, sp, kept)
    return _cut_apart(fewest, text, others, width) if fewest is not None else None


def _cut_apart(shown: str, text: str, others: Sequence[str], width: int) -> str | None:
    """``shown`` cut in the middle to ``width`` characters, if it still reads as no other row."""
    if width < 3:
        return None
    tail = (width - 1) // 2
    cut = shown[:width - 1 - tail] + ELLIPSIS + shown[-tail:]
    return None if reads_as_another(cut, text, others) else cut


def reads_as_another(shown: str, text: str, others: Sequence[str]) -> bool:
    """Whether ``shown`` (``text`` with runs of characters elided, ``…``) could as well stand for one of
    ``others``: its pieces, in order, from the start and to the end where no ellipsis stands there."""
    return any(o != text and _matches(shown, o) for o in others)


def _ambiguous(text: str, spans: Sequence[Span], kept: Sequence[bool], others: Sequence[str]) -> bool:
    runs = [text[s:e] for (s, e), k in zip(spans, kept, strict=True) if k]
    candidates = [o for o in others if all(r in o for r in runs)]  # cheap test before the pattern
    if not candidates:
        return False
    pattern = _pattern(text, spans, kept)
    return any(pattern.match(o) for o in candidates)
