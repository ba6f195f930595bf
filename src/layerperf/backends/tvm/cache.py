"""Compiled models kept on disk, so that a second profile of the same build does not compile again.

An entry is keyed by everything that changes the code: the model's bytes (and the input shapes it
was imported with), the target, the pipeline, the tuning state (the digest of the database applied,
or none), TVM's and its FFI's versions, and this format's version. It lives in
``$LAYERPERF_CACHE/tvm/builds/<key>/``: ``module.so`` (the executable, weights inside) and
``build.json`` (the call map, each kernel's schedule, and how the build was made). ``build.json`` is
written last and both atomically, so an entry with a ``build.json`` is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from layerperf.backends.tvm.calls import CallMap
from layerperf.data.schedule import KernelSchedule
from layerperf.util.atomic import write_bytes
from layerperf.util.cache import cache_subdir

FORMAT_VERSION = 3  # 2: each kernel's schedule kept; 3: call maps with the last fused group's nodes all kept
MODULE_FILE = "module.so"
INFO_FILE = "build.json"
UNTUNED = "untuned"


def tvm_cache_dir() -> Path:
    """``$LAYERPERF_CACHE/tvm`` (default ``~/.cache/layerperf/tvm``)."""
    return cache_subdir("tvm")


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def model_digest(model_bytes: bytes, shapes: Mapping[str, Sequence[int]] | None = None) -> str:
    """The model's identity for the cache: its serialized bytes and the input shapes imported with."""
    return digest(model_bytes, json.dumps({k: list(v) for k, v in (shapes or {}).items()}, sort_keys=True))


@dataclass(frozen=True, slots=True)
class BuildKey:
    """What a compiled module depends on."""

    model: str  # model_digest
    target: str  # TargetSpec.key()
    pipeline: str
    tuning: str  # UNTUNED, or the digest of the tuning database applied
    versions: str  # runtime.version_key()

    def hexdigest(self) -> str:
        return digest(str(FORMAT_VERSION), self.model, self.target, self.pipeline, self.tuning, self.versions)[:24]


@dataclass(frozen=True, slots=True)
class BuildInfo:
    """How a build was made: written beside it, read back with it."""

    key: BuildKey
    compile_s: float
    schedule: str  # "default schedule" or "metaschedule (N records)"
    created: str
    tvm_warnings: tuple[str, ...] = ()  # what TVM's C++ warned of while compiling (cpp_log.said)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BuildInfo:
        return cls(BuildKey(**d["key"]), float(d["compile_s"]), str(d["schedule"]), str(d["created"]),
                   tuple(map(str, d.get("tvm_warnings") or ())))


def entry_dir(key: BuildKey, root: Path | None = None) -> Path:
    return (root or tvm_cache_dir()) / "builds" / key.hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """A complete cache entry: the module's path, its call map, how it was built, its kernels' schedules."""

    module: Path
    cmap: CallMap
    info: BuildInfo
    schedules: dict[str, KernelSchedule]


def lookup(key: BuildKey, root: Path | None = None) -> Entry | None:
    """The entry cached for ``key``; None when there is no complete one."""
    folder = entry_dir(key, root)
    try:
        data = orjson.loads((folder / INFO_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if data.get("format") != FORMAT_VERSION or not (folder / MODULE_FILE).is_file():
        return None
    schedules = {name: KernelSchedule.from_json(d) for name, d in (data.get("schedules") or {}).items()}
    return Entry(folder / MODULE_FILE, CallMap.from_json(data["calls"]), BuildInfo.from_json(data["info"]), schedules)


def store(info: BuildInfo, cmap: CallMap, export: Callable[[str], object], root: Path | None = None,
          schedules: Mapping[str, KernelSchedule] | None = None) -> Path:
    """Write an entry: ``export(path)`` writes the module (``VMExecutable.export_library``) to a
    temporary name, renamed into place; then ``build.json``. Returns the module's path."""
    folder = entry_dir(info.key, root)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / MODULE_FILE
    temp = folder / f".{MODULE_FILE}.{os.getpid()}.tmp.so"
    try:
        export(str(temp))
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    payload = {"format": FORMAT_VERSION, "info": info.to_json(), "calls": cmap.to_json(),
               "schedules": {name: s.to_json() for name, s in (schedules or {}).items()}}
    write_bytes(folder / INFO_FILE, orjson.dumps(payload), fsync=True)
    return target
