"""The Profile: one data model between the backends that fill it and everything that reads it.

A Profile is its :class:`~layerperf.data.raw.RawProfile` — the raw measurements, flat — with the views
derived from them as methods: the per-layer statistics and the layer table (:mod:`layerperf.data.table`),
the event table (:mod:`layerperf.data.calls`) and the flat, typed per-layer records a dataset stores
(:mod:`layerperf.data.records`). Saving and loading one is :func:`layerperf.save` / :func:`layerperf.load`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layerperf.data import records, table
from layerperf.data.calls import Calls, from_profile
from layerperf.data.codec import FORMAT_VERSION, sections_to_json
from layerperf.data.layer import Layer, Run, Span
from layerperf.data.raw import RawProfile
from layerperf.data.sections import CostNesting, CounterInfo, GraphSummary, Measurement

if TYPE_CHECKING:
    import pandas

__all__ = ["FORMAT_VERSION", "CostNesting", "CounterInfo", "GraphSummary", "Layer", "Measurement", "Profile",
           "Run", "Span"]


class Profile(RawProfile):
    """Everything one profiling session measured (see :class:`~layerperf.data.raw.RawProfile` for the fields),
    with its derived views. Two profiles are equal when their metadata, layers, runs, latencies and sections are."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RawProfile):
            return NotImplemented
        return (self.metadata, self.layers, self.runs, self.latency_ns, self.extra) == (
            other.metadata, other.layers, other.runs, other.latency_ns, sections_to_json(other))

    @property
    def extra(self) -> dict[str, Any]:
        """The optional sections as the JSON object trace.json keeps under ``extra`` (read-only: a new
        dict each time; set the typed fields to change them)."""
        return sections_to_json(self)

    def stats(self) -> list[table.LayerStats]:
        """Per-layer aggregates (calls, median, p90, share, FLOP/s...), in execution order."""
        return table.layer_stats(self)

    def table(self) -> list[dict[str, Any]]:
        """One row per layer with every column of ``layers.csv`` (None where unknown)."""
        return table.rows(self)

    def records(self) -> list[records.LayerRecord]:
        """One flat, typed row per layer, in execution order: every feature and measurement of it, with
        the run's backend, model and machine (the rows a dataset stores; see README "Per-layer records")."""
        return records.layer_records(self)

    def calls(self) -> Calls:
        """The event table of the profile: one row per measured call, with its start, thread and
        process, as every trace reader gives (what ``layerperf analyze`` and ``diff`` work on)."""
        return from_profile(self)

    def to_pandas(self) -> pandas.DataFrame:
        """The rows of :meth:`table` as a pandas DataFrame (needs the ``pandas`` extra)."""
        return table.to_pandas(self)
