"""Where a configuration was measured: the machine's fingerprint as the store keeps it.

The hardware (CPU model, cores, memory, L1/L2/L3 cache sizes from sysfs), the system (kernel, OS,
architecture, Python), the host's name, and the versions of layerperf and of the runtimes installed.
Its :attr:`Fingerprint.machine_id` names one row of the store's ``machines`` table: any change —
a new kernel, a runtime upgraded — is another row. :meth:`Fingerprint.hardware` is what must match
for measurements to compare: a store collected on other hardware is told, both fingerprints shown.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import platform
from dataclasses import dataclass
from typing import Any

from layerperf import __version__
from layerperf.data.machine import Machine

# The distributions whose versions a fingerprint records, where installed (read from their metadata:
# nothing is imported).
RUNTIMES = ("onnxruntime", "onnx", "numpy", "torch", "apache-tvm", "ray")


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A machine as the store keeps it: :class:`~layerperf.data.machine.Machine`, the host's name, layerperf's
    version, and the installed runtimes' versions (``name=version;...``)."""

    machine: Machine
    hostname: str
    layerperf_version: str
    runtimes: str

    @classmethod
    def here(cls) -> Fingerprint:
        versions = []
        for name in RUNTIMES:
            try:
                versions.append(f"{name}={importlib.metadata.version(name)}")
            except importlib.metadata.PackageNotFoundError:
                continue
        return cls(Machine.here(), platform.node(), __version__, ";".join(versions))

    def row(self) -> dict[str, Any]:
        """The ``machines`` row: machine_id, the Machine's fields, hostname, layerperf_version, runtimes."""
        return {"machine_id": self.machine_id, **dataclasses.asdict(self.machine), "hostname": self.hostname,
                "layerperf_version": self.layerperf_version, "runtimes": self.runtimes}

    @property
    def machine_id(self) -> str:
        """The first 16 hex digits of the SHA-256 of every field: one id per distinct fingerprint."""
        text = json.dumps([self.machine.to_json(), self.hostname, self.layerperf_version, self.runtimes],
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def hardware(self) -> tuple[Any, ...]:
        """What measurements depend on: CPU model, cores, memory (whole GiB: the kernel's count moves by a
        few pages between boots), cache sizes, architecture."""
        m = self.machine
        gib = round(m.memory_bytes / 2**30) if m.memory_bytes else None
        return (m.cpu, m.cores, gib, m.l1d_bytes, m.l1i_bytes, m.l2_bytes, m.l3_bytes, m.arch)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Fingerprint:
        return cls(Machine.from_json(row), str(row.get("hostname") or ""), str(row.get("layerperf_version") or ""),
                   str(row.get("runtimes") or ""))

    def describe(self) -> str:
        """One line: ``AMD EPYC, 2 cores, 24 GiB, L1d 32 KiB, L2 1024 KiB, L3 32768 KiB, x86_64 (host)``."""
        m = self.machine
        kib = [f"{name} {size // 1024} KiB" for name, size in
               (("L1d", m.l1d_bytes), ("L2", m.l2_bytes), ("L3", m.l3_bytes)) if size]
        gib = f"{m.memory_bytes / 2**30:.0f} GiB" if m.memory_bytes else "? GiB"
        return ", ".join([m.cpu or "?", f"{m.cores or '?'} cores", gib, *kib, m.arch or "?"]) + f" ({self.hostname})"
