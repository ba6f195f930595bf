"""Whole-profile figures derived from a Profile: latency, profiler overhead, totals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from layerperf.data import Profile


def _median_us(ns: Any) -> float | None:
    arr = np.asarray(ns, dtype=np.float64)
    return float(np.median(arr)) / 1e3 if arr.size else None


def _p90_us(ns: Any) -> float | None:
    arr = np.asarray(ns, dtype=np.float64)
    return float(np.percentile(arr, 90)) / 1e3 if arr.size else None


def summary(profile: Profile) -> dict[str, Any]:
    """Latency with the profiler off, in-situ run time, profiler overhead ratio, FLOP and byte totals."""
    rows = profile.table()
    flops = [r["flops"] for r in rows]
    latency_med = _median_us(profile.latency_ns)
    profiled_med = _median_us(profile.extra.get("profiled_latency_ns", []))
    return {
        "layers": len(profile.layers),
        "runs": len(profile.runs),
        "latency_median_us": latency_med,
        "latency_p90_us": _p90_us(profile.latency_ns),
        "profiled_median_us": profiled_med,
        "profiler_overhead": profiled_med / latency_med if latency_med and profiled_med else None,
        "run_median_us": _median_us(profile.run_durations_ns),
        "layers_sum_median_us": float(sum(r["median_us"] for r in rows if r["calls"])),
        "flops": sum(f for f in flops if f is not None),
        "flops_unknown_layers": sum(f is None for f in flops),
        "bytes": sum(r["bytes"] or 0 for r in rows),
    }
