"""The predictor's evaluation figures: leave-one-model-out over one or more stores `layerperf collect` filled
(each model predicted by a predictor trained on the others, its layers from its optimized graph), per model and
overall — the fraction of (model, configuration) pairs within ±10% of the measured latency (nn-Meter's metric)
and RMSPE — with what limits them: the runs the speed checks set aside (slowed, disturbed), the op types a
model has that no other model has, and, given a second store of the same sweep measured again (--again), how
often the host itself repeats a measurement within ±10%: no predictor can agree with a measurement better than
the measurement agrees with itself. Prints the load before and after.

    python benchmarks/predict.py --store zoo.db
    python benchmarks/predict.py --store zoo.db --store hf.db --again zoo-again.db [--again more-again.db]
    python benchmarks/predict.py --store zoo.db --fallback none    # op types no other model has: unknown
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from layerperf.calibration import peaks as calibration
from layerperf.dataset.predict import training
from layerperf.dataset.predict.evaluate import Evaluation, Score, leave_one_model_out, store_layers
from layerperf.dataset.predict.graph import GraphLayers
from layerperf.dataset.predict.model import FALLBACKS, STORE_WIDE
from layerperf.dataset.store import Store

# a configuration's factors, without how many runs and warm-ups measured it: stores of one sweep taken
# with other --runs or --warmup still compare
REPEAT_SQL = """SELECT model, backend, batch, threads, opt_level, inter_op, model_seed, cpus, corun, corun_cores,
                       events, latency_median_us FROM configs
                WHERE status = 'ok' AND latency_median_us IS NOT NULL"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.1f}%"


def _score(name: str, s: Score) -> str:
    return f"{name:<34} {s.pairs:>5} {_pct(s.within_10pct):>12} {_pct(s.rmspe):>8} {_pct(s.mean_abs_error):>12}"


def _print(ev: Evaluation) -> None:
    print(f"{'model':<34} {'pairs':>5} {'within ±10%':>12} {'RMSPE':>8} {'mean |error|':>12}")
    for model, s in ev.per_model.items():
        unseen = sorted({u for p in ev.pairs if p.model == model for u in p.unseen})
        print(_score(os.path.basename(model), s) + (f"   unseen: {', '.join(unseen)}" if unseen else ""))
    print(_score("overall", ev.overall))
    print(_score("clean pairs (no run set aside)", ev.clean))
    print(_score("layers' sums alone", ev.layers))


def _latencies(path: str) -> dict[tuple[object, ...], float]:
    with Store.open(path, writable=False) as store:  # an older store read brought up to date (model_seed 0)
        return {tuple(row[:-1]): float(row[-1]) for row in store.db.execute(REPEAT_SQL)}


def _repeatability(stores: list[str], again: list[str]) -> None:
    """How often a configuration measured again lands within ±10% of its first measurement."""
    first: dict[tuple[object, ...], float] = {}
    for path in stores:
        first.update(_latencies(path))
    second: dict[tuple[object, ...], float] = {}
    for path in again:
        second.update(_latencies(path))
    errors = [second[k] / first[k] - 1 for k in first.keys() & second.keys()]
    if not errors:
        print(f"--again {', '.join(again)}: no configuration in common with the stores")
        return
    e = np.array(errors)
    within = _pct(float(np.mean(np.abs(e) <= 0.1)))
    print(f"measured again ({len(again)} store(s)): {len(e)} configurations, {within} within "
          f"±10% of the first measurement, RMS difference {_pct(float(np.sqrt(np.mean(e ** 2))))}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", action="append", required=True, help="a store (repeatable)")
    p.add_argument("--layers", choices=("graph", "store"), default="graph",
                   help="each model's layers from its optimized graph (default) or as the store recorded them")
    p.add_argument("--again", action="append",
                   help="a store of the same sweep measured again (repeatable): the host's own repeatability")
    p.add_argument("--fallback", choices=(*FALLBACKS, "none"), default=STORE_WIDE,
                   help="the store-learned estimate for an op type no other model has (none: unknown, or the "
                        "calibrated roofline where there is a calibration, as before it existed)")
    p.add_argument("--no-calibration", action="store_true", help="leave this machine's calibration out")
    args = p.parse_args()
    print(f"load before: {_load()}")
    data = training.read_all(args.store)
    slowed = sum(c.runs_slowed or 0 for c in data.configs)
    told = [c for c in data.configs if c.runs_disturbed is not None]
    disturbed = (f"{sum(c.runs_disturbed or 0 for c in told)} disturbed (in the {len(told)} configurations whose "
                 "store counts them)") if told else "disturbed runs not counted (stores collected before that check)"
    measured = sum(c.runs_measured or 0 for c in data.configs)
    print(f"{len(data.configs)} configurations of {len(data.models())} models; of {measured} runs the speed checks "
          f"set aside {slowed} slowed, {disturbed}; {sum(c.flagged for c in data.configs)} configurations flagged")
    peaks = None if args.no_calibration else calibration.load()
    fallback = None if args.fallback == "none" else args.fallback
    print(f"calibration: {'this machine' if peaks else 'none'}; op types never seen without one: "
          f"{fallback or 'unknown'}")
    t0 = time.perf_counter()
    layers_of = GraphLayers() if args.layers == "graph" else store_layers
    ev = leave_one_model_out(data, layers_of, peaks, fallback=fallback)
    print(f"leave-one-model-out in {time.perf_counter() - t0:.1f} s, layers from {args.layers}")
    _print(ev)
    if isinstance(layers_of, GraphLayers) and layers_of.failed:
        print("layers from the store for: " + "; ".join(f"{m}: {why}" for m, why in layers_of.failed.items()))
    if args.again:
        _repeatability(args.store, args.again)
    print(f"load after: {_load()}")


if __name__ == "__main__":
    main()
