"""The layer table: per-layer statistics of a Profile's calls (:class:`LayerStats`) and its rows, the
columns of ``layers.csv`` (:data:`COLUMNS`), built from the figures of :mod:`layerperf.data.figures`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data import fidelity
from layerperf.data.figures import (
    column,
    cumulative_shares,
    distributions,
    grouped,
    groups,
    intensities,
    known,
    listed,
    per_flops,
    rates,
    shares,
)
from layerperf.errors import MissingDependency

if TYPE_CHECKING:  # for annotations only: the event table's analysis needs none of the Profile's modules
    import pandas

    from layerperf.data.figures import Groups
    from layerperf.data.layer import Layer
    from layerperf.data.raw import RawProfile

# The columns of layers.csv, in order; counter labels follow them. Columns added later go last, so
# a reader that takes them by position keeps working.
COLUMNS = (
    "name", "op_type", "domain", "provider", "calls", "median_us", "mean_us", "p90_us", "min_us",
    "max_us", "share", "cum_share", "flops", "bytes", "bytes_read", "bytes_written", "intensity",
    "flops_per_s", "bytes_per_s", "param_bytes", "in_shapes", "out_shapes", "in_dtypes", "out_dtypes",
    "int_ops", "int_ops_per_s", "padded_flops", "real_in_shapes", "real_out_shapes",
    "incl_median_us", "parent",
)
COUNTER_SUFFIXES = ("_counted", "_per_flop", "_cv", "_insitu")  # a counter label's further columns
FIDELITY_COLUMNS = ("stepwise_ratio", "stepwise_off")
VIEW_COLUMNS = ("pct_of_peak", "spread", "bound", "call_median_us")  # what the views add to a layer's row


def label_clash(labels: Sequence[str], taken: Sequence[str] = ()) -> str | None:
    """Why counter ``labels`` cannot each name a column of the layer table (None when they can): a label
    that is one of its columns (or of ``taken``: derived metrics' names), or that another label's own
    column (:data:`COUNTER_SUFFIXES`) would be."""
    reserved = {*COLUMNS, *FIDELITY_COLUMNS, *VIEW_COLUMNS, *taken}
    own = {label + suffix: label for label in labels for suffix in COUNTER_SUFFIXES}
    for label in labels:
        if label in reserved:
            return f"the counter label {label!r} is a column of the layer table already"
        if label in own:
            return f"the counter label {label!r} is the name of the {label[len(own[label]) + 1:]} column of " \
                   f"label {own[label]!r}"
    return None


# -- the layer table -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LayerStats:
    """Aggregates of one layer's measured calls. Times in µs; share of the whole profile's time.

    Times are self times: a control-flow layer's exclude its body nodes', which are layers of their
    own; ``incl_median_us`` is the median of whole durations, body included. NaN when unknown (a
    layer without calls has no time, not a time of 0).
    """

    calls: int
    total_us: float
    mean_us: float
    median_us: float
    p90_us: float
    min_us: float
    max_us: float
    share: float
    cum_share: float  # cumulative share when layers are ranked by total time, largest first
    incl_median_us: float = float("nan")


def _per_layer(profile: RawProfile, durations: Callable[[int], np.ndarray]) -> tuple[np.ndarray, Groups]:
    """Every layer's durations flat, grouped by layer."""
    per_layer = [durations(i) for i in range(len(profile.layers))]
    sizes = [d.size for d in per_layer]
    flat = np.concatenate(per_layer) if per_layer else np.zeros(0)
    return flat, groups(np.repeat(np.arange(len(sizes)), sizes), len(sizes))


def layer_stats(profile: RawProfile) -> list[LayerStats]:
    d = distributions(*_per_layer(profile, profile.durations_ns))
    whole = float(np.nansum(d.total_us))
    share_ = shares(d.total_us, whole)
    cum = cumulative_shares(d.total_us, whole, np.argsort(-d.total_us, kind="stable"))
    incl = _incl_median_us(profile, d.median_us)
    return [
        LayerStats(calls=int(d.n[i]), total_us=float(d.total_us[i]), mean_us=float(d.mean_us[i]),
                   median_us=float(d.median_us[i]), p90_us=float(d.p90_us[i]), min_us=float(d.min_us[i]),
                   max_us=float(d.max_us[i]), share=float(share_[i]), cum_share=float(cum[i]),
                   incl_median_us=float(incl[i]))
        for i in range(len(profile.layers))
    ]


def _incl_median_us(profile: RawProfile, self_median_us: np.ndarray) -> np.ndarray:
    """Median whole duration; a layer with no body nodes has it equal to its self time."""
    parents = np.fromiter((layer.name in profile.parent_names for layer in profile.layers), dtype=bool,
                          count=len(profile.layers))
    if not parents.any():
        return self_median_us
    flat, g = _per_layer(profile, profile.inclusive_ns)
    return np.where(parents, grouped(flat / 1e3, g, "median"), self_median_us)


def _rated(profile: RawProfile, stats: Sequence[LayerStats]) -> dict[str, np.ndarray]:
    """The table's ratios, as columns: intensity and the rates."""
    layers = profile.layers
    flops, byt = column([la.flops for la in layers]), column([la.bytes for la in layers])
    # a control-flow layer's FLOPs and bytes are its whole call's: rated over its whole duration; a
    # torch module's are its own work: over its self time
    whole = profile.cost_nesting.rated_over_whole_call
    time_s = column([st.incl_median_us if whole else st.median_us for st in stats]) * 1e-6
    return {"intensity": intensities(flops, byt), "flops_per_s": rates(flops, time_s),
            "bytes_per_s": rates(byt, time_s), "int_ops_per_s": rates(column([la.int_ops for la in layers]), time_s)}


def _row(layer: Layer, st: LayerStats, rated: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": layer.name, "op_type": layer.op_type, "domain": layer.domain, "provider": layer.provider,
        "calls": st.calls, "median_us": known(st.median_us), "mean_us": known(st.mean_us),
        "p90_us": known(st.p90_us), "min_us": known(st.min_us), "max_us": known(st.max_us),
        "share": known(st.share), "cum_share": known(st.cum_share),
        "flops": layer.flops, "bytes": layer.bytes, "bytes_read": layer.bytes_read,
        "bytes_written": layer.bytes_written, "intensity": rated["intensity"],
        "flops_per_s": rated["flops_per_s"], "bytes_per_s": rated["bytes_per_s"], "param_bytes": layer.param_bytes,
        "in_shapes": layer.in_shapes, "out_shapes": layer.out_shapes,
        "in_dtypes": layer.in_dtypes, "out_dtypes": layer.out_dtypes,
        "int_ops": layer.int_ops, "int_ops_per_s": rated["int_ops_per_s"],
        "padded_flops": layer.flops_as_stored,
        "real_in_shapes": layer.real_in_shapes, "real_out_shapes": layer.real_out_shapes,
        "incl_median_us": known(st.incl_median_us), "parent": layer.parent,
    }


def counter_labels(profile: RawProfile) -> list[str]:
    """Counter labels present in the profile, in first-seen order."""
    seen: dict[str, None] = {}
    for layer in profile.layers:
        seen.update(dict.fromkeys(layer.counters))
    return list(seen)


def _counter_medians(profile: RawProfile, labels: list[str]) -> dict[str, np.ndarray]:
    """Each label's median count per layer (over the passes), NaN where a layer has none."""
    out = {}
    for label in labels:
        per_layer = [layer.counters.get(label) or [] for layer in profile.layers]
        flat = np.asarray([v for values in per_layer for v in values], dtype=np.float64)
        g = groups(np.repeat(np.arange(len(per_layer)), [len(v) for v in per_layer]), len(per_layer))
        out[label] = grouped(flat, g, "median")
    return out


def _counter_cells(profile: RawProfile, i: int, labels: list[str], medians: dict[str, list[float | None]],
                   per_flop_: dict[str, list[float | None]]) -> dict[str, Any]:
    """Median count per label, fraction counted (multiplexed runs), derived metrics, counts per FLOP."""
    info = profile.counters
    fractions = (info.fraction_counted if info is not None else None) or {}
    cells: dict[str, Any] = {}
    for label in labels:
        cells[label] = medians[label][i]
        if label in fractions:
            cells[f"{label}_counted"] = fractions[label][i]
        if per_flop_[label][i] is not None:  # the column is absent where the layer has no FLOP count
            cells[f"{label}_per_flop"] = per_flop_[label][i]
    if info is not None and info.events:
        from layerperf.counters import derived_metrics  # lazy: 50 ms of start-up (ctypes, libpfm4) for analyze

        present = {k: m for k in labels if (m := medians[k][i]) is not None}
        cells.update(derived_metrics(present, {k: v for k, v in info.events.items() if k in present}))
    return cells


def rows(profile: RawProfile) -> list[dict[str, Any]]:
    """The layer table: one row per layer, the columns of :data:`COLUMNS` then counters and metrics."""
    stats = layer_stats(profile)
    rated = {k: listed(v) for k, v in _rated(profile, stats).items()}
    labels = counter_labels(profile)
    medians = _counter_medians(profile, labels)
    flops = column([layer.flops for layer in profile.layers])
    per_flop_ = {label: listed(per_flops(m, flops)) for label, m in medians.items()}
    counts = {label: listed(m) for label, m in medians.items()}
    ratios = stepwise_ratios(profile, stats)
    insitu_counts = (profile.counters.insitu_counts if profile.counters is not None else None) or {}
    out = []
    for i, (layer, st) in enumerate(zip(profile.layers, stats, strict=True)):
        row = _row(layer, st, {k: v[i] for k, v in rated.items()})
        if labels:
            row.update(_counter_cells(profile, i, labels, counts, per_flop_))
        # added after the counter columns, last in layers.csv so that a reader by position keeps working
        row.update({f"{label}_cv": fidelity.count_cv(layer.counters.get(label) or []) for label in labels})
        row.update({f"{label}_insitu": known(values[i]) for label, values in insitu_counts.items()})
        if ratios:
            row.update(stepwise_ratio=ratios[i], stepwise_off=fidelity.off(ratios[i]))
        out.append(row)
    return out


def stepwise_ratios(profile: RawProfile, stats: Sequence[LayerStats] | None = None) -> list[float | None]:
    """Each layer's time in the counting passes over its in-situ time (:mod:`layerperf.data.fidelity`);
    empty when the profile has no counting passes' times."""
    info = profile.counters
    if info is None or not info.stepwise_median_ns:
        return []
    medians = [st.median_us if st.calls else math.nan for st in stats or layer_stats(profile)]
    reference, _ = fidelity.reference_ns(info, medians)
    return fidelity.layer_ratios(info.stepwise_median_ns, reference)


def extra_columns(profile: RawProfile) -> list[str]:
    """Columns beyond :data:`COLUMNS` present in the profile's rows (counters and their metrics)."""
    seen: dict[str, None] = {}
    for row in rows(profile):
        seen.update(dict.fromkeys(k for k in row if k not in COLUMNS))
    return list(seen)


def to_pandas(profile: RawProfile) -> pandas.DataFrame:
    try:
        import pandas as pd
    except ImportError as exc:
        raise MissingDependency("pandas", "pip install 'layerperf[pandas]'") from exc
    return pd.DataFrame(rows(profile))
