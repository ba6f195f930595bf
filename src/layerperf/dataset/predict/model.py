"""The predictor: a regressor per op type, fallbacks for op types the store never saw, and the run's
own cost between layers.

- **Layers.** For each op type (backend, domain, op type) with at least :data:`MIN_ROWS` rows in the
  store, a gradient-boosted tree ensemble (scikit-learn's HistGradientBoostingRegressor) learns the
  log of the time per unit of work from :mod:`.features`; an op type with fewer rows takes the store-wide
  regressor's estimate, else the median rate of its rows (at the same thread count where it has some).
  Each of the three is held under the longest time measured for a layer of its op type, run the same way,
  that did as much work or more (:class:`_Ceiling`).
- **Recurrent layers** (LSTM, GRU, RNN) are fitted on their work's terms instead, where their op type has
  :data:`MIN_ROWS` rows run the same way (:mod:`.recurrent`): a step-by-step recurrence and a one-off input
  projection have rates of their own, which one rate per FLOP did not tell apart.
- **Op types never seen** fall back to an estimate learned from the store itself (:mod:`.fallback`: by
  default one regressor over every layer of every op type, told the layer's category), else (a store
  of fewer than :data:`MIN_ROWS` layers) to a roofline on this machine's calibrated peaks
  (:mod:`layerperf.calibration.peaks`: FLOP/s, integer op/s and bytes/s at the thread count), scaled
  by the median ratio of measured time to roofline time over the store's layers at that thread count
  bound the same way, by compute or by memory (kernels do not run at peak); either no less than the
  store's shortest layers take. Where neither applies (no calibration, a layer with no known work or
  bytes) their time is unknown. All are flagged.
- **Between layers.** A run takes longer than its layers' self times (the executor's own work, thread
  pool hand-offs, what the layers' medians leave out): the log of whole-run latency over the sum of
  the layers is fitted by least squares on the log of that sum, the log of the layer count and the
  thread count, over the store's configurations.

scikit-learn is an optional extra (``pip install 'layerperf[predict]'``), imported when a predictor is
trained.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.calibration.peaks import Peaks
from layerperf.dataset.predict.fallback import fallback_matrix, floor_us, store_peaks
from layerperf.dataset.predict.features import Op, RunFactors, feature_matrix, work
from layerperf.dataset.predict.recurrent import RecurrentFit
from layerperf.dataset.predict.training import MeasuredConfig
from layerperf.errors import InputError

MIN_ROWS = 24  # rows an op type needs for a regressor of its own
SEED = 0

LEARNED = "learned"  # the op type's regressor
RECURRENT_FIT = "recurrent terms"  # a recurrent layer: its work's terms, fitted on its op type's rows (.recurrent)
FEW_ROWS = "median rate"  # an op type with too few rows for a regressor: the median rate of its rows
FEW_ROWS_WIDE = "store-wide, few rows"  # such an op type where the store-wide regressor exists (preferred)
ROOFLINE = "roofline"  # an op type the store never saw, no store-learned estimate, with a calibration
STORE_WIDE = "store-wide"  # never seen: the regressor over every op type of the store
STORE_ROOFLINE = "store roofline"  # never seen: a roofline on the store's own best rates (benchmarks only)
UNKNOWN = "unknown"  # never seen and nothing to estimate it from: no figure
FALLBACKS = (STORE_WIDE, STORE_ROOFLINE)  # the estimates learned from the store, without a calibration
INSTALL_HINT = "pip install 'layerperf[predict]'"


def sklearn_regressor() -> Any:
    """A HistGradientBoostingRegressor, or an InputError saying how to install scikit-learn."""
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor
    except ImportError:
        raise InputError("layerperf predict needs scikit-learn, which is not installed",
                         hint=INSTALL_HINT) from None
    return HistGradientBoostingRegressor(max_iter=150, learning_rate=0.1, max_leaf_nodes=15, min_samples_leaf=4,
                                         l2_regularization=1.0, early_stopping=False, random_state=SEED)


@dataclass(frozen=True, slots=True)
class LayerPrediction:
    """One layer's predicted self time (µs; None: unknown) and how it was predicted (:data:`LEARNED`,
    :data:`RECURRENT_FIT`, :data:`FEW_ROWS`, :data:`FEW_ROWS_WIDE`, :data:`ROOFLINE`, :data:`STORE_WIDE`,
    :data:`STORE_ROOFLINE`, :data:`UNKNOWN`); ``held``: its estimate was longer than its op type's ceiling
    (:class:`_Ceiling`) and is that ceiling."""

    name: str
    op_type: str
    domain: str
    us: float | None
    how: str
    held: bool = False

    @property
    def flagged(self) -> bool:
        """Whether the store never saw its op type."""
        return self.how in (ROOFLINE, *FALLBACKS, UNKNOWN)


@dataclass(frozen=True, slots=True)
class Prediction:
    """A model's predicted layers, their sum, the run's cost between them and the end-to-end latency (µs).
    ``latency_us`` and ``between_us`` are None where a layer's time is unknown; ``known_layers_us`` sums
    the layers that have one."""

    layers: tuple[LayerPrediction, ...]
    known_layers_us: float
    between_us: float | None
    latency_us: float | None

    @property
    def unseen_op_types(self) -> list[str]:
        """The op types the store never saw, sorted."""
        return sorted({f"{p.domain + '.' if p.domain else ''}{p.op_type}" for p in self.layers if p.flagged})


@dataclass(frozen=True, slots=True)
class _Rates:
    """An op type's few rows: the log rates by thread count, and all of them."""

    by_threads: dict[int, float]
    overall: float

    def at(self, threads: int) -> float:
        return self.by_threads.get(threads, self.overall)


@dataclass(frozen=True, slots=True)
class _Regressor:
    """A fitted regressor and the feature columns it was given: those with a value in some row (a column
    all NaN, such as the cache sizes of a store without them, is left out)."""

    model: Any
    columns: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray) -> _Regressor:
        columns = np.flatnonzero(~np.all(np.isnan(x), axis=0))
        model = sklearn_regressor()
        with _one_thread():
            model.fit(x[:, columns], y)
        return cls(model, columns)

    def predict(self, x: np.ndarray) -> np.ndarray:
        with _one_thread():
            return np.asarray(self.model.predict(x[:, self.columns]))


@dataclass(frozen=True, slots=True)
class _Ceiling:
    """An op type's measured layers of one kind of run, by their work: the longest time of those doing at
    least a given amount.

    A rate learned on some layers is carried to others, and a rate learned where the per-call cost is all
    (µs per FLOP of a one-element Mul) carried to a layer of a few hundred FLOPs multiplied it out of all
    measure: bert-base's 128-FLOP mask scaling, 7 µs, was predicted 3,387 µs from the kernel sweep's
    one-element Muls (25-30 µs). So a layer of an op type the store has, with known FLOPs or bytes, is not
    predicted to take longer than the longest measured layer of its op type, run the same way
    (:func:`_run_kind`: threads, co-runner), whose work in the same unit was as much or more; beyond the
    largest such work, or with no such layers, nothing bounds it (larger layers are carried by their rate).
    Layers timed per call and op types the store never saw are not held."""

    work: np.ndarray  # ascending
    longest_from: np.ndarray  # the longest time among the layers from this one on (as much work or more)

    @classmethod
    def of(cls, work: np.ndarray, us: np.ndarray) -> _Ceiling:
        order = np.argsort(work, kind="stable")
        return cls(work[order], np.maximum.accumulate(us[order][::-1])[::-1])

    def clamp(self, work: float, us: float) -> float:
        i = int(np.searchsorted(self.work, work, side="left"))
        return us if i == self.work.size else min(us, float(self.longest_from[i]))


CeilingKey = tuple[str, str, tuple[Any, ...]]  # op type, unit of work, kind of run


def _run_kind(run: RunFactors) -> tuple[Any, ...]:
    """What makes two runs' times of the same layer comparable: threads, a co-runner and where. Not the CPUs
    the run may use: a prediction on a machine whose CPU count no stored run had would find no ceiling."""
    return run.threads, run.corun, run.corun_shared


def _ceilings(rows: list[tuple[Op, RunFactors, float, float]]) -> dict[CeilingKey, _Ceiling]:
    """Per op type, unit of work (FLOPs or bytes; none for layers timed per call) and kind of run, the
    :class:`_Ceiling` of its measured layers (``rows``: op, run, log rate, µs)."""
    groups: dict[CeilingKey, list[tuple[float, float]]] = defaultdict(list)
    for op, run, _, us in rows:
        units, unit = work(op)
        if unit != "call":
            groups[(op.key(run.backend), unit, _run_kind(run))].append((units, us))
    return {k: _Ceiling.of(np.array([w for w, _ in v]), np.array([u for _, u in v])) for k, v in groups.items()}


def _one_thread() -> Any:
    """OpenMP held to one thread: the fits are small, and OpenMP's threads waiting on each other on a busy
    host made them 50x slower (2 cores, load 10)."""
    from threadpoolctl import threadpool_limits  # installed with scikit-learn

    return threadpool_limits(limits=1, user_api="openmp")


@dataclass(frozen=True, slots=True)
class _Roofline:
    """A roofline's peaks and, per (thread count, bound), the median of measured over roofline time of the
    store's layers: how far from the peaks its kernels run."""

    peaks: Peaks
    efficiency: dict[tuple[int, str], float]

    @classmethod
    def of(cls, configs: Sequence[MeasuredConfig], peaks: Peaks) -> _Roofline:
        return cls(peaks, _efficiency(configs, peaks))

    def us(self, op: Op, threads: int) -> float | None:
        bound = roofline_us(op, self.peaks, threads)
        if bound is None:
            return None
        us, kind = bound
        same = [v for (_, k), v in self.efficiency.items() if k == kind]
        return us * self.efficiency.get((threads, kind), float(np.median(same)) if same else 1.0)


class Predictor:
    """Regressors per op type, their ceilings, the fallbacks for op types without rows and the between-layers
    fit, trained on a store's configurations."""

    def __init__(self, regressors: dict[str, _Regressor], rates: dict[str, _Rates], roofline: _Roofline | None,
                 fallback: tuple[str, _Regressor | _Roofline] | None, floor: dict[int, float],
                 between: _Between | None, ceilings: dict[CeilingKey, _Ceiling] | None = None,
                 recurrent: RecurrentFit | None = None) -> None:
        self.regressors, self.rates, self.roofline = regressors, rates, roofline
        self.fallback, self.floor, self.between = fallback, floor, between
        self.ceilings = ceilings or {}
        self.recurrent = recurrent or RecurrentFit({}, _run_kind)

    @classmethod
    def fit(cls, configs: Sequence[MeasuredConfig], peaks: Peaks | None = None,
            fallback: str | None = STORE_WIDE) -> Predictor:
        """Train on ``configs`` (their layers with a measured time > 0); ``peaks`` for the roofline;
        ``fallback``: the estimate learned from the store for an op type it lacks (:data:`STORE_WIDE`,
        :data:`STORE_ROOFLINE`; None: none), tried before the calibrated roofline: per layer of the zoo's
        op types that only one model has, the store-wide regressor came closer than the roofline on this
        machine's calibration (README, "What it reaches here")."""
        measured = _rows(configs)
        rows = [(op, run, log_rate) for op, run, log_rate, _ in measured]
        groups: dict[str, list[tuple[Op, RunFactors, float]]] = defaultdict(list)
        for op, run, log_rate in rows:
            groups[op.key(run.backend)].append((op, run, log_rate))
        regressors: dict[str, _Regressor] = {}
        rates: dict[str, _Rates] = {}
        for key, group in groups.items():
            target = np.array([v for _, _, v in group])
            if len(group) >= MIN_ROWS:
                regressors[key] = _Regressor.fit(feature_matrix([(op, run) for op, run, _ in group]), target)
            else:
                by: dict[int, list[float]] = defaultdict(list)
                for _, run, v in group:
                    by[run.threads].append(v)
                rates[key] = _Rates({t: float(np.median(v)) for t, v in by.items()}, float(np.median(target)))
        if not regressors:
            sklearn_regressor()  # without scikit-learn, say so here as anywhere
        roofline = _Roofline.of(configs, peaks) if peaks is not None else None
        return cls(regressors, rates, roofline, _fit_fallback(fallback, configs, rows), floor_us(configs),
                   _fit_between(configs), _ceilings(measured),
                   RecurrentFit.of(((op, run, us) for op, run, _, us in measured), _run_kind, MIN_ROWS))

    def layer_times(self, ops: Sequence[Op], run: RunFactors) -> list[LayerPrediction]:
        """Each layer's predicted self time and how it was found."""
        out: list[LayerPrediction | None] = [None] * len(ops)
        batches: dict[str, list[int]] = defaultdict(list)
        few: list[int] = []
        unseen: list[int] = []
        for i, op in enumerate(ops):
            key = op.key(run.backend)
            fitted = self.recurrent.us(op, run)
            if fitted is not None:
                rec_us, held = self._held(op, run, fitted)
                out[i] = LayerPrediction(op.name, op.op_type, op.domain, rec_us, RECURRENT_FIT, held)
            elif key in self.regressors:
                batches[key].append(i)
            elif key in self.rates:
                few.append(i)
            else:
                unseen.append(i)
        for key, idx in batches.items():
            logs = self.regressors[key].predict(feature_matrix([(ops[i], run) for i in idx]))
            for i, v in zip(idx, logs, strict=True):
                op = ops[i]
                rated, held = self._held(op, run, math.exp(float(v)) * work(op)[0])
                out[i] = LayerPrediction(op.name, op.op_type, op.domain, rated, LEARNED, held)
        for i, (few_us, how) in zip(few, self._few_rows_us([ops[i] for i in few], run), strict=True):
            op = ops[i]
            few_held, held = self._held(op, run, few_us)
            out[i] = LayerPrediction(op.name, op.op_type, op.domain, few_held, how, held)
        for i, (us, how) in zip(unseen, self._fallback_us([ops[i] for i in unseen], run), strict=True):
            out[i] = LayerPrediction(ops[i].name, ops[i].op_type, ops[i].domain, us, how)
        return [p for p in out if p is not None]

    def _held(self, op: Op, run: RunFactors, us: float) -> tuple[float, bool]:
        """``us`` held under the op type's :class:`_Ceiling` for this kind of run, where it has one, and
        whether that lowered it."""
        units, unit = work(op)
        ceiling = self.ceilings.get((op.key(run.backend), unit, _run_kind(run)))
        held = ceiling.clamp(units, us) if ceiling is not None else us
        return held, held < us

    def _few_rows_us(self, ops: list[Op], run: RunFactors) -> list[tuple[float, str]]:
        """Each layer of an op type with too few rows for a regressor of its own: the store-wide regressor
        (which has those rows among all the others) where there is one, else the median rate of its rows.
        The median of a handful of rates carried to another shape went far wrong (a Squeeze of a few bytes
        in one model carried to 262 KB in another: x20,000; zoo and exports on the Xeon); the store-wide
        estimate held those layers within x2 for 81% of them, the median rate 43%."""
        wide = self.fallback is not None and self.fallback[0] == STORE_WIDE
        learned = self._fallback_us(ops, run, roofline=False) if wide else [(None, UNKNOWN)] * len(ops)
        return [(us, FEW_ROWS_WIDE) if us is not None else
                (math.exp(self.rates[op.key(run.backend)].at(run.threads)) * work(op)[0], FEW_ROWS)
                for op, (us, _) in zip(ops, learned, strict=True)]

    def _fallback_us(self, ops: list[Op], run: RunFactors, roofline: bool = True) -> list[tuple[float | None, str]]:
        """Each layer whose op type has no rows: the store-learned estimate, else the calibrated roofline,
        no less than the store's shortest layers take (:func:`~.fallback.floor_us`): (µs, how); (None,
        unknown) where neither applies (no fallback fitted and no calibration, a layer with neither work
        nor bytes to scale it by)."""
        found: list[tuple[float | None, str]] = [(None, UNKNOWN)] * len(ops)
        if ops and self.fallback is not None:
            how, model = self.fallback
            if isinstance(model, _Roofline):
                found = [(model.us(op, run.threads), how) for op in ops]
            else:
                logs = model.predict(fallback_matrix([(op, run) for op in ops]))
                found = [(math.exp(float(v)) * work(op)[0] if work(op)[1] != "call" else None, how)
                         for op, v in zip(ops, logs, strict=True)]
        if roofline and self.roofline is not None:
            found = [(us, how) if us is not None else (self.roofline.us(op, run.threads), ROOFLINE)
                     for op, (us, how) in zip(ops, found, strict=True)]
        least = self.floor.get(run.threads, min(self.floor.values(), default=0.0))
        return [(max(us, least), how) if us is not None else (None, UNKNOWN) for us, how in found]

    def predict(self, ops: Sequence[Op], run: RunFactors) -> Prediction:
        """The layers' times, the cost between them, and the whole run's latency."""
        layers = self.layer_times(ops, run)
        known = float(sum(p.us for p in layers if p.us is not None))
        if any(p.us is None for p in layers) or not layers:
            return Prediction(tuple(layers), known, None, None)
        latency = known * self.between_ratio(known, len(layers), run.threads)
        return Prediction(tuple(layers), known, latency - known, latency)

    def between_ratio(self, layers_us: float, n_layers: int, threads: int) -> float:
        """Whole-run latency over the layers' sum, as fitted on the store (1 where nothing was fitted)."""
        return 1.0 if self.between is None else self.between.ratio(layers_us, n_layers, threads)


def _rows(configs: Sequence[MeasuredConfig]) -> list[tuple[Op, RunFactors, float, float]]:
    """Every layer with a measured time > 0, with its run, the log of its time per unit of work and the time."""
    return [(op, cfg.factors, math.log(us / work(op)[0]), us)
            for cfg in configs for op, us in zip(cfg.ops, cfg.layer_us, strict=True) if us is not None and us > 0]


def _fit_fallback(how: str | None, configs: Sequence[MeasuredConfig],
                  rows: list[tuple[Op, RunFactors, float]]) -> tuple[str, _Regressor | _Roofline] | None:
    """The store-learned estimate ``how`` names; None where it is None or the store is too small for it
    (fewer than :data:`MIN_ROWS` layers)."""
    if how is None or len(rows) < MIN_ROWS:
        return None
    if how == STORE_ROOFLINE:
        peaks = store_peaks(configs)
        return (how, _Roofline.of(configs, peaks)) if peaks is not None else None
    if how != STORE_WIDE:
        raise ValueError(f"no fallback {how!r}: one of {', '.join(FALLBACKS)}")
    x = fallback_matrix([(op, run) for op, run, _ in rows])
    return how, _Regressor.fit(x, np.array([y for _, _, y in rows]))


def roofline_us(op: Op, peaks: Peaks, threads: int) -> tuple[float, str] | None:
    """The least time the layer's work and bytes take at ``peaks``' rates for ``threads`` (µs), and what
    bounds it (``compute`` or ``memory``); None where neither its work nor its bytes has a known rate."""
    terms = []
    for amount, rates, bound in ((op.flops, peaks.flops_per_s, "compute"), (op.int_ops, peaks.int_ops_per_s, "compute"),
                                 (_moved(op), peaks.bytes_per_s, "memory")):
        rate = peaks.at(rates, threads)
        if amount and rate:
            terms.append((amount / rate * 1e6, bound))
    return max(terms) if terms else None


def _moved(op: Op) -> int | None:
    if op.bytes_read is None and op.bytes_written is None:
        return None
    return (op.bytes_read or 0) + (op.bytes_written or 0)


def _efficiency(configs: Sequence[MeasuredConfig], peaks: Peaks) -> dict[tuple[int, str], float]:
    """Per thread count and bound (compute, memory), the median of measured time over roofline time across
    the store's layers: how far from the peaks its kernels run."""
    ratios: dict[tuple[int, str], list[float]] = defaultdict(list)
    for cfg in configs:
        for op, us in zip(cfg.ops, cfg.layer_us, strict=True):
            bound = roofline_us(op, peaks, cfg.factors.threads)
            if us and bound:
                ratios[(cfg.factors.threads, bound[1])].append(us / bound[0])
    return {key: float(np.median(v)) for key, v in ratios.items()}


def _between_x(layers_us: float, n_layers: int, threads: int) -> np.ndarray:
    return np.array([1.0, math.log(max(layers_us, 1.0)), math.log(max(n_layers, 1)), float(threads)])


HUBER_K = 1.345  # Huber's threshold, in robust standard deviations of the residuals


@dataclass(frozen=True)
class _Between:
    """log(latency / layers' sum) = :func:`_between_x` · ``coef``, held within ``[low, high]``: what the fit
    gives the store's own configurations (a model with fewer or more layers than any of them is not
    extrapolated to a ratio the fit gives none of them: least squares on two layer counts and one outlier gave
    0.48 for lstm, 2.42 for gpt2-small, 1.66 for resnet50, where the store's others ran 0.97-1.04)."""

    coef: np.ndarray
    low: float
    high: float

    def ratio(self, layers_us: float, n_layers: int, threads: int) -> float:
        log = float(_between_x(layers_us, n_layers, threads) @ self.coef)
        return math.exp(min(max(log, self.low), self.high))


def _fit_between(configs: Sequence[MeasuredConfig]) -> _Between | None:
    """A robust fit (Huber's, :func:`_robust_lstsq`) of log(latency / layers' sum) on :func:`_between_x`;
    None without a configuration whose both are known. Too few configurations for every term keep the
    intercept alone, their median. A prediction is held within what the fit gives the store's configurations:
    an outlier weighs little in the fit and does not widen that range, while a factor a few configurations
    share (8 threads among many at 1) is fitted and kept. (Leaving the configurations the speed checks
    flagged out of the fit did worse on the lent host's store: 40.7% within ±10% against 48.1%; README,
    "What it reaches here".)"""
    xs, ys = [], []
    for cfg in configs:
        total = cfg.layers_us
        if cfg.latency_us and total:
            xs.append(_between_x(total, len(cfg.ops), cfg.factors.threads))
            ys.append(math.log(cfg.latency_us / total))
    if not xs:
        return None
    x, y = np.array(xs), np.array(ys)
    if len(xs) < 2 * x.shape[1]:
        median = float(np.median(y))
        return _Between(np.array([median, 0.0, 0.0, 0.0]), median, median)
    coef = _robust_lstsq(x, y)
    fitted = x @ coef
    return _Between(coef, float(fitted.min()), float(fitted.max()))


def _robust_lstsq(x: np.ndarray, y: np.ndarray, iterations: int = 50) -> np.ndarray:
    """Huber's M-estimate of ``y ~ x`` by iteratively reweighted least squares: a residual past
    :data:`HUBER_K` robust standard deviations (the residuals' MAD) weighs in inversely to its size."""
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    for _ in range(iterations):
        residual = y - x @ coef
        scale = max(1.4826 * float(np.median(np.abs(residual - np.median(residual)))), 1e-6)
        weight = np.sqrt(np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(residual), 1e-12)))
        new = np.linalg.lstsq(x * weight[:, None], y * weight, rcond=None)[0]
        if np.allclose(new, coef, rtol=0.0, atol=1e-9):
            return np.asarray(new, dtype=np.float64)
        coef = new
    return np.asarray(coef, dtype=np.float64)
