"""One configuration of a sweep (:class:`Config`), its key, and the sweep's configurations in order.

A configuration is a model on a backend under every factor a sweep varies: batch, intra-op threads,
optimization level, ONNX Runtime's execution mode (``inter_op``: None sequential, N parallel with N
inter-op threads, 0 its default), a built-in model's build seed (its random weights; a kernel sweep's
sampled configurations too), the CPU set the run is pinned to, a co-runner beside it, the perf
events counted, the runs and warm-up taken, and for a compiling backend (TVM) the target and the tuning
trials. Its :meth:`Config.key` is the store's unique key: the same command run again finds every
configuration it already holds and measures only the rest.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from layerperf import backends
from layerperf.backends.base import RunPlan, option_fields
from layerperf.bench.corun import CorunSpec, placement
from layerperf.collectors.perf import CounterRequest
from layerperf.errors import InputError
from layerperf.models import zoo
from layerperf.models.inputs import onnx_input_specs
from layerperf.util.affinity import check_cpus, format_cpus

if TYPE_CHECKING:
    import onnx

SEQUENTIAL = "seq"  # what --inter-op and the key write for ONNX Runtime's sequential execution mode
KEY_FIELDS = ("model", "backend", "batch", "threads", "opt_level", "inter_op", "cpus", "corun", "corun_cores",
              "events", "runs", "warmup")
# a compiling backend's factors (TVM's --target and --tune): in the key only where they apply, so that the
# keys of the configurations of other backends stay as stores made before them hold them
COMPILE_FIELDS = ("target", "tune")
# a built-in model's build seed: in the key only where it is not 0, for the same reason
SEED_FIELD = "model_seed"
MAX_SEED = 1 << 63  # a seed is an SQLite integer in the store


@dataclass(frozen=True, slots=True)
class Config:
    """One (model, configuration) of a sweep. ``model``: a built-in model's name or an .onnx file's absolute
    path; ``batch`` None where it does not apply (a file without a free leading dimension); ``opt_level``
    and ``inter_op`` None where the backend has no such option; ``cpus`` the CPU list the run is pinned to
    ("" unpinned), ``corun`` the co-runner's operator ("" alone) and ``corun_cores`` ``shared`` or
    ``separate`` (with a co-runner), ``events`` perf events, comma-separated; ``target`` and ``tune`` (TVM's
    target and MetaSchedule trials, 0 untuned) None on a backend that compiles nothing; ``model_seed`` the seed
    a built-in model is built with (0 for a file, which is as it is)."""

    model: str
    backend: str
    batch: int | None
    threads: int
    opt_level: str | None = None
    inter_op: int | None = None
    cpus: str = ""
    corun: str = ""
    corun_cores: str = ""
    events: str = ""
    runs: int = 10
    warmup: int = 3
    target: str | None = None
    tune: int | None = None
    model_seed: int = 0

    def key(self) -> str:
        """The store's unique key: every field, ``name=value`` joined by ``;`` (None as ``-``); the
        compiling backend's factors, then the seed, last and only where they apply (a seed other than 0)."""
        names = KEY_FIELDS + tuple(n for n in COMPILE_FIELDS if getattr(self, n) is not None)
        names += (SEED_FIELD,) if self.model_seed else ()
        return ";".join(f"{name}={_text(name, getattr(self, name))}" for name in names)

    def alone_key(self) -> str:
        """The key of this configuration without its co-runner: the row its interference is measured against."""
        return dataclasses.replace(self, corun="", corun_cores="").key()

    def label(self) -> str:
        """A short description for progress lines: ``resnet18 b1 t2 all``."""
        parts = [Path(self.model).name if self.is_file else self.model, self.backend]
        parts += [f"b{self.batch}"] if self.batch is not None else []
        parts += [f"t{self.threads}"] + ([self.opt_level] if self.opt_level else [])
        parts += [f"inter-op {self.inter_op}"] if self.inter_op is not None else []
        parts += [f"cpus {self.cpus}"] if self.cpus else []
        parts += [f"corun {self.corun} ({self.corun_cores})"] if self.corun else []
        parts += [f"target {self.target}"] if self.target is not None else []
        parts += [f"tune {self.tune}" if self.tune else "untuned"] if self.tune is not None else []
        parts += [f"model seed {self.model_seed}"] if self.model_seed else []
        return " ".join(parts)

    @property
    def is_file(self) -> bool:
        return self.model not in zoo.names()

    def backend_options(self) -> dict[str, object]:
        """The backend's own options this configuration sets."""
        out: dict[str, object] = {}
        if self.opt_level is not None:
            out["opt_level"] = self.opt_level
        if self.inter_op is not None:
            out.update(execution_mode="parallel", inter_op_threads=self.inter_op)
        if self.target is not None:
            out["target"] = self.target
        if self.tune is not None:
            out["tune"] = self.tune
        return out


def _text(name: str, value: object) -> str:
    if value is None:
        return SEQUENTIAL if name == "inter_op" else "-"
    return str(value)


@dataclass(frozen=True, slots=True)
class Axes:
    """What a sweep varies, as the command line gives it (every combination is one configuration)."""

    models: tuple[str, ...]
    backends: tuple[str, ...] = (backends.DEFAULT,)
    batches: tuple[int, ...] = (1,)
    threads: tuple[int, ...] = (1,)
    opt_levels: tuple[str, ...] = ("all",)
    inter_ops: tuple[int | None, ...] = (None,)
    cpu_sets: tuple[frozenset[int] | None, ...] = (None,)
    coruns: tuple[str, ...] = ()  # each co-runner gives the configurations again beside it
    corun_cores: str = "separate"
    events: tuple[str, ...] = ()
    runs: int = 10
    warmup: int = 3
    targets: tuple[str, ...] = ("llvm",)  # a compiling backend's (TVM's)
    tunes: tuple[int, ...] = (0,)
    model_seeds: tuple[int, ...] = (0,)  # built-in models' build seeds (a file is collected once)


def _has_option(backend: str, name: str) -> bool:
    return name in {f.name for f in option_fields(backends.get(backend).options_type)}


def batch_applies(model: str) -> bool:
    """Whether ``--batch`` changes ``model``: a built-in model, or a file whose inputs have a free leading
    dimension. A file that does not load says yes: its configurations then fail, each with the reason."""
    if model in zoo.names():
        return True
    import onnx  # lazy: the CLI's parser must not import onnx

    try:
        proto = onnx.load(model, load_external_data=False)
    except Exception:  # a corrupt model: measured, and recorded as failed with the runtime's reason
        return True
    return batch_changes(proto)


def check_corun(spec: str, cpu_sets: Sequence[frozenset[int] | None], threads: Sequence[int], cores: str) -> None:
    """A co-runner that can be built (as it will be, without its data) and placed beside every run of
    ``cpu_sets`` x ``threads``; InputError in one line else."""
    CorunSpec.parse(spec).checked()
    for cpus, n in itertools.product(cpu_sets, threads):
        placement(cpus, n, cores)


def batch_changes(proto: onnx.ModelProto) -> bool:
    """Whether a batch can be given a model file's inputs: one of them has a free leading dimension."""
    return any(spec.shape and not isinstance(spec.shape[0], int) for spec in onnx_input_specs(proto))


def expand(axes: Axes) -> list[Config]:
    """Every configuration of ``axes``, in order (models outermost, co-runners innermost), once each: a
    factor a backend or model does not have collapses to None."""
    out: dict[str, Config] = {}
    events = ",".join(axes.events)
    coruns = [("", "")] + [(spec, axes.corun_cores) for spec in axes.coruns]
    for model, backend in itertools.product(axes.models, axes.backends):
        batches: Sequence[int | None] = axes.batches if batch_applies(model) else (None,)
        levels: Sequence[str | None] = axes.opt_levels if _has_option(backend, "opt_level") else (None,)
        inter: Sequence[int | None] = axes.inter_ops if _has_option(backend, "execution_mode") else (None,)
        targets: Sequence[str | None] = axes.targets if _has_option(backend, "target") else (None,)
        tunes: Sequence[int | None] = axes.tunes if _has_option(backend, "tune") else (None,)
        seeds = axes.model_seeds if model in zoo.names() else (0,)
        for seed, batch, threads, level, inter_op, cpus, (corun, cores), target, tune in itertools.product(
                seeds, batches, axes.threads, levels, inter, axes.cpu_sets, coruns, targets, tunes):
            cfg = Config(model=model, backend=backend, batch=batch, threads=threads, opt_level=level,
                         inter_op=inter_op, cpus=format_cpus(cpus or ()), corun=corun, corun_cores=cores,
                         events=events, runs=axes.runs, warmup=axes.warmup, target=target, tune=tune,
                         model_seed=seed)
            out.setdefault(cfg.key(), cfg)
    return list(out.values())


def _check_compile_factors(axes: Axes) -> None:
    """Each --target, --opt-level and --tune a backend of the sweep would get, checked there (TVM: the
    target parsed and runnable here; ONNX Runtime: a level it has; trials not negative)."""
    if any(t < 0 for t in axes.tunes):
        raise InputError("--tune values must be 0 (untuned) or a number of trials")
    for name in axes.backends:
        backend = backends.get(name)
        for option, values in (("target", axes.targets), ("opt_level", axes.opt_levels)):
            if _has_option(name, option):
                for value in values:
                    backends.check_options(backend, backends.backend_options(backend, {option: value}))


def check(axes: Axes) -> None:
    """Refuse, in one line and before anything is measured or written, what no configuration could run:
    no model, an unknown model or backend, a backend that cannot run here, an unusable perf event, a
    malformed co-runner, a CPU set this process may not use, an empty factor, no measured run."""
    if not axes.models:
        raise InputError("nothing to collect: --models names no model")
    for name, values in (("--batch", axes.batches), ("--threads", axes.threads), ("--opt-level", axes.opt_levels),
                         ("--inter-op", axes.inter_ops), ("--backend", axes.backends), ("--target", axes.targets),
                         ("--tune", axes.tunes), ("--model-seed", axes.model_seeds)):
        if not values:
            raise InputError(f"nothing to collect: {name} is empty")
    names = zoo.names()
    for model in axes.models:
        if model not in names and not Path(model).is_file():
            raise InputError(f"unknown model '{model}': neither a built-in model nor a file",
                             hint="built-in models: " + ", ".join(names))
    if any(s >= MAX_SEED for s in axes.model_seeds):
        raise InputError(f"--model-seed values must be below 2**63 (the store's integers), got {max(axes.model_seeds)}")
    if any(axes.model_seeds) and not any(model in names for model in axes.models):
        raise InputError("--model-seed builds built-in models (their weights; a kernel sweep's sampled "
                         "configurations) and --models names none: a model file is as it is",
                         hint="leave --model-seed out for files")
    for backend in axes.backends:
        backends.usable(backends.get(backend))
    _check_compile_factors(axes)
    if any(b < 1 for b in axes.batches):
        raise InputError("--batch values must be 1 or more")
    if axes.runs < 1:
        raise InputError(f"--runs must be 1 or more, got {axes.runs}")
    for threads in axes.threads:
        RunPlan(threads=threads).validate()
    for cpus in axes.cpu_sets:
        if cpus:
            check_cpus(cpus)
    for spec in axes.coruns:
        check_corun(spec, axes.cpu_sets, axes.threads, axes.corun_cores)
    if axes.events:
        request = CounterRequest.build(list(axes.events), None)
        if request is not None:
            request.check()
