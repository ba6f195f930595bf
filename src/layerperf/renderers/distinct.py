"""Names shortened so that the rows of a table still tell apart.

Shortening each name on its own makes rows alike: ``encoder.layer.1.output.dense/MatMulAddFusion`` and
``encoder.layer.4.intermediate.dense/MatMulAddFusion`` both become ``encoder…MatMulAddFusion``. Here a
name loses whole units of its path (``layer.1`` is one unit: a label and its index), those every shown
name shares first (the common head ``encoder``, a shared ``dense``), then the others; a unit is kept
whenever eliding it would let the shortened name read as another shown row's (``…layer.1…MatMulAddFusion``
beside ``encoder.layer.1.intermediate.dense/…``). Units are dropped one at a time, so a name keeps as
much as its width has room for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len

ELLIPSIS = "…"
_UNIT = re.compile(r"[^./:]+(?:\.\d+(?=[./:]|$))*")  # a path part with its indices: stages.0, layer.11, Conv_output_0
_EDGE_BEFORE = r"(?:^|(?<=[./:]))"
_EDGE_AFTER = r"(?=[./:]|$)"

Span = tuple[int, int]


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
    pattern = re.compile("^" + ".+".join(re.escape(p) for p in shown.split(ELLIPSIS)) + "$", re.DOTALL)
    return any(o != text and pattern.match(o) for o in others)


def _ambiguous(text: str, spans: Sequence[Span], kept: Sequence[bool], others: Sequence[str]) -> bool:
    runs = [text[s:e] for (s, e), k in zip(spans, kept, strict=True) if k]
    candidates = [o for o in others if all(r in o for r in runs)]  # cheap test before the pattern
    if not candidates:
        return False
    pattern = _pattern(text, spans, kept)
    return any(pattern.match(o) for o in candidates)
