"""Per-layer perf counts as the collector driver took them: what a counting process hands back (as
JSON), and what fills ``Layer.counters`` and the Profile's :class:`~layerperf.data.profile.CounterInfo`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.analysis.memory.live import views
from layerperf.collectors.disturbance import kept
from layerperf.collectors.perf import CounterRequest
from layerperf.data.fidelity import MIN_RANKED, chosen, halves_rank_correlation
from layerperf.data.profile import CounterInfo, Layer
from layerperf.errors import LayerperfError

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class CounterResult:
    """Self counts by label, ``[layer][pass]`` (a layer's own, less what the layers called directly
    inside it counted; ``inclusive`` with theirs), with an empty boundary's own counts subtracted; the share of
    its time each layer's group was counted, ``[layer][pass]``; what an empty boundary counts
    (``calibration``, by label) and takes (``call_overhead_ns``); each layer's call durations in
    passes timed without counters (``node_ns``); and the event groups counted apart (``schedule``).
    Where in-situ runs alternated with the timed passes: each layer's time in them (``insitu_ns``,
    ``[layer][run]``, NaN where a run lacks the layer) and whether each pair was disturbed."""

    counts: dict[str, list[list[float]]]
    fraction: dict[str, list[list[float]]]
    calibration: dict[str, float]
    call_overhead_ns: float
    node_ns: list[list[int]]
    schedule: list[list[str]]
    inclusive: dict[str, list[list[float]]] | None = None  # by label, [layer][pass], children's included
    disturbed: list[bool] | None = None  # per timed pass: it or the in-situ run before it waited or ran slowed
    insitu_ns: list[list[float]] | None = None  # [layer][run], the in-situ runs alternating with the timed passes
    insitu_counts: dict[str, list[list[float]]] | None = None  # by label, [layer][run]: sampled in situ
    sample_period_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CounterResult:
        try:
            return cls(counts=d["counts"], fraction=d["fraction"], calibration=d["calibration"],
                       call_overhead_ns=float(d["call_overhead_ns"]), node_ns=d["node_ns"], schedule=d["schedule"],
                       inclusive=d.get("inclusive"), disturbed=d.get("disturbed"), insitu_ns=d.get("insitu_ns"),
                       insitu_counts=d.get("insitu_counts"), sample_period_ns=d.get("sample_period_ns"))
        except (KeyError, TypeError, ValueError) as exc:
            raise LayerperfError(f"the counting result is incomplete ({type(exc).__name__}: {exc})") from None

    def apply(self, layers: Sequence[Layer], request: CounterRequest) -> CounterInfo:
        """Put each layer's per-pass counts on it (``layers``: the ones counted, in the same order); return
        how they were counted."""
        for label, per_layer in self.counts.items():
            for layer, values in zip(layers, per_layer, strict=True):
                layer.counters[label] = values
        call_ns = self.call_overhead_ns
        nests = self.inclusive is not None and not _same(self.inclusive, self.counts)
        inclusive = _medians(self.inclusive) if nests and self.inclusive is not None else None
        fractions = ({label: [float(np.mean(f)) for f in per_layer] for label, per_layer in self.fraction.items()}
                     if request.multiplex else None)
        use = kept(self.disturbed) if self.disturbed else None
        return CounterInfo(
            events=dict(zip(request.labels, request.events, strict=True)), passes=request.passes,
            multiplex=request.multiplex, schedule=self.schedule, calibration=self.calibration,
            call_overhead_ns=call_ns, stepwise_median_ns=[_less(chosen(t, use), call_ns) for t in self.node_ns],
            fraction_counted=fractions, inclusive=inclusive,
            insitu_median_ns=[_median(chosen(t, use)) for t in self.insitu_ns] if self.insitu_ns else [],
            timing_passes=len(self.disturbed) if self.disturbed is not None else None,
            passes_disturbed=sum(self.disturbed) if self.disturbed is not None else None,
            disturbed_used=use is not None and all(use) and any(self.disturbed or []),
            insitu_counts=_medians(self.insitu_counts) if self.insitu_counts else None,
            sample_period_ns=self.sample_period_ns,
            sampled_runs=len(next(iter(self.insitu_counts.values()))[0]) if self.insitu_counts else None,
            insitu_rank_ceiling=halves_rank_correlation(self.insitu_ns, use) if self.insitu_ns else None,
            insitu_rank_ceiling_without_views=self._ceiling_without_views(layers, use))

    def _ceiling_without_views(self, layers: Sequence[Layer], use: list[bool] | None) -> float | None:
        """The in-situ runs' rank correlation with themselves over the layers that are not view ops; None
        where none is a view (the figure is then ``insitu_rank_ceiling``), the others are fewer than
        :data:`~layerperf.data.fidelity.MIN_RANKED` or the runs too few."""
        mask = views(layers)
        if not self.insitu_ns or not any(mask) or len(mask) != len(self.insitu_ns) or \
                mask.count(False) < MIN_RANKED:
            return None
        return halves_rank_correlation([t for t, v in zip(self.insitu_ns, mask, strict=True) if not v], use)


def _same(a: dict[str, list[list[float]]], b: dict[str, list[list[float]]]) -> bool:
    """Whether two sets of counts are equal, an unknown (NaN) equal to an unknown."""
    if a.keys() != b.keys():
        return False
    return all(np.array_equal(np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64),
                              equal_nan=True) for k in a)


def _medians(by_label: dict[str, list[list[float]]]) -> dict[str, list[float]]:
    """Each label's median per layer over its passes (NaN for a layer with no known count)."""
    out = {}
    for label, per_layer in by_label.items():
        out[label] = [float(np.nanmedian(v)) if v and not all(math.isnan(x) for x in v) else math.nan
                      for v in per_layer]
    return out


def _median(values: list[float]) -> float:
    known_ = [v for v in values if not math.isnan(v)]
    return float(np.median(known_)) if known_ else math.nan


def _less(calls_ns: list[int], call_ns: float) -> float:
    """A layer's median call, less what an empty boundary takes; NaN (unknown) for a layer never timed."""
    return max(0.0, float(np.median(calls_ns)) - call_ns) if calls_ns else math.nan
