"""Figures derived from a Profile: per-layer aggregates and the rows of the layer table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas

    from layerperf.profile_data import Layer, Profile

# The columns of layers.csv, in order; counter labels follow them. Columns added later go last, so
# a reader that takes them by position keeps working.
COLUMNS = (
    "name", "op_type", "domain", "provider", "calls", "median_us", "mean_us", "p90_us", "min_us",
    "max_us", "share", "cum_share", "flops", "bytes", "bytes_read", "bytes_written", "intensity",
    "flops_per_s", "bytes_per_s", "param_bytes", "in_shapes", "out_shapes", "in_dtypes", "out_dtypes",
    "int_ops", "int_ops_per_s", "padded_flops", "real_in_shapes", "real_out_shapes",
    "incl_median_us", "parent",
)


@dataclass(frozen=True, slots=True)
class LayerStats:
    """Aggregates of one layer's measured calls. Times in µs; share of the whole profile's time.

    Times are self times: a control-flow layer's exclude its body nodes', which are layers of their
    own; ``incl_median_us`` is the median of whole durations, body included.
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


def distribution(d_ns: np.ndarray) -> tuple[float, float, float, float, float, float]:
    """(total, mean, median, p90, min, max) in µs of durations given in ns; NaN figures when empty."""
    if d_ns.size == 0:
        nan = float("nan")
        return 0.0, nan, nan, nan, nan, nan
    us = d_ns / 1e3
    return (float(us.sum()), float(us.mean()), float(np.median(us)), float(np.percentile(us, 90)),
            float(us.min()), float(us.max()))


def _incl_median_us(profile: Profile, i: int, self_median_us: float) -> float:
    """Median whole duration; a layer with no body nodes has it equal to its self time."""
    if profile.layers[i].name not in profile.parent_names:
        return self_median_us
    d_ns = profile.inclusive_ns(i)
    return float(np.median(d_ns)) / 1e3 if d_ns.size else float("nan")


def layer_stats(profile: Profile) -> list[LayerStats]:
    dists = [distribution(profile.durations_ns(i)) for i in range(len(profile.layers))]
    totals = np.asarray([d[0] for d in dists])
    grand = float(totals.sum()) or 1.0
    cum = np.empty_like(totals)
    order = np.argsort(-totals, kind="stable")
    cum[order] = np.cumsum(totals[order]) / grand
    return [
        LayerStats(calls=int(profile.durations_ns(i).size), total_us=d[0], mean_us=d[1], median_us=d[2],
                   p90_us=d[3], min_us=d[4], max_us=d[5], share=d[0] / grand, cum_share=float(cum[i]),
                   incl_median_us=_incl_median_us(profile, i, d[2]))
        for i, d in enumerate(dists)
    ]


def per_second(amount: int | None, median_us: float) -> float | None:
    """Achieved rate (FLOP/s, OP/s, bytes/s) from an amount and a median time; None when unknown."""
    if amount is None or not median_us > 0:
        return None
    return amount / (median_us * 1e-6)


def _row(layer: Layer, st: LayerStats) -> dict[str, Any]:
    byt = layer.bytes
    return {
        "name": layer.name, "op_type": layer.op_type, "domain": layer.domain, "provider": layer.provider,
        "calls": st.calls, "median_us": st.median_us, "mean_us": st.mean_us, "p90_us": st.p90_us,
        "min_us": st.min_us, "max_us": st.max_us, "share": st.share, "cum_share": st.cum_share,
        "flops": layer.flops, "bytes": byt, "bytes_read": layer.bytes_read,
        "bytes_written": layer.bytes_written,
        "intensity": layer.flops / byt if layer.flops is not None and byt else None,
        # a control-flow layer's FLOPs and bytes are its whole call's: rated over its whole duration
        "flops_per_s": per_second(layer.flops, st.incl_median_us),
        "bytes_per_s": per_second(byt, st.incl_median_us), "param_bytes": layer.param_bytes,
        "in_shapes": layer.in_shapes, "out_shapes": layer.out_shapes,
        "in_dtypes": ";".join(t.dtype for t in layer.inputs),
        "out_dtypes": ";".join(t.dtype for t in layer.outputs),
        "int_ops": layer.int_ops, "int_ops_per_s": per_second(layer.int_ops, st.incl_median_us),
        "padded_flops": layer.flops_as_stored,
        "real_in_shapes": layer.real_in_shapes, "real_out_shapes": layer.real_out_shapes,
        "incl_median_us": st.incl_median_us, "parent": layer.parent,
    }


def counter_labels(profile: Profile) -> list[str]:
    """Counter labels present in the profile, in first-seen order."""
    seen: dict[str, None] = {}
    for layer in profile.layers:
        seen.update(dict.fromkeys(layer.counters))
    return list(seen)


def _counter_cells(profile: Profile, i: int, layer: Layer, labels: list[str]) -> dict[str, Any]:
    """Median count per label, fraction counted (multiplexed runs), derived metrics, counts per FLOP."""
    info = profile.counters
    fractions = (info.fraction_counted if info is not None else None) or {}
    cells: dict[str, Any] = {}
    medians: dict[str, float] = {}
    for label in labels:
        values = layer.counters.get(label)
        cells[label] = medians[label] = float(np.median(values)) if values else None  # type: ignore[assignment]
        if label in fractions:
            cells[f"{label}_counted"] = fractions[label][i]
        if layer.flops and label in medians and medians[label] is not None:
            cells[f"{label}_per_flop"] = medians[label] / layer.flops
    if info is not None and info.events:
        from layerperf.counters import derived_metrics

        present = {k: v for k, v in medians.items() if v is not None}
        cells.update(derived_metrics(present, {k: v for k, v in info.events.items() if k in present}))
    return cells


def rows(profile: Profile) -> list[dict[str, Any]]:
    labels = counter_labels(profile)
    out = []
    for i, (layer, st) in enumerate(zip(profile.layers, profile.stats(), strict=True)):
        row = _row(layer, st)
        if labels:
            row.update(_counter_cells(profile, i, layer, labels))
        out.append(row)
    return out


def extra_columns(profile: Profile) -> list[str]:
    """Columns beyond :data:`COLUMNS` present in the profile's rows (counters and their metrics)."""
    seen: dict[str, None] = {}
    for row in profile.table():
        seen.update(dict.fromkeys(k for k in row if k not in COLUMNS))
    return list(seen)


def to_pandas(profile: Profile) -> pandas.DataFrame:
    try:
        import pandas as pd
    except ImportError as exc:
        from layerperf.errors import MissingDependency

        raise MissingDependency("pandas", "pip install 'layerperf[pandas]'") from exc
    return pd.DataFrame(profile.table())
