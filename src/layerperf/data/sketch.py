"""A mergeable quantile sketch: exact for small groups, within a stated relative error for large ones.

A group's values are kept as they come while there are at most :data:`EXACT_MAX` of them, so the
median and p90 of a small group are numpy's, to the last bit. Past that they go into logarithmic
buckets (the scheme of DDSketch): a value ``v > 0`` falls in bucket ``ceil(log(v) / log(GAMMA))``
with ``GAMMA = (1 + ALPHA) / (1 - ALPHA)``, and a bucket stands for ``2 * GAMMA**i / (GAMMA + 1)``,
which is within ``ALPHA`` (0.5%) of every value in it. So a quantile read from the buckets is within
0.5% (relative) of the true order statistic of that rank; the median of an even count, the mean of two
such, is within 0.5% of the exact median. Zero is a bucket of its own (exact); negative values are
bucketed by their magnitude on a side of their own. Two sketches merge by adding their buckets (and
values), in any order, with the same result: what chunked and parallel reading need.
"""

from __future__ import annotations

import math

import numpy as np

from layerperf.util.arrays import grown

ALPHA = 0.005  # the relative error of a quantile read from the buckets
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
EXACT_MAX = 4096  # values a group keeps as they are before it is bucketed


class Sketch:
    """The values of one group (of one column), exact or bucketed; NaN values are counted apart."""

    __slots__ = ("bucket_counts", "bucket_keys", "count", "exact", "nan")

    def __init__(self) -> None:
        self.exact: list[np.ndarray] | None = []  # None once bucketed
        self.bucket_keys = np.zeros(0, dtype=np.int64)  # sorted; sign * (index + OFFSET), 0 for zero
        self.bucket_counts = np.zeros(0, dtype=np.int64)
        self.count = 0  # values that are not NaN
        self.nan = 0

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        bad = np.isnan(v)
        if bad.any():
            self.nan += int(bad.sum())
            v = v[~bad]
        if not v.size:
            return
        self.count += int(v.size)
        if self.exact is not None:
            self.exact.append(v.copy())
            if self.count > EXACT_MAX:
                self._bucket_all()
            return
        self._add_buckets(v)

    def merge(self, other: Sketch) -> None:
        self.nan += other.nan
        if other.exact is not None:
            for part in other.exact:
                self.count += int(part.size)
                if self.exact is not None:
                    self.exact.append(part)
                else:
                    self._add_buckets(part)
            if self.exact is not None and self.count > EXACT_MAX:
                self._bucket_all()
            return
        self.count += other.count
        if self.exact is not None:
            self._bucket_all()
        self._add_keys(other.bucket_keys, other.bucket_counts)

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    def _bucket_all(self) -> None:
        assert self.exact is not None
        values, self.exact = self.exact, None
        for part in values:
            self._add_buckets(part)

    @classmethod
    def of_buckets(cls) -> Sketch:
        """An empty sketch that buckets whatever it is given (what a group past EXACT_MAX is)."""
        sketch = cls()
        sketch.exact = None
        return sketch

    def take(self, v: np.ndarray) -> None:
        """Bucket these (non-NaN) values, in a bucketed sketch."""
        self.count += int(v.size)
        self._add_buckets(v)

    def take_buckets(self, other: Sketch) -> None:
        """Add a bucketed sketch's buckets, in a bucketed sketch."""
        self.count += other.count
        self._add_keys(other.bucket_keys, other.bucket_counts)

    def _add_buckets(self, v: np.ndarray) -> None:
        self._add_keys(*np.unique(_keys(v), return_counts=True))

    def _add_keys(self, keys: np.ndarray, counts: np.ndarray) -> None:
        if not keys.size:
            return
        all_keys = np.concatenate([self.bucket_keys, keys])
        all_counts = np.concatenate([self.bucket_counts, counts])
        self.bucket_keys, inverse = np.unique(all_keys, return_inverse=True)
        self.bucket_counts = np.bincount(inverse.reshape(-1), weights=all_counts,
                                         minlength=self.bucket_keys.size).astype(np.int64)

    def quantile(self, pct: float) -> float:
        """The ``pct`` percentile (numpy's linear interpolation between the two nearest ranks); NaN when
        the group holds a NaN or nothing. Exact while the group is small, else within ALPHA."""
        if self.nan or not self.count:
            return math.nan
        if self.exact is not None:
            return float(np.percentile(np.concatenate(self.exact), pct))
        pos = (self.count - 1) * (pct / 100)
        lower = math.floor(pos)
        upper = min(lower + 1, self.count - 1)
        a, b = self._at_rank(lower), self._at_rank(upper)
        return a + (b - a) * (pos - lower)

    def median(self) -> float:
        return self.quantile(50)

    def _at_rank(self, rank: int) -> float:
        cum = np.cumsum(self.bucket_counts)
        i = int(np.searchsorted(cum, rank, side="right"))
        return _value(int(self.bucket_keys[min(i, self.bucket_keys.size - 1)]))


_OFFSET = 1 << 20  # keeps every bucket index of a finite double positive, so the sign can mark the side


def _keys(v: np.ndarray) -> np.ndarray:
    """Sorted-order-preserving bucket keys: negative values below 0, zero at 0, positive above."""
    mag = np.abs(v)
    with np.errstate(divide="ignore"):
        index = np.ceil(np.log(mag) / _LOG_GAMMA)
    keys = np.where(mag > 0, index + _OFFSET, 0).astype(np.int64)
    return np.where(v < 0, -keys, keys)


def _value(key: int) -> float:
    if key == 0:
        return 0.0
    index = abs(key) - _OFFSET
    value = 2 * GAMMA ** index / (GAMMA + 1)
    return -value if key < 0 else value


class Sketches:
    """One :class:`Sketch` per group (dense codes 0..n-1), kept as columns: what folding a trace of
    hundreds of thousands of distinct ops needs (a Sketch object per op and figure takes ~0.5 KB before
    it holds a value; here a value takes 16 bytes and a group 16).

    Every quantile equals the one a Sketch per group given the same values gives (and merged as
    :meth:`quantiles` merges groups): a group's non-NaN values are kept as they are, in one log shared
    by the groups, while it holds at most :data:`EXACT_MAX` of them; past that they go into its
    buckets, which depend only on the values, not on when they were bucketed.
    """

    def __init__(self) -> None:
        self.count = np.zeros(0, dtype=np.int64)  # non-NaN values per group
        self.nan = np.zeros(0, dtype=np.int64)
        self._groups: list[np.ndarray] = []  # the exact values not bucketed yet, with their groups
        self._values: list[np.ndarray] = []
        self._logged = 0
        self._compact_at = LOG_MIN
        self._starts: np.ndarray | None = None  # with the log sorted by group: where each group starts
        self.bucketed: dict[int, Sketch] = {}  # the buckets of groups past EXACT_MAX

    def grow(self, n: int) -> None:
        """Make room for groups up to ``n - 1`` (and a few more: grown by doubling)."""
        if n > self.count.size:
            size = max(n, 2 * self.count.size)
            self.count, self.nan = grown(self.count, size), grown(self.nan, size)
            self._starts = None

    def add(self, groups: np.ndarray, values: np.ndarray) -> None:
        """Add ``values[i]`` to group ``groups[i]``."""
        groups = np.asarray(groups, dtype=np.int64)
        v = np.asarray(values, dtype=np.float64)
        if not groups.size:
            return
        self.grow(int(groups.max()) + 1)
        bad = np.isnan(v)
        if bad.any():
            self.nan += np.bincount(groups[bad], minlength=self.nan.size)
            groups, v = groups[~bad], v[~bad]
        self._log(groups, v.copy())

    def add_unknown(self, groups: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts[i]`` NaN values to group ``groups[i]`` (as :meth:`add` of that many NaN)."""
        if groups.size:
            self.grow(int(groups.max()) + 1)
            self.nan[groups] += counts

    def _log(self, groups: np.ndarray, values: np.ndarray) -> None:
        if not groups.size:
            return
        self.count += np.bincount(groups, minlength=self.count.size)
        self._groups.append(groups)
        self._values.append(values)
        self._logged += groups.size
        self._starts = None
        if self._logged >= self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """The log as one array, without the values of groups past EXACT_MAX: those go to their buckets."""
        groups = np.concatenate(self._groups) if self._groups else np.zeros(0, dtype=np.int64)
        values = np.concatenate(self._values) if self._values else np.zeros(0)
        over = self.count[groups] > EXACT_MAX
        if over.any():
            order = np.argsort(groups[over], kind="stable")
            mine, theirs = groups[over][order], values[over][order]
            cuts = np.flatnonzero(mine[1:] != mine[:-1]) + 1
            for g, part in zip(mine[np.concatenate([[0], cuts])].tolist(), np.split(theirs, cuts), strict=True):
                self._buckets(g).take(part)
            groups, values = groups[~over], values[~over]
        self._groups, self._values = [groups], [values]
        self._logged = int(groups.size)
        self._compact_at = max(2 * self._logged, LOG_MIN)

    def _buckets(self, group: int) -> Sketch:
        sketch = self.bucketed.get(group)
        if sketch is None:
            sketch = self.bucketed[group] = Sketch.of_buckets()
        return sketch

    def merge(self, other: Sketches, slots: np.ndarray) -> None:
        """Add ``other``'s values: its group ``i`` to group ``slots[i]`` here."""
        slots = np.asarray(slots, dtype=np.int64)
        if not slots.size:
            return
        self.grow(int(slots.max()) + 1)
        m = min(other.count.size, slots.size)
        self.nan[slots[:m]] += other.nan[:m]
        other._compact()
        for g, theirs in other.bucketed.items():
            self.count[slots[g]] += theirs.count
            self._buckets(int(slots[g])).take_buckets(theirs)
        self._log(slots[other._groups[0]], other._values[0])

    def quantiles(self, pct: float, members: list[list[int]] | None = None) -> np.ndarray:
        """The ``pct`` percentile of each group (with ``members``: of each union of groups), as a Sketch given
        the same values (merged) gives it: NaN where the values hold a NaN or none; numpy's exact figure
        while there are at most EXACT_MAX, else read from the buckets."""
        members = [[g] for g in range(self.count.size)] if members is None else members
        sizes = np.fromiter(map(len, members), dtype=np.int64, count=len(members))
        flat = np.fromiter((g for m in members for g in m), dtype=np.int64, count=int(sizes.sum()))
        self.grow(int(flat.max(initial=-1)) + 1)  # a group never given a value holds none
        union = np.repeat(np.arange(len(members)), sizes)
        count = np.bincount(union, weights=self.count[flat], minlength=len(members)).astype(np.int64)
        nan = np.bincount(union, weights=self.nan[flat], minlength=len(members))
        out = np.full(len(members), np.nan)
        starts, values = self._by_group()
        exact = (count > 0) & (nan == 0) & (count <= EXACT_MAX)
        if exact.any():  # each union's values side by side, then the unions of one size at a time
            keep = exact[union]
            own, sel = union[keep], flat[keep]
            gathered, owner = values[_ranges(starts, sel)], np.repeat(own, starts[sel + 1] - starts[sel])
            which = np.flatnonzero(exact)
            first = np.searchsorted(owner, which)
            for size in np.unique(count[which]).tolist():
                pick = count[which] == size
                out[which[pick]] = np.percentile(gathered[first[pick][:, None] + np.arange(size)], pct, axis=1)
        for u in np.flatnonzero((nan == 0) & (count > EXACT_MAX)).tolist():
            merged = Sketch.of_buckets()
            bucketed = [self.bucketed[g] for g in members[u] if g in self.bucketed]
            if bucketed:
                merged.take_buckets(_joined_buckets(bucketed))
            merged.take(values[_ranges(starts, np.asarray(members[u], dtype=np.int64))])
            out[u] = merged.quantile(pct)
        return out

    def quantile(self, group: int, pct: float) -> float:
        """The ``pct`` percentile of one group (as :meth:`quantiles` gives it)."""
        if not 0 <= group < self.count.size or self.nan[group] or not self.count[group]:
            return math.nan
        if self.count[group] > EXACT_MAX:
            return float(self.quantiles(pct, [[group]])[0])
        starts, values = self._by_group()
        return float(np.percentile(values[starts[group]:starts[group + 1]], pct))

    def median(self, group: int) -> float:
        return self.quantile(group, 50)

    def _by_group(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each group's values start in the log sorted by group (``n + 1`` offsets), and the log."""
        if self._starts is None or len(self._groups) > 1:
            self._compact()
            order = np.argsort(self._groups[0], kind="stable")
            self._groups, self._values = [self._groups[0][order]], [self._values[0][order]]
            self._starts = np.searchsorted(self._groups[0], np.arange(self.count.size + 1))
        return self._starts, self._values[0]


LOG_MIN = 1 << 16  # values logged before the log is first compacted


def _ranges(starts: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The log positions of these groups' values, group after group."""
    lens = starts[groups + 1] - starts[groups]
    return np.repeat(starts[groups] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))


def _joined_buckets(sketches: list[Sketch]) -> Sketch:
    """One bucketed sketch holding these bucketed sketches' buckets (added once, not one by one)."""
    joined = Sketch.of_buckets()
    joined.count = sum(s.count for s in sketches)
    joined._add_keys(np.concatenate([s.bucket_keys for s in sketches]),
                     np.concatenate([s.bucket_counts for s in sketches]))
    return joined
