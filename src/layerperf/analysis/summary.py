"""Whole-profile figures derived from a Profile: latency, profiler overhead, totals."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.analysis import overhead
from layerperf.analysis.memory.live import views
from layerperf.data import fidelity as data_fidelity
from layerperf.data.fidelity import spearman
from layerperf.data.figures import distribution, known, total, total_text
from layerperf.data.table import LayerStats
from layerperf.util import units

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from layerperf.data.profile import Profile


def _agreement(stepwise: Sequence[float], insitu: Sequence[float]) -> tuple[float | None, float | None]:
    """Summed time ratio and rank correlation over the layers both know."""
    both = [(s, i) for s, i in zip(stepwise, insitu, strict=True) if math.isfinite(s) and math.isfinite(i)]
    total = sum(i for _, i in both)
    return (sum(s for s, _ in both) / total if total else None,
            spearman([s for s, _ in both], [i for _, i in both]))


def fidelity(profile: Profile, stats: Sequence[LayerStats] | None = None) -> dict[str, Any] | None:
    """How the stepwise executor's per-node times compare with the in-situ ones (when counters ran):
    summed time ratio and rank correlation against the in-situ runs that alternated with the timed
    passes where they ran (``reference`` says which), whether they hold within their bounds (``holds``, what
    they miss in ``misses``: :func:`layerperf.data.fidelity.misses`), the rank correlation over the layers that are
    not view ops (whose time on either side is the runtime's per-node cost, not work), the layers off by
    more than 20%, how many timed passes were set aside for a busy host; ``stats``: the profile's, when
    already computed."""
    info = profile.counters
    if info is None or not info.stepwise_median_ns:
        return None
    stats = stats or profile.stats()
    medians = [st.median_us if st.calls else math.nan for st in stats]
    reference, source = data_fidelity.reference_ns(info, medians)
    stepwise = [x if math.isfinite(x) else math.nan for x in info.stepwise_median_ns]
    ratio, corr = _agreement(stepwise, reference)
    profiled = [u * 1e3 for u in medians]
    ratios = data_fidelity.layer_ratios(stepwise, reference)
    view = views(profile.layers)
    off = [data_fidelity.off(r) for r in ratios]
    flagged = [layer.name for layer, o in zip(profile.layers, off, strict=False) if o]
    rest = [i for i, v in enumerate(view) if not v]
    without_views = (_agreement([stepwise[i] for i in rest], [reference[i] for i in rest])[1]
                     if any(view) and len(rest) >= data_fidelity.MIN_RANKED
                     and len(view) == len(stepwise) == len(reference) else None)
    missed = data_fidelity.misses(ratio, corr)
    return {"time_ratio": ratio, "rank_correlation": corr, "holds": None if missed is None else not missed,
            "misses": missed, "bounds": {k: dict(v) for k, v in data_fidelity.BOUNDS.items()},
            "view_layers": sum(view), "rank_correlation_without_views": without_views,
            "insitu_rank_ceiling_without_views": info.insitu_rank_ceiling_without_views,
            "stepwise_sum_us": float(np.nansum(stepwise)) / 1e3,
            "insitu_sum_us": float(np.nansum(reference)) / 1e3,
            "reference": source,
            "profile_time_ratio": _agreement(stepwise, profiled)[0],
            "profile_rank_correlation": _agreement(stepwise, profiled)[1],
            "insitu_rank_ceiling": info.insitu_rank_ceiling,
            "flagged_layers": flagged, "flagged_views": sum(bool(o) and v for o, v in zip(off, view, strict=False)),
            "off_share": data_fidelity.OFF_SHARE,
            "timing_passes": info.timing_passes, "passes_disturbed": info.passes_disturbed,
            "disturbed_used": info.disturbed_used, "insitu_counts": _counts_agreement(profile)}


def _counts_agreement(profile: Profile) -> dict[str, Any] | None:
    """Per label, the stepwise counts summed over the layers against the counts sampled in situ, and their
    rank correlation; None where no counts were sampled in situ."""
    info = profile.counters
    if info is None or not info.insitu_counts:
        return None
    out: dict[str, Any] = {}
    for label, sampled in info.insitu_counts.items():
        per_layer = (layer.counters.get(label) or [] for layer in profile.layers)
        stepwise = [float(np.nanmedian(v)) if v and not np.all(np.isnan(v)) else math.nan for v in per_layer]
        ratio, corr = _agreement(stepwise, sampled)
        out[label] = {"stepwise_over_insitu": ratio, "rank_correlation": corr}
    return {"by_label": out, "sample_period_ns": info.sample_period_ns, "runs": info.sampled_runs}


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
