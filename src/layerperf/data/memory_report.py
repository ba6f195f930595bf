"""The memory report a Profile keeps, as values: the live-tensor buffers and where the peak falls, what
the runtime allocated (its arena node by node, resident memory, a backend's allocator events per
module). Computed by :mod:`layerperf.analysis.memory`; filled by the backends and collectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from layerperf.errors import InputError

INPUT, ACTIVATION, OUTPUT, CODE = "input", "activation", "output", "code"


@dataclass(frozen=True, slots=True)
class Block:
    """One buffer: a tensor, or several tensors stored in it (views, in-place outputs)."""

    tensors: tuple[str, ...]  # the first allocated the buffer
    nbytes: int
    first: int  # index of the node that allocates it; 0 for graph inputs
    last: int  # index of the last node that needs it; the last node for graph outputs
    kind: str  # "input", "activation", "output" or "code" (made between layers)

    @property
    def name(self) -> str:
        return self.tensors[0]

    def live_at(self, index: int) -> bool:
        return self.first <= index <= self.last


OUTSIDE = -1  # the layer index of the model's own code, outside every module
OUTSIDE_NAME = "(outside modules)"


@dataclass(frozen=True, slots=True)
class ModuleAllocations:
    """One module's allocator figures, summed over its calls in the pass."""

    layer: int  # index in the Profile's layers; OUTSIDE for the model's own code
    name: str
    calls: int
    self_allocated_bytes: int  # allocated while it was the innermost module running
    self_freed_bytes: int
    self_allocations: int  # how many allocations that was
    allocated_bytes: int  # allocated while it ran, its children included
    freed_bytes: int
    peak_live_bytes: int  # the most live bytes (since the pass began) at any moment while it ran
    peak_rise_bytes: int  # the most live bytes rose above their level when a call of it began


@dataclass(frozen=True, slots=True)
class Allocations:
    """One pass's allocator events, attributed to modules; ``timeline`` has one point per event."""

    device: str  # "cpu", "cuda:0"
    source: str  # what recorded the events
    dur_ns: int  # the pass, start to end
    events: int
    allocated_bytes: int
    freed_bytes: int
    peak_live_bytes: int
    peak_t_ns: int | None  # from the pass's start; None when nothing was allocated
    peak_layer: int  # the innermost module running at the peak; OUTSIDE when none
    peak_module: str  # its name, OUTSIDE_NAME outside modules, "" when nothing was allocated
    retained_bytes: int  # allocated in the pass and not freed by its end (its outputs, caches)
    unmatched_free_bytes: int  # freed in the pass but allocated before it
    outside: ModuleAllocations
    modules: tuple[ModuleAllocations, ...]  # the modules that ran, in layer order
    # after each event, in time order: time from the pass's start, live bytes, innermost module's layer
    t_ns: tuple[int, ...] = ()
    live_bytes: tuple[int, ...] = ()
    layer: tuple[int, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def module(self, layer: int) -> ModuleAllocations | None:
        """The figures of layer ``layer`` (OUTSIDE: the model's own code), None when it did not run."""
        if layer == OUTSIDE:
            return self.outside
        return next((m for m in self.modules if m.layer == layer), None)

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("modules", "outside", "t_ns", "live_bytes",
                                                                 "layer", "warnings")}
        d.update(outside=asdict(self.outside), modules=[asdict(m) for m in self.modules],
                 timeline={"t_ns": list(self.t_ns), "live_bytes": list(self.live_bytes), "layer": list(self.layer)},
                 warnings=list(self.warnings))
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Allocations:
        """As :meth:`to_json` wrote it; KeyError/TypeError/ValueError when damaged (the report says so)."""
        tl = d.get("timeline", {})
        t_ns, live, layer = (tuple(int(x) for x in tl.get(k, ())) for k in ("t_ns", "live_bytes", "layer"))
        if not len(t_ns) == len(live) == len(layer):
            raise ValueError("the allocation timeline's columns differ in length")
        return cls(
            device=str(d["device"]), source=str(d["source"]), dur_ns=int(d["dur_ns"]), events=int(d["events"]),
            allocated_bytes=int(d["allocated_bytes"]), freed_bytes=int(d["freed_bytes"]),
            peak_live_bytes=int(d["peak_live_bytes"]),
            peak_t_ns=None if d.get("peak_t_ns") is None else int(d["peak_t_ns"]),
            peak_layer=int(d["peak_layer"]), peak_module=str(d["peak_module"]),
            retained_bytes=int(d["retained_bytes"]), unmatched_free_bytes=int(d["unmatched_free_bytes"]),
            outside=ModuleAllocations(**d["outside"]), modules=tuple(ModuleAllocations(**m) for m in d["modules"]),
            t_ns=t_ns, live_bytes=live, layer=layer, warnings=tuple(str(w) for w in d.get("warnings", ())))


@dataclass(frozen=True, slots=True)
class RssSample:
    """Resident bytes at the end of one node's window, and the high-water mark until then."""

    run: int
    node: int  # index into the profile's layers
    t_ns: int  # since the start of its run
    rss_bytes: int
    hwm_bytes: int


OptInts = tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class ArenaRun:
    """The runtime allocator's figures after each node of one run."""

    in_use_bytes: OptInts
    peak_bytes: OptInts
    held_bytes: OptInts


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """The first runs of a fresh session: arena figures per node, and resident memory samples."""

    arena_runs: tuple[ArenaRun, ...] = ()
    arena_in_use_before_bytes: int | None = None  # before the first node of the first run
    arena_held_before_bytes: int | None = None
    sample_rate: int = 0
    rss_baseline_bytes: int | None = None  # just before the first run
    rss_hwm_bytes: int | None = None  # the largest reading over the runs, thinned-out ones included
    rss_samples: tuple[RssSample, ...] = ()

    @property
    def arena_growth_bytes(self) -> int | None:
        """How much the arena grew over the runs: held at its largest minus held before."""
        held = [h for run in self.arena_runs for h in run.held_bytes if h is not None]
        if not held or self.arena_held_before_bytes is None:
            return None
        return max(held) - self.arena_held_before_bytes

    @property
    def rss_growth_bytes(self) -> int | None:
        if self.rss_hwm_bytes is None or self.rss_baseline_bytes is None:
            return None
        return self.rss_hwm_bytes - self.rss_baseline_bytes

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rss_samples"] = [asdict(s) for s in self.rss_samples]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RuntimeMemory:
        def ints(xs: Any) -> OptInts:
            return tuple(None if x is None else int(x) for x in xs)

        return cls(
            arena_runs=tuple(ArenaRun(ints(r["in_use_bytes"]), ints(r["peak_bytes"]), ints(r["held_bytes"]))
                             for r in d.get("arena_runs", ())),
            arena_in_use_before_bytes=d.get("arena_in_use_before_bytes"),
            arena_held_before_bytes=d.get("arena_held_before_bytes"),
            sample_rate=int(d.get("sample_rate", 0)),
            rss_baseline_bytes=d.get("rss_baseline_bytes"), rss_hwm_bytes=d.get("rss_hwm_bytes"),
            rss_samples=tuple(RssSample(**s) for s in d.get("rss_samples", ())),
        )


REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """One node's memory: what it writes, its weights, and what it needed besides."""

    name: str
    op_type: str
    output_bytes: int
    param_bytes: int
    live_bytes: int  # live tensor bytes while it runs
    # temporary bytes the arena held above what stayed in use after the node, where visible: in the
    # first run, when the node raised the arena's peak; None where the runtime does not show them
    workspace_bytes: int | None = None
    arena: dict[str, int] = field(default_factory=dict)  # the runtime's own figures, last measured run


@dataclass(frozen=True, slots=True)
class PlacedBlock(Block):
    """A buffer of the timeline with the offset the simulated allocator gives it."""

    offset: int


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """Everything the memory profiler found; ``to_json()`` is what trace.json keeps of it."""

    peak_bytes: int
    peak_index: int
    peak_node: str
    max_allocated_bytes: int | None
    max_allocated_source: str | None  # "allocator peak", "arena growth", "RSS growth" or None
    simulated_arena_bytes: int
    initializer_bytes: int
    inplace: bool
    nodes: tuple[NodeMemory, ...]
    blocks: tuple[PlacedBlock, ...]
    runtime: RuntimeMemory | None = None
    hint: str | None = None
    warnings: tuple[str, ...] = ()
    allocations: Allocations | None = None  # the allocator's events per module, where a backend records them

    @property
    def max_used_bytes(self) -> int:
        return self.peak_bytes

    def tensors_at_peak(self) -> list[PlacedBlock]:
        """Buffers live at the peak, largest first."""
        live = [b for b in self.blocks if b.live_at(self.peak_index) and b.nbytes]
        return sorted(live, key=lambda b: (-b.nbytes, b.name))

    def node_name(self, index: int) -> str:
        return self.nodes[index].name if 0 <= index < len(self.nodes) else ""

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("nodes", "blocks", "runtime", "warnings",
                                                                            "allocations")}
        d.update(version=REPORT_VERSION, max_used_bytes=self.peak_bytes, warnings=list(self.warnings),
                 tensors_at_peak=self.peak_entries(),
                 nodes=[asdict(n) for n in self.nodes],
                 blocks=[{**asdict(b), "tensors": list(b.tensors)} for b in self.blocks],
                 runtime=self.runtime.to_json() if self.runtime else None,
                 allocations=self.allocations.to_json() if self.allocations else None)
        return d

    def peak_entries(self, top: int | None = None) -> list[dict[str, Any]]:
        """The buffers live at the peak as JSON objects: name, bytes, tensors, kind, producer, last consumer."""
        out = []
        for b in self.tensors_at_peak()[:top]:
            producer = ("(graph input)" if b.kind == INPUT else
                        f"(code before {self.node_name(b.first)})" if b.kind == CODE else
                        self.node_name(b.first))
            out.append({"name": b.name, "bytes": b.nbytes, "tensors": list(b.tensors), "kind": b.kind,
                        "producer": producer, "last_consumer": self.node_name(b.last)})
        return out

    @classmethod
    def from_json(cls, d: Any) -> MemoryReport:
        """The report as trace.json keeps it; InputError when it is damaged."""
        try:
            return cls(
                peak_bytes=int(d["peak_bytes"]), peak_index=int(d["peak_index"]), peak_node=str(d["peak_node"]),
                max_allocated_bytes=d.get("max_allocated_bytes"), max_allocated_source=d.get("max_allocated_source"),
                simulated_arena_bytes=int(d["simulated_arena_bytes"]),
                initializer_bytes=int(d.get("initializer_bytes", 0)), inplace=bool(d.get("inplace", True)),
                nodes=tuple(NodeMemory(**n) for n in d["nodes"]),
                blocks=tuple(PlacedBlock(**{**b, "tensors": tuple(b["tensors"])}) for b in d["blocks"]),
                runtime=RuntimeMemory.from_json(d["runtime"]) if d.get("runtime") else None,
                hint=d.get("hint"), warnings=tuple(d.get("warnings", ())),
                allocations=Allocations.from_json(d["allocations"]) if d.get("allocations") else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"the profile's memory section is damaged ({type(exc).__name__}: {exc})") from None
