"""Per-group accumulators the streamed GPU views fold their blocks into, merged block by block.

:class:`Stats` keeps, per group (dense codes 0..n-1), the count, total, least, largest, mean and sum of
squared deviations (merged per block by Chan's pairwise rule, so a standard deviation agrees with
numpy's two-pass one within 1e-9 relative however the values are cut in blocks) and, when asked, the
median from :class:`~layerperf.data.sketch.Sketches` (exact for a group of at most 4096 values).
Totals of integer-ns values (what the readers give) are exact in float64 in any order, so counts,
totals, means, least and largest do not depend on the block size. :class:`Keys` gives arbitrary
integer keys (a stream and cause, a kernel name and its launcher) dense codes as blocks bring them;
:func:`runs` cuts a sorted block where its key changes.
Memory: a few numbers per group, plus at most 4096 values (or buckets) per group for the median.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from layerperf.data.sketch import Sketches
from layerperf.util.arrays import grown


def runs(keys: np.ndarray) -> Iterator[tuple[int, int]]:
    """The (start, end) of each run of equal ``keys`` in a sorted block (a stream's, an op call's rows)."""
    cuts = (np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()
    if keys.size:
        yield from zip([0, *cuts], [*cuts, int(keys.size)], strict=True)


class Keys:
    """Dense codes for integer keys, in the order they are first seen."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}

    def codes(self, keys: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(keys, return_inverse=True)
        dense = np.fromiter((self.index.setdefault(k, len(self.index)) for k in uniq.tolist()),
                            dtype=np.int64, count=uniq.size)
        return dense[inverse.reshape(-1)]

    @property
    def keys(self) -> list[int]:
        """The keys by code."""
        return list(self.index)


class Stats:
    """Count, total, least, largest, mean, squared deviations (and optionally a median sketch) per group."""

    def __init__(self, medians: bool = False) -> None:
        self.count = np.zeros(0, dtype=np.int64)
        self.total = np.zeros(0)
        self.least = np.zeros(0)
        self.most = np.zeros(0)
        self.mean = np.zeros(0)
        self.m2 = np.zeros(0)
        self.sketches = Sketches() if medians else None

    def _grow(self, n: int) -> None:
        if n <= self.count.size:
            return
        self.count = grown(self.count, n)
        for name, fill in (("total", 0.0), ("least", np.inf), ("most", -np.inf), ("mean", 0.0), ("m2", 0.0)):
            setattr(self, name, grown(getattr(self, name), n, fill))
        if self.sketches is not None:
            self.sketches.grow(n)

    def add(self, codes: np.ndarray, values: np.ndarray) -> None:
        """Fold one block: ``values[i]`` belongs to group ``codes[i]``."""
        if not codes.size:
            return
        self._grow(int(codes.max()) + 1)
        size = self.count.size
        n_b = np.bincount(codes, minlength=size)
        sum_b = np.bincount(codes, weights=values, minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_b = sum_b / n_b
        m2_b = np.bincount(codes, weights=(values - mean_b[codes]) ** 2, minlength=size)
        self._merge(n_b, sum_b, mean_b, m2_b)
        np.minimum.at(self.least, codes, values)
        np.maximum.at(self.most, codes, values)
        if self.sketches is not None:
            self.sketches.add(codes, values)

    def _merge(self, n_b: np.ndarray, sum_b: np.ndarray, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        # Chan et al.'s merge of two groups' (count, mean, M2); a group new in this block takes the block's
        n_a = self.count
        n = n_a + n_b
        hit, fresh = n_b > 0, n_a == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = mean_b - self.mean
            mean = np.where(fresh, mean_b, self.mean + delta * n_b / n)
            m2 = np.where(fresh, m2_b, self.m2 + m2_b + delta ** 2 * n_a * n_b / n)
        self.mean = np.where(hit, mean, self.mean)
        self.m2 = np.where(hit, m2, self.m2)
        self.count = n
        self.total = self.total + sum_b

    def std(self, g: int) -> float:
        """Population standard deviation of group ``g``."""
        return float(np.sqrt(self.m2[g] / self.count[g]))

    def median(self, g: int) -> float:
        assert self.sketches is not None
        return self.sketches.median(g)
