"""How far each layer's counts can be taken as the real run's: the stepwise executor's time for the
layer against its in-situ time, and how much the counts themselves spread over the passes.

The reference is the in-situ runs that alternated with the stepwise executor's timed passes
(``CounterInfo.insitu_median_ns``) where the profile has them, else the profile's own in-situ
medians (profiles written before, backends that count in situ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from layerperf.data.sections import CounterInfo

# A layer whose stepwise time is off its in-situ time by more than this share is flagged: its counts
# were taken under conditions measurably unlike the real run's.
OFF_SHARE = 0.2
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
