"""Counters as the page shows them: readable headers with their unit, near the name, and per-run totals
with the ratios they give in the summary.

``task-clock`` and ``cpu-clock`` count nanoseconds of CPU time: they read as durations. Every other
event counts occurrences: a count. Per-FLOP columns are kept only for hardware events (cycles or cache
misses per FLOP say something; CPU time per FLOP is the inverse of FLOP/s, shown already; page faults
per FLOP say nothing), and a column no row has a non-zero figure in is left out. Derived metrics (IPC,
miss rates, MPKI) read as ratios and percentages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.data.profile import Profile
from layerperf.renderers.view import Column
from layerperf.util import units

METRICS: dict[str, tuple[str, str]] = {  # key -> (header, unit)
    "ipc": ("IPC (instructions per cycle)", "ratio"),
    "cpi": ("CPI (cycles per instruction)", "ratio"),
    "cache_miss_rate": ("cache miss rate", "fraction"),
    "cache_mpki": ("cache misses per 1k instructions", "ratio"),
    "branch_miss_rate": ("branch miss rate", "fraction"),
    "branch_mpki": ("branch misses per 1k instructions", "ratio"),
    "frontend_stall_ratio": ("front-end stalled cycles", "fraction"),
    "backend_stall_ratio": ("back-end stalled cycles", "fraction"),
}
for _cache in ("L1d", "L1i", "LLC", "dTLB", "iTLB"):
    METRICS[f"{_cache}_load_miss_rate"] = (f"{_cache} load miss rate", "fraction")
    METRICS[f"{_cache}_load_mpki"] = (f"{_cache} load misses per 1k instructions", "ratio")


@dataclass(frozen=True, slots=True)
class CounterColumn:
    """A counter column: its row key, header (with its unit), unit kind and what the header means."""

    key: str
    header: str
    unit: str  # "time" (ns), "count", "ratio", "fraction"
    hint: str

    def column(self) -> Column:
        return Column(self.key, self.header, FORMATS[self.unit])


def _count(v: Any) -> str:
    return f"{v:,.0f}" if abs(v) < 1e6 else units.si(v)


FORMATS: dict[str, Callable[[Any], str]] = {
    "time": lambda v: units.duration_us(v / 1e3),
    "count": _count,
    "ratio": lambda v: f"{v:.3g}",
    "fraction": units.percent,
}


def event_of(label: str, events: Mapping[str, str]) -> str:
    """The event a label counts: its own name when the profile does not say."""
    return str(events.get(label, label))


def is_time(label: str, events: Mapping[str, str]) -> bool:
    """Whether the label counts one of perf's clocks (ns of CPU time), however its event is spelled."""
    from layerperf.counters.catalog import counts_ns  # lazy: ctypes and libpfm4 only where counters are

    return counts_ns(event_of(label, events))


def _software(label: str, events: Mapping[str, str]) -> bool:
    """Whether the label counts a software event (the kernel's bookkeeping, not the work's)."""
    from layerperf.counters.catalog import is_software  # lazy: ctypes and libpfm4 only where counters are

    return is_software(event_of(label, events))


def _spec(key: str, labels: Sequence[str], events: Mapping[str, str]) -> CounterColumn | None:
    if key in METRICS:
        header, unit = METRICS[key]
        return CounterColumn(key, header, unit, f"{header}: derived from the layer's median counts")
    if key in labels:
        if is_time(key, events):
            return CounterColumn(key, f"{key} (CPU time)", "time",
                                 f"{key}: CPU time the layer's threads ran, median per run, in time units")
        return CounterColumn(key, f"{key} (count)", "count", f"{key}: events counted, median per run")
    for label in labels:
        if key == f"{label}_per_flop" and not _software(label, events):
            return CounterColumn(key, f"{label} per FLOP", "ratio", f"{label} counted per floating-point operation")
        if key == f"{label}_counted":
            return CounterColumn(key, f"{label} counted", "fraction",
                                 f"share of the layer's time {label} was counted (multiplexed event groups)")
    return None


def _some(rows: Sequence[Mapping[str, Any]], key: str) -> bool:
    return any(isinstance(v := r.get(key), int | float) and v != 0 for r in rows)


def counter_columns(keys: Sequence[str], labels: Sequence[str], events: Mapping[str, str],
                    rows: Sequence[Mapping[str, Any]]) -> list[CounterColumn]:
    """The counter and metric columns of ``keys`` the page shows (see the module's docstring), labels first,
    then their metrics and per-FLOP columns."""
    out = [s for k in keys if (s := _spec(k, labels, events)) is not None and _some(rows, k)]
    rank = {"time": 0, "count": 0, "ratio": 1, "fraction": 1}
    return sorted(out, key=lambda c: (c.key not in labels, rank[c.unit]))


def tracks(prof: Profile | None) -> list[dict[str, str]]:
    """The counter tracks of the timeline: each counter measured non-zero somewhere (per call, per run)."""
    if prof is None or prof.counters is None:
        return []
    events = prof.counters.events
    counted = {label for la in prof.layers for label, values in la.counters.items() if any(values or ())}
    return [{"label": label, "header": f"{label} ({'CPU time' if is_time(label, events) else 'count'})",
             "unit": "time" if is_time(label, events) else "count"} for label in events if label in counted]


def summary_facts(prof: Profile, sum_of_medians_us: float | None) -> list[tuple[str, str]]:
    """Per-run totals of each counter (the sum over layers of each layer's median per run) and the ratios
    they give: IPC and miss rates over the whole model, CPU time over the summed layer time (threads busy)."""
    if prof.counters is None:
        return []
    events = prof.counters.events
    totals: dict[str, float] = {}
    for label in events:
        values = [float(v) for la in prof.layers for v in [_median(la.counters.get(label))] if v is not None]
        if values:
            totals[label] = sum(values)
    from layerperf.counters import derived_metrics  # lazy: 0.3 s of start-up (ctypes, libpfm4) for a page

    out = []
    for label, total in totals.items():
        shown = FORMATS["time" if is_time(label, events) else "count"](total)
        extra = ""
        if is_time(label, events) and sum_of_medians_us:
            extra = f" ({total / 1e3 / sum_of_medians_us:.2f}x the summed layer time: threads busy on average)"
        out.append((f"{label} per run", f"{shown}{extra}"))
    for key, value in derived_metrics(totals, {k: v for k, v in events.items() if k in totals}).items():
        header, unit = METRICS.get(key, (key, "ratio"))
        out.append((f"{header}, whole model", FORMATS[unit](value)))
    return out


def _median(values: Sequence[float] | None) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
