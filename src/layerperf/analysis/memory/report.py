"""The memory report of a Profile: peak live bytes and where, what was allocated, and why they differ.

"max used" is the live-tensor peak of the timeline; "max allocated" is what the runtime took for
running: the peak of its allocator's events over a pass where a backend records them (PyTorch,
:mod:`layerperf.analysis.memory.allocations`), its arena's growth over a fresh session's first runs, or, where
neither exists, the growth of the process's resident memory. A wide gap between them earns a hint.
"""

from __future__ import annotations

from dataclasses import replace

from layerperf.analysis.memory import live as timeline
from layerperf.analysis.memory import placement as allocator
from layerperf.data.memory_report import (
    Allocations,
    ArenaRun,
    MemoryReport,
    NodeMemory,
    PlacedBlock,
    RuntimeMemory,
)
from layerperf.data.profile import Profile
from layerperf.util import units

HINT_RATIO = 1.5  # allocated / used beyond which the gap is worth a hint...
HINT_MIN_BYTES = 1 << 20  # ...when it is also this large


def workspace_bytes(run: ArenaRun) -> list[int | None]:
    """Per node, bytes the arena's peak rose above what stayed in use, where the node raised the peak."""
    out: list[int | None] = []
    prev_peak: int | None = None
    for in_use, peak in zip(run.in_use_bytes, run.peak_bytes, strict=True):
        raised = in_use is not None and peak is not None and prev_peak is not None and peak > prev_peak
        out.append(max(0, peak - in_use) if raised and peak is not None and in_use is not None else None)
        prev_peak = peak if peak is not None else prev_peak
    return out


def _max_allocated(runtime: RuntimeMemory | None,
                   allocations: Allocations | None = None) -> tuple[int | None, str | None]:
    if allocations is not None:
        return allocations.peak_live_bytes, "allocator peak"
    if runtime is None:
        return None, None
    if runtime.arena_growth_bytes is not None:
        return runtime.arena_growth_bytes, "arena growth"
    if runtime.rss_growth_bytes is not None:
        return runtime.rss_growth_bytes, "RSS growth"
    return None, None


def hint(used: int, allocated: int | None, source: str | None, arena_bytes: int) -> str | None:
    """A line on over-allocation or fragmentation when "max allocated" is far above "max used"."""
    if allocated is not None and allocated > HINT_RATIO * used and allocated - used >= HINT_MIN_BYTES:
        ratio = f"x{allocated / max(used, 1):.1f}"
        if source == "arena growth":
            return (f"the arena grew {units.binary(allocated)} for {units.binary(used)} of live tensors ({ratio}): "
                    "the first run allocates tensor by tensor, the arena extends in power-of-two steps and "
                    "the planned memory pattern is allocated beside them; SessionOptions.enable_mem_pattern"
                    "=False or enable_cpu_mem_arena=False trade speed for a smaller footprint")
        if source == "allocator peak":
            return (f"the allocator's live bytes peaked at {units.binary(allocated)} for {units.binary(used)} of "
                    f"live tensors between layers ({ratio}): temporaries inside modules (their own ops' "
                    "intermediate results, workspace) that no layer's inputs or outputs show; the modules "
                    "table says which")
        return (f"resident memory grew {units.binary(allocated)} for {units.binary(used)} of live tensors "
                f"({ratio}): allocator caching or fragmentation, or buffers that are not tensors "
                "(kernel workspace, per-thread scratch)")
    if used and arena_bytes > HINT_RATIO * used and arena_bytes - used >= HINT_MIN_BYTES:
        return (f"a best-fit plan needs {units.binary(arena_bytes)} for a {units.binary(used)} peak: lifetimes "
                "interleave so that freed gaps are too small for later tensors (fragmentation)")
    return None


def _nodes(profile: Profile, tl: timeline.Timeline, workspace: list[int | None]) -> tuple[NodeMemory, ...]:
    return tuple(
        NodeMemory(name=layer.name, op_type=layer.op_type, output_bytes=sum(t.nbytes or 0 for t in layer.outputs),
                   param_bytes=layer.param_bytes, live_bytes=tl.live_bytes[k], workspace_bytes=workspace[k],
                   arena=layer.memory_figures)
        for k, layer in enumerate(profile.layers))


def analyze_memory(profile: Profile, runtime: RuntimeMemory | None = None, *, inplace: bool = True) -> MemoryReport:
    """The memory report of ``profile``, with what a fresh session used (``runtime``) when measured."""
    tl = timeline.build(profile, inplace=inplace)
    placement = allocator.place(tl.blocks)
    blocks = tuple(PlacedBlock(b.tensors, b.nbytes, b.first, b.last, b.kind, off)
                   for b, off in zip(tl.blocks, placement.offsets, strict=True))
    cold = runtime.arena_runs[0] if runtime and runtime.arena_runs else None
    workspace = workspace_bytes(cold) if cold and len(cold.in_use_bytes) == len(profile.layers) else []
    workspace += [None] * (len(profile.layers) - len(workspace))
    allocated, source = _max_allocated(runtime)
    warnings = []
    if profile.layers and not tl.blocks:
        warnings.append("the profile names no tensors, so live bytes are unknown (reported as 0)")
    if tl.unknown_size:
        warnings.append(f"size unknown (counted as 0) for {len(tl.unknown_size)} tensors, e.g. {tl.unknown_size[0]}")
    peak = tl.peak_index
    return MemoryReport(
        peak_bytes=tl.peak_bytes, peak_index=peak, peak_node=tl.nodes[peak] if peak >= 0 else "",
        max_allocated_bytes=allocated, max_allocated_source=source, simulated_arena_bytes=placement.arena_bytes,
        initializer_bytes=tl.initializer_bytes, inplace=inplace, nodes=_nodes(profile, tl, workspace),
        blocks=blocks, runtime=runtime, hint=hint(tl.peak_bytes, allocated, source, placement.arena_bytes),
        warnings=tuple(warnings))


def with_allocations(rep: MemoryReport, allocations: Allocations) -> MemoryReport:
    """``rep`` with a backend's allocator events: they become its "max allocated" (and its hint)."""
    allocated, source = _max_allocated(rep.runtime, allocations)
    return replace(rep, allocations=allocations, max_allocated_bytes=allocated, max_allocated_source=source,
                   hint=hint(rep.peak_bytes, allocated, source, rep.simulated_arena_bytes),
                   warnings=(*rep.warnings, *allocations.warnings))


def memory_report(profile: Profile) -> MemoryReport:
    """The memory report saved in ``profile`` (by ``memory=True``), or one computed from it now."""
    return profile.memory if profile.memory is not None else analyze_memory(profile)
