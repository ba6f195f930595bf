"""This machine's measured peaks: what ``layerperf calibrate`` stores and the roofline and "% of peak" read.

One JSON file per machine in the user's cache directory (``$LAYERPERF_CACHE/calibration/``, default
``~/.cache/layerperf/calibration/``), named after the CPU model and core count, so a home directory
shared by several machines keeps one calibration each. A figure is a measurement or absent: a peak
that was not measured is not in its mapping, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from layerperf.data.machine import fingerprint
from layerperf.errors import InputError
from layerperf.util.atomic import write_bytes
from layerperf.util.cache import cache_subdir

FORMAT = "layerperf-calibration"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Peaks:
    """Peak rates measured on one machine, per intra-op thread count."""

    cpu_model: str
    cores: int
    flops_per_s: dict[int, float] = field(default_factory=dict)  # threads -> float32 FLOP/s (best kernel)
    int_ops_per_s: dict[int, float] = field(default_factory=dict)  # threads -> int8 integer ops/s
    bytes_per_s: dict[int, float] = field(default_factory=dict)  # threads -> memory bandwidth, bytes/s
    # kernel name -> threads -> rate, as measured (e.g. "MatMul fp32" -> {1: 5.1e10}); the peaks above
    # are the best of these per kind
    kernels: dict[str, dict[int, float]] = field(default_factory=dict)
    measured_at: str = ""  # ISO 8601, UTC
    onnxruntime: str = ""  # the ONNX Runtime version that ran the kernels
    quick: bool = False  # measured by `calibrate --quick`: small sizes, short repeats (a smoke test, not peaks)

    def at(self, rates: dict[int, float], threads: int | None) -> float | None:
        """The rate for ``threads`` (0/None: the most threads measured); the nearest measured thread
        count below it when that count was not measured; None when nothing applies."""
        used = self.threads_at(rates, threads)
        return None if used is None else rates[used]

    @staticmethod
    def threads_at(rates: dict[int, float], threads: int | None) -> int | None:
        """The measured thread count :meth:`at` takes the rate of."""
        if not rates:
            return None
        if not threads:
            return max(rates)
        below = [t for t in rates if t <= threads]
        return max(below) if below else None

    def to_json(self) -> dict[str, Any]:
        def rates(d: dict[int, float]) -> dict[str, float]:
            return {str(k): v for k, v in sorted(d.items())}

        return {"format": FORMAT, "version": VERSION, "cpu_model": self.cpu_model, "cores": self.cores,
                "flops_per_s": rates(self.flops_per_s), "int_ops_per_s": rates(self.int_ops_per_s),
                "bytes_per_s": rates(self.bytes_per_s),
                "kernels": {k: rates(v) for k, v in self.kernels.items()},
                "measured_at": self.measured_at, "onnxruntime": self.onnxruntime, "quick": self.quick}

    @classmethod
    def from_json(cls, doc: Any, source: str = "calibration") -> Peaks:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InputError(f"{source} is not a layerperf calibration file")
        if doc.get("version") != VERSION:
            raise InputError(f"{source}: calibration format version {doc.get('version')!r} is not {VERSION}",
                             hint="run layerperf calibrate again")
        try:
            def rates(d: Any) -> dict[int, float]:
                out = {int(k): float(v) for k, v in (d or {}).items()}
                bad = [v for v in out.values() if not 0 < v < float("inf")]
                if bad:  # a peak is a measured rate > 0; a 0 or NaN was never measured
                    raise ValueError(f"rate {bad[0]!r} is not a positive number")
                return out

            return cls(cpu_model=str(doc["cpu_model"]), cores=int(doc["cores"]),
                       flops_per_s=rates(doc.get("flops_per_s")), int_ops_per_s=rates(doc.get("int_ops_per_s")),
                       bytes_per_s=rates(doc.get("bytes_per_s")),
                       kernels={str(k): rates(v) for k, v in (doc.get("kernels") or {}).items()},
                       measured_at=str(doc.get("measured_at", "")), onnxruntime=str(doc.get("onnxruntime", "")),
                       quick=bool(doc.get("quick", False)))
        except KeyError as exc:
            raise InputError(f"{source}: malformed calibration (no {exc.args[0]!r})",
                             hint="run layerperf calibrate again") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{source}: malformed calibration ({exc})", hint="run layerperf calibrate again") from None


def machine_key(cpu_model: str | None = None, cores: int | None = None) -> str:
    """The file stem for a machine: its CPU model and core count, in characters safe in a file name."""

    fp = fingerprint()
    model = cpu_model if cpu_model is not None else str(fp["cpu"])
    n = cores if cores is not None else int(fp["cores"] or 0)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", model).strip("-").lower() or "unknown-cpu"
    return f"{slug}-{n}cores"


def directory() -> Path:
    """Where calibrations live: ``calibration/`` in the cache directory."""
    return cache_subdir("calibration")


def path(key: str | None = None) -> Path:
    """Where this machine's calibration lives (or would)."""
    return directory() / f"{key or machine_key()}.json"


def save(peaks: Peaks) -> Path:
    """Store ``peaks`` as the calibration of the machine they name (atomically); returns the file."""

    target = path(machine_key(peaks.cpu_model, peaks.cores))
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(target, orjson.dumps(peaks.to_json(), option=orjson.OPT_INDENT_2) + b"\n", fsync=True)
    return target


def for_machine(machine: Mapping[str, Any] | None = None) -> Peaks | None:
    """The calibration of the machine a profile's fingerprint (``metadata["machine"]``: cpu, cores)
    names, or of this machine when None; None when that machine was never calibrated here."""
    if machine is None or not machine.get("cpu"):
        return load()
    try:
        cores = int(machine.get("cores") or 0)
    except (TypeError, ValueError):
        return None
    found = path(machine_key(str(machine["cpu"]), cores))
    return load(found) if found.exists() else None


def load(file: str | Path | None = None) -> Peaks | None:
    """This machine's calibration (or the one in ``file``); None when this machine was never calibrated.
    A file that exists but cannot be read as a calibration is one line (InputError)."""
    target = Path(file) if file is not None else path()
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        if file is not None:
            raise InputError(f"{target}: no such calibration file") from None
        return None
    except OSError as exc:
        raise InputError(f"{target}: cannot read ({exc.strerror})") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InputError(f"{target} is not JSON", hint="run layerperf calibrate again") from None
    return Peaks.from_json(doc, str(target))
