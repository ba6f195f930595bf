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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.collectors.memory import DEFAULT_SAMPLE_RATE, MemoryRequest
from layerperf.memory.report import MemoryReport, NodeMemory, PlacedBlock, analyze, report

if TYPE_CHECKING:
    import onnx

    from layerperf.profile_data import Profile

__all__ = ["MemoryReport", "MemoryRequest", "NodeMemory", "PlacedBlock", "analyze", "profile_memory", "report"]


def profile_memory(model: str | Path | onnx.ModelProto, *, sample_rate: int = DEFAULT_SAMPLE_RATE,
                   runs: int = 3, warmup: int = 1, latency: bool = False, **options: Any) -> Profile:
    """``layerperf.profile(model, memory=True, ...)`` with fewer runs: memory needs no timing statistics.

    The report is ``profile.memory`` (a MemoryReport), also what :func:`report` returns.
    """
    from layerperf.api import profile

    return profile(model, runs=runs, warmup=warmup, latency=latency, memory=True, sample_rate=sample_rate,
                   **options)
