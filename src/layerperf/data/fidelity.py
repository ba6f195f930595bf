"""How far each layer's counts can be taken as the real run's: the stepwise executor's time for the
layer against its in-situ time, and how much the counts themselves spread over the passes.

The reference is the in-situ runs that alternated with the stepwise executor's timed passes
(``CounterInfo.insitu_median_ns``) where the profile has them, else the profile's own in-situ
medians (profiles written before, backends that count in situ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from layerperf.data.sections import CounterInfo

# A layer whose stepwise time is off its in-situ time by more than this share is flagged: its counts
# were taken under conditions measurably unlike the real run's.
OFF_SHARE = 0.2
# The bounds within which the layers' counts are taken to hold as in situ: the stepwise times summed over
# the layers within this share of the in-situ sum, and ranking the layers with at least this correlation.
TIME_TOLERANCE = 0.05
RANK_BOUND = 0.95
# The figures as shown (3 decimals) are what is held to the bounds.
SHOWN_DECIMALS = 3
BOUNDS = {"time_ratio": {"low": 1.0 - TIME_TOLERANCE, "high": 1.0 + TIME_TOLERANCE},
          "rank_correlation": {"low": RANK_BOUND}}
# Fewer layers than this rank at or near +-1 by chance: no rank correlation is given over a subset this small.
MIN_RANKED = 10
INTERLEAVED = "in-situ runs alternated with the timed stepwise passes"
PROFILED = "the profile's own in-situ runs"


def reference_ns(info: CounterInfo, insitu_median_us: Sequence[float]) -> tuple[list[float], str]:
    """Each layer's in-situ time the stepwise times are held to, and which runs it comes from."""
    if info.insitu_median_ns and len(info.insitu_median_ns) == len(insitu_median_us):
        return list(info.insitu_median_ns), INTERLEAVED
    return [u * 1e3 for u in insitu_median_us], PROFILED


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def layer_ratios(stepwise_ns: Sequence[float], reference: Sequence[float]) -> list[float | None]:
    """stepwise / in-situ per layer; None where either is unknown or the in-situ time is 0."""
    return [s / r if _finite(s) and _finite(r) and r > 0 else None
            for s, r in zip(stepwise_ns, reference, strict=False)]


def misses(time_ratio: float | None, rank_correlation: float | None) -> list[str] | None:
    """The names of the :data:`BOUNDS` the figures miss, each figure as shown (rounded to
    :data:`SHOWN_DECIMALS`); [] when they hold, None when either figure is unknown."""
    if time_ratio is None or rank_correlation is None:
        return None
    out = []
    for name, value in (("time_ratio", time_ratio), ("rank_correlation", rank_correlation)):
        shown, bound = round(value, SHOWN_DECIMALS), BOUNDS[name]
        if shown < bound["low"] or shown > bound.get("high", math.inf):
            out.append(name)
    return out


def off(ratio: float | None) -> bool | None:
    """Whether a layer's ratio is off by more than :data:`OFF_SHARE`; None when unknown."""
    return None if ratio is None else abs(ratio - 1.0) > OFF_SHARE


def count_cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation of a layer's counts over its passes (sample sd / mean); None below two
    known counts or a mean of 0 (where the spread of nothing says nothing)."""
    known = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if known.size < 2 or known.mean() == 0:
        return None
    return float(known.std(ddof=1) / known.mean())


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2
    return mean_rank[inverse]


def spearman(a: Any, b: Any) -> float | None:
    """Spearman rank correlation (ties at mean rank); None when undefined."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def halves_rank_correlation(runs_ns: Sequence[Sequence[float]], use: Sequence[bool] | None) -> float | None:
    """How well the in-situ runs rank the layers against themselves: the rank correlation between each
    layer's median over the even-numbered kept runs and over the odd-numbered ones (``runs_ns``:
    ``[layer][run]``, NaN where a run lacks the layer). Layers whose times differ by less than the
    runs' own noise swap places from one half to the other, so this is about the best rank correlation
    any other measurement can reach against the in-situ runs (of half as many runs each: if anything
    lower than the full runs' own). None below four kept runs or two layers known in both halves."""
    halves: list[list[float]] = [[], []]
    for times in runs_ns:
        kept_ = chosen(times, use)
        if len(kept_) < 4:
            return None
        for h in (0, 1):
            known = [t for t in kept_[h::2] if _finite(t)]
            halves[h].append(float(np.median(known)) if known else math.nan)
    both = [(a, b) for a, b in zip(*halves, strict=True) if _finite(a) and _finite(b)]
    return spearman([a for a, _ in both], [b for _, b in both]) if len(both) >= 2 else None


def chosen(values: Sequence[Any], use: Sequence[bool] | None) -> list[Any]:
    """The values of the passes ``use`` keeps (all when None or when the lengths differ)."""
    if use is None or len(use) != len(values):
        return list(values)
    return [v for v, u in zip(values, use, strict=True) if u]
