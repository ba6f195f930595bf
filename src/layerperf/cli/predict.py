"""``layerperf predict``: a model's per-layer and end-to-end latency predicted from a store of measurements,
or the predictor evaluated leave-one-model-out on the store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.cli.common import add_output_args, at_least, layout, output_format

if TYPE_CHECKING:
    from layerperf.calibration.peaks import Peaks
    from layerperf.dataset.predict.training import StoreData


def register(sub: Any) -> None:
    p = sub.add_parser(
        "predict", help="predict a model's per-layer and end-to-end latency from a store of measurements",
        description="Train a gradient-boosted regressor per op type on the per-layer rows of a store that "
                    "`layerperf collect` filled, and predict MODEL's layers as ONNX Runtime will run them (its "
                    "optimized, fused graph, found without a timed run) and its end-to-end latency, the run's own "
                    "cost between layers included. An op type the store never saw is predicted by one regressor "
                    "over every op type of the store (store-wide), else by a roofline on this machine's calibrated "
                    "peaks (`layerperf calibrate`), and flagged. With --evaluate, "
                    "leave-one-model-out over the store's models: per configuration the predicted and measured "
                    "latency, per model and overall the fraction within ±10% and RMSPE.",
        epilog="examples:\n"
               "  layerperf predict resnet50 --store ops.db --batch 8 --threads 2\n"
               "  layerperf predict model.onnx --store ops.db --format json\n"
               "  layerperf predict --store ops.db --evaluate\n"
               "  layerperf predict --store zoo.db --store hf.db --evaluate --format json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", nargs="?", help="an .onnx file or a built-in model name")
    p.add_argument("--store", action="append", required=True, metavar="PATH",
                   help="a store `layerperf collect` filled (repeatable: their configurations together)")
    p.add_argument("--evaluate", action="store_true",
                   help="leave-one-model-out over the store's models instead of predicting MODEL")
    p.add_argument("--layers", choices=("graph", "store"), default="graph",
                   help="--evaluate: predict each model's layers as found in its optimized graph (default; the "
                        "store's recorded layers where the model is not here), or as the store recorded them")
    p.add_argument("--batch", type=at_least(1), help="batch size (default 1; a model file whose batch is fixed "
                   "runs at its own)")
    p.add_argument("--threads", type=at_least(1), default=1, help="intra-op threads, 1 or more (default 1)")
    p.add_argument("--opt-level", default="all", choices=("disable", "basic", "extended", "all"),
                   help="ONNX Runtime optimization level (default all)")
    p.add_argument("--inter-op", default="seq", metavar="seq|N",
                   help="ONNX Runtime execution mode: seq, or N inter-op threads of the parallel mode (default seq)")
    p.add_argument("--cpus", metavar="SET", help="the CPU set the run would be pinned to, e.g. 0-1")
    p.add_argument("--corun", metavar="OP", help="a co-runner beside the run (its operator, as collect --corun)")
    p.add_argument("--shared-cores", action="store_true", help="the co-runner on the run's CPUs (default: others)")
    add_output_args(p, ("table", "json", "csv", "markdown"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from layerperf.calibration import peaks as calibration
    from layerperf.dataset.predict import training
    from layerperf.dataset.predict.model import sklearn_regressor
    from layerperf.errors import InputError
    from layerperf.renderers.output import show

    fmt = output_format(args)
    table_layout = layout(args, fmt)
    if args.evaluate == bool(args.model):
        raise InputError("give MODEL to predict, or --evaluate to evaluate the predictor on the store, not both"
                         if args.model else "nothing to predict: give MODEL, or --evaluate")
    if args.model:
        _check_run(args)  # before any store is read
    sklearn_regressor()  # missing: one line saying how to install it, before any work
    same = {str(Path(p).resolve()) for p in args.store}
    if len(same) < len(args.store):
        raise InputError("a store is given twice to --store: its configurations would count twice",
                         hint="give each store once")
    data = training.read_all(args.store)
    for path in args.store:
        _warn_other(training.other_machines(path), path)
    peaks = calibration.load()
    view = _evaluate(args, data, peaks) if args.evaluate else _predict(args, data, peaks)
    show(view, fmt, args.output, table_layout)
    return 0


def _warn_other(pairs: list[Any], path: str) -> None:
    for theirs, ours in pairs:
        print(f"layerperf: warning: the store {path} holds measurements of another machine; predictions for this "
              f"one will be off by the difference\n  store:   {theirs.describe()}\n  here:    {ours.describe()}",
              file=sys.stderr)


def _check_run(args: argparse.Namespace) -> None:
    """The run's flags as collect checks them: a CPU set this process could not be pinned to, a co-runner
    that cannot be built, would predict a run that cannot happen."""
    from layerperf.backends.base import RunPlan
    from layerperf.dataset.config import check_corun
    from layerperf.util.affinity import check_cpus, parse_cpus

    RunPlan(threads=args.threads).validate()  # the bound collect and profile hold a thread count to
    cpus = check_cpus(parse_cpus(args.cpus)) if args.cpus else None
    if args.corun:
        check_corun(args.corun, [cpus], [args.threads], "shared" if args.shared_cores else "separate")


def _batch(args: argparse.Namespace) -> tuple[int | None, Any]:
    """The batch MODEL runs at, and the model opened at it: ``--batch`` (1 when not given); None for a file
    that no batch changes, as ``collect`` stores it (a --batch other than its own is refused: the file
    cannot run at it)."""
    from layerperf.dataset.predict.graph import fixed_batch, open_at_batch
    from layerperf.errors import InputError

    batch = 1 if args.batch is None else args.batch
    source = open_at_batch(args.model, batch)  # a built-in model built at it; a file as it is
    fixed = fixed_batch(source)
    if fixed is None:
        return batch, source
    name, own = fixed
    if args.batch is not None and args.batch != own:
        at = f"batch {own} only (its input {name} has a fixed leading dimension)" if own is not None else \
            "no other batch (its inputs have no leading dimension to size)"
        raise InputError(f"--batch {args.batch}: {args.model} runs at {at}",
                         hint="leave --batch out, or export the model with a free batch")
    return None, source


def _factors(args: argparse.Namespace, batch: int | None) -> Any:
    from layerperf.data.machine import Machine
    from layerperf.dataset.predict.features import RunFactors
    from layerperf.errors import InputError
    from layerperf.util.affinity import parse_cpus

    if args.inter_op != "seq" and not args.inter_op.isdigit():
        raise InputError(f"--inter-op: '{args.inter_op}' is neither seq nor a number", hint="such as --inter-op 2")
    here = Machine.here()
    cpus = len(parse_cpus(args.cpus)) if args.cpus else (here.affinity or here.cores)
    return RunFactors(backend="onnxruntime", batch=batch, threads=args.threads, opt_level=args.opt_level,
                      inter_op=None if args.inter_op == "seq" else int(args.inter_op), cpu_count=cpus,
                      corun=bool(args.corun), corun_shared=bool(args.corun) and args.shared_cores,
                      l2_bytes=here.l2_bytes, l3_bytes=here.l3_bytes)


def _predict(args: argparse.Namespace, data: StoreData, peaks: Peaks | None) -> Any:
    from layerperf.dataset.predict.features import Op
    from layerperf.dataset.predict.graph import runtime_layers
    from layerperf.dataset.predict.model import MIN_ROWS, Predictor
    from layerperf.errors import InputError
    from layerperf.renderers.views.predict import Trained, prediction_view

    batch, source = _batch(args)
    run = _factors(args, batch)
    ops = [Op.of_layer(layer) for layer in runtime_layers(args.model, batch, args.opt_level, source=source)]
    predictor = Predictor.fit(data.configs, peaks)
    pred = predictor.predict(ops, run)
    if all(p.us is None for p in pred.layers):
        raise InputError(f"none of {args.model}'s op types is in the store ({', '.join(pred.unseen_op_types)}) and "
                         "this machine has no calibration for a roofline estimate, nor the store enough rows "
                         f"({MIN_ROWS}) for one from its other op types",
                         hint="collect models with these op types into the store, or run layerperf calibrate")
    trained = Trained(", ".join(args.store), len(data.configs), tuple(data.models()), peaks is not None)
    return prediction_view(args.model, run, pred, trained)


def _evaluate(args: argparse.Namespace, data: StoreData, peaks: Peaks | None) -> Any:
    from layerperf.dataset.predict.evaluate import leave_one_model_out, store_layers
    from layerperf.dataset.predict.graph import GraphLayers
    from layerperf.renderers.views.predict import evaluation_view

    layers_of = store_layers if args.layers == "store" else GraphLayers()
    ev = leave_one_model_out(data, layers_of, peaks,
                             progress=lambda m: print(f"predicting {m} ...", file=sys.stderr))
    return evaluation_view(ev, args.store if len(args.store) > 1 else args.store[0])

