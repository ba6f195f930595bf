"""The views of ``layerperf predict``: a model's predicted layers and totals, and the leave-one-model-out
evaluation of a store (per configuration, per model, overall)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.dataset.predict import model as pm  # the predictor's `how` values
from layerperf.dataset.predict.evaluate import Evaluation, Pair, Score
from layerperf.dataset.predict.features import RunFactors
from layerperf.dataset.predict.model import ROOFLINE, UNKNOWN, Prediction
from layerperf.renderers.view import KEEP, LOW, Column, Note, Section, View
from layerperf.renderers.views.columns import TYPE_MIN, name_column, text
from layerperf.util import units

HOW = {pm.LEARNED: "learned", pm.RECURRENT_FIT: "recurrent terms (fitted on its op type's rows)",
       pm.FEW_ROWS: "median rate (few rows)",
       pm.FEW_ROWS_WIDE: "store-wide (few rows of its op type)", ROOFLINE: "roofline (op type not in the store)",
       pm.STORE_WIDE: "store-wide (op type not in the store)",
       pm.STORE_ROOFLINE: "store roofline (op type not in the store)",
       UNKNOWN: "unknown (op type not in the store, nothing to estimate it from)"}
# what a note says of each store-learned estimate
_FROM_STORE = {pm.STORE_WIDE: "one regressor over every op type of the store, told each layer's category",
               pm.STORE_ROOFLINE: "a roofline on the store's own best measured rates"}


def _us(value: float) -> str:
    return f"{value:,.1f}"


# A narrow terminal keeps the layer's name and its prediction, then its op type (shortened); how it was
# predicted wraps on words rather than losing them (the roofline's flag is there).
LAYER_COLUMNS = (name_column("name", "layer"), text("op_type", "op type", priority=1, min_width=TYPE_MIN),
                 Column("predicted_us", "predicted µs", _us, priority=KEEP),
                 text("how", "how predicted", min_width=12, wrap=True))
TOTAL_COLUMNS = (text("what", "", priority=KEEP), Column("us", "µs", _us, priority=KEEP), Column("time", "", str))


@dataclass(frozen=True, slots=True)
class Trained:
    """What the predictor learned from: the store, its configurations and models, and whether this
    machine's calibration was there for the roofline."""

    store: str
    configs: int
    models: tuple[str, ...]
    calibration: bool


def _op(domain: str, op_type: str) -> str:
    return f"{domain}.{op_type}" if domain else op_type


def prediction_view(model: str, run: RunFactors, pred: Prediction, trained: Trained) -> View:
    """Per layer: name, op type, predicted µs, how; then the layers' sum, the cost between them and
    the end-to-end latency."""
    rows: list[dict[str, Any]] = [{"name": p.name, "op_type": _op(p.domain, p.op_type), "predicted_us": p.us,
                                   "how": p.how, "held": p.held} for p in pred.layers]
    shown = [{**r, "how": HOW[str(r["how"])] + (", held at the ceiling" if r["held"] else "")} for r in rows]
    complete = pred.latency_us is not None
    sums = (("layers" if complete else "layers with a prediction", pred.known_layers_us),
            ("between layers", pred.between_us), ("end to end", pred.latency_us))
    totals = [{"what": what, "us": us, "time": units.duration_us(us)} for what, us in sums]
    title = (f"{model}: {len(rows)} layers as ONNX Runtime runs them (batch {run.batch if run.batch else '-'}, "
             f"{run.threads} thread{'s' if run.threads != 1 else ''}, opt level {run.opt_level})")
    doc = {"model": model, "backend": run.backend, "batch": run.batch, "threads": run.threads,
           "opt_level": run.opt_level, "inter_op": run.inter_op, "cpu_count": run.cpu_count, "corun": run.corun,
           "corun_shared": run.corun_shared, "layers": rows, "layers_us": pred.known_layers_us if complete else None,
           "known_layers_us": pred.known_layers_us, "between_us": pred.between_us, "latency_us": pred.latency_us,
           "unseen_op_types": pred.unseen_op_types, "store": trained.store, "trained_configs": trained.configs,
           "trained_models": list(trained.models), "calibration": trained.calibration}
    return View([Section(LAYER_COLUMNS, rows, title=title, shown=shown),
                 Section(TOTAL_COLUMNS, totals, notes=tuple(_prediction_notes(pred, trained)))], doc)


def _prediction_notes(pred: Prediction, trained: Trained) -> list[Note]:
    notes = [Note(f"trained on {units.count(trained.configs, 'configuration')} of "
                  f"{units.count(len(trained.models), 'model')} in {trained.store}")]
    held = sum(p.held for p in pred.layers)
    if held:
        notes.append(Note(f"{units.count(held, 'layer')} held at the ceiling: the estimate was longer than the "
                          "longest measured layer of its op type, run the same way, that did as much work or "
                          "more, and is that layer's time"))
    unseen: dict[str, list[str]] = {}
    for p in pred.layers:
        if p.flagged and _op(p.domain, p.op_type) not in unseen.setdefault(p.how, []):
            unseen[p.how].append(_op(p.domain, p.op_type))
    if ROOFLINE in unseen:
        notes.append(Note(f"op types not in the store, predicted by a roofline on this machine's calibrated "
                          f"peaks: {', '.join(sorted(unseen[ROOFLINE]))}", "warning"))
    for how in (h for h in pm.FALLBACKS if h in unseen):
        notes.append(Note(f"op types not in the store, predicted by {_FROM_STORE[how]} ({how}): "
                          f"{', '.join(sorted(unseen[how]))}", "warning"))
    if UNKNOWN in unseen:
        why = "" if trained.calibration else "no calibration for a roofline: "
        notes.append(Note(f"op types not in the store, {why}{', '.join(sorted(unseen[UNKNOWN]))}; nothing to "
                          "estimate their time from, so it and the end-to-end latency are unknown", "warning"))
    if set(unseen) - {ROOFLINE}:
        notes.append(Note("collect a model with these op types into the store"
                          + (", or run `layerperf calibrate` for a roofline estimate"
                             if UNKNOWN in unseen and not trained.calibration else ""),
                          "hint"))
    return notes


def _score(score: Score) -> dict[str, Any]:
    return {"pairs": score.pairs, "within_10pct": score.within_10pct, "rmspe": score.rmspe,
            "mean_abs_error": score.mean_abs_error}


def _pair_row(p: Pair) -> dict[str, Any]:
    return {"model": p.model, "configuration": p.label, "predicted_us": p.predicted_us, "measured_us": p.measured_us,
            "error": p.error, "predicted_layers_us": p.predicted_layers_us, "measured_layers_us": p.measured_layers_us,
            "layers_error": p.layers_error, "layers": p.layers, "n_layers": p.n_layers,
            "unseen_op_types": list(p.unseen), "runs_slowed": p.runs_slowed, "runs_disturbed": p.runs_disturbed,
            "flagged": p.flagged}


def _signed(x: float) -> str:
    return f"{100 * x:+.1f}%"


# A narrow terminal keeps which pair it is and its error, then the two latencies; the details go first.
PAIR_COLUMNS = (name_column("configuration", "configuration"), Column("predicted_us", "predicted µs", _us, priority=1),
                Column("measured_us", "measured µs", _us, priority=1), Column("error", "error", _signed, priority=KEEP),
                Column("layers_error", "layers' error", _signed),
                text("layers", "layers from", priority=LOW), Column("runs_slowed", "slowed runs", priority=3),
                Column("runs_disturbed", "disturbed runs", priority=3),
                text("unseen", "unseen op types", priority=LOW, min_width=12))
MODEL_COLUMNS = (name_column("model", "model"), Column("pairs", "pairs"),
                 Column("within_10pct", "within ±10%", units.percent, priority=KEEP),
                 Column("rmspe", "RMSPE", units.percent, priority=KEEP),
                 Column("mean_abs_error", "mean |error|", units.percent))


def evaluation_view(ev: Evaluation, store: str | Sequence[str]) -> View:
    """Each (model, configuration) predicted by a predictor trained without its model; per model and
    overall: the fraction within ±10%, RMSPE, mean absolute error."""
    rows = [_pair_row(p) for p in ev.pairs]
    shown = [{**r, "unseen": ", ".join(r["unseen_op_types"]) or "-"} for r in rows]
    models = [{"model": m, **_score(s)} for m, s in ev.per_model.items()]
    o, u, la = ev.overall, ev.clean, ev.layers
    notes = [Note(f"overall: {_within(o)} of {o.pairs} (model, configuration) pairs within ±10% "
                  f"({units.percent(o.within_10pct)}), RMSPE {units.percent(o.rmspe)}"),
             Note(f"pairs none of whose runs the speed checks set aside (slowed, disturbed): {_within(u)} of {u.pairs} "
                  f"within ±10% "
                  f"({units.percent(u.within_10pct)}), RMSPE {units.percent(u.rmspe)}"),
             Note(f"the layers' times alone (predicted sum against the measured layers' sum): {_within(la)} of "
                  f"{la.pairs} within ±10% ({units.percent(la.within_10pct)}), RMSPE {units.percent(la.rmspe)}")]
    if ev.sweeps:
        notes.append(Note(f"kernel sweeps trained on in every turn, never held out: {', '.join(ev.sweeps)}"))
    doc = {"store": store, **_score(o), "clean": _score(u), "layers_sum": _score(la),
           "per_model": {m: _score(s) for m, s in ev.per_model.items()}, "configurations": rows,
           "sweeps": list(ev.sweeps)}
    return View([Section(PAIR_COLUMNS, rows, title="leave-one-model-out: each model predicted by a predictor "
                         "trained on the others", shown=shown),
                 Section(MODEL_COLUMNS, models, notes=tuple(notes))], doc)


def _within(score: Score) -> str:
    return "?" if score.within_10pct is None else str(round(score.within_10pct * score.pairs))
