"""The view of a memory report: the tensors alive at the peak, and a few summary lines; where the
backend recorded its allocator's events (PyTorch), the modules by bytes they allocated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.data.memory_report import Allocations, MemoryReport
from layerperf.renderers.view import KEEP, LOW, Column, Note, Section, View, for_people, notes
from layerperf.renderers.views.columns import TYPE_MIN, name_column, text
from layerperf.renderers.views.profile import wrote_lines
from layerperf.util import units

if TYPE_CHECKING:
    pass

DEFAULT_TOP = 10  # tensors at the peak people see when --top is not given
PEAK_COLUMNS = (
    name_column("name", "tensor at the peak"),
    Column("bytes", "bytes", units.binary, priority=KEEP),  # the ranking
    Column("share", "of peak", units.percent, priority=1),
    text("producer", "produced by", min_width=16),
    text("last_consumer", "last used by", priority=3, min_width=16),
    text("shares", "stored with", priority=LOW, min_width=16),
)
PEAK_KEYS = ("name", "bytes", "share", "kind", "producer", "last_consumer")  # CSV: no lists of names
MODULE_COLUMNS = (
    name_column("name", "module"),
    text("op_type", "type", priority=1, min_width=TYPE_MIN),
    Column("calls", "calls", priority=3),
    Column("self_allocated_bytes", "allocated (self)", units.binary, priority=KEEP),  # the ranking
    Column("self_freed_bytes", "freed (self)", units.binary),
    Column("allocated_bytes", "allocated (incl.)", units.binary, priority=3),
    Column("freed_bytes", "freed (incl.)", units.binary, priority=3),
    Column("peak_live_bytes", "peak live", units.binary),
    Column("peak_rise_bytes", "peak rise", units.binary),
)
MODULE_KEYS = tuple(c.key for c in MODULE_COLUMNS)
ALLOCATION_KEYS = ("device", "source", "dur_ns", "events", "allocated_bytes", "freed_bytes", "peak_live_bytes",
                   "peak_t_ns", "peak_layer", "peak_module", "retained_bytes", "unmatched_free_bytes")


def summary(rep: MemoryReport, top: int | None = 10) -> dict[str, Any]:
    """The headline figures as one JSON-ready object (what ``--format json`` prints); ``top`` tensors
    at the peak (all when None)."""
    rt = rep.runtime
    return {
        "peak_bytes": rep.peak_bytes, "peak_node": rep.peak_node, "peak_index": rep.peak_index,
        "max_used_bytes": rep.max_used_bytes, "max_allocated_bytes": rep.max_allocated_bytes,
        "max_allocated_source": rep.max_allocated_source, "simulated_arena_bytes": rep.simulated_arena_bytes,
        "initializer_bytes": rep.initializer_bytes, "nodes": len(rep.nodes), "inplace": rep.inplace,
        "arena_growth_bytes": rt.arena_growth_bytes if rt else None,
        "rss_baseline_bytes": rt.rss_baseline_bytes if rt else None,
        "rss_hwm_bytes": rt.rss_hwm_bytes if rt else None,
        "rss_growth_bytes": rt.rss_growth_bytes if rt else None,
        "sample_rate": rt.sample_rate if rt else 0,
        "hint": rep.hint, "warnings": list(rep.warnings),
        "tensors_at_peak": rep.peak_entries(top),
        "allocations": allocation_summary(rep, top) if rep.allocations else None,
    }


def module_rows(rep: MemoryReport, top: int | None = None) -> list[dict[str, Any]]:
    """The modules' allocator figures, most bytes allocated in their own code first (``top`` of them),
    then the model's own code outside every module."""
    allocs = rep.allocations
    if allocs is None:
        return []
    ranked = sorted(allocs.modules, key=lambda m: (-m.self_allocated_bytes, -m.peak_rise_bytes, m.layer))
    rows = [{**asdict(m), "op_type": rep.nodes[m.layer].op_type if 0 <= m.layer < len(rep.nodes) else ""}
            for m in ranked[:top]]
    return [*rows, {**asdict(allocs.outside), "op_type": "-"}]


def allocation_summary(rep: MemoryReport, top: int | None) -> dict[str, Any]:
    allocs = rep.allocations
    assert allocs is not None
    return {**{k: getattr(allocs, k) for k in ALLOCATION_KEYS}, "modules": module_rows(rep, top),
            "warnings": list(allocs.warnings)}


def allocation_lines(allocs: Allocations) -> list[str]:
    """Where the allocator's live bytes peaked, and what the pass allocated, freed and kept."""
    b = units.binary
    if allocs.peak_t_ns is None:
        return [f"allocator ({allocs.device}): no allocation in the pass ({allocs.source})"]
    at = allocs.live_bytes.index(allocs.peak_live_bytes) + 1
    return [
        f"allocator ({allocs.device}, {allocs.source}): peak {b(allocs.peak_live_bytes)} above the pass's start "
        f"at event {at} of {allocs.events}, while {allocs.peak_module} runs",
        f"the pass allocated {b(allocs.allocated_bytes)} and freed {b(allocs.freed_bytes)}; "
        f"{b(allocs.retained_bytes)} still held at its end (its outputs)"
        + (f"; {b(allocs.unmatched_free_bytes)} freed that was allocated before it"
           if allocs.unmatched_free_bytes else ""),
    ]


def module_section(rep: MemoryReport, top: int | None) -> Section:
    """The modules by bytes allocated in their own code, with the allocator's summary lines."""
    allocs = rep.allocations
    assert allocs is not None
    rows = module_rows(rep, top)
    total = len(allocs.modules)
    shown = f"top {len(rows) - 1} of {total}" if len(rows) - 1 < total else f"all {total}"
    return Section(columns=MODULE_COLUMNS, rows=rows, keys=MODULE_KEYS,
                   notes=notes(allocation_lines(allocs)),
                   title=f"{shown} modules by bytes allocated in their own code (allocator events), "
                         "then the model's code outside them")


def summary_lines(rep: MemoryReport) -> list[str]:
    """Where the peak is, max used against max allocated, the simulated arena, resident memory."""
    b = units.binary
    lines = []
    if rep.peak_index >= 0:
        node = rep.nodes[rep.peak_index]
        lines.append(f"peak live tensors: {b(rep.peak_bytes)} while node {rep.peak_index + 1} of {len(rep.nodes)} "
                     f"runs: {rep.peak_node} ({node.op_type})")
    source = {"allocator peak": "the allocator's live bytes at their peak over one pass, from its events",
              "arena growth": "ONNX Runtime's arena growth over a fresh session's first runs",
              "RSS growth": "resident memory growth over a fresh session's first runs"}
    allocated = (f"{b(rep.max_allocated_bytes)} ({source.get(rep.max_allocated_source or '', '')})"
                 if rep.max_allocated_bytes is not None else "? (not measured)")
    lines.append(f"max used {b(rep.max_used_bytes)}; max allocated {allocated}")
    ratio = rep.simulated_arena_bytes / rep.peak_bytes if rep.peak_bytes else 1.0
    lines.append(f"simulated best-fit arena: {b(rep.simulated_arena_bytes)} (x{ratio:.2f} the peak); "
                 f"initializers {b(rep.initializer_bytes)}, counted apart")
    rt = rep.runtime
    if rt and rt.rss_hwm_bytes is not None:
        runs = len(rt.arena_runs) or len({s.run for s in rt.rss_samples})  # a backend with no arena: its samples'
        lines.append(f"resident memory, sampled every {rt.sample_rate} node(s) of {units.count(runs, 'run')}: "
                     f"baseline {b(rt.rss_baseline_bytes)}, high-water {b(rt.rss_hwm_bytes)} "
                     f"(+{b(rt.rss_growth_bytes)})")
    return lines


def summary_notes(rep: MemoryReport) -> list[Note]:
    """:func:`summary_lines`, then the hint and the warnings."""
    return [*notes(summary_lines(rep)), *notes([rep.hint] if rep.hint else [], "hint"),
            *notes(rep.warnings, "warning")]


def peak_section(rep: MemoryReport, top: int | None) -> Section:
    """The ``top`` tensors alive at the peak (all when None), largest first, with the summary lines."""
    rows = []
    for entry in rep.peak_entries(top):
        others = entry["tensors"][1:]
        rows.append({**entry, "share": entry["bytes"] / rep.peak_bytes if rep.peak_bytes else None,
                     "shares": ", ".join(others) if others else "-"})
    total = len(rep.tensors_at_peak())
    shown = f"top {len(rows)} of {total}" if len(rows) < total else f"all {total}"
    return Section(columns=PEAK_COLUMNS, rows=rows, keys=PEAK_KEYS, notes=summary_notes(rep),
                   title=f"{shown} tensors alive at the peak, largest first")


def memory_view(rep: MemoryReport, *, fmt: str = "table", top: int | None = None, model: str = "model",
                written: Mapping[str, Path] | None = None) -> View:
    """The memory report: for people the ``top`` tensors at the peak (10 when None, all when 0), for
    programs all of them unless ``top`` says how many; the files written, if any, below."""
    written = written or {}
    people = for_people(fmt)
    shown = (DEFAULT_TOP if top is None else top or None) if people else top or None
    doc = {"model": model, **summary(rep, shown), "files": {k: str(v) for k, v in written.items()}}
    sections = (peak_section(rep, shown), *((module_section(rep, shown),) if rep.allocations else ()))
    return View(sections=sections, doc=doc, status=wrote_lines(written))
