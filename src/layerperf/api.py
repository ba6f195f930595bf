"""The Python API: ``layerperf.profile(model, backend=..., **options) -> Profile``; ``layerperf.save`` and
``layerperf.load`` to write a Profile's files and read one back."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from layerperf import backends
from layerperf.backends import backend_options, usable
from layerperf.backends.base import RunPlan
from layerperf.collectors import Collectors
from layerperf.collectors.rss import DEFAULT_SAMPLE_RATE
from layerperf.data.profile import Profile
from layerperf.errors import InputError
from layerperf.models import zoo
from layerperf.readers.layerperf import load_profile
from layerperf.renderers import files


def _zoo_options(batch: int | None, image_size: int | None, seq_len: int | None, model_seed: int) -> dict[str, int]:
    given = {"batch": batch, "image_size": image_size, "seq_len": seq_len, "seed": model_seed or None}
    return {k: v for k, v in given.items() if v is not None}


def profile(model: Any, *, backend: str | None = None, warmup: int = 10, runs: int = 100, threads: int = 0,
            shapes: Sequence[str] = (), inputs: str | Path | None = None, seed: int = 0, batch: int | None = None,
            image_size: int | None = None, seq_len: int | None = None, model_seed: int = 0, latency: bool = True,
            events: Sequence[str] | None = None, perf_config: str | Path | None = None, passes: int = 5,
            multiplex: bool = False, memory: bool = False, sample_rate: int | None = None,
            progress: Callable[[str, int, int], None] | None = None,
            between_runs: Callable[[int], None] | None = None, **options: Any) -> Profile:
    """Profile ``model`` layer by layer on ``backend`` (default: the one for the model's file type,
    ONNX Runtime for .onnx files, built-in model names and ModelProtos; see ``layerperf backends``).

    ``model``: a model file, a built-in model name, or the backend's own model object. Per-layer
    timings are taken in situ over ``runs`` measured runs after ``warmup``; whole-model latency with
    the profiler off on runs alternating with the profiled ones (``latency=False`` skips it).

    ``seed`` seeds the random inputs; ``model_seed`` builds a built-in model with that seed (its random
    weights; a kernel sweep's sampled configurations), as ``collect --model-seed`` does.

    ``events`` (perf event strings) or ``perf_config`` (a JSON file mapping event string to label)
    add per-layer perf counters, over ``passes`` passes per event group; ``multiplex`` counts every
    event in one group, scaled by the time it was counted. ``memory`` adds the memory profile
    (``Profile.memory``), resident memory sampled every ``sample_rate`` layers (default 1; 0: off).

    ``between_runs(n)``, when given, is called between the measured runs, outside their timing: with 0
    before the first, then with the runs made so far (:attr:`RunPlan.between_runs`).

    Other keywords are the backend's own options (ONNX Runtime: ``opt_level``, ``provider``,
    ``max_events``).
    """

    chosen = usable(backends.for_model(model, backend))
    opts = backend_options(chosen, options)
    zoo_opts = _zoo_options(batch, image_size, seq_len, model_seed)
    if zoo_opts and isinstance(model, str | Path) and Path(str(model)).suffix:
        if zoo_opts.keys() == {"seed"}:
            raise InputError("--model-seed applies to built-in models only: a model file is as it is")
        raise InputError("--batch/--image-size/--seq-len/--model-seed apply to built-in models only",
                         hint="use --shape NAME=DIMS for a model file")
    plan = RunPlan(warmup=warmup, runs=runs, threads=threads, shapes=tuple(shapes),
                   inputs_file=str(inputs) if inputs else None, seed=seed, latency=latency, zoo_options=zoo_opts,
                   between_runs=between_runs)
    plan.validate()
    collectors = Collectors.make(events=events, perf_config=perf_config, passes=passes, multiplex=multiplex,
                                 memory=memory, sample_rate=sample_rate, progress=progress)
    prof = chosen.profile(model, plan, opts, collectors)
    ignored = zoo.ignored_size(model, image_size, seq_len) if isinstance(model, str) else None
    if ignored:
        prof.warnings.append(ignored)
    cores = os.cpu_count()
    if cores and threads > cores:  # the runtime takes it; the threads then share the cores
        prof.warnings.append(f"{threads} intra-op threads asked for on {cores} cores: they share the cores, so "
                             "layer times include waits for a core")
    return prof


def profile_memory(model: Any, *, sample_rate: int = DEFAULT_SAMPLE_RATE, runs: int = 3, warmup: int = 1,
                   latency: bool = False, **options: Any) -> Profile:
    """``profile(model, memory=True, ...)`` with fewer runs: memory needs no timing statistics.

    The report is ``profile.memory`` (a :class:`~layerperf.analysis.memory.report.MemoryReport`).
    """
    return profile(model, runs=runs, warmup=warmup, latency=latency, memory=True, sample_rate=sample_rate,
                   **options)


def save(profile: Profile, out_dir: str | Path) -> dict[str, Path]:
    """Write ``profile``'s files into ``out_dir`` (created when missing), atomically: ``trace.json`` (the
    Profile itself, for :func:`load` and trace viewers), ``layers.csv``, and the memory pictures when it
    has a memory report. Returns file name -> path."""
    return files.save(profile, Path(out_dir))


def load(path: str | Path) -> Profile:
    """Read a layerperf ``trace.json`` (or the directory holding one) back into a Profile; a trace written
    by an older layerperf loads with None (or the default) for what it lacks."""
    return load_profile(Path(path))
