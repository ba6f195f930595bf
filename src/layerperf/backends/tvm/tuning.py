"""MetaSchedule tuning with a database kept per (model, target, pipeline), reused and resumed.

MetaSchedule's JSON database appends every measured candidate to
``database_tuning_record.json`` as it is measured, so an interrupted tuning keeps what it found.
A rerun asks for the same number of trials per task and tunes only the tasks that have fewer
records than that, and that no finished tuning had that budget for (:data:`LEDGER`: a task whose
whole search space is smaller than the budget is done with fewer); a build applies whatever the
database holds (:mod:`.build` keys its cache on the database's digest, so new records make a new build).

Tuning runs builders and runners in worker processes and trains an XGBoost cost model: it needs
``psutil``, ``cloudpickle`` and ``xgboost``. MetaSchedule logs to stdout and to ``<work_dir>/logs``;
the console copy is swallowed here (the files stay), progress goes through ``progress``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import io
import json
import logging
import math
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

from layerperf.backends.tvm.cache import digest, tvm_cache_dir
from layerperf.backends.tvm.runtime import require_tuning
from layerperf.errors import BackendError, LayerperfError
from layerperf.util.atomic import write_bytes

Progress = Callable[[str, int, int], None]


class TuningInterrupted(LayerperfError):
    """Tuning stopped before its trials were done; what it measured is kept in the database."""


def database_dir(model_digest: str, target_key: str, pipeline: str, root: Path | None = None) -> Path:
    """``$LAYERPERF_CACHE/tvm/tuning/<digest>``: one database per model, target and pipeline (the
    pipeline decides which kernels exist to be tuned)."""
    return (root or tvm_cache_dir()) / "tuning" / digest(model_digest, target_key, pipeline)[:24]


@dataclass(frozen=True, slots=True)
class TuneResult:
    """What one call of :func:`tune` did."""

    work_dir: Path
    tasks: int  # tasks in the model
    tuned: tuple[str, ...]  # the tasks tuned this time
    skipped: tuple[str, ...]  # already had ``per_task`` records
    trials_per_task: int
    trials_run: int  # candidates measured this time
    records: int  # records in the database afterwards
    tune_s: float


def extract(mod: Any, target: Any) -> list[Any]:
    """The tasks (distinct PrimFuncs, with how many calls each serves) MetaSchedule would tune in ``mod``."""
    return list(ms.relax_integration.extract_tasks(mod, target))


def records_per_task(database: Any, tasks: Sequence[Any]) -> list[int]:
    """How many measured records the database holds for each task's workload."""
    out = []
    for task in tasks:
        mod = task.dispatched[0]
        out.append(len(database.get_top_k(database.commit_workload(mod), 1 << 30)) if database.has_workload(mod)
                   else 0)
    return out


@dataclass(slots=True)
class _Seen:
    seen: bool = False


@derived_object
class _Counting(PyMeasureCallback):
    """Counts measured candidates and reports them. It stops the tuning, raising KeyboardInterrupt
    where MetaSchedule expects a callback's error, when a Ctrl-C was seen (``interrupt``) or after
    ``stop_after`` candidates (tests)."""

    def __init__(self, total: int, progress: Progress | None, stop_after: int | None = None) -> None:
        self.total, self.done, self.progress, self.stop_after = total, 0, progress, stop_after
        self.interrupt = _Seen()

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any, builder_results: Any,
              runner_results: Any) -> None:
        self.done += len(runner_results)
        if self.progress:
            self.progress("tuning (MetaSchedule trials)", min(self.done, self.total), self.total)
        if self.interrupt.seen or (self.stop_after is not None and self.done >= self.stop_after):
            raise KeyboardInterrupt


def build_candidate(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's default candidate build, less its ``import tvm.s_tir.tensor_intrin``: the
    builder makes a new worker process for every batch, and that import (every target's tensor
    intrinsics, CUDA's parsed from TVMScript) takes 10-40 s in each, more than the builds. The
    schedules it builds already hold the bodies of the intrinsics they were tensorized with."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


_INTRINSICS = "tvm.s_tir.tensor_intrin"


def load_intrinsics(target: Any) -> None:
    """Register only the tensor intrinsics a CPU target can use, before MetaSchedule imports them all.

    ``TuneContext`` runs ``import tvm.s_tir.tensor_intrin``, whose ``__init__`` builds every
    target's intrinsics: 10-40 s here, 30 of them CUDA's, per tuning process. For an llvm target
    the package is put in place empty and only its CPU's module imported (x86: 0.4 s); any other
    target imports the whole package as TVM does."""
    if _INTRINSICS in sys.modules:
        return
    triple = str(target.attrs.get("mtriple", "") or "") if target.kind.name == "llvm" else ""
    spec = importlib.util.find_spec(_INTRINSICS)
    if target.kind.name != "llvm" or spec is None or spec.submodule_search_locations is None:
        importlib.import_module(_INTRINSICS)
        return
    package = types.ModuleType(_INTRINSICS)
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules[_INTRINSICS] = package
    arm = triple.startswith(("aarch64", "arm"))
    importlib.import_module(f"{_INTRINSICS}.{'arm_cpu' if arm else 'x86'}")


def _interrupted(exc: BaseException) -> bool:
    """Whether Ctrl-C stopped the tuning. Raised in a Python callback under MetaSchedule's C++
    loop, KeyboardInterrupt comes back as a RuntimeError with no message, the original only in
    its traceback text."""
    return isinstance(exc, KeyboardInterrupt) or "KeyboardInterrupt" in "".join(traceback.format_exception(exc))


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


@dataclass(frozen=True, slots=True)
class Search:
    """How MetaSchedule searches. ``evolutionary`` with the XGBoost cost model is TVM's default;
    ``replay-trace`` samples the design space at random (no cost model): far quicker per trial, for
    tests and smoke runs. Timeouts are per candidate build and run: MetaSchedule's 30 s default
    kills builds on a loaded machine (seen here at a load of 7 on 2 cores)."""

    strategy: str = "evolutionary"
    timeout_s: float = 120.0
    seed: int = 0

    def cost_model(self) -> str:
        return "xgb" if self.strategy == "evolutionary" else "random"


def tune(mod: Any, target: Any, work_dir: Path, trials_per_task: int, *, only: Sequence[str] | None = None,
         search: Search = Search(), progress: Progress | None = None, stop_after: int | None = None) -> TuneResult:
    """Tune the tasks of ``mod`` (after :func:`~.pipeline.tunable_module`) that have fewer than
    ``trials_per_task`` valid records, each up to that many trials; ``only``: exact task names.
    TuningInterrupted (records kept) on Ctrl-C; BackendError when MetaSchedule fails."""
    tasks = [t for t in extract(mod, target) if only is None or t.task_name in only]
    return tune_tasks(tasks, target, work_dir, trials_per_task, search=search, progress=progress,
                      stop_after=stop_after)


def tune_total(mod: Any, target: Any, work_dir: Path, trials: int, *, search: Search = Search(),
               progress: Progress | None = None) -> TuneResult:
    """``--tune TRIALS``: ``trials`` for the whole model, spread over its tasks (:func:`trials_per_task`)."""
    tasks = extract(mod, target)
    return tune_tasks(tasks, target, work_dir, trials_per_task(trials, len(tasks)), search=search, progress=progress)


def tune_tasks(tasks: Sequence[Any], target: Any, work_dir: Path, trials_per_task: int, *, search: Search = Search(),
               progress: Progress | None = None, stop_after: int | None = None) -> TuneResult:
    """Tune those of ``tasks`` (from :func:`extract`) with fewer than ``trials_per_task`` valid records."""
    require_tuning()
    load_intrinsics(target)
    if trials_per_task < 1:
        raise BackendError(f"tuning needs at least 1 trial per task, got {trials_per_task}")
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    database = ms.database.JSONDatabase(work_dir=str(work_dir), module_equality="structural")
    have = records_per_task(database, tasks)
    budgets = _ledger(work_dir)
    done = [n >= trials_per_task or budgets.get(t.task_name, 0) >= trials_per_task for t, n in
            zip(tasks, have, strict=True)]
    todo = [t for t, d in zip(tasks, done, strict=True) if not d]
    skipped = tuple(t.task_name for t, d in zip(tasks, done, strict=True) if d)
    counter = _Counting(trials_per_task * len(todo), progress, stop_after)
    def finished(group: Sequence[Any]) -> None:  # written per group: an interrupt later keeps it
        budgets.update({t.task_name: max(budgets.get(t.task_name, 0), trials_per_task) for t in group})
        _write_ledger(work_dir, budgets)

    if todo:
        _run(todo, database, work_dir, trials_per_task, search, counter, finished)
    return TuneResult(work_dir, len(tasks), tuple(t.task_name for t in todo), skipped, trials_per_task,
                      counter.done, len(database), time.perf_counter() - t0)


# Each task's trial budget once a tuning of it ran to its end: a task whose search space is smaller
# than the budget (an element-wise kernel has one schedule) never gets that many records, and is done.
LEDGER = "layerperf-tuned.json"


def _ledger(work_dir: Path) -> dict[str, int]:
    try:
        data = json.loads((work_dir / LEDGER).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_ledger(work_dir: Path, budgets: dict[str, int]) -> None:
    write_bytes(work_dir / LEDGER, json.dumps(budgets, sort_keys=True).encode())


def _unnamed_handlers_dropped() -> None:
    """MetaSchedule rebuilds its loggers with ``dictConfig``, naming the handlers its logger already
    has; one without a name (pytest's capture handlers end up there) makes it fail in ``str.format``."""
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in logger.handlers if h.get_name() is None]:
        logger.removeHandler(handler)


def _run(tasks: list[Any], database: Any, work_dir: Path, per_task: int, search: Search, counter: Any,
         finished: Callable[[Sequence[Any]], None]) -> None:
    """Tune ``tasks``: those with one schedule in their search space (an element-wise kernel's) get that
    one measured, by replaying it, first; the others ``per_task`` trials of ``search``; ``finished(group)``
    after each of the two groups (so an interrupted tuning does not measure the first again). (MetaSchedule's
    evolutionary search on a one-schedule task finds nothing new to measure, and tries again five
    times, a search each, before it gives the task up.)"""
    _unnamed_handlers_dropped()
    _quiet_pool_teardown()
    replay = Search("replay-trace", search.timeout_s, search.seed)
    # stdout swallowed while the loggers are made: their console handler keeps the stream it saw.
    failure: Exception | None = None
    with contextlib.redirect_stdout(io.StringIO()), _sigint_noted(counter.interrupt) as sigint:
        try:
            probe, _ = _contexts(tasks, work_dir, replay)
            fixed = {i for i, ctx in enumerate(probe) if _one_schedule(ctx)}
            counter.total = len(fixed) + per_task * (len(tasks) - len(fixed))
            for group, trials, how in (([t for i, t in enumerate(tasks) if i in fixed], 1, replay),
                                       ([t for i, t in enumerate(tasks) if i not in fixed], per_task, search)):
                if group:
                    _tune(group, database, work_dir, trials, how, counter)
                    finished(group)
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C arrives wrapped in a TVM error from the C++ loop
            if sigint.seen or _interrupted(exc):
                failure = TuningInterrupted(f"tuning interrupted after {counter.done} trials; the "
                                            f"{len(database)} records found are kept in {work_dir}",
                                            hint="run again to tune the rest")
            else:
                failure = BackendError(f"MetaSchedule failed: {_last_line(exc)}")
        finally:
            # a builder's worker pool keeps a thread until its reference cycle is collected, and a process
            # with a thread forks unsafely: layerperf then reads a big trace in one process, not two. (The
            # error is raised below, outside the handler, so that it holds no traceback keeping the pool.)
            gc.collect()
    if failure is not None:
        raise failure


@contextlib.contextmanager
def _sigint_noted(noted: _Seen) -> Iterator[_Seen]:
    """A Ctrl-C while tuning is only noted: the measure callback stops the tuning at the next measured
    batch. Raised where it lands, in a Python call made from MetaSchedule's C++ loop, it came back as
    a RuntimeError with no message, or took the process down (std::terminate). A second Ctrl-C
    raises at once."""
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def handler(signum: int, frame: Any) -> None:
        if noted.seen:
            raise KeyboardInterrupt
        noted.seen = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def _quiet_pool_teardown() -> None:
    """Keep TVM's worker pools' teardown off stderr: after an interrupted tuning, the last reference to
    a builder's pool may go in one of its own threads, whose ``__del__`` then cannot join it (a harmless
    "Exception ignored ... cannot join current thread" traceback, printed by Python)."""
    default = sys.unraisablehook
    if getattr(default, "layerperf_quiet", False):
        return

    def hook(unraisable: Any) -> None:
        where = getattr(unraisable.object, "__qualname__", "")
        if not where.startswith("PopenPoolExecutor."):
            default(unraisable)

    hook.layerperf_quiet = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _contexts(tasks: list[Any], work_dir: Path, search: Search) -> tuple[list[Any], list[float]]:
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        tasks, str(work_dir), strategy=search.strategy, seed=search.seed)
    return list(contexts), list(weights)


def _one_schedule(context: Any) -> bool:
    """Whether a task's search space is one schedule: one design space with no sampled decision."""
    spaces = context.generate_design_space()
    return len(spaces) == 1 and len(spaces[0].trace.decisions) == 0


def _tune(tasks: list[Any], database: Any, work_dir: Path, per_task: int, search: Search, counter: Any) -> None:
    contexts, weights = _contexts(tasks, work_dir, search)
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"), counter]
    ms.tune.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(work_dir),
                       max_trials_global=per_task * len(contexts), max_trials_per_task=per_task,
                       num_trials_per_iter=min(64, per_task), database=database,
                       builder=ms.builder.LocalBuilder(timeout_sec=search.timeout_s, f_build=build_candidate),
                       runner=ms.runner.LocalRunner(timeout_sec=search.timeout_s),
                       cost_model=search.cost_model(), measure_callbacks=callbacks,
                       # round-robin joins each task's measured batch at the next pick: its records reach
                       # the database (and a Ctrl-C reaches Python) as they come. The default ("gradient")
                       # joins none before every task had its first batch: an interrupt then kept nothing
                       task_scheduler="round-robin")


def trials_per_task(total: int, n_tasks: int) -> int:
    """``--tune TRIALS`` spread over the tasks: at least one each."""
    return max(1, math.ceil(total / max(n_tasks, 1)))
