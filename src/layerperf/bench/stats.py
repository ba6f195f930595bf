"""Statistics of the samples of one measurement: location, spread and IQR outliers.

Location figures (min, median, mean, p90, max) come from :func:`layerperf.figures.distribution`, the
same function the per-layer table uses; this module adds what a repeated measurement needs: the
spread (stddev, coefficient of variation) and Tukey's IQR outliers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.figures import distribution

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
    q1, q3 = np.percentile(v, [25, 75])
    iqr = q3 - q1
    return v < q1 - 1.5 * iqr, v > q3 + 1.5 * iqr


def describe(per_call_ns: Sequence[float] | np.ndarray) -> SampleStats:
    """Statistics of per-call times given in ns (one value per sample)."""
    ns = np.asarray(per_call_ns, dtype=np.float64)
    if ns.size == 0:
        raise ValueError("no samples")
    _, mean, median, p90, low_us, high_us = distribution(ns)
    us = ns / 1e3
    below, above = outlier_masks(us)
    std = float(us.std(ddof=1)) if us.size > 1 else float("nan")
    q1, q3 = np.percentile(us, [25, 75])
    return SampleStats(n=int(us.size), min_us=low_us, median_us=median, mean_us=mean, p90_us=p90, max_us=high_us,
                       stddev_us=std, cv=std / mean if mean > 0 else float("nan"), q1_us=float(q1), q3_us=float(q3),
                       outliers_low=int(below.sum()), outliers_high=int(above.sum()))


def deciles_us(values_ns: Sequence[float]) -> tuple[float, float, float] | None:
    """(p10, median, p90) in µs, or None without values: the spread of the CPU-speed yardstick."""
    if not values_ns:
        return None
    p10, med, p90 = np.percentile(np.asarray(values_ns, dtype=np.float64) / 1e3, [10, 50, 90])
    return float(p10), float(med), float(p90)
