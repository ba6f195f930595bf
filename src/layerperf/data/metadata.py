"""The metadata at the top of a Profile: which model ran, on which backend, with which plan and options,
on which machine. Typed here; :func:`layerperf.backends.common.profile_metadata` is the one builder the
backends call.

trace.json keeps it under ``otherData.layerperf.metadata`` with the keys layerperf 0.1 wrote: the run
plan and the backend's own options side by side in one ``options`` object, which loading splits again
(:func:`split_options`). Loading fills None for what an older file lacks, and keeps keys a newer one
added (``Metadata.other``) to write them back as they were.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from layerperf.data.machine import Machine

_T = TypeVar("_T")

# What an option holds: a JSON scalar, or a tuple of them (a list in JSON: shapes, perf events).
OptionValue = Any


@dataclass(frozen=True, slots=True)
class DataFile:
    """One external-data file of an ONNX model: where the model names it, its size, its SHA-256."""

    location: str
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """The model that ran: its name, its file and that file's SHA-256 (None where the model is no file,
    as a module object), whether it is a built-in model and with which zoo options (batch, image_size,
    seq_len), and its external-data files."""

    name: str = "model"
    path: str | None = None
    sha256: str | None = None
    zoo: bool | None = None
    zoo_options: Mapping[str, int] | None = None
    external_data: tuple[DataFile, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for key in ("path", "sha256", "zoo"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        if self.external_data is not None:
            out["external_data"] = [dataclasses.asdict(f) for f in self.external_data]
        if self.zoo_options is not None:
            out["zoo_options"] = dict(self.zoo_options)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ModelInfo:
        """A model's description as a model source gives it (``ModelSource.describe()``) or trace.json keeps it."""
        files = d.get("external_data")
        zoo_options = d.get("zoo_options")
        return cls(name=str(d.get("name", "model")), path=_str(d.get("path")), sha256=_str(d.get("sha256")),
                   zoo=None if d.get("zoo") is None else bool(d["zoo"]),
                   zoo_options=None if zoo_options is None else {str(k): int(v) for k, v in zoo_options.items()},
                   external_data=None if files is None else tuple(
                       DataFile(str(f["location"]), int(f["bytes"]), str(f["sha256"])) for f in files))


# The run plan's fields, as RunPlan names them and trace.json's options object keeps them.
PLAN_FIELDS = ("warmup", "runs", "threads", "seed", "shapes", "inputs_file", "latency")


@dataclass(frozen=True, slots=True)
class PlanInfo:
    """The run plan the profile followed: warm-up and measured runs, intra-op threads asked for (0: the
    runtime's default), input shapes given (``NAME=DIMS``), the inputs file, the seed of random inputs,
    whether latency was measured. None where the backend did not record a field; ``keys`` are the ones
    it recorded (ONNX Runtime records the whole plan, torch and most others warmup, runs, threads, seed
    and shapes), written back to trace.json as they were."""

    warmup: int | None = None
    runs: int | None = None
    threads: int | None = None
    seed: int | None = None
    shapes: tuple[str, ...] | None = None
    inputs_file: str | None = None
    latency: bool | None = None
    keys: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {key: _plain(getattr(self, key)) for key in self.keys}


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """A backend's own options (ONNX Runtime's opt_level, provider, max_events; torch's level...), named
    by the backend that took them, field by field as its options dataclass has them."""

    backend: str | None = None
    values: tuple[tuple[str, OptionValue], ...] = ()

    @classmethod
    def of(cls, backend: str, options: Any) -> BackendOptions:
        """The options of ``backend`` from its options dataclass, or from a mapping of option -> value."""
        is_record = dataclasses.is_dataclass(options) and not isinstance(options, type)
        items = dataclasses.asdict(options).items() if is_record else dict(options).items()
        return cls(backend, tuple((str(k), _frozen(v)) for k, v in items))

    def get(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self.values if k == key), default)

    def as_dict(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in self.values}

    def to(self, options_type: type[_T]) -> _T:
        """The options as the backend's own dataclass: the fields it has, its defaults for the others."""
        names = {f.name for f in dataclasses.fields(options_type)}  # type: ignore[arg-type]
        return options_type(**{k: v for k, v in self.values if k in names})

    def text(self) -> str:
        """``opt_level=all;provider=CPUExecutionProvider``: the options as one line of text, a list's items
        joined by commas."""
        return ";".join(f"{k}={_text(v)}" for k, v in self.values)


def split_options(backend: str | None, options: Mapping[str, Any]) -> tuple[PlanInfo, BackendOptions]:
    """trace.json's ``options`` object as the run plan (the keys named in :data:`PLAN_FIELDS`) and the
    backend's own options (every other key)."""
    plan = {k: options[k] for k in PLAN_FIELDS if k in options}
    own = tuple((str(k), _frozen(v)) for k, v in options.items() if k not in plan)
    shapes, latency = plan.get("shapes"), plan.get("latency")
    return PlanInfo(
        warmup=_int(plan.get("warmup")), runs=_int(plan.get("runs")), threads=_int(plan.get("threads")),
        seed=_int(plan.get("seed")), shapes=None if shapes is None else tuple(str(s) for s in shapes),
        inputs_file=_str(plan.get("inputs_file")), latency=None if latency is None else bool(latency),
        keys=tuple(plan)), BackendOptions(backend, own)


@dataclass(frozen=True, slots=True)
class Metadata:
    """Who made the profile, of what, where: the model, the backend (its version, its provider or target),
    the run plan and the backend's own options, the machine's fingerprint, layerperf's version, when
    (``created``, ISO 8601 UTC) and in which process (``pid``). ``other``: keys a newer layerperf wrote,
    kept to be written back."""

    model: ModelInfo = field(default_factory=ModelInfo)
    backend: str | None = None
    backend_version: str | None = None
    provider: str | None = None
    plan: PlanInfo = field(default_factory=PlanInfo)
    options: BackendOptions = field(default_factory=BackendOptions)
    machine: Machine | None = None
    layerperf_version: str | None = None
    created: str | None = None
    pid: int | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @property
    def threads(self) -> int | None:
        """The intra-op threads asked for; None when the runtime's default (0) or not recorded."""
        return self.plan.threads or None

    def options_json(self) -> dict[str, Any]:
        """trace.json's ``options`` object: the recorded plan, then the backend's own options."""
        return {**self.plan.to_json(), **self.options.as_dict()}

    def to_json(self) -> dict[str, Any]:
        out = {
            "layerperf_version": self.layerperf_version, "created": self.created, "pid": self.pid,
            "model": self.model.to_json(), "backend": self.backend, "backend_version": self.backend_version,
            "provider": self.provider, "options": self.options_json(),
            "machine": None if self.machine is None else self.machine.to_json(),
        }
        return {**out, **{k: v for k, v in self.other.items() if k not in out}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Metadata:
        """trace.json's metadata; what an older file lacks is None (an empty model description: "model")."""
        backend = _str(d.get("backend"))
        plan, options = split_options(backend, d.get("options") or {})
        machine = d.get("machine")
        return cls(model=ModelInfo.from_json(d.get("model") or {}), backend=backend,
                   backend_version=_str(d.get("backend_version")), provider=_str(d.get("provider")),
                   plan=plan, options=options, machine=None if machine is None else Machine.from_json(machine),
                   layerperf_version=_str(d.get("layerperf_version")), created=_str(d.get("created")),
                   pid=_int(d.get("pid")), other={k: v for k, v in d.items() if k not in _KEYS})


_KEYS = frozenset(f.name for f in dataclasses.fields(Metadata)) - {"plan", "other"}


def now() -> str:
    """The time a profile is made, as ``Metadata.created`` keeps it."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _str(x: Any) -> str | None:
    return None if x is None else str(x)


def _int(x: Any) -> int | None:
    return None if x is None else int(x)


def _frozen(v: Any) -> Any:
    """A JSON value with its lists as tuples, so that options compare and hash as values."""
    if isinstance(v, list | tuple):
        return tuple(_frozen(x) for x in v)
    return v


def _plain(v: Any) -> Any:
    """A value as JSON writes it: tuples as lists."""
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _text(v: Any) -> str:
    if isinstance(v, tuple):
        return ",".join(_text(x) for x in v)
    return "" if v is None else str(v)
