"""The optional sections of a Profile, as values: the executed graph, how the perf counts and the timings
were taken, and how a layer's work relates to the layers inside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass(frozen=True, slots=True)
class GraphSummary:
    """The executed graph's inputs, outputs and initializer sizes (what memory analysis needs of it)."""

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    initializers: dict[str, int] = field(default_factory=dict)  # name -> bytes


@dataclass(frozen=True, slots=True)
class CounterInfo:
    """How the per-layer counts in ``Layer.counters`` were taken.

    ``events`` maps each label to the event string it counts; ``passes`` measured passes per event
    group; ``stepwise_median_ns`` is each layer's median time in the counting runs (less the cost of a
    boundary, ``call_overhead_ns``), for comparing them with the in-situ times; ``fraction_counted``
    (multiplexed groups) the share of its time each layer's event was counted, per label.
    ``Layer.counters`` are *self* counts, as the time column is self time: a layer's own, less those
    of the layers called directly inside it (a module's children). Where layers nest, ``inclusive``
    holds each layer's median count with its children's, per label (None where no layer ran inside
    another, the counts then being both; absent from profiles written before counts were made self,
    whose nested layers' counts include their children's). ``stepwise_median_ns`` is self time too.
    ``insitu_median_ns``: each layer's median in in-situ runs alternated with the timed passes (the
    stepwise executor's reference; empty where none ran); of ``timing_passes`` such pairs,
    ``passes_disturbed`` waited for a CPU or ran slowed and were set aside, unless too few were left
    (``disturbed_used``: every pair was used). ``insitu_counts``: each layer's median count per label in
    ``sampled_runs`` in-situ runs, sampled every ``sample_period_ns`` of each thread's CPU time and laid
    over the profiler's node intervals (software events only; None where not taken).
    ``insitu_rank_ceiling``: the rank correlation of those in-situ runs with themselves (even against
    odd runs, :func:`layerperf.data.fidelity.halves_rank_correlation`): the noise ceiling of the
    stepwise executor's rank correlation (None where too few runs); ``insitu_rank_ceiling_without_views``
    the same over the layers that are not view ops (None where the model has none, fewer than
    :data:`~layerperf.data.fidelity.MIN_RANKED` others, or too few runs).
    """

    events: dict[str, str]
    passes: int
    multiplex: bool = False
    schedule: list[Any] = field(default_factory=list)
    calibration: dict[str, Any] = field(default_factory=dict)
    call_overhead_ns: float | None = None
    stepwise_median_ns: list[float] = field(default_factory=list)
    fraction_counted: dict[str, list[float]] | None = None
    inclusive: dict[str, list[float]] | None = None
    insitu_median_ns: list[float] = field(default_factory=list)
    timing_passes: int | None = None
    passes_disturbed: int | None = None
    disturbed_used: bool = False
    insitu_counts: dict[str, list[float]] | None = None
    sample_period_ns: int | None = None
    sampled_runs: int | None = None
    insitu_rank_ceiling: float | None = None
    insitu_rank_ceiling_without_views: float | None = None


@dataclass(frozen=True, slots=True)
class Measurement:
    """How the timings were taken: latency interleaved or not, threads really used, the inputs fed."""

    latency: str = "off"  # "interleaved": plain runs alternating with the profiled ones; "off"
    block_runs: int | None = None
    spinning_stopped_between_runs: bool = False
    intra_op_threads: int | None = None
    intra_op_threads_source: str | None = None
    pool_workers_seen: int | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)  # name, shape, dtype


class CostNesting(str, Enum):
    """How a layer's work (FLOPs, int ops, bytes) relates to the layers that ran inside it (``Layer.parent``).

    Consumers ask it rather than compare: :meth:`counts_in_totals` says which layers a total adds,
    :attr:`rated_over_whole_call` which time a layer's FLOP/s and bandwidth are over.
    """

    # a parent's work holds its children's (an ONNX Loop's or If's is its body's)
    INCLUSIVE = "inclusive"
    # its own work only (a torch module's: what it runs outside its child modules)
    SELF = "self"

    def counts_in_totals(self, is_parent: bool) -> bool:
        """Whether a total over the profile adds a layer's work: every layer's where each is its own, only
        the layers that are no parent where a parent's holds its children's (counted once)."""
        return self is CostNesting.SELF or not is_parent

    @property
    def rated_over_whole_call(self) -> bool:
        """Whether a layer's rates are over its whole duration, children included (its work holds
        theirs), rather than over its self time (its work is its own)."""
        return self is CostNesting.INCLUSIVE
