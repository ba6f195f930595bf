"""One configuration measured: :func:`run_config` (what a local worker process or a Ray task runs).

The model is profiled on its backend through the registry, pinned to the configuration's CPUs with its
co-runner beside it when it has one, the CPU-speed yardstick read between the measured runs
(:mod:`.speedcheck`). Runs taken while the CPU ran slowed are set aside from the per-layer statistics
— the records are those of the profile less those runs — and counted; a configuration slowed through
most of its runs is measured again (``SPEED_RETRIES`` times) and, if still slowed, stored flagged.

:func:`run_config` never raises for a model that fails: a model that cannot load, a runtime error, a
co-runner that does not start are a :class:`ConfigResult` with status ``failed`` and the reason in
one line, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from layerperf import backends
from layerperf.backends.base import RunPlan
from layerperf.bench import speed
from layerperf.bench.corun import CoRunner, CorunSpec, placement
from layerperf.collectors import Collectors
from layerperf.data.metadata import now
from layerperf.data.profile import Profile
from layerperf.data.records import LayerRecord
from layerperf.dataset.config import Config
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.speedcheck import SpeedRecorder, SpeedVerdict
from layerperf.errors import LayerperfError, first_line
from layerperf.models.inputs import batch_shapes
from layerperf.util.affinity import format_cpus, parse_cpus, pinned

SPEED_RETRIES = 1  # a configuration slowed through most of its runs is measured this many times more


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """One configuration's outcome, as the store's ``configs`` row and its ``layers`` rows keep it.

    ``status`` ``ok`` or ``failed`` (``reason``: why, in one line). Runs: ``runs_measured`` taken,
    ``runs_slowed`` of them while the CPU ran slowed and ``runs_disturbed`` while another process had the
    CPU (both set aside), ``runs_used`` in the statistics; ``slowed_used`` (``disturbed_used``) True where
    too few clean runs came and the statistics use slowed (disturbed) ones: the row is flagged;
    ``attempts`` measurements made. ``yardstick_*``: the full-speed yardstick and the median
    reading (ns). ``latency_*``: whole-model latency with the profiler off, over the runs used (µs).
    ``run_cpus``/``corun_cpus``: the CPU lists the run and its co-runner were pinned to ("" unpinned);
    ``corun_calls_per_s``: the co-runner's throughput meanwhile. ``worker``: where it ran."""

    config: Config
    fingerprint: Fingerprint
    status: str
    reason: str | None
    started: str
    wall_s: float
    records: tuple[LayerRecord, ...] = ()
    runs_measured: int | None = None
    runs_used: int | None = None
    runs_slowed: int | None = None
    slowed_used: bool | None = None
    runs_disturbed: int | None = None
    disturbed_used: bool | None = None
    attempts: int = 0
    yardstick_ref_ns: float | None = None
    yardstick_median_ns: float | None = None
    latency_median_us: float | None = None
    latency_p90_us: float | None = None
    run_cpus: str = ""
    corun_cpus: str = ""
    corun_calls_per_s: float | None = None
    warnings: str = ""
    worker: str = ""


def failed(cfg: Config, reason: str, *, started: str | None = None, wall_s: float = 0.0,
           fingerprint: Fingerprint | None = None, worker: str = "") -> ConfigResult:
    """A failed configuration's result (``fingerprint``: where it failed; this machine when unknown)."""
    return ConfigResult(cfg, fingerprint or Fingerprint.here(), "failed", reason, started or now(), wall_s,
                        worker=worker)


def run_config(cfg: Config, worker: str = "") -> ConfigResult:
    """Measure ``cfg`` here; a failure is a result with its reason, never an exception (but an interrupt)."""
    fp, started, t0 = Fingerprint.here(), now(), time.perf_counter()
    try:
        result = _measure(cfg, fp, started, t0)
    except LayerperfError as exc:
        return failed(cfg, str(exc), started=started, wall_s=time.perf_counter() - t0, fingerprint=fp, worker=worker)
    except Exception as exc:  # a runtime's own error: recorded as the reason, the sweep goes on
        reason = f"{type(exc).__name__}: {first_line(exc)}"
        return failed(cfg, reason, started=started, wall_s=time.perf_counter() - t0, fingerprint=fp, worker=worker)
    return dataclasses.replace(result, worker=worker)


def _plan(cfg: Config, hook: SpeedRecorder) -> RunPlan:
    shapes: tuple[str, ...] = ()
    zoo: dict[str, int] = {}
    if cfg.batch is not None and cfg.is_file:
        import onnx  # lazy: a heavy runtime; the worker has it loaded by the time it measures

        try:
            proto = onnx.load(cfg.model, load_external_data=False)
        except Exception:  # a file that does not load: the backend says why, in its words
            proto = None
        shapes = batch_shapes(proto, cfg.batch) if proto is not None else ()
    elif cfg.batch is not None:
        zoo = {"batch": cfg.batch}
    if cfg.model_seed and not cfg.is_file:
        zoo["seed"] = cfg.model_seed
    return RunPlan(warmup=cfg.warmup, runs=cfg.runs, threads=cfg.threads, shapes=shapes, zoo_options=zoo,
                   latency=True, between_runs=hook)


@contextlib.contextmanager
def _placed(cfg: Config) -> Iterator[tuple[frozenset[int] | None, frozenset[int] | None, list[CoRunner]]]:
    """The run pinned where the configuration says, its co-runner (if any) started beside it."""
    run_cpus = parse_cpus(cfg.cpus) if cfg.cpus else None
    if not cfg.corun:
        with pinned(run_cpus):
            yield run_cpus, None, []
        return
    run_cpus, corun_cpus = placement(run_cpus, cfg.threads, cfg.corun_cores)
    with CoRunner(CorunSpec.parse(cfg.corun), corun_cpus) as co, pinned(run_cpus):
        yield run_cpus, corun_cpus, [co]


def _checked(cfg: Config) -> bool:
    """Whether the speed checks judge this configuration's runs: not beside a co-runner on the run's own
    cores, where waiting for it (a run disturbed) and a yardstick slowed beside it are the interference the
    configuration is there to measure (set aside, its figures read as if alone; ``bench --shared-cores``
    keeps every sample too)."""
    return not (cfg.corun and cfg.corun_cores == "shared")


def _profile(cfg: Config) -> tuple[Profile, SpeedRecorder, SpeedVerdict | None, int]:
    """The profile, the speed check of its runs (None: not judged, :func:`_checked`) and the attempts it
    took."""
    backend = backends.usable(backends.get(cfg.backend))
    options = backends.backend_options(backend, cfg.backend_options())
    events = [e for e in cfg.events.split(",") if e]
    model: Any = str(Path(cfg.model)) if cfg.is_file else cfg.model
    attempt = 0
    while attempt <= SPEED_RETRIES:
        attempt += 1
        hook = SpeedRecorder()
        prof = backend.profile(model, _plan(cfg, hook), options, Collectors.make(events=events))
        if not _checked(cfg):
            return prof, hook, None, attempt
        verdict = hook.verdict(len(prof.runs), speed.reference_ns())
        if not verdict.slowed_used:
            break
    return prof, hook, verdict, attempt


def _measure(cfg: Config, fp: Fingerprint, started: str, t0: float) -> ConfigResult:
    with _placed(cfg) as (run_cpus, corun_cpus, coruns):
        prof, hook, judged, attempts = _profile(cfg)
    verdict = judged or SpeedVerdict(tuple(range(len(prof.runs))), 0, False, None, None)  # every run, unjudged
    if judged is not None:
        hook.remember(judged)
    warnings = list(prof.warnings)
    if run_cpus and cfg.threads > len(run_cpus):  # allowed, and a factor of its own: said in the row
        warnings.append(f"{cfg.threads} intra-op threads on {len(run_cpus)} CPUs ({format_cpus(run_cpus)}): they "
                        "share them, so layer times include waits for a CPU")
    used = list(verdict.used)
    kept = dataclasses.replace(prof, runs=[prof.runs[i] for i in used])
    latency = [prof.latency_ns[i] for i in used] if len(prof.latency_ns) == len(prof.runs) else []
    return ConfigResult(
        cfg, fp, "ok", None, started, time.perf_counter() - t0, records=tuple(kept.records()),
        runs_measured=len(prof.runs), runs_used=len(used),
        runs_slowed=verdict.slowed if judged is not None else None,  # unknown, not 0: nothing was judged
        slowed_used=verdict.slowed_used, runs_disturbed=verdict.disturbed if judged is not None else None,
        disturbed_used=verdict.disturbed_used,
        attempts=attempts, yardstick_ref_ns=verdict.reference_ns,
        yardstick_median_ns=verdict.median_reading_ns,
        latency_median_us=float(np.median(latency)) / 1e3 if latency else None,
        latency_p90_us=float(np.percentile(latency, 90)) / 1e3 if latency else None,
        run_cpus=format_cpus(run_cpus or ()), corun_cpus=format_cpus(corun_cpus or ()),
        corun_calls_per_s=coruns[0].calls_per_s if coruns else None, warnings=" | ".join(warnings))
