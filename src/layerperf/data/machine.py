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


_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
# (level, type) in sysfs -> the Machine field it fills
_CACHE_FIELDS = {("1", "Data"): "l1d_bytes", ("1", "Instruction"): "l1i_bytes", ("2", "Unified"): "l2_bytes",
                 ("3", "Unified"): "l3_bytes"}


def _size_bytes(text: str) -> int | None:
    """sysfs's cache size (``32K``, ``1024K``, ``32768K``) in bytes."""
    text = text.strip()
    if not text:
        return None
    unit = _SIZE_UNITS.get(text[-1].upper(), 1)
    digits = text[:-1] if text[-1].isalpha() else text
    return int(digits) * unit if digits.isdigit() else None


def cache_sizes(root: Path = _CACHE_DIR) -> dict[str, int]:
    """The caches of the first CPU from sysfs, by the Machine field they fill (one instance's size, as
    sysfs gives it: a shared L3 is the whole L3); empty where sysfs does not say."""
    out: dict[str, int] = {}
    try:
        indexes = sorted(root.glob("index*"))
    except OSError:
        return out
    for index in indexes:
        try:
            kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in _CACHE_FIELDS and size is not None:
            out[_CACHE_FIELDS[kind]] = size
    return out


@dataclass(frozen=True, slots=True)
class Machine:
    """The CPU model, logical cores, cores this process may run on (``affinity``), memory, kernel release,
    OS, architecture and Python version of a machine, and the first CPU's L1 data and instruction, L2 and
    L3 cache sizes in bytes (from sysfs); None where unknown."""

    cpu: str | None = None
    cores: int | None = None
    affinity: int | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    os: str | None = None
    arch: str | None = None
    python: str | None = None
    l1d_bytes: int | None = None
    l1i_bytes: int | None = None
    l2_bytes: int | None = None
    l3_bytes: int | None = None

    @classmethod
    def here(cls) -> Machine:
        """This machine."""
        return cls(cpu=_cpu_model(), cores=os.cpu_count(),
                   affinity=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                   memory_bytes=_memory_bytes(), kernel=platform.release(), os=platform.system(),
                   arch=platform.machine(), python=platform.python_version(), **cache_sizes())

    def to_json(self) -> dict[str, Any]:
        # the cache sizes came later: left out where unknown, so that an older file is written back as it was
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k not in CACHE_KEYS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Machine:
        def num(key: str) -> int | None:
            return None if d.get(key) is None else int(d[key])

        def text(key: str) -> str | None:
            return None if d.get(key) is None else str(d[key])

        return cls(cpu=text("cpu"), cores=num("cores"), affinity=num("affinity"), memory_bytes=num("memory_bytes"),
                   kernel=text("kernel"), os=text("os"), arch=text("arch"), python=text("python"),
                   **{key: num(key) for key in CACHE_KEYS})


CACHE_KEYS = tuple(_CACHE_FIELDS.values())


def fingerprint() -> dict[str, Any]:
    """This machine's fingerprint as JSON (what calibration files and the bench cache key on)."""
    return Machine.here().to_json()
