"""A fingerprint of the machine a profile was taken on."""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass(frozen=True, slots=True)
class Machine:
    """The CPU model, logical cores, cores this process may run on (``affinity``), memory, kernel release,
    OS, architecture and Python version of a machine; None where unknown."""

    cpu: str | None = None
    cores: int | None = None
    affinity: int | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    os: str | None = None
    arch: str | None = None
    python: str | None = None

    @classmethod
    def here(cls) -> Machine:
        """This machine."""
        return cls(cpu=_cpu_model(), cores=os.cpu_count(),
                   affinity=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                   memory_bytes=_memory_bytes(), kernel=platform.release(), os=platform.system(),
                   arch=platform.machine(), python=platform.python_version())

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Machine:
        def num(key: str) -> int | None:
            return None if d.get(key) is None else int(d[key])

        def text(key: str) -> str | None:
            return None if d.get(key) is None else str(d[key])

        return cls(cpu=text("cpu"), cores=num("cores"), affinity=num("affinity"), memory_bytes=num("memory_bytes"),
                   kernel=text("kernel"), os=text("os"), arch=text("arch"), python=text("python"))


def fingerprint() -> dict[str, Any]:
    """This machine's fingerprint as JSON (what calibration files and the bench cache key on)."""
    return Machine.here().to_json()
