"""A model made runnable on the Relax VM: imported, compiled, mapped to its ONNX nodes — or read back
from the artifact cache (:mod:`.cache`) when the same build was made before."""

from __future__ import annotations

import datetime as _dt
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import tvm
from tvm import relax

from layerperf.backends.tvm import cache, cpp_log
from layerperf.backends.tvm.bytecode import Function, main_function
from layerperf.backends.tvm.calls import CallMap
from layerperf.backends.tvm.database import kernel_schedules
from layerperf.backends.tvm.device import device_of, runnable_target
from layerperf.backends.tvm.importer import import_onnx
from layerperf.backends.tvm.mapping import call_map
from layerperf.backends.tvm.pipeline import PIPELINES, compile_module
from layerperf.backends.tvm.runtime import version_key
from layerperf.backends.tvm.target import TargetSpec
from layerperf.data.schedule import KernelSchedule, default_schedule
from layerperf.errors import InputError

DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")


@dataclass(frozen=True, slots=True)
class Build:
    """What a profile runs: the executable (or the module loaded from the cache), ``main``'s
    bytecode, its call map, how it was made, and each kernel's schedule (by function name)."""

    executable: Any  # relax.VMExecutable, or the tvm.runtime.Module loaded from the cache
    main: Function
    cmap: CallMap
    info: cache.BuildInfo
    spec: TargetSpec
    target: Any  # tvm.target.Target
    from_cache: bool
    schedules: dict[str, KernelSchedule]

    def schedule(self, func: str) -> KernelSchedule:
        """The schedule kernel ``func`` was built with (the default one when untuned)."""
        return self.schedules.get(func) or default_schedule(func)

    @property
    def device(self) -> Any:
        return device_of(self.target)

    @property
    def tuned(self) -> bool:
        return self.info.key.tuning != cache.UNTUNED


def database_digest(database_dir: Path | None) -> str:
    """The tuning state a build applies: UNTUNED without a database or records, else their digest."""
    if database_dir is None:
        return cache.UNTUNED
    files = [database_dir / name for name in DATABASE_FILES]
    if not all(f.is_file() for f in files) or files[1].stat().st_size == 0:
        return cache.UNTUNED
    return "ms-" + cache.digest(*(f.read_bytes() for f in files))[:24]


def _schedule_note(tuning: str) -> str:
    return "default schedule" if tuning == cache.UNTUNED else f"metaschedule database {tuning}"


def _compile(model: onnx.ModelProto, target: Any, key: cache.BuildKey, database_dir: Path | None,
             shapes: dict[str, list[int]] | None) -> tuple[Any, CallMap, cache.BuildInfo, dict[str, KernelSchedule]]:
    tuned = key.tuning != cache.UNTUNED and database_dir is not None
    with cpp_log.captured() as tvm_warnings:  # TVM's C++ warnings: the build's, not the terminal's
        imported = import_onnx(model, shapes)
        compiled = compile_module(imported.mod, target, key.pipeline, str(database_dir) if tuned else None)
    cmap = call_map(compiled.snapshots, imported.owner, imported.n_nodes, main_function(compiled.executable.as_text()))
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    names = sorted({s.func for s in cmap.kernels()})
    schedules = kernel_schedules(database_dir if tuned else None, target, compiled.snapshots.tunable(), names)
    info = cache.BuildInfo(key, compiled.compile_s, _schedule_note(key.tuning), created, tuple(tvm_warnings))
    return compiled.executable, cmap, info, schedules


def build(model: onnx.ModelProto, *, target: str = "llvm", pipeline: str = "default",
          database_dir: Path | None = None, shapes: dict[str, list[int]] | None = None,
          use_cache: bool = True, cache_root: Path | None = None, num_cores: int | None = None) -> Build:
    """The model compiled for ``target`` with ``pipeline`` (and the tuning database, when it has
    records), from the cache when the same build is there; ``num_cores``: an llvm target's cores where it
    names none. One-line errors: target unavailable, op not importable, compile failure."""
    if pipeline not in PIPELINES:
        raise InputError(f"unknown TVM pipeline '{pipeline}'", hint="one of: " + ", ".join(PIPELINES))
    spec, tgt = runnable_target(target, num_cores)
    key = cache.BuildKey(cache.model_digest(model.SerializeToString(), shapes), spec.key(), pipeline,
                         database_digest(database_dir), version_key())
    hit = cache.lookup(key, cache_root) if use_cache else None
    if hit is not None:
        module = tvm.runtime.load_module(str(hit.module))
        main = main_function(relax.VMExecutable(module).as_text())
        return Build(module, main, hit.cmap, hit.info, spec, tgt, True, hit.schedules)
    executable, cmap, info, schedules = _compile(model, tgt, key, database_dir, shapes)
    if use_cache:
        try:
            cache.store(info, cmap, executable.export_library, cache_root, schedules)
        except (OSError, RuntimeError) as exc:  # a cache that cannot be written is no error
            warnings.warn(f"the compiled model was not cached: {exc}", stacklevel=2)
    return Build(executable, main_function(executable.as_text()), cmap, info, spec, tgt, False, schedules)
