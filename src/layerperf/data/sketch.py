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
