"""The Profile: one data model between the backends that fill it and everything that reads it.

Raw measurements are kept flat — static per-layer facts in :class:`Layer`, the timeline of every
measured run as :class:`Span` records — and every derived figure (median, p90, share, FLOP/s…) is
computed from them on demand by :mod:`layerperf.data.figures`, never stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf.data.tensor import TensorInfo

if TYPE_CHECKING:
    import pandas

    from layerperf.analysis.memory.report import MemoryReport
    from layerperf.cost.core import Cost
    from layerperf.data.calls import Calls
    from layerperf.data.figures import LayerStats

FORMAT_VERSION = 1


@dataclass(slots=True)
class Layer:
    """One executed unit (an ONNX Runtime node after graph optimization), in execution order."""

    name: str
    op_type: str
    domain: str = ""
    provider: str = ""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    param_bytes: int = 0
    flops: int | None = None  # floating-point work; None: unknown op type or shapes, never a silent 0
    bytes_read: int | None = None
    bytes_written: int | None = None
    # label -> one count per measured pass (perf counters; filled by the counters feature)
    counters: dict[str, list[float]] = field(default_factory=dict)
    # runtime-reported memory figures for this node, e.g. ONNX Runtime's output_size, mem_arena_held
    memory: dict[str, int] = field(default_factory=dict)
    int_ops: int | None = None  # integer work (quantized kernels, integer tensors); None: unknown
    # FLOPs of the work on the stored shapes where a layout padded them (NCHWc channels); None when
    # nothing is padded, the work then being ``flops``
    padded_flops: int | None = None
    # the control-flow layer (Loop, If, Scan...) whose body this node is, by name; None at top level
    parent: str | None = None

    @property
    def cost(self) -> Cost:
        """The layer's work as the cost model's record (FLOPs, int ops, bytes; None where unknown)."""
        from layerperf.cost.core import Cost

        return Cost(self.flops, self.bytes_read, self.bytes_written, self.int_ops, self.padded_flops)

    @property
    def bytes(self) -> int | None:
        return self.cost.bytes

    @property
    def in_shapes(self) -> str:
        """The input shapes as the runtime stored and ran them: ``1x24x16x16;24x32x3x3``."""
        return ";".join(t.shape_str() for t in self.inputs)

    @property
    def out_shapes(self) -> str:
        return ";".join(t.shape_str() for t in self.outputs)

    @property
    def real_in_shapes(self) -> str:
        """The model's input shapes: where a layout padded a tensor, its real dims (``1x20x16x16``)."""
        return ";".join(t.real_shape_str() for t in self.inputs)

    @property
    def real_out_shapes(self) -> str:
        return ";".join(t.real_shape_str() for t in self.outputs)

    @property
    def padded(self) -> bool:
        """Whether any of its tensors is stored padded (NCHWc channels)."""
        return any(t.padded for t in (*self.inputs, *self.outputs))

    @property
    def flops_as_stored(self) -> int | None:
        """FLOPs of the work on the stored shapes, padding included: ``padded_flops`` or ``flops``."""
        return self.cost.flops_as_stored


@dataclass(frozen=True, slots=True)
class Span:
    """One execution of one layer: offsets are relative to the profile's time origin."""

    layer: int  # index into Profile.layers
    start_ns: int
    dur_ns: int
    tid: int


@dataclass(slots=True)
class Run:
    """One measured inference: its extent and the spans of the layers that ran in it."""

    start_ns: int
    dur_ns: int
    spans: list[Span] = field(default_factory=list)


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


@dataclass(eq=False)
class Profile:
    """Everything one profiling session measured.

    ``latency_ns`` holds whole-model latencies measured with the profiler off, ``profiled_latency_ns``
    the wall time of the profiled runs they alternated with, and ``latency_cpu_ns`` /
    ``profiled_cpu_ns`` the calling thread's CPU time in both. The optional sections (graph, counters,
    memory, measurement) are None when the backend or the request did not produce them. ``sections``
    keeps JSON sections this version does not know (written by a newer one), saved back as they are.
    """

    metadata: dict[str, Any]
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
    # How a layer's work relates to the layers inside it (Layer.parent): "inclusive", its FLOPs, int ops
    # and bytes hold its children's (an ONNX Loop's or If's are its body's), so totals count the layers
    # that are no parent; "self", its own work only (a torch module's: what it runs outside its child
    # modules), so totals count every layer.
    cost_nesting: str = "inclusive"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profile):
            return NotImplemented
        return (self.metadata, self.layers, self.runs, self.latency_ns, self.extra) == (
            other.metadata, other.layers, other.runs, other.latency_ns, other.extra)

    @property
    def extra(self) -> dict[str, Any]:
        """The optional sections as the JSON object trace.json keeps under ``extra`` (read-only: a new
        dict each time; set the typed fields to change them)."""
        from layerperf.data.codec import sections_to_json

        return sections_to_json(self)

    # -- derived views -------------------------------------------------------------------------
    @cached_property
    def _spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every span of every run, flat in run order: (layer, inclusive ns, self ns, enclosing span)."""
        from layerperf.data.nesting import span_nesting

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

    @property
    def span_self_ns(self) -> np.ndarray:
        """Self time of every span, flat in run then span order."""
        return self._spans[2]

    @property
    def span_parents(self) -> np.ndarray:
        """The span each span ran inside (a control-flow call), flat in run then span order; -1 for none."""
        return self._spans[3]

    def stats(self) -> list[LayerStats]:
        """Per-layer aggregates (calls, median, p90, share, FLOP/s...), in execution order."""
        from layerperf.data.figures import layer_stats

        return layer_stats(self)

    def table(self) -> list[dict[str, Any]]:
        """One row per layer with every column of ``layers.csv`` (None where unknown)."""
        from layerperf.data.figures import rows

        return rows(self)

    def calls(self) -> Calls:
        """The event table of the profile: one row per measured call, with its start, thread and
        process, as every trace reader gives (what ``layerperf analyze`` and ``diff`` work on)."""
        from layerperf.data.calls import from_profile

        return from_profile(self)

    def to_pandas(self) -> pandas.DataFrame:
        """The rows of :meth:`table` as a pandas DataFrame (needs the ``pandas`` extra)."""
        from layerperf.data.figures import to_pandas

        return to_pandas(self)

    @property
    def run_durations_ns(self) -> np.ndarray:
        return np.asarray([r.dur_ns for r in self.runs], dtype=np.int64)

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``trace.json`` and ``layers.csv`` (and the outputs of enabled features) atomically."""
        from layerperf.renderers.files import save

        return save(self, Path(out_dir))


def load(path: str | Path) -> Profile:
    """Read a layerperf ``trace.json`` (or the directory holding one) back into a Profile."""
    from layerperf.readers.layerperf import load_profile

    return load_profile(Path(path))
