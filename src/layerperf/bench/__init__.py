"""``layerperf bench``: one operator, or one node of a model, measured in isolation.

>>> import layerperf
>>> r = layerperf.bench_op("Conv", {"X": "1x64x56x56", "W": "64x64x3x3"}, {"pads": [1, 1, 1, 1]})
>>> r.median_us, r.stats.cv, r.flops

Modules: ``build`` (the one-node model, checked by the op schema and shape inference),
``extract`` (a node of a real model), ``runtime`` (the backend that runs it, found in the registry:
its single-operator capability and options), ``measure`` (the timing loop), ``stats``, ``result``,
``sweep`` (one row per combination of shapes and thread counts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layerperf.bench.api import BenchSettings, bench_node, bench_op
    from layerperf.bench.result import BenchResult
    from layerperf.bench.sweep import sweep_node, sweep_op

__all__ = ["BenchResult", "BenchSettings", "bench_node", "bench_op", "sweep_node", "sweep_op"]
_HOME = {"BenchSettings": "api", "bench_node": "api", "bench_op": "api", "BenchResult": "result",
         "sweep_node": "sweep", "sweep_op": "sweep"}


def __getattr__(name: str) -> Any:
    """The API loads on first use: the CLI reads bench's defaults from `measure` without onnx."""
    if name in _HOME:
        return getattr(importlib.import_module(f"layerperf.bench.{_HOME[name]}"), name)
    raise AttributeError(f"module 'layerperf.bench' has no attribute {name!r}")
