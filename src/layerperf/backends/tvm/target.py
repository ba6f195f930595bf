"""``--target``: the forms users know, turned into the JSON dict TVM 0.27 takes, and checked runnable here.

TVM 0.27 refuses the command-line form ``"llvm -mcpu=native"`` that TVM's own tutorials taught for
years (``ValueError: ... CLI target string form ... is no longer supported``); it takes a JSON dict
(``{"kind": "llvm", "mcpu": "znver4"}``) or a tag (``nvidia/geforce-rtx-4090``). Every form is
accepted here: a kind alone (``llvm``, ``cuda``), the command-line form, a JSON object, a tag.
A bare ``llvm`` means this machine's CPU (``mcpu`` set to the CPU LLVM detects), as profiling on
anything else measures code that could run faster here; ``-mcpu=native`` is resolved the same way.
"""

from __future__ import annotations

import json
import platform
import shlex
from dataclasses import dataclass
from typing import Any

from layerperf.errors import InputError

# Keys whose command-line value is a comma-separated list in TVM's schema.
_LIST_KEYS = frozenset({"mattr", "keys", "libs", "cl-opt", "mabi"})
# Kinds that run on the host CPU; every other kind needs its device present.
HOST_KINDS = frozenset({"llvm", "c"})
_ARCH_GROUPS = (("x86_64", "amd64"), ("aarch64", "arm64"))


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """A target as the user wrote it and as TVM takes it: ``config`` is a JSON object, or a tag string."""

    text: str
    config: dict[str, Any] | str

    @property
    def kind(self) -> str:
        if isinstance(self.config, str):
            return "cuda" if self.config.startswith("nvidia/") else self.config.split("/", 1)[0]
        return str(self.config["kind"])

    def key(self) -> str:
        """The target in one canonical string (sorted JSON), for cache keys and metadata."""
        return self.config if isinstance(self.config, str) else json.dumps(self.config, sort_keys=True)


def _value(key: str, text: str) -> Any:
    if key in _LIST_KEYS:
        return [v for v in text.split(",") if v]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        return text


def parse_cli(text: str) -> dict[str, Any]:
    """``"llvm -mcpu=znver4 -mattr=+avx2,+fma -num-cores 4"`` as TVM's JSON dict; a bare ``-flag`` is true."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InputError(f"--target {text!r} does not parse: {exc}") from None
    if not words or words[0].startswith("-"):
        raise InputError(f"--target {text!r} names no target kind", hint="e.g. llvm, cuda, or 'llvm -mcpu=znver4'")
    config: dict[str, Any] = {"kind": words[0]}
    i = 1
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            raise InputError(f"--target {text!r}: {word!r} is not an option (options are -key=value)")
        key, eq, value = word.lstrip("-").partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value, eq = words[i + 1], "="
            i += 1
        config[key] = _value(key, value) if eq else True
        i += 1
    return config


def parse_target(text: str) -> TargetSpec:
    """The target ``text`` names: a JSON object, a tag (``vendor/name``), a kind, or the command-line form."""
    stripped = text.strip()
    if not stripped:
        raise InputError("--target is empty", hint="e.g. llvm, cuda, or 'llvm -mcpu=znver4'")
    if stripped.startswith("{"):
        try:
            config = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"--target is not valid JSON: {exc}") from None
        if not isinstance(config, dict) or "kind" not in config:
            raise InputError("--target as JSON must be an object with a \"kind\"", hint='e.g. {"kind": "llvm"}')
        return TargetSpec(text, config)
    if "/" in stripped and " " not in stripped:
        return TargetSpec(text, stripped)
    return TargetSpec(text, parse_cli(stripped))


def resolve_host_cpu(spec: TargetSpec, host_cpu: str) -> TargetSpec:
    """An llvm target for this host with ``mcpu`` unset or ``native``: ``mcpu`` set to ``host_cpu``."""
    if isinstance(spec.config, str) or spec.kind != "llvm" or "mtriple" in spec.config:
        return spec
    if spec.config.get("mcpu", "native") != "native":
        return spec
    return TargetSpec(spec.text, {**spec.config, "mcpu": host_cpu})


def with_num_cores(spec: TargetSpec, num_cores: int | None) -> TargetSpec:
    """An llvm target without ``num-cores`` given the cores its kernels run on: MetaSchedule needs it to
    tune (its parallel loops are sized by it) and refuses a CPU target without it."""
    if num_cores is None or isinstance(spec.config, str) or spec.kind != "llvm" or "num-cores" in spec.config:
        return spec
    return TargetSpec(spec.text, {**spec.config, "num-cores": int(num_cores)})


def host_arch_matches(triple: str, machine: str | None = None) -> bool:
    """Whether an LLVM triple's architecture is this machine's (code for another CPU compiles, but does not run)."""
    machine = (machine or platform.machine()).lower()
    arch = triple.split("-", 1)[0].lower()
    names = next((g for g in _ARCH_GROUPS if machine in g), (machine,))
    return arch in names or any(arch.startswith(n) for n in names)
