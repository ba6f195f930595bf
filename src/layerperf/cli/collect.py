"""``layerperf collect``: a sweep of models and configurations into a store (SQLite), or the store as Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.cli.common import at_least, event_list, positive_int
from layerperf.util import units

if TYPE_CHECKING:
    from layerperf.dataset.config import Axes, Config
    from layerperf.dataset.measure import ConfigResult
    from layerperf.dataset.sweep import Tally

DEFAULT_RUNS, DEFAULT_WARMUP = 20, 5


def register(sub: Any) -> None:
    p = sub.add_parser(
        "collect", help="sweep models and configurations into a store of per-layer rows",
        description="Profile every combination of --models, --backend, --batch, --threads, --opt-level, --inter-op, "
                    "--cpus and --corun (and TVM's --target and --tune), and store each configuration's per-layer "
                    "rows, its factors and the machine's fingerprint in an SQLite store (--store), one "
                    "transaction per configuration. Run again, it measures only what the store lacks. Runs "
                    "taken while the CPU ran slowed are set aside (bench's speed check). --export DIR writes the "
                    "store as Parquet.",
        epilog="examples:\n"
               "  layerperf collect --models resnet18,mobilenet_v2 --batch 1,8 --threads 1,2 --store ops.db\n"
               "  layerperf collect --models model.onnx --inter-op seq,2 --cpus 0 --cpus 0-1 --store ops.db\n"
               "  layerperf collect --models resnet18 --corun MatMul:A=512x512,B=512x512 --store ops.db\n"
               "  layerperf collect --models resnet18,bert-base --ray local --store ops.db\n"
               "  layerperf collect --models resnet18 --backend onnxruntime,tvm --tune 0,200 --store ops.db\n"
               "  layerperf collect --store ops.db --export ops-parquet/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, metavar="PATH", help="the SQLite store (made when missing)")
    p.add_argument("--models", metavar="LIST", help="comma-separated built-in model names or .onnx files")
    p.add_argument("--backend", action="append", metavar="NAME[,NAME]",
                   help="runtimes to profile on (default onnxruntime; repeatable or comma-separated)")
    p.add_argument("--batch", default="1", metavar="LIST", help="batch sizes (default 1); a file's inputs with a "
                   "free leading dimension take it, a file with a fixed batch is measured once")
    p.add_argument("--threads", default="1", metavar="LIST", help="intra-op threads (default 1; 0: runtime default)")
    p.add_argument("--opt-level", default="all", metavar="LIST",
                   help="ONNX Runtime optimization levels (default all)")
    p.add_argument("--inter-op", default="seq", metavar="LIST",
                   help="ONNX Runtime execution mode: seq (sequential), or N: parallel with N inter-op threads "
                        "(0: its default); e.g. seq,1,2 (default seq)")
    p.add_argument("--target", action="append", default=[], metavar="TARGET",
                   help="what TVM compiles for (--backend tvm; repeatable: each target is a factor), as profile's "
                        "--target: llvm, 'llvm -mcpu=znver4', a JSON object (default llvm)")
    p.add_argument("--tune", default="0", metavar="LIST",
                   help="TVM's MetaSchedule trials per model (--backend tvm), e.g. 0,200: 0 untuned (default 0); "
                        "the tuning database is kept per model and target, as for profile --tune")
    p.add_argument("--model-seed", default="0", metavar="LIST",
                   help="build seeds of the built-in models (default 0): their random weights and a kernel sweep's "
                        "sampled configurations, e.g. 0,1 for two samples; a model file is collected once")
    p.add_argument("--cpus", action="append", default=[], metavar="SET",
                   help="pin the run to a CPU set, e.g. 0 or 0-1 (repeatable: each set is a factor)")
    p.add_argument("--corun", action="append", default=[], metavar="OP:NAME=DIMS,...",
                   help="also measure each configuration beside this operator, run in a loop by another process "
                        "(repeatable), e.g. MatMul:A=512x512,B=512x512")
    cores = p.add_mutually_exclusive_group()
    cores.add_argument("--separate-cores", dest="corun_cores", action="store_const", const="separate",
                       help="the co-runner on other CPUs than the run (default)")
    cores.add_argument("--shared-cores", dest="corun_cores", action="store_const", const="shared",
                       help="the co-runner on the run's CPUs")
    p.add_argument("--events", metavar="E1,E2", type=event_list,
                   help="perf events to count per layer (stepwise passes)")
    p.add_argument("--runs", type=at_least(1), default=DEFAULT_RUNS,
                   help=f"measured runs per configuration (default {DEFAULT_RUNS})")
    p.add_argument("--warmup", type=positive_int, default=DEFAULT_WARMUP,
                   help=f"untimed runs first (default {DEFAULT_WARMUP})")
    p.add_argument("--ray", metavar="ADDRESS", help="run configurations as Ray tasks, one per node at a time: a "
                   "cluster's address, or local (a Ray instance on this machine, loopback only)")
    p.add_argument("--retry-failed", action="store_true", help="measure again the configurations stored as failed")
    p.add_argument("--export", metavar="DIR", help="write the store's tables as Parquet into DIR")
    p.set_defaults(func=run, corun_cores="separate")


def _ints(text: str, flag: str, lowest: int = 0) -> tuple[int, ...]:
    from layerperf.errors import InputError

    out = []
    for item in (t.strip() for t in text.split(",")):
        if not (item.isascii() and item.isdigit()) or int(item) < lowest:
            raise InputError(f"{flag}: '{item}' is not an integer of {lowest} or more", hint=f"such as {flag} 1,2")
        out.append(int(item))
    return tuple(out)


def _inter_ops(text: str) -> tuple[int | None, ...]:
    from layerperf.dataset.config import SEQUENTIAL

    items = [t.strip() for t in text.split(",")]
    numbers = [t for t in items if t != SEQUENTIAL]
    given = iter(_ints(",".join(numbers), "--inter-op") if numbers else ())  # an empty item is refused there
    return tuple(None if t == SEQUENTIAL else next(given) for t in items)


def _words(values: list[str] | str | None) -> tuple[str, ...]:
    items = values if isinstance(values, list) else [values or ""]
    return tuple(w.strip() for v in items for w in v.split(",") if w.strip())


def axes_of(args: argparse.Namespace) -> Axes:
    """The sweep the flags describe (files as absolute paths: a store's key must not depend on the cwd)."""
    from layerperf import backends
    from layerperf.dataset.config import Axes
    from layerperf.models import zoo
    from layerperf.util.affinity import parse_cpus

    names = zoo.names()
    if args.backend is not None and not _words(args.backend):
        from layerperf.errors import InputError

        raise InputError("--backend names no backend", hint=f"such as --backend {backends.DEFAULT}")
    models = tuple(m if m in names or not Path(m).is_file() else str(Path(m).resolve()) for m in _words(args.models))
    return Axes(models=models, backends=_words(args.backend) or (backends.DEFAULT,),
                batches=_ints(args.batch, "--batch", 1), threads=_ints(args.threads, "--threads"),
                opt_levels=_words(args.opt_level), inter_ops=_inter_ops(args.inter_op),
                cpu_sets=tuple(parse_cpus(c) for c in args.cpus) or (None,), coruns=tuple(args.corun),
                corun_cores=args.corun_cores, events=tuple(args.events or ()), runs=args.runs, warmup=args.warmup,
                targets=tuple(args.target) or ("llvm",), tunes=_ints(args.tune, "--tune"),
                model_seeds=_ints(args.model_seed, "--model-seed"))


def run(args: argparse.Namespace) -> int:
    from layerperf.dataset import export as parquet
    from layerperf.dataset.store import Store
    from layerperf.errors import InputError

    if args.models is None and not args.export:
        raise InputError("nothing to do: give --models to collect, or --export DIR to export the store")
    if args.export:  # a writer missing, or a file in the way: one line now, not after the sweep
        parquet.check_target(args.export)
    if args.models is not None:
        if args.export:
            parquet.writer_or_refuse()
        _collect(args)
    if args.export:
        with Store.open(args.store) as store:
            written = parquet.export(store, args.export)
        for table, path in written.items():
            print(f"wrote {path} ({table})")
    return 0


def _collect(args: argparse.Namespace) -> None:
    from layerperf.dataset import config, sweep
    from layerperf.dataset.fingerprint import Fingerprint
    from layerperf.dataset.store import Store

    if args.ray is not None:  # "" too: a malformed address is refused before anything is made
        from layerperf.dataset.ray_runner import checked_address

        args.ray = checked_address(args.ray)
    axes = axes_of(args)
    config.check(axes)  # every refusal before the store is made
    if args.ray:
        from layerperf.dataset.ray_runner import import_ray

        import_ray(args.ray)  # missing: one line saying how to install it, before the store is made
    configs = config.expand(axes)
    # a cluster that can't be joined is told before a new store is made; an existing store is read first
    # (nothing left to measure: no cluster needed)
    executor = _executor(args.ray) if args.ray and not Path(args.store).exists() else None
    try:
        with Store.open(args.store, create=True) as store:
            if not args.ray:  # measured here: tell now if the store holds another machine's rows
                _warn_other(sweep.other_hardware(store, [Fingerprint.here()]))
            todo = sweep.pending(configs, store, args.retry_failed)
            measured = {c.key() for c in todo}
            skipped = [c for c in configs if c.key() not in measured]
            for model, then, now in sweep.changed_models(skipped, store):
                print(f"layerperf: warning: {model} changed since the store measured it (SHA-256 {then[:12]}... "
                      f"then, {now[:12]}... now): its configurations are skipped as measured; collect the new "
                      "file into another store, or under another path", file=sys.stderr)
            if todo and executor is None:
                executor = _executor(args.ray)
            tally = _run(todo, store, executor) if todo else sweep.Tally()
            tally.skipped = len(skipped)
            statuses = store.statuses() if skipped else {}
            tally.skipped_failed = sum(1 for c in skipped if statuses.get(c.key()) == "failed")
    finally:
        if executor is not None:
            executor.close()  # again after the sweep closed it: nothing more to do then
    print(_summary(tally, args.store))


def _executor(address: str | None) -> Any:
    if address is None:
        from layerperf.dataset.local import LocalExecutor

        return LocalExecutor()
    from layerperf.dataset.ray_runner import RayExecutor

    return RayExecutor(address)


def _warn_other(pairs: list[Any]) -> None:
    for theirs, ours in pairs:
        print(f"layerperf: warning: the store holds measurements of another machine; they will not compare with "
              f"this one's\n  store:   {theirs.describe()}\n  here:    {ours.describe()}", file=sys.stderr)


def _run(todo: list[Config], store: Any, executor: Any) -> Tally:
    """Measure ``todo``, a progress bar with its ETA on a terminal, a line per
    configuration on stderr."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from layerperf.dataset import sweep

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    seen: set[tuple[Any, ...]] = {f.hardware() for f in store.fingerprints()}

    def finished(result: ConfigResult, written: bool) -> None:
        hw = result.fingerprint.hardware()
        if hw not in seen and seen:
            _warn_other(sweep.other_hardware(store, [result.fingerprint]))
        seen.add(hw)
        console.print(_line(result, written), markup=False)
        if bar is not None:
            bar.advance(task)

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    bar = Progress(*columns, console=console, transient=True) if console.is_terminal else None
    if bar is None:
        return sweep.run(todo, store, executor, finished=finished)
    with bar:
        task = bar.add_task("configurations", total=len(todo))
        return sweep.run(todo, store, executor, finished=finished)


def _line(r: ConfigResult, written: bool) -> str:
    what = r.config.label()
    if r.status == "failed":
        return f"failed  {what}: {r.reason}"
    note = "" if written else " (already in the store)"
    return f"ok      {what}: {len(r.records)} layers{_runs(r)}, {r.wall_s:.1f} s{note}"


def _runs(r: ConfigResult) -> str:
    """How the runs went: those set aside, or why the statistics stand on every run (flagged)."""
    bad = [f"{n} {why}" for n, why in ((r.runs_slowed, "slowed"), (r.runs_disturbed, "disturbed")) if n]
    if not bad:
        return ""
    if not (r.slowed_used or r.disturbed_used):
        return f", {' and '.join(bad)} of {r.runs_measured} runs set aside"
    why = [w for w, flagged in (("measured during a host slow-down", r.slowed_used),
                                ("other processes had the CPU", r.disturbed_used)) if flagged]
    return (f", too few clean runs ({' and '.join(bad)} of {r.runs_measured}): statistics over every run "
            f"[FLAGGED: {'; '.join(why)}]")


def _summary(t: Tally, store: str) -> str:
    parts = [f"{t.ok} ok", f"{t.failed} failed"]
    if t.flagged:
        parts.append(f"{t.flagged} flagged: too few clean runs")
    if t.slowed_runs:
        parts.append(f"{t.slowed_runs} slowed runs set aside")
    if t.disturbed_runs:
        parts.append(f"{t.disturbed_runs} disturbed runs set aside")
    held = f"; {t.skipped} already in the store" if t.skipped else ""
    if t.skipped_failed:
        held += f" ({t.skipped_failed} of them failed: --retry-failed measures those again)"
    return f"collected {units.count(t.planned, 'configuration')} ({', '.join(parts)}){held} -> {store}"
