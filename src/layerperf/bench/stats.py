"""Statistics of the samples of one measurement: location, spread and IQR outliers.

Location figures (min, median, mean, p90, max) and quartiles come from :mod:`layerperf.data.figures`, the
code the per-layer table uses; this module adds what a repeated measurement needs: the spread
(stddev, coefficient of variation) and Tukey's IQR outliers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.data.figures import distribution, percentile

# Above this coefficient of variation a figure is flagged as not to be trusted.
NOISY_CV = 0.05


@dataclass(frozen=True, slots=True)
class SampleStats:
    """Per-call times over the samples, in µs. ``cv`` is stddev / mean (sample stddev, ddof=1)."""

    n: int
    min_us: float
    median_us: float
    mean_us: float
    p90_us: float
    max_us: float
    stddev_us: float
    cv: float
    q1_us: float
    q3_us: float
    outliers_low: int  # samples below Q1 - 1.5 IQR
    outliers_high: int  # samples above Q3 + 1.5 IQR

    @property
    def outliers(self) -> int:
        return self.outliers_low + self.outliers_high

    @property
    def noisy(self) -> bool:
        return not self.cv <= NOISY_CV  # NaN (one sample) counts as noisy


def outlier_masks(values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tukey's fences: (below Q1 - 1.5 IQR, above Q3 + 1.5 IQR) as boolean masks."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return np.zeros(0, bool), np.zeros(0, bool)
    q1, q3 = percentile(v, 25), percentile(v, 75)
    iqr = q3 - q1
    return v < q1 - 1.5 * iqr, v > q3 + 1.5 * iqr


def describe(per_call_ns: Sequence[float] | np.ndarray) -> SampleStats:
    """Statistics of per-call times given in ns (one value per sample)."""
    ns = np.asarray(per_call_ns, dtype=np.float64)
    if ns.size == 0:
        raise ValueError("no samples")
    d = distribution(ns)
    us = ns / 1e3
    below, above = outlier_masks(us)
    std = float(us.std(ddof=1)) if us.size > 1 else float("nan")
    return SampleStats(n=d.n, min_us=d.min_us, median_us=d.median_us, mean_us=d.mean_us, p90_us=d.p90_us,
                       max_us=d.max_us, stddev_us=std, cv=std / d.mean_us if d.mean_us > 0 else float("nan"),
                       q1_us=percentile(us, 25), q3_us=percentile(us, 75),
                       outliers_low=int(below.sum()), outliers_high=int(above.sum()))


def deciles_us(values_ns: Sequence[float]) -> tuple[float, float, float] | None:
    """(p10, median, p90) in µs, or None without values: the spread of the CPU-speed yardstick."""
    if not values_ns:
        return None
    us = np.asarray(values_ns, dtype=np.float64) / 1e3
    return percentile(us, 10), percentile(us, 50), percentile(us, 90)
