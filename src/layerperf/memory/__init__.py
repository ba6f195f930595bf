"""The memory profiler: live tensors over the execution order, and what the runtime really used.

>>> import layerperf
>>> from layerperf import memory
>>> prof = memory.profile_memory("resnet18", image_size=64)
>>> rep = memory.report(prof)
>>> rep.peak_bytes, rep.peak_node, rep.max_allocated_bytes

The analysis needs only a Profile (:func:`analyze`); the runtime's own figures come from a fresh
session's first runs, with resident memory sampled every ``sample_rate`` nodes (0: off).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.errors import InputError
from layerperf.memory.report import MemoryReport, NodeMemory, PlacedBlock, analyze, report

if TYPE_CHECKING:
    import onnx

    from layerperf.backends.ort.sessions import ProfileOptions
    from layerperf.model_source import ModelSource
    from layerperf.profile_data import Profile

__all__ = ["MemoryReport", "MemoryRequest", "NodeMemory", "PlacedBlock", "analyze", "profile_memory", "report"]

DEFAULT_SAMPLE_RATE = 1


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """A validated request for the memory profile, made before any run so bad options fail first."""

    sample_rate: int = DEFAULT_SAMPLE_RATE

    @classmethod
    def make(cls, memory: bool, sample_rate: int | None) -> MemoryRequest | None:
        if not memory:
            if sample_rate is not None:
                raise InputError("a sample rate applies to the memory profile only", hint="add --memory")
            return None
        rate = DEFAULT_SAMPLE_RATE if sample_rate is None else sample_rate
        if isinstance(rate, bool) or not isinstance(rate, int) or rate < 0:
            raise InputError(f"--sample-rate must be an integer, 0 (off) or more, got {sample_rate!r}")
        if rate:
            from layerperf.memory.sampler import check_available

            check_available()
        return cls(rate)

    def attach(self, profile: Profile, source: ModelSource, opts: ProfileOptions, feed: dict[str, Any]) -> None:
        """Measure a fresh session's first runs and store the report in ``profile.extra["memory"]``."""
        from layerperf.backends.ort import memory as ort_runtime

        runtime = ort_runtime.measure(source, opts, feed, [layer.name for layer in profile.layers],
                                      self.sample_rate)
        profile.extra["memory"] = analyze(profile, runtime).to_json()


def profile_memory(model: str | Path | onnx.ModelProto, *, sample_rate: int = DEFAULT_SAMPLE_RATE,
                   runs: int = 3, warmup: int = 1, latency: bool = False, **options: Any) -> Profile:
    """``layerperf.profile(model, memory=True, ...)`` with fewer runs: memory needs no timing statistics.

    The report is in ``profile.extra["memory"]``; :func:`report` reads it back as a MemoryReport.
    """
    from layerperf.api import profile

    return profile(model, runs=runs, warmup=warmup, latency=latency, memory=True, sample_rate=sample_rate,
                   **options)
