"""What one profiling session measured, as a backend fills it: :class:`RawProfile`.

Raw measurements are kept flat — static per-layer facts in :class:`~layerperf.data.layer.Layer`, the
timeline of every measured run as :class:`~layerperf.data.layer.Span` records — with the spans' nesting
(which call ran inside which) derived once. Every other figure (median, p90, share, FLOP/s…) is computed
from it on demand (:mod:`layerperf.data.table`, :mod:`layerperf.data.calls`,
:mod:`layerperf.data.records`), never stored twice; :class:`~layerperf.data.profile.Profile` adds them
as methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from layerperf.data.layer import Layer, Run
from layerperf.data.memory_report import MemoryReport
from layerperf.data.metadata import Metadata
from layerperf.data.nesting import span_nesting
from layerperf.data.sections import CostNesting, CounterInfo, GraphSummary, Measurement


@dataclass(eq=False)
class RawProfile:
    """Everything one profiling session measured.

    ``latency_ns`` holds whole-model latencies measured with the profiler off, ``profiled_latency_ns``
    the wall time of the profiled runs they alternated with, and ``latency_cpu_ns`` /
    ``profiled_cpu_ns`` the calling thread's CPU time in both. The optional sections (graph, counters,
    memory, measurement) are None when the backend or the request did not produce them. ``sections``
    keeps JSON sections this version does not know (written by a newer one), saved back as they are.
    ``cost_nesting`` says how a layer's work relates to the layers inside it (:class:`CostNesting`).
    """

    metadata: Metadata
    layers: list[Layer]
    runs: list[Run]
    latency_ns: list[int] = field(default_factory=list)
    profiled_latency_ns: list[int] = field(default_factory=list)
    latency_cpu_ns: list[int] = field(default_factory=list)
    profiled_cpu_ns: list[int] = field(default_factory=list)
    graph: GraphSummary | None = None
    counters: CounterInfo | None = None
    memory: MemoryReport | None = None
    measurement: Measurement | None = None
    warnings: list[str] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    cost_nesting: CostNesting = CostNesting.INCLUSIVE

    # -- the spans' nesting ----------------------------------------------------------------------
    @cached_property
    def _spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every span of every run, flat in run order: (layer, inclusive ns, self ns, enclosing span)."""
        spans = [s for run in self.runs for s in run.spans]
        layer = np.fromiter((s.layer for s in spans), dtype=np.int64, count=len(spans))
        dur = np.fromiter((s.dur_ns for s in spans), dtype=np.int64, count=len(spans))
        parent, self_ns = span_nesting(self.layers, spans, dur)
        return layer, dur, self_ns, parent

    def _per_layer(self, values: np.ndarray) -> list[np.ndarray]:
        layer = self._spans[0]
        order = np.argsort(layer, kind="stable")
        bounds = np.searchsorted(layer[order], np.arange(len(self.layers) + 1))
        return [values[order[bounds[i]:bounds[i + 1]]] for i in range(len(self.layers))]

    @cached_property
    def _durations(self) -> list[np.ndarray]:
        return self._per_layer(self._spans[2])

    @cached_property
    def _inclusive(self) -> list[np.ndarray]:
        return self._per_layer(self._spans[1])

    def durations_ns(self, layer: int) -> np.ndarray:
        """Every measured self time of one layer, in ns, in run order: its duration, less the time
        of the body nodes that ran inside it for a control-flow layer."""
        return self._durations[layer]

    def inclusive_ns(self, layer: int) -> np.ndarray:
        """Every measured duration of one layer, in ns, in run order, body nodes included."""
        return self._inclusive[layer]

    @cached_property
    def parent_names(self) -> frozenset[str]:
        """Names of the control-flow layers whose body nodes are layers here."""
        return frozenset(layer.parent for layer in self.layers if layer.parent is not None)

    def in_totals(self) -> list[bool]:
        """Per layer, whether a total of work over the profile (FLOPs, int ops, bytes per run) adds its
        figures: see :meth:`CostNesting.counts_in_totals`."""
        parents = self.parent_names
        return [self.cost_nesting.counts_in_totals(layer.name in parents) for layer in self.layers]

    @property
    def span_self_ns(self) -> np.ndarray:
        """Self time of every span, flat in run then span order."""
        return self._spans[2]

    @property
    def span_parents(self) -> np.ndarray:
        """The span each span ran inside (a control-flow call), flat in run then span order; -1 for none."""
        return self._spans[3]

    @property
    def run_durations_ns(self) -> np.ndarray:
        return np.asarray([r.dur_ns for r in self.runs], dtype=np.int64)
