"""Every derived figure, defined once (the layer table built from them is :mod:`layerperf.data.table`).

Each figure has two forms running the same code: a vectorized one over numpy columns (plural names:
:func:`distributions`, :func:`shares`, :func:`rates`, :func:`intensities`, :func:`per_flops`), for the
event table's analysis and the layer table, and a scalar one for a single row (singular names:
:func:`distribution`, :func:`share`, :func:`rate`, :func:`intensity`, :func:`per_flop`). Unknown is NaN in
the vectorized form and None in the scalar one, never 0: an empty set of durations has no total nor
median, a rate needs a known amount and a time > 0, an intensity bytes > 0, a share a whole > 0.

Output names are built from these figures: ``<stat>_us`` for a statistic of durations (:data:`STATS`),
``share`` and ``cum_share``, ``flops_per_s``, ``int_ops_per_s`` and ``bytes_per_s``, ``intensity``,
``<counter>_per_flop``, ``pct_of_peak`` (:func:`peak_pcts`: of ``layerperf calibrate``'s peaks). A layer's
self time is ``median_us``, its per-call median; ``analyze``'s rows combine a group's calls by its
aggregate instead (:data:`layerperf.analysis.aggregate.SELF_US`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

# Statistics of a set of values, by the name ``<stat>_us`` gives a duration's; p90 interpolates linearly.
STATS = ("total", "mean", "median", "p90", "min", "max")


# -- groups and statistics -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Groups:
    """Rows split into groups 0..count-1 (a group may be empty): the layout every grouped figure uses."""

    inverse: np.ndarray  # group of each row
    count: int
    rows: np.ndarray  # rows sorted by group, in their order within a group
    starts: np.ndarray  # first position in ``rows`` of each group
    sizes: np.ndarray  # rows per group


def groups(inverse: np.ndarray, count: int | None = None) -> Groups:
    """The groups of rows whose group numbers are ``inverse`` (``count`` groups: one past the largest if None)."""
    inverse = np.asarray(inverse, dtype=np.int64)
    if count is None:
        count = int(inverse.max()) + 1 if inverse.size else 0
    sizes = np.bincount(inverse, minlength=count)
    starts = np.zeros(count, dtype=np.int64)
    starts[1:] = np.cumsum(sizes)[:-1]
    return Groups(inverse, count, np.argsort(inverse, kind="stable"), starts, sizes)


def _one_group(n: int) -> Groups:
    return groups(np.zeros(n, dtype=np.int64), 1)


def grouped(values: Any, g: Groups, stat: str) -> np.ndarray:
    """One ``stat`` (:data:`STATS`) of ``values`` per group; NaN for an empty group and for one holding a
    NaN (unknown stays unknown)."""
    v = np.asarray(values, dtype=np.float64)
    if stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}")
    if np.isnan(v).all():  # a column nothing filled (no device time, no counter): no sort to make
        return np.full(g.count, np.nan)
    if stat in ("total", "mean"):
        out = np.bincount(g.inverse, weights=v, minlength=g.count)
        if stat == "mean":
            with np.errstate(invalid="ignore"):
                out = out / g.sizes
    elif stat in ("min", "max"):
        out = _extreme(v, g, np.minimum if stat == "min" else np.maximum)
    elif stat == "median":
        out = _median(_sorted(v, g), g)
    else:
        out = _percentile(_sorted(v, g), g, 90)
    return np.where(g.sizes > 0, out, np.nan)


def grouped_percentile(values: Any, g: Groups, pct: float) -> np.ndarray:
    """The ``pct`` percentile of ``values`` per group (linear interpolation, as numpy's default); NaN as
    :func:`grouped` says."""
    return np.where(g.sizes > 0, _percentile(_sorted(np.asarray(values, dtype=np.float64), g), g, pct), np.nan)


def _sorted(v: np.ndarray, g: Groups) -> np.ndarray:
    """The values by group, then by value: NaN last in its group."""
    return v[np.lexsort((v, g.inverse))]


def _extreme(v: np.ndarray, g: Groups, ufunc: np.ufunc) -> np.ndarray:
    out = np.full(g.count, np.nan)
    full = g.sizes > 0
    if full.any():  # an empty group has no segment: reduce over the others' starts only
        out[full] = ufunc.reduceat(v[g.rows], g.starts[full])
    return out


def _at(sorted_v: np.ndarray, g: Groups, offset: np.ndarray) -> np.ndarray:
    """The sorted values at ``offset`` within each group; NaN for a group that has a NaN or is empty."""
    full = g.sizes > 0
    out = np.full(g.count, np.nan)
    starts = g.starts[full]
    picked = sorted_v[starts + offset[full]]
    out[full] = np.where(np.isnan(sorted_v[starts + g.sizes[full] - 1]), np.nan, picked)
    return out


def _median(sorted_v: np.ndarray, g: Groups) -> np.ndarray:
    # the mean of the two middle values (the middle one twice when odd), as numpy's median
    return (_at(sorted_v, g, (g.sizes - 1) // 2) + _at(sorted_v, g, g.sizes // 2)) / 2


def _percentile(sorted_v: np.ndarray, g: Groups, pct: float) -> np.ndarray:
    # numpy's "linear" method, step for step, so a figure equals np.percentile's to the last bit
    pos = (g.sizes - 1) * (pct / 100)
    below = np.floor(pos)
    lower = np.maximum(below, 0).astype(np.int64)
    a = _at(sorted_v, g, lower)
    b = _at(sorted_v, g, np.minimum(lower + 1, np.maximum(g.sizes - 1, 0)))
    gamma = pos - below
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def statistic(values: Any, stat: str) -> float:
    """``stat`` (:data:`STATS`) of one set of values; NaN when there is none."""
    v = np.asarray(values, dtype=np.float64).ravel()
    return float(grouped(v, _one_group(v.size), stat)[0])


def median(values: Any) -> float:
    """The median of one set of values; NaN when there is none."""
    return statistic(values, "median")


def percentile(values: Any, pct: float) -> float:
    """The ``pct`` percentile of one set of values (linear interpolation); NaN when there is none."""
    v = np.asarray(values, dtype=np.float64).ravel()
    return float(grouped_percentile(v, _one_group(v.size), pct)[0])


def known(value: Any) -> float | None:
    """A scalar figure as a float, None when unknown (NaN or None)."""
    if value is None:
        return None
    x = float(value)
    return None if np.isnan(x) else x


# -- distributions of durations ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Distribution:
    """Statistics of a set of durations, in µs (from ns); NaN when there is none, never 0."""

    n: int
    total_us: float
    mean_us: float
    median_us: float
    p90_us: float
    min_us: float
    max_us: float


@dataclass(frozen=True, slots=True)
class Distributions:
    """A :class:`Distribution` per group, as columns."""

    n: np.ndarray
    total_us: np.ndarray
    mean_us: np.ndarray
    median_us: np.ndarray
    p90_us: np.ndarray
    min_us: np.ndarray
    max_us: np.ndarray

    def at(self, i: int) -> Distribution:
        return Distribution(int(self.n[i]), float(self.total_us[i]), float(self.mean_us[i]),
                            float(self.median_us[i]), float(self.p90_us[i]), float(self.min_us[i]),
                            float(self.max_us[i]))


def distributions(d_ns: Any, g: Groups) -> Distributions:
    """The distribution of each group's durations (given in ns)."""
    us = np.asarray(d_ns, dtype=np.float64) / 1e3
    srt = _sorted(us, g)  # one sort for both order statistics (NaN for an empty group, as every figure)
    return Distributions(
        n=g.sizes.astype(np.int64), total_us=grouped(us, g, "total"), mean_us=grouped(us, g, "mean"),
        median_us=_median(srt, g), p90_us=_percentile(srt, g, 90), min_us=grouped(us, g, "min"),
        max_us=grouped(us, g, "max"))


def distribution(d_ns: Any) -> Distribution:
    """The distribution of one set of durations (given in ns)."""
    v = np.asarray(d_ns, dtype=np.float64).ravel()
    return distributions(v, _one_group(v.size)).at(0)


# -- shares, rates, intensity, counts per FLOP -----------------------------------------------------
def shares(part: Any, whole: float) -> np.ndarray:
    """Each part's share of ``whole``; NaN where the part is unknown, all NaN unless whole > 0."""
    p = np.asarray(part, dtype=np.float64)
    return p / whole if whole > 0 else np.full(p.shape, np.nan)


def cumulative_shares(part: Any, whole: float, order: np.ndarray | None = None) -> np.ndarray:
    """The running share of ``whole`` of the parts taken in ``order`` (row order when None), each row's at
    its place: with ``order`` ranking parts largest first, the share of the rows up to this one. Unknown
    parts add nothing and have NaN."""
    p = np.asarray(part, dtype=np.float64)
    if order is None:
        order = np.arange(p.size)
    running = np.empty_like(p)
    running[order] = np.nancumsum(p[order])
    return shares(np.where(np.isnan(p), np.nan, running), whole)


def share(part: float | None, whole: float) -> float | None:
    return known(shares(_scalar(part), whole))


def ratios(num: Any, den: Any) -> np.ndarray:
    """``num / den`` element by element; NaN where either is unknown or ``den`` is not > 0."""
    n, d = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, n / d, np.nan)


def rates(amount: Any, time_s: Any) -> np.ndarray:
    """Achieved rate (FLOP/s, OP/s, bytes/s) of an amount over a time in s; NaN when the amount is unknown
    or the time not > 0."""
    return ratios(amount, time_s)


def rate(amount: float | None, time_s: float | None) -> float | None:
    return known(rates(_scalar(amount), _scalar(time_s)))


def intensities(flops: Any, bytes_: Any) -> np.ndarray:
    """Arithmetic intensity, FLOPs per byte moved; NaN when either is unknown or no byte moved."""
    return ratios(flops, bytes_)


def intensity(flops: float | None, bytes_: float | None) -> float | None:
    return known(intensities(_scalar(flops), _scalar(bytes_)))


def per_flops(count: Any, flops: Any) -> np.ndarray:
    """A counter's count per FLOP; NaN when either is unknown or the work has no FLOP."""
    return ratios(count, flops)


def per_flop(count: float | None, flops: float | None) -> float | None:
    return known(per_flops(_scalar(count), _scalar(flops)))


def integer_kernels(flops: Any, int_ops: Any) -> np.ndarray:
    """Rows whose work is mostly integer (more int ops than FLOPs: a quantized kernel, whose few FLOPs
    are its requantization); unknown counts as none."""
    f, i = np.nan_to_num(np.asarray(flops, dtype=np.float64)), np.nan_to_num(np.asarray(int_ops, dtype=np.float64))
    return np.asarray(i > f)


def peak_pcts(flops_per_s: Any, int_ops_per_s: Any, flops: Any, int_ops: Any,
              peak_flops_per_s: float | None, peak_int_ops_per_s: float | None) -> np.ndarray:
    """Achieved rate as a percentage of the calibrated peak: int ops/s over the int8 peak for integer
    kernels (:func:`integer_kernels`), FLOP/s over the float32 peak otherwise. NaN where the rate is
    unknown, where the work is none (a reshape's 0 FLOP/s is not 0 % of a compute peak) and where no
    peak applies."""
    is_int = integer_kernels(flops, int_ops)
    work = np.where(is_int, np.asarray(int_ops, dtype=np.float64), np.asarray(flops, dtype=np.float64))
    achieved = np.where(is_int, np.asarray(int_ops_per_s, dtype=np.float64),
                        np.asarray(flops_per_s, dtype=np.float64))
    peak = np.where(is_int, peak_int_ops_per_s or np.nan, peak_flops_per_s or np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((work > 0) & (peak > 0), achieved / peak * 100.0, np.nan)


def peak_pct(flops_per_s: float | None, int_ops_per_s: float | None, flops: float | None, int_ops: float | None,
             peak_flops_per_s: float | None, peak_int_ops_per_s: float | None) -> float | None:
    return known(peak_pcts(_scalar(flops_per_s), _scalar(int_ops_per_s), _scalar(flops), _scalar(int_ops),
                           peak_flops_per_s, peak_int_ops_per_s))


def rows_peak_pcts(rows: Sequence[Mapping[str, Any]], peak_flops_per_s: float | None,
                   peak_int_ops_per_s: float | None) -> list[float | None]:
    """:func:`peak_pcts` of table rows (the layer table's or analyze's: keys ``flops``, ``flops_per_s``,
    ``int_ops``, ``int_ops_per_s``), None where unknown."""
    def col(key: str) -> np.ndarray:
        return column([r.get(key) for r in rows])

    return listed(peak_pcts(col("flops_per_s"), col("int_ops_per_s"), col("flops"), col("int_ops"),
                             peak_flops_per_s, peak_int_ops_per_s))


def _scalar(x: float | None) -> np.ndarray:
    return np.asarray(np.nan if x is None else x, dtype=np.float64)


def column(values: Sequence[float | None]) -> np.ndarray:
    """Python figures (None for unknown) as a float column (NaN for unknown)."""
    return np.fromiter((np.nan if v is None else v for v in values), dtype=np.float64, count=len(values))


def listed(col: np.ndarray) -> list[float | None]:
    return [None if np.isnan(x) else x for x in col.tolist()]



# -- totals over layers ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Total:
    """A sum over layers of a figure some layers may not know (FLOPs, int ops, bytes): ``value`` is the sum
    over the known ones, None when none is known (unknown, never 0); ``unknown`` counts the layers left out,
    so a total with ``unknown`` > 0 is a lower bound."""

    value: float | None
    unknown: int


def total(values: Sequence[float | None], weights: Sequence[float] | None = None, per: float = 1.0) -> Total:
    """The :class:`Total` of ``values`` (None = unknown), each times its weight (calls), divided by ``per``
    (runs). One rule for every total: the same code for FLOPs, int ops and bytes."""
    w = [1.0] * len(values) if weights is None else weights
    known_terms = [v * k for v, k in zip(values, w, strict=True) if v is not None]
    unknown = len(values) - len(known_terms)
    return Total(sum(known_terms) / per if known_terms else None, unknown)


def total_text(value: float | None, unknown: int, fmt: Callable[[float | None], str]) -> str:
    """A total as text: ``?`` when nothing is known, ``≥ X (N layers unknown)`` when only some layers are,
    ``X`` when all are."""
    if value is None:
        return "?"
    if unknown:
        return f"≥ {fmt(value)} ({unknown} layer{'s' if unknown != 1 else ''} unknown)"
    return fmt(value)
