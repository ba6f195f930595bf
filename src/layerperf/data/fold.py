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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerperf.data.calls import GROUPINGS, STRING_COLUMNS, Calls, Labels
from layerperf.data.sketch import Sketch

FIGURES = ("dur_ns", "incl_ns", "device_ns", "device_incl_ns", "flops", "bytes", "int_ops")
# inclusive figures: summed once over calls nested in a call of their own group
ONCE = ("incl_ns", "device_incl_ns", "flops")
_STAT = {"sum": "sum", "count": "sum", "mean": "mean", "median": "median", "max": "max", "min": "min", "p90": "p90"}
Ident = tuple[str, str, str, str, str]


@dataclass
class _Figure:
    """One figure's running statistics, one slot per identity."""

    sum: list[float] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    sumsq: list[float] = field(default_factory=list)
    once: dict[str, list[float]] = field(default_factory=dict)  # grouping -> sum over outer calls
    sketch: list[Sketch] = field(default_factory=list)


class Folded:
    """The calls of a trace folded into per-identity statistics; ``meta`` as a table's.

    ``quantiles``: keep a sketch per identity and figure (what ``median`` needs; costs time, so asked
    for). ``calls`` counts every call folded in, ``total_ns`` sums their total times; ``nested`` says
    whether any call's inclusive time differs from its self time; ``has_outer`` whether any table folded in
    had nesting flags. ``sink``: also handed every table folded in, as it comes (a timeline written as the
    trace streams).
    """

    def __init__(self, *, quantiles: bool = False, sink: Callable[[Calls], None] | None = None) -> None:
        self.quantiles = quantiles
        self.sink = sink
        self.index: dict[Ident, int] = {}
        self.idents: list[Ident] = []
        self.count: list[int] = []
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
        slots = np.empty(combos.size, dtype=np.int64)
        for k in np.argsort(first, kind="stable").tolist():  # new identities in the order their rows come
            row = int(first[k])
            ident = tuple(labels.values[labels.codes[row]] for labels in columns)
            slots[k] = self._slot(ident)
        return slots[inverse.reshape(-1)]

    def _slot(self, ident: Ident) -> int:
        slot = self.index.get(ident)
        if slot is None:
            slot = self.index[ident] = len(self.idents)
            self.idents.append(ident)
            self.count.append(0)
            for fig in self.figures.values():
                _grow(fig, self.quantiles)
        return slot

    def names(self) -> set[str]:
        """The op names of the calls folded in."""
        return {ident[0] for ident, n in zip(self.idents, self.count, strict=True) if n}

    def declare(self, idents: Sequence[Ident]) -> None:
        """Number these identities first, in this order (a reader's, in the order the file first names
        them), so that groups come in the order the whole table gives them, whatever order calls are
        folded in."""
        for ident in idents:
            self._slot(tuple(ident))  # type: ignore[arg-type]

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
        for name in (*FIGURES, *(f"counter:{c}" for c in self.counter_labels)):
            if name not in self.figures:
                self.figures[name] = fig = _Figure()
                for _ in self.idents:
                    _grow(fig, self.quantiles)
        slot = self._codes(table)
        n = len(self.idents)
        counts = np.bincount(slot, minlength=n)
        for i in np.flatnonzero(counts).tolist():
            self.count[i] += int(counts[i])
        self.calls += len(table)
        self.nested = self.nested or not bool((table.incl_ns == table.dur_ns).all())
        self.has_outer = self.has_outer or bool(table.outer)
        self.has_device = self.has_device or table.has_device
        order = np.argsort(slot, kind="stable")
        present = np.flatnonzero(counts)
        starts = np.searchsorted(slot[order], present)
        for name, fig in self.figures.items():
            values = _column(table, name)
            self._fold(fig, name, values, slot, order, present, starts, table)

    def _fold(self, fig: _Figure, name: str, values: np.ndarray, slot: np.ndarray, order: np.ndarray,
              present: np.ndarray, starts: np.ndarray, table: Calls) -> None:
        n = len(self.idents)
        sums = np.bincount(slot, weights=values, minlength=n)  # NaN in a slot's values: its sum is NaN
        squares = np.bincount(slot, weights=values * values, minlength=n)
        ordered = values[order]
        mins = np.minimum.reduceat(ordered, starts) if starts.size else starts
        maxs = np.maximum.reduceat(ordered, starts) if starts.size else starts
        for k, i in enumerate(present.tolist()):
            fig.sum[i] += float(sums[i])
            fig.sumsq[i] += float(squares[i])
            fig.min[i] = _fmin(fig.min[i], float(mins[k]))
            fig.max[i] = _fmax(fig.max[i], float(maxs[k]))
        if name in ONCE:
            for grouping in GROUPINGS:
                outer = table.outer.get(grouping)
                once = np.bincount(slot, weights=values if outer is None else np.where(outer, values, 0.0),
                                   minlength=n)
                per = fig.once.setdefault(grouping, [0.0] * n)
                per.extend([0.0] * (n - len(per)))
                for i in present.tolist():
                    per[i] += float(once[i])
        if self.quantiles:
            bounds = [*starts.tolist(), ordered.size]
            for k, i in enumerate(present.tolist()):
                fig.sketch[i].add(ordered[bounds[k]:bounds[k + 1]])

    def merge(self, other: Folded) -> None:
        """Fold in what ``other`` folded (another process's share of the same trace's tables): its
        identities in its order after this one's, its statistics combined slot by slot — sums and counts
        added, extremes compared, sketches merged — as if its tables had been folded in here."""
        slots = [self._slot(ident) for ident in other.idents]
        for label in other.counter_labels:
            if label not in self.counter_labels:
                self.counter_labels.append(label)
        for i, j in enumerate(slots):
            self.count[j] += other.count[i]
        self.calls += other.calls
        self.total_ns += other.total_ns
        self.nested, self.has_outer = self.nested or other.nested, self.has_outer or other.has_outer
        self.has_device = self.has_device or other.has_device
        n = len(self.idents)
        for name, theirs in other.figures.items():
            fig = self.figures.get(name)
            if fig is None:
                self.figures[name] = fig = _Figure()
                for _ in range(n):
                    _grow(fig, self.quantiles)
            for grouping, per in theirs.once.items():
                mine = fig.once.setdefault(grouping, [0.0] * n)
                mine.extend([0.0] * (n - len(mine)))
                for i, j in enumerate(slots):
                    mine[j] += per[i]
            for i, j in enumerate(slots):
                if not other.count[i]:
                    continue
                fig.sum[j] += theirs.sum[i]
                fig.sumsq[j] += theirs.sumsq[i]
                fig.min[j] = _fmin(fig.min[j], theirs.min[i])
                fig.max[j] = _fmax(fig.max[j], theirs.max[i])
                if self.quantiles:
                    fig.sketch[j].merge(theirs.sketch[i])

    # -- the aggregated table --------------------------------------------------------------------
    def table(self, by: str = "name", how: str = "sum", *, types: Sequence[str] = (),
              name: re.Pattern[str] | None = None) -> Calls:
        """One row per group of ``by`` of the calls whose op type is one of ``types`` (all when empty)
        and whose name matches ``name``, figures combined by ``how``: ``aggregate(filter_table(...))``."""
        keep = [i for i, ident in enumerate(self.idents) if self.count[i]
                and (not types or ident[1] in types) and (name is None or name.search(ident[0]))]
        columns = GROUPINGS[by]
        positions = [STRING_COLUMNS.index(c) for c in columns]
        # groups in the order aggregate makes them: by each grouping column's value, values numbered in
        # the order identities were first seen (all of them, as a table's labels number them)
        first_seen = [{v: k for k, v in reversed(list(enumerate(ident[p] for ident in self.idents)))}
                      for p in positions]
        group_of: dict[tuple[str, ...], list[int]] = {}
        for i in keep:
            group_of.setdefault(tuple(self.idents[i][p] for p in positions), []).append(i)
        keys = sorted(group_of, key=lambda k: tuple(first_seen[j][v] for j, v in enumerate(k)))
        members = [group_of[k] for k in keys]
        return self._aggregated(members, by, how)

    def _aggregated(self, members: list[list[int]], by: str, how: str) -> Calls:
        labels = {c: _labels([[self.idents[i][p] for i in m] for m in members],
                             "name" if c == "name" else "*") for p, c in enumerate(STRING_COLUMNS)}
        sizes = np.asarray([sum(self.count[i] for i in m) for m in members], dtype=np.int64)
        stat = _STAT[how]
        cols = {f: self._stat(f, members, sizes, stat, by) for f in FIGURES}
        total = self._stat("dur_ns", members, sizes, "sum", by)
        flops = cols["flops"] if self.meta.get("inclusive_flops") else self._stat("flops", members, sizes, stat)
        counters = {c: self._stat(f"counter:{c}", members, sizes, stat) for c in self.counter_labels}
        return Calls(name=labels["name"], op_type=labels["op_type"], provider=labels["provider"],
                     in_shapes=labels["in_shapes"], out_shapes=labels["out_shapes"], dur_ns=cols["dur_ns"],
                     total_ns=total, incl_ns=cols["incl_ns"], device_ns=cols["device_ns"], calls=sizes,
                     flops=flops, bytes=cols["bytes"], int_ops=cols["int_ops"], counters=counters,
                     meta={**self.meta, "aggregate_by": by, "aggregate": how},
                     device_incl_ns=cols["device_incl_ns"])

    def _stat(self, name: str, members: list[list[int]], sizes: np.ndarray, stat: str,
              by: str | None = None) -> np.ndarray:
        fig = self.figures.get(name)
        if fig is None:
            return np.full(len(members), np.nan)
        if stat == "sum" or stat == "mean":
            per = fig.once[by] if by is not None and name in ONCE and stat == "sum" and by in fig.once else fig.sum
            out = np.asarray([sum(per[i] for i in m) for m in members], dtype=np.float64)
            if stat == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    out = out / sizes
            return out
        if stat in ("min", "max"):
            pick = _fmin if stat == "min" else _fmax
            src = fig.min if stat == "min" else fig.max
            out_list = []
            for m in members:
                v = src[m[0]]
                for i in m[1:]:
                    v = pick(v, src[i])
                out_list.append(v)
            return np.asarray(out_list, dtype=np.float64)
        pct = 90.0 if stat == "p90" else 50.0
        return np.asarray([self._quantile(fig, m, pct) for m in members], dtype=np.float64)

    def _quantile(self, fig: _Figure, members: list[int], pct: float) -> float:
        if not self.quantiles:
            raise ValueError("medians and percentiles need Folded(quantiles=True)")
        if len(members) == 1:
            return fig.sketch[members[0]].quantile(pct)
        merged = Sketch()
        for i in members:
            merged.merge(fig.sketch[i])
        return merged.quantile(pct)

    def stddev(self, name: str, slot: int) -> float:
        """Population standard deviation of a figure over one identity's calls."""
        fig = self.figures[name]
        n = self.count[slot]
        if not n:
            return float("nan")
        mean = fig.sum[slot] / n
        return float(np.sqrt(max(fig.sumsq[slot] / n - mean * mean, 0.0)))


def called_names(table: Calls | Folded) -> set[str]:
    """The op names the calls of a table (read whole or folded) have; a table's string column may name
    more (a Kineto table's also names its kernels)."""
    if isinstance(table, Folded):
        return table.names()
    return {table.name.values[c] for c in np.unique(table.name.codes).tolist()}


def _grow(fig: _Figure, quantiles: bool) -> None:
    fig.sum.append(0.0)
    fig.sumsq.append(0.0)
    fig.min.append(float("inf"))
    fig.max.append(float("-inf"))
    for per in fig.once.values():
        per.append(0.0)
    if quantiles:
        fig.sketch.append(Sketch())


def _column(table: Calls, name: str) -> np.ndarray:
    if name.startswith("counter:"):
        values = table.counters.get(name[len("counter:"):])
        return np.full(len(table), np.nan) if values is None else values
    return np.asarray(getattr(table, name) if name != "device_incl_ns" else table.device_incl, dtype=np.float64)


def _fmin(a: float, b: float) -> float:
    return a if a != a else b if b != b else min(a, b)  # NaN wins: unknown stays unknown


def _fmax(a: float, b: float) -> float:
    return a if a != a else b if b != b else max(a, b)


def _labels(values: list[list[str]], mixed: str) -> Labels:
    """A group's value when all its identities agree; else "(n names)" (names) or "*"."""
    out = []
    for group in values:
        distinct = list(dict.fromkeys(group))
        out.append(distinct[0] if len(distinct) == 1 else f"({len(distinct)} names)" if mixed == "name" else "*")
    return Labels.of(out)
