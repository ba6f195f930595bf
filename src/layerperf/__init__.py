"""layerperf: a per-layer performance profiler for deep-learning inference.

>>> import layerperf
>>> prof = layerperf.profile("resnet18", runs=20)
>>> prof.table()[0]["median_us"]
>>> layerperf.save(prof, "out/")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from layerperf.api import load, profile, profile_memory, save
    from layerperf.bench import BenchResult, bench_node, bench_op
    from layerperf.data.profile import Layer, Profile, Run, Span
    from layerperf.renderers.html import report

__all__ = ["BenchResult", "Layer", "Profile", "Run", "Span", "__version__", "bench_node", "bench_op", "load",
           "profile", "profile_memory", "report", "save"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that `layerperf --help` and `import layerperf` stay fast.
    if name in {"profile", "profile_memory", "save", "load"}:
        from layerperf import api

        return getattr(api, name)
    if name in {"bench_op", "bench_node", "BenchResult"}:
        from layerperf import bench

        return getattr(bench, name)
    if name in {"Layer", "Profile", "Run", "Span"}:
        from layerperf.data import profile as data

        return getattr(data, name)
    if name == "report":
        from layerperf.renderers.html import report

        return report
    if name == "zoo":
        import importlib

        return importlib.import_module("layerperf.models.zoo")
    raise AttributeError(f"module 'layerperf' has no attribute {name!r}")
