"""The view of ``analyze``: a trace's ops aggregated, filtered and ranked, or its GPU kernels.

Columns are MegEngine profile_analyze's, in its order, self time being the aggregate; the JSON
document is the rows array (CSV the same rows under the same keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from layerperf.analysis import aggregate as analysis
from layerperf.analysis import gpu_kernels as kernels
from layerperf.analysis.gpu import source
from layerperf.calibration.device_peaks import trace_device, unrated
from layerperf.calibration.peaks import Peaks
from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.data.sketch import ALPHA, EXACT_MAX
from layerperf.errors import InputError
from layerperf.readers.dropped import warnings
from layerperf.renderers.view import KEEP, LOW, Column, Note, Section, View, for_people, notes
from layerperf.renderers.views import peak
from layerperf.renderers.views.columns import (
    LAYER_COLUMNS,
    NAME_MIN,
    counter_columns,
    name_column,
    ranked_by,
    text,
    type_repeats_name,
    with_int_columns,
)
from layerperf.util import units

if TYPE_CHECKING:
    pass

DEFAULT_TOP = 20  # rows people see when --top is not given
# the layer table's columns, self time being analyze's own: the group's calls combined, not one layer's median
ANALYZE_COLUMNS: tuple[Column, ...] = (replace(LAYER_COLUMNS[0], key=analysis.PUBLISHED[analysis.SELF_US]),
                                       *LAYER_COLUMNS[1:])
INCLUSIVE = Column("incl_us", "inclusive", units.duration_us)
DEVICE = Column("device_us", "device self", units.duration_us, priority=1)  # kernels the op launched itself
DEVICE_INCL = Column("device_incl_us", "device incl", units.duration_us)  # ... or any op nested in it
RATE_TIME = text("rate_time", "FLOPS over", priority=4)  # "device" or "cpu" (self time)
KERNEL_COLUMNS: tuple[Column, ...] = (
    Column("total_us", "device time", units.duration_us, priority=KEEP),
    Column("share", "share", units.percent, priority=1),
    name_column("name", "kernel"),
    text("kind", "kind", priority=3),
    text("device", "device", priority=4),
    Column("calls", "calls"),
    Column("mean_us", "mean", units.duration_us),
    Column("median_us", "median", units.duration_us),
    Column("min_us", "min", units.duration_us, priority=3),
    Column("max_us", "max", units.duration_us),
    Column("stddev_us", "stddev", units.duration_us, priority=3),
    Column("launcher_share", "of launchers' device time", units.percent, priority=3),
    text("launched_by", "launched by (calls)", priority=LOW, min_width=16),
)
GROUPS = {"name": "ops", "type": "op types", "provider": "providers", "shape": "op type+shape groups"}


def default_top(top: int | None, fmt: str) -> int:
    """Rows to keep: what -t/--top says; else 20 for people (table, markdown) and all (0) for programs,
    so a pipe never loses rows it was not asked to drop."""
    if top is not None:
        return top
    return DEFAULT_TOP if for_people(fmt) else 0


def _calls(table: Calls | Folded) -> int:
    return table.calls if isinstance(table, Folded) else len(table)


def _nested(table: Calls | Folded) -> bool:
    if isinstance(table, Folded):
        return table.nested
    return bool(len(table)) and not bool((table.incl_ns == table.dur_ns).all())


def _counter_labels(table: Calls | Folded) -> list[str]:
    return list(table.counter_labels) if isinstance(table, Folded) else list(table.counters)


def _columns(table: Calls | Folded, result: Calls, ranked: str, by: str) -> list[Column]:
    columns = list(ANALYZE_COLUMNS)
    if by == "shape":  # the rows of one op type tell apart by their shapes alone: never left out
        columns = [replace(c, priority=KEEP, min_width=NAME_MIN) if c.key == "in_shapes" else c for c in columns]
    if by in ("shape", "type"):  # the type is half the row's identity (a group of names reads "(2 names)")
        columns = [replace(c, priority=KEEP) if c.key == "op_type" else c for c in columns]
    if bool(np.nansum(result.int_ops) > 0):  # integer work is shown only where there is some
        columns = with_int_columns(columns)
    if _nested(table):
        columns.insert(3, INCLUSIVE)
    if result.has_device:
        columns[3:3] = [DEVICE, DEVICE_INCL]
        columns.insert(columns.index(next(c for c in columns if c.key == "flops_per_s")) + 1, RATE_TIME)
    if by == "name" and type_repeats_name(result.labels("name").tolist(), result.labels("op_type").tolist()):
        columns = [c for c in columns if c.key != "op_type"]  # a PyTorch trace's type is its op's name: said once
    counters = counter_columns(_counter_labels(table), table.meta.get("counter_events"))
    return ranked_by(columns + counters, analysis.PUBLISHED.get(ranked, ranked))


def _no_such_types(table: Calls | Folded, types: Sequence[str]) -> tuple[Note, ...]:
    """A hint naming the op types there are, where none asked for with --type is in the trace."""
    present = [t for t in analysis.grouped(table, "type", "sum").op_type.tolist() if t]
    if any(t in present for t in types):
        return ()  # they are there: the other filters left nothing
    asked = ", ".join(repr(t) for t in types)
    if not present:
        return notes([f"no op of type {asked}: this trace records no op types"], "hint")
    listed = ", ".join(sorted(present)[:12]) + (", ..." if len(present) > 12 else "")
    return notes([f"no op of type {asked} in this trace; its types: {listed}"], "hint")


def _ranked(table: Calls | Folded, how: str, order_by: str | None) -> str:
    """The key of the column the rows are ranked by."""
    return analysis.resolve_column(table, order_by or ("calls" if how == "count" else analysis.SELF_US))[0]


def _title(table: Calls | Folded, shown: int, total: int, *, by: str, how: str, order_by: str | None) -> str:
    meta = table.meta
    order = order_by or ("calls" if how == "count" else "self time")
    order = {"device": "device time"}.get(order, order)
    count = f"top {shown} of {total}" if shown < total else f"{total}"
    return f"{meta.get('source')} ({meta.get('format')}): {count} {GROUPS[by]} by {order}, {how} over calls"


def _notes(table: Calls | Folded, how: str = "sum") -> list[str]:
    meta = table.meta
    runs = meta.get("runs")
    lines = [f"{meta.get('events', 0)} events, {_calls(table)} op calls"
             + (f", {units.count(runs, 'run')}" if runs else "")
             + f"; total self time {units.duration_us(analysis.grand_total_ns(table) / 1e3)}"]
    if meta.get("empty"):  # a profile of no timed run says why
        lines.insert(0, f"empty profile: {meta['empty']}")
    if meta.get("device_unlinked"):
        lines.append(f"{meta['device_unlinked']} device activities linked to no op are rows of their own")
    if table.has_device:
        lines.append("device self = kernels, copies and sets the op launched itself; device incl = also those of "
                     "the ops nested in it; FLOPS and bandwidth are over device incl where an op has some "
                     "(FLOPS over: device), else over its CPU self time (cpu)")
    if table.has_outer if isinstance(table, Folded) else table.outer:
        lines.append("summed inclusive figures count a call nested in a call of its own group once")
    if meta.get("streamed"):
        lines.append("read as a stream in bounded memory: every figure exact, medians (and p90s) exact for groups of "
                     f"up to {EXACT_MAX} calls and within {ALPHA:.1%} beyond")
    lines.append("self time excludes nested events; cumulative = running share of total self time; "
                 "computation in FLOPs (floating point), int ops (integer); ? = unknown")
    if how != "sum":  # the shares are of time spent, whatever figure per call the rows show
        lines.append(f"self % and cumulative: each row's summed self time over the total, not its {how} per call")
    return lines


def analyze_view(table: Calls | Folded, *, by: str = "name", how: str = "sum", order_by: str | None = None,
                 top: int = 0, types: Sequence[str] = (), name: str | None = None, min_time_s: float | None = None,
                 peaks: Peaks | None | str = peak.AUTO) -> View:
    """``table``'s ops grouped ``by``, their calls combined ``how``, filtered, ranked by ``order_by``;
    the first ``top`` rows (all when 0). ``peaks``: what "% of peak" divides by (default: the calibration
    of the machine the trace names, else this machine's, when there is one; None: no such column)."""
    device_only = order_by is None and how != "count" and table.has_device and not analysis.grand_total_ns(table)
    if device_only:  # no CPU self time to rank by (device activities linked to no op): their device time
        order_by = "device"
    ranked = analysis.analyze(table, by=by, how=how, order_by=order_by, types=types, name=name,
                              min_time_s=min_time_s)
    result = analysis.top(ranked, top)
    device = trace_device(table.meta)  # a GPU trace's work is rated against its GPU, never this CPU
    why_not = unrated(table.meta)
    ref, peak_notes = peak.reference(table.meta.get("machine"), table.meta.get("threads"),
                                     None if why_not else peaks, device)
    if why_not:
        peak_notes.append(Note(why_not))
    rows = peak.with_pcts(analysis.rows(result), ref)
    peak_notes += peak.above_peak(rows, ref, f"over its calls ({how}) in {table.meta.get('source')}", "rows")
    hints = _no_such_types(table, types) if types and not len(ranked) else ()
    columns = _columns(table, result, _ranked(table, how, order_by), by)
    if ref is not None:  # % of peak, once this machine is calibrated
        columns = peak.with_column(columns)
    # no rows: the keys rows would have (whether device time was measured is the trace's, not the rows')
    keys = list(rows[0]) if rows else [*analysis.row_keys(result, has_device=table.has_device),
                                       *([peak.KEY] if ref is not None else [])]
    section = Section(columns=columns, rows=rows, keys=keys,
                      title=_title(table, len(result), len(ranked), by=by, how=how, order_by=order_by),
                      notes=(*notes(_notes(table, how)), *notes(warnings(table.meta), "warning"), *peak_notes, *hints,
                             *notes(["ranked by device time: the trace holds no CPU self time"]
                                    if device_only else [])))
    return View(sections=(section,), doc=rows)


def kernels_view(table: Calls | Folded, *, name: str | None = None, order_by: str | None = None, top: int = 0,
                 how: str = "sum") -> View:
    """The device activities of ``table`` (a GPU trace) by kernel name, ranked by ``order_by`` (when None,
    by the per-kernel figure ``how`` names: total, mean, median, max or min time, or calls); the first
    ``top`` rows (all when 0). InputError when the trace has no kernels."""

    meta = table.meta
    kernel_table = source.of(meta)
    if kernel_table is None:
        raise InputError(f"{meta.get('source')} has no GPU kernels to aggregate ({meta.get('format')} trace)",
                         hint="--aggregate-by kernel reads PyTorch GPU traces")
    rows = kernels.order(kernels.aggregate(kernel_table, name=name), order_by, how)
    shown = rows[:top] if top else rows
    total_us = source.total_ns(kernel_table) / 1e3
    ranked = order_by or {"sum": "device time", "count": "calls"}.get(how, f"{how} device time per call")
    title = (f"{meta.get('source')} ({meta.get('format')}): {len(shown)} of {len(rows)} kernels "
             f"by {ranked}")
    lines = [f"{len(kernel_table)} device activities, {units.duration_us(total_us)} of device time; share = of all "
             "device time; of launchers' device time = of all device time of the ops that launched the kernel"]
    ranked_key = kernels.ORDERS.get(order_by.lstrip("+-")) if order_by else kernels.BY_AGGREGATE[how]
    columns = ranked_by(KERNEL_COLUMNS, ranked_key)
    section = Section(columns=columns, rows=shown, keys=kernels.KERNEL_COLUMNS, title=title,
                      notes=(*notes(lines), *notes(warnings(meta), "warning")))
    return View(sections=(section,), doc=shown)
