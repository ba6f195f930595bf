"""The memory report in the terminal: a few summary lines and the tensors alive at the peak."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from layerperf import units
from layerperf.memory.report import MemoryReport
from layerperf.renderers import terminal as render


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
    }


def summary_lines(rep: MemoryReport) -> list[str]:
    b = units.binary
    lines = []
    if rep.peak_index >= 0:
        node = rep.nodes[rep.peak_index]
        lines.append(f"peak live tensors: {b(rep.peak_bytes)} while node {rep.peak_index} of {len(rep.nodes)} "
                     f"runs: {rep.peak_node} ({node.op_type})")
    source = {"arena growth": "ONNX Runtime's arena growth over a fresh session's first runs",
              "RSS growth": "resident memory growth over a fresh session's first runs"}
    allocated = (f"{b(rep.max_allocated_bytes)} ({source.get(rep.max_allocated_source or '', '')})"
                 if rep.max_allocated_bytes is not None else "? (not measured)")
    lines.append(f"max used {b(rep.max_used_bytes)}; max allocated {allocated}")
    ratio = rep.simulated_arena_bytes / rep.peak_bytes if rep.peak_bytes else 1.0
    lines.append(f"simulated best-fit arena: {b(rep.simulated_arena_bytes)} (x{ratio:.2f} the peak); "
                 f"initializers {b(rep.initializer_bytes)}, counted apart")
    rt = rep.runtime
    if rt and rt.rss_hwm_bytes is not None:
        lines.append(f"resident memory, sampled every {rt.sample_rate} node(s) of {len(rt.arena_runs)} runs: "
                     f"baseline {b(rt.rss_baseline_bytes)}, high-water {b(rt.rss_hwm_bytes)} "
                     f"(+{b(rt.rss_growth_bytes)})")
    if rep.hint:
        lines.append(f"[yellow]hint:[/] {rep.hint}")
    lines += [f"[yellow]warning:[/] {w}" for w in rep.warnings]
    return lines


PEAK_COLUMNS = (
    render.Column("name", "tensor at the peak", str, "left"),
    render.Column("bytes", "bytes", units.binary),
    render.Column("share", "of peak", units.percent),
    render.Column("producer", "produced by", str, "left"),
    render.Column("last_consumer", "last used by", str, "left"),
    render.Column("shares", "stored with", str, "left"),
)


def peak_table(rep: MemoryReport, top: int | None) -> Table:
    rows = []
    for entry in rep.peak_entries(top):
        others = entry["tensors"][1:]
        rows.append({**entry, "share": entry["bytes"] / rep.peak_bytes if rep.peak_bytes else None,
                     "shares": ", ".join(others) if others else "-"})
    total = len(rep.tensors_at_peak())
    shown = f"top {len(rows)} of {total}" if len(rows) < total else f"all {total}"
    return render.table(rows, PEAK_COLUMNS, title=f"{shown} tensors alive at the peak, largest first")


def print_report(rep: MemoryReport, top: int | None = 10) -> None:
    con = render.console()
    con.print(peak_table(rep, top))
    for line in summary_lines(rep):
        con.print(line, highlight=False)
