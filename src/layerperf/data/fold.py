"""Per-op accumulators that a trace is folded into chunk by chunk: analysis in memory that does not
grow with the trace.

A :class:`Folded` keeps, per row identity (name, op type, provider, shapes), the count of calls and
per figure (self, inclusive and device time, FLOPs, bytes, integer operations, counters) the sum, the
least, the largest, the sum of squares and — when asked for — a quantile sketch
(:mod:`layerperf.data.sketch`: exact for small groups, 0.5% otherwise); the inclusive figures also
summed over the calls that lie in no call of their own group (per grouping, as
:func:`layerperf.analysis.aggregate.aggregate` sums them). Folding is by tables of finished calls
(:meth:`Folded.add`: whole nesting trees, any number at a time), so every figure equals the one the
whole table gives: sums, counts, extremes exactly, medians exactly while a group is small.

:meth:`Folded.table` gives the aggregated table (one row per group of a grouping, figures combined
by sum, mean, median, max, min or count) that ``aggregate`` gives on the whole event table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.data.calls import GROUPINGS, STRING_COLUMNS, Calls, Interner, Labels
from layerperf.data.sketch import Sketches
from layerperf.util.arrays import grown, unique_inverse

FIGURES = ("dur_ns", "incl_ns", "device_ns", "device_incl_ns", "flops", "bytes", "int_ops")
# inclusive figures: summed once over calls nested in a call of their own group
ONCE = ("incl_ns", "device_incl_ns", "flops")
_STAT = {"sum": "sum", "count": "sum", "mean": "mean", "median": "median", "max": "max", "min": "min", "p90": "p90"}
Ident = tuple[str, str, str, str, str]


class _Figure:
    """One figure's running statistics, one slot per identity (numpy columns, grown by doubling)."""

    def __init__(self, size: int, quantiles: bool) -> None:
        self.sum = np.zeros(size)
        self.min = np.full(size, np.inf)
        self.max = np.full(size, -np.inf)
        self.sumsq = np.zeros(size)
        self.once: dict[str, np.ndarray] = {}  # grouping -> sum over outer calls
        self.sketch = Sketches() if quantiles else None

    def fit(self, size: int) -> None:
        """``size`` slots (the Folded decides when, growing by doubling)."""
        self.sum, self.sumsq = grown(self.sum, size), grown(self.sumsq, size)
        self.min, self.max = grown(self.min, size, np.inf), grown(self.max, size, -np.inf)
        self.once = {g: grown(v, size) for g, v in self.once.items()}

    def unknown(self, slots: np.ndarray, calls: np.ndarray) -> None:
        """These slots' calls (``calls`` of each) had no value for this figure (it was met after them, or only
        in another process's share): NaN, as folding a NaN value makes it."""
        if slots.size:
            self.sum[slots] = self.sumsq[slots] = self.min[slots] = self.max[slots] = np.nan
            if self.sketch is not None:
                self.sketch.add_unknown(slots, calls)

    def outer(self, grouping: str) -> np.ndarray:
        per = self.once.get(grouping)
        if per is None:
            per = self.once[grouping] = np.zeros(self.sum.size)
        return per


class Folded:
    """The calls of a trace folded into per-identity statistics; ``meta`` as a table's.

    ``quantiles``: keep a sketch per identity and figure (what ``median`` needs; costs time, so asked
    for). ``calls`` counts every call folded in, ``total_ns`` sums their total times; ``nested`` says
    whether any call's inclusive time differs from its self time; ``has_outer`` whether any table folded in
    had nesting flags. ``sink``: also handed every table folded in, as it comes (a timeline written as the
    trace streams). A folding costs time per call folded, and memory per identity a few numbers per figure
    (columns, not objects): a trace of hundreds of thousands of distinct ops (shapes that change every
    step) folds as fast as one of a few hundred.
    """

    def __init__(self, *, quantiles: bool = False, sink: Callable[[Calls], None] | None = None) -> None:
        self.quantiles = quantiles
        self.sink = sink
        self.index: dict[Ident, int] = {}
        self.idents: list[Ident] = []
        self.count = np.zeros(0, dtype=np.int64)
        self.figures: dict[str, _Figure] = {}
        self.meta: dict[str, Any] = {}
        self.calls = 0
        self.total_ns = 0.0
        self.nested = False
        self.has_outer = False
        self.has_device = False
        self.counter_labels: list[str] = []

    # -- folding ---------------------------------------------------------------------------------
    def _codes(self, table: Calls) -> np.ndarray:
        """Each row's identity slot (new identities get one)."""
        columns = [table.labels(c) for c in STRING_COLUMNS]
        key = np.zeros(len(table), dtype=np.int64)
        for labels in columns:
            key = key * max(len(labels.values), 1) + labels.codes
        combos, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # new identities in the order their rows come
        rows = first[order]
        idents = list(zip(*([labels.values[c] for c in labels.codes[rows].tolist()] for labels in columns),
                          strict=True))
        found = list(map(self.index.get, idents))
        known: list[int] = found if None not in found else [  # type: ignore[assignment]  # every slot is an int
            self._slot(ident) if slot is None else slot for slot, ident in zip(found, idents, strict=True)]
        slots = np.empty(combos.size, dtype=np.int64)
        slots[order] = known
        return slots[inverse.reshape(-1)]

    def _slot(self, ident: Ident) -> int:
        slot = self.index.get(ident)
        if slot is None:
            slot = self.index[ident] = len(self.idents)
            self.idents.append(ident)
            self._fit()
        return slot

    def _fit(self) -> None:
        n = len(self.idents)
        if n > self.count.size:
            size = max(n, 2 * self.count.size, 64)
            self.count = grown(self.count, size)
            for fig in self.figures.values():
                fig.fit(size)

    def names(self) -> set[str]:
        """The op names of the calls folded in."""
        return {self.idents[i][0] for i in np.flatnonzero(self.count[:len(self.idents)]).tolist()}

    def declare(self, idents: Sequence[Ident]) -> None:
        """Number these identities first, in this order (a reader's, in the order the file first names
        them), so that groups come in the order the whole table gives them, whatever order calls are
        folded in."""
        for ident in idents:
            if ident not in self.index:
                self.index[ident] = len(self.idents)
                self.idents.append(ident)
        self._fit()

    def _figure(self, name: str) -> _Figure:
        fig = self.figures.get(name)
        if fig is None:  # a counter met for the first time: the calls folded so far were not counted
            fig = self.figures[name] = _Figure(self.count.size, self.quantiles)
            called = np.flatnonzero(self.count)
            fig.unknown(called, self.count[called])
        return fig

    def add(self, table: Calls) -> None:
        """Fold in the calls of ``table`` (rows as read, whole nesting trees)."""
        if self.sink is not None:
            self.sink(table)
        if not len(table):
            return
        self.total_ns += float(table.total_ns.sum())
        for label in table.counters:
            if label not in self.counter_labels:
                self.counter_labels.append(label)
        slot = self._codes(table)
        # the figures worked out per identity present in this table (local codes), then added to its slot
        present, local = unique_inverse(slot)
        counts = np.bincount(local, minlength=present.size)
        names = (*FIGURES, *(f"counter:{c}" for c in self.counter_labels))
        figures = [self._figure(name) for name in names]  # before this table's calls are counted
        self.count[present] += counts
        self.calls += len(table)
        self.nested = self.nested or not bool((table.incl_ns == table.dur_ns).all())
        self.has_outer = self.has_outer or bool(table.outer)
        self.has_device = self.has_device or table.has_device
        order = np.argsort(local, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        for name, fig in zip(names, figures, strict=True):
            self._fold(fig, name, _column(table, name), slot, present, local, order, starts, table)

    def _fold(self, fig: _Figure, name: str, values: np.ndarray, slot: np.ndarray, present: np.ndarray,
              local: np.ndarray, order: np.ndarray, starts: np.ndarray, table: Calls) -> None:
        k = present.size
        fig.sum[present] += np.bincount(local, weights=values, minlength=k)  # a NaN makes its slot's sum NaN
        fig.sumsq[present] += np.bincount(local, weights=values * values, minlength=k)
        ordered = values[order]
        fig.min[present] = _least(fig.min[present], np.minimum.reduceat(ordered, starts))
        fig.max[present] = _most(fig.max[present], np.maximum.reduceat(ordered, starts))
        if name in ONCE:
            for grouping in GROUPINGS:
                outer = table.outer.get(grouping)
                fig.outer(grouping)[present] += np.bincount(
                    local, weights=values if outer is None else np.where(outer, values, 0.0), minlength=k)
        if fig.sketch is not None:
            fig.sketch.add(slot, values)

    def merge(self, other: Folded) -> None:
        """Fold in what ``other`` folded (another process's share of the same trace's tables): its
        identities in its order after this one's, its statistics combined slot by slot — sums and counts
        added, extremes compared, sketches merged — as if its tables had been folded in here."""
        n_other = len(other.idents)
        slots = np.fromiter((self._slot(ident) for ident in other.idents), dtype=np.int64, count=n_other)
        for label in other.counter_labels:
            if label not in self.counter_labels:
                self.counter_labels.append(label)
        hit = other.count[:n_other] > 0
        mine, theirs_at = slots[hit], np.flatnonzero(hit)
        for name in other.figures:
            self._figure(name)  # new here: the calls folded here had no value for it
        for name, fig in self.figures.items():
            if name not in other.figures:  # the other's calls had none
                fig.unknown(mine, other.count[theirs_at])
        self.count[slots] += other.count[:n_other]
        self.calls += other.calls
        self.total_ns += other.total_ns
        self.nested, self.has_outer = self.nested or other.nested, self.has_outer or other.has_outer
        self.has_device = self.has_device or other.has_device
        for name, theirs in other.figures.items():
            fig = self.figures[name]
            for grouping, per in theirs.once.items():
                fig.outer(grouping)[slots] += per[:n_other]
            fig.sum[mine] += theirs.sum[theirs_at]
            fig.sumsq[mine] += theirs.sumsq[theirs_at]
            fig.min[mine] = _least(fig.min[mine], theirs.min[theirs_at])
            fig.max[mine] = _most(fig.max[mine], theirs.max[theirs_at])
            if fig.sketch is not None and theirs.sketch is not None:
                fig.sketch.merge(theirs.sketch, slots)

    # -- the aggregated table --------------------------------------------------------------------
    def table(self, by: str = "name", how: str = "sum", *, types: Sequence[str] = (),
              name: re.Pattern[str] | None = None) -> Calls:
        """One row per group of ``by`` of the calls whose op type is one of ``types`` (all when empty)
        and whose name matches ``name``, figures combined by ``how``: ``aggregate(filter_table(...))``."""
        n = len(self.idents)
        keep = self.count[:n] > 0
        if types or name is not None:
            keep &= np.fromiter(((not types or ident[1] in types) and (name is None or bool(name.search(ident[0])))
                                 for ident in self.idents), dtype=bool, count=n)
        rows = np.flatnonzero(keep)
        # groups in the order aggregate makes them: by each grouping column's value, values numbered in
        # the order identities were first seen (all of them, as a table's labels number them); a group's
        # members in identity order
        values = [_numbered(column) for column in zip(*self.idents, strict=True)] if self.idents else \
            [(np.zeros(0, dtype=np.int64), [])] * len(STRING_COLUMNS)
        keys = [values[STRING_COLUMNS.index(c)][0][rows] for c in GROUPINGS[by]]
        order = np.lexsort(keys[::-1]) if rows.size else rows
        rows = rows[order]
        new = np.zeros(rows.size, dtype=bool)
        new[:1] = True
        for k in keys:
            k = k[order]
            new[1:] |= k[1:] != k[:-1]
        return self._aggregated(rows, np.cumsum(new) - 1, int(new.sum()), by, how, values)

    def _aggregated(self, rows: np.ndarray, group: np.ndarray, groups: int, by: str, how: str,
                    values: list[tuple[np.ndarray, list[str]]]) -> Calls:
        labels = {c: _labels(*values[p], rows, group, groups, "name" if c == "name" else "*")
                  for p, c in enumerate(STRING_COLUMNS)}
        sizes = np.bincount(group, weights=self.count[rows], minlength=groups).astype(np.int64)
        stat = _STAT[how]
        members = _Members(rows, group, groups, sizes)
        cols = {f: self._stat(f, members, stat, by) for f in FIGURES}
        total = self._stat("dur_ns", members, "sum", by)
        flops = cols["flops"] if self.meta.get("inclusive_flops") else self._stat("flops", members, stat)
        counters = {c: self._stat(f"counter:{c}", members, stat) for c in self.counter_labels}
        return Calls(name=labels["name"], op_type=labels["op_type"], provider=labels["provider"],
                     in_shapes=labels["in_shapes"], out_shapes=labels["out_shapes"], dur_ns=cols["dur_ns"],
                     total_ns=total, incl_ns=cols["incl_ns"], device_ns=cols["device_ns"], calls=sizes,
                     flops=flops, bytes=cols["bytes"], int_ops=cols["int_ops"], counters=counters,
                     meta={**self.meta, "aggregate_by": by, "aggregate": how},
                     device_incl_ns=cols["device_incl_ns"])

    def _stat(self, name: str, members: _Members, stat: str, by: str | None = None) -> np.ndarray:
        fig = self.figures.get(name)
        if fig is None:
            return np.full(members.groups, np.nan)
        rows, group = members.rows, members.group
        if stat == "sum" or stat == "mean":
            per = fig.once[by] if by is not None and name in ONCE and stat == "sum" and by in fig.once else fig.sum
            out = np.bincount(group, weights=per[rows], minlength=members.groups)
            if stat == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    out = out / members.sizes
            return out
        if stat in ("min", "max"):
            return members.first_extreme(fig.min[rows] if stat == "min" else fig.max[rows], stat == "max")
        if fig.sketch is None:
            raise ValueError("medians and percentiles need Folded(quantiles=True)")
        return fig.sketch.quantiles(90.0 if stat == "p90" else 50.0, members.lists())

    def stddev(self, name: str, slot: int) -> float:
        """Population standard deviation of a figure over one identity's calls."""
        fig = self.figures[name]
        n = int(self.count[slot])
        if not n:
            return float("nan")
        mean = fig.sum[slot] / n
        return float(np.sqrt(max(fig.sumsq[slot] / n - mean * mean, 0.0)))


@dataclass
class _Members:
    """The identities of each group of an aggregated table: ``rows`` (slots) grouped, ``group`` each one's."""

    rows: np.ndarray
    group: np.ndarray
    groups: int
    sizes: np.ndarray  # calls per group

    def starts(self) -> np.ndarray:
        return np.searchsorted(self.group, np.arange(self.groups))

    def first_extreme(self, values: np.ndarray, largest: bool) -> np.ndarray:
        """Each group's least (largest) value, NaN if it has one, the first member's where several tie (0.0
        and -0.0): what comparing the members one by one in order gives."""
        if not values.size:
            return np.zeros(0)
        extreme = (np.maximum if largest else np.minimum).reduceat(values, self.starts())
        at = np.flatnonzero(values == extreme[self.group])  # a group with a NaN has none: it stays NaN
        if not at.size:
            return extreme
        first = np.concatenate([[True], self.group[at][1:] != self.group[at][:-1]])
        extreme[self.group[at[first]]] = values[at[first]]
        return extreme

    def lists(self) -> list[list[int]]:
        return [part.tolist() for part in np.split(self.rows, self.starts()[1:])] if self.groups else []


def called_names(table: Calls | Folded) -> set[str]:
    """The op names the calls of a table (read whole or folded) have; a table's string column may name
    more (a Kineto table's also names its kernels)."""
    if isinstance(table, Folded):
        return table.names()
    return {table.name.values[c] for c in np.unique(table.name.codes).tolist()}


def _column(table: Calls, name: str) -> np.ndarray:
    if name.startswith("counter:"):
        values = table.counters.get(name[len("counter:"):])
        return np.full(len(table), np.nan) if values is None else values
    return np.asarray(getattr(table, name) if name != "device_incl_ns" else table.device_incl, dtype=np.float64)


def _numbered(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Each value's number, in the order first seen, and the distinct values."""
    seen = Interner()
    return np.asarray(seen.codes(values), dtype=np.int64), seen.values()


def _labels(codes: np.ndarray, values: list[str], rows: np.ndarray, group: np.ndarray, groups: int,
            mixed: str) -> Labels:
    """A group's value (``codes`` of ``values``, per identity) when all its identities agree; else
    "(n names)" (names) or "*"."""
    codes = codes[rows]
    pairs = np.unique(group * (len(values) + 1) + codes)  # each group's distinct values
    distinct = np.bincount(pairs // (len(values) + 1), minlength=groups)
    first = codes[np.searchsorted(group, np.arange(groups))] if rows.size else codes
    return Labels.of([values[c] if d == 1 else f"({d} names)" if mixed == "name" else "*"
                      for c, d in zip(first.tolist(), distinct.tolist(), strict=True)])


def _least(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Slot by slot the lesser, ``a`` where they tie (0.0 against -0.0); NaN wins: unknown stays unknown."""
    return np.where(np.isnan(b) | (b < a), b, a)


def _most(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(b) | (b > a), b, a)


