"""Whole-profile figures derived from a Profile: latency, profiler overhead, totals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.analysis import overhead
from layerperf.data.figures import distribution, known, total, total_text
from layerperf.data.table import LayerStats
from layerperf.util import units

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from layerperf.data.profile import Profile


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2
    return mean_rank[inverse]


def spearman(a: Any, b: Any) -> float | None:
    """Spearman rank correlation (ties at mean rank); None when undefined."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def fidelity(profile: Profile, stats: Sequence[LayerStats] | None = None) -> dict[str, Any] | None:
    """How the stepwise executor's per-node times compare with the in-situ ones (when counters ran);
    ``stats``: the profile's, when already computed."""
    stepwise = profile.counters.stepwise_median_ns if profile.counters is not None else None
    if not stepwise:
        return None
    insitu = [st.median_us * 1e3 if st.calls else 0.0 for st in stats or profile.stats()]
    total = sum(insitu)
    return {"time_ratio": sum(stepwise) / total if total else None, "rank_correlation": spearman(stepwise, insitu),
            "stepwise_sum_us": sum(stepwise) / 1e3, "insitu_sum_us": total / 1e3}


def _rounded(x: float | None) -> int | None:
    return None if x is None else round(x)


def summary(profile: Profile) -> dict[str, Any]:
    """Latency with the profiler off, in-situ run time, profiler overhead ratio and per-event cost, FLOP,
    integer operation and byte totals per run (:func:`layerperf.data.figures.total`: over the layers whose
    figure is known, None when no layer's is; ``unknown_in_totals`` counts the layers each total left
    out, ``*_unknown_layers`` every layer the totals count whose figure is unknown), and how the figures
    were taken."""
    stats = profile.stats()
    runs = max(len(profile.runs), 1)
    # Per run, once per call (a loop body's layer runs several times a run), over the layers whose work
    # a total adds (Profile.in_totals: not a parent whose figures hold its children's again)
    counted = [(layer, st) for layer, st, adds in zip(profile.layers, stats, profile.in_totals(), strict=True)
               if adds]
    latency = distribution(profile.latency_ns)
    latency_med = known(latency.median_us)
    profiled_med = known(distribution(profile.profiled_latency_ns).median_us)
    calls = [st.calls for _, st in counted]
    totals = {key: total([getattr(layer, key) for layer, _ in counted], calls, runs)
              for key in ("flops", "int_ops", "bytes")}
    layers_sum = float(sum(st.median_us * st.calls / runs for st in stats if st.calls))
    return {
        "layers": len(profile.layers),
        "runs": len(profile.runs),
        "latency_median_us": latency_med,
        "latency_p90_us": known(latency.p90_us),
        "profiled_median_us": profiled_med,
        "profiler_overhead": profiled_med / latency_med if latency_med and profiled_med else None,
        "run_median_us": known(distribution(profile.run_durations_ns).median_us),
        "layers_sum_median_us": layers_sum,
        "flops": _rounded(totals["flops"].value),
        "flops_unknown_layers": sum(layer.flops is None for layer, _ in counted),
        "int_ops": _rounded(totals["int_ops"].value),
        "int_ops_unknown_layers": sum(layer.int_ops is None for layer, _ in counted),
        "padded_layers": sum(layer.padded for layer in profile.layers),
        "padding_flops": sum(layer.padded_flops - layer.flops for layer in profile.layers
                             if layer.padded_flops is not None and layer.flops is not None),
        "bytes": _rounded(totals["bytes"].value),
        "bytes_unknown_layers": sum(layer.bytes is None for layer in profile.layers),
        "unknown_in_totals": {key: t.unknown for key, t in totals.items()},
        "fidelity": fidelity(profile, stats),
        **overhead.figures(profile, stats, latency_med, profiled_med, layers_sum),
        **overhead.measurement(profile),
    }


def work_texts(summ: Mapping[str, Any]) -> dict[str, str]:
    """The FLOP, int op and byte totals of a :func:`summary` as text, one rule for all three
    (:func:`layerperf.data.figures.total_text`): ``?`` when no layer's figure is known, ``≥ X (N layers
    unknown)`` when only some are."""
    left_out = summ.get("unknown_in_totals") or {}
    fmts: dict[str, Callable[[float | None], str]] = {
        "flops": lambda v: units.si(v, "FLOP"), "int_ops": lambda v: units.si(v), "bytes": units.binary}
    return {key: total_text(summ.get(key), int(left_out.get(key, 0)), fmt) for key, fmt in fmts.items()}


def work_line(summ: Mapping[str, Any]) -> str:
    """``X FLOP + Y int ops, Z moved`` from :func:`work_texts`; ``X FLOP, Z moved`` when every layer's int
    ops are known and none does integer work (a float model)."""
    t = work_texts(summ)
    left_out = (summ.get("unknown_in_totals") or {}).get("int_ops", 0)
    ints = "" if summ.get("int_ops") == 0 and not left_out else f" + {t['int_ops']} int ops"
    return f"{t['flops']}{ints}, {t['bytes']} moved"
