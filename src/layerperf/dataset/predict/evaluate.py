"""Leave-one-model-out: how well the predictor does on models it was not trained on.

For each model of the store, a predictor is trained on every other model's configurations and
predicts each of this model's configurations end to end; the prediction is set against the latency
the store measured (``configs.latency_median_us``). The figures are nn-Meter's: the fraction of
(model, configuration) pairs predicted within ±10% of the measurement, and the root mean square of
the relative errors (RMSPE), overall and per model.

The layers predicted are those a prediction for a new model uses — the runtime's optimized graph,
found without a timed run (:mod:`.graph`) — where the model can be opened here (a built-in model, a
file still at its path); otherwise (or with ``layers="store"``) the layers the store recorded for the
configuration, which leaves fusion detection out of what is evaluated.

Kernel sweeps (``kernels-conv``, ``kernels-dense``, ``kernels-rnn``: :mod:`layerperf.models.zoo.kernels`) are
training data: every predictor is trained on them, none is held out and scored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.calibration.peaks import Peaks
from layerperf.dataset.predict.features import Op
from layerperf.dataset.predict.model import STORE_WIDE, Prediction, Predictor
from layerperf.dataset.predict.training import MeasuredConfig, StoreData
from layerperf.errors import InputError
from layerperf.models.zoo import is_sweep

WITHIN = 0.10  # nn-Meter's bound: a prediction within ±10% of the measurement
LayersOf = Callable[[MeasuredConfig], tuple[tuple[Op, ...], str]]


@dataclass(frozen=True, slots=True)
class Pair:
    """One (model, configuration): the predicted and measured latency (µs), the relative error, where its
    layers came from (``graph``, ``store``), the op types never seen in training, how its runs went: runs
    set aside as slowed or disturbed (None: the store does not say), flagged."""

    model: str
    label: str
    predicted_us: float | None
    measured_us: float
    predicted_layers_us: float | None
    measured_layers_us: float | None
    layers: str
    n_layers: int
    unseen: tuple[str, ...]
    runs_slowed: int | None
    runs_disturbed: int | None
    flagged: bool

    @property
    def clean(self) -> bool:
        """Whether no run was set aside by the speed checks and the statistics stand on clean runs."""
        return not (self.runs_slowed or self.runs_disturbed or self.flagged)

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured; None where the prediction is unknown."""
        return None if self.predicted_us is None else self.predicted_us / self.measured_us - 1.0

    @property
    def layers_error(self) -> float | None:
        """The same for the layers' times summed, the run's cost between them left out."""
        if self.predicted_layers_us is None or not self.measured_layers_us:
            return None
        return self.predicted_layers_us / self.measured_layers_us - 1.0


@dataclass(frozen=True, slots=True)
class Score:
    """Pairs scored, the fraction within ±10%, RMSPE and the mean absolute relative error (fractions);
    pairs with an unknown prediction count as outside and are left out of the errors."""

    pairs: int
    within_10pct: float | None
    rmspe: float | None
    mean_abs_error: float | None

    @classmethod
    def of(cls, pairs: Sequence[Pair], layers: bool = False) -> Score:
        """The score of the pairs' end-to-end errors (with ``layers``, of their layers' sums)."""
        errors = np.array([e for p in pairs if (e := p.layers_error if layers else p.error) is not None])
        if not pairs:
            return cls(0, None, None, None)
        within = float(np.sum(np.abs(errors) <= WITHIN)) / len(pairs)
        if not errors.size:
            return cls(len(pairs), within, None, None)
        return cls(len(pairs), within, float(np.sqrt(np.mean(errors ** 2))), float(np.mean(np.abs(errors))))


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Every pair, the score overall, per model, over the clean pairs (:attr:`Pair.clean`), and of the
    layers' sums alone (``layers``: the predicted layers against the measured ones, the cost between
    them and the whole run's own noise left out)."""

    pairs: tuple[Pair, ...]
    overall: Score
    per_model: dict[str, Score]
    clean: Score
    layers: Score
    sweeps: tuple[str, ...] = ()  # kernel sweeps in the store: trained on, never held out


def store_layers(cfg: MeasuredConfig) -> tuple[tuple[Op, ...], str]:
    """The layers the store recorded for ``cfg``."""
    return cfg.ops, "store"


def leave_one_model_out(data: StoreData, layers_of: LayersOf = store_layers, peaks: Peaks | None = None,
                        progress: Callable[[str], None] | None = None, fallback: str | None = STORE_WIDE) -> Evaluation:
    """Train without each model in turn and predict its configurations (``peaks`` and ``fallback`` as
    :meth:`Predictor.fit` takes them; kernel sweeps trained on in every turn, never held out); InputError with
    fewer than two models besides the sweeps, or none of their configurations with a measured latency."""
    sweeps = tuple(m for m in data.models() if is_sweep(m))
    models = [m for m in data.models() if m not in sweeps]
    if len(models) < 2:
        beside = f" beside the kernel sweeps {', '.join(sweeps)}, which are trained on, not held out" if sweeps else ""
        raise InputError(f"leave-one-model-out needs two models or more; the store {data.source} holds "
                         f"{len(models)} ({', '.join(models) or 'none'}){beside}", hint="collect more models into it")
    if not any(c.latency_us for c in data.configs if c.model in models):
        raise InputError(f"the store {data.source} has no configuration with a measured latency to compare with")
    pairs: list[Pair] = []
    for model in models:
        if progress:
            progress(model)
        train = [c for c in data.configs if c.model != model]
        predictor = Predictor.fit(train, peaks, fallback)
        for cfg in (c for c in data.configs if c.model == model and c.latency_us):
            ops, source = layers_of(cfg)
            pred = predictor.predict(ops, cfg.factors)
            pairs.append(_pair(cfg, pred, source, len(ops)))
    per_model = {m: Score.of([p for p in pairs if p.model == m]) for m in models}
    return Evaluation(tuple(pairs), Score.of(pairs), per_model, Score.of([p for p in pairs if p.clean]),
                      Score.of(pairs, layers=True), sweeps)


def _pair(cfg: MeasuredConfig, pred: Prediction, source: str, n_layers: int) -> Pair:
    assert cfg.latency_us is not None
    known = pred.known_layers_us if pred.latency_us is not None else None
    return Pair(cfg.model, cfg.label(), pred.latency_us, float(cfg.latency_us), known, cfg.layers_us, source,
                n_layers, tuple(pred.unseen_op_types), cfg.runs_slowed, cfg.runs_disturbed, cfg.flagged)

